//! Unit tests of the checker (the parent module).

use super::*;

fn row(id: i64, at_ms: i64, event: &str, epoch: i64, lease: &str, holder: &str, next: Option<i64>) -> pb::HistoryEntry {
    pb::HistoryEntry {
        id,
        at: Some(prost_types::Timestamp {
            seconds: at_ms / 1000,
            nanos: i32::try_from((at_ms % 1000) * 1_000_000).unwrap(),
        }),
        event: event.into(),
        epoch: Some(epoch),
        lease_id: lease.into(),
        holder: holder.into(),
        new_next_snapshot: next,
        batch_id: next.map(|_| id),
        ..Default::default()
    }
}

fn op(worker: u32, op: &str, lease: &str, epoch: i64, t0_ms: i64, t1_ms: i64) -> Record {
    Record {
        worker,
        op: op.into(),
        key: "k0".into(),
        lease: lease.into(),
        epoch,
        t0: t0_ms * 1000,
        t1: t1_ms * 1000,
        code: "Ok".into(),
        ..Record::default()
    }
}

fn commit(worker: u32, lease: &str, epoch: i64, batch: i64, end: (i64, i64, i64), next: i64, t_ms: i64) -> Record {
    Record {
        batch,
        end,
        next: Some(next),
        // What C3 answers for the clean history's two commits.
        outcome: if batch == 2 {
            "COMMIT_OUTCOME_CREATED"
        } else {
            "COMMIT_OUTCOME_REFRESHED"
        }
        .into(),
        ttl_us: 1_500_000,
        ..op(worker, "commit", lease, epoch, t_ms, t_ms + 1)
    }
}

/// A clean run: w0 commits twice and releases, then w1 takes over.
fn clean() -> (Vec<Record>, History, Finals) {
    let records = vec![
        Record {
            ttl_us: 1_500_000,
            ..op(0, "acquire", "L1", 1, 0, 1)
        },
        commit(0, "L1", 1, 2, (5, 2, 3), 6, 10),
        commit(0, "L1", 1, 3, (6, 0, 3), 6, 20),
        Record {
            outcome: "RELEASED".into(),
            ..op(0, "release", "L1", 1, 30, 31)
        },
        Record {
            ttl_us: 1_500_000,
            ..op(1, "acquire", "L2", 2, 40, 41)
        },
    ];
    let history = vec![
        row(1, 0, "LEASE_ACQUIRE", 1, "L1", "w0", None),
        row(2, 10, "CREATE", 1, "L1", "w0", Some(6)),
        row(3, 20, "REFRESH", 1, "L1", "w0", Some(6)),
        row(4, 30, "LEASE_RELEASE", 1, "L1", "w0", None),
        row(5, 40, "LEASE_ACQUIRE", 2, "L2", "w1", None),
    ];
    (
        records,
        BTreeMap::from([("k0".to_owned(), history)]),
        BTreeMap::from([("k0".to_owned(), Some(6))]),
    )
}

#[test]
fn a_clean_history_passes() {
    let (records, history, finals) = clean();
    let report = check(&records, &[], &history, &finals, &Settings::default());
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    assert_eq!(report.acknowledged_commits, 2);
}

#[test]
fn a_commit_accepted_from_a_fenced_epoch_is_caught() {
    let (records, mut history, finals) = clean();
    history
        .get_mut("k0")
        .unwrap()
        .push(row(6, 50, "ADVANCE", 1, "L1", "w0", Some(7)));
    let report = check(&records, &[], &history, &finals, &Settings::default());
    assert!(
        report
            .violations
            .iter()
            .any(|v| v.contains("accepted a commit with epoch 1")),
        "{:?}",
        report.violations
    );
}

#[test]
fn violations_are_counted_by_kind() {
    let kinds = violation_kinds(&[
        "k0: acknowledged commit (lease a, batch 1) is not in the server's history".into(),
        "k1: acknowledged commit (lease b, batch 22) is not in the server's history".into(),
        "own-w1: w3 was granted epoch 7 while w1's epoch 6 was live for another 12 ms".into(),
    ]);
    assert_eq!(
        kinds,
        vec![
            ("acknowledged commit  is not in the server's history".to_owned(), 2),
            (
                "wN was granted epoch N while wN's epoch N was live for another N ms".to_owned(),
                1
            ),
        ]
    );
}

