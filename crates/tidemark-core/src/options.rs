//! Per-table consumer options (SPEC E1), mirroring Paimon's table options.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use crate::validate::{FieldViolation, Violations, quoted};

/// `consumer.expiration-time`: idle time after which a consumer expires.
pub const EXPIRATION_TIME: &str = "consumer.expiration-time";
/// `consumer.changelog-only`: consumers fence changelogs only (when the
/// changelog lifecycle is decoupled).
pub const CHANGELOG_ONLY: &str = "consumer.changelog-only";
/// `consumer.mode`: stored and shown; it selects nothing.
pub const MODE: &str = "consumer.mode";
/// Every option key tidemark knows.
pub const KNOWN_KEYS: [&str; 3] = [EXPIRATION_TIME, CHANGELOG_ONLY, MODE];

/// Paimon's `consumer.mode` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerMode {
    /// `exactly-once` (Paimon's default).
    ExactlyOnce,
    /// `at-least-once`.
    AtLeastOnce,
}

impl ConsumerMode {
    /// The option value.
    pub fn as_str(self) -> &'static str {
        match self {
            ConsumerMode::ExactlyOnce => "exactly-once",
            ConsumerMode::AtLeastOnce => "at-least-once",
        }
    }

    /// Parses an option value.
    pub fn parse(value: &str) -> Option<Self> {
        match value.trim().to_ascii_lowercase().as_str() {
            "exactly-once" => Some(ConsumerMode::ExactlyOnce),
            "at-least-once" => Some(ConsumerMode::AtLeastOnce),
            _ => None,
        }
    }
}

/// A table's consumer options. Unset options take Paimon's defaults: no
/// expiration, not changelog-only, mode exactly-once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TableOptions {
    /// `consumer.expiration-time`; `None` = consumers never expire.
    pub expiration: Option<Duration>,
    /// `consumer.changelog-only`.
    pub changelog_only: bool,
    /// `consumer.mode`, if set.
    pub mode: Option<ConsumerMode>,
}

impl TableOptions {
    /// The options as Paimon-style key/value strings (only those set).
    pub fn to_map(&self) -> BTreeMap<String, String> {
        let mut map = BTreeMap::new();
        if let Some(expiration) = self.expiration {
            map.insert(EXPIRATION_TIME.to_owned(), format_duration(expiration));
        }
        if self.changelog_only {
            map.insert(CHANGELOG_ONLY.to_owned(), "true".to_owned());
        }
        if let Some(mode) = self.mode {
            map.insert(MODE.to_owned(), mode.as_str().to_owned());
        }
        map
    }

    /// Applies a change: `set` options (validated) and `unset` keys. Every bad
    /// key or value is reported, naming `options[<key>]` or `unset[<i>]`.
    pub fn apply(&self, set: &BTreeMap<String, String>, unset: &[String]) -> Result<Self, Vec<FieldViolation>> {
        let mut next = *self;
        let mut v = Violations::new();
        let known = KNOWN_KEYS.join(", ");
        for (i, key) in unset.iter().enumerate() {
            match key.as_str() {
                EXPIRATION_TIME => next.expiration = None,
                CHANGELOG_ONLY => next.changelog_only = false,
                MODE => next.mode = None,
                other => v.add(
                    format!("unset[{i}]"),
                    format!("unknown option {}; known options: {known}", quoted(other)),
                ),
            }
            if set.contains_key(key) {
                v.add(format!("unset[{i}]"), format!("{} is both set and unset", quoted(key)));
            }
        }
        for (key, value) in set {
            let field = format!("options[{key}]");
            match key.as_str() {
                EXPIRATION_TIME => match parse_duration(value) {
                    Ok(d) if d.is_zero() => v.add(field, "the expiration time must be positive"),
                    Ok(d) => next.expiration = Some(d),
                    Err(why) => v.add(field, why),
                },
                CHANGELOG_ONLY => match value.trim().to_ascii_lowercase().as_str() {
                    "true" => next.changelog_only = true,
                    "false" => next.changelog_only = false,
                    _ => v.add(field, format!("{} is not a boolean (true or false)", quoted(value))),
                },
                MODE => match ConsumerMode::parse(value) {
                    Some(mode) => next.mode = Some(mode),
                    None => v.add(
                        field,
                        format!(
                            "{} is not a consumer mode (exactly-once or at-least-once)",
                            quoted(value)
                        ),
                    ),
                },
                other => v.add(
                    field,
                    format!("unknown option {}; known options: {known}", quoted(other)),
                ),
            }
        }
        v.finish().map(|()| next)
    }

    /// Whether consumers fence changelogs only for a table whose changelog
    /// lifecycle is (or is not) decoupled: `consumer.changelog-only` takes
    /// effect only when it is.
    pub fn changelog_only_effective(&self, changelog_decoupled: bool) -> bool {
        self.changelog_only && changelog_decoupled
    }
}

const UNITS: [(&[&str], u128); 7] = [
    (&["ns", "nano", "nanos", "nanosecond", "nanoseconds"], 1),
    (&["us", "µs", "micro", "micros", "microsecond", "microseconds"], 1_000),
    (&["ms", "milli", "millis", "millisecond", "milliseconds"], 1_000_000),
    (&["s", "sec", "secs", "second", "seconds"], 1_000_000_000),
    (&["m", "min", "mins", "minute", "minutes"], 60_000_000_000),
    (&["h", "hour", "hours"], 3_600_000_000_000),
    (&["d", "day", "days"], 86_400_000_000_000),
];

