//! String automata for the schema engine: `pattern` (ECMA-262 translated to `regex-syntax`),
//! `format`, string `enum`/`const`, property-name sets, and the products that combine them with
//! length bounds.
//!
//! Every automaton is a [`ByteDfa`] over the *decoded* UTF-8 bytes of a JSON string's content
//! (escapes already resolved by the runtime). A regex's is determinised over characters
//! ([`super::chardfa`]) or, for what that module does not model, through `regex-automata`'s
//! lazy DFA (anchored, `MatchKind::All`, so the match flag after end-of-input decides
//! acceptance), then **pruned to its live states**: a state that cannot reach acceptance is
//! merged into the dead state 0. Hence a byte is allowed exactly when its transition is not 0
//! — the property that makes string masks exact (no dead ends). Products (intersection, difference) are built here
//! too, so `pattern` ∧ `format` ∧ `enum` ∧ lengths become one automaton.
//!
//! This module is self-contained on purpose (the crate-wide regex automaton lands separately).

use crate::json::syntax::{surrogate_pair, HIGH_SURROGATES, LOW_SURROGATES};
use regex_automata::util::start;
use regex_automata::{Anchored, MatchKind};
use rustc_hash::FxHashMap;
use std::cell::Cell;
use std::time::Instant;

thread_local! {
    /// The deadline of the schema compile running on this thread
    /// ([`crate::schema::SchemaLimits::max_compile_time`]); automaton loops check it.
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Sets this thread's compile deadline until dropped (the previous one is restored).
pub(crate) struct Deadline(Option<Instant>);

impl Deadline {
    pub(crate) fn set(at: Option<Instant>) -> Deadline {
        Deadline(DEADLINE.replace(at))
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        DEADLINE.set(self.0);
    }
}

/// Has the compile running on this thread passed its deadline?
pub(crate) fn past_deadline() -> bool {
    DEADLINE.get().is_some_and(|d| Instant::now() >= d)
}
use std::collections::VecDeque;

/// The dead state of every [`ByteDfa`].
pub(crate) const DEAD: u32 = 0;

/// A DFA over bytes with only live states (plus the dead state 0).
#[derive(Clone, Debug)]
pub(crate) struct ByteDfa {
    classes: [u8; 256],
    stride: usize,
    trans: Vec<u32>,
    accept: Vec<bool>,
    start: u32,
    /// Per state: the number of accepted continuations when finite (capped), `None` if
    /// infinite. Used to decide liveness when some completions are excluded (duplicate keys).
    finite: Vec<Option<u32>>,
    /// Per state: the fewest code points of an accepted continuation (0 in accepting
    /// states). With a `maxLength` counted beside the automaton, a state is live iff
    /// `count + short ≤ max`.
    short: Vec<u32>,
    /// The largest `short` of a live state.
    max_short: u32,
    /// Per state: the fewest bytes of an accepted continuation (`short` counts code points),
    /// computed on first use: only the completion bound asks (`runtime::completion`).
    short_bytes: std::sync::OnceLock<Vec<u32>>,
}

/// Cap on counted finite languages.
const COUNT_CAP: u32 = 1 << 20;

/// A DFA before pruning: one column per byte class of its producer (`classes` maps a byte
/// to its column; the producer's classes may be finer than needed, `finish` merges them).
pub(super) struct RawDfa {
    pub(super) classes: [u8; 256],
    pub(super) stride: usize,
    /// `states × stride` transitions.
    pub(super) trans: Vec<u32>,
    pub(super) accept: Vec<bool>,
    pub(super) start: u32,
}

/// Why an automaton could not be built.
#[derive(Debug)]
pub(crate) enum DfaError {
    /// The regex is not supported or not valid (message).
    Regex(String),
    /// More states than the limit.
    TooBig,
    /// The compile's deadline passed.
    Deadline,
}

impl ByteDfa {
    /// The start state (0 when the language is empty).
    #[inline]
    pub(crate) fn start(&self) -> u32 {
        self.start
    }

    /// The state after `b`, [`DEAD`] when refused.
    #[inline(always)]
    pub(crate) fn next(&self, s: u32, b: u8) -> u32 {
        self.trans[s as usize * self.stride + self.classes[b as usize] as usize]
    }

    /// The byte class of `b` (bytes of one class have the same transitions everywhere).
    #[inline]
    pub(crate) fn class_of(&self, b: u8) -> u8 {
        self.classes[b as usize]
    }

    /// Is the content complete in `s`?
    #[inline]
    pub(crate) fn is_accept(&self, s: u32) -> bool {
        self.accept[s as usize]
    }

    /// Is the language empty?
    pub(crate) fn is_empty(&self) -> bool {
        self.start == DEAD
    }

    /// Number of states (dead included).
    pub(crate) fn n_states(&self) -> usize {
        self.accept.len()
    }

    /// The fewest code points that complete an accepted content from `s` ([`DEAD`]: never).
    #[inline(always)]
    pub(crate) fn short(&self, s: u32) -> u32 {
        self.short[s as usize]
    }

    /// The fewest bytes that complete an accepted content from `s` (`u32::MAX` from
    /// [`DEAD`]): at least [`ByteDfa::short`], three times it where only CJK can follow.
    pub(crate) fn short_bytes(&self, s: u32) -> u32 {
        let v = self.short_bytes.get_or_init(|| {
            shortest_completions_in(&self.trans, self.stride, &self.accept, &self.classes, &[])
        });
        v[s as usize]
    }

    /// The largest [`ByteDfa::short`] of a live state.
    pub(crate) fn max_short(&self) -> u32 {
        self.max_short
    }

    /// Accepted continuations from `s` when finite.
    pub(crate) fn finite_count(&self, s: u32) -> Option<u32> {
        self.finite[s as usize]
    }

    /// The accepted texts (in byte order) when the language is finite with at most `cap`
    /// members; `None` otherwise.
    pub(crate) fn members(&self, cap: u32) -> Option<Vec<Vec<u8>>> {
        if self.is_empty() {
            return Some(Vec::new());
        }
        if self.finite_count(self.start)? > cap {
            return None;
        }
        fn walk(d: &ByteDfa, s: u32, cur: &mut Vec<u8>, out: &mut Vec<Vec<u8>>) {
            if d.is_accept(s) {
                out.push(cur.clone());
            }
            for b in 0..=255u8 {
                let t = d.next(s, b);
                if t != DEAD {
                    cur.push(b);
                    walk(d, t, cur, out);
                    cur.pop();
                }
            }
        }
        let mut out = Vec::new();
        walk(self, self.start, &mut Vec::new(), &mut out);
        Some(out)
    }

    /// Run `bytes` from `s`.
    pub(crate) fn run(&self, mut s: u32, bytes: &[u8]) -> u32 {
        for &b in bytes {
            if s == DEAD {
                return DEAD;
            }
            s = self.next(s, b);
        }
        s
    }

    /// Does the automaton accept `bytes` in full?
    pub(crate) fn matches(&self, bytes: &[u8]) -> bool {
        let s = self.run(self.start, bytes);
        s != DEAD && self.is_accept(s)
    }

    /// Is there a code point in `lo..=hi` (surrogates excluded) whose UTF-8 leads from `s` to a
    /// live state that at most `budget` more code points complete ([`ByteDfa::short`])? Used
    /// while a `\uXXXX` escape is partly typed.
    pub(crate) fn range_live(&self, s: u32, lo: u32, hi: u32, budget: u32) -> bool {
        let ok = |q: u32| q != DEAD && self.short(q) <= budget;
        // ASCII first: one byte per code point, one lookup each (most queries end here).
        if lo <= 0x7F && (lo..=hi.min(0x7F)).any(|c| ok(self.next(s, c as u8))) {
            return true;
        }
        let check = |a: u32, b: u32| -> bool {
            if a > b {
                return false;
            }
            let (Some(ca), Some(cb)) = (char::from_u32(a), char::from_u32(b)) else {
                return false;
            };
            for seq in regex_syntax::utf8::Utf8Sequences::new(ca, cb) {
                let mut cur: smallvec::SmallVec<[u32; 8]> = smallvec::smallvec![s];
                for r in seq.as_slice() {
                    let mut nxt: smallvec::SmallVec<[u32; 8]> = smallvec::SmallVec::new();
                    for &q in &cur {
                        let mut seen = [false; 256];
                        for byte in r.start..=r.end {
                            let c = self.classes[byte as usize] as usize;
                            if seen[c] {
                                continue;
                            }
                            seen[c] = true;
                            let n = self.next(q, byte);
                            if n != DEAD && !nxt.contains(&n) {
                                nxt.push(n);
                            }
                        }
                    }
                    cur = nxt;
                    if cur.is_empty() {
                        break;
                    }
                }
                if cur.iter().any(|&q| ok(q)) {
                    return true;
                }
            }
            false
        };
        check(lo, hi.min(0xD7FF)) || check(lo.max(0xE000), hi.min(0x10FFFF))
    }

    /// Is this automaton alive from `s` after exactly the byte strings after which `any` (the
    /// any-content automaton) is alive from its start? Then `s` has the open tokens of an
    /// unconstrained string: an unanchored `pattern` before its match or after it, an
    /// undeclared-key automaton that is a union equal to "any key". Decided on the product
    /// from `(s, any.start)`: `Some(false)` at the first byte on which the two disagree about
    /// [`DEAD`], `None` when more than `budget` pairs would be explored.
    pub(crate) fn lives_like(&self, s: u32, any: &ByteDfa, budget: usize) -> Option<bool> {
        if s == DEAD {
            return Some(false);
        }
        let (reps, _) = pair_classes(self, any);
        let mut visited: rustc_hash::FxHashSet<(u32, u32)> = rustc_hash::FxHashSet::default();
        let mut stack = vec![(s, any.start)];
        visited.insert((s, any.start));
        while let Some((q, u)) = stack.pop() {
            for &b in &reps {
                let (q2, u2) = (self.next(q, b), any.next(u, b));
                if (q2 == DEAD) != (u2 == DEAD) {
                    return Some(false);
                }
                if q2 != DEAD && visited.insert((q2, u2)) {
                    if visited.len() > budget {
                        return None;
                    }
                    stack.push((q2, u2));
                }
            }
        }
        Some(true)
    }

    fn to_raw(&self) -> RawDfa {
        RawDfa {
            classes: self.classes,
            stride: self.stride,
            trans: self.trans.clone(),
            accept: self.accept.clone(),
            start: self.start,
        }
    }
}

impl RawDfa {
    /// Prune to live states (state 0 dead), compress columns into classes, count finite
    /// languages.
    fn finish(self, max_states: usize) -> Result<ByteDfa, DfaError> {
        let n = self.accept.len();
        let w = self.stride;
        let row = |s: usize| &self.trans[s * w..(s + 1) * w];
        // Columns some byte uses (a producer may leave others unused).
        let mut used = vec![false; w];
        for &c in &self.classes {
            used[c as usize] = true;
        }
        // Backward reachability from accepting states.
        let mut rev: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut stamp = vec![u32::MAX; n];
        for s in 0..n {
            for (c, &t) in row(s).iter().enumerate() {
                if used[c] && stamp[t as usize] != s as u32 {
                    stamp[t as usize] = s as u32;
                    rev[t as usize].push(s as u32);
                }
            }
        }
        let mut live = vec![false; n];
        let mut queue: VecDeque<u32> = VecDeque::new();
        for (s, l) in live.iter_mut().enumerate() {
            if self.accept[s] {
                *l = true;
                queue.push_back(s as u32);
            }
        }
        while let Some(s) = queue.pop_front() {
            for &p in &rev[s as usize] {
                if !live[p as usize] {
                    live[p as usize] = true;
                    queue.push_back(p);
                }
            }
        }
        // Forward BFS from start over live states, renumbering (0 = dead).
        let mut map = vec![0u32; n];
        let mut order: Vec<u32> = Vec::new();
        let start = if live[self.start as usize] {
            map[self.start as usize] = 1;
            order.push(self.start);
            let mut i = 0;
            while i < order.len() {
                let s = order[i];
                i += 1;
                for (c, &t) in row(s as usize).iter().enumerate() {
                    if used[c] && live[t as usize] && map[t as usize] == 0 {
                        map[t as usize] = order.len() as u32 + 1;
                        order.push(t);
                        if order.len() > max_states {
                            return Err(DfaError::TooBig);
                        }
                    }
                }
            }
            1
        } else {
            0
        };
        let m = order.len() + 1;
        let mut rows: Vec<u32> = vec![0u32; m * w];
        let mut accept = vec![false; m];
        for (i, &s) in order.iter().enumerate() {
            accept[i + 1] = self.accept[s as usize];
            for (r, &t) in rows[(i + 1) * w..(i + 2) * w].iter_mut().zip(row(s as usize)) {
                *r = if live[t as usize] { map[t as usize] } else { 0 };
            }
        }
        // Byte classes: columns that are identical after pruning merge. Columns are hashed
        // first, so each is compared in full only with the representatives of its hash.
        let mut col_hash = vec![0u64; w];
        for r in rows.chunks_exact(w) {
            for (h, &t) in col_hash.iter_mut().zip(r) {
                *h = (h.rotate_left(5) ^ u64::from(t)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
            }
        }
        let mut merged = vec![u8::MAX; w];
        let mut reps: Vec<usize> = Vec::new();
        for c in (0..w).filter(|&c| used[c]) {
            let found = reps.iter().position(|&r| {
                col_hash[r] == col_hash[c] && rows.chunks_exact(w).all(|x| x[r] == x[c])
            });
            merged[c] = match found {
                Some(k) => k as u8,
                None => {
                    reps.push(c);
                    (reps.len() - 1) as u8
                }
            };
        }
        let mut classes = [0u8; 256];
        for (b, k) in classes.iter_mut().enumerate() {
            *k = merged[self.classes[b] as usize];
        }
        let stride = reps.len();
        let mut trans = Vec::with_capacity(m * stride);
        for r in rows.chunks_exact(w) {
            for &c in &reps {
                trans.push(r[c]);
            }
        }
        let (trans, accept) = crate::automaton::minimize::minimize(&trans, stride, &accept);
        let mut mult = vec![0u32; stride];
        for &c in classes.iter() {
            mult[c as usize] += 1;
        }
        let finite = count_finite(&trans, stride, &accept, &mult);
        let short = shortest_completions(&trans, stride, &accept, &classes);
        let max_short = short.iter().skip(1).copied().max().unwrap_or(0);
        let short_bytes = std::sync::OnceLock::new();
        Ok(ByteDfa { classes, stride, trans, accept, start, finite, short, max_short, short_bytes })
    }
}

/// Per state, the fewest code points (UTF-8 lead bytes) on a path to acceptance: a 0-1 BFS
/// backwards from the accepting states, where a class costs 0 if it holds a continuation
/// byte (the cheapest byte decides) and 1 otherwise. The dead state gets `u32::MAX`.
fn shortest_completions(
    trans: &[u32],
    stride: usize,
    accept: &[bool],
    classes: &[u8; 256],
) -> Vec<u32> {
    shortest_completions_in(trans, stride, accept, classes, &crate::bytes::UTF8_CONTINUATION)
}

/// [`shortest_completions`] where the bytes of `free` cost nothing and every other byte one:
/// continuation bytes free count code points, none free counts bytes.
fn shortest_completions_in(
    trans: &[u32],
    stride: usize,
    accept: &[bool],
    classes: &[u8; 256],
    free: &[u8],
) -> Vec<u32> {
    let m = accept.len();
    let mut cost = vec![1u32; stride];
    for &b in free {
        cost[classes[b as usize] as usize] = 0;
    }
    let mut rev: Vec<Vec<(u32, u32)>> = vec![Vec::new(); m];
    for s in 1..m {
        for c in 0..stride {
            let t = trans[s * stride + c] as usize;
            if t != 0 {
                rev[t].push((s as u32, cost[c]));
            }
        }
    }
    let mut dist = vec![u32::MAX; m];
    let mut queue: VecDeque<u32> = VecDeque::new();
    for s in 1..m {
        if accept[s] {
            dist[s] = 0;
            queue.push_back(s as u32);
        }
    }
    while let Some(t) = queue.pop_front() {
        let d = dist[t as usize];
        for &(s, w) in &rev[t as usize] {
            if d + w < dist[s as usize] {
                dist[s as usize] = d + w;
                if w == 0 {
                    queue.push_front(s);
                } else {
                    queue.push_back(s);
                }
            }
        }
    }
    dist
}

/// Per state, the size of the accepted language from it when finite (`None` when a cycle is
/// reachable, i.e. infinitely many completions). All states but 0 are live.
fn count_finite(trans: &[u32], stride: usize, accept: &[bool], mult: &[u32]) -> Vec<Option<u32>> {
    let m = accept.len();
    // 0 = unvisited, 1 = on stack, 2 = done.
    let mut mark = vec![0u8; m];
    let mut out: Vec<Option<u32>> = vec![Some(0); m];
    // We count byte strings, so a class of k bytes contributes k times (`mult`).
    fn visit(
        s: usize,
        trans: &[u32],
        stride: usize,
        accept: &[bool],
        mult: &[u32],
        mark: &mut [u8],
        out: &mut [Option<u32>],
    ) {
        mark[s] = 1;
        let mut total: Option<u32> = Some(u32::from(accept[s]));
        for c in 0..stride {
            let t = trans[s * stride + c] as usize;
            if t == 0 {
                continue;
            }
            if mark[t] == 1 {
                total = None;
                continue;
            }
            if mark[t] == 0 {
                visit(t, trans, stride, accept, mult, mark, out);
            }
            total = match (total, out[t]) {
                (Some(a), Some(b)) => {
                    Some(a.saturating_add(b.saturating_mul(mult[c])).min(COUNT_CAP))
                }
                _ => None,
            };
        }
        out[s] = total;
        mark[s] = 2;
    }
    for s in 1..m {
        if mark[s] == 0 {
            visit(s, trans, stride, accept, mult, &mut mark, &mut out);
        }
    }
    out[0] = Some(0);
    out
}

/// Wide-form automaton of a `regex-automata` dense DFA for `regex` (full match).
/// The message of `e` and of every error below it, as `outer: inner: …` (regex-automata's
/// build errors say only "error building NFA"; the syntax error with its offset is the source).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(inner) = cur {
        out.push_str(": ");
        out.push_str(&inner.to_string());
        cur = inner.source();
    }
    out
}

