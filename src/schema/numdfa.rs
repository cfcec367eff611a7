//! Number texts as states of a lazily built automaton, one per distinct numeric constraint of
//! a compiled schema, so a number's masks cost table lookups instead of decimal arithmetic.
//!
//! [`NumCore::live`] decides a number prefix exactly, but each call parses the text and
//! scans candidate scales with decimal arithmetic (~0.1–1 µs). A mask inside a number asks it
//! once per trie node of the number-only tokens (~1,200 for llama3), and every number in every
//! document is new text, so masks under bounds cost hundreds of µs. Yet the answer depends on
//! far less than the text: [`number::class_key`] maps a text to a key such that texts with the
//! same key have the same completions (same phase and sign, the order of magnitude, how the
//! digits compare with each bound's, where the last nonzero digit sits…). Each key met is a
//! state; its transitions and its "complete and accepted" flag are computed once, from the
//! first text that reached it (any text of the class gives the same answers), and kept.
//!
//! So a number alternative carries a state id ([`NumStates::step`] per byte), a mask's
//! number-only tokens are a table-driven walk ([`NumStates::walk`]), and both the mask cache
//! and the open-token sets are keyed by the states instead of the digits: `1249.99` and
//! `1387.02` under `0 ≤ price ≤ 10000` are the same state (`3817.02` is not: its leading `3`
//! cannot grow to the bound's magnitude, the `1` can).
//!
//! An automaton depends on its constraint alone, so it is shared by every compiled schema of
//! the process that says the constraint ([`SHARED`]), and so is what its walks find: per
//! (number-only trie, state), the list of the trie's tokens after which the state is alive
//! ([`Dfa::open_tokens`]). A schema compiled afresh meets the states, transitions and token
//! lists that other schemas with the same bounds have already paid for.
//!
//! Bounds: at most [`NUM_STATES_LIMIT`] states per constraint; past it a step answers
//! [`NUM_OVER`] and that number falls back to [`NumCore::live`] on its text (exact, slower).
//! At most [`OPEN_IDS_LIMIT`] token ids in one automaton's lists (dropped together past it),
//! and [`SHARED_LIMIT`] constraints in the registry.
//! Constraints without a class key (`not: {multipleOf}`, "not an integer") never use states.

use super::compile::{CoreRt, Program, RtCoreId};
use super::number::{self, NumCore};
use crate::token::TokenId;
use rustc_hash::FxHashMap;
use std::sync::{Arc, Mutex};

/// Most states one numeric constraint keeps (each ~120 bytes with its key; dead classes are
/// remembered up to twice as many keys).
pub(crate) const NUM_STATES_LIMIT: usize = 4096;

/// A refused byte.
pub(crate) const NUM_DEAD: u32 = u32::MAX;
/// No state: the constraint has no class key, or its automaton is full — decide on the text.
pub(crate) const NUM_OVER: u32 = u32::MAX - 1;
/// A transition not computed yet.
const UNSET: u32 = u32::MAX - 2;

/// Most token ids one automaton keeps in its per-state token lists (4 bytes each: 1 MiB);
/// past it they are dropped and walked again as needed.
const OPEN_IDS_LIMIT: usize = 1 << 18;

/// The state of the empty text.
pub(crate) const NUM_START: u32 = 0;

/// Number bytes as transition columns (`e`/`E` share one).
const CLASSES: usize = 14;

#[inline]
fn class(b: u8) -> Option<usize> {
    Some(match b {
        b'0'..=b'9' => usize::from(b - b'0'),
        b'.' => 10,
        b'e' | b'E' => 11,
        b'+' => 12,
        b'-' => 13,
        _ => return None,
    })
}

struct State {
    /// The first text that reached this state (every text of its class answers alike).
    rep: Box<[u8]>,
    /// Complete and accepted by the constraint.
    accept: bool,
    next: [u32; CLASSES],
}

/// One constraint's automaton.
struct Dfa {
    core: NumCore,
    states: Vec<State>,
    keys: FxHashMap<smallvec::SmallVec<[u8; 32]>, u32>,
    /// Per (number-only trie, state): the trie's tokens after which the state is alive
    /// ([`Dfa::open_tokens`]); at most [`OPEN_IDS_LIMIT`] token ids in all.
    open: FxHashMap<(u64, u32), Arc<[TokenId]>>,
    open_ids: usize,
}

