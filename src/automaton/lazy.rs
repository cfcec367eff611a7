//! A lazily determinised full-match byte DFA with exact liveness: the fallback of the regex
//! constraint for patterns whose dense DFA exceeds [`DfaConfig`]'s limits (`(a|b)*a(a|b){20}`
//! has 2²¹ states; a mask only ever visits the few reachable by token bytes from the current one).
//!
//! # Why not `regex-automata`'s hybrid DFA
//! The trie walk needs `next` to return `None` exactly when no completion exists (a *dead
//! end*), or masks would allow tokens that lead nowhere. `hybrid::dfa::DFA` answers "is this the
//! dead state", not "can this state still reach a match", and it does not expose the NFA states
//! behind a lazy state, so liveness could only be found by exploring ahead — unbounded. It also
//! clears its cache when full, which renumbers states, while our per-request state is a `Copy`
//! id kept in the rollback history. So this module determinises the same Thompson NFA
//! (`regex-automata`'s, no captures) itself, on demand (subset construction, Rabin & Scott 1959):
//!
//! - **Liveness on the NFA, once.** An NFA state is live when a `Match` state is reachable from
//!   it (backward reachability over its transitions). Without look-around every byte
//!   transition can be taken, so graph reachability is exactly "some string leads to a match".
//!   Patterns with look-around (`^`, `$`, `\b` inside) are refused with a typed error.
//! - **Dead NFA states are dropped from every subset**, so a lazily built DFA state is live iff
//!   its subset is non-empty: `next` is `None` exactly at dead ends, with no look-ahead.
//! - **States are never evicted**: ids stay valid for the life of the cache (history,
//!   rollback, mask cache), and a cache that would grow past its memory limit sets an overflow
//!   flag (the engine reports [`crate::EngineErrorKind::LimitExceeded`]) instead of thrashing.
//!   Each request gets its own cache ([`LazyDfa::fresh`]), so the bound is per request.
//!
//! Transitions are tabled per byte equivalence class of the NFA, so a state built once is one
//! table read per byte afterwards, like the dense DFA.

use super::{DfaConfig, DfaStateId, RegexError, RegexErrorKind};
use regex_automata::nfa::thompson::{self, State};
use regex_automata::util::primitives::StateID;
use rustc_hash::FxHashMap;
use std::sync::{Arc, Mutex, MutexGuard};

const UNKNOWN: u32 = u32::MAX;
const DEAD: u32 = u32::MAX - 1;

/// The immutable part, shared by every request: the NFA, its live states, the byte classes.
#[derive(Debug)]
struct Core {
    nfa: thompson::NFA,
    live: Vec<bool>,
    classes: [u8; 256],
    /// A representative byte per class.
    reps: Vec<u8>,
    max_memory: usize,
}

/// The lazily built states of one request (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct LazyCache {
    /// Per DFA state: its live, non-epsilon NFA states, sorted.
    sets: Vec<Box<[u32]>>,
    ids: FxHashMap<Box<[u32]>, u32>,
    /// `trans[s * n_classes + c]`: a state, [`DEAD`] or [`UNKNOWN`].
    trans: Vec<u32>,
    accepting: Vec<bool>,
    continues: Vec<bool>,
    memory: usize,
    overflowed: bool,
    stack: Vec<u32>,
    next: Vec<u32>,
    mark: Vec<u32>,
    generation: u32,
}

/// A lazily determinised full-match DFA over bytes (see the module docs).
#[derive(Debug)]
pub struct LazyDfa {
    core: Arc<Core>,
    cache: Mutex<LazyCache>,
}

