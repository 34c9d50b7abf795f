//! Identifiers: tables, branches, consumer ids, keys and holders (SPEC §1).

use std::fmt;

use crate::validate::{FieldViolation, Violations, path, quoted};

/// The default Paimon branch.
pub const DEFAULT_BRANCH: &str = "main";

const MAX_TABLE_PART: usize = 255;
const MAX_BRANCH: usize = 255;
const MAX_CONSUMER_ID: usize = 128;
/// Longest accepted lease holder.
pub const MAX_HOLDER: usize = 256;

/// A table identifier `database.table`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TableName(String);

impl TableName {
    /// Validates `database.table`: exactly one `.`, each part 1–255
    /// characters with no `/`, `$` or control characters.
    pub fn parse(value: &str, field: &str) -> Result<Self, FieldViolation> {
        let bad = |why: String| FieldViolation::new(field, why);
        if value.is_empty() {
            return Err(bad("must not be empty; expected \"database.table\"".into()));
        }
        let parts: Vec<&str> = value.split('.').collect();
        if parts.len() != 2 {
            return Err(bad(format!(
                "{} must be \"database.table\" with exactly one '.'",
                quoted(value)
            )));
        }
        for (part, what) in parts.iter().zip(["database", "table"]) {
            let len = part.chars().count();
            if len == 0 || len > MAX_TABLE_PART {
                return Err(bad(format!(
                    "the {what} part of {} must be 1-{MAX_TABLE_PART} characters (got {len})",
                    quoted(value)
                )));
            }
            if let Some(c) = part.chars().find(|c| *c == '/' || *c == '$' || c.is_control()) {
                return Err(bad(format!(
                    "{} contains {}, which is not allowed in a table identifier (no '/', '$' or control characters)",
                    quoted(value),
                    quoted(&c.to_string())
                )));
            }
        }
        Ok(Self(value.to_owned()))
    }

    /// The identifier as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A warning when the identifier has upper-case letters or whitespace.
    /// Hive-backed Paimon catalogs fold identifiers to lower case (and
    /// allow no whitespace), so such a name is most likely another
    /// spelling of the lower-case, trimmed one, which tidemark keeps apart
    /// (its own leases, fence and history). It stays a warning: an engine
    /// with case-sensitive names may mean it.
    pub fn spelling_warning(&self) -> Option<String> {
        let folded: Vec<String> = self.0.split('.').map(|part| part.trim().to_lowercase()).collect();
        let folded = folded.join(".");
        let mut what = Vec::new();
        if self.0.chars().any(char::is_uppercase) {
            what.push("upper-case letters");
        }
        if self.0.split('.').any(|part| part.trim() != part) {
            what.push("whitespace around a part");
        }
        if folded.chars().any(char::is_whitespace) {
            what.push("whitespace inside a part");
        }
        if what.is_empty() {
            return None;
        }
        let mut text = format!(
            "{TABLE_NAME_SPELLING}: table {} has {}; Hive-backed Paimon catalogs fold names to lower case",
            quoted(&self.0),
            what.join(" and ")
        );
        if folded != self.0 {
            text.push_str(&format!(
                ", so it is most likely {}, which tidemark keeps apart (its own leases, fence and history)",
                quoted(&folded)
            ));
        }
        if folded.chars().any(char::is_whitespace) {
            text.push_str("; they allow no whitespace in a name either");
        }
        Some(text)
    }
}

/// The code of [`TableName::spelling_warning`].
pub const TABLE_NAME_SPELLING: &str = "TABLE_NAME_SPELLING";

/// A Paimon branch name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BranchName(String);

impl BranchName {
    /// Validates a branch name; empty means `main`.
    pub fn parse(value: &str, field: &str) -> Result<Self, FieldViolation> {
        if value.is_empty() {
            return Ok(Self::main());
        }
        check_simple_name(value, MAX_BRANCH, field, "branch")?;
        Ok(Self(value.to_owned()))
    }

