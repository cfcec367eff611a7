//! Walk one tokenized document through a constraint engine, mask by mask, as a decode loop
//! would, timing every mask: the measurement both harnesses (MaskBench, the JSON Schema Test
//! Suite) are built on.
//!
//! At each token the engine fills a mask (timed: only `fill_mask`), the token must be in it, and
//! then the engine advances by it; after the last token one more mask is filled (timed too) and
//! some EOS id must be in it. The walk also cross-checks the engine against itself: a token the
//! mask allows must be accepted by `advance`, a token it refuses must be refused by `advance`,
//! and the final mask's EOS must agree with `is_accepting`. A disagreement is an engine bug and
//! is reported as such, never folded silently into a verdict.

use crate::engine::{ConstraintEngine, EngineError};
use crate::mask::TokenMask;
use crate::token::TokenId;
use crate::vocab::Vocabulary;
use std::time::Instant;

/// Where a walk stopped, or that it went through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WalkEnd {
    /// Every token was allowed and EOS was allowed at the end: the engine accepts the document.
    Accepted,
    /// The token at `index` was not in the mask.
    RefusedToken {
        /// Position of the refused token in the token sequence.
        index: usize,
        /// The token.
        token: TokenId,
    },
    /// Every token was allowed but EOS was not allowed after the last one.
    RefusedEos,
}

/// The result of [`walk`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Walk {
    /// How the walk ended.
    pub end: WalkEnd,
    /// Engine self-inconsistencies seen on the way (mask vs `advance` vs `is_accepting`).
    pub inconsistencies: Vec<String>,
}

impl Walk {
    /// Did the engine accept the whole document?
    pub fn accepted(&self) -> bool {
        self.end == WalkEnd::Accepted
    }
}

/// Walk `tokens` through `engine` (fresh, at its initial state), appending the duration of every
/// mask computation in nanoseconds to `mask_ns`. `mask` is a reusable buffer of the engine's
/// logits width.
///
/// # Errors
/// Only a harness error from `fill_mask` (a mask buffer of the wrong width); refusals are not
/// errors but [`WalkEnd`]s.
pub fn walk(
    engine: &mut dyn ConstraintEngine,
    tokens: &[TokenId],
    mask: &mut TokenMask,
    mask_ns: &mut Vec<u64>,
) -> Result<Walk, EngineError> {
    let mut inconsistencies = Vec::new();
    for (index, &token) in tokens.iter().enumerate() {
        let t0 = Instant::now();
        engine.fill_mask(mask)?;
        mask_ns.push(t0.elapsed().as_nanos() as u64);
        if !mask.contains(token) {
            if engine.advance(token).is_ok() {
                inconsistencies.push(format!(
                    "token {index} {} is refused by the mask but accepted by advance",
                    describe(engine, token)
                ));
            }
            return Ok(Walk { end: WalkEnd::RefusedToken { index, token }, inconsistencies });
        }
        if let Err(e) = engine.advance(token) {
            inconsistencies.push(format!(
                "token {index} {} is allowed by the mask but advance refuses it: {e}",
                describe(engine, token)
            ));
            return Ok(Walk { end: WalkEnd::RefusedToken { index, token }, inconsistencies });
        }
    }
    let t0 = Instant::now();
    engine.fill_mask(mask)?;
    mask_ns.push(t0.elapsed().as_nanos() as u64);
    let eos_allowed = engine.vocab().eos_ids().iter().any(|&e| mask.contains(e));
    if eos_allowed != engine.is_accepting() {
        inconsistencies.push(format!(
            "at the end the mask {} EOS but is_accepting() is {}",
            if eos_allowed { "allows" } else { "refuses" },
            engine.is_accepting()
        ));
    }
    let end = if eos_allowed { WalkEnd::Accepted } else { WalkEnd::RefusedEos };
    Ok(Walk { end, inconsistencies })
}

fn describe(engine: &dyn ConstraintEngine, token: TokenId) -> String {
    engine.vocab().describe(token)
}