impl Dfa {
    fn new(core: NumCore) -> Option<Dfa> {
        let key = number::class_key(&core, b"")?;
        let accept = core.accepts_text(b"");
        let mut keys = FxHashMap::default();
        keys.insert(key, NUM_START);
        Some(Dfa {
            core,
            states: vec![State { rep: Box::new([]), accept, next: [UNSET; CLASSES] }],
            keys,
            open: FxHashMap::default(),
            open_ids: 0,
        })
    }

    /// The tokens of `trie` (named `trie_id`) after which state `s` is alive, walked over the
    /// automaton on the first call for (trie, state) and kept; `None` when the walk left the
    /// automaton ([`NUM_OVER`]: decide on the text). When the kept lists would pass
    /// [`OPEN_IDS_LIMIT`] ids they are all dropped first.
    fn open_tokens(
        &mut self,
        trie_id: u64,
        trie: &crate::vocab::TokTrie,
        s: u32,
    ) -> Option<Arc<[TokenId]>> {
        if let Some(l) = self.open.get(&(trie_id, s)) {
            return Some(l.clone());
        }
        // Sized for the whole trie (a number-only trie: ~1,200 tokens at most vocabularies),
        // so the walk never regrows it.
        let mut out: Vec<TokenId> = Vec::with_capacity(trie.n_tokens());
        let mut over = false;
        trie.walk_states_with(
            s,
            |s, b| match self.step(s, b) {
                NUM_DEAD => None,
                NUM_OVER => {
                    over = true;
                    None
                }
                t => Some(t),
            },
            |_, t| out.push(t),
        );
        if over {
            return None;
        }
        if self.open_ids + out.len() > OPEN_IDS_LIMIT {
            self.open.clear();
            self.open_ids = 0;
        }
        self.open_ids += out.len();
        let l: Arc<[TokenId]> = out.into();
        self.open.insert((trie_id, s), l.clone());
        Some(l)
    }

    fn step(&mut self, s: u32, b: u8) -> u32 {
        let Some(c) = class(b) else { return NUM_DEAD };
        let st = &self.states[s as usize];
        let n = st.next[c];
        if n != UNSET {
            return n;
        }
        let mut text: smallvec::SmallVec<[u8; 48]> = smallvec::SmallVec::new();
        text.extend_from_slice(&st.rep);
        text.push(b);
        // The key first: a class met before (alive or dead) needs no liveness test, so the
        // test runs once per class, not once per transition. (No key: not a number prefix,
        // since constraints without keys have no automaton.)
        let n = match number::class_key(&self.core, &text) {
            None => NUM_DEAD,
            Some(k) => match self.keys.get(&k) {
                Some(&id) => id,
                None if !self.core.live(&text) => {
                    if self.keys.len() < 2 * NUM_STATES_LIMIT {
                        self.keys.insert(k, NUM_DEAD);
                    }
                    NUM_DEAD
                }
                None if self.states.len() >= NUM_STATES_LIMIT => NUM_OVER,
                None => {
                    let id = self.states.len() as u32;
                    let accept = self.core.accepts_text(&text);
                    self.states.push(State {
                        rep: text.as_slice().into(),
                        accept,
                        next: [UNSET; CLASSES],
                    });
                    self.keys.insert(k, id);
                    id
                }
            },
        };
        self.states[s as usize].next[c] = n;
        n
    }
}

/// Automata shared by every compiled schema of the process, by constraint: a number state's
/// transitions and liveness are decided once for `{"type": "integer", "minimum": 0}` however
/// many schemas (or compilations of one schema) say it. An automaton depends on its
/// constraint alone (each state is a class of texts with the same completions), so sharing
/// changes no answer, only who pays for the first visits.
static SHARED: std::sync::OnceLock<Mutex<FxHashMap<NumCore, Arc<Mutex<Dfa>>>>> =
    std::sync::OnceLock::new();

/// Most constraints [`SHARED`] keeps (each automaton is bounded by [`NUM_STATES_LIMIT`]).
/// When full, those no compiled schema holds any more are dropped; if all are held, a new
/// constraint gets an automaton of its own.
const SHARED_LIMIT: usize = 256;

