//! The regex constraint: the output must fully match a regular expression (outlines-style).
//!
//! [`RegexConstraint`] runs [`RegexGrammar`], a [`ByteDfa`] with only live states, through a
//! [`CopyStateEngine`]: the per-request state is one `u32`, EOS is allowed exactly at accepting
//! states, and `rollback` restores earlier states from a bounded history. A mask is a cache hit
//! (by DFA state), or a precomputed slice (tokens made only of the state's safe bytes) plus
//! a pruned trie walk over the other tokens, or a full pruned trie walk.
//!
//! # Supported syntax
//! Everything `regex-syntax` 0.8 parses (Rust `regex` syntax: classes, Unicode properties,
//! repetitions with bounds, non-capturing groups, flags), matched as a whole against the output
//! bytes. Not supported: Unicode word boundaries `\b`/`\B` (refused with a typed error), back-
//! references and look-around (not regular; refused as syntax errors by the parser).
//!
//! # Size limits and the lazy fallback
//! [`RegexConfig::dfa`] bounds the NFA, the determinisation and the number of live DFA states;
//! [`RegexConfig::dense_max_memory`] (1 MiB) holds the dense attempt to what builds in well
//! under a second. A pattern whose dense DFA would exceed them (`(a|b)*a(a|b){20}`: 2²¹ states) is determinised
//! lazily instead ([`LazyDfa`]): states are built when a step first needs them, each request has
//! its own cache bounded by [`RegexConfig::lazy_max_memory`], and dead ends are found exactly
//! from the NFA's live states, so masks stay exact. A step that would grow the cache past the
//! bound makes `fill_mask` / `advance` return
//! [`EngineErrorKind::LimitExceeded`] (state unchanged);
//! states are never evicted, since they are the per-request `Copy` state that rollback restores.
//! The fallback needs a pattern without look-around; a too-big pattern with it, or an NFA over
//! the limit, is refused with [`RegexErrorKind::TooBig`]
//! or `Unsupported`. Lazy states get no vocabulary slices (they are not known at build time).
//!
//! # Example
//! ```
//! use grammask::{ConstraintEngine, RegexConfig, RegexConstraint, TokenMask, Vocabulary};
//! let vocab = Vocabulary::embedded().unwrap();
//! let mut engine = RegexConstraint::new(&vocab, r"\d{3}-\d{4}", &RegexConfig::default()).unwrap();
//! let mut mask = TokenMask::new(vocab.n_vocab());
//! for t in vocab.encode("555-1234").unwrap() {
//!     engine.fill_mask(&mut mask).unwrap();
//!     assert!(mask.contains(t));
//!     engine.advance(t).unwrap();
//! }
//! assert!(engine.can_only_end());
//! ```

use crate::automaton::lazy::LazyCache;
use crate::automaton::{ByteDfa, DfaConfig, DfaStateId, LazyDfa, RegexError, RegexErrorKind};
use crate::bytes::ByteSet;
use crate::engine::mask_cache::MaskCache;
use crate::engine::{
    allow_eos, bool_view, check_mask_len, BoolView, ConstraintEngine, EngineError, EngineErrorKind,
};
use crate::engine::{CopyGrammar, CopyStateEngine, EngineOptions};
use crate::mask::TokenMask;
use crate::recognizer::{ByteLogic, CopyStack};
use crate::token::TokenId;
use crate::vocab::{TokTrie, TokenKind, Vocabulary};
use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::sync::Arc;

/// Options of the regex constraint.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RegexConfig {
    /// Size limits of the compiled DFA.
    pub dfa: DfaConfig,
    /// Engine limits (rollback history, mask cache). The default keeps 32 masks: regex DFAs
    /// revisit few states, so many steps are cache hits.
    pub engine: EngineOptions,
    /// Build a slice for a safe byte set only if it covers at least this many tokens
    /// (default 1,000; `usize::MAX` disables slices).
    pub slice_min_tokens: usize,
    /// Most distinct slices per regex (default 16; each costs a vocabulary pass at build time
    /// and a bitset plus a partial trie in memory).
    pub max_slices: usize,
    /// Memory for the lazily built states of one request when the dense DFA is over the limits
    /// of [`RegexConfig::dfa`] (default 64 MiB; 0 disables the lazy fallback, so such patterns
    /// are refused with `TooBig`). See the module docs.
    pub lazy_max_memory: usize,
    /// Memory the dense determiniser may fill before a pattern goes to the lazy fallback
    /// (default 1 MiB, and never more than `dfa.max_memory`; unused when `lazy_max_memory` is
    /// 0, where the dense DFA gets all of `dfa.max_memory`). Determinisation time grows with
    /// it, about 50–80 ms per MiB in a release build on patterns of many `.`/`\w` repetitions, so this bounds the
    /// compile time of hostile patterns; a dense DFA is worth more than a lazy one only while
    /// it is small enough to build quickly.
    pub dense_max_memory: usize,
}

