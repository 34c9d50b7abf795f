//! The search checked against published histories with known verdicts:
//! Porcupine's etcd histories (Jepsen logs of a register with read, write
//! and compare-and-set, from github.com/anishathalye/porcupine, commit
//! 55508eb, `test_data/jepsen`; MIT licence in
//! `testdata/porcupine/LICENSE.md`), each with the verdict Porcupine's own
//! tests expect (`testdata/porcupine/expected.txt`: 23 linearizable, 79
//! not; log 95 has none, its etcd cluster never started, and is left out). The register model and the log parsing follow Porcupine's
//! `etcdModel` and `parseJepsenLog`: an invocation is a call, its `:ok` or
//! `:fail` line the answer; a read that timed out, and any call never
//! answered, have no answer (lost). Times are line numbers, so real-time
//! order is exact (no slack).

use std::path::PathBuf;

use super::search::{Limits, Op, Spec, Verdict, search};

#[derive(Debug, Clone)]
enum Call {
    /// `None`: the register was empty; for a lost read, nothing known.
    Read(Option<i64>),
    Write(i64),
    /// `ok`: whether it swapped (unknown when the answer was lost).
    Cas {
        from: i64,
        to: i64,
        ok: bool,
    },
}

/// Porcupine's etcd model: one register, empty at first.
struct Register;

impl Spec for Register {
    type Call = Call;
    type State = Option<i64>;

    fn initial(&self) -> Option<i64> {
        None
    }

    fn apply(&self, state: &Option<i64>, op: &Op<Call>) -> Option<Option<i64>> {
        match op.call {
            Call::Read(_) if op.lost => Some(*state),
            Call::Read(seen) => (seen == *state).then_some(*state),
            Call::Write(value) => Some(Some(value)),
            Call::Cas { from, to, ok } => {
                // A lost answer fits either way; a known one must match.
                let swaps = *state == Some(from);
                (op.lost || ok == swaps).then_some(if swaps { Some(to) } else { *state })
            }
        }
    }
}

/// Parses a Jepsen etcd log as Porcupine does.
fn parse(log: &str) -> Vec<Op<Call>> {
    let mut ops: Vec<Op<Call>> = Vec::new();
    // Each process's call in flight: its index in `ops`.
    let mut open: std::collections::HashMap<u64, usize> = std::collections::HashMap::new();
    for (line_no, line) in log.lines().enumerate() {
        let t = line_no as i64;
        let Some(rest) = line.trim_end().split(" - ").nth(1) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let [process, kind, op, args @ ..] = fields.as_slice() else {
            continue;
        };
        let Ok(process) = process.parse::<u64>() else {
            continue;
        };
        let numbers = |args: &[&str]| -> Vec<i64> {
            args.iter()
                .filter_map(|a| a.trim_matches(|c| c == '[' || c == ']').parse().ok())
                .collect()
        };
        match *kind {
            ":invoke" => {
                let call = match *op {
                    ":read" => Call::Read(None),
                    ":write" => Call::Write(numbers(args)[0]),
                    ":cas" => {
                        let n = numbers(args);
                        Call::Cas {
                            from: n[0],
                            to: n[1],
                            ok: false,
                        }
                    }
                    other => panic!("unknown operation {other} on line {line_no}"),
                };
                open.insert(process, ops.len());
                ops.push(Op {
                    call,
                    t0: t,
                    t1: i64::MAX,
                    lost: true,
                });
            }
            ":ok" | ":fail" => {
                let Some(i) = open.remove(&process) else {
                    continue;
                };
                let op = &mut ops[i];
                match (&mut op.call, *kind, args) {
                    // Porcupine keeps a read that timed out as an unknown
                    // answer: it constrains nothing.
                    (Call::Read(_), ":fail", [":timed-out"]) => continue,
                    (Call::Read(seen), ":ok", [value]) => *seen = value.parse().ok(),
                    (Call::Write(_), ":ok", _) => {}
                    (Call::Cas { ok, .. }, kind, _) => *ok = kind == ":ok",
                    // A line Porcupine's parser does not match leaves the
                    // call unanswered.
                    _ => continue,
                }
                op.t1 = t;
                op.lost = false;
            }
            _ => {}
        }
    }
    ops
}

fn testdata() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata/porcupine")
}

#[test]
fn porcupines_etcd_histories_get_porcupines_verdicts() {
    let expected = std::fs::read_to_string(testdata().join("expected.txt")).unwrap();
    let limits = Limits {
        slack: 0,
        lost_horizon: None,
        budget: 10_000_000,
    };
    let (mut linearizable, mut not) = (0, 0);
    for line in expected.lines() {
        let (n, want) = line.split_once(' ').unwrap();
        let n: u32 = n.parse().unwrap();
        let log = std::fs::read_to_string(testdata().join(format!("etcd_{n:03}.log"))).unwrap();
        let ops = parse(&log);
        assert!(!ops.is_empty(), "etcd_{n:03}: no calls parsed");
        let verdict = search(&Register, &ops, limits);
        match (want, verdict) {
            ("true", Verdict::Linearizable { .. }) => linearizable += 1,
            ("false", Verdict::Violation { .. }) => not += 1,
            _ => panic!("etcd_{n:03}: Porcupine says {want}, the search says {verdict:?}"),
        }
    }
    assert_eq!((linearizable, not), (23, 79));
}

/// The parser reads what Porcupine's does: a hand-made history.
#[test]
fn the_log_parser_reads_calls_answers_and_lost_ones() {
    let log = "INFO  jepsen.util - 0\t:invoke\t:write\t4
INFO  jepsen.util - 1\t:invoke\t:read\tnil
INFO  jepsen.util - 0\t:ok\t:write\t4
INFO  jepsen.util - 1\t:ok\t:read\t4
INFO  jepsen.util - 2\t:invoke\t:cas\t[4 5]
INFO  jepsen.util - 2\t:fail\t:cas\t[4 5]
INFO  jepsen.util - 3\t:invoke\t:read\tnil
INFO  jepsen.util - 3\t:fail\t:read\t:timed-out
INFO  jepsen.util - 4\t:invoke\t:write\t9
";
    let ops = parse(log);
    assert_eq!(ops.len(), 5);
    assert!(matches!(ops[1].call, Call::Read(Some(4))));
    assert!(matches!(
        ops[2].call,
        Call::Cas {
            from: 4,
            to: 5,
            ok: false
        }
    ));
    assert!(
        ops[3].lost && ops[4].lost,
        "a timed-out read and an unanswered write are lost"
    );
    // The failed CAS read 4 and did not swap: not linearizable.
    let limits = Limits {
        slack: 0,
        lost_horizon: None,
        budget: 1_000,
    };
    assert!(matches!(search(&Register, &ops, limits), Verdict::Violation { .. }));
    let fixed = log.replace(":fail\t:cas", ":ok\t:cas");
    assert!(matches!(
        search(&Register, &parse(&fixed), limits),
        Verdict::Linearizable { .. }
    ));
}
