//! Fast masks inside strings, keys and numbers, and the walk hook that brings them to value
//! starts: the schema engine's slices.
//!
//! Inside a string value or a key, almost every token stays inside the string, and a full trie
//! walk with the general recogniser ([`Rt`], undo log and all) costs milliseconds. This module
//! answers those masks from the vocabulary's [`StringClasses`] and [`NumberClasses`] instead:
//!
//! - **Open tokens** (those that stay inside the string): per live alternative, the plain
//!   tokens are run through the content automaton with a tiny `Copy` walker (one table lookup
//!   per trie node, no escape logic: plain bytes are their own decoded content), and only the
//!   escaped tokens go through [`Rt`]. The result depends only on the automaton, its state and
//!   (for length-counted strings) the bound and character count, so it is cached under that
//!   key in the compiled schema ([`SharedOpen`], shared by all its engines). An unconstrained
//!   string needs no walk at all ([`StringClasses::open`]), and a length-bounded one far from
//!   its bound is `safe_at_most(r) ∪ open_nonsafe`.
//! - **Closing tokens** of a string with one live alternative: the state after the closing
//!   quote does not depend on the content before it, so the suffixes after the quote are walked
//!   once from that state (the small `exits` trie), and each group of tokens with the same
//!   content before the quote is decided by one automaton run. Tokens with an escape before the
//!   quote, and strings with several live alternatives, walk the closing tokens with [`Rt`].
//! - **Keys**: a names-only walk for the declared names still allowed, the undeclared-key
//!   automaton's cached open set, and the closing tokens per group through
//!   [`Rt::key_choices`] (one walk of the suffixes per distinct reading of the key).
//! - **Numbers**: number-only tokens from a set cached per core set and automaton states
//!   ([`crate::schema::numdfa`]: one table lookup per trie node on a miss); the rest walked.
//! - **Value starts**: [`StringHook`] answers, inside the trie walk, every subtree below a
//!   prefix that has just opened a string, key or number, with the same paths over the classes
//!   of the tokens with that prefix.
//! - While a `uniqueItems` array records its items' bytes, closing tokens are walked with
//!   [`Rt`] (the duplicate check reads the recorded text); open tokens keep their fast path.
//!
//! Exactness: each set above is what the trie walk with [`Rt`] would compute for that class of
//! tokens; `tests/it/schema_fast_masks.rs` compares every mask with the plain walk
//! (`SchemaConstraint::fill_mask_reference`) on targeted schemas, MaskBench samples and a
//! vocabulary of every short substring of the test documents.

use super::{Alt, CoreRt, DfaId, Graves, KeyChoices, Kind, Rt, RtCoreId, Served, Undo};
use crate::json::slices::{JsonClasses, NumberClasses, StringClasses};
use crate::mask::TokenMask;
use crate::recognizer::Recognizer;
use crate::schema::numdfa::{NUM_DEAD, NUM_OVER};
use crate::schema::string::{ByteDfa, DEAD};
use crate::vocab::{TokTrie, Vocabulary};
use rustc_hash::FxHashMap;
use std::sync::{Arc, Mutex};

/// In the key of a number's closing tokens, an alternative that accepts the number (no
/// automaton state has this number: their states are below `NUM_STATES_LIMIT`).
const NUM_CLOSES: u32 = u32::MAX - 2;

/// What an open-token set is cached under.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum OpenKey {
    /// A string's content automaton at a state, with its character bound and count (both 0
    /// when uncounted). Not keyed by core: every string core with the same automaton and
    /// bound (one `format` on many properties) shares the set.
    Str { dfa: DfaId, state: u32, max: u32, count: u32 },
    /// The plain tokens an automaton accepts from a state (undeclared keys).
    Dfa { dfa: DfaId, state: u32 },
    /// The number-only tokens that keep a number open, for number cores (at most four,
    /// sorted, padded with `u32::MAX`) at their automaton states ([`crate::schema::numdfa`]).
    Num { cores: [RtCoreId; 4], states: [u32; 4] },
}

/// Open-token sets shared by every engine of one compiled schema, per vocabulary: what a
/// state's open tokens are depends only on the schema, the state and the vocabulary, so the
/// first engine to visit a state pays the walk and later requests reuse it. Bounded by
/// [`SHARED_OPEN_LIMIT`] entries (cleared when full).
///
/// A set is keyed by the address of the [`StringClasses`] it was computed over (the
/// vocabulary's, or one of its prefix classes); the map keeps a clone of every vocabulary it
/// has sets for, so those addresses cannot be reused while the entries live.
#[derive(Default)]
pub(crate) struct SharedOpen {
    map: Mutex<(OpenSets, Vec<Vocabulary>)>,
    /// Per (automaton, state): does it live like an unconstrained string
    /// ([`ByteDfa::lives_like`])? Then its open tokens are the vocabulary's
    /// [`StringClasses::open`] and no set is stored.
    universal: Mutex<FxHashMap<(DfaId, u32), bool>>,
}

/// Most product pairs [`ByteDfa::lives_like`] explores before answering "no".
const LIVES_LIKE_BUDGET: usize = 4096;
/// Most answers [`SharedOpen::universal`] keeps (cleared when full).
const UNIVERSAL_LIMIT: usize = 4096;

/// Open-token sets by (address of the classes they were computed over, state).
type OpenSets = FxHashMap<(usize, OpenKey), Arc<TokenMask>>;

