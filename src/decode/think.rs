//! Thinking models (seed `000`): routing the `<think>`…`</think>` block to reasoning content,
//! the thinking budget, and the gate that keeps a constraint off while the model thinks.
//!
//! - [`ThinkMarkers`]: the two marker ids, resolved from the tokenizer (Qwen3's `<think>` and
//!   `</think>` are added tokens that are *not* special: they are text `"<think>"`, so a JSON
//!   engine refuses them, which is why the gate exists).
//! - [`ThinkSplitter`]: routes each generated token's bytes to the reasoning or the content
//!   channel, counts reasoning pieces and, with a budget, latches a forced close. Markers are
//!   recognised by token id (the way the model emits them), and appear in neither channel.
//! - [`ThinkGate`]: wraps any engine. While the think block is open `wants_mask()` is false and
//!   every token but EOS is accepted (the model thinks freely; the answer the constraint
//!   describes is still pending, so a stop there would be a `stop` whose content fails the
//!   constraint — the decode loop redraws under the gate's mask instead); the
//!   `</think>` token closes the block and from then on every call goes to the inner engine, so
//!   the answer conforms to the constraint the way a reasoning model answers in JSON. Between
//!   the two, up to `separator` (default 2) whitespace-only tokens are allowed on top of the
//!   inner mask and kept from the inner engine: Qwen3 writes `</think>\n\n{`, and a JSON engine
//!   whose document starts at `{` would otherwise force the model off its habit.
//!
//! # The budget, precisely
//! With `budget = Some(n)`, the think block holds at most `n` reasoning tokens. When the `n`-th
//! reasoning token has been routed, the splitter latches `force_close`; the decode loop then
//! takes the latch ([`ThinkSplitter::take_force_close`]) *before* the next model call, so the
//! token that would have been the `n + 1`-th reasoning token is never sampled (in a pipelined
//! server it would be computed and discarded), and `</think>` is emitted instead, with no
//! logprobs. The latch is taken once, so the injection happens exactly once; a model that closes
//! the block itself within the budget is never forced. Without a budget the only cost is one
//! `Option` check per reasoning token.

use super::error::{DecodeError, DecodeErrorKind};
use crate::engine::{ConstraintEngine, EngineError, EngineErrorKind};
use crate::mask::TokenMask;
use crate::token::TokenId;
use crate::vocab::{TokenKind, Vocabulary};
use std::collections::VecDeque;

/// The think-block marker token ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThinkMarkers {
    /// `<think>`.
    pub open: TokenId,
    /// `</think>`.
    pub close: TokenId,
}

impl ThinkMarkers {
    /// Resolve `<think>` and `</think>` from the vocabulary's tokenizer.
    ///
    /// # Errors
    /// [`DecodeErrorKind::NoThinkMarkers`] when either is not a token.
    pub fn from_vocab(vocab: &Vocabulary) -> Result<ThinkMarkers, DecodeError> {
        match (vocab.token_id("<think>"), vocab.token_id("</think>")) {
            (Some(open), Some(close)) => Ok(ThinkMarkers { open, close }),
            _ => Err(DecodeError::new(DecodeErrorKind::NoThinkMarkers)),
        }
    }
}

/// Which channel a generated token went to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channel {
    /// Inside the think block.
    Reasoning,
    /// Outside the think block.
    Content,
    /// A marker (in neither channel).
    Marker,
}

/// Routes generated pieces between reasoning and content, and enforces the thinking budget.
///
/// # Example
/// ```
/// use grammask::decode::{ThinkMarkers, ThinkSplitter};
/// use grammask::TokenId;
/// let m = ThinkMarkers { open: TokenId(1), close: TokenId(2) };
/// let mut s = ThinkSplitter::new(m, true, Some(2));
/// let (mut reasoning, mut content) = (Vec::new(), Vec::new());
/// s.push(TokenId(7), b"a", &mut reasoning, &mut content);
/// assert!(!s.take_force_close());
/// s.push(TokenId(8), b"b", &mut reasoning, &mut content);
/// assert!(s.take_force_close());  // two reasoning tokens: the next one is `</think>`
/// assert!(!s.take_force_close()); // exactly once
/// ```
#[derive(Clone, Debug)]
pub struct ThinkSplitter {
    markers: ThinkMarkers,
    thinking: bool,
    closed_once: bool,
    pieces: usize,
    budget: Option<usize>,
    force_close: bool,
}

