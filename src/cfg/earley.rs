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
//! Committed sets (after `advance`) get a 64-bit signature of their *future*: the
//! order-independent sum, over the items that can still scan (before a terminal, a token
//! terminal or a lexeme that can take a byte; the accepting item too), of a hash of (position,
//! lexeme state, *continuation*). An item's continuation is what its completion reads: the items
//! of its origin set waiting for its left-hand side, each with its own continuation —
//! `cont(o, A)`, computed once per committed set and nonterminal and stored beside the
//! completion index. Items waiting for a nonterminal are thus hashed only through the items
//! that would complete into them, never as such, and an item's origin is hashed as what it
//! leads to, not as which set it is. That is what lets two sets that differ only in how they
//! got there share a signature: after the first repetition of a `( … )*` the helper
//! `h → h • G` has its own set as origin, after the second the first repetition's set, and
//! both sets have the same future (the mask cache hits from the second repetition on; for
//! separated lists `A (B A)*` the lowering also makes the first element alike, see
//! [`super::grammar`]).
//!
//! Inside one set, continuations can be cyclic (left recursion: `h → • h G` waits for `h` in
//! the set that predicted it). Each strongly connected component of the "waits in this set"
//! graph is hashed as a whole — its equations, with references inside it named by nonterminal
//! — and each member as (component, member): a faithful encoding of the equation system, so
//! equal hashes still mean equal futures. Two charts whose last sets have equal signatures
//! allow exactly the same continuations (everything a future step reads is reachable through
//! continuations), so the mask cache keys on it. A false hit needs a 64-bit hash collision.

use super::grammar::{decode, CfgGrammar, Sym, END_FLAG, LEX_FLAG, T_FLAG};
use crate::bytes::ByteSet;
use rustc_hash::FxHashSet;

/// One Earley item: a dotted production (its flat position), the set it started in, and — when
/// the dot is before a lexeme — the lexeme's DFA state (0 otherwise).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) struct Item {
    pub pos: u32,
    pub origin: u32,
    pub st: u32,
}

impl Item {
    /// The item at `pos` from `origin`, entering the lexeme there (if any) at its start state.
    #[inline(always)]
    fn at(g: &CfgGrammar, pos: u32, origin: u32) -> Item {
        let s = g.syms[pos as usize];
        let st =
            if s & LEX_FLAG == LEX_FLAG { g.lexemes[(s & !LEX_FLAG) as usize].start() } else { 0 };
        Item { pos, origin, st }
    }

    #[inline(always)]
    fn key(self) -> (u64, u32) {
        (u64::from(self.pos) << 32 | u64::from(self.origin), self.st)
    }
}

/// Sets smaller than this are deduplicated by a linear scan; larger ones through a hash set.
const LINEAR_DEDUP: usize = 64;
/// `cont(o, a)` when no item of `o` waits for `a` (only the start item's).
const NO_WAITERS: u64 = 0x9E37_79B9_7F4A_7C15;
/// Marks a reference inside a cyclic component of continuations.
const CYCLE: u64 = 0x2545_F491_4F6C_DD1D;

/// Reused buffers of the per-set component search ([`Chart::cont_set`]).
#[derive(Clone, Debug, Default)]
struct SccScratch {
    /// Start of each nonterminal's entries in `waiting` (one past the last at the end).
    groups: Vec<u32>,
    index: Vec<u32>,
    low: Vec<u32>,
    on_stack: Vec<bool>,
    /// The component (its root group) of each group already hashed.
    comp: Vec<u32>,
    stack: Vec<u32>,
    frames: Vec<(u32, u32)>,
}

