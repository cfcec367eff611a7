//! The lexical level of the CFG engine: regular sub-languages of the lowered grammar, each
//! compiled to one [`ByteDfa`] (a *lexeme*), so that the Earley recogniser steps one DFA state
//! per byte inside them instead of a closure over many byte-level items.
//!
//! GBNF has no lexical level of its own, so it is inferred from the lowered grammar:
//! - A nonterminal is **regular** when each of its alternatives only uses terminals and regular
//!   nonterminals (least fixpoint, so anything recursive is excluded), with one exception: the
//!   left-recursive self-loops that lowering makes for repetitions, `R ::= A | R x` (bases that
//!   do not mention `R`, recursive alternatives `R x` whose tail does not mention it), which is
//!   the regular language `A x*`.
//! - Each regular nonterminal gets a `regex-syntax` HIR built from its byte-set terminals
//!   (inlining its regular sub-rules), bounded in size and depth so that a DAG of references
//!   cannot blow up.
//! - **Lexemes** are the maximal ones: starting from `root`, a regular nonterminal that a
//!   non-regular rule (or the start rule) references is compiled to a DFA; if that DFA exceeds
//!   the limits (`CfgConfig::max_lexeme_states`), the rule stays a grammar rule and its own
//!   regular sub-rules are tried instead.
//! - `follow_sets` gives, per lexeme position, the bytes that can follow the lexeme there
//!   (byte FIRST/FOLLOW sets of the flat grammar), which the recogniser's deferred completions
//!   wait for.
//! - Build work is bounded: HIR size per rule and per grammar, DFA states per lexeme and for
//!   all lexemes together (8× the per-lexeme limit), at most 8 DFAs that fail to build, and
//!   the determiniser's work over all lexemes (`CfgConfig::max_lexer_work`, in NFA state ×
//!   byte class × DFA state units; one attempt gets at most half of it, so a failed first
//!   attempt leaves room for the sub-rules); past a bound, rules simply stay at the byte level
//!   (slower, same masks).
//!
//! Exactness: a lexeme's DFA accepts exactly the language of its nonterminal, and only live
//! states exist (`ByteDfa` prunes states that cannot reach acceptance), so an Earley item inside
//! a lexeme can always complete — the invariant that makes "set non-empty" mean "prefix viable".
//! No maximal-munch or priority rule is applied (GBNF has none): an item in an accepting DFA
//! state both stays in the lexeme and completes it, exactly like the byte-level rules did.

use super::grammar::{decode, RSym, Sym};
use crate::automaton::{ByteDfa, DfaConfig, DfaStateId};
use crate::bytes::ByteSet;
use regex_syntax::hir::{Class, ClassBytes, ClassBytesRange, Hir, Repetition};

/// Largest HIR (in nodes) inlined into one lexeme.
const MAX_HIR_NODES: usize = 20_000;
/// Deepest HIR inlined into one lexeme (the NFA compiler recurses over it).
const MAX_HIR_DEPTH: usize = 200;
/// HIR nodes built for a whole grammar (each regular rule copies its sub-rules' HIR).
const MAX_TOTAL_HIR_NODES: usize = 1_000_000;
/// Lexeme DFAs that may fail to build (over the state limit) before no more are tried: each
/// failure costs a determinisation up to the limit.
const MAX_LEXEME_FAILURES: usize = 8;
/// Live DFA states of all lexemes together, in multiples of the per-lexeme limit.
const TOTAL_STATES_FACTOR: usize = 8;

/// One regular sub-language compiled to a DFA.
#[derive(Debug)]
pub(crate) struct Lexeme {
    pub dfa: ByteDfa,
    /// Per DFA state: the bytes with a live transition (the Earley set's scan prefilter).
    pub first: Vec<ByteSet>,
    /// Per DFA state: the bytes that lead back to the same state (a loop: any string of them
    /// keeps an item there alive; the trie walk accepts such subtrees whole).
    pub stay: Vec<ByteSet>,
    /// The nonterminal it replaces.
    pub nt: u32,
}

