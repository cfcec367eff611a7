//! The constraint-engine contract (seed `000`): what a decode loop asks of any grammar, and what
//! every engine shares — [`EngineOptions`], the bounded undo history, the state-keyed mask cache,
//! forced bytes, and [`CopyStateEngine`], a complete engine for any grammar whose state is one
//! small `Copy` value. Engines (json, regex, schema, cfg) sit above this layer; the vocabulary
//! and the trie below it.
//!
//! Per decode step the loop asks [`ConstraintEngine::wants_mask`]; when it does, it has the engine
//! fill a vocabulary-sized allow-mask, samples a token with it, and tells the engine with
//! [`ConstraintEngine::advance`]. The trait is object-safe so a loop can hold
//! `Option<&mut dyn ConstraintEngine>`.
//!
//! # The contract every engine keeps
//! - A mask allows a token iff the output after it can still be completed to an accepted
//!   document (no dead ends, no false rejections).
//! - EOS ids are allowed exactly at terminal states (document complete). When the document is
//!   complete and nothing can follow, only EOS is allowed.
//! - Special tokens other than EOS and padding ids are never allowed.
//! - `advance` of a refused token, an out-of-range id, a special token mid-document, or anything
//!   after EOS returns an [`EngineError`] and leaves the state exactly as it was.

mod copy;
pub(crate) mod forced;
pub(crate) mod history;
pub(crate) mod mask_cache;
mod options;

pub use copy::{
    CopyGrammar, CopyStateEngine, SliceBuild, SliceSet, TokenSlice, FORCED_BYTES_LIMIT,
};
pub use options::{EngineOptions, Whitespace};

use crate::mask::TokenMask;
use crate::token::TokenId;
use crate::vocab::Vocabulary;
use std::fmt;

/// An error from a running engine (advance, mask, rollback).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineError {
    kind: EngineErrorKind,
}

/// What an engine refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EngineErrorKind {
    /// The grammar does not allow this token here.
    Refused {
        /// The token.
        token: TokenId,
        /// Its bytes, rendered for the message.
        text: String,
        /// How many of its bytes the grammar accepted before refusing.
        accepted_bytes: usize,
    },
    /// The id is not a token of this vocabulary (≥ `n_vocab`, or padding).
    OutOfRange {
        /// The id.
        token: TokenId,
        /// The logits width.
        n_vocab: usize,
    },
    /// A special token (not EOS) in the middle of a document.
    SpecialToken {
        /// The token.
        token: TokenId,
    },
    /// EOS before the document is complete.
    EosNotAllowed {
        /// The EOS token.
        token: TokenId,
    },
    /// Any token after EOS.
    AfterEos {
        /// The token.
        token: TokenId,
    },
    /// A mask buffer whose length is not the vocabulary's logits width.
    MaskLength {
        /// The buffer's length.
        got: usize,
        /// The logits width.
        expected: usize,
    },
    /// `rollback(n)` beyond the recorded history.
    RollbackTooFar {
        /// Tokens asked to undo.
        requested: usize,
        /// Tokens that can be undone.
        available: usize,
    },
    /// Computing the mask or the token's step would exceed a configured resource limit (e.g.
    /// `CfgConfig::max_items_per_set`). The engine's state is unchanged; no mask is produced
    /// rather than a wrong one.
    LimitExceeded {
        /// The configuration field that was hit.
        limit: &'static str,
        /// Its value.
        value: usize,
    },
}

impl EngineError {
    /// A new error of this kind.
    pub fn new(kind: EngineErrorKind) -> Self {
        EngineError { kind }
    }
    /// What went wrong.
    pub fn kind(&self) -> &EngineErrorKind {
        &self.kind
    }
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            EngineErrorKind::Refused { token, text, accepted_bytes } => write!(
                f,
                "token {token} {text:?} is not allowed here (refused after {accepted_bytes} of its bytes)"
            ),
            EngineErrorKind::OutOfRange { token, n_vocab } => {
                write!(f, "token id {token} is out of range (logits width {n_vocab})")
            }
            EngineErrorKind::SpecialToken { token } => {
                write!(f, "special token {token} cannot appear inside the document")
            }
            EngineErrorKind::EosNotAllowed { token } => {
                write!(f, "EOS token {token} before the document is complete")
            }
            EngineErrorKind::AfterEos { token } => {
                write!(f, "token {token} after EOS: the document is finished")
            }
            EngineErrorKind::MaskLength { got, expected } => {
                write!(f, "mask has {got} entries, the vocabulary has {expected}")
            }
            EngineErrorKind::RollbackTooFar { requested, available } => write!(
                f,
                "cannot roll back {requested} tokens: only {available} are in the history"
            ),
            EngineErrorKind::LimitExceeded { limit, value } => write!(
                f,
                "resource limit {limit} = {value} exceeded; state unchanged (raise it in the \
                 config, or with --limit in the CLI: docs/limits.md)"
            ),
        }
    }
}

