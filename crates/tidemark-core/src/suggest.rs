//! Did-you-mean (issue 55): the one rule every command that names a table
//! or a consumer uses to point at the name the operator most likely meant,
//! so a typo never reads as "nothing here".

/// The furthest a suggestion may be from the name asked for, in edits.
pub const MAX_EDITS: usize = 2;

/// How far apart two names are: edits (insert, delete, replace, or swap
/// two neighbours — the commonest typo) ignoring case and surrounding
/// blanks, so `DB.Orders` and `db.orders` are 0 apart, `db.ordrs` and
/// `db.evnets` (for `db.events`) 1.
pub fn spelling_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.trim().to_lowercase().chars().collect();
    let b: Vec<char> = b.trim().to_lowercase().chars().collect();
    // Optimal string alignment: three rows of the edit table.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for i in 0..a.len() {
        let mut current = vec![i + 1; b.len() + 1];
        for j in 0..b.len() {
            let replace = previous[j] + usize::from(a[i] != b[j]);
            let mut best = replace.min(previous[j + 1] + 1).min(current[j] + 1);
            if i > 0 && j > 0 && a[i] == b[j - 1] && a[i - 1] == b[j] {
                best = best.min(before[j - 1] + 1);
            }
            current[j + 1] = best;
        }
        before = std::mem::replace(&mut previous, current);
    }
    previous[b.len()]
}

/// The known name closest to `asked` (at most [`MAX_EDITS`] away, never
/// `asked` itself); ties go to the first in order of `known`'s sorting.
pub fn closest<'a>(asked: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let mut best: Option<(usize, &str)> = None;
    for candidate in known {
        if candidate == asked {
            continue;
        }
        let distance = spelling_distance(asked, candidate);
        if distance > MAX_EDITS {
            continue;
        }
        if best.is_none_or(|(d, name)| (distance, candidate) < (d, name)) {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, name)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spelling_distance_ignores_case_and_counts_edits() {
        assert_eq!(spelling_distance("DB.Orders", "db.orders"), 0);
        assert_eq!(spelling_distance(" db.orders ", "db.orders"), 0);
        assert_eq!(spelling_distance("db.ordrs", "db.orders"), 1);
        assert_eq!(spelling_distance("db.ord ers", "db.orders"), 1);
        assert_eq!(spelling_distance("db.nope", "db.orders"), 5);
        assert_eq!(spelling_distance("db.evnets", "db.events"), 1, "a swap is one edit");
        assert_eq!(spelling_distance("ab", "ba"), 1);
        assert_eq!(spelling_distance("", "abc"), 3);
    }

    #[test]
    fn the_closest_known_name_within_two_edits() {
        let known = ["db.events", "db.orders", "db.evens"];
        assert_eq!(closest("db.evnets", known), Some("db.events"));
        assert_eq!(closest("DB.Orders", known), Some("db.orders"));
        assert_eq!(closest("db.orders", known), None, "never the name itself");
        assert_eq!(closest("sales.totally-else", known), None);
        assert_eq!(
            closest("events-adit", ["events-audit", "events-etl"]),
            Some("events-audit")
        );
        // Equally close: the first by name, whatever the order given.
        assert_eq!(closest("ab", ["ac", "aa"]), Some("aa"));
    }
}

/// What a name that was not found most likely meant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Suggestion {
    /// The table is known; this consumer of it is spelled nearly the same.
    Consumer(String),
    /// tidemark has never seen the table asked for (no key, registration or
    /// options); `closest` is a known table spelled nearly the same.
    UnknownTable {
        /// The table asked for.
        asked: String,
        /// The closest known table, if any is close.
        closest: Option<String>,
    },
}

impl Suggestion {
    /// The name to try instead, if any (`did_you_mean` in error metadata).
    pub fn name(&self) -> Option<&str> {
        match self {
            Suggestion::Consumer(name) => Some(name),
            Suggestion::UnknownTable { closest, .. } => closest.as_deref(),
        }
    }
}

impl std::fmt::Display for Suggestion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Suggestion::Consumer(name) => write!(f, "did you mean {name}?"),
            Suggestion::UnknownTable { asked, closest: None } => {
                write!(f, "tidemark has never seen table {asked}")
            }
            Suggestion::UnknownTable {
                asked,
                closest: Some(name),
            } => write!(f, "tidemark has never seen table {asked}; did you mean {name}?"),
        }
    }
}