impl ThinkSplitter {
    /// A splitter; `starts_open` when the prompt already opened the think block.
    pub fn new(markers: ThinkMarkers, starts_open: bool, budget: Option<usize>) -> ThinkSplitter {
        let mut s = ThinkSplitter {
            markers,
            thinking: starts_open,
            closed_once: false,
            pieces: 0,
            budget,
            force_close: false,
        };
        s.check_budget();
        s
    }

    /// True while inside the think block.
    pub fn is_thinking(&self) -> bool {
        self.thinking
    }

    /// Reasoning tokens routed so far.
    pub fn reasoning_pieces(&self) -> usize {
        self.pieces
    }

    /// The markers.
    pub fn markers(&self) -> ThinkMarkers {
        self.markers
    }

    #[inline]
    fn check_budget(&mut self) {
        if let Some(b) = self.budget {
            if self.thinking && !self.closed_once && self.pieces >= b {
                self.force_close = true;
            }
        }
    }

    /// Route one generated token (its bytes) and account for the budget.
    pub fn push(
        &mut self,
        token: TokenId,
        bytes: &[u8],
        reasoning: &mut Vec<u8>,
        content: &mut Vec<u8>,
    ) -> Channel {
        if token == self.markers.open && !self.thinking {
            self.thinking = true;
            self.check_budget();
            return Channel::Marker;
        }
        if token == self.markers.close && self.thinking {
            self.thinking = false;
            self.closed_once = true;
            self.force_close = false;
            return Channel::Marker;
        }
        if self.thinking {
            reasoning.extend_from_slice(bytes);
            self.pieces += 1;
            self.check_budget();
            Channel::Reasoning
        } else {
            content.extend_from_slice(bytes);
            Channel::Content
        }
    }

    /// True (once) when the budget is spent and the next token must be `</think>`.
    pub fn take_force_close(&mut self) -> bool {
        std::mem::take(&mut self.force_close)
    }
}

/// Which side of `</think>` a gated token was consumed on (rollback record).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Consumed {
    Thinking,
    Close,
    Separator,
    Inner,
}

/// Wraps an engine so that the constraint applies only after `</think>` (see the module docs).
///
/// Rollback works across the close: the gate keeps its own bounded record (the inner engine's
/// history length by default: 64) and rolls the inner engine back by the number of answer
/// tokens undone.
pub struct ThinkGate<E: ConstraintEngine + ?Sized = dyn ConstraintEngine> {
    inner: Box<E>,
    close: TokenId,
    thinking: bool,
    /// Whitespace-only tokens still allowed before the answer (set at the close).
    separator_left: usize,
    separator: usize,
    /// The whitespace-only tokens of the vocabulary, as a mask.
    blank: TokenMask,
    record: VecDeque<Consumed>,
    history: usize,
    bools: Vec<bool>,
}

impl<E: ConstraintEngine + ?Sized> ThinkGate<E> {
    /// Gate `inner` behind an open think block that `markers.close` ends.
    pub fn new(inner: Box<E>, markers: ThinkMarkers) -> ThinkGate<E> {
        let v = inner.vocab();
        let mut blank = TokenMask::new(v.n_vocab());
        for i in 0..v.n_tokens() {
            let t = TokenId::from_index(i);
            let b = v.token_bytes(t);
            if v.kind(t) == TokenKind::Text
                && !b.is_empty()
                && b.iter().all(u8::is_ascii_whitespace)
            {
                blank.insert(t);
            }
        }
        ThinkGate {
            inner,
            close: markers.close,
            thinking: true,
            separator_left: 0,
            separator: 2,
            blank,
            record: VecDeque::new(),
            history: 64,
            bools: Vec::new(),
        }
    }

    /// Allow up to `n` whitespace-only tokens between `</think>` and the answer (default 2; 0
    /// hands the first token after the close straight to the inner engine).
    pub fn with_separator(mut self, n: usize) -> Self {
        self.separator = n;
        self
    }

    /// True while a whitespace-only token after `</think>` may still bypass the inner engine.
    fn in_separator(&self) -> bool {
        !self.thinking && self.separator_left > 0
    }

    /// Set how many tokens `rollback` can undo (default 64; keep it ≤ the inner engine's).
    pub fn with_history(mut self, n: usize) -> Self {
        self.history = n;
        self
    }

    /// True while the think block is open.
    pub fn is_thinking(&self) -> bool {
        self.thinking
    }

    /// The inner engine.
    pub fn inner(&self) -> &E {
        &self.inner
    }

