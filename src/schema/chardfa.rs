//! Pattern automata determinised a character at a time, then spelled out in UTF-8 bytes.
//!
//! `regex-automata` determinises over bytes: every state of a byte DFA is a set of the Thompson
//! NFA's byte states, and a character class such as `\S` (everything but 25 space characters)
//! is a tree of UTF-8 byte ranges inside the NFA. A counted repetition multiplies that tree:
//! `^(?:\S+\s+){0,199}\S+$` (word counts, common in real schemas) unrolls into 200 copies, and
//! each DFA state is found through epsilon closures over them — ~2 µs a state, 11,600 states,
//! ~25 ms for that one pattern. Over characters the same pattern has two letters (space, not
//! space) and ~400 states.
//!
//! So this module:
//! 1. builds a Thompson NFA over **Unicode scalar values** from the `regex-syntax` HIR
//!    (classes, literals, repetitions unrolled, alternation, `^`/`$` as whole-string anchors);
//! 2. splits the scalars into **letters**: scalars no class of the regex tells apart;
//! 3. determinises over letters (subset construction, Rabin & Scott 1959), with the same
//!    shortcut as the byte path for regexes ending in `(?s:.)*` (an accepting state accepts
//!    every continuation);
//! 4. builds a small **UTF-8 classifier**: a tree over the bytes of one encoded character,
//!    whose leaves say which letter the character is, shared (hash-consed) between equal
//!    subtrees, and cut short as soon as every completion of a prefix is the same letter;
//! 5. takes the **product** of the letter DFA with the classifier: a byte state is (letter
//!    state, classifier node), and a lead byte whose letter is already known moves the letter
//!    state at once, the remaining continuation bytes only counted.
//!
//! The result is the table [`super::string`] prunes and minimises as it does the byte path's;
//! the language is the same, which the tests check against `regex-automata` on real schemas'
//! patterns. Constructs this module does not model — word boundaries and other look-arounds,
//! byte classes outside ASCII, invalid UTF-8 literals — or an NFA over [`MAX_NFA`] nodes return
//! `None`, and the byte path decides (it also gives those their errors).

use super::string::{past_deadline, DfaError, RawDfa};
use regex_syntax::hir::{Class, Hir, HirKind, Look};
use rustc_hash::FxHashMap;

/// NFA nodes beyond which this builder leaves the pattern to the byte path.
pub(crate) const MAX_NFA: usize = 1 << 18;

/// A node of the scalar NFA.
enum Node {
    /// Consume one scalar of the class `set`, then go on at `next`.
    Char {
        set: u32,
        next: u32,
    },
    /// Go on at any of these (epsilon moves).
    Split(Vec<u32>),
    /// `^`: passable only before the first character.
    Start(u32),
    /// `$`: passable only after the last character.
    End(u32),
    Match,
}

struct Nfa {
    nodes: Vec<Node>,
    /// Each distinct class's ranges (inclusive), interned.
    sets: Vec<Vec<(u32, u32)>>,
    set_ids: FxHashMap<Vec<(u32, u32)>, u32>,
}

impl Nfa {
    fn push(&mut self, n: Node) -> Option<u32> {
        if self.nodes.len() >= MAX_NFA {
            return None;
        }
        self.nodes.push(n);
        Some(self.nodes.len() as u32 - 1)
    }

    fn char(&mut self, ranges: Vec<(u32, u32)>, next: u32) -> Option<u32> {
        let n = self.set_ids.len() as u32;
        let set = *self.set_ids.entry(ranges.clone()).or_insert_with(|| {
            self.sets.push(ranges);
            n
        });
        self.push(Node::Char { set, next })
    }