#[test]
fn an_internal_answer_is_caught() {
    let (mut records, history, finals) = clean();
    let mut failed = records[1].clone();
    failed.code = "Internal".into();
    failed.outcome.clear();
    records.push(failed);
    let report = check(&records, &[], &history, &finals, &Settings::default());
    assert!(
        report.violations.iter().any(|v| v.contains("answered INTERNAL")),
        "{:?}",
        report.violations
    );
}

#[test]
fn a_lost_acknowledged_commit_is_caught() {
    let (records, mut history, finals) = clean();
    history.get_mut("k0").unwrap().retain(|r| r.id != 3);
    let report = check(&records, &[], &history, &finals, &Settings::default());
    assert_eq!(report.acknowledged_commits_lost, 1, "{:?}", report.violations);
}

#[test]
fn overlapping_holders_are_caught() {
    let (mut records, mut history, finals) = clean();
    // No release: w1's grant at 40 ms falls inside w0's lease.
    records.retain(|r| r.op != "release");
    history.get_mut("k0").unwrap().retain(|r| r.event != "LEASE_RELEASE");
    let report = check(&records, &[], &history, &finals, &Settings::default());
    assert!(
        report.violations.iter().any(|v| v.contains("while w0's epoch")),
        "{:?}",
        report.violations
    );
}

#[test]
fn a_paused_worker_must_be_refused_after_resuming() {
    let pause = Fault {
        kind: "pause-worker".into(),
        target: "w0".into(),
        t0: 15_000,
        t1: 5_000_000,
    };
    let (mut records, history, finals) = clean();
    records.truncate(2); // w0 acquired and committed, then was paused
    let resumed = |name: &str, code: &str, outcome: &str| Record {
        code: code.into(),
        reason: if code == "Ok" {
            String::new()
        } else {
            "LEASE_NOT_HELD".into()
        },
        outcome: outcome.into(),
        ..op(0, name, "L1", 1, 5_001, 5_002)
    };
    for (late, learned) in [
        (resumed("commit", "FailedPrecondition", ""), true),
        (resumed("release", "Ok", "NOT_HELD"), true),
        (resumed("renew", "Ok", ""), false),
        (resumed("release", "Ok", "RELEASED"), false),
    ] {
        let mut records = records.clone();
        records.push(late.clone());
        let report = check(
            &records,
            std::slice::from_ref(&pause),
            &history,
            &finals,
            &Settings::default(),
        );
        assert_eq!(report.fenced_learned_ms.len(), usize::from(learned), "{late:?}");
        assert_eq!(
            report.violations.is_empty(),
            learned,
            "{late:?}: {:?}",
            report.violations
        );
    }
}

#[test]
fn passing_an_incomplete_snapshot_is_caught() {
    let (mut records, history, finals) = clean();
    records[2].next = Some(7); // end (6, 0, 3) is mid-snapshot
    let report = check(&records, &[], &history, &finals, &Settings::default());
    assert!(
        report
            .violations
            .iter()
            .any(|v| v.contains("passes the incomplete snapshot")),
        "{:?}",
        report.violations
    );
}

#[test]
fn a_stale_grant_epoch_and_a_backwards_move_are_caught() {
    let (records, mut history, finals) = clean();
    let rows = history.get_mut("k0").unwrap();
    rows.push(row(6, 50, "LEASE_ACQUIRE", 2, "L3", "w2", None));
    rows.push(row(7, 60, "ADVANCE", 2, "L3", "w2", Some(9)));
    rows.push(row(8, 70, "ADVANCE", 2, "L3", "w2", Some(8)));
    let report = check(&records, &[], &history, &finals, &Settings::default());
    assert!(
        report
            .violations
            .iter()
            .any(|v| v.contains("grants epoch 2 after epoch Some(2)")),
        "{:?}",
        report.violations
    );
    assert!(
        report.violations.iter().any(|v| v.contains("moves the position back")),
        "{:?}",
        report.violations
    );
}