impl LazyDfa {
    /// Compile `hir` (full match over bytes) with `config`'s NFA limits; lazily built states
    /// may use up to `max_memory` bytes per request.
    ///
    /// # Errors
    /// [`RegexErrorKind::TooBig`] for an NFA over the limit, [`RegexErrorKind::Unsupported`] for
    /// look-around, [`RegexErrorKind::MatchesNothing`] for an empty language.
    pub fn from_hir(
        hir: &regex_syntax::hir::Hir,
        config: &DfaConfig,
        max_memory: usize,
    ) -> Result<LazyDfa, RegexError> {
        let nfa = super::thompson_nfa(hir, config)?;
        if !nfa.look_set_any().is_empty() {
            return Err(RegexError::new(RegexErrorKind::Unsupported {
                message: "look-around (anchors, word boundaries) in a pattern too big for a dense DFA: the lazy DFA cannot decide liveness exactly with it".into(),
            }));
        }
        let n = nfa.states().len();
        let mut preds: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut live = vec![false; n];
        let mut work = Vec::new();
        for (i, st) in nfa.states().iter().enumerate() {
            let mut edge = |to: StateID| preds[to.as_usize()].push(i as u32);
            match st {
                State::ByteRange { trans } => edge(trans.next),
                State::Sparse(s) => s.transitions.iter().for_each(|t| edge(t.next)),
                State::Dense(d) => {
                    d.transitions.iter().filter(|&&t| t != StateID::ZERO).for_each(|&t| edge(t))
                }
                State::Union { alternates } => alternates.iter().for_each(|&t| edge(t)),
                State::BinaryUnion { alt1, alt2 } => {
                    edge(*alt1);
                    edge(*alt2);
                }
                State::Capture { next, .. } | State::Look { next, .. } => edge(*next),
                State::Fail => {}
                State::Match { .. } => {
                    live[i] = true;
                    work.push(i);
                }
            }
        }
        while let Some(s) = work.pop() {
            for &p in &preds[s] {
                if !live[p as usize] {
                    live[p as usize] = true;
                    work.push(p as usize);
                }
            }
        }
        if !live[nfa.start_anchored().as_usize()] {
            return Err(RegexError::new(RegexErrorKind::MatchesNothing));
        }
        let (classes, reps) = super::class_table(nfa.byte_classes());
        let core = Arc::new(Core { nfa, live, classes, reps, max_memory });
        let dfa = LazyDfa { cache: Mutex::new(LazyCache::new(&core)), core };
        Ok(dfa)
    }

    /// The same DFA with an empty cache of its own (a new request).
    pub fn fresh(&self) -> LazyDfa {
        LazyDfa { cache: Mutex::new(LazyCache::new(&self.core)), core: self.core.clone() }
    }

    /// The cache, locked (one lock per trie walk or per token; requests never share one).
    pub(crate) fn lock(&self) -> MutexGuard<'_, LazyCache> {
        self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The state before any byte.
    pub fn start(&self) -> DfaStateId {
        DfaStateId(0)
    }

    /// The state after `byte` (built on first use), or `None` at a dead end — or when building
    /// it would exceed the memory limit ([`LazyDfa::overflowed`] tells the two apart).
    pub fn next(&self, state: DfaStateId, byte: u8) -> Option<DfaStateId> {
        self.lock().next(self, state, byte)
    }

    /// Does the output so far fully match?
    pub fn is_accepting(&self, state: DfaStateId) -> bool {
        self.lock().accepting[state.index()]
    }

    /// Can any byte follow `state`?
    pub fn can_continue(&self, state: DfaStateId) -> bool {
        self.lock().continues[state.index()]
    }

    /// States built so far.
    pub fn state_count(&self) -> usize {
        self.lock().sets.len()
    }

    /// Bytes the built states use (what the limit counts).
    pub fn memory_usage(&self) -> usize {
        self.lock().memory
    }

    /// Did a step since the last [`LazyDfa::clear_overflow`] need a state past the memory limit?
    pub fn overflowed(&self) -> bool {
        self.lock().overflowed
    }

    /// Forget earlier overflows.
    pub fn clear_overflow(&self) {
        self.lock().overflowed = false;
    }

    /// The memory limit of one cache.
    pub fn max_memory(&self) -> usize {
        self.core.max_memory
    }

    /// Number of NFA states.
    pub fn nfa_state_count(&self) -> usize {
        self.core.nfa.states().len()
    }
}