impl Default for RegexConfig {
    fn default() -> Self {
        RegexConfig {
            dfa: DfaConfig::default(),
            engine: EngineOptions::default().with_mask_cache(32),
            slice_min_tokens: 1_000,
            max_slices: 16,
            lazy_max_memory: 64 << 20,
            dense_max_memory: 1 << 20,
        }
    }
}

builder!(RegexConfig {
    /// Size limits of the compiled DFA.
    with_dfa => dfa: DfaConfig,
    /// Engine limits (default: history 64, 32 cached masks).
    with_engine => engine: EngineOptions,
    /// Least tokens a slice must cover to be built (default 1,000; `usize::MAX`: none).
    with_slice_min_tokens => slice_min_tokens: usize,
    /// Most distinct slices per regex (default 16).
    with_max_slices => max_slices: usize,
    /// Memory of the lazy fallback per request (default 64 MiB; 0 disables it).
    with_lazy_max_memory => lazy_max_memory: usize,
    /// Memory of the dense attempt before the lazy fallback (default 1 MiB).
    with_dense_max_memory => dense_max_memory: usize,
});

/// A compiled regex as a [`CopyGrammar`]: a dense [`ByteDfa`], or a [`LazyDfa`] when the dense
/// one is over the limits (see the module docs).
#[derive(Debug)]
pub struct RegexGrammar {
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Dense(ByteDfa),
    Lazy(LazyDfa),
}

impl Clone for RegexGrammar {
    /// A lazy grammar's clone has an empty cache of its own (its state ids are its own).
    fn clone(&self) -> Self {
        match &self.kind {
            Kind::Dense(d) => RegexGrammar { kind: Kind::Dense(d.clone()) },
            Kind::Lazy(l) => RegexGrammar { kind: Kind::Lazy(l.fresh()) },
        }
    }
}

impl RegexGrammar {
    /// Compile `pattern` to a dense DFA (no lazy fallback: over the limits is `TooBig`).
    ///
    /// # Errors
    /// See [`ByteDfa::from_regex`].
    pub fn new(pattern: &str, config: &DfaConfig) -> Result<RegexGrammar, RegexError> {
        Ok(RegexGrammar { kind: Kind::Dense(ByteDfa::from_regex(pattern, config)?) })
    }

    /// Compile `pattern` to a dense DFA, or to a [`LazyDfa`] when the dense one exceeds
    /// `config.dfa` or [`RegexConfig::dense_max_memory`] and [`RegexConfig::lazy_max_memory`]
    /// is not 0.
    ///
    /// # Errors
    /// See [`ByteDfa::from_regex`]; past the limits, those of [`LazyDfa::from_hir`].
    ///
    /// # Example
    /// ```
    /// use grammask::{RegexConfig, regex::RegexGrammar};
    /// let mut config = RegexConfig::default();
    /// config.dfa.max_memory = 1 << 20;
    /// let g = RegexGrammar::with_config("(a|b)*a(a|b){20}", &config).unwrap();
    /// assert!(g.is_lazy());
    /// ```
    pub fn with_config(pattern: &str, config: &RegexConfig) -> Result<RegexGrammar, RegexError> {
        let hir = crate::automaton::parse_pattern(pattern, &config.dfa)?;
        if config.lazy_max_memory == 0 {
            // No fallback: the dense DFA may use all of `config.dfa`.
            return Ok(RegexGrammar { kind: Kind::Dense(ByteDfa::from_hir(&hir, &config.dfa)?) });
        }
        match ByteDfa::from_hir_budgeted(&hir, &config.dfa, config.dense_max_memory) {
            Err(e) if matches!(e.kind(), RegexErrorKind::TooBig { .. }) => {
                let hir = strip_outer_anchors(hir);
                let lazy =
                    LazyDfa::from_hir(&hir, &config.dfa, config.lazy_max_memory).map_err(|l| {
                        match l.kind() {
                            RegexErrorKind::Unsupported { message } => {
                                RegexError::new(RegexErrorKind::TooBig {
                                    message: format!("{e}; no lazy fallback: {message}"),
                                })
                            }
                            _ => l,
                        }
                    })?;
                Ok(RegexGrammar { kind: Kind::Lazy(lazy) })
            }
            r => Ok(RegexGrammar { kind: Kind::Dense(r?) }),
        }
    }