impl std::fmt::Debug for SharedOpen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.map.lock().map_or(0, |m| m.0.len());
        f.debug_struct("SharedOpen").field("sets", &n).finish()
    }
}

/// Most open-token sets a compiled schema keeps (each is one vocabulary-sized bitset: 16 KB
/// at 128k tokens, so at most 4 MB there).
pub(crate) const SHARED_OPEN_LIMIT: usize = 256;

impl SharedOpen {
    fn get<C>(&self, classes: &C, key: OpenKey) -> Option<Arc<TokenMask>> {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.0.get(&(std::ptr::from_ref(classes) as usize, key)).cloned()
    }

    /// Does `state` of `dfa` live like an unconstrained string (cached per compiled schema)?
    fn universal(&self, p: &crate::schema::compile::Program, dfa: DfaId, state: u32) -> bool {
        let d = &p.dfas[dfa.index()];
        if dfa == p.any_dfa && state == d.start() {
            return true;
        }
        if let Some(&u) =
            self.universal.lock().unwrap_or_else(|e| e.into_inner()).get(&(dfa, state))
        {
            return u;
        }
        let any = &p.dfas[p.any_dfa];
        let u = d.lives_like(state, any, LIVES_LIKE_BUDGET) == Some(true);
        let mut map = self.universal.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= UNIVERSAL_LIMIT {
            map.clear();
        }
        map.insert((dfa, state), u);
        u
    }

    /// `classes` must be owned by `vocab` (its root classes or a prefix's, which a vocabulary
    /// never drops), so keeping `vocab` alive keeps the address unique.
    fn put<C>(&self, vocab: &Vocabulary, classes: &C, key: OpenKey, m: Arc<TokenMask>) {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if map.0.len() >= SHARED_OPEN_LIMIT {
            map.0.clear();
            map.1.clear();
        }
        if !map.1.iter().any(|v| v.same_as(vocab)) {
            map.1.push(vocab.clone());
        }
        map.0.insert((std::ptr::from_ref(classes) as usize, key), m);
    }
}

/// Per-engine scratch of the fast paths.
#[derive(Default)]
pub(super) struct FastState {
    /// Where [`Fast::closing_tokens`] builds its key (reused from mask to mask; boxed, as
    /// the engine sits in enums of engines).
    closing_key: Box<super::St>,
    exits: Option<TokenMask>,
    name_stack: Vec<(u32, u32)>,
    oks: Vec<u32>,
    key_exits: Vec<TokenMask>,
}

/// Most automata [`Fast::open_walk`] runs in one walk.
const LOCKSTEP: usize = 8;
/// Most states of a [`Product`] before the lockstep walk runs the automata side by side.
const PRODUCT_LIMIT: usize = 1024;

/// The product of a few uncounted automata from given states, reachable part only: one
/// table lookup per trie node instead of one per automaton (the alternatives of a `oneOf`
/// of patterns track much the same text, so the product is small). State 0 is "all dead",
/// 1 the start; `alive[s]` has bit `j` set while automaton `j` is alive.
struct Product {
    col: [u8; 256],
    stride: usize,
    trans: Vec<u32>,
    alive: Vec<u8>,
}

impl Product {
    fn build(dfas: &[&ByteDfa], start: &[(u32, u32)], limit: usize) -> Option<Product> {
        let k = dfas.len();
        let mut col = [0u8; 256];
        let mut reps: Vec<u8> = Vec::new();
        let mut seen: FxHashMap<[u8; LOCKSTEP], u8> = FxHashMap::default();
        for b in 0..=255u8 {
            let mut key = [0u8; LOCKSTEP];
            for (j, d) in dfas.iter().enumerate() {
                key[j] = d.class_of(b);
            }
            col[b as usize] = *seen.entry(key).or_insert_with(|| {
                reps.push(b);
                (reps.len() - 1) as u8
            });
        }
        let stride = reps.len();
        let mut ids: FxHashMap<[u32; LOCKSTEP], u32> = FxHashMap::default();
        let mut tuples: Vec<[u32; LOCKSTEP]> = vec![[DEAD; LOCKSTEP]];
        let mut first = [DEAD; LOCKSTEP];
        for (j, &(s, _)) in start.iter().enumerate() {
            first[j] = s;
        }
        ids.insert([DEAD; LOCKSTEP], 0);
        ids.insert(first, 1);
        tuples.push(first);
        let mut trans = vec![0u32; stride];
        let mut i = 1;
        while i < tuples.len() {
            let t = tuples[i];
            i += 1;
            for &b in &reps {
                let mut n = [DEAD; LOCKSTEP];
                for j in 0..k {
                    if t[j] != DEAD {
                        n[j] = dfas[j].next(t[j], b);
                    }
                }
                let id = match ids.get(&n) {
                    Some(&id) => id,
                    None => {
                        if tuples.len() >= limit {
                            return None;
                        }
                        let id = tuples.len() as u32;
                        ids.insert(n, id);
                        tuples.push(n);
                        id
                    }
                };
                trans.push(id);
            }
        }
        let alive = tuples
            .iter()
            .map(|t| (0..k).fold(0u8, |a, j| a | u8::from(t[j] != DEAD) << j))
            .collect();
        Some(Product { col, stride, trans, alive })
    }
}

