//! A7 (SPEC §11): ExportState / ImportState on both stores — a round trip
//! into an empty database keeps every key, option and registration, each
//! epoch raised by the restore margin;
//! an export is one snapshot even while the database changes under it; an
//! import is a plan until executed, never lowers an epoch, keeps what the
//! target has differently unless told, refuses live leases unless forced
//! (and then fences them), obeys the allowed locations, and refuses a file
//! that is not whole without changing anything.

use std::collections::BTreeMap;

use serde_json::Value;
use tidemark_core::lease::{LeasePolicy, RESTORE_EPOCH_MARGIN};
use tidemark_e2e::{Kind, TestServer, Worker, api_error, key, offset, on_both_backends, set_consumer};
use tidemark_proto::v1 as pb;
use tidemark_proto::v1::admin_client::AdminClient;
use tidemark_server::ServerConfig;
use tonic::Code;
use tonic::transport::Channel;

on_both_backends!(
    a_round_trip_into_an_empty_database_keeps_everything,
    an_export_is_one_snapshot_while_the_database_changes,
    an_import_keeps_raises_refuses_and_fences_as_told,
    a_file_that_is_not_whole_changes_nothing,
);

async fn admin(server: &TestServer) -> AdminClient<Channel> {
    AdminClient::new(server.channel().await)
}

async fn export(admin: &mut AdminClient<Channel>, table: &str) -> Vec<String> {
    let mut stream = admin
        .export_state(pb::ExportStateRequest { table: table.into() })
        .await
        .unwrap()
        .into_inner();
    let mut lines = Vec::new();
    while let Some(message) = stream.message().await.unwrap() {
        lines.extend(message.lines);
    }
    lines
}

fn settings(execute: bool) -> pb::ImportSettings {
    pb::ImportSettings {
        execute,
        ..Default::default()
    }
}

async fn import(
    admin: &mut AdminClient<Channel>,
    lines: &[String],
    settings: pb::ImportSettings,
) -> Result<pb::ImportStateResponse, tonic::Status> {
    let mut messages: Vec<pb::ImportStateRequest> = lines
        .chunks(700)
        .map(|chunk| pb::ImportStateRequest {
            settings: None,
            lines: chunk.to_vec(),
        })
        .collect();
    messages[0].settings = Some(settings);
    admin
        .import_state(tokio_stream::iter(messages))
        .await
        .map(tonic::Response::into_inner)
}

/// The key lines of an export, by (table, branch, consumer id).
fn keys_of(lines: &[String]) -> BTreeMap<(String, String, String), Value> {
    lines
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["kind"] == "key")
        .map(|v| {
            let id = |f: &str| v[f].as_str().unwrap().to_owned();
            ((id("table"), id("branch"), id("consumer_id")), v)
        })
        .collect()
}

/// A state file made by hand: `keys` as (consumer id, epoch, next).
fn file(table: &str, keys: &[(&str, i64, Option<i64>)]) -> Vec<String> {
    let at = "2026-11-01T00:00:00.000001Z";
    let mut lines = vec![format!(
        r#"{{"format":"tidemark-state","version":1,"exported_at":"{at}","server_version":"test","table":null}}"#
    )];
    for (id, epoch, next) in keys {
        lines.push(match next {
            Some(n) => format!(
                r#"{{"kind":"key","table":"{table}","branch":"main","consumer_id":"{id}","epoch":{epoch},"next_snapshot":{n},"created_at":"{at}","updated_at":"{at}"}}"#
            ),
            None => format!(
                r#"{{"kind":"key","table":"{table}","branch":"main","consumer_id":"{id}","epoch":{epoch}}}"#
            ),
        });
    }
    lines.push(format!(
        r#"{{"kind":"end","options":0,"registrations":0,"keys":{}}}"#,
        keys.len()
    ));
    lines
}

