//! The snapshot ranges a recovery and a bulk reset plan with, read from a
//! registered table's directory after checking it is still the table
//! registered.

use std::time::Duration;

use tidemark_core::{CoreError, SnapshotRange, TableName};
use tidemark_paimon::PaimonTable;
use tidemark_store::{RegisteredTable, Store, StoreError};

use super::{Registered, registration};

/// The range to plan a recovery with: for a registered table, the one its
/// directory shows (with a warning when the worker saw another), after
/// checking the table is still the one registered; otherwise the worker's.
/// A registered table is never taken as empty: no snapshot in its directory
/// is `TABLE_LOCATION_EMPTY`, a directory that cannot be read now is
/// `TABLE_LOCATION_UNREADABLE` (retryable).
pub(crate) async fn recovery_range(
    store: &Store,
    registered: Option<Registered>,
    branch: &str,
    reported: SnapshotRange,
    warnings: &mut Vec<String>,
) -> Result<SnapshotRange, StoreError> {
    let Some(Registered {
        registration,
        directory,
    }) = registered
    else {
        return Ok(reported);
    };
    let found = checked_range(store, &registration, &directory, branch).await?;
    if (found.earliest, found.latest) != (reported.earliest(), reported.latest_snapshot) {
        warnings.push(format!(
            "TABLE_RANGE_FROM_STORAGE: the table's directory holds snapshots {}\u{2013}{}; the worker reported \
             {}\u{2013}{}; planned with the directory's",
            found.earliest,
            found.latest,
            reported.earliest(),
            reported.latest_snapshot
        ));
    }
    Ok(SnapshotRange {
        earliest_snapshot: found.earliest,
        latest_snapshot: found.latest,
        ..reported
    })
}

/// A registered branch's snapshot range from its directory, after checking
/// the table there is still the one registered: never taken as empty (no
/// snapshot is `TABLE_LOCATION_EMPTY`, an unreadable directory
/// `TABLE_LOCATION_UNREADABLE`).
async fn checked_range(
    store: &Store,
    registration: &RegisteredTable,
    directory: &PaimonTable,
    branch: &str,
) -> Result<tidemark_paimon::SnapshotRange, StoreError> {
    let found = directory
        .snapshot_range(branch)
        .await
        .map_err(|e| unreadable(registration, &e))?
        .ok_or_else(|| CoreError::TableLocationEmpty {
            table: registration.table.as_str().to_owned(),
            branch: branch.to_owned(),
            location: registration.location.clone(),
        })?;
    check_identity(store, registration, directory).await?;
    Ok(found)
}

/// How long ago (by `now`) a snapshot committed at `millis` (Unix ms) was.
pub(crate) fn waited_since(millis: i64, now: tidemark_core::Timestamp) -> Duration {
    tidemark_core::Timestamp::from_micros(millis.saturating_mul(1000)).until(now)
}

/// SPEC §9: the table at the location must be the one registered. A
/// registration older than identities records the one it finds.
async fn check_identity(
    store: &Store,
    registration: &RegisteredTable,
    directory: &PaimonTable,
) -> Result<(), StoreError> {
    let found = directory.identity().await.map_err(|e| unreadable(registration, &e))?;
    match (&registration.identity, found) {
        (Some(registered), Some(found)) if *registered != found => Err(CoreError::TableIdentityChanged {
            table: registration.table.as_str().to_owned(),
            location: registration.location.clone(),
            registered: registered.clone(),
            found,
        }
        .into()),
        (None, Some(found)) => {
            store
                .paimon()
                .set_table_identity(&registration.table, &registration.location, &found)
                .await
        }
        // The same table, or one without a schema file to tell (a bare
        // directory of snapshots): nothing to compare.
        _ => Ok(()),
    }
}

/// `TABLE_LOCATION_UNREADABLE` for a registered table whose storage failed.
fn unreadable(registration: &RegisteredTable, e: &tidemark_paimon::PaimonError) -> CoreError {
    CoreError::TableLocationUnreadable {
        table: registration.table.as_str().to_owned(),
        location: registration.location.clone(),
        why: e.to_string(),
    }
}

/// A6: what a bulk reset resolves its target against: the registered
/// table's earliest and latest snapshot on `branch`, and for a time target
/// the first snapshot at or after it. `TABLE_NOT_REGISTERED` when the table
/// is not registered; `TABLE_LOCATION_EMPTY` / `TABLE_LOCATION_UNREADABLE` /
/// `TABLE_IDENTITY_CHANGED` as for recovery.
pub(crate) async fn reset_snapshots(
    store: &Store,
    table: &TableName,
    branch: &str,
    at_millis: Option<i64>,
) -> Result<tidemark_core::reset::TableSnapshots, StoreError> {
    let Some(registration) = registration(store, table).await? else {
        return Err(CoreError::TableNotRegistered {
            table: table.as_str().to_owned(),
        }
        .into());
    };
    let directory = PaimonTable::open(&registration.location).map_err(|e| unreadable(&registration, &e))?;
    let range = checked_range(store, &registration, &directory, branch).await?;
    let first_at_time = match at_millis {
        Some(at) => first_at_or_after(&directory, branch, range, at)
            .await
            .map_err(|e| unreadable(&registration, &e))?,
        None => None,
    };
    Ok(tidemark_core::reset::TableSnapshots {
        earliest: range.earliest,
        latest: range.latest,
        first_at_time,
    })
}

/// The first snapshot at or after `at` (Unix ms), by SPEC §11's rule:
/// a binary search over the live snapshots' commit times (Paimon keeps
/// them in commit order) for the last one before the time, then the rule
/// itself on the snapshots around it.
async fn first_at_or_after(
    directory: &PaimonTable,
    branch: &str,
    range: tidemark_paimon::SnapshotRange,
    at: i64,
) -> Result<Option<i64>, tidemark_paimon::PaimonError> {
    let (mut low, mut high, mut last_before) = (range.earliest, range.latest, None);
    while low <= high {
        let middle = low + (high - low) / 2;
        if directory.snapshot_millis(branch, middle).await? < at {
            last_before = Some(middle);
            low = middle + 1;
        } else {
            high = middle - 1;
        }
    }
    let mut around = vec![
        (range.earliest, directory.snapshot_millis(branch, range.earliest).await?),
        (range.latest, directory.snapshot_millis(branch, range.latest).await?),
    ];
    if let Some(before) = last_before {
        around.push((before, directory.snapshot_millis(branch, before).await?));
        if before < range.latest {
            around.push((before + 1, directory.snapshot_millis(branch, before + 1).await?));
        }
    }
    Ok(tidemark_core::reset::first_snapshot_at_or_after(&around, at))
}
