//! Which tables a credential may touch: globs on `database.table`.

use std::fmt;

use crate::ids::TableName;

/// A glob over a table identifier: `*` matches any run of characters
/// (including `.`), `?` one character; everything else matches itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TablePattern(String);

impl TablePattern {
    /// A pattern; it must be non-empty, at most 512 characters, without
    /// control characters.
    pub fn parse(glob: &str) -> Result<Self, String> {
        if glob.is_empty() || glob.chars().count() > 512 || glob.chars().any(char::is_control) {
            return Err(format!(
                "{glob:?} is not a table pattern (1-512 characters, e.g. \"db.*\")"
            ));
        }
        Ok(Self(glob.to_owned()))
    }

    /// Whether `table` matches.
    pub fn matches(&self, table: &str) -> bool {
        glob_match(self.0.as_bytes(), table.as_bytes())
    }

    /// The glob.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The same pattern for SQL `LIKE … ESCAPE '\'` (Postgres): `*` is
    /// `%`, `?` is `_`, and `%`, `_` and `\` match themselves.
    pub fn to_sql_like(&self) -> String {
        let mut like = String::with_capacity(self.0.len());
        for c in self.0.chars() {
            match c {
                '*' => like.push('%'),
                '?' => like.push('_'),
                '%' | '_' | '\\' => {
                    like.push('\\');
                    like.push(c);
                }
                c => like.push(c),
            }
        }
        like
    }

    /// The same pattern for SQLite's `GLOB` (case-sensitive, as this one):
    /// `*` and `?` as here; `[` matches itself.
    pub fn to_sqlite_glob(&self) -> String {
        self.0.replace('[', "[[]")
    }
}

/// Iterative glob matching with one backtracking point (linear in practice).
fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == b'?' || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// The tables a caller may touch.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum TableScope {
    /// Every table.
    #[default]
    All,
    /// Tables matching one of these patterns.
    Only(Vec<TablePattern>),
}

impl TableScope {
    /// Whether `table` is in scope.
    pub fn allows(&self, table: &TableName) -> bool {
        match self {
            TableScope::All => true,
            TableScope::Only(patterns) => patterns.iter().any(|p| p.matches(table.as_str())),
        }
    }

    /// Whether every table is in scope.
    pub fn is_all(&self) -> bool {
        matches!(self, TableScope::All)
    }
}

impl fmt::Display for TableScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TableScope::All => f.write_str("*"),
            TableScope::Only(patterns) => {
                let globs: Vec<&str> = patterns.iter().map(TablePattern::as_str).collect();
                f.write_str(&globs.join(", "))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(name: &str) -> TableName {
        TableName::parse(name, "t").unwrap()
    }

    #[test]
    fn globs() {
        let p = |g: &str| TablePattern::parse(g).unwrap();
        assert!(p("db.*").matches("db.orders"));
        assert!(!p("db.*").matches("dbx.orders"));
        assert!(p("*.orders").matches("sales.orders"));
        assert!(p("db.orders_?").matches("db.orders_1"));
        assert!(!p("db.orders_?").matches("db.orders_10"));
        assert!(p("*").matches("a.b"));
        assert!(p("db.ord*s").matches("db.orders"));
        assert!(!p("db.orders").matches("db.orders2"));
        assert!(p("a*b*c").matches("a.xbyc"));
        assert!(!p("a*b*c").matches("a.xbyd"));
        assert!(TablePattern::parse("").is_err());
    }

    #[test]
    fn scopes() {
        let only = TableScope::Only(vec![TablePattern::parse("db.*").unwrap()]);
        assert!(only.allows(&table("db.orders")));
        assert!(!only.allows(&table("other.orders")));
        assert!(TableScope::All.allows(&table("other.orders")));
        assert_eq!(only.to_string(), "db.*");
    }
}

#[cfg(test)]
mod sql_pattern_tests {
    use super::TablePattern;

    #[test]
    fn globs_become_like_and_glob_patterns_that_match_the_same() {
        let p = TablePattern::parse("db_1.*%?").unwrap();
        assert_eq!(p.to_sql_like(), "db\\_1.%\\%_");
        assert_eq!(TablePattern::parse("a[b]*").unwrap().to_sqlite_glob(), "a[[]b]*");
    }
}