    fn record(&mut self, c: Consumed) {
        if self.history == 0 {
            return;
        }
        if self.record.len() == self.history {
            self.record.pop_front();
        }
        self.record.push_back(c);
    }

    fn check_id(&self, token: TokenId) -> Result<(), EngineError> {
        let v = self.inner.vocab();
        if token.index() >= v.n_vocab() || v.kind(token) == TokenKind::Padding {
            return Err(EngineError::new(EngineErrorKind::OutOfRange {
                token,
                n_vocab: v.n_vocab(),
            }));
        }
        if v.is_eos(token) {
            // The constraint's answer has not started: EOS cannot end the output here.
            return Err(EngineError::new(EngineErrorKind::EosNotAllowed { token }));
        }
        Ok(())
    }
}

impl<E: ConstraintEngine + ?Sized> ConstraintEngine for ThinkGate<E> {
    fn vocab(&self) -> &Vocabulary {
        self.inner.vocab()
    }

    fn wants_mask(&self) -> bool {
        !self.thinking && self.inner.wants_mask()
    }

    fn fill_mask(&mut self, mask: &mut TokenMask) -> Result<(), EngineError> {
        if !self.thinking {
            self.inner.fill_mask(mask)?;
            if self.in_separator() {
                mask.union_with(&self.blank);
            }
            return Ok(());
        }
        let v = self.inner.vocab();
        crate::engine::check_mask_len(v, mask.len())?;
        mask.set_all();
        for i in v.n_tokens()..v.n_vocab() {
            mask.remove(TokenId::from_index(i));
        }
        for &e in v.eos_ids() {
            mask.remove(e);
        }
        Ok(())
    }

    fn advance(&mut self, token: TokenId) -> Result<(), EngineError> {
        if !self.thinking {
            if self.in_separator() && self.blank.contains(token) {
                self.separator_left -= 1;
                self.record(Consumed::Separator);
                return Ok(());
            }
            self.inner.advance(token)?;
            self.separator_left = 0;
            self.record(Consumed::Inner);
            return Ok(());
        }
        self.check_id(token)?;
        if token == self.close {
            self.thinking = false;
            self.separator_left = self.separator;
            self.record(Consumed::Close);
        } else {
            self.record(Consumed::Thinking);
        }
        Ok(())
    }

    fn is_accepting(&self) -> bool {
        !self.thinking && self.inner.is_accepting()
    }

    fn is_finished(&self) -> bool {
        !self.thinking && self.inner.is_finished()
    }

    fn can_only_end(&self) -> bool {
        !self.thinking && self.inner.can_only_end()
    }

    fn allows(&self, token: TokenId) -> bool {
        if self.thinking {
            self.check_id(token).is_ok()
        } else {
            (self.in_separator() && self.blank.contains(token)) || self.inner.allows(token)
        }
    }

    fn step_mask(&mut self, vocab_size: usize) -> Result<&[bool], EngineError> {
        if !self.thinking && !self.in_separator() {
            return self.inner.step_mask(vocab_size);
        }
        let mut m = TokenMask::new(vocab_size);
        self.fill_mask(&mut m)?;
        self.bools.resize(vocab_size, false);
        m.write_bools(&mut self.bools);
        Ok(&self.bools)
    }

    fn rollback(&mut self, n: usize) -> Result<(), EngineError> {
        if n > self.record.len() {
            return Err(EngineError::new(EngineErrorKind::RollbackTooFar {
                requested: n,
                available: self.record.len(),
            }));
        }
        let start = self.record.len() - n;
        let inner_n = self.record.range(start..).filter(|&&c| c == Consumed::Inner).count();
        self.inner.rollback(inner_n)?;
        for _ in 0..n {
            match self.record.pop_back().expect("checked length") {
                Consumed::Close => self.thinking = true,
                Consumed::Thinking | Consumed::Separator | Consumed::Inner => {}
            }
        }
        // The separator allowance left: full after the close minus the separator tokens since,
        // unless an answer token followed (then none).
        self.separator_left = 0;
        if !self.thinking {
            let mut seps = 0;
            for c in self.record.iter().rev() {
                match c {
                    Consumed::Separator => seps += 1,
                    Consumed::Close => {
                        self.separator_left = self.separator.saturating_sub(seps);
                        break;
                    }
                    _ => break,
                }
            }
        }
        Ok(())
    }

    fn forced_bytes(&self, out: &mut Vec<u8>) {
        out.clear();
        if !self.thinking && !self.in_separator() {
            self.inner.forced_bytes(out);
        }
    }
}