impl std::error::Error for EngineError {}

/// A per-request constraint over a vocabulary.
///
/// Implementations are stateful (one per request); their compiled grammar is shared.
pub trait ConstraintEngine: Send {
    /// The vocabulary the engine masks over.
    fn vocab(&self) -> &Vocabulary;

    /// Whether the decode loop should compute a mask this step. `false` during a warm-up phase
    /// (e.g. while a `<think>` block is open); the loop then samples unconstrained.
    fn wants_mask(&self) -> bool {
        true
    }

    /// Fill `mask` with the tokens allowed now. `mask.len()` must be the logits width.
    ///
    /// # Errors
    /// [`EngineErrorKind::MaskLength`] when the buffer has the wrong length.
    fn fill_mask(&mut self, mask: &mut TokenMask) -> Result<(), EngineError>;

    /// Consume `token`.
    ///
    /// # Errors
    /// A refused token, an out-of-range id, a special token mid-document, EOS before the end,
    /// any token after EOS. The state is unchanged after an error.
    fn advance(&mut self, token: TokenId) -> Result<(), EngineError>;

    /// Is the document complete here (EOS allowed)?
    fn is_accepting(&self) -> bool;

    /// Has EOS been consumed?
    fn is_finished(&self) -> bool;

    /// Is the document complete with nothing but EOS able to follow?
    fn can_only_end(&self) -> bool;

    /// Whether `token` is allowed now, without computing a whole mask (the sample-then-check
    /// fast path). Must agree with [`ConstraintEngine::fill_mask`].
    fn allows(&self, token: TokenId) -> bool;

    /// The seed's view: compute the mask and return it as one `bool` per token.
    ///
    /// # Errors
    /// [`EngineErrorKind::MaskLength`] when `vocab_size` is not the logits width.
    fn step_mask(&mut self, vocab_size: usize) -> Result<&[bool], EngineError>;

    /// Undo the last `n` advanced tokens exactly: afterwards the engine is in the state it was in
    /// before them (same masks). The history is bounded (engine option); EOS counts as a token.
    ///
    /// # Errors
    /// [`EngineErrorKind::RollbackTooFar`] when the history holds fewer than `n` tokens; the
    /// state is then unchanged.
    fn rollback(&mut self, n: usize) -> Result<(), EngineError>;

    /// The bytes the grammar forces next: write into `out` (cleared first) the longest byte
    /// string that every completion of the current output starts with, stopping where the
    /// document could also end (EOS allowed) or where two bytes are possible. Fast-forward
    /// ([`crate::decode::FastForward`]) appends their tokens without running the model.
    ///
    /// The default writes nothing: an empty result means "none known", not "none forced", so an
    /// engine that does not implement it is merely never fast-forwarded.
    fn forced_bytes(&self, out: &mut Vec<u8>) {
        out.clear();
    }
}

