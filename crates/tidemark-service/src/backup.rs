//! The state file of SPEC §11 A7: JSON lines, a versioned header first and
//! a trailer with the counts last, so a file cut short is refused whole.
//!
//! ```text
//! {"format":"tidemark-state","version":1,"exported_at":"…","server_version":"…","table":null}
//! {"kind":"options","table":"db.orders","options":{"consumer.expiration-time":"1d"}}
//! {"kind":"registration","table":"db.orders","location":"/lake/db.db/orders","identity":"…"}
//! {"kind":"key","table":"db.orders","branch":"main","consumer_id":"etl","epoch":3,"next_snapshot":12,
//!  "created_at":"…","updated_at":"…","latest_snapshot":40}
//! {"kind":"end","options":1,"registrations":1,"keys":1}
//! ```

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tidemark_core::restore::ExportedKey;
use tidemark_core::{ConsumerKey, ConsumerRecord, CoreError, TableName, TableOptions, Timestamp};
use tidemark_store::{ExportPart, ExportedRegistration, StateFile};

/// The header's `format`.
pub const FORMAT: &str = "tidemark-state";
/// The version this server writes and reads.
pub const VERSION: u32 = 1;
/// Most lines an import may carry.
pub const MAX_LINES: usize = 1_000_000;
/// Longest line accepted.
pub const MAX_LINE: usize = 16 * 1024;

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    format: String,
    version: u32,
    exported_at: String,
    server_version: String,
    table: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
enum Line {
    Options {
        table: String,
        options: BTreeMap<String, String>,
    },
    Registration {
        table: String,
        location: String,
        identity: Option<String>,
    },
    Key {
        table: String,
        branch: String,
        consumer_id: String,
        epoch: i64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        next_snapshot: Option<i64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        created_at: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        updated_at: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        latest_snapshot: Option<i64>,
    },
    End {
        options: u64,
        registrations: u64,
        keys: u64,
    },
}

fn rfc3339(t: Timestamp) -> String {
    let at = UNIX_EPOCH + Duration::from_micros(u64::try_from(t.as_micros()).unwrap_or(0));
    humantime::format_rfc3339_micros(at).to_string()
}

fn parse_time(text: &str) -> Result<Timestamp, String> {
    let at = humantime::parse_rfc3339(text).map_err(|e| format!("{text:?} is not an RFC 3339 time: {e}"))?;
    let micros = at
        .duration_since(UNIX_EPOCH)
        .map_err(|_| format!("{text:?} is before 1970"))?;
    Ok(Timestamp::from_micros(
        i64::try_from(micros.as_micros()).map_err(|_| format!("{text:?} is too late"))?,
    ))
}

