//! [`CfgConstraint`]: the [`ConstraintEngine`] over a compiled GBNF grammar.
//!
//! Per request it owns an Earley [`Chart`] (append-only; `rollback` truncates it to the set
//! count recorded before each token), a mask cache keyed by the chart's signature (of its
//! future, see [`super::earley`]),
//! and scratch buffers. The compiled grammar and the vocabulary-specific slices are shared
//! (`Arc`) by every request forked from the same constraint.
//!
//! # Masks
//! 1. Cache hit on the last set's signature: copy the cached mask — the engine's own, then
//!    the one every engine of the compiled grammar shares (a later request meets the states
//!    an earlier one paid for).
//! 2. Else, if the last set holds a character-class loop item `R → R • x` or an item inside a
//!    lexeme state with a slice (see [`crate::cfg::grammar`]), allow the slice's tokens as a
//!    block (each of them only repeats the loop or stays inside the lexeme) and walk only the
//!    remaining tokens — where that lexeme is all the set can scan, as suffixes after the
//!    lexeme's first accepting state (`PureExits`).
//! 3. Else walk the whole trie with the Earley recogniser.
//!
//! In the walks of 2 and 3, a push of the path of a large trie node (the space byte; `▁` in
//! SentencePiece vocabularies) is followed by a check of the set it made, its deferred
//! completions made: where it holds an item before a lexeme in a state with a [`NodeSlice`]
//! (an identifier at its start, say), the tokens below the node whose rest runs inside that
//! lexeme are allowed as a block and only the others are walked (a C statement start: 43k
//! tokens like `" total"`, 250 of its 375 µs before).
//!
//! The walks of 2 and 3 are also kept per *position* ([`PositionMask`],
//! [`CfgConfig::position_masks`]): the last set's items with their origins reduced to "this
//! set" or "before it". The chart records, during the walk, the trie nodes below which a
//! token's walk completed an item that started before the last set (the only way a walk reads
//! the context: `"abc"` after a member's colon completes the member). The other tokens'
//! verdicts hold for every chart at that position, so a later mask there — the same rule one
//! object deeper, an element of an array inside an array, a statement inside a nested block,
//! which the signature keys apart — copies them and walks only below those nodes (`"abc",`,
//! `"abc"}`).
//!
//! EOS is allowed exactly when the chart accepts.
//!
//! # Token terminals
//! `<[id]>`, `<name>` and `!<…>` (see [`super::gbnf`]) are terminals with no bytes, resolved to
//! token ids when the engine is built ([`CfgErrorKind::UnknownToken`],
//! [`CfgErrorKind::TokenOutOfRange`]). The byte-level walk never scans them; a mask adds, for
//! each item of the last (committed, so whole) set before one, its token (`<…>`) or every
//! token but it (`!<…>`: text and special tokens, EOS ids and padding aside). `advance` with a
//! token some such item takes scans it as one step: a special token is one chart set without a
//! byte; a text token's bytes are pushed as well (it may also match byte terminals; sets
//! inside it may be empty) and the token-terminal items join the set after its last byte. So a
//! text token spelling `<|im_end|>` never matches the terminal `<|im_end|>`, and a special
//! token never matches a byte terminal. A token a grammar names that is also an EOS id is the
//! grammar's token where an item expects it, and EOS elsewhere.

use super::earley::Chart;
use super::earley::Item;
use super::gbnf::TokenRef;
use super::grammar::{decode, CfgGrammar, Sym, LEX_FLAG};
use super::walk::{pure_lexeme, EarleyWalk};
use super::{CfgConfig, CfgError, CfgErrorKind};
use crate::automaton::DfaStateId;
use crate::bytes::ByteSet;
use crate::engine::history::History;
use crate::engine::mask_cache::{MaskCache, SharedMasks};
use crate::engine::{
    allow_eos, allows_with, bool_view, mask_prelude, precheck, refused, BoolView, ConstraintEngine,
    EngineError, EngineErrorKind,
};
use crate::mask::TokenMask;
use crate::token::TokenId;
use crate::vocab::{TokTrie, TokenKind, Vocabulary, WalkHook};
use rustc_hash::FxHashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Tokens that only repeat a character-class loop, and the trie of all other tokens.
struct Slice {
    safe: TokenMask,
    count: usize,
    rest: TokTrie,
    /// For a lexeme-state slice: how the other tokens leave the lexeme, for sets where its
    /// item is all that can scan (see [`PureExits`]), one per (lexeme, state) it serves.
    pure_exits: Vec<PureExits>,
}

/// The tokens outside a lexeme-state slice, grouped by where they can first leave the lexeme.
///
/// Built from lexeme `lex` in DFA state `st`. A token that the lexeme refuses before reaching
/// an accepting state cannot be taken where the lexeme's item is all a set can scan; any other
/// token first reaches an accepting state `q` after some prefix, and what decides it is the
/// rest of its bytes from there (the lexeme may end at `q` or go on). So the tokens are kept as
/// the *suffixes* after that first accepting state, one trie per `q`: a mask makes the Earley
/// set after the lexeme once per `q` and walks the suffixes from it, instead of closing the
/// same set again under every distinct prefix (a JSON string body: 1,151 tokens in 575
/// suffixes, all after the one closing-quote state).
struct PureExits {
    lex: u32,
    st: u32,
    /// (accepting DFA state `q`, the non-empty suffixes after it, each token under its own).
    by_state: Vec<(u32, TokTrie)>,
}

pub(crate) struct Shared {
    grammar: Arc<CfgGrammar>,
    slices: Vec<Slice>,
    /// Flat position of a loop's `x` → its slice.
    loop_slice: FxHashMap<u32, usize>,
    /// Per lexeme, per DFA state: its slice, or `u32::MAX`.
    lex_slice: Vec<Vec<u32>>,
    /// Slices below large trie nodes, largest first.
    node_slices: Vec<NodeSlice>,
    /// Per token terminal of the grammar: its token id, and for a negated one the mask of the
    /// tokens it takes.
    tokens: Vec<(TokenId, Option<TokenMask>)>,
    config: CfgConfig,
    /// Masks by chart signature, for every engine of this grammar
    /// ([`EngineOptions::shared_masks`](crate::EngineOptions::shared_masks)): a state one
    /// request met (a statement start, the right side of an operator) is a copy for the next.
    masks: SharedMasks<u64>,
    /// Masks by position (see [`PositionMask`]), for every engine of this grammar.
    positions: Mutex<FxHashMap<u64, Option<Arc<PositionMask>>>>,
}