/// Bytes of lazy-DFA cache per state of the limit: the determiniser's memory (transition rows
/// plus the NFA state sets behind each DFA state) is bounded by `max_states` times this, and
/// so is its time, which is proportional to the sets it builds (a search pattern like
/// `\p{L}{5,500}` has sets of thousands of NFA states: it gives up within a second).
const CACHE_BYTES_PER_STATE: usize = 1024;

/// Does every string of the language stay in it whatever follows — is the regex a
/// concatenation ending in `(?s:.)*`? Then an accepting state of its automaton accepts every
/// UTF-8 continuation, and determinising on past it only tracks the other threads of the
/// pattern (a search pattern `(?s:.)*(?:P)(?s:.)*` keeps each thread of `P` started at each
/// earlier position: the URI pattern of RFC 3986 took ~300 ms to determinise that way).
///
/// Only start assertions (`^`, `\A`) may appear: an end or word-boundary assertion met at the
/// end of the input can hold there and fail once more follows (`(?s:.)*(?:a|b$)(?s:.)*`
/// accepts `xb` through `b$` and the empty trailing `(?s:.)*`, and refuses `xbc` unless an `a`
/// came), so an accepting state of such a regex need not accept every continuation.
#[cfg(test)]
fn ends_in_any_star(regex: &str) -> bool {
    regex_syntax::Parser::new().parse(regex).is_ok_and(|hir| hir_ends_in_any_star(&hir))
}