fn shared_dfa(core: &NumCore) -> Option<Arc<Mutex<Dfa>>> {
    let mut reg = SHARED.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(d) = reg.get(core) {
        return Some(d.clone());
    }
    let d = Arc::new(Mutex::new(Dfa::new(core.clone())?));
    if reg.len() >= SHARED_LIMIT {
        reg.retain(|_, d| Arc::strong_count(d) > 1);
    }
    if reg.len() < SHARED_LIMIT {
        reg.insert(core.clone(), d.clone());
    }
    Some(d)
}

fn lock(d: &Mutex<Dfa>) -> std::sync::MutexGuard<'_, Dfa> {
    d.lock().unwrap_or_else(|e| e.into_inner())
}

/// The automata of one compiled schema's number cores (identical constraints share one, and
/// so do other schemas with the same constraint: [`SHARED`]), built as they are walked.
pub(crate) struct NumStates {
    /// Per runtime core: its automaton, if it is a number core with a class key.
    of_core: Vec<Option<u32>>,
    dfas: Vec<Arc<Mutex<Dfa>>>,
}

impl std::fmt::Debug for NumStates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n: usize = self.dfas.iter().map(|d| lock(d).states.len()).sum();
        f.debug_struct("NumStates").field("states", &n).finish()
    }
}

impl NumStates {
    pub(crate) fn new(p: &Program) -> NumStates {
        let mut cores: Vec<NumCore> = Vec::new();
        let mut dfas: Vec<Arc<Mutex<Dfa>>> = Vec::new();
        let mut of_core = Vec::with_capacity(p.cores.len());
        for c in &p.cores {
            let id = match c {
                CoreRt::Number(n) => match cores.iter().position(|d| d == n) {
                    Some(i) => Some(i as u32),
                    None => shared_dfa(n).map(|d| {
                        cores.push(n.clone());
                        dfas.push(d);
                        dfas.len() as u32 - 1
                    }),
                },
                _ => None,
            };
            of_core.push(id);
        }
        NumStates { of_core, dfas }
    }

    /// The automaton of `core`, if it has one.
    #[inline]
    pub(crate) fn dfa(&self, core: RtCoreId) -> Option<u32> {
        self.of_core.get(core.index()).copied().flatten()
    }

    /// The state after byte `b` from state `s` of automaton `dfa`: an id, [`NUM_DEAD`] (no
    /// completion) or [`NUM_OVER`] (decide on the text from here on).
    pub(crate) fn step(&self, dfa: u32, s: u32, b: u8) -> u32 {
        lock(&self.dfas[dfa as usize]).step(s, b)
    }

    /// Is state `s` a complete number the constraint accepts?
    pub(crate) fn accepts(&self, dfa: u32, s: u32) -> bool {
        lock(&self.dfas[dfa as usize]).states[s as usize].accept
    }