    /// The node that matches `h` and then goes on at `next` (built back to front).
    fn compile(&mut self, h: &Hir, next: u32) -> Option<u32> {
        match h.kind() {
            HirKind::Empty => Some(next),
            HirKind::Literal(lit) => {
                let text = std::str::from_utf8(&lit.0).ok()?;
                let mut n = next;
                for c in text.chars().rev() {
                    n = self.char(vec![(c as u32, c as u32)], n)?;
                }
                Some(n)
            }
            HirKind::Class(Class::Unicode(c)) => {
                let ranges = c.ranges().iter().map(|r| (r.start() as u32, r.end() as u32));
                self.char(ranges.collect(), next)
            }
            HirKind::Class(Class::Bytes(c)) => {
                // ASCII byte ranges are the same characters; others match inside a UTF-8
                // encoding, which a character automaton cannot express.
                if c.ranges().iter().any(|r| r.end() >= 0x80) {
                    return None;
                }
                let ranges = c.ranges().iter().map(|r| (u32::from(r.start()), u32::from(r.end())));
                self.char(ranges.collect(), next)
            }
            HirKind::Look(Look::Start) => self.push(Node::Start(next)),
            HirKind::Look(Look::End) => self.push(Node::End(next)),
            HirKind::Look(_) => None,
            HirKind::Capture(c) => self.compile(&c.sub, next),
            HirKind::Concat(parts) => {
                let mut n = next;
                for p in parts.iter().rev() {
                    n = self.compile(p, n)?;
                }
                Some(n)
            }
            HirKind::Alternation(alts) => {
                let starts = alts.iter().map(|a| self.compile(a, next)).collect::<Option<_>>()?;
                self.push(Node::Split(starts))
            }
            HirKind::Repetition(r) => {
                let mut n = match r.max {
                    None => {
                        let lp = self.push(Node::Split(Vec::new()))?;
                        let body = self.compile(&r.sub, lp)?;
                        self.nodes[lp as usize] = Node::Split(vec![body, next]);
                        lp
                    }
                    Some(max) => {
                        // `x{0,k}` then `next`: (x (x (…)? )? )?, each optional copy able to
                        // skip to `next`.
                        let mut n = next;
                        for _ in r.min..max {
                            let body = self.compile(&r.sub, n)?;
                            n = self.push(Node::Split(vec![body, next]))?;
                        }
                        n
                    }
                };
                for _ in 0..r.min {
                    n = self.compile(&r.sub, n)?;
                }
                Some(n)
            }
        }
    }
}

/// The scalars split into letters: `starts[i]..starts[i + 1]` is interval `i`, whose letter is
/// `letter[i]`; scalars of one letter belong to exactly the same classes of the regex.
struct Letters {
    starts: Vec<u32>,
    letter: Vec<u32>,
    /// Per class of the NFA: the letters it holds.
    of_set: Vec<Vec<u32>>,
    count: usize,
}

impl Letters {
    fn new(sets: &[Vec<(u32, u32)>]) -> Letters {
        let mut starts = vec![0u32, 0x11_0000];
        for set in sets {
            for &(a, b) in set {
                starts.push(a);
                starts.push(b + 1);
            }
        }
        starts.sort_unstable();
        starts.dedup();
        let n = starts.len() - 1;
        // Per interval, the classes holding it (in class order).
        let mut sig: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (k, set) in sets.iter().enumerate() {
            for &(a, b) in set {
                let mut i = starts.partition_point(|&s| s <= a) - 1;
                while i < n && starts[i] <= b {
                    sig[i].push(k as u32);
                    i += 1;
                }
            }
        }
        let mut ids: FxHashMap<&[u32], u32> = FxHashMap::default();
        let mut letter = Vec::with_capacity(n);
        let mut of_set: Vec<Vec<u32>> = vec![Vec::new(); sets.len()];
        for s in &sig {
            let next = ids.len() as u32;
            let l = *ids.entry(s.as_slice()).or_insert_with(|| {
                for &k in s {
                    of_set[k as usize].push(next);
                }
                next
            });
            letter.push(l);
        }
        let count = ids.len();
        Letters { starts, letter, of_set, count }
    }

    /// The letter of scalar `c`.
    fn of(&self, c: u32) -> u32 {
        self.letter[self.starts.partition_point(|&s| s <= c) - 1]
    }

    /// The letter of every scalar in `lo..=hi`, if they share one.
    fn uniform(&self, lo: u32, hi: u32) -> Option<u32> {
        let mut i = self.starts.partition_point(|&s| s <= lo) - 1;
        let l = self.letter[i];
        while self.starts[i + 1] <= hi {
            i += 1;
            if self.letter[i] != l {
                return None;
            }
        }
        Some(l)
    }
}

/// The letter DFA's dead state.
const C_DEAD: u32 = 0;