impl Shared {
    /// The position mask kept for `key`: `Some(None)` where the position was met and not
    /// worth keeping, `None` where it is new.
    fn position(&self, key: u64) -> Option<Option<Arc<PositionMask>>> {
        self.positions.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&key).cloned()
    }

    /// Keep `p` (or that it was not worth keeping) for `key`, one entry out when the map is
    /// full ([`CfgConfig::position_masks`]).
    fn keep_position(&self, key: u64, p: Option<PositionMask>) {
        let mut map = self.positions.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if map.len() >= self.config.position_masks {
            // Full: one entry out, whichever the map lists first.
            if let Some(old) = map.keys().next().copied() {
                map.remove(&old);
            }
        }
        map.insert(key, p.map(Arc::new));
    }

    /// Does token terminal `set` take `token`?
    #[inline]
    fn takes(&self, vocab: &Vocabulary, set: u32, token: TokenId) -> bool {
        let Some(k) = self.grammar.token_term(set) else { return false };
        match &self.tokens[k] {
            (id, None) => *id == token,
            (_, Some(m)) => token.index() < vocab.n_vocab() && m.contains(token),
        }
    }
}

/// Resolve the grammar's token terminals against `vocab` (see the module docs).
fn resolve_tokens(
    g: &CfgGrammar,
    vocab: &Vocabulary,
) -> Result<Vec<(TokenId, Option<TokenMask>)>, CfgError> {
    let mut out = Vec::with_capacity(g.token_terms().len());
    for t in g.token_terms() {
        let id = match &t.token {
            TokenRef::Id(id) => {
                let tid = TokenId(*id);
                if tid.index() >= vocab.n_tokens() || vocab.kind(tid) == TokenKind::Padding {
                    return Err(CfgError::new(CfgErrorKind::TokenOutOfRange {
                        id: *id,
                        n_tokens: vocab.n_tokens(),
                        line: t.pos.line,
                        column: t.pos.column,
                    }));
                }
                tid
            }
            TokenRef::Name(name) => vocab
                .token_id(name)
                .filter(|&id| id.index() < vocab.n_tokens())
                .ok_or_else(|| {
                    CfgError::new(CfgErrorKind::UnknownToken {
                        name: name.clone(),
                        line: t.pos.line,
                        column: t.pos.column,
                    })
                })?,
        };
        let neg = t.negated.then(|| {
            // Any one token but `id`: text and special tokens; EOS is the engine's own and
            // padding is never allowed (as llama.cpp, where end-of-generation tokens never
            // reach the grammar's token elements).
            let mut m = TokenMask::new(vocab.n_vocab());
            for i in 0..vocab.n_tokens() {
                let x = TokenId::from_index(i);
                if x != id && vocab.kind(x) != TokenKind::Padding && !vocab.is_eos(x) {
                    m.insert(x);
                }
            }
            m
        });
        out.push((id, neg));
    }
    Ok(out)
}

/// The tokens below one large trie node (a whitespace byte such as `' '`, SentencePiece's
/// `▁`) whose rest runs inside one lexeme from one DFA state (`" total"` inside an identifier
/// from its start), and a trie of the other tokens below the node, each under the bytes after
/// the node's path.
///
/// A mask's walk that pushes the path onto a set and finds, once the set's deferred
/// completions are made, an item before that lexeme in that state allows the first group as
/// a block (each of those tokens only moves the item's DFA state, and the item is viable) and
/// walks the second from there. At a C statement start the `' '` subtree holds 43k allowed
/// tokens, each walked through the whitespace lexeme into an identifier: two thirds of the
/// mask's time.
struct NodeSlice {
    path: Box<[u8]>,
    /// The (lexeme, DFA state) pairs whose item lets the tokens in: look-alike states (a
    /// column, a table and an alias name) share one slice.
    keys: Vec<(u32, u32)>,
    safe: TokenMask,
    count: usize,
    rest: TokTrie,
}

/// Trie nodes that get [`NodeSlice`]s: those holding at least this share of the vocabulary
/// (1/8) whose children all hold less — in practice the space byte of byte-level BPE
/// vocabularies and the three bytes of SentencePiece's `▁`.
const NODE_SHARE: usize = 8;
/// Deepest such node.
const NODE_MAX_DEPTH: usize = 4;
/// Most [`NodeSlice`]s built (each a pass over the node's tokens and a trie of the others).
const MAX_NODE_SLICES: usize = 8;
/// Most (lexeme, state) pairs tried for them.
const MAX_NODE_PAIRS: usize = 16;

/// The paths of the trie nodes that get [`NodeSlice`]s (see [`NODE_SHARE`]).
fn big_nodes(tokens: &[&[u8]], min: usize) -> Vec<Vec<u8>> {
    fn go(tokens: &[&[u8]], path: &mut Vec<u8>, min: usize, out: &mut Vec<Vec<u8>>) {
        let d = path.len();
        let mut count = [0usize; 256];
        for t in tokens {
            if t.len() > d + 1 {
                count[t[d] as usize] += 1;
            }
        }
        let mut deeper = false;
        if d < NODE_MAX_DEPTH {
            for b in 0..=255u8 {
                if count[b as usize] < min {
                    continue;
                }
                deeper = true;
                let below: Vec<&[u8]> =
                    tokens.iter().copied().filter(|t| t.len() > d + 1 && t[d] == b).collect();
                path.push(b);
                go(&below, path, min, out);
                path.pop();
            }
        }
        if !deeper && d > 0 {
            out.push(path.clone());
        }
    }
    let mut out = Vec::new();
    go(tokens, &mut Vec::new(), min.max(1), &mut out);
    out
}

