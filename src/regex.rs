//! The regex constraint: the output must fully match a regular expression (outlines-style).
//!
//! [`RegexConstraint`] is a [`CopyStateEngine`] over [`RegexGrammar`], a [`ByteDfa`] with only
//! live states: the per-request state is one `u32`, a mask is one pruned trie walk (cached by
//! DFA state, so repeated states cost a bitset copy), EOS is allowed exactly at accepting states,
//! and `rollback` restores earlier states from a bounded history.
//!
//! # Supported syntax
//! Everything `regex-syntax` 0.8 parses (Rust `regex` syntax: classes, Unicode properties,
//! repetitions with bounds, non-capturing groups, flags), matched as a whole against the output
//! bytes. Not supported: Unicode word boundaries `\b`/`\B` (refused with a typed error), back-
//! references and look-around (not regular; refused as syntax errors by the parser).
//!
//! # Size limits
//! [`RegexConfig::dfa`] bounds the NFA, the determinisation and the number of live DFA states;
//! a pattern that would exceed them is refused with [`RegexErrorKind::TooBig`](crate::automaton::RegexErrorKind::TooBig).
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

use crate::automaton::{ByteDfa, DfaConfig, DfaStateId, RegexError};
use crate::copy_engine::{CopyGrammar, CopyStateEngine, EngineOptions};
use crate::recognizer::ByteLogic;
use crate::vocab::Vocabulary;
use std::sync::Arc;

/// Options of the regex constraint.
#[derive(Clone, Debug)]
pub struct RegexConfig {
    /// Size limits of the compiled DFA.
    pub dfa: DfaConfig,
    /// Engine limits (rollback history, mask cache). The default keeps 32 masks: regex DFAs
    /// revisit few states, so most steps are cache hits.
    pub engine: EngineOptions,
}

impl Default for RegexConfig {
    fn default() -> Self {
        RegexConfig {
            dfa: DfaConfig::default(),
            engine: EngineOptions { history: 64, mask_cache: 32 },
        }
    }
}

/// A compiled regex as a [`CopyGrammar`].
#[derive(Clone, Debug)]
pub struct RegexGrammar {
    dfa: ByteDfa,
}

impl RegexGrammar {
    /// Compile `pattern`.
    ///
    /// # Errors
    /// See [`ByteDfa::from_regex`].
    pub fn new(pattern: &str, config: &DfaConfig) -> Result<RegexGrammar, RegexError> {
        Ok(RegexGrammar { dfa: ByteDfa::from_regex(pattern, config)? })
    }

    /// The underlying DFA.
    pub fn dfa(&self) -> &ByteDfa {
        &self.dfa
    }
}

impl ByteLogic for RegexGrammar {
    type State = DfaStateId;
    #[inline(always)]
    fn step(&self, state: &DfaStateId, byte: u8) -> Option<DfaStateId> {
        self.dfa.next(*state, byte)
    }
}

impl CopyGrammar for RegexGrammar {
    fn initial(&self) -> DfaStateId {
        self.dfa.start()
    }
    fn is_accepting(&self, s: &DfaStateId) -> bool {
        self.dfa.is_accepting(*s)
    }
    fn can_continue(&self, s: &DfaStateId) -> bool {
        self.dfa.can_continue(*s)
    }
}

/// The regex engine.
pub type RegexConstraint = CopyStateEngine<RegexGrammar>;

impl CopyStateEngine<RegexGrammar> {
    /// A regex engine over `vocab` for `pattern`.
    ///
    /// # Errors
    /// See [`ByteDfa::from_regex`].
    pub fn new(
        vocab: &Vocabulary,
        pattern: &str,
        config: &RegexConfig,
    ) -> Result<Self, RegexError> {
        Ok(Self::from_grammar(Arc::new(RegexGrammar::new(pattern, &config.dfa)?), vocab, config))
    }

    /// A fresh engine sharing an already compiled regex (one compile, many requests).
    pub fn from_grammar(
        grammar: Arc<RegexGrammar>,
        vocab: &Vocabulary,
        config: &RegexConfig,
    ) -> Self {
        CopyStateEngine::with_grammar(grammar, vocab, config.engine.clone())
    }
}