/// The letter DFA: `trans[s * letters + l]`, state 0 dead.
struct LetterDfa {
    trans: Vec<u32>,
    accept: Vec<bool>,
    /// The start: 1, or [`C_DEAD`] when nothing can be matched from the start.
    start: u32,
}

/// Bytes of NFA state sets the subset construction may keep per state of the limit (the byte
/// path's lazy-DFA cache has the same bound): time and memory stay proportional to the limit
/// however many NFA states each set holds.
const SET_BYTES_PER_STATE: usize = 1024;

/// Subset construction over letters. `any_star`: the regex ends in `(?s:.)*`, so an accepting
/// state accepts everything after it and becomes one absorbing state.
fn determinise(
    nfa: &Nfa,
    start: u32,
    letters: &Letters,
    any_star: bool,
    max_states: usize,
) -> Result<LetterDfa, DfaError> {
    let n = nfa.nodes.len();
    let mut marks = [vec![0u32; n], vec![0u32; n]];
    let mut generation = 0u32;
    let mut stack: Vec<(u32, bool)> = Vec::new();
    // The consuming nodes reachable from `seeds` by epsilon moves, and whether `Match` is.
    let mut closure = |seeds: &[u32], at_start: bool, out: &mut Vec<u32>| -> bool {
        generation += 1;
        out.clear();
        let mut accept = false;
        stack.clear();
        stack.extend(seeds.iter().map(|&s| (s, false)));
        while let Some((s, after_end)) = stack.pop() {
            let m = &mut marks[after_end as usize][s as usize];
            if *m == generation {
                continue;
            }
            *m = generation;
            match &nfa.nodes[s as usize] {
                Node::Char { .. } => {
                    if !after_end {
                        out.push(s);
                    }
                }
                Node::Split(alts) => stack.extend(alts.iter().rev().map(|&a| (a, after_end))),
                Node::Start(next) => {
                    if at_start {
                        stack.push((*next, after_end));
                    }
                }
                // Past `$` nothing more can be read: only a `Match` by epsilon moves counts.
                Node::End(next) => stack.push((*next, true)),
                Node::Match => accept = true,
            }
        }
        out.sort_unstable();
        accept
    };
    let width = letters.count;
    let mut ids: FxHashMap<(Box<[u32]>, bool), u32> = FxHashMap::default();
    let mut sets: Vec<Box<[u32]>> = vec![Box::new([])];
    let mut dfa = LetterDfa { trans: vec![C_DEAD; width], accept: vec![false], start: C_DEAD };
    let max_set_bytes = max_states.saturating_mul(SET_BYTES_PER_STATE);
    let mut set_bytes = 0usize;
    let mut scratch = Vec::new();
    let accepting = closure(&[start], true, &mut scratch);
    let mut intern = |set: &[u32],
                      accepting: bool,
                      sets: &mut Vec<Box<[u32]>>,
                      dfa: &mut LetterDfa|
     -> Result<u32, DfaError> {
        // Under `any_star` every accepting set is the one absorbing state, keyed as empty.
        let absorbing = accepting && any_star;
        if set.is_empty() && !accepting {
            return Ok(C_DEAD);
        }
        let key: (Box<[u32]>, bool) =
            if absorbing { (Box::new([]), true) } else { (set.into(), accepting) };
        if let Some(&id) = ids.get(&key) {
            return Ok(id);
        }
        let id = sets.len() as u32;
        set_bytes += 8 * key.0.len() + 64;
        if sets.len() > max_states.saturating_mul(2) + 16 || set_bytes > max_set_bytes {
            return Err(DfaError::TooBig);
        }
        ids.insert(key.clone(), id);
        sets.push(key.0);
        dfa.trans.extend(std::iter::repeat_n(C_DEAD, width));
        dfa.accept.push(accepting);
        if absorbing {
            // Every letter loops: the rest of the input is anything.
            let row = &mut dfa.trans[id as usize * width..];
            row.iter_mut().for_each(|t| *t = id);
        }
        Ok(id)
    };
    dfa.start = intern(&scratch, accepting, &mut sets, &mut dfa)?;
    let mut buckets: Vec<Vec<u32>> = vec![Vec::new(); width];
    let mut touched: Vec<u32> = Vec::new();
    let mut memo: FxHashMap<Vec<u32>, u32> = FxHashMap::default();
    let mut i = 1usize;
    while i < sets.len() {
        if i.is_multiple_of(64) && past_deadline() {
            return Err(DfaError::Deadline);
        }
        if any_star && dfa.accept[i] {
            // The absorbing state: its row is set.
            i += 1;
            continue;
        }
        for &t in &touched {
            buckets[t as usize].clear();
        }
        touched.clear();
        for &s in sets[i].iter() {
            let Node::Char { set, next } = nfa.nodes[s as usize] else { unreachable!() };
            for &l in &letters.of_set[set as usize] {
                let b = &mut buckets[l as usize];
                if b.is_empty() {
                    touched.push(l);
                }
                if b.last() != Some(&next) {
                    b.push(next);
                }
            }
        }
        memo.clear();
        for &l in &touched {
            let seeds = &buckets[l as usize];
            let t = match memo.get(seeds) {
                Some(&t) => t,
                None => {
                    let accepting = closure(seeds, false, &mut scratch);
                    let t = intern(&scratch, accepting, &mut sets, &mut dfa)?;
                    memo.insert(seeds.clone(), t);
                    t
                }
            };
            dfa.trans[i * width + l as usize] = t;
        }
        i += 1;
    }
    Ok(dfa)
}