/// The (lexeme, DFA state) pairs that may get slices: the states that start a lexeme (where a
/// statement or an operand begins: an identifier's first character) and those that loop (a
/// non-empty *safe byte set*, see [`crate::automaton::ByteDfa::safe_bytes`]: a string body,
/// an identifier's tail) — the states that allow runs of many tokens' bytes. None where
/// slices are off.
fn slice_states(g: &CfgGrammar, config: &CfgConfig) -> Vec<(usize, usize)> {
    let mut budget = 20_000_000usize;
    let mut out = Vec::new();
    if config.slice_min_tokens == usize::MAX {
        return out;
    }
    for (li, l) in g.lexemes.iter().enumerate() {
        for s in 0..l.dfa.state_count() {
            let sid = DfaStateId::from_index(s);
            if sid == l.dfa.start() || l.dfa.safe_bytes(sid, 1024, &mut budget).len() >= 2 {
                out.push((li, s));
            }
        }
    }
    out
}

/// How many of `tokens` begin with each byte.
fn first_byte_counts<'a>(tokens: impl Iterator<Item = &'a [u8]>) -> [usize; 256] {
    let mut counts = [0usize; 256];
    for c in tokens.filter_map(|b| b.first()) {
        counts[*c as usize] += 1;
    }
    counts
}

/// How many tokens a state whose live first bytes are `first` could keep at most, given
/// [`first_byte_counts`]: a state under a threshold needs no pass over them.
fn reach(first: &ByteSet, counts: &[usize; 256]) -> usize {
    first.iter().map(|c| counts[c as usize]).sum()
}

/// [`NodeSlice`]s for the big trie nodes and the [`slice_states`], largest first, each kept
/// where it takes at least 1/16 of the vocabulary.
fn build_node_slices(
    g: &CfgGrammar,
    vocab: &Vocabulary,
    config: &CfgConfig,
    pairs: &[(usize, usize)],
) -> Vec<NodeSlice> {
    if pairs.is_empty() {
        return Vec::new();
    }
    let text: Vec<(TokenId, &[u8])> = vocab.text_tokens().collect();
    let bytes: Vec<&[u8]> = text.iter().map(|(_, b)| *b).collect();
    let n = vocab.n_vocab();
    let min = (n / (2 * NODE_SHARE)).max(config.slice_min_tokens);
    let mut out = Vec::new();
    for path in big_nodes(&bytes, n / NODE_SHARE) {
        let below: Vec<(TokenId, &[u8])> = text
            .iter()
            .filter(|(_, b)| b.len() > path.len() && b.starts_with(&path))
            .map(|&(t, b)| (t, &b[path.len()..]))
            .collect();
        let by_next = first_byte_counts(below.iter().map(|&(_, rest)| rest));
        let mut tried = 0;
        for &(li, s) in pairs {
            let l = &g.lexemes[li];
            // Only states whose first bytes begin enough of the rests get a pass over them.
            if reach(&l.first[s], &by_next) < min {
                continue;
            }
            tried += 1;
            if tried > MAX_NODE_PAIRS {
                break;
            }
            let dfa = &l.dfa;
            let sid = DfaStateId::from_index(s);
            let mut safe = TokenMask::new(n);
            let mut count = 0;
            for &(t, rest) in &below {
                if dfa.run(sid, rest).is_some() {
                    safe.insert(t);
                    count += 1;
                }
            }
            if count < min {
                continue;
            }
            let key = (li as u32, s as u32);
            if let Some(same) = out.iter_mut().find(|x: &&mut NodeSlice| {
                *x.path == *path && x.count == count && x.safe.words() == safe.words()
            }) {
                same.keys.push(key);
                continue;
            }
            let rest = TokTrie::build(below.iter().filter(|(t, _)| !safe.contains(*t)).copied());
            out.push(NodeSlice { path: path.clone().into(), keys: vec![key], safe, count, rest });
        }
    }
    out.sort_by_key(|s| std::cmp::Reverse(s.count));
    out.truncate(MAX_NODE_SLICES);
    out
}

/// The walk's hook for [`NodeSlice`]s: after a push whose path is a slice's, answer the
/// subtree from the first slice whose item the set holds.
struct NodeHook<'s> {
    slices: &'s [NodeSlice],
    /// The first bytes and the longest of the slices' paths (a cheap test per push).
    first: ByteSet,
    max_len: usize,
}

impl<'s> NodeHook<'s> {
    fn new(slices: &'s [NodeSlice]) -> Self {
        let mut first = ByteSet::EMPTY;
        let mut max_len = 0;
        for s in slices {
            first.insert(s.path[0]);
            max_len = max_len.max(s.path.len());
        }
        NodeHook { slices, first, max_len }
    }
}

impl WalkHook<EarleyWalk<'_>> for NodeHook<'_> {
    #[inline]
    fn after_push(&mut self, rec: &mut EarleyWalk<'_>, path: &[u8], mask: &mut TokenMask) -> bool {
        if path.len() > self.max_len || !self.first.contains(path[0]) {
            return false;
        }
        let Some(s) = self
            .slices
            .iter()
            .filter(|s| *s.path == *path)
            .find(|s| s.keys.iter().any(|&(lex, st)| rec.settled_has(lex, st)))
        else {
            return false;
        };
        mask.union_with(&s.safe);
        s.rest.walk_staying(rec, mask);
        true
    }
}

/// The part of a walk's mask that does not depend on what came before the last set, and where
/// the rest lies: kept per *position* — the last set's items with their origins reduced to
/// "this set" or "before it" ([`Chart::position_key`]) — for every engine of a grammar.
///
/// The chart's signature keys the whole future, so a state met again under another context
/// (a member value one object deeper, the next element of an array inside an array) is a
/// miss and walks the trie again. But a token's walk reads that context only where it
/// completes an item that started before the last set (the member, after the value
/// `"abc"`); a walk that records where that happens ([`Chart::set_boundary`],
/// [`PositionHook`]) leaves the other tokens' verdicts valid for any set with the same
/// position. A later mask at that position copies `mask` and walks only the subtrees
/// below `roots` (the tokens that go on past such a completion, `"abc",` and `"abc"}`).
pub(crate) struct PositionMask {
    mask: TokenMask,
    /// Trie nodes (ascending, none below another) below which the walk read the context.
    roots: Vec<u32>,
}

/// A position mask is kept only where the walk below its roots was at most this share (1/4)
/// of the whole walk: elsewhere (after a number, where every token that ends it goes on past
/// the member) a hit would save little.
const POSITION_SHARE: usize = 4;
/// Nor for walks of fewer trie nodes than this: a copy of the mask costs as much.
const POSITION_MIN_NODES: usize = 256;