    /// Adds to `mask` each token of `trie` (number-only tokens, named by `trie_id`, unique
    /// in the process: [`crate::json::slices::NumberClasses::numeric_id`]) after which the
    /// automaton of some alternative `k` (`dfas[k]`, from state `start[k]`; [`NUM_DEAD`] for
    /// none) is alive. Each alternative's tokens are a
    /// list its automaton keeps per (trie, state) for every schema of the process
    /// ([`Dfa::open_tokens`]), so a state's first visit in one schema serves the others; the
    /// mask is their union (a token is allowed iff some alternative stays alive after it).
    /// `false` when a step left an automaton ([`NUM_OVER`]): then what was added is only part
    /// of the allowed tokens, and the caller decides the rest on text.
    pub(crate) fn walk(
        &self,
        dfas: &[u32],
        start: [u32; 4],
        (trie_id, trie): (u64, &crate::vocab::TokTrie),
        mask: &mut crate::mask::TokenMask,
    ) -> bool {
        for (k, &d) in dfas.iter().enumerate() {
            if start[k] == NUM_DEAD {
                continue;
            }
            // One automaton locked at a time: walks on other threads never wait in a cycle.
            let Some(open) = lock(&self.dfas[d as usize]).open_tokens(trie_id, trie, start[k])
            else {
                return false;
            };
            for &t in open.iter() {
                mask.insert(t);
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mask::TokenMask;
    use crate::schema::{CompiledSchema, SchemaOptions};
    use crate::token::TokenId;
    use crate::vocab::TokTrie;

    fn compile(v: serde_json::Value) -> Arc<CompiledSchema> {
        CompiledSchema::compile(&v, &SchemaOptions::default()).unwrap()
    }

    #[test]
    fn schemas_share_the_automata_of_equal_constraints_and_walk_them_side_by_side() {
        let x = serde_json::json!({"type": "integer", "minimum": 3, "maximum": 977});
        let y = serde_json::json!({"type": "number", "multipleOf": 0.25, "maximum": 1e4});
        let a = compile(serde_json::json!({"type": "array", "items": {"anyOf": [x, y]}}));
        let b = compile(serde_json::json!({"type": "array", "items": {"anyOf": [y, x]}}));
        let c = compile(serde_json::json!({"type": "integer", "minimum": 4, "maximum": 977}));
        let shared = |p: &NumStates, q: &NumStates| {
            p.dfas.iter().filter(|d| q.dfas.iter().any(|e| Arc::ptr_eq(d, e))).count()
        };
        assert_eq!((a.numbers.dfas.len(), b.numbers.dfas.len()), (2, 2));
        assert_eq!(
            shared(&a.numbers, &b.numbers),
            2,
            "the same two constraints, one automaton each"
        );
        assert_eq!(shared(&a.numbers, &c.numbers), 0, "another bound, another automaton");
        // What one schema decides the other reads: a state built through `a` is there for `b`.
        let pa = a.numbers.dfas.iter().position(|d| Arc::ptr_eq(d, &b.numbers.dfas[0])).unwrap();
        let s = a.numbers.step(pa as u32, NUM_START, b'5');
        assert_eq!(b.numbers.step(0, NUM_START, b'5'), s);
        // The same tokens as one walk of the trie over both automata side by side (each
        // token kept when some automaton is alive after it), on two threads in opposite
        // orders; and the per-state lists one schema's walk leaves are the other's.
        let toks: Vec<(TokenId, Vec<u8>)> = (0..2000u32)
            .map(|i| {
                // Every third token leaves the number (dead); the others are digit strings.
                let tail = if i % 3 == 0 { "x" } else { "" };
                (TokenId(i), format!("{}{tail}", i * 7 % 1999).into_bytes())
            })
            .collect();
        let trie = TokTrie::build(toks.iter().map(|(t, b)| (*t, &b[..])));
        let id = crate::json::slices::fresh_trie_id();
        let start = [NUM_START, NUM_START, NUM_DEAD, NUM_DEAD];
        let mut reference = TokenMask::new(2000);
        trie.walk_states(
            [NUM_START; 2],
            |s, b| {
                let n = [a.numbers.step(0, s[0], b), a.numbers.step(1, s[1], b)];
                n.iter().any(|&t| t != NUM_DEAD).then_some(n)
            },
            &mut reference,
        );
        assert!(reference.count() > 1000 && reference.count() < 1400, "{}", reference.count());
        let walk = |n: &NumStates, order: [u32; 2]| {
            let mut m = TokenMask::new(2000);
            assert!(n.walk(&order, start, (id, &trie), &mut m));
            m
        };
        assert_eq!(walk(&a.numbers, [0, 1]), reference);
        let kept = |n: &NumStates| {
            n.dfas.iter().map(|d| lock(d).open.contains_key(&(id, NUM_START))).collect::<Vec<_>>()
        };
        assert_eq!(kept(&b.numbers), [true, true], "b reads the lists a's walk left");
        assert_eq!(kept(&c.numbers), [false], "another constraint keeps its own");
        std::thread::scope(|sc| {
            let (a, b, reference) = (&a, &b, &reference);
            let one = sc.spawn(move || (0..200).all(|_| walk(&a.numbers, [0, 1]) == *reference));
            let two = sc.spawn(move || (0..200).all(|_| walk(&b.numbers, [1, 0]) == *reference));
            assert!(one.join().unwrap() && two.join().unwrap());
        });
    }
}
