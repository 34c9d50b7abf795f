//! The search itself, for any sequential specification: Wing & Gong's
//! algorithm with Lowe's memory of dead ends (what Porcupine and Knossos
//! implement). A depth-first search places the calls one at a time in an
//! order that respects real time (a call answered before another was sent
//! goes first, with `slack` between clocks), asking the specification
//! whether each answer fits the state so far; a state reached again with
//! the same set of calls placed is not searched again. A call whose answer
//! was lost may be placed (it took effect) or not (it did not).
//!
//! `porcupine.rs` checks this search against Porcupine's published etcd
//! histories with its register model; `lease.rs` is the SPEC's model.

use std::collections::{BTreeSet, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};

/// The verdict on one history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// An order exists; the search took this many steps.
    Linearizable { steps: u64 },
    /// No order exists: the calls before `at` admit no valid order that
    /// the call at `at` could follow.
    Violation { at: i64, steps: u64 },
    /// The budget ran out first.
    Inconclusive { steps: u64 },
}

/// One call: what was asked and answered, sent at `t0` and answered at
/// `t1` (`i64::MAX` and `lost` when the answer never came).
#[derive(Debug, Clone)]
pub(crate) struct Op<C> {
    pub(crate) call: C,
    pub(crate) t0: i64,
    pub(crate) t1: i64,
    pub(crate) lost: bool,
}

/// A sequential specification.
pub(crate) trait Spec {
    /// What a call asked and was answered.
    type Call;
    /// The state between calls (hashed for the memory of dead ends).
    type State: Clone + Hash;

    /// The state before any call.
    fn initial(&self) -> Self::State;

    /// The state after `op` (placed right after `state`), or `None` when
    /// the specification cannot give `op`'s answer there.
    fn apply(&self, state: &Self::State, op: &Op<Self::Call>) -> Option<Self::State>;

    /// Whether `op`, whose answer was lost, can still change anything from
    /// `state` on (when it cannot, the search does not try it).
    fn may_still_matter(&self, _state: &Self::State, _op: &Op<Self::Call>) -> bool {
        true
    }

    /// The state's instant, for `Limits::lost_horizon`.
    fn now(&self, _state: &Self::State) -> Option<i64> {
        None
    }
}

/// How calls are ordered and how far the search may go.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Slack between the clocks of the request and answer times.
    pub(crate) slack: i64,
    /// How long after it was sent a lost call may still take effect.
    pub(crate) lost_horizon: Option<i64>,
    /// Search steps at most.
    pub(crate) budget: u64,
}

/// One frame of the depth-first search.
struct Frame<S> {
    state: S,
    /// The calls that may go next, and how many were tried.
    candidates: Vec<usize>,
    tried: usize,
    /// The call placed to reach this frame (to undo).
    placed: Option<usize>,
}

/// The calls not placed yet, indexed for the search.
struct Open<'a, C> {
    ops: &'a [Op<C>],
    /// Answered calls not placed, by index (= by request time, as `ops`
    /// are sorted) and by answer time.
    by_index: BTreeSet<usize>,
    by_answer: BTreeSet<(i64, usize)>,
    /// Calls whose answer was lost (by index), and which are placed.
    lost: Vec<usize>,
    placed: Vec<bool>,
}

impl<'a, C> Open<'a, C> {
    fn new(ops: &'a [Op<C>]) -> Self {
        let answered = ops.iter().enumerate().filter(|(_, o)| !o.lost);
        Self {
            ops,
            by_index: answered.clone().map(|(i, _)| i).collect(),
            by_answer: answered.map(|(i, o)| (o.t1, i)).collect(),
            lost: ops.iter().enumerate().filter(|(_, o)| o.lost).map(|(i, _)| i).collect(),
            placed: vec![false; ops.len()],
        }
    }

    fn place(&mut self, i: usize) {
        self.placed[i] = true;
        if !self.ops[i].lost {
            self.by_index.remove(&i);
            self.by_answer.remove(&(self.ops[i].t1, i));
        }
    }

    fn unplace(&mut self, i: usize) {
        self.placed[i] = false;
        if !self.ops[i].lost {
            self.by_index.insert(i);
            self.by_answer.insert((self.ops[i].t1, i));
        }
    }

    /// The calls that may be placed next: sent before every unplaced
    /// answered call was answered (real time, with slack both ways). Lost
    /// answers count only within their horizon and while they can still
    /// change anything. Answered calls first, earliest answer first.
    fn candidates<S: Spec<Call = C>>(&self, spec: &S, state: &S::State, limits: &Limits) -> Vec<usize> {
        let bound = self
            .by_answer
            .first()
            .map_or(i64::MAX, |(t1, _)| *t1)
            .saturating_add(2 * limits.slack);
        // Strictly before: a call sent after an answer (times are distinct
        // or carry slack) cannot go before that call.
        let sent_in_time = |i: usize| self.ops[i].t0 <= bound;
        let mut next: Vec<usize> = self.by_index.iter().copied().take_while(|&i| sent_in_time(i)).collect();
        next.sort_by_key(|&i| self.ops[i].t1);
        let from = match (limits.lost_horizon, spec.now(state)) {
            (Some(horizon), Some(now)) => self.lost.partition_point(|&i| self.ops[i].t0 + horizon < now),
            _ => 0,
        };
        next.extend(
            self.lost[from..]
                .iter()
                .copied()
                .take_while(|&i| sent_in_time(i))
                .filter(|&i| !self.placed[i] && spec.may_still_matter(state, &self.ops[i])),
        );
        next
    }
}

/// Searches for an order of `ops` (sorted by request time) that `spec`
/// accepts.
pub(crate) fn search<S: Spec>(spec: &S, ops: &[Op<S::Call>], limits: Limits) -> Verdict {
    let mut open = Open::new(ops);
    // Zobrist keys of the placed set, for the memory of dead ends.
    let keys: Vec<u64> = (0..ops.len()).map(|i| splitmix(i as u64 + 1)).collect();
    let mut set_hash = 0u64;
    let mut dead: HashSet<u64> = HashSet::new();
    let mut steps = 0u64;
    let mut furthest = ops.first().map_or(0, |o| o.t0);
    let start = spec.initial();
    let mut stack = vec![Frame {
        candidates: open.candidates(spec, &start, &limits),
        state: start,
        tried: 0,
        placed: None,
    }];
    while let Some(frame) = stack.last_mut() {
        if open.by_index.is_empty() {
            return Verdict::Linearizable { steps };
        }
        steps += 1;
        if steps > limits.budget {
            return Verdict::Inconclusive { steps };
        }
        let Some(&i) = frame.candidates.get(frame.tried) else {
            // Every candidate failed: remember the dead end, back up.
            let frame = stack.pop().expect("non-empty");
            dead.insert(set_hash ^ hash_of(&frame.state));
            if let Some(i) = frame.placed {
                open.unplace(i);
                set_hash ^= keys[i];
            }
            continue;
        };
        frame.tried += 1;
        let Some(state) = spec.apply(&frame.state, &ops[i]) else {
            continue;
        };
        if dead.contains(&(set_hash ^ keys[i] ^ hash_of(&state))) {
            continue;
        }
        open.place(i);
        set_hash ^= keys[i];
        if !ops[i].lost {
            furthest = furthest.max(ops[i].t1);
        }
        stack.push(Frame {
            candidates: open.candidates(spec, &state, &limits),
            state,
            tried: 0,
            placed: Some(i),
        });
    }
    Verdict::Violation { at: furthest, steps }
}

fn hash_of<T: Hash>(value: &T) -> u64 {
    let mut h = DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