/// [`ends_in_any_star`] on a parsed regex.
fn hir_ends_in_any_star(hir: &regex_syntax::hir::Hir) -> bool {
    use regex_syntax::hir::{Class, HirKind, Look};
    let looks = hir.properties().look_set();
    if !looks.remove(Look::Start).remove(Look::StartLF).remove(Look::StartCRLF).is_empty() {
        return false;
    }
    let HirKind::Concat(parts) = hir.kind() else {
        return false;
    };
    let Some(HirKind::Repetition(rep)) = parts.last().map(|h| h.kind()) else {
        return false;
    };
    if rep.min != 0 || rep.max.is_some() {
        return false;
    }
    match rep.sub.kind() {
        HirKind::Class(Class::Unicode(c)) => {
            let r = c.ranges();
            r.len() == 1 && r[0].start() == '\0' && r[0].end() == char::MAX
        }
        _ => false,
    }
}

/// A state of the determinisation in [`raw_from_regex`]: one of the regex's lazy DFA, or of
/// the any-content automaton an accepting state of a regex ending in `(?s:.)*` continues in.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Det {
    Main(regex_automata::hybrid::LazyStateID),
    Any(regex_automata::hybrid::LazyStateID),
}

fn raw_from_regex(regex: &str, any_star: bool, max_states: usize) -> Result<RawDfa, DfaError> {
    use regex_automata::hybrid::dfa::DFA as LazyDfa;
    use regex_automata::nfa::thompson;
    // The lazy DFA determinises one state at a time, so the state limit, the cache (memory)
    // limit and the NFA size limit are all checked while the work is done, never after it.
    let cache_bytes = max_states.saturating_mul(CACHE_BYTES_PER_STATE).max(1 << 20);
    let build = |re: &str| {
        LazyDfa::builder()
            .configure(
                LazyDfa::config()
                    .match_kind(MatchKind::All)
                    .cache_capacity(cache_bytes)
                    .skip_cache_capacity_check(true)
                    // A full cache is an error here, never cleared: clearing renumbers the
                    // states, and this loop holds their ids (the next transition from a stale
                    // id indexes out of the new table — a panic inside `regex-automata`).
                    .minimum_cache_clear_count(Some(0)),
            )
            .thompson(thompson::Config::new().nfa_size_limit(Some(cache_bytes)))
            .build(re)
            .map_err(|e| {
                let m = error_chain(&e);
                if m.contains("exceeds") || m.contains("limit") {
                    DfaError::TooBig
                } else {
                    DfaError::Regex(m)
                }
            })
    };
    let dfa = build(regex)?;
    // For a regex ending in `(?s:.)*`, an accepting state is the start of `(?s:.)*` (every
    // UTF-8 continuation accepted): its row is taken from that small automaton instead of
    // determinising the regex further. The regex's byte classes refine those of `(?s:.)*`
    // (it contains it), so one representative byte per class serves both.
    let any = if any_star { Some(build(r"(?s:.)*")?) } else { None };
    let mut cache = dfa.create_cache();
    let mut any_cache = any.as_ref().map(|a| a.create_cache());
    let gave_up = |_| DfaError::TooBig;
    let anchored = start::Config::new().anchored(Anchored::Yes);
    let s0 = dfa.start_state(&mut cache, &anchored).map_err(|e| DfaError::Regex(e.to_string()))?;
    let any_start = match (&any, &mut any_cache) {
        (Some(a), Some(c)) => {
            Some(a.start_state(c, &anchored).map_err(|e| DfaError::Regex(e.to_string()))?)
        }
        _ => None,
    };
    let mut map: FxHashMap<Det, u32> = FxHashMap::default();
    let mut ids = vec![Det::Main(s0)];
    map.insert(Det::Main(s0), 0);
    let mut trans: Vec<u32> = Vec::new();
    let mut accept = Vec::new();
    let mut i = 0;
    let bc = *dfa.get_nfa().byte_classes();
    let reps: Vec<u8> = bc.representatives(0..=255).filter_map(|u| u.as_u8()).collect();
    let mut col = vec![0u8; bc.alphabet_len()];
    for (k, &b) in reps.iter().enumerate() {
        col[bc.get(b) as usize] = k as u8;
    }
    let mut classes = [0u8; 256];
    for (b, c) in classes.iter_mut().enumerate() {
        *c = col[bc.get(b as u8) as usize];
    }
    let mut row: Vec<Det> = Vec::with_capacity(reps.len());
    while i < ids.len() {
        if i % 64 == 0 && past_deadline() {
            return Err(DfaError::Deadline);
        }
        let mut d = ids[i];
        i += 1;
        // Is the state accepting (through the end-of-input transition)?
        let (is_dead, end_match) = match d {
            Det::Main(s) => {
                let dead = s.is_dead() || s.is_quit();
                let m = !dead && dfa.next_eoi_state(&mut cache, s).map_err(gave_up)?.is_match();
                (dead, m)
            }
            Det::Any(s) => {
                let (a, c) = (any.as_ref().unwrap(), any_cache.as_mut().unwrap());
                let dead = s.is_dead() || s.is_quit();
                (dead, !dead && a.next_eoi_state(c, s).map_err(gave_up)?.is_match())
            }
        };
        if cache.clear_count() > 0 || any_cache.as_ref().is_some_and(|c| c.clear_count() > 0) {
            // A cleared cache invalidates every id kept: the automaton is too big for it.
            return Err(DfaError::TooBig);
        }
        if let (Det::Main(_), true, Some(a0)) = (d, end_match, any_start) {
            d = Det::Any(a0);
        }
        row.clear();
        for &b in &reps {
            row.push(match d {
                _ if is_dead => d,
                Det::Main(s) => Det::Main(dfa.next_state(&mut cache, s, b).map_err(gave_up)?),
                Det::Any(s) => {
                    let (a, c) = (any.as_ref().unwrap(), any_cache.as_mut().unwrap());
                    Det::Any(a.next_state(c, s, b).map_err(gave_up)?)
                }
            });
        }
        if cache.clear_count() > 0 || any_cache.as_ref().is_some_and(|c| c.clear_count() > 0) {
            return Err(DfaError::TooBig);
        }
        for &t in &row {
            let idx = match map.get(&t) {
                Some(&x) => x,
                None => {
                    let x = ids.len() as u32;
                    map.insert(t, x);
                    ids.push(t);
                    if ids.len() > max_states * 2 + 16 {
                        return Err(DfaError::TooBig);
                    }
                    x
                }
            };
            trans.push(idx);
        }
        accept.push(end_match);
    }
    Ok(RawDfa { classes, stride: reps.len(), trans, accept, start: 0 })
}

/// Build a pruned automaton for a `regex-syntax` regex matched in full.
///
/// Determinised over characters first ([`super::chardfa`]: counted repetitions of Unicode
/// classes cost a fraction there); patterns that module does not model, or whose automaton it
/// finds too big, go through `regex-automata` over bytes. Both give the same language.
pub(crate) fn dfa_from_regex(regex: &str, max_states: usize) -> Result<ByteDfa, DfaError> {
    // One parse decides the path and the `(?s:.)*` shortcut for both (a regex that does not
    // parse gets its error from the byte path's builder).
    let hir = regex_syntax::Parser::new().parse(regex).ok();
    let any_star = hir.as_ref().is_some_and(hir_ends_in_any_star);
    if let Some(hir) = &hir {
        if let Some(raw) = raw_from_chars(hir, any_star, max_states)? {
            return raw.finish(max_states);
        }
    }
    raw_from_regex(regex, any_star, max_states)?.finish(max_states)
}