/// Shared checks every engine runs before looking at a token's bytes: out of range, padding,
/// after EOS, special tokens and EOS placement. Returns `Ok(true)` for an EOS the engine should
/// accept (document complete), `Ok(false)` for a text token to run through the grammar.
pub(crate) fn precheck(
    vocab: &Vocabulary,
    token: TokenId,
    finished: bool,
    accepting: bool,
) -> Result<bool, EngineError> {
    use crate::vocab::TokenKind;
    if token.index() >= vocab.n_vocab() || vocab.kind(token) == TokenKind::Padding {
        return Err(EngineError::new(EngineErrorKind::OutOfRange {
            token,
            n_vocab: vocab.n_vocab(),
        }));
    }
    if finished {
        return Err(EngineError::new(EngineErrorKind::AfterEos { token }));
    }
    if vocab.is_eos(token) {
        return if accepting {
            Ok(true)
        } else {
            Err(EngineError::new(EngineErrorKind::EosNotAllowed { token }))
        };
    }
    if vocab.kind(token) == TokenKind::Special || vocab.token_bytes(token).is_empty() {
        return Err(EngineError::new(EngineErrorKind::SpecialToken { token }));
    }
    Ok(false)
}

/// The default [`ConstraintEngine::allows`]: the shared [`precheck`], then `run` on the token's
/// bytes (a text token) — which should push them on a copy of the state and say whether all
/// were accepted. EOS follows `accepting`; anything the precheck refuses is not allowed.
pub(crate) fn allows_with(
    vocab: &Vocabulary,
    token: TokenId,
    finished: bool,
    accepting: bool,
    run: impl FnOnce(&[u8]) -> bool,
) -> bool {
    match precheck(vocab, token, finished, accepting) {
        Ok(true) => true,
        Ok(false) => run(vocab.token_bytes(token)),
        Err(_) => false,
    }
}

/// The default [`ConstraintEngine::step_mask`]: check the width, fill the engine's kept mask
/// (see [`BoolView`], reached through `view`) and return it as one `bool` per token.
pub(crate) fn bool_view<E: ConstraintEngine + ?Sized>(
    engine: &mut E,
    n: usize,
    view: fn(&mut E) -> &mut BoolView,
) -> Result<&[bool], EngineError> {
    check_mask_len(engine.vocab(), n)?;
    let mut m = view(engine).take_mask(n);
    engine.fill_mask(&mut m)?;
    Ok(view(engine).store(m))
}

/// The start every `fill_mask` shares: check the buffer's width, and after EOS clear it.
/// `Ok(true)` when the mask is complete already (the engine is finished).
pub(crate) fn mask_prelude(
    vocab: &Vocabulary,
    mask: &mut TokenMask,
    finished: bool,
) -> Result<bool, EngineError> {
    check_mask_len(vocab, mask.len())?;
    if finished {
        mask.clear();
    }
    Ok(finished)
}

/// The refusal error for a text token, with its bytes rendered.
pub(crate) fn refused(vocab: &Vocabulary, token: TokenId, accepted_bytes: usize) -> EngineError {
    EngineError::new(EngineErrorKind::Refused {
        token,
        text: String::from_utf8_lossy(vocab.token_bytes(token)).into_owned(),
        accepted_bytes,
    })
}

/// Check a caller's mask buffer length.
pub(crate) fn check_mask_len(vocab: &Vocabulary, len: usize) -> Result<(), EngineError> {
    if len != vocab.n_vocab() {
        return Err(EngineError::new(EngineErrorKind::MaskLength {
            got: len,
            expected: vocab.n_vocab(),
        }));
    }
    Ok(())
}

/// Set every EOS id in `mask`.
pub(crate) fn allow_eos(vocab: &Vocabulary, mask: &mut TokenMask) {
    for &e in vocab.eos_ids() {
        mask.insert(e);
    }
}

/// Scratch for the seed's `&[bool]` view of a mask ([`ConstraintEngine::step_mask`]): the mask
/// and the `bool` buffer are kept across steps, so the view allocates nothing once warm.
#[derive(Default)]
pub(crate) struct BoolView {
    scratch: Option<TokenMask>,
    bools: Vec<bool>,
}

impl BoolView {
    /// A mask of `n` tokens to fill (the kept one when it has that width).
    pub(crate) fn take_mask(&mut self, n: usize) -> TokenMask {
        match self.scratch.take() {
            Some(m) if m.len() == n => m,
            _ => TokenMask::new(n),
        }
    }

    /// Keep `mask` for next time and return it as one `bool` per token.
    pub(crate) fn store(&mut self, mask: TokenMask) -> &[bool] {
        self.bools.resize(mask.len(), false);
        mask.write_bools(&mut self.bools);
        self.scratch = Some(mask);
        &self.bools
    }
}