/// Adds the tokens of `trie` (plain bytes: their own decoded content) that keep automaton `d`
/// alive from `state` with `count` code points, under `max` (`u32::MAX`: uncounted; counted,
/// a state is live iff the fewest code points that complete it still fit).
fn plain_open(d: &ByteDfa, state: u32, count: u32, max: u32, trie: &TokTrie, m: &mut TokenMask) {
    if max == u32::MAX {
        trie.walk_states(state, |s, b| Some(d.next(s, b)).filter(|&n| n != DEAD), m);
    } else {
        trie.walk_states(
            (state, count),
            |(s, c), b| {
                let n = d.next(s, b);
                let c = c + u32::from(b & 0xC0 != 0x80);
                (n != DEAD && c.saturating_add(d.short(n)) <= max).then_some((n, c))
            },
            m,
        );
    }
}

/// The fast paths over one [`Rt`] state: the engine's own at the top of a mask, or the state
/// inside the trie walk where a token has just opened a string (see [`StringHook`]).
pub(super) struct Fast<'x, 'a> {
    pub rt: &'x mut Rt<'a>,
    pub fast: &'x mut FastState,
    pub vocab: &'x Vocabulary,
}

impl Fast<'_, '_> {
    /// Adds the tokens of `classes` allowed from the current state, if the top frame is a
    /// string or key body at a character boundary; `false` (nothing added) otherwise.
    pub(super) fn string_mask(&mut self, classes: &StringClasses, mask: &mut TokenMask) -> bool {
        let f = *self.rt.st.frames.last().expect("root");
        if !f.lex.at_char_boundary() {
            return false;
        }
        match f.kind() {
            Kind::Str => self.fast_str(classes, mask),
            Kind::Key => self.fast_key(classes, mask),
            _ => false,
        }
    }

