//! The worker contract cannot break silently. `proto/baseline.txt` records
//! every message field, enum value and RPC of the `tidemark.*` packages as
//! they landed; this test compares the compiled protos with it.
//!
//! - A breaking change fails: a message, field, enum value or RPC removed
//!   (a removed field must be `reserved`), a field's number, name, type,
//!   cardinality or oneof changed, an RPC's request, response or streaming
//!   changed. Workers built against the old contract (Rust, Python, grpcurl
//!   scripts using the JSON names) would misread or be refused. A field
//!   that gains presence (singular to proto3 `optional`) is not a break: its
//!   number, name, type and wire format stay, and JSON now prints it when
//!   set to its default; losing presence is.
//! - An addition fails too until it is recorded, so the baseline always
//!   describes main: rerun with `TIDEMARK_UPDATE_PROTO_BASELINE=1` (which
//!   refuses to record a breaking change).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use prost::Message;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FileDescriptorSet};

fn baseline_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../proto/baseline.txt")
}

/// One line per fact, keyed by what must stay: `message M field N` ->
/// `name type label oneof`, `enum E value N` -> `name`, `service S rpc R`
/// -> `request response streaming`, `message M reserved N` -> "".
fn contract(set: &FileDescriptorSet) -> BTreeMap<String, String> {
    let mut facts = BTreeMap::new();
    for file in set.file.iter().filter(|f| f.package().starts_with("tidemark.")) {
        let package = file.package();
        for message in &file.message_type {
            message_facts(&format!("{package}.{}", message.name()), message, &mut facts);
        }
        for e in &file.enum_type {
            let name = format!("{package}.{}", e.name());
            facts.insert(format!("enum {name}"), String::new());
            for value in &e.value {
                facts.insert(format!("enum {name} value {}", value.number()), value.name().to_owned());
            }
        }
        for service in &file.service {
            let name = format!("{package}.{}", service.name());
            facts.insert(format!("service {name}"), String::new());
            for rpc in &service.method {
                facts.insert(
                    format!("service {name} rpc {}", rpc.name()),
                    format!(
                        "{} {} client_streaming={} server_streaming={}",
                        rpc.input_type(),
                        rpc.output_type(),
                        rpc.client_streaming(),
                        rpc.server_streaming()
                    ),
                );
            }
        }
    }
    facts
}

fn message_facts(name: &str, message: &DescriptorProto, facts: &mut BTreeMap<String, String>) {
    facts.insert(format!("message {name}"), String::new());
    for field in &message.field {
        let kind = match field.r#type() {
            Type::Message | Type::Enum => field.type_name().to_owned(),
            other => other.as_str_name().trim_start_matches("TYPE_").to_lowercase(),
        };
        let label = match field.label() {
            Label::Repeated => "repeated",
            _ if field.proto3_optional() => "optional",
            _ => "singular",
        };
        // A proto3 `optional` field sits in a synthetic oneof; only real
        // oneofs are part of the contract.
        let oneof = field
            .oneof_index
            .filter(|_| !field.proto3_optional())
            .and_then(|i| message.oneof_decl.get(usize::try_from(i).ok()?))
            .map(|o| o.name().to_owned())
            .unwrap_or_else(|| "-".to_owned());
        facts.insert(
            format!("message {name} field {}", field.number()),
            format!("{} {kind} {label} oneof={oneof}", field.name()),
        );
    }
    for range in &message.reserved_range {
        for number in range.start()..range.end() {
            facts.insert(format!("message {name} reserved {number}"), String::new());
        }
    }
    for nested in &message.nested_type {
        message_facts(&format!("{name}.{}", nested.name()), nested, facts);
    }
    for e in &message.enum_type {
        let enum_name = format!("{name}.{}", e.name());
        facts.insert(format!("enum {enum_name}"), String::new());
        for value in &e.value {
            facts.insert(
                format!("enum {enum_name} value {}", value.number()),
                value.name().to_owned(),
            );
        }
    }
}

fn render(facts: &BTreeMap<String, String>) -> String {
    let mut out = String::from(
        "# The tidemark.* proto contract as it landed; checked by crates/tidemark-proto/tests/compatibility.rs.\n\
         # Additions: rerun that test with TIDEMARK_UPDATE_PROTO_BASELINE=1. Breaking changes are refused.\n",
    );
    for (key, value) in facts {
        out.push_str(key);
        if !value.is_empty() {
            out.push_str(" = ");
            out.push_str(value);
        }
        out.push('\n');
    }
    out
}

fn parse(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|line| match line.split_once(" = ") {
            Some((key, value)) => (key.to_owned(), value.to_owned()),
            None => (line.to_owned(), String::new()),
        })
        .collect()
}