    /// The default branch, `main`.
    pub fn main() -> Self {
        Self(DEFAULT_BRANCH.to_owned())
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A consumer id, safe as the Paimon file name `consumer-<id>`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConsumerId(String);

impl ConsumerId {
    /// Validates 1–128 characters of `[A-Za-z0-9._-]`, not `.` or `..`.
    pub fn parse(value: &str, field: &str) -> Result<Self, FieldViolation> {
        check_simple_name(value, MAX_CONSUMER_ID, field, "consumer id")?;
        if value == "." || value == ".." {
            return Err(FieldViolation::new(
                field,
                format!(
                    "{} is not a valid consumer id (it must be safe as a file name)",
                    quoted(value)
                ),
            ));
        }
        Ok(Self(value.to_owned()))
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Validates a prefix of consumer ids: empty (every id), or up to 128
/// characters of `[A-Za-z0-9._-]` (no id holds anything else, so another
/// character is a mistake worth naming, not a filter that matches nothing).
pub fn check_consumer_id_prefix(value: &str, field: &str) -> Result<(), FieldViolation> {
    if value.is_empty() {
        return Ok(());
    }
    check_simple_name(value, MAX_CONSUMER_ID, field, "consumer id prefix")
}

fn check_simple_name(value: &str, max: usize, field: &str, what: &str) -> Result<(), FieldViolation> {
    let len = value.chars().count();
    if len == 0 {
        return Err(FieldViolation::new(field, format!("{what} must not be empty")));
    }
    if len > max {
        return Err(FieldViolation::new(
            field,
            format!("{what} must be at most {max} characters (got {len})"),
        ));
    }
    if let Some(c) = value
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(FieldViolation::new(
            field,
            format!(
                "{what} {} contains {}; only [A-Za-z0-9._-] are allowed",
                quoted(value),
                quoted(&c.to_string())
            ),
        ));
    }
    Ok(())
}

/// `(table, branch, consumer_id)`: the unit that owns a position, a lease and an
/// epoch.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConsumerKey {
    /// The table.
    pub table: TableName,
    /// The branch.
    pub branch: BranchName,
    /// The consumer id.
    pub consumer_id: ConsumerId,
}

impl ConsumerKey {
    /// Validates the three parts, naming each bad field under `prefix`
    /// (e.g. `consumer.table`).
    pub fn parse(table: &str, branch: &str, consumer_id: &str, prefix: &str) -> Result<Self, Vec<FieldViolation>> {
        let mut v = Violations::new();
        let table = TableName::parse(table, &path(prefix, "table")).map_err(|e| vec![e]);
        let branch = BranchName::parse(branch, &path(prefix, "branch")).map_err(|e| vec![e]);
        let consumer_id = ConsumerId::parse(consumer_id, &path(prefix, "consumer_id")).map_err(|e| vec![e]);
        let table = v.check(table);
        let branch = v.check(branch);
        let consumer_id = v.check(consumer_id);
        match (table, branch, consumer_id) {
            (Some(table), Some(branch), Some(consumer_id)) => Ok(Self {
                table,
                branch,
                consumer_id,
            }),
            _ => Err(v.into_vec()),
        }
    }

    /// Builds a key from parts already known to be valid (e.g. read back from
    /// storage). Panics in debug builds if they are not.
    pub fn from_trusted(table: &str, branch: &str, consumer_id: &str) -> Self {
        let key = Self {
            table: TableName(table.to_owned()),
            branch: BranchName(branch.to_owned()),
            consumer_id: ConsumerId(consumer_id.to_owned()),
        };
        debug_assert!(
            Self::parse(table, branch, consumer_id, "").is_ok(),
            "invalid stored key {key}"
        );
        key
    }
}

impl fmt::Display for ConsumerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}@{}/{}",
            self.table.as_str(),
            self.branch.as_str(),
            self.consumer_id.as_str()
        )
    }
}