/// What one byte of a character leads to in the UTF-8 classifier.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Out {
    /// Not valid UTF-8 here.
    Dead,
    /// The character is of this letter; this many continuation bytes follow.
    Lead(u32, u8),
    /// The letter is not known yet: go on at this node (0 is the root: a character boundary).
    Node(u32),
}

/// The UTF-8 classifier: the root reads a first byte, every other node a continuation byte
/// (`nodes[id - 1][byte - 0x80]`).
struct Classifier {
    root: [Out; 256],
    nodes: Vec<[Out; 64]>,
    ids: FxHashMap<[Out; 64], u32>,
    /// `cont[d]`: the node that skips `d` continuation bytes (`cont[0]` is the root).
    cont: [u32; 4],
}

impl Classifier {
    fn new(letters: &Letters) -> Classifier {
        let mut c = Classifier {
            root: [Out::Dead; 256],
            nodes: Vec::new(),
            ids: FxHashMap::default(),
            cont: [0; 4],
        };
        for d in 1..4 {
            let prev = c.cont[d - 1];
            c.cont[d] = c.intern([Out::Node(prev); 64]);
        }
        for b in 0..=0xFFu32 {
            c.root[b as usize] = match b {
                0x00..=0x7F => Out::Lead(letters.of(b), 0),
                0xC2..=0xDF => c.block(letters, (b & 0x1F) << 6, 1, 0x80),
                0xE0..=0xEF => c.block(letters, (b & 0x0F) << 12, 2, 0x800),
                0xF0..=0xF4 => c.block(letters, (b & 0x07) << 18, 3, 0x1_0000),
                _ => Out::Dead,
            };
        }
        c
    }

    fn intern(&mut self, outs: [Out; 64]) -> u32 {
        if let Some(&id) = self.ids.get(&outs) {
            return id;
        }
        self.nodes.push(outs);
        let id = self.nodes.len() as u32;
        self.ids.insert(outs, id);
        id
    }

    /// After a prefix whose completions (`d` more continuation bytes) are the scalars
    /// `lo..lo + 64^d`, of an encoding whose scalars start at `min`.
    fn block(&mut self, letters: &Letters, lo: u32, d: u32, min: u32) -> Out {
        let hi = lo + (1 << (6 * d)) - 1;
        let valid = |a: u32, b: u32| a >= min && b <= 0x10_FFFF && (b < 0xD800 || a > 0xDFFF);
        let invalid = |a: u32, b: u32| b < min || a > 0x10_FFFF || (a >= 0xD800 && b <= 0xDFFF);
        if invalid(lo, hi) {
            return Out::Dead;
        }
        if valid(lo, hi) {
            if let Some(l) = letters.uniform(lo, hi) {
                return Out::Lead(l, d as u8);
            }
        }
        let mut outs = [Out::Dead; 64];
        for (k, o) in outs.iter_mut().enumerate() {
            let sub = lo + ((k as u32) << (6 * (d - 1)));
            *o = if d == 1 {
                if valid(sub, sub) {
                    Out::Lead(letters.of(sub), 0)
                } else {
                    Out::Dead
                }
            } else {
                self.block(letters, sub, d - 1, min)
            };
        }
        Out::Node(self.intern(outs))
    }