/// [`dfa_from_regex`] through `regex-automata` only (the reference the character path is
/// tested against).
#[cfg(test)]
pub(crate) fn dfa_from_regex_bytes(regex: &str, max_states: usize) -> Result<ByteDfa, DfaError> {
    raw_from_regex(regex, ends_in_any_star(regex), max_states)?.finish(max_states)
}

/// The character path of [`dfa_from_regex`]: `Ok(None)` when it does not apply or finds the
/// automaton too big (the byte path then tries).
fn raw_from_chars(
    hir: &regex_syntax::hir::Hir,
    any_star: bool,
    max_states: usize,
) -> Result<Option<RawDfa>, DfaError> {
    match super::chardfa::build(hir, any_star, max_states) {
        None | Some(Err(DfaError::TooBig)) => Ok(None),
        Some(r) => r.map(Some),
    }
}

/// The automaton of a finite set of strings (an `enum`, the declared property names), built
/// as their trie with equal suffixes merged bottom-up — the minimal acyclic automaton —
/// in time linear in their bytes. (`regex-automata` on the alternation [`literals_regex`]
/// gives the same language, but determinises it through NFA state sets: ~150 ms for an
/// `enum` of 800 names.) `max_states` bounds the trie, as it bounds the regex's automaton.
pub(crate) fn dfa_from_literals<'a>(
    lits: impl IntoIterator<Item = &'a str>,
    max_states: usize,
) -> Result<ByteDfa, DfaError> {
    // The trie: children sorted by byte.
    let mut kids: Vec<Vec<(u8, u32)>> = vec![Vec::new()];
    let mut fin: Vec<bool> = vec![false];
    let mut used = [false; 256];
    for lit in lits {
        let mut s = 0usize;
        for &b in lit.as_bytes() {
            used[b as usize] = true;
            s = match kids[s].binary_search_by_key(&b, |&(c, _)| c) {
                Ok(k) => kids[s][k].1 as usize,
                Err(k) => {
                    let t = kids.len();
                    if t > max_states.saturating_mul(2) + 16 {
                        return Err(DfaError::TooBig);
                    }
                    kids[s].insert(k, (b, t as u32));
                    kids.push(Vec::new());
                    fin.push(false);
                    t
                }
            };
        }
        fin[s] = true;
    }
    if past_deadline() {
        return Err(DfaError::Deadline);
    }
    // Merge equal suffixes: children before parents (a child's index is above its parent's),
    // each node named by (accepting, [(byte, child's class)]).
    let n = kids.len();
    let mut class_of = vec![0u32; n];
    let mut names: FxHashMap<(bool, Vec<(u8, u32)>), u32> = FxHashMap::default();
    // Class 0 is the dead sink; merged states are 1.. in the order first named.
    let mut reps: Vec<usize> = Vec::new();
    for s in (0..n).rev() {
        let key = (fin[s], kids[s].iter().map(|&(b, t)| (b, class_of[t as usize])).collect());
        let next = reps.len() as u32 + 1;
        let c = *names.entry(key).or_insert(next);
        if c == next {
            reps.push(s);
        }
        class_of[s] = c;
    }
    // Byte classes: one per byte the strings use, one for all others (always dead).
    let mut classes = [0u8; 256];
    let mut stride = 1usize;
    for b in 0..256 {
        if used[b] {
            classes[b] = stride as u8;
            stride += 1;
        }
    }
    if stride > 256 {
        // Every byte value is used: no room for the "other" column, and none is needed.
        stride = 256;
        for (b, c) in classes.iter_mut().enumerate() {
            *c = b as u8;
        }
    }
    let m = reps.len() + 1;
    let mut trans = vec![0u32; m * stride];
    let mut accept = vec![false; m];
    for (i, &s) in reps.iter().enumerate() {
        let row = i + 1;
        accept[row] = fin[s];
        for &(b, t) in &kids[s] {
            trans[row * stride + classes[b as usize] as usize] = class_of[t as usize];
        }
    }
    let start = class_of[0];
    RawDfa { classes, stride, trans, accept, start }.finish(max_states)
}

/// How two automata combine.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Op {
    And,
    Or,
    AndNot,
}

/// The product automaton of `a` and `b` under `op`.
pub(crate) fn product(
    a: &ByteDfa,
    b: &ByteDfa,
    op: Op,
    max_states: usize,
) -> Result<ByteDfa, DfaError> {
    let mut map: FxHashMap<(u32, u32), u32> = FxHashMap::default();
    let mut pairs = vec![(a.start, b.start)];
    map.insert((a.start, b.start), 0);
    let mut trans: Vec<u32> = Vec::new();
    let mut accept = Vec::new();
    // One column per pair of classes, looked up through a representative byte.
    let (reps, rep_of) = pair_classes(a, b);
    let mut i = 0;
    while i < pairs.len() {
        if i % 64 == 0 && past_deadline() {
            return Err(DfaError::Deadline);
        }
        let (x, y) = pairs[i];
        i += 1;
        for &byte in &reps {
            let nx = a.next(x, byte);
            let ny = b.next(y, byte);
            let key = match op {
                Op::And if nx == DEAD || ny == DEAD => (DEAD, DEAD),
                Op::AndNot if nx == DEAD => (DEAD, DEAD),
                _ => (nx, ny),
            };
            let idx = match map.get(&key) {
                Some(&v) => v,
                None => {
                    let v = pairs.len() as u32;
                    map.insert(key, v);
                    pairs.push(key);
                    if pairs.len() > max_states * 4 + 16 {
                        return Err(DfaError::TooBig);
                    }
                    v
                }
            };
            trans.push(idx);
        }
        let (ax, by) = (a.is_accept(x), b.is_accept(y));
        accept.push(match op {
            Op::And => ax && by,
            Op::Or => ax || by,
            Op::AndNot => ax && !by,
        });
    }
    RawDfa { classes: rep_of, stride: reps.len(), trans, accept, start: 0 }.finish(max_states)
}

/// The classes of the product of two automata: one representative byte per pair of byte
/// classes, and each byte's pair index.
fn pair_classes(a: &ByteDfa, b: &ByteDfa) -> (Vec<u8>, [u8; 256]) {
    let mut rep_of = [0u8; 256];
    let mut reps: Vec<u8> = Vec::new();
    let mut seen: FxHashMap<(u8, u8), u8> = FxHashMap::default();
    for byte in 0..=255u8 {
        let k = (a.classes[byte as usize], b.classes[byte as usize]);
        rep_of[byte as usize] = *seen.entry(k).or_insert_with(|| {
            reps.push(byte);
            (reps.len() - 1) as u8
        });
    }
    (reps, rep_of)
}

/// The automaton of any content (every valid UTF-8 string), built once per process.
pub(crate) fn any_content() -> &'static ByteDfa {
    static ANY: std::sync::OnceLock<ByteDfa> = std::sync::OnceLock::new();
    ANY.get_or_init(|| {
        // Built once for the process, whatever compile first needs it: not under its deadline.
        let _no_deadline = Deadline::set(None);
        dfa_from_regex(r"(?s:.)*", 64).expect("the any-content regex is constant and small")
    })
}

/// The automaton of the known `format` `name`, whose regex is `re` ([`format_regex`]), built
/// once per process and cloned (the email automaton alone takes milliseconds to determinise).
pub(crate) fn format_dfa(name: &str, re: &str, max_states: usize) -> Result<ByteDfa, DfaError> {
    static CACHE: std::sync::Mutex<Option<FxHashMap<String, ByteDfa>>> =
        std::sync::Mutex::new(None);
    let fits = |d: &ByteDfa| {
        if d.n_states() - 1 > max_states {
            Err(DfaError::TooBig)
        } else {
            Ok(d.clone())
        }
    };
    if let Some(d) =
        CACHE.lock().unwrap_or_else(|e| e.into_inner()).as_ref().and_then(|m| m.get(name))
    {
        return fits(d);
    }
    let mut d = dfa_from_regex(re, max_states)?;
    if name == "email" {
        // RFC 5321 §4.5.3.1.1: a local part has at most 64 octets. A size limit beside the
        // `Mailbox` grammar (so not in the regex), which validators enforce (the `jsonschema`
        // crate refuses a 65-octet local part); the local part is ASCII, so octets are chars.
        let local = dfa_from_regex(r"[^@]{1,64}@(?s:.)*", max_states)?;
        d = product(&d, &local, Op::And, max_states)?;
    }
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    cache.get_or_insert_with(FxHashMap::default).insert(name.to_string(), d.clone());
    Ok(d)
}

/// Complement within the valid UTF-8 strings.
pub(crate) fn complement(a: &ByteDfa, max_states: usize) -> Result<ByteDfa, DfaError> {
    product(any_content(), a, Op::AndNot, max_states)
}

