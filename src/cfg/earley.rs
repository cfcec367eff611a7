//! A scannerless Earley recogniser over bytes (Earley 1970; nullable symbols handled as in
//! Aycock & Horspool 2002, "Practical Earley Parsing": predicting a nullable symbol also
//! advances over it), with an undo log so the trie walker can push and pop bytes.
//!
//! # Layout
//! The chart is one `Vec<Item>` of all sets back to back, `starts[k]` indexing the first item
//! of set `k`. Pushing a byte appends one set (scan the last set's terminals, then close under
//! prediction and completion); popping `n` bytes truncates both vectors. Nothing else changes on
//! a push, so a pop is exact and O(1).
//!
//! # Exactness
//! The grammar is cleaned of unproductive symbols at compile time, so every item can still
//! complete: a set is non-empty iff the bytes so far are a prefix of some sentence. A byte is
//! accepted iff its set is non-empty.
//!
//! # Signatures
//! Committed sets (after `advance`) get a 64-bit structural signature: the order-independent
//! sum over their live items (completed items aside: nothing reads them again) of a hash of
//! (position, signature of the origin set). Two charts with
//! equal signatures of their last set allow exactly the same continuations (everything a future
//! step reads is reachable through origin links), so the mask cache keys on it. A false hit needs
//! a 64-bit hash collision.

use super::grammar::{decode, set_has, CfgGrammar, Sym, END_FLAG, T_FLAG};
use crate::recognizer::Recognizer;
use rustc_hash::FxHashSet;

/// One Earley item: a dotted production (its flat position) and the set it started in.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) struct Item {
    pub pos: u32,
    pub origin: u32,
}

/// Sets smaller than this are deduplicated by a linear scan; larger ones through a hash set.
const LINEAR_DEDUP: usize = 64;
const SELF_ORIGIN: u64 = 0x9E37_79B9_7F4A_7C15;