    /// The outcome of byte `b` at node `u`.
    #[inline]
    fn step(&self, u: u32, b: u8) -> Out {
        if u == 0 {
            self.root[b as usize]
        } else if b & 0xC0 == 0x80 {
            self.nodes[u as usize - 1][(b & 0x3F) as usize]
        } else {
            Out::Dead
        }
    }
}

/// The byte automaton of `hir` (a full match) through letters, or `None` when the pattern uses
/// what this module does not model (see the module docs). State 0 is the start, state 1 the
/// dead state (it loops on every byte and does not accept). `any_star`: the regex is a
/// concatenation ending in `(?s:.)*` with no assertion but `^` (the byte path's shortcut).
///
/// # Errors
/// [`DfaError::TooBig`] past `max_states` (the caller may still try the byte path, whose
/// state sets are merged differently), [`DfaError::Deadline`].
pub(crate) fn build(
    hir: &Hir,
    any_star: bool,
    max_states: usize,
) -> Option<Result<RawDfa, DfaError>> {
    let mut nfa = Nfa { nodes: vec![Node::Match], sets: Vec::new(), set_ids: FxHashMap::default() };
    let start = nfa.compile(hir, 0)?;
    Some(product(&nfa, start, any_star, max_states))
}

fn product(nfa: &Nfa, start: u32, any_star: bool, max_states: usize) -> Result<RawDfa, DfaError> {
    let letters = Letters::new(&nfa.sets);
    let ldfa = determinise(nfa, start, &letters, any_star, max_states)?;
    let cls = Classifier::new(&letters);
    // Byte columns: bytes with the same outcome at every classifier node.
    let mut col_of: FxHashMap<(Out, Vec<Out>), u8> = FxHashMap::default();
    let mut classes = [0u8; 256];
    let mut reps: Vec<u8> = Vec::new();
    for b in 0..=255u8 {
        let conts: Vec<Out> = if b & 0xC0 == 0x80 {
            cls.nodes.iter().map(|n| n[(b & 0x3F) as usize]).collect()
        } else {
            Vec::new()
        };
        let next = reps.len() as u8;
        classes[b as usize] = *col_of.entry((cls.root[b as usize], conts)).or_insert_with(|| {
            reps.push(b);
            next
        });
    }
    let stride = reps.len();
    let width = letters.count;
    let limit = max_states.saturating_mul(2) + 16;
    // Byte states: 0 = (letter start, root), 1 = dead (so is 0 when the start is).
    let mut ids: FxHashMap<(u32, u32), u32> = FxHashMap::default();
    let mut states: Vec<(u32, u32)> = vec![(ldfa.start, 0), (C_DEAD, 0)];
    if ldfa.start != C_DEAD {
        ids.insert((ldfa.start, 0), 0);
    }
    let mut trans: Vec<u32> = Vec::new();
    let mut accept: Vec<bool> = Vec::new();
    let mut i = 0usize;
    while i < states.len() {
        if i.is_multiple_of(64) && past_deadline() {
            return Err(DfaError::Deadline);
        }
        let (q, u) = states[i];
        i += 1;
        if q == C_DEAD {
            trans.extend(std::iter::repeat_n(1, stride));
            accept.push(false);
            continue;
        }
        accept.push(u == 0 && ldfa.accept[q as usize]);
        for &b in &reps {
            let (q2, u2) = match cls.step(u, b) {
                Out::Dead => (C_DEAD, 0),
                Out::Lead(l, d) => {
                    (ldfa.trans[q as usize * width + l as usize], cls.cont[d as usize])
                }
                Out::Node(v) => (q, v),
            };
            let t = if q2 == C_DEAD {
                1
            } else {
                let n = states.len() as u32;
                *ids.entry((q2, u2)).or_insert_with(|| {
                    states.push((q2, u2));
                    n
                })
            };
            trans.push(t);
        }
        if states.len() > limit {
            return Err(DfaError::TooBig);
        }
    }
    Ok(RawDfa { classes, stride, trans, accept, start: 0 })
}