    /// Adds the tokens of `classes` allowed from the current state, if the top frame is a
    /// number (of at most four live alternatives); `false` otherwise. `classes` are those of
    /// the tokens starting with `prefix`. When every alternative has an automaton state
    /// ([`crate::schema::numdfa`]) the number-only tokens come from a set cached per core set
    /// and states, walked over the automata on a miss (else with the liveness test on each
    /// text); the others (which close the number at their first other byte) are walked with
    /// the string hook.
    pub(super) fn number_mask(
        &mut self,
        classes: &NumberClasses,
        prefix: &[u8],
        mask: &mut TokenMask,
    ) -> bool {
        let f = *self.rt.st.frames.last().expect("root");
        if f.kind() != Kind::Num {
            return false;
        }
        let cs = self.rt.cs;
        let p = &cs.program;
        let alive = self.alive();
        if alive.len() > 4 {
            return false;
        }
        // Per live alternative: (core, automaton, state); keyed when every one has a state.
        let mut alts = [(RtCoreId::NONE, 0u32, NUM_DEAD); 4];
        let mut keyed = true;
        for (k, &ai) in alive.iter().enumerate() {
            let a = self.rt.st.alts[ai];
            if !matches!(&p.cores[a.core], CoreRt::Number(_)) {
                return false;
            }
            let state = a.num().state;
            match cs.numbers.dfa(a.core) {
                Some(d) if state != NUM_OVER => alts[k] = (a.core, d, state),
                _ => {
                    alts[k] = (a.core, 0, NUM_OVER);
                    keyed = false;
                }
            }
        }
        alts[..alive.len()].sort_unstable_by_key(|x| x.0);
        // An item of a `uniqueItems` array: which exponent digits may follow depends on the
        // items seen (`unique::exponent_fresh`), not on the automaton states, so it is walked.
        let n_frames = self.rt.st.frames.len();
        let item = n_frames >= 2 && self.rt.st.frames[n_frames - 2].uniq;
        let key = (keyed && !item)
            .then(|| OpenKey::Num { cores: alts.map(|x| x.0), states: alts.map(|x| x.2) });
        // The number-only tokens after which some alternative lives: from the automata's
        // per-state lists, or on text when a state is unknown (what an interrupted automaton
        // walk added is a subset of what the text walk adds). `true` when the automata did it.
        let dfas = alts.map(|x| x.1);
        let walk_numbers = |rt: &mut Rt<'_>, into: &mut TokenMask| {
            let numeric = (classes.numeric_id, &classes.numeric);
            let walked = key.is_some()
                && cs.numbers.walk(&dfas[..alive.len()], alts.map(|x| x.2), numeric, into);
            if !walked {
                classes.numeric.walk(rt, into);
            }
            walked
        };
        if !prefix.is_empty() {
            // A prefix's classes (a number opened inside a walked token): few tokens, whose
            // per-state lists the automata keep anyway; a cached copy would be a whole
            // vocabulary-sized bitset to allocate, clear and merge for a handful of bits.
            walk_numbers(&mut *self.rt, mask);
        } else if let Some(m) = key.and_then(|k| cs.open_sets.get(classes, k)) {
            mask.union_with(&m);
        } else {
            let mut m = TokenMask::new(mask.len());
            let walked = walk_numbers(&mut *self.rt, &mut m);
            mask.union_with(&m);
            if let (Some(k), true) = (key, walked) {
                cs.open_sets.put(self.vocab, classes, k, Arc::new(m));
            }
        }
        let json = self.vocab.extension::<JsonClasses>();
        let mut hook =
            StringHook { fast: self.fast, vocab: self.vocab, classes: &json, base: prefix };
        classes.rest.walk_hooked(&mut *self.rt, mask, &mut hook);
        self.closing_tokens(
            classes,
            prefix,
            (keyed && !item).then_some(&alts[..alive.len()]),
            mask,
        );
        true
    }

    /// The tokens of `classes.rest_close`, whose first byte closes the number. After that
    /// byte the number is gone except for which alternatives accepted it, so with every
    /// alternative's automaton state known (`alts`: core, automaton, state) their mask is
    /// cached per compiled schema under the state with the number reduced to that (and none
    /// is possible when no alternative accepts); otherwise (a state past the automaton, an
    /// item of a `uniqueItems` array, whose value matters after it closes) they are walked.
    fn closing_tokens(
        &mut self,
        classes: &NumberClasses,
        prefix: &[u8],
        alts: Option<&[(RtCoreId, u32, u32)]>,
        mask: &mut TokenMask,
    ) {
        let cs = self.rt.cs;
        let cap = cs.engine.shared_cap();
        // Only the vocabulary's own classes: a prefix's closing tokens are few (`1,`, `1}`),
        // walked faster than a vocabulary-sized bitset is allocated and merged.
        let key = alts.filter(|_| cap > 0 && prefix.is_empty()).map(|alts| {
            let f = *self.rt.st.frames.last().expect("root");
            let mut st = std::mem::take(&mut self.fast.closing_key);
            st.copy_from(self.rt.st);
            st.buf.truncate(f.buf as usize);
            for a in &mut st.alts[f.alts as usize..] {
                let closes = a.alive && {
                    let s = a.num().state;
                    let d = alts.iter().find(|x| x.0 == a.core).map(|x| x.1);
                    s != NUM_DEAD && d.is_some_and(|d| cs.numbers.accepts(d, s))
                };
                *a = a.with_num(super::NumProgress {
                    state: if closes { NUM_CLOSES } else { NUM_DEAD },
                });
            }
            st
        });
        let json = self.vocab.extension::<JsonClasses>();
        let mut hook =
            StringHook { fast: self.fast, vocab: self.vocab, classes: &json, base: prefix };
        let Some(st) = key else {
            classes.rest_close.walk_hooked(&mut *self.rt, mask, &mut hook);
            return;
        };
        let f = *self.rt.st.frames.last().expect("root");
        // No alternative accepts the number: no byte can close it, and there is nothing to key.
        if st.alts[f.alts as usize..].iter().any(|a| a.alive && a.num().state == NUM_CLOSES) {
            let addr = std::ptr::from_ref(classes) as usize;
            let h = {
                use std::hash::{Hash, Hasher};
                let mut h = rustc_hash::FxHasher::default();
                (addr, &st).hash(&mut h);
                h.finish()
            };
            if let Some(m) = cs.closing.get(self.vocab, h, |k| k.0 == addr && k.1 == *st) {
                mask.union_with(&m);
            } else {
                let mut m = TokenMask::new(mask.len());
                classes.rest_close.walk_hooked(&mut *self.rt, &mut m, &mut hook);
                mask.union_with(&m);
                cs.closing.insert_arc(self.vocab, h, (addr, (*st).clone()), Arc::new(m), cap);
            }
        }
        hook.fast.closing_key = st;
    }

    fn alive(&self) -> smallvec::SmallVec<[usize; 4]> {
        let f = self.rt.st.frames.last().expect("root");
        (f.alts as usize..self.rt.st.alts.len()).filter(|&i| self.rt.st.alts[i].alive).collect()
    }

    fn fast_str(&mut self, classes: &StringClasses, mask: &mut TokenMask) -> bool {
        let p = &self.rt.cs.program;
        let alive = self.alive();
        if alive.is_empty()
            || !alive
                .iter()
                .all(|&i| matches!(p.cores[self.rt.st.alts[i].core.index()], CoreRt::String { .. }))
        {
            return false;
        }
        let fi = self.rt.st.frames.len() - 1;
        let mut todo: smallvec::SmallVec<[(usize, OpenKey); 4]> = smallvec::SmallVec::new();
        for &ai in &alive {
            if let Some(members) = self.rt.item_members(fi, ai) {
                self.member_open(ai, members, classes, mask);
                continue;
            }
            if self.rt.counted_risky_bytes(fi, ai).is_some() {
                self.counted_open(ai, classes, mask);
                continue;
            }
            if let Some(key) = self.open_tokens(ai, classes, mask) {
                todo.push((ai, key));
            }
        }
        for chunk in todo.chunks(LOCKSTEP) {
            self.open_walk(chunk, classes, mask);
        }
        if alive.len() == 1 && !self.recording() {
            self.closing_single(alive[0], classes, mask);
        } else {
            classes.closing.walk(&mut *self.rt, mask);
        }
        true
    }

    /// Is a `uniqueItems` array recording its items' bytes? Then a token that may complete an
    /// item must be pushed byte by byte (the duplicate check reads the recorded text), so
    /// closing tokens are walked with the recogniser instead of decided per group. Open
    /// tokens never complete an item and keep their fast path.
    fn recording(&self) -> bool {
        self.rt.st.frames.iter().any(|f| f.uniq)
    }

    /// Adds the tokens that keep alternative `ai` of the top string frame alive without closing
    /// it, when it is an item decided by counting whose text so far an earlier item continues
    /// ([`Rt::counted_risky_bytes`]): they depend on the items written, not only on the
    /// automaton state, so the plain and escaped tokens are walked with the recogniser, which
    /// counts completions byte by byte (cheap once a token leaves every earlier item behind).
    fn counted_open(&mut self, ai: usize, classes: &StringClasses, mask: &mut TokenMask) {
        self.single_alt_walk(ai, &classes.plain, mask);
        self.single_alt_walk(ai, &classes.escaped, mask);
    }

    /// Adds the tokens that keep alternative `ai` of the top string frame alive without closing
    /// it, when it is an item decided by its `members` ([`Rt::item_members`]): the plain
    /// tokens along the unseen members that extend the text so far (the sorted names walk the
    /// keys use), the escaped ones with the recogniser.
    fn member_open(
        &mut self,
        ai: usize,
        members: &[Box<[u8]>],
        classes: &StringClasses,
        mask: &mut TokenMask,
    ) {
        let pi = self.rt.st.frames.len() - 2;
        let item = self.rt.st.frames[pi].item as usize;
        let text = crate::schema::unique::partial_string(&self.rt.st.raw[item + 1..]);
        let run = crate::schema::unique::members_with_prefix(members, &text);
        let mut oks = std::mem::take(&mut self.fast.oks);
        oks.clear();
        oks.push(0);
        let (mut n, mut canon) = (0, Vec::new());
        for m in run {
            canon.clear();
            crate::schema::unique::string_canon(m, &mut canon);
            n += u32::from(!self.rt.seen_item(pi, &canon));
            oks.push(n);
        }
        if n > 0 {
            let mut stack = vec![(0, run.len() as u32)];
            let mut w = NameWalk {
                names: run,
                oks: &oks,
                pos: text.len() as u32,
                stack: &mut stack,
                top: 0,
            };
            classes.plain.walk(&mut w, mask);
        }
        self.fast.oks = oks;
        self.single_alt_walk(ai, &classes.escaped, mask);
    }

    /// Adds the tokens that keep alternative `ai` of the top string frame alive without
    /// closing the string, when a shortcut or the cache has them; otherwise returns the key
    /// to compute them under ([`Fast::open_walk`]).
    fn open_tokens(
        &mut self,
        ai: usize,
        classes: &StringClasses,
        mask: &mut TokenMask,
    ) -> Option<OpenKey> {
        let cs = self.rt.cs;
        let p = &cs.program;
        let a = self.rt.st.alts[ai];
        let CoreRt::String { dfa, max, .. } = p.cores[a.core] else {
            unreachable!("string core checked by the caller")
        };
        let d = &p.dfas[dfa];
        // A counted string far from its bound has the unbounded open set: no token is long
        // enough to reach the bound with the fewest code points any state still needs.
        let longest = classes.plain.max_depth().max(classes.escaped.max_depth()) as u32;
        let (max, count) =
            if max == u32::MAX || max - a.str().chars >= longest.saturating_add(d.max_short()) {
                (u32::MAX, 0)
            } else {
                (max, a.str().chars)
            };
        if max == u32::MAX && cs.open_sets.universal(p, dfa, a.str().state) {
            mask.union_with(classes.open_set(cs.plain_strings));
            return None;
        }
        let any_start = dfa == p.any_dfa && a.str().state == d.start() && max != u32::MAX;
        if any_start && max - count >= classes.open_nonsafe_max_len {
            mask.union_with(classes.safe_at_most(max - count));
            mask.union_with(classes.open_nonsafe_set(cs.plain_strings));
            return None;
        }
        let key = OpenKey::Str { dfa, state: a.str().state, max, count };
        if let Some(m) = cs.open_sets.get(classes, key) {
            mask.union_with(&m);
            return None;
        }
        if any_start {
            // Near the bound of an unconstrained string: the string-safe tokens by their
            // character count, and only the others walked (partial characters with the
            // counting automaton walk, escapes with the recogniser), not every plain token.
            let mut m = classes.safe_at_most(max - count).clone();
            plain_open(d, a.str().state, count, max, &classes.plain_nonsafe, &mut m);
            self.single_alt_walk(ai, &classes.escaped, &mut m);
            mask.union_with(&m);
            cs.open_sets.put(self.vocab, classes, key, Arc::new(m));
            return None;
        }
        Some(key)
    }

    /// Computes, caches and adds the open tokens of several alternatives (at most
    /// [`LOCKSTEP`], each with its [`OpenKey::Str`]): the plain tokens in one walk that runs
    /// every automaton in lockstep (a node is visited once while any is alive), the escaped
    /// ones with the recogniser per alternative. A `oneOf` of five patterns walks the trie
    /// once, not five times.
    fn open_walk(
        &mut self,
        todo: &[(usize, OpenKey)],
        classes: &StringClasses,
        mask: &mut TokenMask,
    ) {
        let cs = self.rt.cs;
        let p = &cs.program;
        let k = todo.len();
        let mut dfas: [&ByteDfa; LOCKSTEP] = [&p.dfas[p.any_dfa]; LOCKSTEP];
        let mut maxs = [u32::MAX; LOCKSTEP];
        let mut start = [(DEAD, 0u32); LOCKSTEP];
        for (j, &(_, key)) in todo.iter().enumerate() {
            let OpenKey::Str { dfa, state, max, count } = key else {
                unreachable!("string open keys only")
            };
            dfas[j] = &p.dfas[dfa.index()];
            maxs[j] = max;
            start[j] = (state, count);
        }
        let mut ms: smallvec::SmallVec<[TokenMask; LOCKSTEP]> =
            (0..k).map(|_| TokenMask::new(mask.len())).collect();
        let product = if k > 1 && maxs[..k].iter().all(|&m| m == u32::MAX) {
            Product::build(&dfas[..k], &start[..k], PRODUCT_LIMIT)
        } else {
            None
        };
        if k == 1 {
            plain_open(dfas[0], start[0].0, start[0].1, maxs[0], &classes.plain, &mut ms[0]);
        } else if let Some(pr) = product {
            classes.plain.walk_states_with(
                1u32,
                |s, b| {
                    let n = pr.trans[s as usize * pr.stride + pr.col[b as usize] as usize];
                    (n != 0).then_some(n)
                },
                |&s, t| {
                    let alive = pr.alive[s as usize];
                    for (j, m) in ms.iter_mut().enumerate() {
                        if alive >> j & 1 != 0 {
                            m.insert(t);
                        }
                    }
                },
            );
        } else {
            let all = (1u8 << k) - 1;
            classes.plain.walk_states_with(
                (start, all),
                |(sts, alive), b| {
                    let lead = u32::from(b & 0xC0 != 0x80);
                    let (mut out, mut now) = (sts, 0u8);
                    for j in 0..k {
                        if alive >> j & 1 == 0 {
                            continue;
                        }
                        let (s, c) = sts[j];
                        let n = dfas[j].next(s, b);
                        let c = c + lead;
                        if n != DEAD
                            && (maxs[j] == u32::MAX
                                || c.saturating_add(dfas[j].short(n)) <= maxs[j])
                        {
                            out[j] = (n, c);
                            now |= 1 << j;
                        }
                    }
                    (now != 0).then_some((out, now))
                },
                |&(_, alive), t| {
                    for (j, m) in ms.iter_mut().enumerate() {
                        if alive >> j & 1 != 0 {
                            m.insert(t);
                        }
                    }
                },
            );
        }
        for (j, &(ai, key)) in todo.iter().enumerate() {
            let mut m = std::mem::replace(&mut ms[j], TokenMask::new(0));
            self.single_alt_walk(ai, &classes.escaped, &mut m);
            mask.union_with(&m);
            cs.open_sets.put(self.vocab, classes, key, Arc::new(m));
        }
    }

    /// Walks `trie` with a copy of the state in which only alternative `ai` of the top frame
    /// is alive.
    fn single_alt_walk(&self, ai: usize, trie: &TokTrie, mask: &mut TokenMask) {
        let mut st = self.rt.st.clone();
        let f = *st.frames.last().expect("root");
        for (i, a) in st.alts.iter_mut().enumerate().skip(f.alts as usize) {
            if i != ai {
                a.alive = false;
            }
        }
        let mut log = Vec::new();
        let mut graves = Graves::default();
        let mut rt =
            Rt { cs: self.rt.cs, st: &mut st, log: &mut log, graves: &mut graves, texts: false };
        trie.walk(&mut rt, mask);
    }

    /// Adds the tokens that close the top string frame (one live alternative, `ai`) and go on
    /// as the document allows.
    fn closing_single(&mut self, ai: usize, classes: &StringClasses, mask: &mut TokenMask) {
        let p = &self.rt.cs.program;
        let a: Alt = self.rt.st.alts[ai];
        let CoreRt::String { dfa, min, max } = p.cores[a.core] else {
            unreachable!("string core checked by the caller")
        };
        let d = &p.dfas[dfa];
        // The suffixes after the quote, from the state after the quote: the same whatever the
        // content before it, since the one alternative closes with the same parents.
        let mut exits = self.fast.exits.take().unwrap_or_else(|| TokenMask::new(mask.len()));
        exits.clear();
        self.rt.log.push(Undo::Mark);
        self.rt.pop_frame();
        let cmask = if a.tag { Served::of(&a) } else { Served::default() };
        let closes = self.rt.child_done(&Served::of(&a), &cmask);
        if closes {
            classes.exits.walk(&mut *self.rt, &mut exits);
        }
        self.rt.undo_byte();
        for g in classes.groups.iter().filter(|_| closes) {
            let s = d.run(a.str().state, &g.pre);
            let n = a.str().chars + g.chars;
            if s == DEAD || !d.is_accept(s) || n < min || n > max {
                continue;
            }
            for &t in &g.at_end {
                mask.insert(t);
            }
            for &t in &g.going_on {
                if exits.contains(t) {
                    mask.insert(t);
                }
            }
        }
        self.fast.exits = Some(exits);
        classes.close_escaped.walk(&mut *self.rt, mask);
    }

    /// Keys: per live object alternative, the plain tokens that extend a declared name still
    /// allowed (a walk that follows the sorted names only) and those the undeclared-key
    /// automaton accepts (cached per automaton state); escaped tokens through the recogniser,
    /// closing tokens per group ([`Fast::closing_key`]). Exact because both readings only ever
    /// narrow: a token keeps an alternative alive iff after its last byte a name or the
    /// automaton is still live. Not taken when an undeclared-key language is finite (seen keys
    /// could exhaust it).
    fn fast_key(&mut self, classes: &StringClasses, mask: &mut TokenMask) -> bool {
        let cs = self.rt.cs;
        let p = &cs.program;
        let f = *self.rt.st.frames.last().expect("root");
        let fi = self.rt.st.frames.len() - 1;
        let pos = (self.rt.st.buf.len() - f.buf as usize) as u32;
        let alive = self.alive();
        // Alternatives whose undeclared keys are a finite language: seen keys may exhaust it.
        let mut finite = false;
        for &ai in &alive {
            let a = self.rt.st.alts[ai];
            let CoreRt::Object(o) = &p.cores[a.core] else { return false };
            if a.key().extra != DEAD {
                let x = o.extra.as_ref().expect("an undeclared-key state implies extra");
                finite |= p.dfas[x.dfa].finite_count(a.key().extra).is_some();
            }
        }
        // An alternative whose undeclared keys live like any string takes every open token,
        // which covers what the names of all alternatives could add.
        let takes_all = alive.iter().any(|&ai| {
            let a = self.rt.st.alts[ai];
            a.key().extra != DEAD
                && matches!(&p.cores[a.core],
                    CoreRt::Object(o) if o.extra.as_ref().is_some_and(|x| cs.open_sets.universal(p, x.dfa, a.key().extra)))
        });
        if takes_all {
            mask.union_with(classes.open_set(cs.plain_strings));
        }
        for &ai in alive.iter().filter(|_| !takes_all) {
            let a = self.rt.st.alts[ai];
            let CoreRt::Object(o) = &p.cores[a.core] else { unreachable!() };
            if a.key().extra != DEAD {
                let x = o.extra.as_ref().expect("checked above");
                self.dfa_open(x.dfa, a.key().extra, classes, mask);
            }
            if a.key().lo < a.key().hi {
                let mut oks = std::mem::take(&mut self.fast.oks);
                oks.clear();
                oks.push(0);
                let mut n = 0;
                for i in a.key().lo..a.key().hi {
                    n += u32::from(self.rt.name_ok(fi - 1, a.key().obj as usize, i as usize));
                    oks.push(n);
                }
                if n > 0 {
                    let mut w = NameWalk {
                        names: &o.names[a.key().lo as usize..a.key().hi as usize],
                        oks: &oks,
                        pos,
                        stack: &mut self.fast.name_stack,
                        top: 0,
                    };
                    w.stack.clear();
                    w.stack.push((0, a.key().hi - a.key().lo));
                    classes.plain.walk(&mut w, mask);
                }
                self.fast.oks = oks;
            }
        }
        if finite {
            self.exhausted_keys(&alive, classes, mask);
        }
        // An alternative that takes any key text already let in every escaped token an
        // unconstrained string takes (`classes.open`); the walk could add none.
        if !takes_all {
            classes.escaped.walk(&mut *self.rt, mask);
        }
        if self.recording() {
            classes.closing.walk(&mut *self.rt, mask);
        } else {
            self.closing_key(classes, mask);
        }
        true
    }

    /// Corrects the open plain tokens of a key when an undeclared-key language is finite: the
    /// automaton's open set ignores seen keys, and a token is wrongly in it exactly when the
    /// key text after it could only complete to keys already seen. Such a token makes the
    /// key text a prefix of a seen key, so only the tokens along the seen keys' rests are
    /// decided again, byte by byte with the recogniser (exact, as in the plain walk).
    fn exhausted_keys(&mut self, alive: &[usize], classes: &StringClasses, mask: &mut TokenMask) {
        let f = *self.rt.st.frames.last().expect("root");
        let fi = self.rt.st.frames.len() - 1;
        let of = self.rt.st.frames[fi - 1];
        let typed = self.rt.st.buf.len() - f.buf as usize;
        let mut rests: Vec<Vec<u8>> = Vec::new();
        for &ai in alive {
            let objai = self.rt.st.alts[ai].key().obj;
            for x in &self.rt.st.xk[of.xk as usize..] {
                let key = &self.rt.st.xtext[x.start as usize..(x.start + x.len) as usize];
                if x.alt == objai
                    && key.len() > typed
                    && key[..typed] == self.rt.st.buf[f.buf as usize..]
                {
                    rests.push(key[typed..].to_vec());
                }
            }
        }
        for rest in rests {
            let mut pushed = 0;
            let mut found: smallvec::SmallVec<[(usize, crate::token::TokenId); 8]> =
                smallvec::SmallVec::new();
            classes.plain.prefix_tokens(&rest, |d, t| found.push((d, t)));
            for (d, t) in found {
                while pushed < d && self.rt.try_push_byte(rest[pushed]) {
                    pushed += 1;
                }
                if pushed == d {
                    mask.insert(t);
                } else {
                    mask.remove(t);
                }
            }
            self.rt.pop_bytes(pushed);
        }
    }

    /// Adds the tokens that close the key: per group of tokens with the same content before
    /// the quote, how each object alternative would read the key (one lookup, no walk), then
    /// the suffixes after the quote walked once per distinct reading. The key text itself only
    /// matters to a later duplicate check, which a suffix reaches only through `:` … `,` `"` …
    /// `"`; such tokens (`StringClasses::key_risky`, none in common vocabularies) and those
    /// with an escape before the quote are walked with the recogniser.
    fn closing_key(&mut self, classes: &StringClasses, mask: &mut TokenMask) {
        let fi = self.rt.st.frames.len() - 1;
        let mut pool = std::mem::take(&mut self.fast.key_exits);
        let mut used = 0usize;
        let mut memo: smallvec::SmallVec<[(KeyChoices, usize); 4]> = smallvec::SmallVec::new();
        let mut choices = KeyChoices::new();
        let mut text: smallvec::SmallVec<[u8; 64]> = smallvec::SmallVec::new();
        let xoks = self.rt.extra_oks(fi);
        for g in &classes.groups {
            self.rt.key_choices(fi, &g.pre, &mut choices, Some(&xoks));
            if choices.is_empty() {
                continue;
            }
            for &t in &g.at_end {
                mask.insert(t);
            }
            if g.going_on.is_empty() {
                continue;
            }
            let slot = match memo.iter().find(|(c, _)| *c == choices) {
                Some(&(_, i)) => i,
                None => {
                    if used == pool.len() {
                        pool.push(TokenMask::new(mask.len()));
                    }
                    let x = &mut pool[used];
                    x.clear();
                    let f = self.rt.st.frames[fi];
                    text.clear();
                    text.extend_from_slice(&self.rt.st.buf[f.buf as usize..]);
                    text.extend_from_slice(&g.pre);
                    self.rt.log.push(Undo::Mark);
                    self.rt.key_apply(fi, &text, &choices);
                    classes.exits.walk(&mut *self.rt, x);
                    self.rt.undo_byte();
                    memo.push((choices.clone(), used));
                    used += 1;
                    used - 1
                }
            };
            let x = &pool[slot];
            for &t in &g.going_on {
                if x.contains(t) && !classes.key_risky.contains(t) {
                    mask.insert(t);
                }
            }
        }
        self.fast.key_exits = pool;
        classes.close_escaped.walk(&mut *self.rt, mask);
        classes.key_risky_trie.walk(&mut *self.rt, mask);
    }

    /// Adds the plain tokens automaton `dfa` accepts from `state` (cached).
    fn dfa_open(&mut self, dfa: DfaId, state: u32, classes: &StringClasses, mask: &mut TokenMask) {
        let cs = self.rt.cs;
        let p = &cs.program;
        let d = &p.dfas[dfa.index()];
        if cs.open_sets.universal(p, dfa, state) {
            mask.union_with(classes.open_set(cs.plain_strings));
            return;
        }
        let key = OpenKey::Dfa { dfa, state };
        if let Some(m) = cs.open_sets.get(classes, key) {
            mask.union_with(&m);
            return;
        }
        let mut m = TokenMask::new(mask.len());
        plain_open(d, state, 0, u32::MAX, &classes.plain, &mut m);
        mask.union_with(&m);
        cs.open_sets.put(self.vocab, classes, key, Arc::new(m));
    }
}