#[inline]
fn mix(mut z: u64) -> u64 {
    // splitmix64's finaliser.
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The Earley chart of one request.
#[derive(Clone, Debug)]
pub struct Chart {
    items: Vec<Item>,
    /// `starts[k]` = first item of set `k`; the last entry is `items.len()`.
    starts: Vec<u32>,
    sigs: Vec<u64>,
    /// Completion index of committed sets: `(nonterminal, item index)` of the items waiting
    /// for a nonterminal, sorted, set `k`'s at `waiting[wait_starts[k]..wait_starts[k + 1]]`.
    waiting: Vec<(u32, u32)>,
    wait_starts: Vec<u32>,
    /// Per set: the union of the byte sets of its scannable terminals, so that a byte nothing
    /// can scan is refused without looking at the items (most tries of a trie walk fail).
    scan: Vec<[u64; 4]>,
    /// The byte that produced each set after the first.
    bytes: Vec<u8>,
    seen: FxHashSet<u64>,
    predicted: Vec<u32>,
    generation: u32,
    max_items: usize,
    overflowed: bool,
}

impl Chart {
    /// The chart before any byte: set 0 is the closure of `S' → • root`.
    pub(crate) fn new(g: &CfgGrammar, max_items: usize) -> Chart {
        let mut c = Chart {
            items: Vec::new(),
            starts: vec![0],
            sigs: Vec::new(),
            waiting: Vec::new(),
            wait_starts: vec![0],
            scan: Vec::new(),
            bytes: Vec::new(),
            seen: FxHashSet::default(),
            predicted: vec![0; g.alts.len()],
            generation: 0,
            max_items,
            overflowed: false,
        };
        c.generation += 1;
        c.seen.clear();
        c.add(Item { pos: g.start_pos, origin: 0 }, 0);
        c.close(g, 0, 0);
        c.starts.push(c.items.len() as u32);
        c.push_scan(g, 0);
        c.commit(g);
        c
    }

    /// Number of sets (bytes consumed + 1).
    #[inline]
    pub fn set_count(&self) -> usize {
        self.starts.len() - 1
    }

    /// Items in the chart (all sets).
    pub fn item_count(&self) -> usize {
        self.items.len()
    }

    /// The items of set `k`.
    #[inline]
    pub(crate) fn set(&self, k: usize) -> &[Item] {
        &self.items[self.starts[k] as usize..self.starts[k + 1] as usize]
    }

    /// The last set.
    #[inline]
    pub(crate) fn last(&self) -> &[Item] {
        self.set(self.set_count() - 1)
    }

    /// Did a set exceed the item limit (and its byte get refused) since the last
    /// [`Chart::clear_overflow`]?
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// Forget earlier overflows (each engine operation starts with this, so that a refusal can
    /// be told apart from an overflow afterwards).
    pub(crate) fn clear_overflow(&mut self) {
        self.overflowed = false;
    }

    /// The item limit per set.
    pub(crate) fn max_items(&self) -> usize {
        self.max_items
    }

    #[inline]
    fn add(&mut self, it: Item, base: usize) {
        let n = self.items.len() - base;
        if n < LINEAR_DEDUP {
            if self.items[base..].contains(&it) {
                return;
            }
            if n + 1 == LINEAR_DEDUP {
                self.seen.clear();
                for x in &self.items[base..] {
                    self.seen.insert(u64::from(x.pos) << 32 | u64::from(x.origin));
                }
                self.seen.insert(u64::from(it.pos) << 32 | u64::from(it.origin));
            }
        } else if !self.seen.insert(u64::from(it.pos) << 32 | u64::from(it.origin)) {
            return;
        }
        self.items.push(it);
    }

    /// Close the set `i` whose first item is at `base` under prediction and completion.
    /// Returns false on overflow.
    fn close(&mut self, g: &CfgGrammar, i: u32, base: usize) -> bool {
        let gen = self.generation;
        let mut k = base;
        while k < self.items.len() {
            let it = self.items[k];
            k += 1;
            match decode(g.syms[it.pos as usize]) {
                Sym::Nt(b) => {
                    if self.predicted[b as usize] != gen {
                        self.predicted[b as usize] = gen;
                        for &p in &g.alts[b as usize] {
                            self.add(Item { pos: p, origin: i }, base);
                        }
                    }
                    if g.nullable[b as usize] {
                        self.add(Item { pos: it.pos + 1, origin: it.origin }, base);
                    }
                }
                Sym::End(a) => {
                    // Completions with origin == i are of nullable symbols: already advanced
                    // at prediction time (Aycock & Horspool).
                    if it.origin != i {
                        let (s, e) =
                            (self.starts[it.origin as usize], self.starts[it.origin as usize + 1]);
                        for idx in s..e {
                            let w = self.items[idx as usize];
                            if g.syms[w.pos as usize] == a {
                                self.add(Item { pos: w.pos + 1, origin: w.origin }, base);
                            }
                        }
                    }
                }
                Sym::T(_) => {}
            }
            if self.items.len() - base > self.max_items {
                self.overflowed = true;
                return false;
            }
        }
        true
    }

    /// Consume `byte` if some sentence continues with it; else leave the chart unchanged.
    pub(crate) fn push(&mut self, g: &CfgGrammar, byte: u8) -> bool {
        let i = self.set_count() as u32;
        let base = self.items.len();
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            // Stamps from 2^32 sets ago could equal new generations: forget them all.
            self.predicted.fill(0);
            self.generation = 1;
        }
        if !set_has(&self.scan[i as usize - 1], byte) {
            return false;
        }
        let (s, e) = (self.starts[i as usize - 1] as usize, self.starts[i as usize] as usize);
        for idx in s..e {
            let it = self.items[idx];
            let sym = g.syms[it.pos as usize];
            if sym & T_FLAG != 0 && set_has(&g.sets[(sym & !T_FLAG) as usize], byte) {
                self.add(Item { pos: it.pos + 1, origin: it.origin }, base);
            }
        }
        if self.items.len() == base {
            return false;
        }
        if !self.close(g, i, base) {
            self.items.truncate(base);
            return false;
        }
        self.starts.push(self.items.len() as u32);
        self.push_scan(g, base);
        self.bytes.push(byte);
        true
    }

    /// Record the scannable bytes of the set that starts at item `base` (the last set).
    fn push_scan(&mut self, g: &CfgGrammar, base: usize) {
        let mut u = [0u64; 4];
        for it in &self.items[base..] {
            let sym = g.syms[it.pos as usize];
            if sym & T_FLAG != 0 {
                let t = &g.sets[(sym & !T_FLAG) as usize];
                for w in 0..4 {
                    u[w] |= t[w];
                }
            }
        }
        self.scan.push(u);
    }

    /// Undo the last `n` pushed bytes.
    #[inline]
    pub(crate) fn pop(&mut self, n: usize) {
        let keep = self.set_count() - n;
        self.truncate(keep);
    }

    /// Keep only the first `sets` sets.
    pub(crate) fn truncate(&mut self, sets: usize) {
        debug_assert!(sets >= 1);
        self.starts.truncate(sets + 1);
        self.items.truncate(self.starts[sets] as usize);
        self.scan.truncate(sets);
        if self.sigs.len() > sets {
            self.sigs.truncate(sets);
            self.wait_starts.truncate(sets + 1);
            self.waiting.truncate(self.wait_starts[sets] as usize);
        }
        self.bytes.truncate(sets - 1);
    }

    /// The bytes consumed so far.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Compute the signatures and completion indexes of sets pushed since the last commit.
    pub(crate) fn commit(&mut self, g: &CfgGrammar) {
        for k in self.sigs.len()..self.set_count() {
            let first = self.waiting.len();
            for idx in self.starts[k]..self.starts[k + 1] {
                if let Sym::Nt(b) = decode(g.syms[self.items[idx as usize].pos as usize]) {
                    self.waiting.push((b, idx));
                }
            }
            self.waiting[first..].sort_unstable();
            self.wait_starts.push(self.waiting.len() as u32);
            // Completed items are left out: their completions were done when the set was
            // closed, and nothing later reads them (only items before a symbol are scanned or
            // completed into). Keeping them would chain every set to its predecessor and no
            // two charts would ever share a signature. The accepting item is kept.
            let mut h = 0u64;
            for it in self.set(k) {
                if g.syms[it.pos as usize] & END_FLAG != 0
                    && g.syms[it.pos as usize] & T_FLAG == 0
                    && it.pos != g.accept_pos
                {
                    continue;
                }
                let o = if it.origin as usize == k {
                    SELF_ORIGIN
                } else {
                    self.sigs[it.origin as usize]
                };
                h = h.wrapping_add(mix(u64::from(it.pos).wrapping_mul(0xA24B_AED4_963E_E407) ^ o));
            }
            self.sigs.push(h);
        }
    }

    /// The structural signature of the last (committed) set.
    pub(crate) fn signature(&self) -> u64 {
        self.sigs[self.set_count() - 1]
    }

    /// Is the input so far a sentence?
    pub(crate) fn is_accepting(&self, g: &CfgGrammar) -> bool {
        self.last().iter().any(|it| it.pos == g.accept_pos)
    }

    /// Can some byte follow?
    pub(crate) fn can_continue(&self, _g: &CfgGrammar) -> bool {
        self.scan[self.set_count() - 1] != [0; 4]
    }

    /// Bytes that can follow now (for diagnostics and tests).
    pub fn next_bytes(&self, g: &CfgGrammar) -> Vec<u8> {
        (0..=255u8)
            .filter(|&b| {
                self.last().iter().any(|it| {
                    let s = g.syms[it.pos as usize];
                    s & T_FLAG != 0 && set_has(&g.sets[(s & !T_FLAG) as usize], b)
                })
            })
            .collect()
    }
}

const _: () = assert!(END_FLAG != T_FLAG);

/// The trie walker's view of a chart: push = append a set, pop = truncate.
pub(crate) struct EarleyWalk<'a> {
    pub g: &'a CfgGrammar,
    pub chart: &'a mut Chart,
}

impl Recognizer for EarleyWalk<'_> {
    #[inline]
    fn try_push_byte(&mut self, byte: u8) -> bool {
        self.chart.push(self.g, byte)
    }
    #[inline]
    fn pop_bytes(&mut self, n: usize) {
        self.chart.pop(n);
    }
}

/// Does the grammar accept `text` (whole-string)? Runs the same recogniser; tests use an
/// independent one.
pub fn accepts(g: &CfgGrammar, text: &[u8], max_items: usize) -> bool {
    let mut c = Chart::new(g, max_items);
    text.iter().all(|&b| c.push(g, b)) && c.is_accepting(g)
}