/// Parses a duration the way Paimon (Flink's `TimeUtils`) does: a number,
/// optional whitespace, an optional unit (`1 d`, `30 min`, `12h`, `500 ms`);
/// no unit means milliseconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let trimmed = text.trim();
    let digits_end = trimmed.find(|c: char| !c.is_ascii_digit()).unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(digits_end);
    if number.is_empty() {
        return Err(format!(
            "{} is not a duration; use a number and a unit, e.g. \"1 d\", \"30 min\", \"12h\"",
            quoted(text)
        ));
    }
    let amount: u128 = number.parse().map_err(|_| format!("{} is too large", quoted(text)))?;
    let unit = unit.trim().to_lowercase();
    let nanos_per = if unit.is_empty() {
        1_000_000
    } else {
        UNITS
            .iter()
            .find(|(names, _)| names.contains(&unit.as_str()))
            .map(|(_, nanos)| *nanos)
            .ok_or_else(|| {
                format!(
                    "{} has an unknown unit {}; use d, h, min, s, ms, us or ns",
                    quoted(text),
                    quoted(&unit)
                )
            })?
    };
    let nanos = amount
        .checked_mul(nanos_per)
        .filter(|n| *n <= u128::from(u64::MAX))
        .ok_or_else(|| format!("{} is too large", quoted(text)))?;
    Ok(Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX)))
}

/// Formats a duration with the largest unit that divides it exactly, in
/// Paimon's style (`1 d`, `90 min`, `1500 ms`).
pub fn format_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    for (names, per) in UNITS.iter().rev() {
        if nanos.is_multiple_of(*per) && nanos >= *per {
            let unit = match names[0] {
                "m" => "min",
                other => other,
            };
            return format!("{} {unit}", nanos / per);
        }
    }
    "0 ms".to_owned()
}

/// A duration shown to a human: the two largest units (`1d 3h`, `4m 12s`,
/// `850ms`).
#[derive(Debug, Clone, Copy)]
pub struct Human(pub Duration);

impl fmt::Display for Human {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.0.as_secs();
        let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
        match (d, h, m) {
            (0, 0, 0) if secs == 0 => write!(f, "{}ms", self.0.as_millis()),
            (0, 0, 0) => write!(f, "{s}s"),
            (0, 0, _) => write!(f, "{m}m {s}s"),
            (0, _, _) => write!(f, "{h}h {m}m"),
            _ => write!(f, "{d}d {h}h"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paimon_durations() {
        assert_eq!(parse_duration("1 d"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse_duration("30 min"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_duration("12h"), Ok(Duration::from_secs(43_200)));
        assert_eq!(parse_duration(" 10 s "), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2 days"), Ok(Duration::from_secs(172_800)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        for bad in ["", "d", "1 fortnight", "-1 d", "1.5 h", "99999999999999999999999 d"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn durations_format_back() {
        for text in ["1 d", "90 min", "12 h", "1500 ms", "7 s"] {
            assert_eq!(format_duration(parse_duration(text).unwrap()), text);
        }
        assert_eq!(format_duration(Duration::from_secs(3600)), "1 h");
    }

    #[test]
    fn apply_validates_and_lists_known_keys() {
        let set: BTreeMap<String, String> = [
            (EXPIRATION_TIME.to_owned(), "1 d".to_owned()),
            (CHANGELOG_ONLY.to_owned(), "true".to_owned()),
            (MODE.to_owned(), "at-least-once".to_owned()),
        ]
        .into();
        let opts = TableOptions::default().apply(&set, &[]).unwrap();
        assert_eq!(opts.expiration, Some(Duration::from_secs(86_400)));
        assert!(opts.changelog_only);
        assert_eq!(opts.mode, Some(ConsumerMode::AtLeastOnce));
        assert_eq!(opts.to_map()[EXPIRATION_TIME], "1 d");

        let unset = opts.apply(&BTreeMap::new(), &[EXPIRATION_TIME.to_owned()]).unwrap();
        assert_eq!(unset.expiration, None);

        let bad: BTreeMap<String, String> = [
            ("consumer.expire".to_owned(), "1 d".to_owned()),
            (CHANGELOG_ONLY.to_owned(), "yes".to_owned()),
            (EXPIRATION_TIME.to_owned(), "0 s".to_owned()),
        ]
        .into();
        let err = TableOptions::default().apply(&bad, &["nope".to_owned()]).unwrap_err();
        let fields: Vec<_> = err.iter().map(|v| v.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "unset[0]",
                "options[consumer.changelog-only]",
                "options[consumer.expiration-time]",
                "options[consumer.expire]"
            ]
        );
        assert!(
            err[3]
                .description
                .contains("consumer.expiration-time, consumer.changelog-only, consumer.mode")
        );
    }

    #[test]
    fn changelog_only_needs_a_decoupled_lifecycle() {
        let opts = TableOptions {
            changelog_only: true,
            ..TableOptions::default()
        };
        assert!(opts.changelog_only_effective(true));
        assert!(!opts.changelog_only_effective(false));
        assert!(!TableOptions::default().changelog_only_effective(true));
    }

    #[test]
    fn human_durations() {
        assert_eq!(Human(Duration::from_millis(850)).to_string(), "850ms");
        assert_eq!(Human(Duration::from_secs(252)).to_string(), "4m 12s");
        assert_eq!(Human(Duration::from_secs(90_000)).to_string(), "1d 1h");
    }
}
