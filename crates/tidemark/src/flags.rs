//! Flag value types shared by the subcommands.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// A duration flag: parsed and shown by humantime ("30s", "10m",
/// "30days"), so a default can come from the configuration's own value
/// (`default_value_t`) instead of a second copy in a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HumanDuration(pub Duration);

impl FromStr for HumanDuration {
    type Err = humantime::DurationError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        humantime::parse_duration(text).map(Self)
    }
}

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_back_what_they_print() {
        for text in ["0s", "2s", "30s", "1m", "10m", "30days"] {
            let parsed: HumanDuration = text.parse().unwrap();
            assert_eq!(parsed.to_string(), text);
            assert_eq!(parsed.to_string().parse::<HumanDuration>().unwrap(), parsed);
        }
        assert!("soon".parse::<HumanDuration>().is_err());
    }
}