async fn a_round_trip_into_an_empty_database_keeps_everything(kind: Kind) {
    let source = TestServer::start_with(kind, LeasePolicy::default(), ServerConfig::default()).await;
    let mut from = admin(&source).await;
    let dir = tempfile::tempdir().unwrap();
    tidemark_e2e::paimon_table_dir(dir.path(), 5, 1_800_000_000_000, "");
    from.register_table(pb::RegisterTableRequest {
        table: "db.orders".into(),
        location: dir.path().display().to_string(),
        execute: true,
    })
    .await
    .unwrap();
    from.set_table_options(pb::SetTableOptionsRequest {
        table: "db.orders".into(),
        options: [("consumer.expiration-time".to_owned(), "3 d".to_owned())].into(),
        unset: Vec::new(),
        execute: true,
    })
    .await
    .unwrap();
    // Consumers written by leases (epochs 1..), one released, one revoked
    // (an epoch burned), one still held, and one written by an operator.
    let client = source.client().await;
    let mut held = Vec::new();
    for (i, id) in ["a", "b", "c"].iter().enumerate() {
        let k = key("db.orders", "main", id);
        let mut w = Worker::acquire(&client, &k, "q", None).await.unwrap();
        w.commit(1, offset(3 + i as i64, 0, false, Some(1))).await.unwrap();
        held.push(w);
    }
    held[0].release().await.unwrap();
    from.revoke_lease(pb::RevokeLeaseRequest {
        consumer: Some(key("db.orders", "main", "b")),
        reason: "test".into(),
        execute: true,
        expected_lease_id: None,
    })
    .await
    .unwrap();
    set_consumer(&mut from, "db.other", "ops", 9).await;
    let exported = export(&mut from, "").await;
    assert!(
        exported[0].contains(r#""format":"tidemark-state","version":1"#),
        "{}",
        exported[0]
    );
    assert!(exported.last().unwrap().contains(r#""kind":"end""#));
    let before = keys_of(&exported);
    assert_eq!(before.len(), 4);
    assert_eq!(
        before[&("db.orders".into(), "main".into(), "b".into())]["epoch"],
        2,
        "revoked: burned"
    );

    let target = TestServer::start_with(kind, LeasePolicy::default(), ServerConfig::default()).await;
    let mut to = admin(&target).await;
    let empty = target.fingerprint().await;
    let plan = import(&mut to, &exported, settings(false)).await.unwrap();
    assert_eq!(plan.executed, Some(false));
    assert_eq!((plan.keys, plan.consumers_created, plan.keys_written), (4, 4, 4));
    assert_eq!(target.fingerprint().await, empty, "a plan changes nothing");
    let done = import(&mut to, &exported, settings(true)).await.unwrap();
    assert_eq!(done.executed, Some(true));
    assert_eq!(
        (done.consumers_created, done.keys_written, done.keys_refused),
        (4, 4, 0)
    );
    let settings_done: Vec<_> = done
        .tables
        .iter()
        .map(|t| (t.setting.as_str(), t.outcome.as_str()))
        .collect();
    assert_eq!(settings_done, [("options", "created"), ("registration", "created")]);

    // The target's own export holds the same keys, times included, each
    // epoch raised by the restore margin (issue 29: no epoch the source
    // granted after the backup is granted again).
    let again = export(&mut to, "").await;
    let mut raised = before.clone();
    for line in raised.values_mut() {
        line["epoch"] = (line["epoch"].as_i64().unwrap() + RESTORE_EPOCH_MARGIN).into();
    }
    assert_eq!(keys_of(&again), raised);
    let not_keys = |lines: &[String]| -> Vec<String> {
        lines
            .iter()
            .filter(|l| !l.contains(r#""kind":"key""#))
            .cloned()
            .collect()
    };
    assert_eq!(
        not_keys(&again[1..again.len() - 1]),
        not_keys(&exported[1..exported.len() - 1]),
        "options, registration"
    );
    // A second import changes nothing.
    let twice = import(&mut to, &exported, settings(true)).await.unwrap();
    assert_eq!((twice.consumers_same, twice.keys_written), (4, 0));

    // No epoch goes back: the next lease on every key is above any the
    // source issued, and the source's leases are unknown here.
    let target_client = target.client().await;
    for ((_, _, id), line) in &before {
        let table = line["table"].as_str().unwrap();
        let w = Worker::acquire(&target_client, &key(table, "main", id), "q2", None)
            .await
            .unwrap();
        assert_eq!(
            w.lease.epoch,
            line["epoch"].as_i64().unwrap() + RESTORE_EPOCH_MARGIN + 1,
            "{id}"
        );
    }
    let mut zombie = held.pop().unwrap();
    zombie.client = target_client;
    let err = api_error(zombie.commit(2, offset(9, 0, false, Some(1))).await);
    assert_eq!(err.reason, "LEASE_NOT_HELD", "{err:?}");
}

async fn an_export_is_one_snapshot_while_the_database_changes(kind: Kind) {
    let server = TestServer::start_with(kind, LeasePolicy::default(), ServerConfig::default()).await;
    let mut admin = admin(&server).await;
    // Enough keys for many pages, so most are read after the changes.
    let ids: Vec<String> = (0..12_000).map(|i| format!("c{i:05}")).collect();
    let seeded: Vec<(&str, i64, Option<i64>)> = ids.iter().map(|id| (id.as_str(), 1, Some(5))).collect();
    import(&mut admin, &file("db.t", &seeded), settings(true))
        .await
        .unwrap();

    let mut stream = admin
        .export_state(pb::ExportStateRequest { table: String::new() })
        .await
        .unwrap()
        .into_inner();
    let first = stream.message().await.unwrap().unwrap();
    assert!(first.lines[0].contains("tidemark-state"));
    // Meanwhile: the last key moves, a key is deleted, a new one appears.
    set_consumer(&mut admin, "db.t", "c11999", 77).await;
    admin
        .delete_consumer(pb::DeleteConsumerRequest {
            consumer: Some(key("db.t", "main", "c11000")),
            expected_next_snapshot: None,
            force: false,
            execute: true,
            expected_lease_id: None,
            reason: String::new(),
        })
        .await
        .unwrap();
    set_consumer(&mut admin, "db.t", "c99999", 3).await;
    let mut lines = first.lines;
    while let Some(message) = stream.message().await.unwrap() {
        lines.extend(message.lines);
    }
    let keys = keys_of(&lines);
    assert_eq!(keys.len(), 12_000, "nothing added or removed mid-export");
    let at = |id: &str| keys[&("db.t".to_owned(), "main".to_owned(), id.to_owned())]["next_snapshot"].clone();
    assert_eq!(
        at("c11999"),
        5,
        "the position at the snapshot, not the one written during the export"
    );
    assert_eq!(at("c11000"), 5);
    assert!(!keys.contains_key(&("db.t".into(), "main".into(), "c99999".into())));
    assert!(lines.last().unwrap().contains(r#""keys":12000"#));
}

async fn an_import_keeps_raises_refuses_and_fences_as_told(kind: Kind) {
    let lake = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let config = ServerConfig {
        allowed_table_locations: Some(
            tidemark_paimon::LocationAllowList::new(&[lake.path().display().to_string()]).unwrap(),
        ),
        ..ServerConfig::default()
    };
    let server = TestServer::start_with(kind, LeasePolicy::default(), config).await;
    let mut admin = admin(&server).await;
    let client = server.client().await;
    // The target: "kept" at 30, "raised" at epoch 1, "held" leased (epoch 1).
    set_consumer(&mut admin, "db.t", "kept", 30).await;
    let mut raised = Worker::acquire(&client, &key("db.t", "main", "raised"), "q", None)
        .await
        .unwrap();
    raised.commit(1, offset(8, 0, false, Some(1))).await.unwrap();
    raised.release().await.unwrap();
    let mut held = Worker::acquire(&client, &key("db.t", "main", "held"), "q", None)
        .await
        .unwrap();
    held.commit(1, offset(4, 0, false, Some(1))).await.unwrap();
    let lines = file(
        "db.t",
        &[
            ("kept", 0, Some(12)),
            ("raised", 6, Some(20)),
            ("held", 5, Some(2)),
            ("low", 0, None),
        ],
    );

    // Kept unless told; the epoch goes up; the live lease refuses.
    let plan = import(&mut admin, &lines, settings(false)).await.unwrap();
    let by_id = |r: &pb::ImportStateResponse| -> BTreeMap<String, pb::ImportedKey> {
        r.changes
            .iter()
            .map(|c| (c.consumer.clone().unwrap().consumer_id, c.clone()))
            .collect()
    };
    let planned = by_id(&plan);
    assert_eq!(planned["kept"].consumer_outcome, "kept");
    assert_eq!(planned["kept"].new_next_snapshot, Some(30));
    assert_eq!(
        (
            planned["raised"].consumer_outcome.as_str(),
            planned["raised"].old_epoch,
            planned["raised"].new_epoch
        ),
        ("kept", 1, 6 + RESTORE_EPOCH_MARGIN),
        "the position stays, the epoch goes up past the file's by the restore margin"
    );
    assert_eq!(planned["held"].refused_reason, "LEASE_HELD");
    assert!(!planned.contains_key("low"), "an empty key writes nothing");
    let done = import(&mut admin, &lines, settings(true)).await.unwrap();
    assert_eq!((done.keys_written, done.keys_refused, done.epochs_raised), (1, 1, 1));
    let (state, _) = server.stored(&key("db.t", "main", "raised")).await;
    let state = state.unwrap();
    assert_eq!(
        (state.epoch, state.next_snapshot()),
        (6 + RESTORE_EPOCH_MARGIN, Some(9))
    );
    let (kept, _) = server.stored(&key("db.t", "main", "kept")).await;
    assert_eq!(kept.unwrap().next_snapshot(), Some(30));
    held.renew().await.expect("a refused import leaves the holder alone");

    // An epoch is never lowered, even when told to replace.
    let lower = file("db.t", &[("raised", 2, Some(9))]);
    let r = import(
        &mut admin,
        &lower,
        pb::ImportSettings {
            execute: true,
            replace_existing: true,
            force: true,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(r.keys_written, 0);
    assert_eq!(
        server.stored(&key("db.t", "main", "raised")).await.0.unwrap().epoch,
        6 + RESTORE_EPOCH_MARGIN
    );

    // Told: replaced, and force fences the holder.
    let told = pb::ImportSettings {
        execute: true,
        replace_existing: true,
        force: true,
        ..Default::default()
    };
    let r = import(&mut admin, &lines, told).await.unwrap();
    let changed = by_id(&r);
    assert_eq!(changed["kept"].consumer_outcome, "replaced");
    assert_eq!(changed["held"].consumer_outcome, "replaced");
    assert_eq!(changed["held"].revoked_lease.as_ref().unwrap().holder, "q");
    let err = api_error(held.commit(2, offset(6, 0, false, Some(1))).await);
    assert_eq!(
        err.reason, "LEASE_NOT_HELD",
        "the fenced holder's next commit is refused: {err:?}"
    );
    assert_eq!(
        server
            .stored(&key("db.t", "main", "kept"))
            .await
            .0
            .unwrap()
            .next_snapshot(),
        Some(12)
    );

    // Registrations obey the allowed locations; the whole import is refused.
    let outside_file = vec![
        lines[0].clone(),
        format!(
            r#"{{"kind":"registration","table":"db.t","location":"{}","identity":null}}"#,
            outside.path().display()
        ),
        r#"{"kind":"key","table":"db.t","branch":"main","consumer_id":"new","epoch":0,"next_snapshot":3,"created_at":"2026-11-01T00:00:00Z","updated_at":"2026-11-01T00:00:00Z"}"#.to_owned(),
        r#"{"kind":"end","options":0,"registrations":1,"keys":1}"#.to_owned(),
    ];
    let before = server.fingerprint().await;
    let err = api_error(import(&mut admin, &outside_file, settings(true)).await);
    assert_eq!(
        (err.code, err.reason.as_str()),
        (Code::PermissionDenied, "LOCATION_NOT_ALLOWED")
    );
    assert_eq!(server.fingerprint().await, before, "nothing imported");
    // Without its registrations, the same file imports.
    let r = import(
        &mut admin,
        &outside_file,
        pb::ImportSettings {
            execute: true,
            skip_registrations: true,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!((r.consumers_created, r.tables.len()), (1, 0));
}

async fn a_file_that_is_not_whole_changes_nothing(kind: Kind) {
    let server = TestServer::start(kind).await;
    let mut admin = admin(&server).await;
    let whole = file("db.t", &[("a", 1, Some(3)), ("b", 2, Some(4))]);
    let before = server.fingerprint().await;
    let mut duplicated = whole.clone();
    duplicated.insert(2, whole[1].clone());
    let mut newer = whole.clone();
    newer[0] = newer[0].replace(r#""version":1"#, r#""version":2"#);
    let mut miscounted = whole.clone();
    *miscounted.last_mut().unwrap() = miscounted.last().unwrap().replace(r#""keys":2"#, r#""keys":3"#);
    let mut typo = whole.clone();
    typo[1] = typo[1].replace("next_snapshot", "next_snapshoot");
    let cases = [
        ("cut short", whole[..whole.len() - 1].to_vec(), "no trailer"),
        (
            "cut mid-line",
            vec![whole[0].clone(), whole[1][..40].to_owned()],
            "line 2",
        ),
        ("a key twice", duplicated, "twice"),
        ("a newer version", newer, "version 2"),
        ("counts that differ", miscounted, "the trailer counts"),
        ("an unknown field", typo, "next_snapshoot"),
        ("not an export", vec!["{}".to_owned()], "line 1"),
    ];
    for (what, lines, says) in cases {
        let err = api_error(import(&mut admin, &lines, settings(true)).await);
        assert_eq!(err.code, Code::InvalidArgument, "{what}: {err:?}");
        assert_eq!(err.fields(), ["lines"], "{what}");
        assert!(err.message.contains(says), "{what}: {}", err.message);
    }
    // Settings only in the first message.
    let messages = vec![
        pb::ImportStateRequest {
            settings: Some(settings(true)),
            lines: whole[..2].to_vec(),
        },
        pb::ImportStateRequest {
            settings: Some(settings(true)),
            lines: whole[2..].to_vec(),
        },
    ];
    let err = api_error(admin.import_state(tokio_stream::iter(messages)).await);
    assert_eq!(err.fields(), ["settings"]);
    assert_eq!(server.fingerprint().await, before, "nothing was written");
    import(&mut admin, &whole, settings(true)).await.unwrap();
    assert_ne!(server.fingerprint().await, before, "the whole file imports");
}
