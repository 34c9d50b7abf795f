//! How the console writes times, durations, links and command lines. The
//! templates escape every value; these only shape text.

use std::time::Duration;

use tidemark_core::{ConsumerKey, Timestamp};

/// An instant as RFC 3339 (UTC).
pub(super) fn instant(t: Timestamp) -> String {
    let micros = t.as_micros();
    prost_types::Timestamp {
        seconds: micros.div_euclid(1_000_000),
        nanos: i32::try_from(micros.rem_euclid(1_000_000) * 1_000).unwrap_or(0),
    }
    .to_string()
}

/// A duration in its two largest units: `45s`, `3m 12s`, `2h 5m`, `4d 3h`.
pub(super) fn span(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0 if d.as_millis() > 0 => format!("{}ms", d.as_millis()),
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {}s", s / 60, s % 60),
        3600..86_400 => format!("{}h {}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {}h", s / 86_400, s % 86_400 / 3600),
    }
}

/// A query string from pairs, each part form-encoded.
pub(super) fn query(pairs: &[(&str, &str)]) -> String {
    let mut out = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        if !v.is_empty() {
            out.append_pair(k, v);
        }
    }
    out.finish()
}

/// A link to a page with these parameters.
pub(super) fn link(path: &str, pairs: &[(&str, &str)]) -> String {
    format!("{path}?{}", query(pairs))
}

/// One word for the shell: single-quoted unless it is plainly safe.
pub(super) fn shell_word(word: &str) -> String {
    let safe = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-/:=@,+".contains(&b));
    if safe {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// A JSON string literal.
fn json_string(text: &str) -> String {
    serde_json::Value::String(text.to_owned()).to_string()
}

/// The commands an operator would run to change a consumer: the console
/// itself changes nothing. Each is a plan until `--execute` / `"execute":
/// true` is added.
#[derive(Debug, Clone)]
pub(super) struct Commands {
    pub(super) cli_reset: String,
    pub(super) cli_revoke: String,
    pub(super) grpcurl_reset: String,
    pub(super) grpcurl_revoke: String,
}

pub(super) fn commands(key: &ConsumerKey, next_snapshot: Option<i64>) -> Commands {
    let (table, branch, id) = (key.table.as_str(), key.branch.as_str(), key.consumer_id.as_str());
    let next = next_snapshot.map_or_else(|| "<next-snapshot>".to_owned(), |n| n.to_string());
    let key_json = format!(
        "{{\"table\": {}, \"branch\": {}, \"consumer_id\": {}}}",
        json_string(table),
        json_string(branch),
        json_string(id)
    );
    let next_json = next_snapshot.map_or_else(|| "\"<next-snapshot>\"".to_owned(), |n| format!("\"{n}\""));
    Commands {
        cli_reset: format!(
            "tidemark consumers reset {} {} {} --branch {}",
            shell_word(table),
            shell_word(id),
            shell_word(&next),
            shell_word(branch)
        ),
        cli_revoke: format!(
            "tidemark consumers revoke {} {} --branch {} --reason {}",
            shell_word(table),
            shell_word(id),
            shell_word(branch),
            shell_word("why")
        ),
        grpcurl_reset: format!(
            "grpcurl -plaintext -d {} localhost:50051 tidemark.v1.Admin/ResetConsumer",
            shell_word(&format!("{{\"consumer\": {key_json}, \"next_snapshot\": {next_json}}}"))
        ),
        grpcurl_revoke: format!(
            "grpcurl -plaintext -d {} localhost:50051 tidemark.v1.Admin/RevokeLease",
            shell_word(&format!("{{\"consumer\": {key_json}, \"reason\": \"why\"}}"))
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_read_in_two_units() {
        assert_eq!(span(Duration::from_millis(250)), "250ms");
        assert_eq!(span(Duration::from_secs(45)), "45s");
        assert_eq!(span(Duration::from_secs(192)), "3m 12s");
        assert_eq!(span(Duration::from_secs(7500)), "2h 5m");
        assert_eq!(span(Duration::from_secs(4 * 86_400 + 3 * 3600 + 5)), "4d 3h");
    }

    #[test]
    fn shell_words_survive_hostile_names() {
        assert_eq!(shell_word("db.orders"), "db.orders");
        assert_eq!(shell_word("db.<img src=x>"), "'db.<img src=x>'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word(""), "''");
    }

    #[test]
    fn commands_quote_the_key() {
        let key = ConsumerKey::parse("db.o'x", "main", "c-1", "").unwrap();
        let c = commands(&key, Some(7));
        assert_eq!(c.cli_reset, r"tidemark consumers reset 'db.o'\''x' c-1 7 --branch main");
        assert!(
            c.grpcurl_reset.contains(r#""table": "db.o'\''x""#),
            "{}",
            c.grpcurl_reset
        );
        assert!(c.grpcurl_reset.contains(r#""next_snapshot": "7""#));
    }

    #[test]
    fn queries_are_encoded() {
        assert_eq!(
            link("/table", &[("name", "db.a&b c"), ("q", "")]),
            "/table?name=db.a%26b+c"
        );
    }
}