    /// The dense DFA (`None` for a lazy grammar).
    pub fn dfa(&self) -> Option<&ByteDfa> {
        match &self.kind {
            Kind::Dense(d) => Some(d),
            Kind::Lazy(_) => None,
        }
    }

    /// The lazy DFA (`None` for a dense grammar).
    pub fn lazy(&self) -> Option<&LazyDfa> {
        match &self.kind {
            Kind::Dense(_) => None,
            Kind::Lazy(l) => Some(l),
        }
    }

    /// Is this the lazy fallback?
    pub fn is_lazy(&self) -> bool {
        matches!(self.kind, Kind::Lazy(_))
    }

    /// The grammar a new request uses: this one when dense (immutable, shared), a copy with an
    /// empty cache when lazy.
    fn for_request(self: &Arc<Self>) -> Arc<Self> {
        match &self.kind {
            Kind::Dense(_) => self.clone(),
            Kind::Lazy(l) => Arc::new(RegexGrammar { kind: Kind::Lazy(l.fresh()) }),
        }
    }
}

impl ByteLogic for RegexGrammar {
    type State = DfaStateId;
    #[inline(always)]
    fn step(&self, state: &DfaStateId, byte: u8) -> Option<DfaStateId> {
        match &self.kind {
            Kind::Dense(d) => d.next(*state, byte),
            Kind::Lazy(l) => l.next(*state, byte),
        }
    }
}

impl CopyGrammar for RegexGrammar {
    fn initial(&self) -> DfaStateId {
        match &self.kind {
            Kind::Dense(d) => d.start(),
            Kind::Lazy(l) => l.start(),
        }
    }
    fn is_accepting(&self, s: &DfaStateId) -> bool {
        match &self.kind {
            Kind::Dense(d) => d.is_accepting(*s),
            Kind::Lazy(l) => l.is_accepting(*s),
        }
    }
    fn can_continue(&self, s: &DfaStateId) -> bool {
        match &self.kind {
            Kind::Dense(d) => d.can_continue(*s),
            Kind::Lazy(l) => l.can_continue(*s),
        }
    }
}

/// `^…$` around a whole pattern changes nothing under full-match semantics; the lazy DFA takes
/// no look-around, so a leading `^`/`\A` and a trailing `$`/`\z` of the top-level sequence are
/// dropped (anchors anywhere else stay, and make the fallback refuse the pattern).
fn strip_outer_anchors(hir: regex_syntax::hir::Hir) -> regex_syntax::hir::Hir {
    use regex_syntax::hir::{HirKind, Look};
    let is = |h: &regex_syntax::hir::Hir, l: Look| matches!(h.kind(), HirKind::Look(x) if *x == l);
    match hir.kind() {
        HirKind::Concat(subs) => {
            let mut subs = subs.clone();
            if subs.first().is_some_and(|h| is(h, Look::Start)) {
                subs.remove(0);
            }
            if subs.last().is_some_and(|h| is(h, Look::End)) {
                subs.pop();
            }
            regex_syntax::hir::Hir::concat(subs)
        }
        _ => hir,
    }
}

/// The dense DFA as the trie walk's step function (no dispatch per byte).
struct DenseLogic<'a>(&'a ByteDfa);

impl ByteLogic for DenseLogic<'_> {
    type State = DfaStateId;
    #[inline(always)]
    fn step(&self, state: &DfaStateId, byte: u8) -> Option<DfaStateId> {
        self.0.next(*state, byte)
    }
}

/// The lazy DFA with its cache locked once for a whole trie walk.
struct LazyLogic<'a> {
    dfa: &'a LazyDfa,
    cache: RefCell<&'a mut LazyCache>,
}

impl ByteLogic for LazyLogic<'_> {
    type State = DfaStateId;
    #[inline(always)]
    fn step(&self, state: &DfaStateId, byte: u8) -> Option<DfaStateId> {
        self.cache.borrow_mut().next(self.dfa, *state, byte)
    }
}

/// Tokens made only of a state's safe bytes (see [`ByteDfa::safe_bytes`]), and the trie of the
/// rest.
struct Slice {
    safe: TokenMask,
    rest: TokTrie,
}