impl Lexeme {
    #[inline(always)]
    pub fn start(&self) -> u32 {
        self.dfa.start().index() as u32
    }
    #[inline(always)]
    pub fn next(&self, st: u32, b: u8) -> Option<u32> {
        self.dfa.next(DfaStateId::from_index(st as usize), b).map(|s| s.index() as u32)
    }
    /// Can some byte follow in state `st` (else the lexeme must end there)?
    #[inline(always)]
    pub fn continues(&self, st: u32) -> bool {
        self.dfa.can_continue(DfaStateId::from_index(st as usize))
    }
    #[inline(always)]
    pub fn accepting(&self, st: u32) -> bool {
        self.dfa.is_accepting(DfaStateId::from_index(st as usize))
    }
}

fn class_hir(s: &ByteSet) -> Hir {
    // Maximal runs of consecutive bytes, each one range.
    let mut ranges: Vec<ClassBytesRange> = Vec::new();
    for b in s {
        match ranges.last_mut() {
            Some(r) if r.end() as usize + 1 == b as usize => {
                *r = ClassBytesRange::new(r.start(), b)
            }
            _ => ranges.push(ClassBytesRange::new(b, b)),
        }
    }
    Hir::class(Class::Bytes(ClassBytes::new(ranges)))
}

/// The regular nonterminals' HIR (`None`: not regular, or too big to inline).
///
/// One pass in depth-first post-order over the reference graph: a rule is decided after the
/// rules it references, and a reference to a rule still on the stack is a cycle (not regular;
/// the self-loop form aside). Linear in the grammar, plus the HIR built, which is bounded.
fn regular_hirs(defs: &[Vec<Vec<RSym>>], sets: &[ByteSet]) -> Vec<Option<Hir>> {
    let n = defs.len();
    let mut hir: Vec<Option<Hir>> = vec![None; n];
    let mut size = vec![0usize; n];
    let mut depth = vec![0usize; n];
    let mut budget = MAX_TOTAL_HIR_NODES;
    // 0 = unvisited, 1 = on the stack, 2 = done.
    let mut mark = vec![0u8; n];
    for root in 0..n {
        if mark[root] != 0 {
            continue;
        }
        // Iterative DFS: (rule, its references, index of the next one to visit).
        let refs_of = |i: usize| -> Vec<u32> {
            defs[i]
                .iter()
                .flatten()
                .filter_map(|s| if let RSym::Nt(j) = *s { Some(j) } else { None })
                .collect()
        };
        let mut stack: Vec<(usize, Vec<u32>, usize)> = vec![(root, refs_of(root), 0)];
        mark[root] = 1;
        while let Some((i, refs, next)) = stack.last_mut() {
            let i = *i;
            if *next < refs.len() {
                let j = refs[*next] as usize;
                *next += 1;
                if mark[j] == 0 {
                    mark[j] = 1;
                    stack.push((j, refs_of(j), 0));
                }
                continue;
            }
            stack.pop();
            mark[i] = 2;
            decide(i, defs, sets, &mut hir, &mut size, &mut depth, &mut budget);
        }
    }
    hir
}