/// Is some content accepted by both `a` and `b` with `min..=max` code points? Decided on the
/// product explored on the fly (nothing is built); `None` when more than `budget` states
/// (pairs with a code-point count, capped where it stops mattering) would be explored.
pub(crate) fn intersect_nonempty(
    a: &ByteDfa,
    b: &ByteDfa,
    min: u32,
    max: u32,
    budget: usize,
) -> Option<bool> {
    if a.is_empty() || b.is_empty() || min > max {
        return Some(false);
    }
    let (reps, _) = pair_classes(a, b);
    // Above `min`, an unbounded count no longer matters.
    let cap = |c: u32| if max == u32::MAX { c.min(min) } else { c };
    let mut visited: rustc_hash::FxHashSet<(u32, u32, u32)> = rustc_hash::FxHashSet::default();
    let mut stack = vec![(a.start, b.start, 0u32)];
    visited.insert((a.start, b.start, 0));
    while let Some((x, y, c)) = stack.pop() {
        if a.is_accept(x) && b.is_accept(y) && c >= min {
            return Some(true);
        }
        for &byte in &reps {
            let (nx, ny) = (a.next(x, byte), b.next(y, byte));
            if nx == DEAD || ny == DEAD {
                continue;
            }
            let nc = cap(c + u32::from(byte & 0xC0 != 0x80));
            if max != u32::MAX && nc.saturating_add(a.short(nx).max(b.short(ny))) > max {
                continue;
            }
            if visited.insert((nx, ny, nc)) {
                if visited.len() > budget {
                    return None;
                }
                stack.push((nx, ny, nc));
            }
        }
    }
    Some(false)
}

/// Strings of `min..=max` code points (`max == u32::MAX`: unbounded).
pub(crate) fn length_dfa(min: u32, max: u32, max_states: usize) -> Result<ByteDfa, DfaError> {
    let re = if max == u32::MAX {
        format!(r"(?s:.){{{min},}}")
    } else {
        format!(r"(?s:.){{{min},{max}}}")
    };
    if min > 10_000 || (max != u32::MAX && max > 10_000) {
        return Err(DfaError::TooBig);
    }
    dfa_from_regex(&re, max_states)
}

/// Rebuild an automaton (e.g. to re-run pruning); used by tests.
#[allow(dead_code)]
pub(crate) fn reprune(a: &ByteDfa, max_states: usize) -> Result<ByteDfa, DfaError> {
    a.to_raw().finish(max_states)
}

/// The regex for a set of literal strings.
pub(crate) fn literals_regex<'a>(lits: impl IntoIterator<Item = &'a str>) -> String {
    let parts: Vec<String> = lits.into_iter().map(regex_syntax::escape).collect();
    if parts.is_empty() {
        // Matches nothing.
        return r"[^\x{0}-\x{10FFFF}]".to_string();
    }
    format!("(?:{})", parts.join("|"))
}

/// ECMA-262 whitespace (`\s`): WhiteSpace and LineTerminator code points.
const ECMA_SPACE: &str = r"\t\n\x0B\x0C\r \x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}";

/// Translate an ECMA-262 `pattern` into a `regex-syntax` regex with the same meaning, as an
/// unanchored search (`(?s:.)*` on both sides; `^`/`$` keep their whole-string meaning).
///
/// # Errors
/// Look-around, back-references and other constructs without a DFA: the message says which.
pub(crate) fn translate_ecma(p: &str) -> Result<String, String> {
    let chars: Vec<char> = p.chars().collect();
    let mut out = String::with_capacity(p.len() + 16);
    let mut i = 0;
    let mut in_class = false;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        match c {
            '\\' => {
                let Some(&e) = chars.get(i) else {
                    return Err("pattern ends with a backslash".into());
                };
                i += 1;
                let (outside, inside): (String, String) = match e {
                    'd' => ("[0-9]".into(), "0-9".into()),
                    'D' => ("[^0-9]".into(), "[^0-9]".into()),
                    'w' => ("[0-9A-Za-z_]".into(), "0-9A-Za-z_".into()),
                    'W' => ("[^0-9A-Za-z_]".into(), "[^0-9A-Za-z_]".into()),
                    's' => (format!("[{ECMA_SPACE}]"), ECMA_SPACE.into()),
                    'S' => (format!("[^{ECMA_SPACE}]"), format!("[^{ECMA_SPACE}]")),
                    'b' if !in_class => (r"(?-u:\b)".into(), String::new()),
                    'b' => (String::new(), r"\x08".into()),
                    'B' if !in_class => (r"(?-u:\B)".into(), String::new()),
                    'n' | 'r' | 't' | 'f' => (format!("\\{e}"), format!("\\{e}")),
                    'v' => (r"\x0B".into(), r"\x0B".into()),
                    '0' if !chars.get(i).is_some_and(|c| c.is_ascii_digit()) => {
                        (r"\x00".into(), r"\x00".into())
                    }
                    '1'..='9' => {
                        return Err("back-references (\\1…) are not supported: the language \
                                    they describe is not regular"
                            .into())
                    }
                    'c' => {
                        let Some(&l) = chars.get(i).filter(|l| l.is_ascii_alphabetic()) else {
                            return Err("bad \\c escape".into());
                        };
                        i += 1;
                        let v = format!("\\x{:02X}", (l as u32) % 32);
                        (v.clone(), v)
                    }
                    'x' => {
                        let h: String = chars.iter().skip(i).take(2).collect();
                        if h.len() != 2 || !h.chars().all(|c| c.is_ascii_hexdigit()) {
                            return Err("bad \\x escape".into());
                        }
                        i += 2;
                        let v = format!("\\x{h}");
                        (v.clone(), v)
                    }
                    'u' => {
                        let h: String = chars.iter().skip(i).take(4).collect();
                        if h.len() != 4 || !h.chars().all(|c| c.is_ascii_hexdigit()) {
                            return Err("bad \\u escape".into());
                        }
                        i += 4;
                        let mut v = u32::from_str_radix(&h, 16).expect("hex");
                        if HIGH_SURROGATES.contains(&v)
                            && chars.get(i) == Some(&'\\')
                            && chars.get(i + 1) == Some(&'u')
                        {
                            let h2: String = chars.iter().skip(i + 2).take(4).collect();
                            if let Ok(lo) = u32::from_str_radix(&h2, 16) {
                                if LOW_SURROGATES.contains(&lo) {
                                    v = surrogate_pair(v, lo);
                                    i += 6;
                                }
                            }
                        }
                        if (0xD800..0xE000).contains(&v) {
                            return Err("lone surrogate escape".into());
                        }
                        let s = format!("\\x{{{v:X}}}");
                        (s.clone(), s)
                    }
                    'k' if chars.get(i) == Some(&'<') => {
                        return Err("named back-references are not supported".into())
                    }
                    'p' | 'P' => {
                        // \p{...}: the same syntax in both.
                        let mut s = format!("\\{e}");
                        if chars.get(i) == Some(&'{') {
                            while i < chars.len() {
                                s.push(chars[i]);
                                i += 1;
                                if chars[i - 1] == '}' {
                                    break;
                                }
                            }
                        }
                        (s.clone(), s)
                    }
                    c if c.is_ascii_alphanumeric() => {
                        return Err(format!("unknown escape \\{c}"));
                    }
                    c => {
                        let s = regex_syntax::escape(&c.to_string());
                        (s.clone(), s)
                    }
                };
                out.push_str(if in_class { &inside } else { &outside });
            }
            '[' if !in_class => {
                if chars.get(i) == Some(&']') {
                    out.push_str(r"[^\x{0}-\x{10FFFF}]");
                    i += 1;
                } else if chars.get(i) == Some(&'^') && chars.get(i + 1) == Some(&']') {
                    out.push_str("(?s:.)");
                    i += 2;
                } else {
                    in_class = true;
                    out.push('[');
                    if chars.get(i) == Some(&'^') {
                        out.push('^');
                        i += 1;
                    }
                    // A leading `]` is literal in neither dialect after the checks above.
                }
            }
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            '[' | '&' | '~' if in_class => {
                out.push('\\');
                out.push(c);
            }
            '-' if in_class && chars.get(i) == Some(&'-') => {
                out.push_str(r"\-");
            }
            '.' if !in_class => out.push_str(r"[^\n\r\x{2028}\x{2029}]"),
            '(' if !in_class && chars.get(i) == Some(&'?') => {
                let next = chars.get(i + 1).copied();
                let next2 = chars.get(i + 2).copied();
                match (next, next2) {
                    (Some(':'), _) => {
                        out.push_str("(?:");
                        i += 2;
                    }
                    (Some('<'), Some(n)) if n != '=' && n != '!' => {
                        out.push_str("(?P<");
                        i += 2;
                    }
                    (Some('=' | '!'), _) | (Some('<'), Some('=' | '!')) => {
                        return Err("look-around assertions ((?=…), (?!…), (?<=…), (?<!…)) are \
                                    not supported: no finite automaton decides them exactly"
                            .into())
                    }
                    _ => {
                        return Err(format!(
                            "the group {:?} is not supported: ECMA-262 patterns (JSON Schema's \
                             dialect) have no inline flags such as (?i); only (?:…) and \
                             (?<name>…) groups",
                            chars[i - 1..(i + 3).min(chars.len())].iter().collect::<String>()
                        ))
                    }
                }
            }
            _ => out.push(c),
        }
    }
    if in_class {
        return Err("unterminated character class".into());
    }
    if anchored_both_ends(p) {
        // `^…$` without a top-level alternation: the search is a full match, and the
        // unanchored wrappers would only make determinization slower.
        return Ok(format!("(?:{out})"));
    }
    Ok(format!(r"(?s:.)*(?:{out})(?s:.)*"))
}