/// The [`WalkHook`] of a walk whose chart records completions across its boundary: collects
/// the [`PositionMask`] roots, and asks the node slices as [`NodeHook`] does.
struct PositionHook<'s> {
    node: Option<NodeHook<'s>>,
    trie: &'s TokTrie,
    /// The chart's counts after the last byte offered.
    last: (u32, u32),
    /// The last node pushed at each depth (the path to the current node).
    path: Vec<u32>,
    roots: Vec<u32>,
    /// End of the last root's subtree: the nodes before it are below a root already.
    covered_end: usize,
    /// Bytes offered, and those below a root.
    offered: usize,
    below_roots: usize,
    /// A completion across the boundary this hook could not place (deferred completions of
    /// the base set itself, or a refused push that made one): no position mask.
    spoiled: bool,
}

impl<'s> PositionHook<'s> {
    fn new(trie: &'s TokTrie, node: Option<NodeHook<'s>>, counts: (u32, u32)) -> Self {
        PositionHook {
            node,
            trie,
            last: counts,
            path: vec![0; trie.max_depth() + 1],
            roots: Vec::new(),
            covered_end: 0,
            offered: 0,
            below_roots: 0,
            spoiled: false,
        }
    }

    /// Everything below `node` depends on the context (its own token does not: the walk
    /// reached it without reading the context).
    fn record(&mut self, node: usize) {
        while self.roots.last().is_some_and(|&r| r as usize >= node) {
            self.roots.pop();
        }
        let end = node + self.trie.subtree_size(node);
        if end > node + 1 {
            self.roots.push(node as u32);
        }
        self.covered_end = end;
    }

    /// The position mask of this walk's `mask`, if worth keeping.
    fn finish(self, mask: &TokenMask) -> Option<PositionMask> {
        if self.spoiled
            || self.offered < POSITION_MIN_NODES
            || self.below_roots * POSITION_SHARE > self.offered
        {
            return None;
        }
        let mut m = mask.clone();
        for &r in &self.roots {
            for &t in self.trie.tokens_below(r as usize) {
                m.remove(TokenId(t));
            }
        }
        Some(PositionMask { mask: m, roots: self.roots })
    }
}

impl<'w> WalkHook<EarleyWalk<'w>> for PositionHook<'_> {
    #[inline(always)]
    fn attempted(&mut self, rec: &mut EarleyWalk<'w>, node: usize, depth: usize, pushed: bool) {
        self.offered += 1;
        if node < self.covered_end {
            // Whatever this byte completed is below a root already.
            self.below_roots += 1;
            self.last = rec.taint_counts();
        } else {
            let now = rec.taint_counts();
            if now != self.last {
                if now.1 != self.last.1 {
                    // The parent's set made its deferred completions for this byte: every
                    // child from here on sees them (the earlier ones did not: recorded too).
                    match depth {
                        0 => self.spoiled = true,
                        _ => self.record(self.path[depth - 1] as usize),
                    }
                } else if pushed {
                    self.record(node);
                } else {
                    self.spoiled = true;
                }
                self.last = now;
            }
        }
        if pushed {
            self.path[depth] = node as u32;
        }
    }

    #[inline]
    fn after_push(&mut self, rec: &mut EarleyWalk<'w>, path: &[u8], mask: &mut TokenMask) -> bool {
        let Some(hook) = &mut self.node else { return false };
        let took = hook.after_push(rec, path, mask);
        let now = rec.taint_counts();
        if now != self.last {
            // The node slice's check made the set's deferred completions, or its walk of the
            // other tokens read the context: the node is a root (a later mask asks the node
            // slice again there, see `compute`).
            self.last = now;
            let node = self.path[path.len() - 1] as usize;
            if node >= self.covered_end {
                self.record(node);
            }
        }
        took
    }
}

/// Most slices built for the DFA states of a grammar's lexemes (each costs a pass over the
/// vocabulary and a trie of the other tokens).
const MAX_LEX_SLICES: usize = 8;
/// Most [`PureExits`] built over those slices (each a pass over the vocabulary and a trie per
/// exit state).
const MAX_PURE_EXITS: usize = 16;

/// The tokens outside a lexeme-state slice, grouped by the first accepting state on their way
/// through the DFA from `sid`, as the bytes after it (see [`PureExits`]); a token the DFA
/// refuses before any accepting state is in no group. `None` for an accepting `sid`: its one
/// group would be every other token whole, which is the slice's `rest` trie walked from the
/// same set.
fn pure_exits(
    l: &super::lexer::Lexeme,
    li: usize,
    sid: DfaStateId,
    vocab: &Vocabulary,
    safe: &TokenMask,
) -> Option<PureExits> {
    if l.dfa.is_accepting(sid) {
        return None;
    }
    let mut exits: FxHashMap<u32, Vec<(TokenId, &[u8])>> = FxHashMap::default();
    for (t, b) in vocab.text_tokens() {
        if safe.contains(t) {
            continue;
        }
        let mut q = sid;
        for (i, &x) in b.iter().enumerate() {
            let Some(n) = l.dfa.next(q, x) else { break };
            q = n;
            if l.dfa.is_accepting(n) {
                // Not the whole token: that one would have run through (in `safe`).
                exits.entry(n.index() as u32).or_default().push((t, &b[i + 1..]));
                break;
            }
        }
    }
    Some(PureExits {
        lex: li as u32,
        st: sid.index() as u32,
        by_state: exits.into_iter().map(|(q, toks)| (q, TokTrie::build(toks))).collect(),
    })
}