/// Tokenize `text` so that the tokens' bytes spell it exactly, as text tokens
/// ([`Vocabulary::encode_exact`]: the normaliser, dropped bytes and special-token text are
/// all checked, with a per-piece fallback).
///
/// # Errors
/// A message when the tokenizer fails, or cannot spell some character of `text` exactly (e.g.
/// a tokenizer that prepends a space to every text).
pub fn tokenize(vocab: &Vocabulary, text: &str) -> Result<Vec<TokenId>, String> {
    vocab.encode_exact(text).map_err(|e| format!("tokenizer: {e} in {:?}", truncate(text, 80)))
}

/// At most `n` characters of `s`, with `…` when cut.
pub(crate) fn truncate(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::EngineErrorKind;

    /// Accepts exactly the token sequence `0 1` then EOS (token 2); can be told to lie in its
    /// mask (allow everything) or in `is_accepting`.
    struct Scripted {
        vocab: Vocabulary,
        pos: usize,
        lying_mask: bool,
        lying_accept: bool,
    }

    impl ConstraintEngine for Scripted {
        fn vocab(&self) -> &Vocabulary {
            &self.vocab
        }
        fn fill_mask(&mut self, mask: &mut TokenMask) -> Result<(), EngineError> {
            mask.clear();
            if self.lying_mask {
                mask.set_all();
            } else if self.pos < 2 {
                mask.insert(TokenId(self.pos as u32));
            } else {
                mask.insert(TokenId(2));
            }
            Ok(())
        }
        fn advance(&mut self, token: TokenId) -> Result<(), EngineError> {
            if token.index() == self.pos && self.pos < 2 {
                self.pos += 1;
                Ok(())
            } else {
                Err(EngineError::new(EngineErrorKind::Refused {
                    token,
                    text: String::new(),
                    accepted_bytes: 0,
                }))
            }
        }
        fn is_accepting(&self) -> bool {
            (self.pos == 2) != self.lying_accept
        }
        fn is_finished(&self) -> bool {
            false
        }
        fn can_only_end(&self) -> bool {
            self.pos == 2
        }
        fn allows(&self, token: TokenId) -> bool {
            token.index() == self.pos
        }
        fn step_mask(&mut self, _: usize) -> Result<&[bool], EngineError> {
            unimplemented!("not used by the walk")
        }
        fn rollback(&mut self, _: usize) -> Result<(), EngineError> {
            unimplemented!("not used by the walk")
        }
    }

    fn engine(lying_mask: bool, lying_accept: bool) -> Scripted {
        let vocab = Vocabulary::from_token_bytes(&[Some(b"a"), Some(b"b"), None], &[2], None)
            .expect("a valid tiny vocabulary");
        Scripted { vocab, pos: 0, lying_mask, lying_accept }
    }

    #[test]
    fn verdicts_and_timings() {
        let mut mask = TokenMask::new(3);
        let mut ns = Vec::new();
        let w = walk(&mut engine(false, false), &[TokenId(0), TokenId(1)], &mut mask, &mut ns)
            .expect("right mask width");
        assert_eq!(w, Walk { end: WalkEnd::Accepted, inconsistencies: vec![] });
        assert_eq!(ns.len(), 3, "one mask per token plus the EOS mask");

        let w = walk(&mut engine(false, false), &[TokenId(0)], &mut mask, &mut ns).unwrap();
        assert_eq!(w.end, WalkEnd::RefusedEos);
        let w = walk(&mut engine(false, false), &[TokenId(1)], &mut mask, &mut ns).unwrap();
        assert_eq!(w.end, WalkEnd::RefusedToken { index: 0, token: TokenId(1) });
        assert!(w.inconsistencies.is_empty());
    }

    #[test]
    fn engine_self_contradictions_are_reported() {
        let mut mask = TokenMask::new(3);
        let mut ns = Vec::new();
        let w = walk(&mut engine(true, false), &[TokenId(1)], &mut mask, &mut ns).unwrap();
        assert_eq!(w.end, WalkEnd::RefusedToken { index: 0, token: TokenId(1) });
        assert_eq!(w.inconsistencies.len(), 1, "{w:?}");
        assert!(w.inconsistencies[0].contains("advance refuses"), "{w:?}");

        let w =
            walk(&mut engine(false, true), &[TokenId(0), TokenId(1)], &mut mask, &mut ns).unwrap();
        assert!(w.accepted());
        assert!(w.inconsistencies[0].contains("is_accepting"), "{w:?}");
    }
}