/// Does the ECMA pattern start with `^`, end with an unescaped `$`, and have no `|` outside
/// groups and classes?
fn anchored_both_ends(p: &str) -> bool {
    let b = p.as_bytes();
    if b.first() != Some(&b'^') || b.last() != Some(&b'$') {
        return false;
    }
    let (mut depth, mut in_class, mut i) = (0i32, false, 0);
    while i < b.len() {
        match b[i] {
            b'\\' => {
                if i + 1 == b.len() - 1 {
                    // The final `$` is escaped.
                    return false;
                }
                i += 1;
            }
            b'[' if !in_class => in_class = true,
            b']' if in_class => in_class = false,
            b'(' if !in_class => depth += 1,
            b')' if !in_class => depth -= 1,
            b'|' if !in_class && depth == 0 => return false,
            _ => {}
        }
        i += 1;
    }
    !in_class && depth == 0
}

/// Formats the specification defines but grammask cannot decide with an automaton.
pub(crate) const UNSUPPORTED_FORMATS: &[&str] = &["regex", "idn-email", "idn-hostname"];

/// The full-match regex of a known `format`, or `None` for formats that constrain nothing
/// (unknown formats are annotations in draft 2020-12; see also [`UNSUPPORTED_FORMATS`]).
/// The most characters a string of an asserted format may have, counted beside its
/// automaton (a `maxLength` of the format): 253 for a `hostname` (RFC 1123 with the DNS
/// limit of 255 octets on the wire).
pub(crate) fn format_max_len(name: &str) -> Option<u32> {
    (name == "hostname").then_some(253)
}

