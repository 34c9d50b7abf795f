//! The consumer mirror (SPEC §9): for registered Paimon tables, writes each
//! consumer's position into the table's own consumer file, deletes the
//! files of deleted consumers, and rewrites files whose consumer was
//! refreshed, so the file's modification time tracks `updated_at` (Paimon
//! expires consumer files by modification time).
//!
//! The database stays the source of truth. The mirror only ever writes what
//! it read from committed rows, so a file never shows a position before it
//! is durable in the database, and a mirror failure never fails a worker's
//! commit: it is retried every round and reported per consumer
//! (DescribeConsumer) and in the metrics. Every replica runs the mirror;
//! each re-reads a consumer right before writing its file. On object stores
//! every write puts content, so each one is compared: the object's version
//! is read first, then the database, and the put replaces only that version
//! (or creates the object only if it is still absent). A write racing
//! another replica's later write or delete fails its condition and is read
//! again next time; it never lands stale. Whatever a stale round leaves
//! behind on a local disk is corrected by the next one.
//!
//! The mirror is also a keeper (SPEC §9): every few rounds it compares the
//! files with the database. A file deleted, overwritten or torn from
//! outside is written back (counted, logged and recorded in history); on
//! tables whose schema sets Paimon's `consumer.expiration-time`, the file of
//! every consumer tidemark keeps is rewritten before it is half a refresh
//! interval old, whatever the commit rate, so Paimon never expires it; live
//! full-scan pins get files of their own (`consumer-tidemark~pin~<lease>`),
//! and pin files without a live pin are deleted. It never writes into a
//! branch whose directory is gone.

mod files;
mod keeper;
mod rounds;

use std::collections::HashMap;
use std::time::Duration;

use tidemark_paimon::PaimonTable;
use tidemark_store::Store;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use files::FileTurns;
use keeper::Keeper;
use rounds::{ROUND_LIMIT, RoundDone, round};
use tidemark_store::MirrorBackoff;

/// The mirror's own settings (from `ServerConfig`).
#[derive(Debug, Clone, Copy)]
pub struct MirrorSettings {
    /// How often stale files are brought up to date; zero turns it off.
    pub interval: Duration,
    /// The keeper's interval (see [`Keeper`]).
    pub refresh: Duration,
}

/// The longest a round or a keeper pass takes (a pass over many files on
/// a slow store takes up to the refresh interval).
const PASS_LIMIT: Duration = Duration::from_secs(120);

/// Mirrors every `settings.interval` until `stop`.
pub(crate) async fn run(store: Store, settings: MirrorSettings, stop: CancellationToken) {
    if settings.interval.is_zero() {
        tracing::info!("consumer mirror disabled");
        return;
    }
    // The rounds and the keeper run side by side: a keeper pass over many
    // files on a slow store never holds up the rounds, which bring moved
    // and dropped consumers' files up to date within an interval.
    let turns = FileTurns::new();
    // A file that cannot be written is tried again after an interval, then
    // twice as long each time, up to 64 intervals (at most 5 minutes): a
    // dropped branch or revoked credentials cost a few calls a minute, not
    // a round's worth each interval.
    let backoff = MirrorBackoff {
        base: settings.interval,
        cap: (settings.interval * 64)
            .min(Duration::from_secs(300))
            .max(settings.interval),
    };
    let rounds = async {
        let mut tables: HashMap<String, PaimonTable> = HashMap::new();
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(settings.interval) => {}
            }
            // A full round goes again at once, so a backlog drains quickly;
            // one that only failed waits its interval.
            // Client-side limits on the whole round and pass: a statement
            // on a half-open database connection never returns.
            while let Ok(Ok(RoundDone { tasks, failed })) = tokio::time::timeout(
                PASS_LIMIT,
                round(&store, settings.refresh, backoff, &mut tables, &turns),
            )
            .await
            {
                if tasks < ROUND_LIMIT as usize || failed == tasks || stop.is_cancelled() {
                    break;
                }
            }
        }
    };
    let keeping = async {
        let mut tables: HashMap<String, PaimonTable> = HashMap::new();
        let mut keeper = Keeper::new(settings.interval, settings.refresh, turns.clone(), backoff);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(settings.interval) => {}
            }
            if keeper.due() {
                let span = tracing::debug_span!("mirror keeper pass", otel.name = "tidemark.mirror_keeper_pass");
                if tokio::time::timeout(
                    PASS_LIMIT.max(settings.refresh),
                    keeper.pass(&store, &mut tables).instrument(span),
                )
                .await
                .is_err()
                {
                    tracing::warn!("mirror keeper: a pass did not finish in time; the next starts afresh");
                }
            }
        }
    };
    tokio::join!(rounds, keeping);
}
