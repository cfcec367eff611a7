//! One [`ConstraintEngine`] for every grammar whose whole per-request state is a small `Copy`
//! value: free-form JSON, regex DFAs. The grammar supplies the byte transition function; this
//! module supplies the mask (trie walk, string slices, state-keyed cache), `advance`, EOS,
//! `rollback` and the `&[bool]` view.
//!
//! # Invariants
//! - The compiled grammar is immutable and shared (`Arc<G>`); the engine owns only the current
//!   state, a bounded history of earlier states, a small mask cache and scratch buffers.
//! - A cached mask is keyed by the exact grammar state, so a hit returns exactly what a walk
//!   would (the mask is a function of the state alone).

use super::EngineOptions;
use crate::engine::history::History;
use crate::engine::mask_cache::MaskCache;
use crate::engine::{
    allow_eos, allows_with, bool_view, mask_prelude, precheck, refused, BoolView, ConstraintEngine,
    EngineError,
};
use crate::mask::TokenMask;
use crate::recognizer::{run_bytes, ByteLogic, CopyStack};
use crate::token::TokenId;
use crate::vocab::{TokTrie, Vocabulary};
use std::hash::Hash;
use std::sync::Arc;

/// A grammar with a small `Copy` state that [`CopyStateEngine`] can run.
pub trait CopyGrammar: ByteLogic + Send + Sync
where
    Self::State: Eq + Hash + Send + Sync + std::fmt::Debug,
{
    /// The state before any output.
    fn initial(&self) -> Self::State;
    /// Is the document complete in `state` (EOS allowed)?
    fn is_accepting(&self, state: &Self::State) -> bool;
    /// Can any byte follow `state`? (`false` at a complete document that nothing may extend.)
    fn can_continue(&self, state: &Self::State) -> bool;
    /// Where `state` is in the lexical context the engine's [`TokenSlice`] was built for (the
    /// inside of an unconstrained JSON string at a character boundary, say): `Some(exit)`, with
    /// `exit` the state after the context's closing byte (`None` when it cannot close here).
    /// The engine then takes the slice's `inside` tokens as one block and walks only its
    /// `exits` from `exit`. The default: no state is in a slice's context.
    fn slice_exit(&self, _state: &Self::State) -> Option<Option<Self::State>> {
        None
    }
    /// Which slice of the engine's [`SliceSet`] applies at a state [`CopyGrammar::slice_exit`]
    /// puts in a slice's context (default 0: a grammar with a single slice). States of one
    /// context that differ in what their next bytes may be (inside a `\uXXXX` escape, inside a
    /// multi-byte character) get slices of their own.
    fn slice_index(&self, _state: &Self::State) -> usize {
        0
    }
}

/// The slices of one grammar over one vocabulary, by [`CopyGrammar::slice_index`]: each built
/// on its first use (a pass over the vocabulary) and kept, so only the sub-contexts a document
/// reaches cost anything. Shared by every engine over the vocabulary.
pub struct SliceSet {
    slots: Box<[std::sync::OnceLock<Option<Arc<TokenSlice>>>]>,
    build: SliceBuild,
}

/// How a [`SliceSet`] builds slice `i` over a vocabulary; `None` where index `i` has no
/// slice (the engine then walks the trie at those states).
pub type SliceBuild = Box<dyn Fn(&Vocabulary, usize) -> Option<Arc<TokenSlice>> + Send + Sync>;

impl std::fmt::Debug for SliceSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let built = self.slots.iter().filter(|s| matches!(s.get(), Some(Some(_)))).count();
        f.debug_struct("SliceSet").field("slots", &self.slots.len()).field("built", &built).finish()
    }
}

impl SliceSet {
    /// `n` slices, slice `i` built by `build(vocab, i)` when first asked for.
    pub fn new(n: usize, build: SliceBuild) -> SliceSet {
        SliceSet { slots: (0..n).map(|_| std::sync::OnceLock::new()).collect(), build }
    }

    /// [`SliceSet::new`] with the slices of `built` (index, slice) already in place.
    pub fn with_built(
        n: usize,
        build: SliceBuild,
        built: impl IntoIterator<Item = (usize, Arc<TokenSlice>)>,
    ) -> SliceSet {
        let set = SliceSet::new(n, build);
        for (i, slice) in built {
            if let Some(slot) = set.slots.get(i) {
                let _ = slot.set(Some(slice));
            }
        }
        set
    }