#[inline]
pub(crate) fn mix(mut z: u64) -> u64 {
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
    /// Parallel to `waiting`: the continuation hash `cont(k, b)` of the entry's set and
    /// nonterminal (the same for all entries of one nonterminal; see the module docs).
    wcont: Vec<u64>,
    /// Scratch of [`Chart::cont_set`].
    scc: SccScratch,
    wait_starts: Vec<u32>,
    /// Per set: the union of the byte sets of its scannable terminals, so that a byte nothing
    /// can scan is refused without looking at the items (most tries of a trie walk fail).
    scan: Vec<ByteSet>,
    /// Per set: the bytes that could follow its deferred lexeme completions (zero when none
    /// are pending). See [`Chart::materialise`].
    pend: Vec<ByteSet>,
    /// Per set: the end of its kernel (the items made by scanning its byte).
    kernel_end: Vec<u32>,
    /// The byte that produced each set after the first (0 for a token step without bytes).
    bytes: Vec<u8>,
    /// The sets made by a token step without bytes (a special token), ascending.
    token_sets: Vec<u32>,
    seen: FxHashSet<(u64, u32)>,
    predicted: Vec<u32>,
    generation: u32,
    max_items: usize,
    /// Item additions allowed between two `clear_overflow`s (one engine call), and those made.
    max_work: usize,
    work: usize,
    overflowed: bool,
    /// Sets before this one are the *context* of a walk that records what depends on it
    /// (see [`Chart::set_boundary`]); 0 (the default) records nothing.
    boundary: u32,
    /// Completions of items that started before `boundary`, made while closing a pushed set
    /// (`taint_close`) or while making a set's deferred completions (`taint_mat`): counters
    /// that only grow, read by the walk before and after each push.
    taint_close: u32,
    taint_mat: u32,
    in_materialise: bool,
}

impl Chart {
    /// The chart before any byte: set 0 is the closure of `S' → • root`.
    pub(crate) fn new(g: &CfgGrammar, max_items: usize, max_work: usize) -> Chart {
        let mut c = Chart {
            items: Vec::new(),
            starts: vec![0],
            sigs: Vec::new(),
            waiting: Vec::new(),
            wcont: Vec::new(),
            scc: SccScratch::default(),
            wait_starts: vec![0],
            scan: Vec::new(),
            pend: Vec::new(),
            kernel_end: Vec::new(),
            bytes: Vec::new(),
            token_sets: Vec::new(),
            seen: FxHashSet::default(),
            predicted: vec![0; g.alts.len()],
            generation: 0,
            max_items,
            max_work,
            work: 0,
            overflowed: false,
            boundary: 0,
            taint_close: 0,
            taint_mat: 0,
            in_materialise: false,
        };
        c.generation += 1;
        c.seen.clear();
        c.add(Item::at(g, g.start_pos, 0), 0);
        let pend = c.close(g, 0, 0, 0, 0).unwrap_or(ByteSet::EMPTY);
        c.starts.push(c.items.len() as u32);
        c.push_scan(g, 0, pend);
        c.pend.push(pend);
        c.kernel_end.push(0);
        // Set 0 has no kernel, so nothing is deferred; an overflow there shows on the first push.
        let _ = c.commit(g);
        c
    }

    /// Number of sets (bytes consumed + 1).
    #[inline]
    pub fn set_count(&self) -> usize {
        self.starts.len() - 1
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

    /// The kernel of the last set: the items its byte made (empty for set 0).
    pub(crate) fn last_kernel(&self) -> &[Item] {
        let k = self.set_count() - 1;
        &self.items[self.starts[k] as usize..self.kernel_end[k] as usize]
    }

    /// Did a set exceed the item limit (and its byte get refused) since the last
    /// `clear_overflow`?
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// Forget earlier overflows (each engine operation starts with this, so that a refusal can
    /// be told apart from an overflow afterwards).
    pub(crate) fn clear_overflow(&mut self) {
        self.overflowed = false;
        self.work = 0;
    }

    /// The item limit per set.
    /// The limit behind the last overflow: the work budget when it is spent, else the set size.
    pub(crate) fn overflow_limit(&self) -> (&'static str, usize) {
        if self.work > self.max_work {
            ("CfgConfig::max_work_per_call", self.max_work)
        } else {
            ("CfgConfig::max_items_per_set", self.max_items)
        }
    }

    #[inline]
    fn add(&mut self, it: Item, base: usize) {
        self.work += 1;
        let n = self.items.len() - base;
        if n < LINEAR_DEDUP {
            if self.items[base..].contains(&it) {
                return;
            }
            if n + 1 == LINEAR_DEDUP {
                self.seen.clear();
                for x in &self.items[base..] {
                    self.seen.insert(x.key());
                }
                self.seen.insert(it.key());
            }
        } else if !self.seen.insert(it.key()) {
            return;
        }
        self.items.push(it);
    }

    fn next_generation(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            // Stamps from 2^32 sets ago could equal new generations: forget them all.
            self.predicted.fill(0);
            self.generation = 1;
        }
    }

