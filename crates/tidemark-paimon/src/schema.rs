//! The table's schemas: its identity (the first schema file, kept for the
//! table's whole life) and the options of its latest schema.

use std::time::Duration;

use object_store::ObjectStore;

use crate::{CONSUMER_EXPIRATION_OPTION, MAIN_BRANCH, PaimonError, PaimonTable};

impl PaimonTable {
    pub(crate) async fn schema_ids(&self, branch: &str) -> Result<Vec<i64>, PaimonError> {
        let dir = self.branch_root(branch).child("schema");
        let listed = match self.store.list_with_delimiter(Some(&dir)).await {
            Ok(listed) => listed,
            Err(object_store::Error::NotFound { .. }) => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        };
        let mut ids: Vec<i64> = listed
            .objects
            .iter()
            .filter_map(|o| o.location.filename()?.strip_prefix("schema-")?.parse().ok())
            .collect();
        ids.sort_unstable();
        Ok(ids)
    }

    pub(crate) async fn schema_file(&self, id: i64) -> Result<Vec<u8>, PaimonError> {
        self.branch_schema_file(MAIN_BRANCH, id).await
    }

    async fn branch_schema_file(&self, branch: &str, id: i64) -> Result<Vec<u8>, PaimonError> {
        let path = self.branch_root(branch).child("schema").child(format!("schema-{id}"));
        Ok(self.store.get(&path).await?.bytes().await?.to_vec())
    }

    /// The table's identity: a digest of its first schema file, which Paimon
    /// writes when the table is created (with the creation time in it) and
    /// keeps for the table's whole life. A table dropped and recreated
    /// under the same name has another. `None` when the table has no schema
    /// (no table at this location).
    pub async fn identity(&self) -> Result<Option<String>, PaimonError> {
        use sha2::Digest;
        let Some(&first) = self.schema_ids(MAIN_BRANCH).await?.first() else {
            return Ok(None);
        };
        let content = self.schema_file(first).await?;
        let digest = sha2::Sha256::digest(&content);
        let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        Ok(Some(format!("schema-{first}:{hex}")))
    }

    /// The table's `consumer.expiration-time` from its latest schema's
    /// options; `None` when unset (or the table has no schema).
    pub async fn consumer_expiration(&self) -> Result<Option<Duration>, PaimonError> {
        self.branch_consumer_expiration(MAIN_BRANCH).await
    }

    /// `consumer.expiration-time` as Paimon sees it on `branch`: a branch
    /// has schemas of its own (copied from main when it was created, then
    /// altered on their own), and Paimon expires the branch's consumer
    /// files by its latest. A branch without a schema of its own reads
    /// main's.
    pub async fn branch_consumer_expiration(&self, branch: &str) -> Result<Option<Duration>, PaimonError> {
        let mut branch = branch;
        let mut latest = self.schema_ids(branch).await?.last().copied();
        if latest.is_none() && branch != MAIN_BRANCH {
            branch = MAIN_BRANCH;
            latest = self.schema_ids(branch).await?.last().copied();
        }
        let Some(latest) = latest else {
            return Ok(None);
        };
        let content = self.branch_schema_file(branch, latest).await?;
        let path = || match branch {
            MAIN_BRANCH => format!("schema/schema-{latest}"),
            _ => format!("branch/branch-{branch}/schema/schema-{latest}"),
        };
        let schema: serde_json::Value = serde_json::from_slice(&content).map_err(|e| PaimonError::Malformed {
            path: path(),
            why: format!("not a Paimon schema: {e}"),
        })?;
        let Some(value) = schema["options"][CONSUMER_EXPIRATION_OPTION].as_str() else {
            return Ok(None);
        };
        parse_paimon_duration(value)
            .map(Some)
            .map_err(|why| PaimonError::Malformed {
                path: path(),
                why: format!("{CONSUMER_EXPIRATION_OPTION} {value:?}: {why}"),
            })
    }
}

/// Parses a duration as Paimon writes its options (`TimeUtils.parseDuration`):
/// a number and an optional unit (`ms`, `s`, `min`, `h`, `d`, and their long
/// forms; none means milliseconds), with optional spaces between.
pub fn parse_paimon_duration(text: &str) -> Result<Duration, String> {
    let trimmed = text.trim();
    let digits = trimmed.find(|c: char| !c.is_ascii_digit()).unwrap_or(trimmed.len());
    let number: u64 = trimmed[..digits]
        .parse()
        .map_err(|_| "expected a number and a unit, e.g. \"1 d\" or \"30min\"".to_owned())?;
    let unit = trimmed[digits..].trim().to_ascii_lowercase();
    let per_unit = match unit.as_str() {
        "ns" | "nano" | "nanos" | "nanosecond" | "nanoseconds" => Duration::from_nanos(1),
        "us" | "µs" | "micro" | "micros" | "microsecond" | "microseconds" => Duration::from_micros(1),
        "" | "ms" | "milli" | "millis" | "millisecond" | "milliseconds" => Duration::from_millis(1),
        "s" | "sec" | "secs" | "second" | "seconds" => Duration::from_secs(1),
        "m" | "min" | "mins" | "minute" | "minutes" => Duration::from_secs(60),
        "h" | "hour" | "hours" => Duration::from_secs(3600),
        "d" | "day" | "days" => Duration::from_secs(86_400),
        other => return Err(format!("unknown time unit {other:?}")),
    };
    per_unit
        .checked_mul(u32::try_from(number).map_err(|_| "too large".to_owned())?)
        .ok_or_else(|| "too large".to_owned())
}
