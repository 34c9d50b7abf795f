//! Input validation that names the offending field.

use std::fmt;

/// One invalid field of a request: the field's path (as in the proto, e.g.
/// `consumer.consumer_id` or `end.index`) and why it is invalid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldViolation {
    /// Dotted path of the field in the request message.
    pub field: String,
    /// What is wrong with it, in words a user can act on.
    pub description: String,
}

impl FieldViolation {
    /// A violation of `field`.
    pub fn new(field: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            description: description.into(),
        }
    }
}

impl fmt::Display for FieldViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.description)
    }
}

/// Collects the violations of one request, so a caller learns every bad field
/// at once.
#[derive(Debug, Default)]
pub struct Violations(Vec<FieldViolation>);

impl Violations {
    /// No violations yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a violation of `field`.
    pub fn add(&mut self, field: impl Into<String>, description: impl Into<String>) {
        self.0.push(FieldViolation::new(field, description));
    }

    /// Records the violations of a nested check.
    pub fn extend(&mut self, other: Vec<FieldViolation>) {
        self.0.extend(other);
    }

    /// Runs a check that yields a value, keeping its violations.
    pub fn check<T>(&mut self, result: Result<T, Vec<FieldViolation>>) -> Option<T> {
        match result {
            Ok(value) => Some(value),
            Err(violations) => {
                self.0.extend(violations);
                None
            }
        }
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `Ok(())` when nothing was recorded, else the violations.
    pub fn finish(self) -> Result<(), Vec<FieldViolation>> {
        if self.0.is_empty() { Ok(()) } else { Err(self.0) }
    }

    /// The recorded violations.
    pub fn into_vec(self) -> Vec<FieldViolation> {
        self.0
    }
}

/// Joins a field path prefix and a field name (`"end"` + `"index"` ->
/// `"end.index"`).
pub fn path(prefix: &str, field: &str) -> String {
    if prefix.is_empty() {
        field.to_owned()
    } else {
        format!("{prefix}.{field}")
    }
}

/// Shows a user-supplied value in an error message without echoing huge or
/// unprintable input back.
pub fn quoted(value: &str) -> String {
    const MAX: usize = 64;
    let mut shown: String = value.chars().take(MAX).flat_map(char::escape_default).collect();
    if value.chars().count() > MAX {
        shown.push_str("...");
    }
    format!("\"{shown}\"")
}