/// Validates a lease holder: 1–256 characters, no control characters.
pub fn parse_holder(value: &str, field: &str) -> Result<String, FieldViolation> {
    let len = value.chars().count();
    if len == 0 {
        return Err(FieldViolation::new(
            field,
            "holder must not be empty; use the query's stable identity (e.g. its Spark query id)",
        ));
    }
    if len > MAX_HOLDER {
        return Err(FieldViolation::new(
            field,
            format!("holder must be at most {MAX_HOLDER} characters (got {len})"),
        ));
    }
    if value.chars().any(char::is_control) {
        return Err(FieldViolation::new(field, "holder must not contain control characters"));
    }
    Ok(value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names() {
        assert!(TableName::parse("db.orders", "t").is_ok());
        assert!(TableName::parse("my db.orders 2", "t").is_ok());
        for bad in ["", "orders", "a.b.c", ".t", "d.", "d/x.t", "d.t$snapshots", "d.t\n"] {
            let err = TableName::parse(bad, "consumer.table").unwrap_err();
            assert_eq!(err.field, "consumer.table", "{bad:?}");
        }
        let long = format!("d.{}", "x".repeat(255));
        assert!(TableName::parse(&long, "t").is_ok());
        let too_long = format!("d.{}", "x".repeat(256));
        assert!(TableName::parse(&too_long, "t").is_err());
    }

    #[test]
    fn spellings_a_catalog_would_fold_are_warned_about() {
        let warning = |name: &str| TableName::parse(name, "t").unwrap().spelling_warning();
        assert_eq!(warning("db.orders"), None);
        assert_eq!(warning("db_1.orders-2"), None);
        let upper = warning("DB.Orders").unwrap();
        assert!(upper.starts_with("TABLE_NAME_SPELLING: "), "{upper}");
        assert!(upper.contains("upper-case letters"), "{upper}");
        assert!(upper.contains("most likely \"db.orders\""), "{upper}");
        let padded = warning(" db.orders ").unwrap();
        assert!(padded.contains("whitespace around a part"), "{padded}");
        assert!(padded.contains("most likely \"db.orders\""), "{padded}");
        let inside = warning("db.ord ers").unwrap();
        assert!(inside.contains("whitespace inside a part"), "{inside}");
        assert!(!inside.contains("most likely"), "nothing to fold to: {inside}");
        assert!(inside.contains("no whitespace"), "{inside}");
        let both = warning("Db. Ord ers").unwrap();
        assert!(both.contains("most likely \"db.ord ers\""), "{both}");
    }

    #[test]
    fn branch_names() {
        assert_eq!(BranchName::parse("", "b").unwrap().as_str(), "main");
        assert!(BranchName::parse("dev-1.2_x", "b").is_ok());
        assert!(BranchName::parse("a/b", "b").is_err());
        assert!(BranchName::parse(&"b".repeat(256), "b").is_err());
    }

    #[test]
    fn consumer_ids() {
        assert!(ConsumerId::parse("my-consumer_1.v2", "c").is_ok());
        assert!(ConsumerId::parse(&"c".repeat(128), "c").is_ok());
        for bad in ["", ".", "..", "a/b", "a b", "ü", &"c".repeat(129)] {
            assert!(ConsumerId::parse(bad, "c").is_err(), "{bad:?}");
        }
    }

    #[test]
    fn key_reports_every_bad_part() {
        let err = ConsumerKey::parse("nodot", "bad/branch", "", "consumer").unwrap_err();
        let fields: Vec<_> = err.iter().map(|v| v.field.as_str()).collect();
        assert_eq!(fields, ["consumer.table", "consumer.branch", "consumer.consumer_id"]);
    }

    #[test]
    fn holders() {
        assert!(parse_holder("query-7f3a", "holder").is_ok());
        assert!(parse_holder("", "holder").is_err());
        assert!(parse_holder("a\u{0}b", "holder").is_err());
        assert!(parse_holder(&"h".repeat(257), "holder").is_err());
    }
}