/// What breaks clients: a recorded fact gone or changed (a field may go
/// only when its number is reserved).
fn breaking(baseline: &BTreeMap<String, String>, current: &BTreeMap<String, String>) -> Vec<String> {
    let mut found = Vec::new();
    for (key, was) in baseline {
        match current.get(key) {
            Some(now) if now == was || gains_presence(was, now) => {}
            Some(now) => found.push(format!("{key}: was `{was}`, now `{now}`")),
            None => {
                let reserved = key
                    .split_once(" field ")
                    .map(|(message, number)| format!("{message} reserved {number}"))
                    .is_some_and(|r| current.contains_key(&r));
                if !reserved {
                    found.push(format!("{key} (`{was}`) was removed"));
                }
            }
        }
    }
    found
}

/// A singular field that became proto3 `optional`, nothing else changed.
fn gains_presence(was: &str, now: &str) -> bool {
    was.contains(" singular oneof=-") && was.replacen(" singular ", " optional ", 1) == now
}

fn current() -> BTreeMap<String, String> {
    let set = FileDescriptorSet::decode(tidemark_proto::FILE_DESCRIPTOR_SET).expect("the descriptor set");
    contract(&set)
}

#[test]
fn the_proto_contract_only_grows() {
    let current = current();
    assert!(
        current
            .keys()
            .any(|k| k.starts_with("service tidemark.v1.Coordinator rpc ")),
        "the descriptor set holds the worker protocol"
    );
    let path = baseline_path();
    let recorded = std::fs::read_to_string(&path).unwrap_or_default();
    let baseline = parse(&recorded);
    let broken = breaking(&baseline, &current);
    assert!(
        broken.is_empty(),
        "breaking changes to the proto contract (add new fields and RPCs instead; reserve removed field \
         numbers):\n{}",
        broken.join("\n")
    );
    if std::env::var("TIDEMARK_UPDATE_PROTO_BASELINE").is_ok_and(|v| v == "1") {
        std::fs::write(&path, render(&current)).expect("write the baseline");
        return;
    }
    let added: BTreeSet<_> = current.keys().filter(|k| !baseline.contains_key(*k)).collect();
    assert!(
        added.is_empty(),
        "proto additions not yet in {} (rerun with TIDEMARK_UPDATE_PROTO_BASELINE=1 to record them):\n{}",
        path.display(),
        added.iter().map(|k| k.as_str()).collect::<Vec<_>>().join("\n")
    );
}

/// The check refuses what it must: a renamed field, a changed type, a
/// removed RPC, a removed field unless reserved.
#[test]
fn the_check_refuses_each_kind_of_break() {
    let baseline = current();
    let field = baseline
        .keys()
        .find(|k| k.starts_with("message tidemark.v1.CommitBatchRequest field "))
        .expect("a CommitBatchRequest field")
        .clone();
    let rpc = baseline
        .keys()
        .find(|k| k.starts_with("service tidemark.v1.Coordinator rpc "))
        .expect("a Coordinator RPC")
        .clone();
    assert!(breaking(&baseline, &baseline).is_empty());

    let mut renamed = baseline.clone();
    let value = renamed[&field].replacen(' ', "_renamed ", 1);
    renamed.insert(field.clone(), value);
    assert_eq!(breaking(&baseline, &renamed).len(), 1);

    let mut retyped = baseline.clone();
    let value = retyped[&field]
        .replace("int64", "string")
        .replace("singular", "repeated");
    retyped.insert(field.clone(), value);
    assert_eq!(breaking(&baseline, &retyped).len(), 1);

    // Gaining presence passes; losing it, or a oneof member made optional,
    // does not.
    let mut presence = baseline.clone();
    let singular = presence[&field].clone();
    assert!(singular.contains(" singular oneof=-"), "{singular}");
    presence.insert(field.clone(), singular.replacen(" singular ", " optional ", 1));
    assert!(breaking(&baseline, &presence).is_empty());
    assert_eq!(breaking(&presence, &baseline).len(), 1, "losing presence breaks");

    let mut removed = baseline.clone();
    removed.remove(&rpc);
    assert_eq!(breaking(&baseline, &removed).len(), 1);

    let mut dropped = baseline.clone();
    dropped.remove(&field);
    assert_eq!(breaking(&baseline, &dropped).len(), 1);
    let (message, number) = field.split_once(" field ").unwrap();
    dropped.insert(format!("{message} reserved {number}"), String::new());
    assert!(breaking(&baseline, &dropped).is_empty(), "a reserved number may go");
}