/// Decide rule `i` once the rules it references are decided (see [`regular_hirs`]).
fn decide(
    i: usize,
    defs: &[Vec<Vec<RSym>>],
    sets: &[ByteSet],
    hir: &mut [Option<Hir>],
    size: &mut [usize],
    depth: &mut [usize],
    budget: &mut usize,
) {
    if defs[i].is_empty() {
        return;
    }
    let me = i as u32;
    let ok_sym = |s: &RSym, hir: &[Option<Hir>]| match *s {
        // An empty byte set is a token terminal (see `grammar`): token-level, never in a DFA.
        RSym::T(t) => !sets[t as usize].is_empty(),
        RSym::Nt(j) => j != me && hir[j as usize].is_some(),
    };
    let mut bases = Vec::new();
    let mut tails = Vec::new();
    for a in &defs[i] {
        if a.iter().all(|s| ok_sym(s, hir)) {
            bases.push(a.as_slice());
        } else if a.first() == Some(&RSym::Nt(me)) && a[1..].iter().all(|s| ok_sym(s, hir)) {
            tails.push(&a[1..]);
        } else {
            return;
        }
    }
    if bases.is_empty() {
        return;
    }
    let (mut sz, mut dp) = (1usize, 0usize);
    for s in bases.iter().chain(tails.iter()).flat_map(|a| a.iter()) {
        if let RSym::Nt(j) = *s {
            sz += size[j as usize];
            dp = dp.max(depth[j as usize]);
        } else {
            sz += 1;
        }
    }
    dp += 3;
    if sz > MAX_HIR_NODES || dp > MAX_HIR_DEPTH || sz > *budget {
        return;
    }
    *budget -= sz;
    let seq = |a: &[RSym]| {
        Hir::concat(
            a.iter()
                .map(|s| match *s {
                    RSym::T(t) => class_hir(&sets[t as usize]),
                    RSym::Nt(j) => hir[j as usize].clone().expect("decided"),
                })
                .collect(),
        )
    };
    let base = Hir::alternation(bases.iter().map(|a| seq(a)).collect());
    let h = if tails.is_empty() {
        base
    } else {
        let tail = Hir::alternation(tails.iter().map(|a| seq(a)).collect());
        Hir::concat(vec![
            base,
            Hir::repetition(Repetition { min: 0, max: None, greedy: true, sub: Box::new(tail) }),
        ])
    };
    hir[i] = Some(h);
    size[i] = sz;
    depth[i] = dp;
}

/// Choose and compile the lexemes of a lowered grammar (see the module docs). `defs[i]` are
/// nonterminal `i`'s alternatives (unproductive ones already removed). Returns, per nonterminal,
/// its lexeme (if it became one), and the lexemes.
pub(crate) fn build(
    defs: &[Vec<Vec<RSym>>],
    sets: &[ByteSet],
    root: usize,
    config: &DfaConfig,
    max_work: u64,
) -> (Vec<Option<u32>>, Vec<Lexeme>) {
    let n = defs.len();
    let hir = regular_hirs(defs, sets);
    let mut lex_of: Vec<Option<u32>> = vec![None; n];
    let mut lexemes = Vec::new();
    // 0 = not visited, 1 = stays a rule (visited), 2 = lexeme.
    let mut state = vec![0u8; n];
    let (mut failures, mut states) = (0usize, 0usize);
    let mut work_left = max_work;
    let total = config.max_states.saturating_mul(TOTAL_STATES_FACTOR);
    let mut try_lexeme = |j: usize, lexemes: &mut Vec<Lexeme>, lex_of: &mut Vec<Option<u32>>| {
        let Some(h) = &hir[j] else { return false };
        if failures >= MAX_LEXEME_FAILURES || states >= total || work_left == 0 {
            return false;
        }
        let (built, used) = ByteDfa::from_hir_with_work(h, config, work_left.min(max_work / 2));
        work_left = work_left.saturating_sub(used);
        match built {
            Ok(dfa) if states + dfa.state_count() <= total => {
                states += dfa.state_count();
                let (mut first, mut stay) = (Vec::new(), Vec::new());
                for s in 0..dfa.state_count() {
                    let id = DfaStateId::from_index(s);
                    let (mut f, mut l) = (ByteSet::EMPTY, ByteSet::EMPTY);
                    for b in 0..=255u8 {
                        match dfa.next(id, b) {
                            Some(t) if t == id => {
                                f.insert(b);
                                l.insert(b);
                            }
                            Some(_) => f.insert(b),
                            None => {}
                        }
                    }
                    first.push(f);
                    stay.push(l);
                }
                lex_of[j] = Some(lexemes.len() as u32);
                lexemes.push(Lexeme { dfa, first, stay, nt: j as u32 });
                true
            }
            Ok(_) => false,
            Err(_) => {
                failures += 1;
                false
            }
        }
    };
    let mut work = Vec::new();
    if try_lexeme(root, &mut lexemes, &mut lex_of) {
        state[root] = 2;
    } else {
        state[root] = 1;
        work.push(root);
    }
    while let Some(i) = work.pop() {
        for a in &defs[i] {
            for s in a {
                if let RSym::Nt(j) = *s {
                    let j = j as usize;
                    if state[j] != 0 {
                        continue;
                    }
                    if try_lexeme(j, &mut lexemes, &mut lex_of) {
                        state[j] = 2;
                    } else {
                        state[j] = 1;
                        work.push(j);
                    }
                }
            }
        }
    }
    (lex_of, lexemes)
}

