//! The fence as a picture: the branch's snapshots on a line, the part the
//! fence keeps shaded, and each holder marked at the snapshot it needs.

use tidemark_service::paimon::SnapshotRange;
use tidemark_service::store::{Holder, HolderKind};

/// Picture width and height in SVG units.
const WIDTH: f64 = 1000.0;
const LEFT: f64 = 40.0;
const RIGHT: f64 = WIDTH - 40.0;
/// Most holders labelled (the rest are listed below the picture).
const MARKED: usize = 24;

/// Coordinates for `templates/console/fence.html`.
#[derive(Debug, Clone)]
pub(super) struct Picture {
    pub(super) width: u32,
    pub(super) height: u32,
    pub(super) left: String,
    pub(super) right: String,
    pub(super) free_width: String,
    pub(super) kept_x: String,
    pub(super) kept_width: String,
    pub(super) low_label: String,
    pub(super) high_label: String,
    pub(super) has_fence: bool,
    pub(super) fence_x: String,
    pub(super) fence_label: String,
    pub(super) fence_anchor: &'static str,
    pub(super) marks: Vec<Mark>,
}

/// One holder on the picture.
#[derive(Debug, Clone)]
pub(super) struct Mark {
    pub(super) class: &'static str,
    pub(super) x: String,
    pub(super) y: String,
    pub(super) text_y: String,
    pub(super) label: String,
    /// Labels on the right half end at their line, so none runs off.
    pub(super) anchor: &'static str,
}

fn coord(v: f64) -> String {
    format!("{v:.1}")
}

/// The picture of `fence` over `range` (when the directory was read) and
/// the holders (lowest first).
pub(super) fn picture(fence: Option<i64>, range: Option<SnapshotRange>, holders: &[Holder]) -> Picture {
    let lows = holders
        .iter()
        .map(|h| h.snapshot)
        .chain(range.map(|r| r.earliest))
        .chain(fence);
    let highs = holders
        .iter()
        .map(|h| h.snapshot)
        .chain(range.map(|r| r.latest))
        .chain(fence);
    let low = lows.min().unwrap_or(1);
    let high = highs.max().unwrap_or(low).max(low + 1);
    let x = |snapshot: i64| LEFT + (RIGHT - LEFT) * (snapshot - low) as f64 / (high - low) as f64;
    let fence_x = fence.map_or(RIGHT, x);
    let rows = holders.len().min(MARKED);
    let height = 112 + 16 * rows as u32;
    let anchor = |at: f64| if at > (LEFT + RIGHT) / 2.0 { "end" } else { "start" };
    let marks = holders
        .iter()
        .take(MARKED)
        .enumerate()
        .map(|(i, h)| {
            let y = 104.0 + 16.0 * i as f64;
            let at = x(h.snapshot);
            Mark {
                class: match h.kind {
                    HolderKind::Consumer => "consumer",
                    HolderKind::FullScanPin => "pin",
                },
                x: coord(at),
                anchor: anchor(at),
                y: coord(y),
                text_y: coord(y + 4.0),
                label: format!(
                    "{} @ {}{}",
                    h.view.state.key.consumer_id.as_str(),
                    h.snapshot,
                    if matches!(h.kind, HolderKind::FullScanPin) {
                        " (pin)"
                    } else {
                        ""
                    }
                ),
            }
        })
        .collect();
    Picture {
        width: WIDTH as u32,
        height,
        left: coord(LEFT),
        right: coord(RIGHT),
        free_width: coord(fence_x - LEFT),
        kept_x: coord(fence_x),
        kept_width: coord(RIGHT - fence_x),
        low_label: format!("snapshot {low}"),
        high_label: format!("snapshot {high}"),
        has_fence: fence.is_some(),
        fence_x: coord(fence_x),
        fence_label: fence.map(|f| f.to_string()).unwrap_or_default(),
        fence_anchor: anchor(fence_x),
        marks,
    }
}