    /// Close the set `i` whose first item is at `base` under prediction and completion,
    /// processing the items from `from` on. Kernel items (before `kernel_end`) before a lexeme
    /// in an accepting state do not complete it yet: the bytes that could follow it are
    /// returned instead (see [`Chart::materialise`]). `None` on overflow.
    fn close(
        &mut self,
        g: &CfgGrammar,
        i: u32,
        base: usize,
        from: usize,
        kernel_end: usize,
    ) -> Option<ByteSet> {
        let gen = self.generation;
        let mut pend = ByteSet::EMPTY;
        let mut k = from;
        while k < self.items.len() {
            let it = self.items[k];
            k += 1;
            match decode(g.syms[it.pos as usize]) {
                Sym::Nt(b) => {
                    if self.predicted[b as usize] != gen {
                        self.predicted[b as usize] = gen;
                        for &p in &g.alts[b as usize] {
                            self.add(Item::at(g, p, i), base);
                        }
                    }
                    if g.nullable[b as usize] {
                        self.add(Item::at(g, it.pos + 1, it.origin), base);
                    }
                }
                Sym::Lex(l) => {
                    // A lexeme in an accepting DFA state may end here (it may also go on: no
                    // maximal munch, GBNF has none). An empty lexeme ends where it starts.
                    if g.lexemes[l as usize].accepting(it.st) {
                        // (Deferral needs a non-empty follow set: an empty `pend` means
                        // "nothing deferred", and commit would not complete it.)
                        if k - 1 < kernel_end && !g.follow[it.pos as usize].is_empty() {
                            pend.union_with(&g.follow[it.pos as usize]);
                        } else {
                            self.add(Item::at(g, it.pos + 1, it.origin), base);
                        }
                    }
                }
                Sym::End(a) => {
                    // Completions with origin == i are of nullable symbols: already advanced
                    // at prediction time (Aycock & Horspool).
                    let o = it.origin as usize;
                    if (o as u32) < self.boundary {
                        // Its completion reads the context (see `set_boundary`).
                        if self.in_materialise {
                            self.taint_mat = self.taint_mat.wrapping_add(1);
                        } else {
                            self.taint_close = self.taint_close.wrapping_add(1);
                        }
                    }
                    if o as u32 != i && o < self.sigs.len() {
                        // A committed origin: its completion index has the waiting items.
                        let ws = &self.waiting
                            [self.wait_starts[o] as usize..self.wait_starts[o + 1] as usize];
                        let from = ws.partition_point(|&(b, _)| b < a);
                        for j in from..ws.len() {
                            let (b, idx) = self.waiting[self.wait_starts[o] as usize + j];
                            if b != a {
                                break;
                            }
                            let w = self.items[idx as usize];
                            self.add(Item::at(g, w.pos + 1, w.origin), base);
                        }
                    } else if o as u32 != i {
                        let (s, e) = (self.starts[o], self.starts[o + 1]);
                        for idx in s..e {
                            let w = self.items[idx as usize];
                            if g.syms[w.pos as usize] == a {
                                self.add(Item::at(g, w.pos + 1, w.origin), base);
                            }
                        }
                    }
                }
                Sym::T(_) => {}
            }
            if self.items.len() - base > self.max_items || self.work > self.max_work {
                self.overflowed = true;
                return None;
            }
        }
        Some(pend)
    }

    /// Complete the deferred lexemes of the last set `k` (and close under them).
    ///
    /// Inside a lexeme such as an identifier, every byte reaches an accepting DFA state, and
    /// completing it eagerly would walk the whole chain of rules above it (`primary → ident`,
    /// `postfix → primary`, … up to the statement) once per byte — most of the trie walk's
    /// work. So a scanned item whose lexeme accepts does not complete at once: its set records
    /// the bytes that can follow the lexeme there ([`CfgGrammar::follow`]), and only a push of
    /// such a byte completes it first. A byte outside that set could not be scanned by anything
    /// the completion would add (nor by what those items predict, whose first bytes are in the
    /// set too), so the next set is the same either way; and no later set reads the missing
    /// items as an origin, since reaching them needs such a byte. Committing a set completes
    /// its deferred lexemes, so the last committed set is always whole (EOS, signatures).
    fn materialise(&mut self, g: &CfgGrammar, k: usize) -> bool {
        debug_assert_eq!(k + 1, self.set_count());
        self.next_generation();
        let base = self.starts[k] as usize;
        let old = self.items.len();
        if old - base >= LINEAR_DEDUP {
            // `seen` may hold another set's items since this one was closed.
            self.seen.clear();
            for x in &self.items[base..] {
                self.seen.insert(x.key());
            }
        }
        for idx in base..self.kernel_end[k] as usize {
            let it = self.items[idx];
            if let Sym::Lex(l) = decode(g.syms[it.pos as usize]) {
                if g.lexemes[l as usize].accepting(it.st) {
                    self.add(Item::at(g, it.pos + 1, it.origin), base);
                }
            }
        }
        self.in_materialise = true;
        let closed = self.close(g, k as u32, base, old, 0);
        self.in_materialise = false;
        if closed.is_none() {
            self.items.truncate(old);
            return false;
        }
        self.starts[k + 1] = self.items.len() as u32;
        self.scan.pop();
        self.push_scan(g, base, ByteSet::EMPTY);
        self.pend[k] = ByteSet::EMPTY;
        true
    }