/// Slices for lexeme DFA states: each of the [`slice_states`] (at a C statement start, the
/// identifier's start state keeps 33k tokens) gets the tokens whose bytes all run through
/// the DFA from it. Each of them keeps the item before the lexeme alive, so it is allowed
/// wherever that item is in the set; unlike the byte-set slices of the regex engine this includes tokens
/// with multi-byte characters (run through the DFA, not tested byte by byte).
///
/// Every such state whose first bytes begin enough tokens is counted first (a pass of the
/// vocabulary through the DFA each) and the
/// slices go to the states that keep the most tokens, largest first, states with equal token
/// sets sharing one slice (each with its own [`PureExits`]): built in grammar order, an
/// identifier's many look-alike states used up the budget before a string body's state, whose
/// masks then walked 73k trie nodes (`sql_select.gbnf` after ` '`: 2.8 ms).
fn build_lex_slices(
    g: &CfgGrammar,
    vocab: &Vocabulary,
    config: &CfgConfig,
    states: &[(usize, usize)],
    slices: &mut Vec<Slice>,
) -> Vec<Vec<u32>> {
    let mut out: Vec<Vec<u32>> =
        g.lexemes.iter().map(|l| vec![u32::MAX; l.dfa.state_count()]).collect();
    if config.slice_min_tokens == usize::MAX {
        return out;
    }
    // A lexeme state's walk is cheap already (virtual pushes, see `walk`), and each slice
    // costs a trie of the other tokens at build time: only states that allow a large part of
    // the vocabulary (a string body, an identifier) get one.
    let min_tokens = config.slice_min_tokens.max(vocab.n_vocab() / 4);
    // A state whose live first bytes begin fewer than `min_tokens` tokens cannot keep that
    // many (most keyword states), so it needs no pass.
    let by_first = first_byte_counts(vocab.text_tokens().map(|(_, b)| b));
    // (tokens kept, lexeme, state, the tokens), for every such state over the threshold.
    let mut candidates: Vec<(usize, usize, usize, TokenMask)> = Vec::new();
    for &(li, s) in states {
        let l = &g.lexemes[li];
        if reach(&l.first[s], &by_first) < min_tokens {
            continue;
        }
        let sid = DfaStateId::from_index(s);
        let mut mask = TokenMask::new(vocab.n_vocab());
        let mut count = 0;
        for (t, b) in vocab.text_tokens() {
            if !b.is_empty() && l.dfa.run(sid, b).is_some() {
                mask.insert(t);
                count += 1;
            }
        }
        if count >= min_tokens {
            candidates.push((count, li, s, mask));
        }
    }
    // Largest first; ties in grammar order (deterministic).
    candidates.sort_by(|a, b| b.0.cmp(&a.0).then((a.1, a.2).cmp(&(b.1, b.2))));
    let mut by_mask: FxHashMap<Vec<u32>, u32> = FxHashMap::default();
    let mut exits_built = 0;
    for (count, li, s, mask) in candidates {
        let key = mask.words().to_vec();
        let k = match by_mask.get(&key) {
            Some(&k) => k,
            None if by_mask.len() < MAX_LEX_SLICES => {
                let rest: Vec<(TokenId, &[u8])> =
                    vocab.text_tokens().filter(|(t, _)| !mask.contains(*t)).collect();
                slices.push(Slice {
                    safe: mask,
                    count,
                    rest: TokTrie::build(rest),
                    pure_exits: Vec::new(),
                });
                let k = slices.len() as u32 - 1;
                by_mask.insert(key, k);
                k
            }
            None => continue,
        };
        if exits_built < MAX_PURE_EXITS {
            let slice = &mut slices[k as usize];
            if let Some(x) =
                pure_exits(&g.lexemes[li], li, DfaStateId::from_index(s), vocab, &slice.safe)
            {
                exits_built += 1;
                slice.pure_exits.push(x);
            }
        }
        out[li][s] = k;
    }
    out
}

