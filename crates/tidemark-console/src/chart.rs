//! A consumer's lag over time, drawn from its history: each commit's row
//! keeps the latest snapshot known when it was written, so the lag at that
//! moment is `latest - next + 1`; the last point is the lag now, as the
//! page's facts give it. Rows written before tidemark recorded the latest
//! snapshot (and events that are not commits) have no point.

use tidemark_core::Timestamp;
use tidemark_service::store::HistoryRecord;

use crate::format;

const WIDTH: f64 = 1000.0;
const HEIGHT: f64 = 200.0;
const LEFT: f64 = 60.0;
const RIGHT: f64 = WIDTH - 20.0;
const TOP: f64 = 15.0;
const BOTTOM: f64 = HEIGHT - 25.0;

/// Coordinates for `templates/console/consumer.html`; no points, no chart.
#[derive(Debug, Clone, Default)]
pub(super) struct LagChart {
    /// The polyline's `points`, oldest first.
    pub(super) points: String,
    pub(super) dots: Vec<Dot>,
    /// The highest lag drawn (the top of the axis).
    pub(super) top_label: String,
    pub(super) from_label: String,
    pub(super) to_label: String,
}

/// One moment on the chart.
#[derive(Debug, Clone)]
pub(super) struct Dot {
    pub(super) x: String,
    pub(super) y: String,
    pub(super) at: String,
    pub(super) lag: i64,
    /// `now` for the current lag, `commit` for a history row.
    pub(super) class: &'static str,
}

impl LagChart {
    pub(super) fn is_empty(&self) -> bool {
        self.dots.is_empty()
    }
}

/// The chart of `history` (newest first, as read) and the lag `now`.
pub(super) fn lag_chart(history: &[HistoryRecord], now: Option<(Timestamp, i64)>) -> LagChart {
    let mut moments: Vec<(Timestamp, i64, &'static str)> = history
        .iter()
        .rev()
        .filter_map(|h| {
            let lag = tidemark_core::state::lag(h.event.new_next?, h.event.latest_snapshot?)?;
            Some((h.at, lag, "commit"))
        })
        .collect();
    if moments.is_empty() {
        return LagChart::default();
    }
    if let Some((at, lag)) = now {
        moments.push((at, lag, "now"));
    }
    let first = moments.first().map_or(0, |m| m.0.as_micros());
    let last = moments.last().map_or(0, |m| m.0.as_micros()).max(first + 1);
    let top = moments.iter().map(|m| m.1).max().unwrap_or(0).max(1);
    let x = |at: Timestamp| LEFT + (at.as_micros() - first) as f64 / (last - first) as f64 * (RIGHT - LEFT);
    let y = |lag: i64| BOTTOM - lag as f64 / top as f64 * (BOTTOM - TOP);
    let dots: Vec<Dot> = moments
        .iter()
        .map(|&(at, lag, class)| Dot {
            x: format!("{:.1}", x(at)),
            y: format!("{:.1}", y(lag)),
            at: format::instant(at),
            lag,
            class,
        })
        .collect();
    LagChart {
        points: dots
            .iter()
            .map(|d| format!("{},{}", d.x, d.y))
            .collect::<Vec<_>>()
            .join(" "),
        top_label: top.to_string(),
        from_label: dots.first().map(|d| d.at.clone()).unwrap_or_default(),
        to_label: dots.last().map(|d| d.at.clone()).unwrap_or_default(),
        dots,
    }
}

#[cfg(test)]
mod tests {
    use tidemark_core::{ConsumerKey, EventKind, HistoryEvent};

    use super::*;

    fn commit(at_s: i64, next: i64, latest: Option<i64>) -> HistoryRecord {
        let mut event = HistoryEvent::new(EventKind::Advance, Some(next - 1), Some(next));
        event.latest_snapshot = latest;
        HistoryRecord {
            id: at_s,
            at: Timestamp::from_micros(at_s * 1_000_000),
            key: ConsumerKey::from_trusted("db.t", "main", "c"),
            event,
            principal: "w".to_owned(),
            request_id: String::new(),
        }
    }

    #[test]
    fn each_commit_is_a_point_at_its_lag_oldest_first_then_now() {
        // Newest first, as history reads; one row from before the column.
        let history = [commit(30, 9, Some(20)), commit(20, 5, Some(10)), commit(10, 3, None)];
        let chart = lag_chart(&history, Some((Timestamp::from_micros(40_000_000), 2)));
        let lags: Vec<_> = chart.dots.iter().map(|d| (d.lag, d.class)).collect();
        assert_eq!(lags, [(6, "commit"), (12, "commit"), (2, "now")]);
        assert_eq!(chart.top_label, "12");
        assert_eq!(chart.dots[0].x, "60.0");
        assert_eq!(chart.dots[2].x, "980.0");
        // The highest lag at the top, none at the bottom.
        assert_eq!(chart.dots[1].y, "15.0");
        assert_eq!(chart.points.split(' ').count(), 3);
    }

    #[test]
    fn without_a_recorded_latest_there_is_no_chart() {
        let chart = lag_chart(&[commit(10, 3, None)], Some((Timestamp::from_micros(1), 2)));
        assert!(chart.is_empty() && chart.points.is_empty());
    }
}