    /// Append the sets for the bytes of `run`, a run inside the lexemes that every scannable
    /// item of the last set is before (a *pure* set, see `walk`; items a committed set's
    /// deferred completions made aside, which cannot take the run's bytes). Each of `moves` is
    /// (lexeme, DFA state in the last set, state after the run, from which it can go on); the
    /// lexemes the run killed are not in it. Such a run changes nothing but those states: the
    /// set after it is the last set's items before each moved lexeme in its state, now in its
    /// state after the run (their completions deferred where that state accepts, every FOLLOW
    /// set being non-empty in a pure set). Only that set is built; the sets before it are
    /// empty placeholders, which the walk never pushes from or reads (it pops back over them
    /// into virtual pushes) and no item has as origin. `false` (nothing changed) on overflow.
    pub(crate) fn push_run(
        &mut self,
        g: &CfgGrammar,
        moves: &[(u32, u32, u32)],
        run: &[(u8, u32)],
    ) -> bool {
        let Some((&(last_byte, _), head)) = run.split_last() else { return true };
        let count = self.set_count();
        let (s, e) = (self.starts[count - 1] as usize, self.starts[count] as usize);
        for &(b, _) in head {
            self.starts.push(self.items.len() as u32);
            self.scan.push(ByteSet::EMPTY);
            self.pend.push(ByteSet::EMPTY);
            self.kernel_end.push(self.items.len() as u32);
            self.bytes.push(b);
        }
        let i = self.set_count() as u32;
        let base = self.items.len();
        self.next_generation();
        for idx in s..e {
            let it = self.items[idx];
            let sym = g.syms[it.pos as usize];
            for &(lex, from, to) in moves {
                if sym == LEX_FLAG | lex && it.st == from {
                    self.add(Item { pos: it.pos, origin: it.origin, st: to }, base);
                }
            }
        }
        let kernel_end = self.items.len();
        let Some(pend) = self.close(g, i, base, base, kernel_end) else {
            self.items.truncate(base);
            self.truncate(count);
            return false;
        };
        self.starts.push(self.items.len() as u32);
        self.push_scan(g, base, pend);
        self.pend.push(pend);
        self.kernel_end.push(kernel_end as u32);
        self.bytes.push(last_byte);
        true
    }

    /// Consume `byte` if some sentence continues with it; else leave the chart unchanged.
    #[inline]
    pub(crate) fn push(&mut self, g: &CfgGrammar, byte: u8) -> bool {
        self.push_with(g, Some(byte), &[], false)
    }

