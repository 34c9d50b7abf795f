//! Time as data. The core never reads a clock: every rule is given `now`,
//! which the storage layer takes from the database.

use std::fmt;
use std::time::Duration;

/// An instant on the database clock, in microseconds since the Unix epoch
/// (the precision of Postgres `timestamptz`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The instant `micros` microseconds after the Unix epoch.
    pub const fn from_micros(micros: i64) -> Self {
        Self(micros)
    }

    /// Microseconds since the Unix epoch.
    pub const fn as_micros(self) -> i64 {
        self.0
    }

    /// `self + d`, saturating at the end of time.
    pub fn plus(self, d: Duration) -> Self {
        Self(self.0.saturating_add(duration_micros(d)))
    }

    /// Time from `self` until `later`; zero when `later` is not after `self`.
    pub fn until(self, later: Timestamp) -> Duration {
        if later.0 <= self.0 {
            Duration::ZERO
        } else {
            Duration::from_micros(u64::try_from(later.0 - self.0).unwrap_or(u64::MAX))
        }
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}us", self.0)
    }
}

/// A duration in whole microseconds, saturating at `i64::MAX`.
pub fn duration_micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// Milliseconds of a duration, saturating at `i64::MAX` (for error metadata).
pub fn duration_millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plus_and_until_round_trip() {
        let t = Timestamp::from_micros(1_000);
        let later = t.plus(Duration::from_millis(5));
        assert_eq!(later.as_micros(), 6_000);
        assert_eq!(t.until(later), Duration::from_millis(5));
        assert_eq!(later.until(t), Duration::ZERO);
    }

    #[test]
    fn plus_saturates() {
        let t = Timestamp::from_micros(i64::MAX - 1);
        assert_eq!(t.plus(Duration::from_secs(10)).as_micros(), i64::MAX);
    }
}