fn in_class(class: &[(u32, u32)], c: u32) -> bool {
    class
        .binary_search_by(|&(lo, hi)| {
            if hi < c {
                std::cmp::Ordering::Less
            } else if lo > c {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

fn build_slices(
    g: &CfgGrammar,
    vocab: &Vocabulary,
    config: &CfgConfig,
) -> (Vec<Slice>, FxHashMap<u32, usize>) {
    let mut slices = Vec::new();
    let mut by_class: FxHashMap<&[(u32, u32)], Option<usize>> = FxHashMap::default();
    let mut loop_slice = FxHashMap::default();
    if config.slice_min_tokens == usize::MAX {
        return (slices, loop_slice);
    }
    for l in &g.loops {
        let idx = *by_class.entry(&l.class).or_insert_with(|| {
            let mut safe = TokenMask::new(vocab.n_vocab());
            let mut rest: Vec<(TokenId, &[u8])> = Vec::new();
            let mut count = 0;
            for (t, b) in vocab.text_tokens() {
                let ok = !b.is_empty()
                    && std::str::from_utf8(b)
                        .is_ok_and(|s| s.chars().all(|c| in_class(&l.class, c as u32)));
                if ok {
                    safe.insert(t);
                    count += 1;
                } else {
                    rest.push((t, b));
                }
            }
            if count < config.slice_min_tokens {
                return None;
            }
            slices.push(Slice { safe, count, rest: TokTrie::build(rest), pure_exits: Vec::new() });
            Some(slices.len() - 1)
        });
        if let Some(i) = idx {
            loop_slice.insert(l.pos, i);
        }
    }
    (slices, loop_slice)
}

fn items_limit((limit, value): (&'static str, usize)) -> EngineError {
    EngineError::new(EngineErrorKind::LimitExceeded { limit, value })
}

/// The GBNF constraint engine (see the module docs).
pub struct CfgConstraint {
    shared: Arc<Shared>,
    vocab: Vocabulary,
    chart: Mutex<Chart>,
    finished: bool,
    /// Per advanced token: (set count before it, finished before it).
    history: History<(usize, bool)>,
    cache: MaskCache<u64>,
    view: BoolView,
    /// Token-terminal scans of `advance` (reused).
    tok_scratch: Vec<Item>,
}

impl std::fmt::Debug for CfgConstraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CfgConstraint")
            .field("sets", &self.lock().set_count())
            .field("finished", &self.finished)
            .finish()
    }
}

impl CfgConstraint {
    /// Compile `gbnf` and make an engine over `vocab`.
    ///
    /// # Errors
    /// Any compile error (see [`CfgGrammar::from_gbnf`]).
    ///
    /// # Example
    /// ```
    /// use grammask::{CfgConfig, CfgConstraint, ConstraintEngine, Vocabulary};
    /// let vocab = Vocabulary::embedded().unwrap();
    /// let e = CfgConstraint::from_gbnf(&vocab, "root ::= \"yes\" | \"no\"", &CfgConfig::default());
    /// assert!(e.is_ok());
    /// ```
    pub fn from_gbnf(vocab: &Vocabulary, gbnf: &str, config: &CfgConfig) -> Result<Self, CfgError> {
        let g = CfgGrammar::from_gbnf(gbnf, config)?;
        Self::new(vocab, Arc::new(g), config)
    }

    /// An engine over an already compiled grammar. Resolves its token terminals and builds the
    /// vocabulary slices (a pass over the vocabulary per distinct character-class loop).
    ///
    /// # Errors
    /// [`CfgErrorKind::UnknownToken`] or [`CfgErrorKind::TokenOutOfRange`] for a token terminal
    /// the vocabulary does not define.
    pub fn new(
        vocab: &Vocabulary,
        grammar: Arc<CfgGrammar>,
        config: &CfgConfig,
    ) -> Result<Self, CfgError> {
        let tokens = resolve_tokens(&grammar, vocab)?;
        let (mut slices, loop_slice) = build_slices(&grammar, vocab, config);
        let states = slice_states(&grammar, config);
        let lex_slice = build_lex_slices(&grammar, vocab, config, &states, &mut slices);
        let node_slices = build_node_slices(&grammar, vocab, config, &states);
        let shared = Arc::new(Shared {
            grammar,
            slices,
            loop_slice,
            lex_slice,
            node_slices,
            tokens,
            config: config.clone(),
            masks: SharedMasks::default(),
            positions: Mutex::new(FxHashMap::default()),
        });
        let e = Self::with_shared(vocab, shared);
        if config.warm_positions > 0 && !config.warm_time.is_zero() {
            e.warm_positions(config.warm_positions);
        }
        Ok(e)
    }

    pub(crate) fn with_shared(vocab: &Vocabulary, shared: Arc<Shared>) -> Self {
        let chart = Chart::new(
            &shared.grammar,
            shared.config.max_items_per_set,
            shared.config.max_work_per_call,
        );
        let cache = MaskCache::new(shared.config.engine.mask_cache);
        let history = History::new(shared.config.engine.history);
        CfgConstraint {
            shared,
            vocab: vocab.clone(),
            chart: Mutex::new(chart),
            finished: false,
            history,
            cache,
            view: BoolView::default(),
            tok_scratch: Vec::new(),
        }
    }

    /// A fresh engine (new request) sharing this one's compiled grammar and slices.
    pub fn fork(&self) -> Self {
        Self::with_shared(&self.vocab, self.shared.clone())
    }

    /// The compiled part every request shares (for [`crate::CompiledConstraint`]).
    pub(crate) fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// A copy of this engine at its current state (same output so far, own history and cache).
    pub fn fork_at(&self) -> Self {
        let mut e = self.fork();
        e.chart = Mutex::new(self.lock().clone());
        e.finished = self.finished;
        e
    }

    /// The bytes consumed so far (the output, as the chart saw it; special tokens taken by a
    /// token terminal add none).
    pub fn output_bytes(&self) -> Vec<u8> {
        self.lock().bytes()
    }

    /// The compiled grammar.
    pub fn grammar(&self) -> &Arc<CfgGrammar> {
        &self.shared.grammar
    }

    /// Did the last operation (`advance`, `advance_bytes`, `fill_mask`, `allows`) hit
    /// [`CfgConfig::max_items_per_set`]? `fill_mask` and `advance` then return
    /// [`EngineErrorKind::LimitExceeded`]; `advance_bytes` returns the index of the byte whose set
    /// was too big and `allows` returns `false` — this tells those two apart from a refusal. The
    /// state is unchanged either way.
    pub fn overflowed(&self) -> bool {
        self.lock().overflowed()
    }

    /// The signature of the current chart's future (the mask cache key; equal for states
    /// reached differently that allow the same continuations; diagnostics).
    pub fn chart_signature(&self) -> u64 {
        self.lock().signature()
    }

    /// Number of vocabulary slices built for this grammar.
    pub fn slice_count(&self) -> usize {
        self.shared.slices.len()
    }

    /// Compute, ahead of any request, the masks of up to `limit` positions the grammar can
    /// reach (see [`CfgConfig::warm_positions`]), breadth first over bytes from this engine's
    /// state (each position once, from the first chart that reaches it), for at most
    /// [`CfgConfig::warm_time`]: they land in the masks every engine of this grammar shares (by
    /// signature) and in its position masks. Returns how many positions were visited; a
    /// position whose mask exceeds a limit is passed over.
    pub fn warm_positions(&self, limit: usize) -> usize {
        let g = &*self.shared.grammar;
        let mut seen = rustc_hash::FxHashSet::default();
        let mut queue = std::collections::VecDeque::new();
        let start = self.lock().clone();
        seen.insert(start.position_key());
        queue.push_back(start);
        let mut mask = TokenMask::new(self.vocab.n_vocab());
        let mut e = self.fork();
        e.cache = MaskCache::new(0);
        let mut visited = 0;
        let started = std::time::Instant::now();
        let time = self.shared.config.warm_time;
        while let Some(chart) = queue.pop_front() {
            if visited >= limit || started.elapsed() >= time {
                break;
            }
            visited += 1;
            let scan = chart.last_scan();
            for b in 0..=255u8 {
                if !scan.contains(b) {
                    continue;
                }
                // No more charts queued than positions left to visit.
                if visited + queue.len() >= limit {
                    break;
                }
                let mut c = chart.clone();
                c.clear_overflow();
                if c.push(g, b) && c.commit(g) && seen.insert(c.position_key()) {
                    queue.push_back(c);
                }
            }
            e.chart = Mutex::new(chart);
            let _ = e.fill_mask(&mut mask);
        }
        visited
    }

    /// How many position masks the engines of this grammar have kept so far (see
    /// [`CfgConfig::position_masks`]; those found not worth keeping are not counted).
    pub fn position_mask_count(&self) -> usize {
        let map = self.shared.positions.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        map.values().filter(|p| p.is_some()).count()
    }

    /// Number of slices built below large trie nodes (the tokens after a space that run
    /// inside one lexeme, see the module docs).
    pub fn node_slice_count(&self) -> usize {
        self.shared.node_slices.len()
    }

    /// Bytes consumed so far.
    pub fn bytes_consumed(&self) -> usize {
        let c = self.lock();
        c.set_count() - 1 - c.token_steps()
    }

    /// Feed raw bytes (not tokens): `Ok(())` if all are accepted, else the index of the first
    /// refused byte and the state unchanged.
    pub fn advance_bytes(&mut self, bytes: &[u8]) -> Result<(), usize> {
        let g = &*self.shared.grammar;
        let chart = self.chart.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
        chart.clear_overflow();
        let before = chart.set_count();
        for (i, &b) in bytes.iter().enumerate() {
            if !chart.push(g, b) {
                chart.truncate(before);
                return Err(i);
            }
        }
        if !chart.commit(g) {
            chart.truncate(before);
            return Err(bytes.len().saturating_sub(1));
        }
        Ok(())
    }

    /// Compute the mask by walking the trie; [`EngineErrorKind::LimitExceeded`] (and an empty
    /// mask) when some set of the walk would exceed the item limit.
    fn compute(&mut self, mask: &mut TokenMask) -> Result<(), EngineError> {
        mask.clear();
        let shared = &*self.shared;
        let g = &*shared.grammar;
        let chart = self.chart.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
        chart.clear_overflow();
        let mut best: Option<&Slice> = None;
        if !shared.slices.is_empty() {
            for it in chart.last() {
                let sym = g.syms[it.pos as usize];
                let si = if sym & LEX_FLAG == LEX_FLAG {
                    match shared.lex_slice[(sym & !LEX_FLAG) as usize][it.st as usize] {
                        u32::MAX => continue,
                        k => k as usize,
                    }
                } else {
                    match shared.loop_slice.get(&it.pos) {
                        Some(&k) => k,
                        None => continue,
                    }
                };
                let s = &shared.slices[si];
                if best.is_none_or(|b| b.count < s.count) {
                    best = Some(s);
                }
            }
        }
        let mut exits: Option<&PureExits> = None;
        let trie = match best {
            Some(s) => {
                mask.copy_from(&s.safe);
                let pure = if s.pure_exits.is_empty() { None } else { pure_lexeme(g, chart) };
                match s.pure_exits.iter().find(|x| pure == Some((x.lex, x.st))) {
                    Some(x) => {
                        exits = Some(x);
                        None
                    }
                    None => Some(&s.rest),
                }
            }
            None => Some(self.vocab.trie()),
        };
        if let Some(trie) = trie {
            match (shared.config.position_masks > 0).then(|| chart.position_key()) {
                None => Self::walk(shared, g, chart, trie, mask),
                Some(key) => match shared.position(key) {
                    // The mask's context-free part, and a walk below its roots.
                    Some(Some(p)) => {
                        mask.copy_from(&p.mask);
                        let mut walk = EarleyWalk::new(g, chart);
                        if shared.node_slices.is_empty() {
                            trie.walk_below(&mut walk, mask, &p.roots);
                        } else {
                            let mut hook = NodeHook::new(&shared.node_slices);
                            trie.walk_below_hooked(&mut walk, mask, &p.roots, &mut hook);
                        }
                    }
                    // Met before and not worth keeping.
                    Some(None) => Self::walk(shared, g, chart, trie, mask),
                    None => {
                        chart.set_boundary();
                        let node = (!shared.node_slices.is_empty())
                            .then(|| NodeHook::new(&shared.node_slices));
                        let mut hook = PositionHook::new(trie, node, chart.taint_counts());
                        let mut walk = EarleyWalk::new(g, chart);
                        trie.walk_staying_hooked(&mut walk, mask, &mut hook);
                        chart.clear_boundary();
                        if !chart.overflowed() {
                            shared.keep_position(key, hook.finish(mask));
                        }
                    }
                },
            }
        }
        for (q, suffixes) in exits.iter().flat_map(|x| &x.by_state) {
            let before = chart.set_count();
            let mut walk = EarleyWalk::new(g, chart);
            walk.enter_run(*q);
            suffixes.walk_staying(&mut walk, mask);
            chart.truncate(before);
        }
        if chart.overflowed() {
            mask.clear();
            return Err(items_limit(chart.overflow_limit()));
        }
        if !g.tokens.is_empty() {
            for it in chart.last() {
                let Sym::T(t) = decode(g.syms[it.pos as usize]) else { continue };
                let Some(k) = g.token_term(t) else { continue };
                match &shared.tokens[k] {
                    (id, None) => mask.insert(*id),
                    (_, Some(m)) => mask.union_with(m),
                }
            }
        }
        if chart.is_accepting(g) {
            allow_eos(&self.vocab, mask);
        }
        Ok(())
    }

    /// The plain walk of `trie` from the chart's last set (the node slices asked).
    fn walk(
        shared: &Shared,
        g: &CfgGrammar,
        chart: &mut Chart,
        trie: &TokTrie,
        mask: &mut TokenMask,
    ) {
        let mut walk = EarleyWalk::new(g, chart);
        if shared.node_slices.is_empty() {
            trie.walk_staying(&mut walk, mask);
        } else {
            trie.walk_staying_hooked(&mut walk, mask, &mut NodeHook::new(&shared.node_slices));
        }
    }

    /// The chart, for `&self` queries (`allows`, `is_accepting`): `&mut self` paths use
    /// `get_mut` and never lock. The chart is only changed by whole `push`/`truncate` calls,
    /// which do not panic midway, so a poisoned lock is recovered rather than propagated.
    fn lock(&self) -> MutexGuard<'_, Chart> {
        self.chart.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Scan `token` by the token terminals the last set expects, if any takes it (`Ok(false)`
    /// when none does: the caller goes on with the byte path).
    fn token_step(&mut self, token: TokenId) -> Result<bool, EngineError> {
        let shared = &*self.shared;
        let g = &*shared.grammar;
        if g.tokens.is_empty() {
            return Ok(false);
        }
        let chart = self.chart.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
        let vocab = &self.vocab;
        chart.token_scan(g, |set| shared.takes(vocab, set, token), &mut self.tok_scratch);
        if self.tok_scratch.is_empty() {
            return Ok(false);
        }
        chart.clear_overflow();
        let before = chart.set_count();
        if !chart.push_token(g, vocab.token_bytes(token), &self.tok_scratch) {
            return Err(items_limit(chart.overflow_limit()));
        }
        self.history.push((before, self.finished));
        Ok(true)
    }

    /// Does a token terminal of the last set take `token`?
    fn token_allowed(&self, token: TokenId) -> bool {
        let g = &*self.shared.grammar;
        if g.tokens.is_empty() || self.finished {
            return false;
        }
        let mut out = Vec::new();
        self.lock().token_scan(g, |set| self.shared.takes(&self.vocab, set, token), &mut out);
        !out.is_empty()
    }

    fn push_history(&mut self) {
        let sets =
            self.chart.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner).set_count();
        self.history.push((sets, self.finished));
    }
}

impl ConstraintEngine for CfgConstraint {
    fn vocab(&self) -> &Vocabulary {
        &self.vocab
    }

    fn fill_mask(&mut self, mask: &mut TokenMask) -> Result<(), EngineError> {
        if mask_prelude(&self.vocab, mask, self.finished)? {
            return Ok(());
        }
        let sig =
            self.chart.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner).signature();
        if self.cache.lookup(|s| *s == sig, mask) {
            return Ok(());
        }
        // Then the masks every engine of this grammar has computed, keyed by the same 64-bit
        // signature as the engine's own cache (see `earley`: equal signatures, equal futures).
        let cap = self.shared.config.engine.shared_cap();
        if let Some(m) =
            (cap > 0).then(|| self.shared.masks.get(&self.vocab, sig, |s| *s == sig)).flatten()
        {
            mask.copy_from(&m);
            self.cache.insert_arc(sig, m);
            return Ok(());
        }
        self.compute(mask)?;
        if cap > 0 {
            // One copy of the mask for both caches.
            let m = std::sync::Arc::new(mask.clone());
            self.shared.masks.insert_arc(&self.vocab, sig, sig, m.clone(), cap);
            self.cache.insert_arc(sig, m);
        } else {
            self.cache.insert(sig, mask);
        }
        Ok(())
    }

    fn advance(&mut self, token: TokenId) -> Result<(), EngineError> {
        if !self.finished && token.index() < self.vocab.n_vocab() && self.token_step(token)? {
            return Ok(());
        }
        let accepting = self.is_accepting();
        if precheck(&self.vocab, token, self.finished, accepting)? {
            self.push_history();
            self.finished = true;
            return Ok(());
        }
        let g = &*self.shared.grammar;
        let chart = self.chart.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
        chart.clear_overflow();
        let before = chart.set_count();
        for (i, &b) in self.vocab.token_bytes(token).iter().enumerate() {
            if !chart.push(g, b) {
                chart.truncate(before);
                if chart.overflowed() {
                    return Err(items_limit(chart.overflow_limit()));
                }
                return Err(refused(&self.vocab, token, i));
            }
        }
        if !chart.commit(g) {
            chart.truncate(before);
            return Err(items_limit(chart.overflow_limit()));
        }
        // Record the state before the token.
        self.history.push((before, self.finished));
        Ok(())
    }

    fn is_accepting(&self) -> bool {
        !self.finished && self.lock().is_accepting(&self.shared.grammar)
    }

    fn is_finished(&self) -> bool {
        self.finished
    }

    fn can_only_end(&self) -> bool {
        let c = self.lock();
        !self.finished
            && c.is_accepting(&self.shared.grammar)
            && !c.can_continue(&self.shared.grammar)
    }

    fn allows(&self, token: TokenId) -> bool {
        if self.token_allowed(token) {
            return true;
        }
        allows_with(&self.vocab, token, self.finished, self.is_accepting(), |bytes| {
            let g = &*self.shared.grammar;
            let mut chart = self.lock();
            chart.clear_overflow();
            let before = chart.set_count();
            let ok = bytes.iter().all(|&b| chart.push(g, b));
            chart.truncate(before);
            ok
        })
    }

    fn step_mask(&mut self, vocab_size: usize) -> Result<&[bool], EngineError> {
        bool_view(self, vocab_size, |e| &mut e.view)
    }

    fn rollback(&mut self, n: usize) -> Result<(), EngineError> {
        if let Some((sets, finished)) = self.history.rewind(n)? {
            self.chart.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner).truncate(sets);
            self.finished = finished;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::EngineOptions;

    /// The masks all engines of a compiled grammar share: a second request on the same
    /// document adds none and gets the walk's masks; `mask_cache: 0` keeps the shared cache
    /// off too; `shared_masks` bounds it.
    #[test]
    fn shared_masks_serve_later_engines_and_obey_their_options() {
        let vocab = Vocabulary::embedded().expect("vocab");
        let gbnf = include_str!("../../grammars/c_expr.gbnf");
        let doc = "int x = 1;\nwhile (x < n) { x = x + 1; }\nreturn x;";
        let plain = CfgConfig::default().with_engine(EngineOptions::default().with_mask_cache(0));
        let walk = |e: &mut CfgConstraint| {
            let mut reference = CfgConstraint::from_gbnf(&vocab, gbnf, &plain).expect("compiles");
            let mut m = TokenMask::new(vocab.n_vocab());
            let mut r = TokenMask::new(vocab.n_vocab());
            for t in vocab.encode(doc).expect("encodes") {
                e.fill_mask(&mut m).expect("mask");
                reference.fill_mask(&mut r).expect("reference");
                assert_eq!(m, r, "mask differs from the walk");
                e.advance(t).expect("allowed");
                reference.advance(t).expect("allowed");
            }
        };
        let compiled = |engine: EngineOptions| {
            let cfg = CfgConfig::default().with_engine(engine);
            CfgConstraint::from_gbnf(&vocab, gbnf, &cfg).expect("compiles")
        };
        let base = compiled(EngineOptions::default().with_mask_cache(32));
        walk(&mut base.fork());
        let n = base.shared.masks.len();
        assert!(n > 5, "{n} shared masks");
        walk(&mut base.fork());
        assert_eq!(base.shared.masks.len(), n, "the second request's states were all shared");
        let off = compiled(EngineOptions::default().with_mask_cache(0));
        walk(&mut off.fork());
        assert_eq!(off.shared.masks.len(), 0);
        let small = compiled(EngineOptions::default().with_mask_cache(32).with_shared_masks(3));
        walk(&mut small.fork());
        assert!(small.shared.masks.len() <= 3);
    }
}