    /// Push one set: the last set's items that scan `byte` (none for `None`, a token step
    /// without bytes), plus `extra` (items a token terminal scanned). Without `force`, an empty
    /// set is refused (`false`, chart unchanged); with it, an empty set is pushed (a set inside a
    /// token that only a token terminal takes as a whole). `false` on overflow either way.
    fn push_with(&mut self, g: &CfgGrammar, byte: Option<u8>, extra: &[Item], force: bool) -> bool {
        let i = self.set_count() as u32;
        let scans = byte.is_some_and(|b| self.scan[i as usize - 1].contains(b));
        if !scans && !force {
            return false;
        }
        if let Some(b) = byte {
            if self.pend[i as usize - 1].contains(b) && !self.materialise(g, i as usize - 1) {
                return false;
            }
        }
        let base = self.items.len();
        self.next_generation();
        if let (true, Some(byte)) = (scans, byte) {
            let (s, e) = (self.starts[i as usize - 1] as usize, self.starts[i as usize] as usize);
            for idx in s..e {
                let it = self.items[idx];
                let sym = g.syms[it.pos as usize];
                if sym & T_FLAG == 0 {
                    continue;
                }
                if sym & END_FLAG != 0 {
                    // A lexeme: one DFA step; the item stays before the lexeme.
                    let lx = &g.lexemes[(sym & !LEX_FLAG) as usize];
                    if let Some(st) = lx.next(it.st, byte) {
                        if lx.first[st as usize].is_empty() {
                            // The lexeme can only end here (live states accept or continue).
                            self.add(Item::at(g, it.pos + 1, it.origin), base);
                        } else {
                            self.add(Item { pos: it.pos, origin: it.origin, st }, base);
                        }
                    }
                } else if g.sets[(sym & !T_FLAG) as usize].contains(byte) {
                    self.add(Item::at(g, it.pos + 1, it.origin), base);
                }
            }
        }
        for &it in extra {
            self.add(it, base);
        }
        if self.items.len() == base && !force {
            return false;
        }
        let kernel_end = self.items.len();
        let Some(pend) = self.close(g, i, base, base, kernel_end) else {
            self.items.truncate(base);
            return false;
        };
        self.starts.push(self.items.len() as u32);
        self.push_scan(g, base, pend);
        self.pend.push(pend);
        self.kernel_end.push(kernel_end as u32);
        match byte {
            Some(b) => self.bytes.push(b),
            None => {
                self.bytes.push(0);
                self.token_sets.push(i);
            }
        }
        true
    }

    /// The items of the last set that a token terminal lets token `token` scan (each advanced
    /// over its terminal), into `out`. `matches(set id, token)` says whether token terminal
    /// `set` takes `token`; byte terminals never do.
    pub(crate) fn token_scan(
        &self,
        g: &CfgGrammar,
        matches: impl Fn(u32) -> bool,
        out: &mut Vec<Item>,
    ) {
        out.clear();
        for it in self.last() {
            if let Sym::T(t) = decode(g.syms[it.pos as usize]) {
                if g.token_term(t).is_some() && matches(t) {
                    out.push(Item::at(g, it.pos + 1, it.origin));
                }
            }
        }
    }

    /// Does the last set hold an item before a token terminal?
    pub(crate) fn expects_token(&self, g: &CfgGrammar) -> bool {
        !g.tokens.is_empty()
            && self.last().iter().any(|it| {
                matches!(decode(g.syms[it.pos as usize]), Sym::T(t) if g.token_term(t).is_some())
            })
    }

    /// Consume one token whose token-terminal scans are `extra` (non-empty, from
    /// [`Chart::token_scan`]) and whose bytes are `bytes`: its bytes are pushed too (a text token
    /// may also match byte terminals), sets inside it may be empty, and the token-terminal items
    /// join the set after its last byte. A token without bytes (a special token) is one set with
    /// no byte. Commits. `false` (chart unchanged) on overflow.
    pub(crate) fn push_token(&mut self, g: &CfgGrammar, bytes: &[u8], extra: &[Item]) -> bool {
        debug_assert!(!extra.is_empty());
        let before = self.set_count();
        let ok = match bytes.split_last() {
            None => self.push_with(g, None, extra, true),
            Some((&last, head)) => {
                head.iter().all(|&b| self.push_with(g, Some(b), &[], true))
                    && self.push_with(g, Some(last), extra, true)
            }
        };
        if !ok || !self.commit(g) {
            self.truncate(before);
            return false;
        }
        true
    }