pub(crate) fn format_regex(name: &str) -> Option<String> {
    const YEAR: &str = r"[0-9]{4}";
    const LEAP: &str =
        r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)";
    let date = format!(
        r"(?:{YEAR}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))|{LEAP}-02-29)"
    );
    let time = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)(?:\.[0-9]+)?(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])";
    // A label of 1–63 letters, digits and inner hyphens, without `--` in its third and
    // fourth characters unless it is an A-label (`xn--…`): RFC 5890 §2.3.1 reserves those
    // "R-LDH" labels and RFC 5891 §4.2.3.1 forbids them in IDNA names, and validators refuse
    // them (the `jsonschema` crate refused `u---1` in an e-mail the fuzzer wrote). A-labels
    // are not checked as Punycode (the suite's A-label cases are known false acceptances).
    // Lengths: 1; 2; 3–4; 5–63 with the third and fourth not both `-`; `xn--` + 1–59.
    let label = r"(?:[A-Za-z0-9](?:[A-Za-z0-9]|[A-Za-z0-9-]{1,2}[A-Za-z0-9]|[A-Za-z0-9-](?:[A-Za-z0-9][A-Za-z0-9-]|-[A-Za-z0-9])[A-Za-z0-9-]{0,58}[A-Za-z0-9])?|[Xx][Nn]--[A-Za-z0-9-]{0,58}[A-Za-z0-9])";
    // RFC 1123 names: no trailing dot (the suite's `hostname` tests refuse one); the 253
    // characters of a whole name are counted beside the automaton ([`format_max_len`]).
    let hostname = format!(r"{label}(?:\.{label})*");
    let octet = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
    let ipv4 = format!(r"{octet}(?:\.{octet}){{3}}");
    let h = r"[0-9A-Fa-f]{1,4}";
    let ls32 = format!(r"(?:{h}:{h}|{ipv4})");
    let ipv6 = format!(
        r"(?:(?:{h}:){{6}}{ls32}|::(?:{h}:){{5}}{ls32}|(?:{h})?::(?:{h}:){{4}}{ls32}|(?:(?:{h}:){{0,1}}{h})?::(?:{h}:){{3}}{ls32}|(?:(?:{h}:){{0,2}}{h})?::(?:{h}:){{2}}{ls32}|(?:(?:{h}:){{0,3}}{h})?::{h}:{ls32}|(?:(?:{h}:){{0,4}}{h})?::{ls32}|(?:(?:{h}:){{0,5}}{h})?::{h}|(?:(?:{h}:){{0,6}}{h})?::)"
    );
    // RFC 3986 characters: pchar without ':' (NC), pchar (P), query/fragment chars (Q).
    let pct = r"%[0-9A-Fa-f]{2}";
    let nc = format!(r"(?:[A-Za-z0-9\-._~!$&'()*+,;=@]|{pct}|{{U}})");
    let p = format!(r"(?:[A-Za-z0-9\-._~!$&'()*+,;=@:]|{pct}|{{U}})");
    let q = format!(r"(?:[A-Za-z0-9\-._~!$&'()*+,;=@:/?]|{pct}|{{U}})");
    // authority = [ userinfo "@" ] host [ ":" port ], host = IP-literal / reg-name (an IPv4
    // address is a reg-name too): `]` and `[` only around an IP literal, one `@` at most.
    let ui = format!(r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:]|{pct}|{{U}})");
    let reg = format!(r"(?:[A-Za-z0-9\-._~!$&'()*+,;=]|{pct}|{{U}})");
    let ip_lit = format!(r"\[(?:{ipv6}|[vV][0-9A-Fa-f]+\.[A-Za-z0-9\-._~!$&'()*+,;=:]+)\]");
    let auth = format!(r"(?:{ui}*@)?(?:{ip_lit}|{reg}*)(?::[0-9]*)?");
    let tail = format!(r"(?:\?{q}*)?(?:#{q}*)?");
    let uri =
        format!(r"[A-Za-z][A-Za-z0-9+.\-]*:(?://{auth}(?:/{p}*)*|/?(?:{p}+(?:/{p}*)*)?){tail}");
    let rel = format!(r"(?://{auth}(?:/{p}*)*|/(?:{p}+(?:/{p}*)*)?|{nc}+(?:/{p}*)*|){tail}");
    let ascii = |r: &str| r.replace("{U}", r"[^\x00-\xFF]").replace(r"|[^\x00-\xFF]", "");
    let intl = |r: &str| r.replace("{U}", r"[^\x00-\x7F]");
    let jp = r"(?:/(?:[^~/]|~[01])*)*";
    // RFC 3339 appendix A: a unit may be left out only at the end (`dur-year = 1*DIGIT "Y"
    // [dur-month]`, …), so years and days need months, hours and seconds need minutes.
    let dur_time = r"T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)";
    let dur_date = r"(?:[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?|[0-9]+M(?:[0-9]+D)?|[0-9]+D)";
    Some(match name {
        "date" => date,
        "time" => time.to_string(),
        "date-time" => format!("{date}[Tt]{time}"),
        "duration" => format!(r"P(?:[0-9]+W|{dur_date}(?:{dur_time})?|{dur_time})"),
        "email" => format!(
            r"[A-Za-z0-9!#$%&'*+/=?^_`{{|}}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{{|}}~-]+)*@{hostname}"
        ),
        "hostname" => hostname,
        "ipv4" => ipv4,
        "ipv6" => ipv6,
        "uuid" => r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"
            .to_string(),
        "uri" => ascii(&uri),
        "uri-reference" => ascii(&format!("(?:{uri}|{rel})")),
        "iri" => intl(&uri),
        "iri-reference" => intl(&format!("(?:{uri}|{rel})")),
        "json-pointer" => jp.to_string(),
        "relative-json-pointer" => format!(r"(?:0|[1-9][0-9]*)(?:#|{jp})"),
        "uri-template" => r#"(?:[^{}\x00-\x20"'<>\\^`|]|\{[^{}]*\})*"#.to_string(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dfa(p: &str) -> ByteDfa {
        dfa_from_regex(&translate_ecma(p).unwrap(), 10_000).unwrap()
    }

    /// Do `a` and `b` accept the same strings, with the same fewest code points to a
    /// completion from every pair of states the same input reaches? A walk over the pairs
    /// (both are pruned, so one dead and the other not is a string one can complete and the
    /// other cannot). `Err` names a shortest input where they differ.
    fn same_language(a: &ByteDfa, b: &ByteDfa) -> Result<(), Vec<u8>> {
        let mut seen: FxHashMap<(u32, u32), Vec<u8>> = FxHashMap::default();
        let mut queue = VecDeque::from([(a.start(), b.start())]);
        seen.insert((a.start(), b.start()), Vec::new());
        while let Some((x, y)) = queue.pop_front() {
            let path = seen[&(x, y)].clone();
            if (x == DEAD) != (y == DEAD) {
                return Err(path);
            }
            if x == DEAD {
                continue;
            }
            if a.is_accept(x) != b.is_accept(y) || a.short(x) != b.short(y) {
                return Err(path);
            }
            for byte in 0..=255u8 {
                let pair = (a.next(x, byte), b.next(y, byte));
                if let std::collections::hash_map::Entry::Vacant(e) = seen.entry(pair) {
                    let mut p = path.clone();
                    p.push(byte);
                    e.insert(p);
                    queue.push_back(pair);
                }
            }
        }
        Ok(())
    }

    /// [`raw_from_chars`] on the regex text.
    fn chars_raw(re: &str, max_states: usize) -> Result<Option<RawDfa>, DfaError> {
        let hir = regex_syntax::Parser::new().parse(re).expect("a test regex parses");
        raw_from_chars(&hir, hir_ends_in_any_star(&hir), max_states)
    }

    /// The character path against `regex-automata` on one regex: `Ok(false)` when either
    /// path does not build it (the character path leaves look-arounds to the byte path; the
    /// byte path may give up where the character path does not).
    fn chars_match_bytes(re: &str, max_states: usize) -> Result<bool, String> {
        let bytes = match dfa_from_regex_bytes(re, max_states) {
            Ok(d) => d,
            Err(_) => return Ok(false),
        };
        let chars = match chars_raw(re, max_states).map_err(|e| format!("{re}: {e:?}"))? {
            Some(raw) => raw.finish(max_states).map_err(|e| format!("{re}: {e:?}"))?,
            None => return Ok(false),
        };
        same_language(&chars, &bytes)
            .map(|()| true)
            .map_err(|w| format!("{re}: differs after {:?}", String::from_utf8_lossy(&w)))
    }

    /// ECMA patterns that exercise the character path: anchors inside alternations and after
    /// `(?s:.)*`, `$` before more input, counted and nested repetitions, empty loops, classes
    /// that span the surrogate gap, multi-byte literals, the edges of UTF-8 (U+7FF, U+800,
    /// U+FFFF, U+10000, U+10FFFF), word boundaries (left to the byte path), empty classes.
    const PATTERNS: &[&str] = &[
        r"^(?:\S+\s+){0,29}\S+$",
        r"^$|(^(?:\S+\s+){0,9}\S+$)",
        r"^[a-z]+$",
        r"^a|b$",
        r"a$|b",
        r"^(?:a$b|c)$",
        r"x^y",
        r"\d{3}-\d{4}",
        r"^(\([0-9]{3}\))?[0-9]{3}-[0-9]{4}$",
        r"^(a|)*$",
        r"^(?:(?:a*)*b)?$",
        r"^[\u0000-\uFFFF]{2}$",
        r"^[\uD7FF-\uE000]+$",
        r"^[^\u0080-\u07FF]$",
        r"^[\u07FF\u0800\uFFFF]$",
        r"^\u{10FFFF}?.$",
        r"^(?:[\u00e9\u4e2d]|\uD83D\uDE00)+$",
        r"日本語|é+",
        r"^[\p{L}\p{N}]{1,5}$",
        r"\bword\b",
        r"^[^\s\S]?$",
        r"^$^a$",
        r"^(?:$a|$)$",
        r"^[A-Z]{2}(?:[0-9]{2}){1,3}$",
        r"^(?:[a-f0-9]{8}-(?:[a-f0-9]{4}-){3}[a-f0-9]{12})$",
        r"^(?!x)",
        r".",
        r"",
        r"^.{3,7}$",
        r"[\s\S]*\.json$",
        r"^(?:\w+\.)*\w+@(?:\w+\.)+\w{2,}$",
        r"^v?(\d+)(\.\d+){0,3}(-[0-9A-Za-z.-]+)?$",
    ];

    #[test]
    fn character_path_gives_the_byte_paths_language() {
        let mut compared = 0;
        for p in PATTERNS {
            let Ok(re) = translate_ecma(p) else { continue };
            if chars_match_bytes(&re, 20_000).unwrap() {
                compared += 1;
            }
        }
        assert!(compared >= 25, "only {compared} patterns compared");
        // Regexes as the schema compiler hands them over: Unicode properties, every scalar
        // above ASCII, a search for a counted class.
        for re in [
            r"(?s:.)*(?:\p{L}{5,40})(?s:.)*",
            r"\p{Greek}+\p{Han}?[\x{10000}-\x{10FFFF}]",
            r"(?:[\x{80}-\x{10FFFF}]{2})*",
            r"[^\x{7FF}\x{800}\x{FFFF}\x{10000}]{0,3}",
        ] {
            assert!(chars_match_bytes(re, 20_000).unwrap(), "{re} not compared");
        }
        for name in ["date-time", "email", "hostname", "ipv4", "ipv6", "uri", "uuid", "duration"] {
            let re = format_regex(name).unwrap();
            assert!(chars_match_bytes(&re, 20_000).unwrap(), "{name} not compared");
        }
        // Word boundaries are left to the byte path.
        assert!(chars_raw(&translate_ecma(r"\bword\b").unwrap(), 100).unwrap().is_none());
        // The test can fail: a character automaton one letter off is caught.
        let a = dfa_from_regex(r"(?:[a-y])+", 100).unwrap();
        let b = dfa_from_regex_bytes(r"(?:[a-z])+", 100).unwrap();
        assert_eq!(same_language(&a, &b), Err(b"z".to_vec()));
    }

    /// A determiniser cache that fills up in the middle of a row is an error, not a panic:
    /// `regex-automata` cleared a full cache and renumbered its states, and the row's next
    /// transition read a stale id (an index out of bounds inside `regex-automata`, found on a
    /// 300-fold Unicode class, which both paths find too big at the byte level).
    #[test]
    fn a_full_determiniser_cache_is_too_big_not_a_panic() {
        let re = translate_ecma(r"^(\p{L}|\p{N}|\p{P}|\p{S}|\p{Z}|\p{M}){1,300}$").unwrap();
        assert!(matches!(dfa_from_regex_bytes(&re, 20_000), Err(DfaError::TooBig)));
        assert!(matches!(dfa_from_regex(&re, 20_000), Err(DfaError::TooBig)));
    }

    /// Every `pattern` and `patternProperties` key of the MaskBench dev schemas: the character
    /// path gives `regex-automata`'s language wherever the latter builds one.
    #[test]
    fn character_path_on_maskbench_patterns() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/maskbench-dev");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            eprintln!("skipped: no MaskBench files at {}", dir.display());
            return;
        };
        fn collect(v: &serde_json::Value, out: &mut std::collections::BTreeSet<String>) {
            match v {
                serde_json::Value::Object(m) => {
                    for (k, x) in m {
                        match (k.as_str(), x) {
                            ("pattern", serde_json::Value::String(p)) => {
                                out.insert(p.clone());
                            }
                            ("patternProperties", serde_json::Value::Object(pp)) => {
                                out.extend(pp.keys().cloned());
                            }
                            _ => {}
                        }
                        collect(x, out);
                    }
                }
                serde_json::Value::Array(a) => a.iter().for_each(|x| collect(x, out)),
                _ => {}
            }
        }
        let mut patterns = std::collections::BTreeSet::new();
        for e in entries.flatten() {
            let Ok(text) = std::fs::read_to_string(e.path()) else { continue };
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
                collect(&v, &mut patterns);
            }
        }
        let (mut compared, mut failures) = (0, Vec::new());
        for p in &patterns {
            let Ok(re) = translate_ecma(p) else { continue };
            match chars_match_bytes(&re, 20_000) {
                Ok(true) => compared += 1,
                Ok(false) => {}
                Err(e) => failures.push(e),
            }
        }
        assert!(failures.is_empty(), "{} of {compared}: {failures:#?}", failures.len());
        assert!(compared > 500, "only {compared} of {} patterns compared", patterns.len());
        eprintln!("{compared} of {} MaskBench patterns compared", patterns.len());
    }

    #[test]
    fn pattern_search_semantics() {
        assert!(
            anchored_both_ends("^[a-z]+$")
                && !anchored_both_ends("^a|b$")
                && !anchored_both_ends("^a\\$")
        );
        let d = dfa("^[a-z]+$");
        assert!(d.matches(b"abc"));
        assert!(!d.matches(b"ab1"));
        assert!(!d.matches(b""));
        // Dead state after a refused byte: no dead ends.
        assert_eq!(d.next(d.start(), b'1'), DEAD);
        let d = dfa(r"\d");
        assert!(d.matches(b"x1y"));
        assert!(!d.matches(b"xy"));
        assert!(!d.matches("٣".as_bytes()), "ECMA \\d is ASCII only");
    }

    /// The automaton of a search pattern ending in `(?s:.)*` continues its accepting states
    /// in the any-content automaton only where no assertion can be met at the end of the
    /// input (MaskBench `Github_easy---o21855`: `{Resource}` was accepted through the
    /// `[a-z]+$` branch holding at an inner `e` once the shortcut ignored the `$`).
    #[test]
    fn search_patterns_with_end_assertions_keep_their_meaning() {
        assert!(ends_in_any_star(&translate_ecma("[a-z]").unwrap()));
        assert!(ends_in_any_star(&translate_ecma("^a").unwrap()));
        assert!(!ends_in_any_star(&translate_ecma("^a|b$").unwrap()));
        assert!(!ends_in_any_star(&translate_ecma(r"\bword").unwrap()));
        let d = dfa(r"^(\{[a-z]+\})|([a-z]+)$");
        for ok in ["{abc}", "{abc}XYZ", "abc", "A abc", "{A}b"] {
            assert!(d.matches(ok.as_bytes()), "{ok}");
        }
        for bad in ["{Resource}", "abc}", "{A}", "A"] {
            assert!(!d.matches(bad.as_bytes()), "{bad}");
        }
        let d = dfa("^p([0-9]+)|t$");
        assert!(d.matches(b"p1x") && d.matches(b"xt") && !d.matches(b"xtx") && !d.matches(b"px"));
        // The shortcut and the plain determinisation agree on an unanchored pattern.
        let d = dfa("[a-z]{2}[0-9]");
        assert!(d.matches(b"--ab1--") && d.matches("é ab9 é".as_bytes()) && !d.matches(b"a1b2"));
    }

    #[test]
    fn shortest_completions_count_code_points() {
        let d = dfa_from_regex("(ab|éééé)", 64).unwrap();
        assert_eq!(d.short(d.start()), 2);
        let e = "é".as_bytes();
        assert_eq!(d.short(d.run(d.start(), &e[..1])), 3, "mid-character: 3 more code points");
        assert_eq!(d.short(d.run(d.start(), e)), 3);
        assert_eq!(d.short(d.run(d.start(), b"a")), 1);
        assert_eq!(d.short(d.run(d.start(), b"ab")), 0);
        assert_eq!(d.short(DEAD), u32::MAX);
        assert_eq!(d.max_short(), 3);
    }

    #[test]
    fn minimal_automata_have_one_state_per_language() {
        // `.*`'s loop state is its start state, so slices keyed by "at the start" apply to
        // every character boundary.
        let any = dfa_from_regex(r"(?s:.)*", 64).unwrap();
        assert_eq!(any.run(any.start(), "aé".as_bytes()), any.start());
        // Dead, start, 1/2/3 continuation bytes to go, and the four restricted second bytes
        // of UTF-8 (after E0, ED, F0, F4).
        assert_eq!(any.n_states(), 9);
        // `(ab|cb)` needs one state after `a` or `c`, not two.
        let d = dfa_from_regex("(ab|cb)x*", 64).unwrap();
        assert_eq!(d.run(d.start(), b"a"), d.run(d.start(), b"c"));
        assert!(d.matches(b"abxx") && d.matches(b"cb") && !d.matches(b"bb"));
    }

    #[test]
    fn products_and_lengths() {
        let a = dfa("^a+$");
        let l = length_dfa(2, 3, 1000).unwrap();
        let p = product(&a, &l, Op::And, 1000).unwrap();
        assert!(!p.matches(b"a") && p.matches(b"aa") && p.matches(b"aaa") && !p.matches(b"aaaa"));
        let lits = dfa_from_regex(&literals_regex(["x", "y"]), 100).unwrap();
        let c = complement(&lits, 1000).unwrap();
        assert!(!c.matches(b"x") && c.matches(b"xy") && c.matches(b""));
        // Intersections decided without building the product.
        let digits = dfa("^[0-9]+$");
        assert_eq!(intersect_nonempty(&a, &l, 0, u32::MAX, 1000), Some(true));
        assert_eq!(intersect_nonempty(&a, &digits, 0, u32::MAX, 1000), Some(false));
        assert_eq!(intersect_nonempty(&a, &a, 4, 5, 1000), Some(true));
        assert_eq!(intersect_nonempty(&a, &l, 4, 5, 1000), Some(false), "l has 2..=3 chars");
        assert_eq!(intersect_nonempty(&digits, any_content(), 3, 3, 1000), Some(true));
        let gap = dfa("^(ab|abcdé)$");
        assert_eq!(intersect_nonempty(&gap, &gap, 3, 4, 1000), Some(false), "lengths 2 and 5 only");
        assert_eq!(intersect_nonempty(&gap, &gap, 3, 5, 1000), Some(true));
        assert_eq!(lits.finite_count(lits.start()), Some(2));
        assert_eq!(c.finite_count(c.start()), None);
    }

    #[test]
    fn formats_compile() {
        for f in [
            "date",
            "time",
            "date-time",
            "duration",
            "email",
            "hostname",
            "ipv4",
            "ipv6",
            "uuid",
            "uri",
            "uri-reference",
        ] {
            let d = dfa_from_regex(&format_regex(f).unwrap(), 20_000)
                .unwrap_or_else(|e| panic!("{f}: {e:?}"));
            assert!(!d.is_empty());
        }
        let d = dfa_from_regex(&format_regex("date-time").unwrap(), 20_000).unwrap();
        assert!(d.matches(b"2024-02-29T10:00:00+02:00"));
        assert!(!d.matches(b"2023-02-29T10:00:00Z"));
        let d = format_dfa("email", &format_regex("email").unwrap(), 20_000).unwrap();
        let local =
            |n: usize| format!("{}@example.com", "a.".repeat(n / 2) + &"b".repeat(n % 2 + 1));
        assert!(d.matches(b"a.b@example.com") && d.matches(local(63).as_bytes()));
        assert_eq!(local(63).find('@'), Some(64));
        assert!(!d.matches(local(64).as_bytes()), "a 65-octet local part");
        let d = dfa_from_regex(&format_regex("uri").unwrap(), 20_000).unwrap();
        for ok in ["https://example.com:8080/a?b#c", "http://u:p@[::1]:80/", "ftp://h", "urn:x"] {
            assert!(d.matches(ok.as_bytes()), "{ok}");
        }
        for bad in ["https://]-", "https://K],7Ml@[MB~IT/", "http://a@b@c/", "http://h:8x/"] {
            assert!(!d.matches(bad.as_bytes()), "{bad}");
        }
        let d = dfa_from_regex(&format_regex("hostname").unwrap(), 20_000).unwrap();
        let long = |n: usize| "a".repeat(n);
        for ok in ["a", "ab", "a-b", "a--b", "abc--d", "ab-c", "a-b-c", "xn--9n2bp8q", "XN--ab"] {
            assert!(d.matches(ok.as_bytes()), "{ok}");
        }
        for bad in ["ab--c", "u---1", "zz--q.com", "a.ab--", "-a", "a-", "xn--", "ab--cd.example"] {
            assert!(!d.matches(bad.as_bytes()), "{bad}");
        }
        assert!(d.matches(long(63).as_bytes()) && !d.matches(long(64).as_bytes()));
        let xn63 = format!("xn--{}", long(59));
        assert!(d.matches(xn63.as_bytes()) && !d.matches(format!("{xn63}a").as_bytes()));
        let d = dfa_from_regex(&format_regex("ipv6").unwrap(), 20_000).unwrap();
        assert!(
            d.matches(b"::1") && d.matches(b"2001:db8::8a2e:370:7334") && !d.matches(b"1::2::3")
        );
    }

    /// The trie-built automaton of a finite set is the regex alternation's minimal automaton.
    #[test]
    fn literal_sets_match_their_alternation() {
        let sets: Vec<Vec<&str>> = vec![
            vec![],
            vec![""],
            vec!["", "a", "ab", "abc", "b"],
            vec!["red", "green", "blue", "greenish", "bred", "é", "éa", "日本"],
            vec!["a.b", "a*b", "(x)", "[y]", "\\", "\"q\""],
        ];
        for lits in sets {
            let t = dfa_from_literals(lits.iter().copied(), 1000).unwrap();
            let r = dfa_from_regex(&literals_regex(lits.iter().copied()), 1000).unwrap();
            assert_eq!(t.n_states(), r.n_states(), "{lits:?}");
            let mut probes: Vec<String> = lits.iter().map(|s| s.to_string()).collect();
            for l in &lits {
                probes.push(format!("{l}x"));
                probes.push(format!("x{l}"));
                if !l.is_empty() {
                    probes.push(l[..l.len() - l.chars().last().unwrap().len_utf8()].to_string());
                }
            }
            for p in &probes {
                assert_eq!(t.matches(p.as_bytes()), r.matches(p.as_bytes()), "{lits:?} {p:?}");
                assert_eq!(t.matches(p.as_bytes()), lits.contains(&p.as_str()), "{p:?}");
            }
        }
        assert!(matches!(dfa_from_literals(["abcdefgh", "ijklmnop"], 4), Err(DfaError::TooBig)));
    }

    #[test]
    fn escape_ranges() {
        let d = dfa_from_regex(&literals_regex(["é"]), 100).unwrap();
        assert!(d.range_live(d.start(), 0xE0, 0xEF, u32::MAX));
        assert!(!d.range_live(d.start(), 0x00, 0x7F, u32::MAX));
    }
}