impl LazyCache {
    fn new(core: &Core) -> LazyCache {
        let mut c = LazyCache { mark: vec![0; core.nfa.states().len()], ..LazyCache::default() };
        c.next.clear();
        c.closure(core, &[core.nfa.start_anchored().as_u32()]);
        let set = std::mem::take(&mut c.next);
        // The start is live (checked at build), so its subset is non-empty; the first state
        // always fits.
        c.add(core, set);
        c
    }

    /// Add the live non-epsilon states of the ε-closure of `from` to `self.next` (sorted).
    fn closure(&mut self, core: &Core, from: &[u32]) {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.mark.fill(0);
            self.generation = 1;
        }
        let gen = self.generation;
        self.stack.clear();
        self.stack.extend(from.iter().rev());
        while let Some(s) = self.stack.pop() {
            let i = s as usize;
            if self.mark[i] == gen || !core.live[i] {
                continue;
            }
            self.mark[i] = gen;
            match core.nfa.state(StateID::new_unchecked(i)) {
                State::Union { alternates } => {
                    self.stack.extend(alternates.iter().rev().map(|t| t.as_u32()))
                }
                State::BinaryUnion { alt1, alt2 } => {
                    self.stack.push(alt2.as_u32());
                    self.stack.push(alt1.as_u32());
                }
                State::Capture { next, .. } | State::Look { next, .. } => {
                    self.stack.push(next.as_u32())
                }
                State::Fail => {}
                State::ByteRange { .. }
                | State::Sparse(_)
                | State::Dense(_)
                | State::Match { .. } => self.next.push(s),
            }
        }
        self.next.sort_unstable();
    }

    /// Intern `set` (non-empty): its state id, or `None` past the memory limit.
    fn add(&mut self, core: &Core, set: Vec<u32>) -> Option<u32> {
        if let Some(&id) = self.ids.get(set.as_slice()) {
            return Some(id);
        }
        let n_classes = core.reps.len();
        // The table row, the subset twice (list and map key) and the map entry.
        let cost = n_classes * 4 + set.len() * 8 + 48;
        if self.memory + cost > core.max_memory && !self.sets.is_empty() {
            self.overflowed = true;
            return None;
        }
        self.memory += cost;
        let id = self.sets.len() as u32;
        let mut accepting = false;
        let mut continues = false;
        for &s in &set {
            match core.nfa.state(StateID::new_unchecked(s as usize)) {
                State::Match { .. } => accepting = true,
                // A live byte-consuming state has a transition to a live state.
                _ => continues = true,
            }
        }
        self.accepting.push(accepting);
        self.continues.push(continues);
        self.trans.extend(std::iter::repeat_n(UNKNOWN, n_classes));
        let set: Box<[u32]> = set.into_boxed_slice();
        self.ids.insert(set.clone(), id);
        self.sets.push(set);
        Some(id)
    }

    /// The state after `byte` from `state` (see [`LazyDfa::next`]).
    #[inline]
    pub(crate) fn next(
        &mut self,
        dfa: &LazyDfa,
        state: DfaStateId,
        byte: u8,
    ) -> Option<DfaStateId> {
        let core = &*dfa.core;
        let slot = state.index() * core.reps.len() + core.classes[byte as usize] as usize;
        match self.trans[slot] {
            DEAD => None,
            UNKNOWN => self.build(core, state, byte, slot),
            t => Some(DfaStateId(t)),
        }
    }

    #[cold]
    fn build(
        &mut self,
        core: &Core,
        state: DfaStateId,
        byte: u8,
        slot: usize,
    ) -> Option<DfaStateId> {
        let mut targets = std::mem::take(&mut self.stack);
        targets.clear();
        for &s in self.sets[state.index()].iter() {
            match core.nfa.state(StateID::new_unchecked(s as usize)) {
                State::ByteRange { trans } if trans.matches_byte(byte) => {
                    targets.push(trans.next.as_u32());
                }
                State::Sparse(sp) => {
                    if let Some(t) = sp.matches_byte(byte) {
                        targets.push(t.as_u32());
                    }
                }
                State::Dense(d) => {
                    if let Some(t) = d.matches_byte(byte) {
                        targets.push(t.as_u32());
                    }
                }
                _ => {}
            }
        }
        self.next.clear();
        let from = targets.clone();
        self.stack = targets;
        self.closure(core, &from);
        if self.next.is_empty() {
            self.trans[slot] = DEAD;
            return None;
        }
        let set = std::mem::take(&mut self.next);
        let id = self.add(core, set)?;
        self.trans[slot] = id;
        Some(DfaStateId(id))
    }

    /// Does the output so far fully match?
    #[inline]
    pub(crate) fn is_accepting(&self, state: DfaStateId) -> bool {
        self.accepting[state.index()]
    }

    /// Did a step need a state past the memory limit since the overflow flag was cleared?
    pub(crate) fn overflowed(&self) -> bool {
        self.overflowed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lazy(p: &str) -> LazyDfa {
        let hir = regex_syntax::ParserBuilder::new().utf8(true).build().parse(p).unwrap();
        LazyDfa::from_hir(&hir, &DfaConfig::default(), 1 << 20).unwrap()
    }

    fn run(d: &LazyDfa, bytes: &[u8]) -> Option<DfaStateId> {
        bytes.iter().try_fold(d.start(), |s, &b| d.next(s, b))
    }

    #[test]
    fn matches_like_the_dense_dfa() {
        for p in [r"a|ab", r"abc|abd", r"\p{Greek}+", r"(a|b)*a(a|b){3}", r"[a-z]+@[a-z]+\.com"] {
            let d = lazy(p);
            let dense = super::super::ByteDfa::from_regex(p, &DfaConfig::default()).unwrap();
            for text in ["a", "ab", "abc", "abd", "αβ", "babb", "aaaa", "me@x.com", "me@", "x", ""]
            {
                let (l, r) = (run(&d, text.as_bytes()), dense.run(dense.start(), text.as_bytes()));
                assert_eq!(l.is_some(), r.is_some(), "{p} {text:?}");
                if let (Some(l), Some(r)) = (l, r) {
                    assert_eq!(d.is_accepting(l), dense.is_accepting(r), "{p} {text:?}");
                    assert_eq!(d.can_continue(l), dense.can_continue(r), "{p} {text:?}");
                }
            }
        }
    }

    #[test]
    fn dead_ends_are_none_and_states_are_stable() {
        let d = lazy(r"abc|abd");
        let s = run(&d, b"ab").unwrap();
        assert!(d.next(s, b'x').is_none());
        assert!(!d.overflowed());
        let n = d.state_count();
        assert_eq!(run(&d, b"ab"), Some(s), "the same id on a second visit");
        assert_eq!(d.state_count(), n);
    }

    #[test]
    fn the_memory_limit_sets_the_overflow_flag() {
        let hir = regex_syntax::ParserBuilder::new().build().parse(r"(a|b)*a(a|b){20}").unwrap();
        let d = LazyDfa::from_hir(&hir, &DfaConfig::default(), 4096).unwrap();
        let mut s = d.start();
        let mut hit = false;
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..200 {
            // Aperiodic a/b input: each new 21-byte window is a new state.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            match d.next(s, if x & 1 == 0 { b'a' } else { b'b' }) {
                Some(n) => s = n,
                None => {
                    hit = true;
                    break;
                }
            }
        }
        assert!(hit && d.overflowed());
        assert!(d.memory_usage() <= 4096);
        let fresh = d.fresh();
        assert!(!fresh.overflowed());
        assert_eq!(fresh.state_count(), 1);
    }

    #[test]
    fn look_around_is_refused() {
        let hir = regex_syntax::ParserBuilder::new().build().parse(r"a$b|c").unwrap();
        let e = LazyDfa::from_hir(&hir, &DfaConfig::default(), 1 << 20).unwrap_err();
        assert!(matches!(e.kind(), RegexErrorKind::Unsupported { .. }), "{e}");
    }
}