    /// Record the scannable bytes of the set that starts at item `base` (the last set), plus
    /// the bytes `pend` that would complete a deferred lexeme first.
    fn push_scan(&mut self, g: &CfgGrammar, base: usize, pend: ByteSet) {
        let mut u = pend;
        for it in &self.items[base..] {
            let sym = g.syms[it.pos as usize];
            if sym & T_FLAG != 0 {
                let t = if sym & END_FLAG != 0 {
                    &g.lexemes[(sym & !LEX_FLAG) as usize].first[it.st as usize]
                } else {
                    &g.sets[(sym & !T_FLAG) as usize]
                };
                u.union_with(t);
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
        self.pend.truncate(sets);
        self.kernel_end.truncate(sets);
        if self.sigs.len() > sets {
            self.sigs.truncate(sets);
            self.wait_starts.truncate(sets + 1);
            self.waiting.truncate(self.wait_starts[sets] as usize);
            self.wcont.truncate(self.wait_starts[sets] as usize);
        }
        self.bytes.truncate(sets - 1);
        while self.token_sets.last().is_some_and(|&k| k as usize >= sets) {
            self.token_sets.pop();
        }
    }

    /// The bytes consumed so far (token steps without bytes contribute none).
    pub fn bytes(&self) -> Vec<u8> {
        if self.token_sets.is_empty() {
            return self.bytes.clone();
        }
        let mut out = Vec::with_capacity(self.bytes.len());
        let mut marks = self.token_sets.iter().peekable();
        for (k, &b) in self.bytes.iter().enumerate() {
            // `bytes[k]` made set `k + 1`.
            if marks.peek().is_some_and(|&&m| m as usize == k + 1) {
                marks.next();
                continue;
            }
            out.push(b);
        }
        out
    }

    /// Token steps without bytes so far (special tokens a token terminal took).
    pub fn token_steps(&self) -> usize {
        self.token_sets.len()
    }

    /// Complete the last set's deferred lexemes and compute the signatures and completion
    /// indexes of the sets pushed since the last commit. `false` (nothing committed) when the
    /// completed set would exceed the item limit: the caller truncates back.
    #[must_use]
    pub(crate) fn commit(&mut self, g: &CfgGrammar) -> bool {
        let last = self.set_count() - 1;
        if !self.pend[last].is_empty() && !self.materialise(g, last) {
            return false;
        }
        for k in self.sigs.len()..self.set_count() {
            let first = self.waiting.len();
            for idx in self.starts[k]..self.starts[k + 1] {
                if let Sym::Nt(b) = decode(g.syms[self.items[idx as usize].pos as usize]) {
                    self.waiting.push((b, idx));
                }
            }
            self.waiting[first..].sort_unstable();
            self.wait_starts.push(self.waiting.len() as u32);
            self.cont_set(g, k, first);
            // Only items that can still take a byte or a token (and the accepting item) are
            // hashed: completed items were completed when the set was closed, items waiting
            // for a nonterminal are reached through their continuations, and a lexeme that
            // cannot take another byte has completed already.
            let mut h = 0u64;
            for it in self.set(k) {
                let sym = g.syms[it.pos as usize];
                let active = if sym & LEX_FLAG == LEX_FLAG {
                    !g.lexemes[(sym & !LEX_FLAG) as usize].first[it.st as usize].is_empty()
                } else {
                    sym & T_FLAG != 0 || it.pos == g.accept_pos
                };
                if active {
                    let ctx = self.cont_of(it.origin as usize, g.lhs[it.pos as usize]);
                    h = h.wrapping_add(mix(g.rest_hash[it.pos as usize]
                        ^ u64::from(it.st).wrapping_mul(0x9FB2_1C65_1E98_DF25)
                        ^ ctx));
                }
            }
            self.sigs.push(h);
        }
        true
    }

    /// `cont(o, a)` of a committed set `o` (its completion index filled): the continuation
    /// hash of the items of set `o` waiting for `a` (see the module docs).
    #[inline]
    fn cont_of(&self, o: usize, a: u32) -> u64 {
        let (s, e) = (self.wait_starts[o] as usize, self.wait_starts[o + 1] as usize);
        let j = s + self.waiting[s..e].partition_point(|&(b, _)| b < a);
        if j < e && self.waiting[j].0 == a {
            self.wcont[j]
        } else {
            NO_WAITERS
        }
    }

    /// Fill `wcont` for set `k`, whose sorted completion index starts at `first` in `waiting`
    /// (`wait_starts` already closed): Tarjan's algorithm over the set's nonterminals, an edge
    /// `b → lhs(w)` for each item `w` waiting for `b` with origin `k`; components come out
    /// callees first, so every reference out of a component is hashed already.
    fn cont_set(&mut self, g: &CfgGrammar, k: usize, first: usize) {
        let end = self.waiting.len();
        self.wcont.resize(end, 0);
        let mut sc = std::mem::take(&mut self.scc);
        sc.groups.clear();
        for i in first..end {
            if i == first || self.waiting[i].0 != self.waiting[i - 1].0 {
                sc.groups.push(i as u32);
            }
        }
        let ng = sc.groups.len();
        sc.groups.push(end as u32);
        let group_of = |w: &[(u32, u32)], groups: &[u32], a: u32| -> Option<usize> {
            let j = groups[..ng].partition_point(|&x| w[x as usize].0 < a);
            (j < ng && w[groups[j] as usize].0 == a).then_some(j)
        };
        // The group an entry's item depends on inside this set, if any.
        let target = |c: &Chart, groups: &[u32], e: usize| -> Option<usize> {
            let w = c.items[c.waiting[e].1 as usize];
            if w.origin as usize == k {
                group_of(&c.waiting, groups, g.lhs[w.pos as usize])
            } else {
                None
            }
        };
        const UNSEEN: u32 = u32::MAX;
        sc.index.clear();
        sc.index.resize(ng, UNSEEN);
        sc.low.clear();
        sc.low.resize(ng, 0);
        sc.on_stack.clear();
        sc.on_stack.resize(ng, false);
        sc.comp.clear();
        sc.comp.resize(ng, u32::MAX);
        sc.stack.clear();
        let mut next_index = 0u32;
        for root in 0..ng {
            if sc.index[root] != UNSEEN {
                continue;
            }
            // Iterative DFS: frames of (group, next entry to look at).
            sc.frames.clear();
            sc.frames.push((root as u32, sc.groups[root]));
            sc.index[root] = next_index;
            sc.low[root] = next_index;
            next_index += 1;
            sc.stack.push(root as u32);
            sc.on_stack[root] = true;
            while let Some(&(v, e)) = sc.frames.last() {
                let v = v as usize;
                if e < sc.groups[v + 1] {
                    sc.frames.last_mut().expect("non-empty").1 += 1;
                    let Some(t) = target(self, &sc.groups, e as usize) else { continue };
                    if sc.index[t] == UNSEEN {
                        sc.index[t] = next_index;
                        sc.low[t] = next_index;
                        next_index += 1;
                        sc.stack.push(t as u32);
                        sc.on_stack[t] = true;
                        sc.frames.push((t as u32, sc.groups[t]));
                    } else if sc.on_stack[t] {
                        sc.low[v] = sc.low[v].min(sc.index[t]);
                    }
                    continue;
                }
                sc.frames.pop();
                if let Some(&(u, _)) = sc.frames.last() {
                    sc.low[u as usize] = sc.low[u as usize].min(sc.low[v]);
                }
                if sc.low[v] != sc.index[v] {
                    continue;
                }
                // `v` roots a component: its members are the stack down to `v`, marked in
                // `comp` while they are hashed.
                let at = sc.stack.iter().rposition(|&x| x as usize == v).expect("on stack");
                for i in at..sc.stack.len() {
                    let m = sc.stack[i] as usize;
                    sc.on_stack[m] = false;
                    sc.comp[m] = v as u32;
                }
                let members = &sc.stack[at..];
                let cyclic = members.len() > 1
                    || (sc.groups[v]..sc.groups[v + 1])
                        .any(|e| target(self, &sc.groups, e as usize) == Some(v));
                // One member's equation: its waiting items with their continuations, a
                // reference into the component named by its nonterminal.
                let equation = |c: &Chart, m: usize| -> u64 {
                    let mut x = 0u64;
                    for e in sc.groups[m] as usize..sc.groups[m + 1] as usize {
                        let w = c.items[c.waiting[e].1 as usize];
                        let a = g.lhs[w.pos as usize];
                        let ctx = match target(c, &sc.groups, e) {
                            Some(t) if sc.comp[t] == v as u32 => {
                                mix(u64::from(a).wrapping_mul(0xD6E8_FEB8_6659_FD93) ^ CYCLE)
                            }
                            Some(t) => c.wcont[sc.groups[t] as usize],
                            None if w.origin as usize == k => NO_WAITERS,
                            None => c.cont_of(w.origin as usize, a),
                        };
                        x = x.wrapping_add(mix(g.rest_hash[w.pos as usize] ^ ctx));
                    }
                    x
                };
                let nt = |m: usize| u64::from(self.waiting[sc.groups[m] as usize].0);
                let set_group = |wcont: &mut [u64], m: usize, val: u64| {
                    for e in sc.groups[m]..sc.groups[m + 1] {
                        wcont[e as usize] = val;
                    }
                };
                if cyclic {
                    let comp = members.iter().fold(0u64, |acc, &m| {
                        let m = m as usize;
                        acc.wrapping_add(mix(
                            nt(m).wrapping_mul(0xC2B2_AE3D_27D4_EB4F) ^ equation(self, m)
                        ))
                    });
                    for &m in members {
                        let m = m as usize;
                        let val = mix(comp ^ nt(m).wrapping_mul(0x1656_67B1_9E37_79F9) ^ CYCLE);
                        set_group(&mut self.wcont, m, val);
                    }
                } else {
                    let val = mix(equation(self, v) ^ nt(v).wrapping_mul(0xC2B2_AE3D_27D4_EB4F));
                    set_group(&mut self.wcont, v, val);
                }
                sc.stack.truncate(at);
            }
        }
        self.scc = sc;
    }

    /// Record, from now on, every completion of an item that started before the last set —
    /// one that reads the *context* of the last set rather than the last set itself — in the
    /// counters [`Chart::taint_counts`] returns; [`Chart::clear_boundary`] stops it.
    ///
    /// A walk from the last set `K` whose pushes make no such completion builds the same sets
    /// from any chart whose set `K` holds the same items up to their origins before `K`: the
    /// first item such a chart would lack must come from a completion reading an origin
    /// before `K`. So a token whose walk makes none is allowed or refused whatever came before
    /// `K` (the position cache of `engine` keys on that).
    pub(crate) fn set_boundary(&mut self) {
        self.boundary = (self.set_count() - 1) as u32;
    }

    /// Stop recording (see [`Chart::set_boundary`]).
    pub(crate) fn clear_boundary(&mut self) {
        self.boundary = 0;
    }

    /// The completions across the boundary made so far (see [`Chart::set_boundary`]): while
    /// closing pushed sets, and while making a set's deferred completions.
    #[inline(always)]
    pub(crate) fn taint_counts(&self) -> (u32, u32) {
        (self.taint_close, self.taint_mat)
    }

    /// An order-independent 64-bit hash of the last set's items, their origins reduced to
    /// "this set" or "before it": equal keys, equal walks for every token whose walk makes no
    /// completion across the boundary (see [`Chart::set_boundary`]).
    pub(crate) fn position_key(&self) -> u64 {
        let k = (self.set_count() - 1) as u32;
        let mut h = 0x243F_6A88_85A3_08D3u64;
        for it in self.last() {
            let local = u64::from(it.origin == k);
            h = h.wrapping_add(mix(u64::from(it.pos) << 33
                ^ u64::from(it.st).wrapping_mul(0x9FB2_1C65_1E98_DF25)
                ^ local));
        }
        mix(h ^ self.last().len() as u64)
    }

    /// The structural signature of the last (committed) set.
    pub(crate) fn signature(&self) -> u64 {
        self.sigs[self.set_count() - 1]
    }

    /// Is the input so far a sentence?
    pub(crate) fn is_accepting(&self, g: &CfgGrammar) -> bool {
        self.last().iter().any(|it| it.pos == g.accept_pos)
    }

    /// Make the last set's deferred lexeme completions (see [`Chart::materialise`]), as a push
    /// of one of their FOLLOW bytes would first. `false` on overflow.
    pub(crate) fn settle(&mut self, g: &CfgGrammar) -> bool {
        let k = self.set_count() - 1;
        self.pend[k].is_empty() || self.materialise(g, k)
    }

    /// The bytes the last set can take (a superset: deferred completions' FOLLOW bytes).
    #[inline]
    pub(crate) fn last_scan(&self) -> ByteSet {
        self.scan[self.set_count() - 1]
    }

    /// Can some byte or token follow?
    pub(crate) fn can_continue(&self, g: &CfgGrammar) -> bool {
        !self.scan[self.set_count() - 1].is_empty() || self.expects_token(g)
    }
}

const _: () = assert!(END_FLAG != T_FLAG);

/// Does the grammar accept `text` (whole-string)? Runs the same recogniser; tests use an
/// independent one.
pub(crate) fn accepts(g: &CfgGrammar, text: &[u8], max_items: usize) -> bool {
    let mut c = Chart::new(g, max_items, usize::MAX);
    if !text.iter().all(|&b| c.push(g, b)) {
        return false;
    }
    c.commit(g) && c.is_accepting(g)
}