pub(crate) struct Shared {
    grammar: Arc<RegexGrammar>,
    slices: Vec<Slice>,
    /// Per DFA state: index of its slice, or `u32::MAX` (empty for a lazy grammar).
    state_slice: Vec<u32>,
    config: RegexConfig,
}

impl Shared {
    /// The compiled grammar.
    pub(crate) fn grammar(&self) -> &Arc<RegexGrammar> {
        &self.grammar
    }
}

fn build_shared(grammar: Arc<RegexGrammar>, vocab: &Vocabulary, config: &RegexConfig) -> Shared {
    let mut slices = Vec::new();
    let Some(dfa) = grammar.dfa() else {
        // Lazy states are not known at build time: no slices.
        return Shared { grammar, slices, state_slice: Vec::new(), config: config.clone() };
    };
    let mut state_slice = vec![u32::MAX; dfa.state_count()];
    if config.slice_min_tokens != usize::MAX {
        let mut by_set: FxHashMap<ByteSet, u32> = FxHashMap::default();
        // About 20M table reads (tens of milliseconds) at most for the whole analysis.
        let mut budget = 20_000_000usize;
        for (i, slot) in state_slice.iter_mut().enumerate() {
            let set = dfa.safe_bytes(DfaStateId::from_index(i), 1024, &mut budget);
            if set.is_empty() {
                continue;
            }
            if let Some(&k) = by_set.get(&set) {
                *slot = k;
                continue;
            }
            if by_set.len() >= config.max_slices {
                continue;
            }
            let mut safe = TokenMask::new(vocab.n_vocab());
            let mut rest: Vec<(TokenId, &[u8])> = Vec::new();
            let mut count = 0;
            for t in 0..vocab.n_tokens() {
                let t = TokenId::from_index(t);
                if vocab.kind(t) != TokenKind::Text {
                    continue;
                }
                let b = vocab.token_bytes(t);
                if !b.is_empty() && b.iter().all(|&x| set.contains(x)) {
                    safe.insert(t);
                    count += 1;
                } else {
                    rest.push((t, b));
                }
            }
            let k = if count >= config.slice_min_tokens {
                slices.push(Slice { safe, rest: TokTrie::build(rest) });
                slices.len() as u32 - 1
            } else {
                u32::MAX
            };
            by_set.insert(set, k);
            *slot = k;
        }
    }
    Shared { grammar, slices, state_slice, config: config.clone() }
}

/// The regex engine: a [`CopyStateEngine`] over [`RegexGrammar`] for state, `advance`, EOS and
/// `rollback`, with its own mask path — a state whose *safe bytes* (every string over them runs
/// through the DFA from it, e.g. `[a-z0-9._%+-]` inside an e-mail local part) cover many tokens
/// allows those tokens as a precomputed block and walks only the others (llguidance's "slices",
/// derived here from the DFA itself).
pub struct RegexConstraint {
    inner: CopyStateEngine<RegexGrammar>,
    shared: Arc<Shared>,
    cache: MaskCache<DfaStateId>,
    stack: Vec<DfaStateId>,
    view: BoolView,
}

impl std::fmt::Debug for RegexConstraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegexConstraint").field("state", self.inner.state()).finish()
    }
}

impl RegexConstraint {
    /// A regex engine over `vocab` for `pattern`.
    ///
    /// # Errors
    /// See [`RegexGrammar::with_config`].
    pub fn new(
        vocab: &Vocabulary,
        pattern: &str,
        config: &RegexConfig,
    ) -> Result<Self, RegexError> {
        Ok(Self::from_grammar(Arc::new(RegexGrammar::with_config(pattern, config)?), vocab, config))
    }

    /// An engine over an already compiled regex. Builds the vocabulary slices (one pass over
    /// the vocabulary per distinct self-loop byte set); use [`RegexConstraint::fork`] for more
    /// requests.
    pub fn from_grammar(
        grammar: Arc<RegexGrammar>,
        vocab: &Vocabulary,
        config: &RegexConfig,
    ) -> Self {
        let shared = Arc::new(build_shared(grammar, vocab, config));
        Self::with_shared(vocab, shared)
    }

    pub(crate) fn with_shared(vocab: &Vocabulary, shared: Arc<Shared>) -> Self {
        let cache = MaskCache::new(shared.config.engine.mask_cache);
        RegexConstraint {
            inner: CopyStateEngine::with_grammar(
                shared.grammar.for_request(),
                vocab,
                shared.config.engine.clone(),
            ),
            shared,
            cache,
            stack: Vec::new(),
            view: BoolView::default(),
        }
    }