fn json(line: &impl Serialize) -> String {
    serde_json::to_string(line).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

/// Turns an export's parts into lines, counting what it wrote.
#[derive(Debug, Default)]
pub struct Writer {
    options: u64,
    registrations: u64,
    keys: u64,
}

impl Writer {
    /// The lines of one part (the head also writes the header).
    pub fn lines(&mut self, part: ExportPart, table: Option<&TableName>) -> Vec<String> {
        match part {
            ExportPart::Head {
                now,
                options,
                registrations,
            } => {
                let mut lines = vec![json(&Header {
                    format: FORMAT.to_owned(),
                    version: VERSION,
                    exported_at: rfc3339(now),
                    server_version: env!("CARGO_PKG_VERSION").to_owned(),
                    table: table.map(|t| t.as_str().to_owned()),
                })];
                for (table, options) in options {
                    self.options += 1;
                    lines.push(json(&Line::Options {
                        table: table.as_str().to_owned(),
                        options: options.to_map(),
                    }));
                }
                for r in registrations {
                    self.registrations += 1;
                    lines.push(json(&Line::Registration {
                        table: r.table.as_str().to_owned(),
                        location: r.location,
                        identity: r.identity,
                    }));
                }
                lines
            }
            ExportPart::Keys(keys) => keys
                .into_iter()
                .map(|state| {
                    self.keys += 1;
                    let consumer = state.consumer;
                    json(&Line::Key {
                        table: state.key.table.as_str().to_owned(),
                        branch: state.key.branch.as_str().to_owned(),
                        consumer_id: state.key.consumer_id.as_str().to_owned(),
                        epoch: state.epoch,
                        next_snapshot: consumer.map(|c| c.next_snapshot),
                        created_at: consumer.map(|c| rfc3339(c.created_at)),
                        updated_at: consumer.map(|c| rfc3339(c.updated_at)),
                        latest_snapshot: state.latest_snapshot,
                    })
                })
                .collect(),
        }
    }

    /// The trailer.
    pub fn end(&self) -> String {
        json(&Line::End {
            options: self.options,
            registrations: self.registrations,
            keys: self.keys,
        })
    }
}

/// A state file as read: what it holds, and when and by what it was
/// exported.
#[derive(Debug)]
pub struct Parsed {
    /// What it holds.
    pub file: StateFile,
    /// When it was exported.
    pub exported_at: Timestamp,
    /// By which server version.
    pub server_version: String,
}

/// Reads a state file, refusing it whole (INVALID_ARGUMENT, field `lines`,
/// naming the line) unless every line is valid, the header's version is
/// one this server reads, nothing is there twice, and the trailer's counts
/// match.
pub fn parse(lines: &[String]) -> Result<Parsed, CoreError> {
    let bad = |n: usize, why: String| CoreError::invalid("lines", format!("line {}: {why}", n + 1));
    let Some(first) = lines.first() else {
        return Err(CoreError::invalid("lines", "empty: expected a tidemark state export"));
    };
    let header: Header =
        serde_json::from_str(first).map_err(|e| bad(0, format!("not a tidemark state header ({e})")))?;
    if header.format != FORMAT {
        return Err(bad(0, format!("format {:?}, expected {FORMAT:?}", header.format)));
    }
    if header.version != VERSION {
        return Err(bad(
            0,
            format!(
                "version {} is not one this server reads (it reads {VERSION})",
                header.version
            ),
        ));
    }
    let exported_at = parse_time(&header.exported_at).map_err(|why| bad(0, why))?;
    let mut file = StateFile::default();
    let mut seen_tables = (HashSet::new(), HashSet::new());
    let mut seen_keys = HashSet::new();
    let mut end = None;
    for (n, text) in lines.iter().enumerate().skip(1) {
        if end.is_some() {
            return Err(bad(n, "after the trailer".into()));
        }
        let line: Line = serde_json::from_str(text).map_err(|e| bad(n, e.to_string()))?;
        let table_of = |name: &str| TableName::parse(name, "table").map_err(|v| bad(n, v.description));
        match line {
            Line::Options { table, options } => {
                let table = table_of(&table)?;
                let options = TableOptions::default()
                    .apply(&options, &[])
                    .map_err(|v| bad(n, v.into_iter().map(|v| v.description).collect::<Vec<_>>().join("; ")))?;
                if !seen_tables.0.insert(table.clone()) {
                    return Err(bad(n, format!("options of {} twice", table.as_str())));
                }
                file.options.push((table, options));
            }
            Line::Registration {
                table,
                location,
                identity,
            } => {
                let table = table_of(&table)?;
                if let Err(e) = tidemark_paimon::PaimonTable::open(&location) {
                    return Err(bad(n, e.to_string()));
                }
                if !seen_tables.1.insert(table.clone()) {
                    return Err(bad(n, format!("registration of {} twice", table.as_str())));
                }
                file.registrations.push(ExportedRegistration {
                    table,
                    location,
                    identity,
                });
            }
            Line::Key {
                table,
                branch,
                consumer_id,
                epoch,
                next_snapshot,
                created_at,
                updated_at,
                latest_snapshot,
            } => {
                let key = ConsumerKey::parse(&table, &branch, &consumer_id, "")
                    .map_err(|v| bad(n, v.into_iter().map(|v| v.description).collect::<Vec<_>>().join("; ")))?;
                if epoch < 0 {
                    return Err(bad(n, format!("epoch {epoch} is negative")));
                }
                if epoch > tidemark_core::restore::EPOCH_CEILING {
                    return Err(bad(
                        n,
                        format!(
                            "epoch {epoch} is above the highest epoch tidemark grants ({})",
                            tidemark_core::restore::EPOCH_CEILING
                        ),
                    ));
                }
                let consumer = match (next_snapshot, created_at, updated_at) {
                    (None, None, None) => None,
                    (Some(next), Some(created), Some(updated)) => {
                        if next < 1 {
                            return Err(bad(n, format!("next_snapshot {next} must be >= 1")));
                        }
                        Some(ConsumerRecord {
                            next_snapshot: next,
                            created_at: parse_time(&created).map_err(|why| bad(n, why))?,
                            updated_at: parse_time(&updated).map_err(|why| bad(n, why))?,
                        })
                    }
                    _ => {
                        return Err(bad(
                            n,
                            "a consumer needs next_snapshot, created_at and updated_at together".into(),
                        ));
                    }
                };
                if !seen_keys.insert(key.clone()) {
                    return Err(bad(n, format!("key {key} twice")));
                }
                file.keys.push(ExportedKey {
                    key,
                    epoch,
                    consumer,
                    latest_snapshot,
                });
            }
            Line::End {
                options,
                registrations,
                keys,
            } => {
                let counted = (
                    file.options.len() as u64,
                    file.registrations.len() as u64,
                    file.keys.len() as u64,
                );
                if counted != (options, registrations, keys) {
                    return Err(bad(
                        n,
                        format!(
                            "the trailer counts {options} options, {registrations} registrations and {keys} keys; \
                             the file holds {}, {} and {}",
                            counted.0, counted.1, counted.2
                        ),
                    ));
                }
                end = Some(n);
            }
        }
    }
    if end.is_none() {
        return Err(CoreError::invalid(
            "lines",
            format!(
                "no trailer after line {}: the export was cut short; nothing was imported",
                lines.len()
            ),
        ));
    }
    Ok(Parsed {
        file,
        exported_at,
        server_version: header.server_version,
    })
}