    /// One slice, already built.
    pub fn single(slice: Arc<TokenSlice>) -> SliceSet {
        SliceSet::with_built(1, Box::new(|_, _| None), [(0, slice)])
    }

    /// Slice `i` over `vocab` (the vocabulary the set was made for), built now if it is not
    /// yet; `None` past the set's size or where index `i` has no slice.
    pub fn get(&self, vocab: &Vocabulary, i: usize) -> Option<&Arc<TokenSlice>> {
        self.slots.get(i)?.get_or_init(|| (self.build)(vocab, i)).as_ref()
    }
}

/// A precomputed slice of the vocabulary for one lexical context where most tokens are
/// allowed (the inside of a string): the tokens allowed from every state of the context
/// whatever follows it, and, for the tokens that leave the context and go on, their bytes after
/// the exit, in a trie of their own. A mask there is one bitset copy and a small walk.
#[derive(Debug)]
pub struct TokenSlice {
    /// Tokens allowed from every state of the context, whatever follows it.
    pub inside: TokenMask,
    /// For tokens that close the context and go on: their bytes after the closing byte, each
    /// carrying the ids that end that way. Walked from the state after the closing byte
    /// (shared by the slices whose exits are the same).
    pub exits: Arc<TokTrie>,
}

/// A [`ConstraintEngine`] over a [`CopyGrammar`].
pub struct CopyStateEngine<G: CopyGrammar>
where
    G::State: Eq + Hash + Send + Sync + std::fmt::Debug,
{
    grammar: Arc<G>,
    vocab: Vocabulary,
    state: G::State,
    finished: bool,
    history: History<(G::State, bool)>,
    cache: MaskCache<G::State>,
    stack: Vec<G::State>,
    view: BoolView,
    slices: Option<Arc<SliceSet>>,
}

impl<G: CopyGrammar> CopyStateEngine<G>
where
    G::State: Eq + Hash + Send + Sync + std::fmt::Debug,
{
    /// A fresh engine at the grammar's initial state.
    pub fn with_grammar(grammar: Arc<G>, vocab: &Vocabulary, options: EngineOptions) -> Self {
        let state = grammar.initial();
        let cache = MaskCache::new(options.mask_cache);
        CopyStateEngine {
            grammar,
            vocab: vocab.clone(),
            state,
            finished: false,
            history: History::new(options.history),
            cache,
            stack: Vec::new(),
            view: BoolView::default(),
            slices: None,
        }
    }

    /// Use `slice` at the states where the grammar reports [`CopyGrammar::slice_exit`].
    #[must_use]
    pub fn with_slice(mut self, slice: Arc<TokenSlice>) -> Self {
        self.slices = Some(Arc::new(SliceSet::single(slice)));
        self
    }

    /// Use the slices of `set` (over this engine's vocabulary) at the states where the grammar
    /// reports [`CopyGrammar::slice_exit`], slice [`CopyGrammar::slice_index`] at each.
    #[must_use]
    pub fn with_slices(mut self, set: Arc<SliceSet>) -> Self {
        self.slices = Some(set);
        self
    }

    /// The current grammar state.
    pub fn state(&self) -> &G::State {
        &self.state
    }

    /// The compiled grammar.
    pub fn grammar(&self) -> &Arc<G> {
        &self.grammar
    }

    /// Feed raw bytes (not tokens) from the current state; `Ok(())` and the state advanced if all
    /// are accepted, else the index of the first refused byte and the state unchanged.
    pub fn advance_bytes(&mut self, bytes: &[u8]) -> Result<(), usize> {
        let mut s = self.state;
        for (i, &b) in bytes.iter().enumerate() {
            s = self.grammar.step(&s, b).ok_or(i)?;
        }
        self.state = s;
        Ok(())
    }

    /// Compute the mask for the current state without the cache.
    fn compute(&mut self, mask: &mut TokenMask) {
        mask.clear();
        if self.finished {
            return;
        }
        let in_slice = self.slices.as_ref().zip(self.grammar.slice_exit(&self.state));
        let in_slice = in_slice.and_then(|(set, exit)| {
            Some((set.get(&self.vocab, self.grammar.slice_index(&self.state))?, exit))
        });
        if let Some((slice, exit)) = in_slice {
            // In the slice's context: its context-independent tokens come as one bitset; only
            // tokens that leave the context and go on are walked, from the state after the exit.
            mask.copy_from(&slice.inside);
            if let Some(after) = exit {
                let mut rec =
                    CopyStack::new(&*self.grammar, after, &mut self.stack, slice.exits.max_depth());
                slice.exits.walk(&mut rec, mask);
            }
        } else {
            let trie = self.vocab.trie();
            let mut rec =
                CopyStack::new(&*self.grammar, self.state, &mut self.stack, trie.max_depth());
            trie.walk(&mut rec, mask);
        }
        if self.grammar.is_accepting(&self.state) {
            allow_eos(&self.vocab, mask);
        }
    }

    fn push_history(&mut self) {
        self.history.push((self.state, self.finished));
    }

    /// Undo the last `n` advanced tokens.
    ///
    /// # Errors
    /// [`crate::engine::EngineErrorKind::RollbackTooFar`] when fewer than `n` are in the history; the state is
    /// then unchanged.
    pub fn rollback(&mut self, n: usize) -> Result<(), EngineError> {
        if let Some((s, f)) = self.history.rewind(n)? {
            self.state = s;
            self.finished = f;
        }
        Ok(())
    }
}