    /// A fresh engine (new request) sharing the compiled regex and its slices.
    pub fn fork(&self) -> Self {
        Self::with_shared(self.inner.vocab(), self.shared.clone())
    }

    /// The compiled part every request shares (for [`crate::CompiledConstraint`]).
    pub(crate) fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// The current DFA state.
    pub fn state(&self) -> &DfaStateId {
        self.inner.state()
    }

    /// The compiled regex this request runs (for a lazy grammar, with this request's cache:
    /// [`RegexConstraint::state`] is one of its states).
    pub fn grammar(&self) -> &Arc<RegexGrammar> {
        self.inner.grammar()
    }

    /// Number of vocabulary slices built.
    pub fn slice_count(&self) -> usize {
        self.shared.slices.len()
    }

    /// Feed raw bytes (not tokens); see [`CopyStateEngine::advance_bytes`].
    ///
    /// # Errors
    /// The index of the first refused byte (the state is then unchanged).
    pub fn advance_bytes(&mut self, bytes: &[u8]) -> Result<(), usize> {
        self.inner.advance_bytes(bytes)
    }

    fn compute(&mut self, mask: &mut TokenMask) -> Result<(), EngineError> {
        mask.clear();
        let state = *self.inner.state();
        let g = &**self.inner.grammar();
        let vocab = self.inner.vocab();
        match &g.kind {
            Kind::Dense(dfa) => {
                let k = self.shared.state_slice.get(state.index()).copied().unwrap_or(u32::MAX);
                let trie = if k != u32::MAX {
                    let s = &self.shared.slices[k as usize];
                    mask.copy_from(&s.safe);
                    &s.rest
                } else {
                    vocab.trie()
                };
                let logic = DenseLogic(dfa);
                let mut rec = CopyStack::new(&logic, state, &mut self.stack, trie.max_depth());
                trie.walk(&mut rec, mask);
                if dfa.is_accepting(state) {
                    allow_eos(vocab, mask);
                }
            }
            Kind::Lazy(lazy) => {
                let mut cache = lazy.lock();
                let accepting = cache.is_accepting(state);
                let logic = LazyLogic { dfa: lazy, cache: RefCell::new(&mut *cache) };
                let trie = vocab.trie();
                let mut rec = CopyStack::new(&logic, state, &mut self.stack, trie.max_depth());
                trie.walk(&mut rec, mask);
                if cache.overflowed() {
                    mask.clear();
                    return Err(lazy_limit(lazy));
                }
                if accepting {
                    allow_eos(vocab, mask);
                }
            }
        }
        Ok(())
    }
}

fn lazy_limit(lazy: &LazyDfa) -> EngineError {
    EngineError::new(EngineErrorKind::LimitExceeded {
        limit: "RegexConfig::lazy_max_memory",
        value: lazy.max_memory(),
    })
}

impl ConstraintEngine for RegexConstraint {
    fn vocab(&self) -> &Vocabulary {
        self.inner.vocab()
    }

    fn fill_mask(&mut self, mask: &mut TokenMask) -> Result<(), EngineError> {
        check_mask_len(self.inner.vocab(), mask.len())?;
        if self.inner.is_finished() {
            mask.clear();
            return Ok(());
        }
        let state = *self.inner.state();
        if self.cache.lookup(|s| *s == state, mask) {
            return Ok(());
        }
        if let Some(l) = self.inner.grammar().lazy() {
            l.clear_overflow();
        }
        self.compute(mask)?;
        self.cache.insert(state, mask);
        Ok(())
    }

    fn advance(&mut self, token: TokenId) -> Result<(), EngineError> {
        let g = self.inner.grammar().clone();
        let Some(l) = g.lazy() else { return self.inner.advance(token) };
        l.clear_overflow();
        let r = self.inner.advance(token);
        if r.is_err() && l.overflowed() {
            return Err(lazy_limit(l));
        }
        r
    }

    fn is_accepting(&self) -> bool {
        self.inner.is_accepting()
    }

    fn is_finished(&self) -> bool {
        self.inner.is_finished()
    }

    fn can_only_end(&self) -> bool {
        self.inner.can_only_end()
    }

    fn allows(&self, token: TokenId) -> bool {
        self.inner.allows(token)
    }

    fn step_mask(&mut self, vocab_size: usize) -> Result<&[bool], EngineError> {
        bool_view(self, vocab_size, |e| &mut e.view)
    }

    fn rollback(&mut self, n: usize) -> Result<(), EngineError> {
        self.inner.rollback(n)
    }
}