/// FIRST/FOLLOW over bytes (least fixpoints) on the flat grammar, reported per lexeme position:
/// the bytes that can come right after the lexeme there (`CfgGrammar::follow`, what deferred
/// completions wait for). Over-approximation would only cost speed; these are exact sets
/// of the context-free grammar.
pub(crate) fn follow_sets(
    syms: &[u32],
    sets: &[ByteSet],
    lexemes: &[Lexeme],
    alts: &[Vec<u32>],
    nullable_nt: &[bool],
) -> Vec<ByteSet> {
    let n = alts.len();
    if lexemes.is_empty() {
        return Vec::new();
    }
    let sym_nullable = |s: u32| match decode(s) {
        Sym::T(_) => false,
        Sym::Lex(l) => {
            let lx = &lexemes[l as usize];
            lx.accepting(lx.start())
        }
        Sym::Nt(a) => nullable_nt[a as usize],
        Sym::End(_) => true,
    };
    let mut first: Vec<ByteSet> = vec![ByteSet::EMPTY; n];
    let sym_first = |s: u32, first: &[ByteSet]| -> ByteSet {
        match decode(s) {
            Sym::T(t) => sets[t as usize],
            Sym::Lex(l) => {
                let lx = &lexemes[l as usize];
                lx.first[lx.start() as usize]
            }
            Sym::Nt(a) => first[a as usize],
            Sym::End(_) => ByteSet::EMPTY,
        }
    };
    loop {
        let mut changed = false;
        for a in 0..n {
            for &p in &alts[a] {
                let mut q = p as usize;
                loop {
                    let s = syms[q];
                    if let Sym::End(_) = decode(s) {
                        break;
                    }
                    let f = sym_first(s, &first);
                    changed |= first[a].union_with(&f);
                    if !sym_nullable(s) {
                        break;
                    }
                    q += 1;
                }
            }
        }
        if !changed {
            break;
        }
    }
    // FIRST and nullability of every suffix, right to left within each production.
    let mut suf_first: Vec<ByteSet> = vec![ByteSet::EMPTY; syms.len() + 1];
    let mut suf_null = vec![true; syms.len() + 1];
    let mut lhs_of = vec![0u32; syms.len()];
    for q in (0..syms.len()).rev() {
        match decode(syms[q]) {
            Sym::End(a) => {
                suf_first[q] = ByteSet::EMPTY;
                suf_null[q] = true;
                lhs_of[q] = a;
            }
            _ => {
                let mut f = sym_first(syms[q], &first);
                let nul = sym_nullable(syms[q]);
                if nul {
                    let next = suf_first[q + 1];
                    f.union_with(&next);
                }
                suf_first[q] = f;
                suf_null[q] = nul && suf_null[q + 1];
                lhs_of[q] = lhs_of[q + 1];
            }
        }
    }
    let mut fol: Vec<ByteSet> = vec![ByteSet::EMPTY; n];
    loop {
        let mut changed = false;
        for q in 0..syms.len() {
            if let Sym::Nt(a) = decode(syms[q]) {
                let mut f = suf_first[q + 1];
                if suf_null[q + 1] {
                    f.union_with(&fol[lhs_of[q] as usize]);
                }
                changed |= fol[a as usize].union_with(&f);
            }
        }
        if !changed {
            break;
        }
    }
    let mut out = vec![ByteSet::EMPTY; syms.len()];
    for q in 0..syms.len() {
        if let Sym::Lex(_) = decode(syms[q]) {
            let mut f = suf_first[q + 1];
            if suf_null[q + 1] {
                f.union_with(&fol[lhs_of[q] as usize]);
            }
            out[q] = f;
        }
    }
    out
}