/// The trie-walk hook that answers whole subtrees from [`Fast`]: when a walked token prefix
/// has just opened a string or key (its last byte is the opening `"`), the tokens below that
/// node are the vocabulary's tokens with that prefix, classified by what their rest does to a
/// string body ([`Vocabulary::prefix_string_classes`]), so the fast paths decide them without
/// walking their bytes one by one. This is what makes value and key *starts* (`{"`, `, "`,
/// `: "`, `["`) cheap as well as string bodies.
///
/// `base` is the prefix shared by every token of the trie being walked (empty for the
/// vocabulary's trie; the number-opening prefix when walking [`NumberClasses::rest`]), so the
/// classes looked up are those of the tokens that start with `base` + the path.
pub(super) struct StringHook<'x> {
    pub fast: &'x mut FastState,
    pub vocab: &'x Vocabulary,
    /// The vocabulary's JSON classes, fetched once per walk (not per trie node).
    pub classes: &'x JsonClasses,
    pub base: &'x [u8],
}

impl<'a> crate::vocab::WalkHook<Rt<'a>> for StringHook<'_> {
    fn after_push(&mut self, rt: &mut Rt<'a>, path: &[u8], mask: &mut TokenMask) -> bool {
        let f = rt.st.frames.last().expect("root");
        let full = |path: &[u8]| -> smallvec::SmallVec<[u8; 32]> {
            self.base.iter().chain(path).copied().collect()
        };
        match f.kind() {
            Kind::Str | Kind::Key if f.lex.at_char_boundary() && path.last() == Some(&b'"') => {
                let Some(classes) = self.classes.prefix_strings(self.vocab, &full(path)) else {
                    return false;
                };
                let mut fast = Fast { rt, fast: self.fast, vocab: self.vocab };
                fast.string_mask(&classes, mask)
            }
            // The byte that opened the number (a deeper node is never reached: this one
            // answers its whole subtree).
            Kind::Num if rt.st.buf.len() - f.buf as usize == 1 => {
                let prefix = full(path);
                let Some(classes) = self.classes.numbers(self.vocab, &prefix) else { return false };
                let mut fast = Fast { rt, fast: self.fast, vocab: self.vocab };
                fast.number_mask(&classes, &prefix, mask)
            }
            _ => false,
        }
    }
}

/// Follows the sorted declared names byte by byte: alive while some name still allowed
/// (`oks` = prefix counts of allowed names) extends the key text.
struct NameWalk<'a> {
    names: &'a [Box<[u8]>],
    oks: &'a [u32],
    pos: u32,
    stack: &'a mut Vec<(u32, u32)>,
    top: usize,
}

impl Recognizer for NameWalk<'_> {
    #[inline]
    fn try_push_byte(&mut self, b: u8) -> bool {
        let (lo, hi) = self.stack[self.top];
        let at = self.pos as usize + self.top;
        let r = &self.names[lo as usize..hi as usize];
        let l = lo + r.partition_point(|n| n.len() <= at || n[at] < b) as u32;
        let h = lo + r.partition_point(|n| n.len() <= at || n[at] <= b) as u32;
        if self.oks[h as usize] == self.oks[l as usize] {
            return false;
        }
        self.top += 1;
        if self.top == self.stack.len() {
            self.stack.push((l, h));
        } else {
            self.stack[self.top] = (l, h);
        }
        true
    }

    #[inline]
    fn pop_bytes(&mut self, n: usize) {
        self.top -= n;
    }
}