impl<G: CopyGrammar> ConstraintEngine for CopyStateEngine<G>
where
    G::State: Eq + Hash + Send + Sync + std::fmt::Debug,
{
    fn vocab(&self) -> &Vocabulary {
        &self.vocab
    }

    fn fill_mask(&mut self, mask: &mut TokenMask) -> Result<(), EngineError> {
        if mask_prelude(&self.vocab, mask, self.finished)? {
            return Ok(());
        }
        let state = self.state;
        if self.cache.lookup(|s| *s == state, mask) {
            return Ok(());
        }
        self.compute(mask);
        self.cache.insert(state, mask);
        Ok(())
    }

    fn advance(&mut self, token: TokenId) -> Result<(), EngineError> {
        let accepting = self.grammar.is_accepting(&self.state);
        if precheck(&self.vocab, token, self.finished, accepting)? {
            self.push_history();
            self.finished = true;
            return Ok(());
        }
        let bytes = self.vocab.token_bytes(token);
        let mut s = self.state;
        for (i, &b) in bytes.iter().enumerate() {
            match self.grammar.step(&s, b) {
                Some(n) => s = n,
                None => return Err(refused(&self.vocab, token, i)),
            }
        }
        self.push_history();
        self.state = s;
        Ok(())
    }

    fn is_accepting(&self) -> bool {
        !self.finished && self.grammar.is_accepting(&self.state)
    }

    fn is_finished(&self) -> bool {
        self.finished
    }

    fn can_only_end(&self) -> bool {
        !self.finished
            && self.grammar.is_accepting(&self.state)
            && !self.grammar.can_continue(&self.state)
    }

    fn allows(&self, token: TokenId) -> bool {
        let accepting = self.grammar.is_accepting(&self.state);
        allows_with(&self.vocab, token, self.finished, accepting, |bytes| {
            run_bytes(&*self.grammar, &self.state, bytes).is_some()
        })
    }

    fn step_mask(&mut self, vocab_size: usize) -> Result<&[bool], EngineError> {
        bool_view(self, vocab_size, |e| &mut e.view)
    }

    fn rollback(&mut self, n: usize) -> Result<(), EngineError> {
        CopyStateEngine::rollback(self, n)
    }

    /// The bytes every completion starts with, at most [`FORCED_BYTES_LIMIT`]: stepped on a
    /// copy of the state while one byte is possible — or, inside a string, while every spelling
    /// allowed is the same character (`src/forced.rs`) — and the document cannot end.
    fn forced_bytes(&self, out: &mut Vec<u8>) {
        out.clear();
        if self.finished {
            return;
        }
        let grammar = &*self.grammar;
        let mut buf = Vec::new();
        let mut rec = CopyStack::new(grammar, self.state, &mut buf, FORCED_BYTES_LIMIT + 8);
        crate::engine::forced::forced_bytes(
            &mut rec,
            |r| grammar.is_accepting(r.current()),
            FORCED_BYTES_LIMIT,
            out,
        );
    }
}

/// The most bytes [`ConstraintEngine::forced_bytes`] reports at once for a [`CopyStateEngine`].
pub const FORCED_BYTES_LIMIT: usize = 256;
