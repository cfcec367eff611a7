//! Free-form JSON (RFC 8259): OpenAI's `json_object` response format, or any JSON value.
//!
//! [`JsonObjectConstraint`] is a [`CopyStateEngine`] over the [`JsonGrammar`] state machine in
//! [`lexer`]: the whole per-request state is one 32-byte `Copy` value, the mask is one trie walk
//! (or the vocabulary's string slice plus a walk of the few tokens outside it when inside a
//! string), and masks are cached by exact state.
//!
//! # Defaults
//! - Top level: an object ([`TopLevel::Object`]).
//! - Whitespace: [`Whitespace::Flexible`] with runs of at most [`DEFAULT_MAX_WS_RUN`] bytes
//!   between tokens of the document, none before or after the top-level value.
//! - Nesting depth: at most [`DEFAULT_MAX_DEPTH`] (configurable up to [`MAX_DEPTH_LIMIT`]).
//! - Duplicate keys are not detected (RFC 8259 only says they SHOULD be unique).
//!
//! # Example
//! ```
//! use grammask::{ConstraintEngine, JsonConfig, JsonObjectConstraint, TokenMask, Vocabulary};
//! let vocab = Vocabulary::embedded().unwrap();
//! let mut engine = JsonObjectConstraint::new(&vocab, &JsonConfig::default()).unwrap();
//! let mut mask = TokenMask::new(vocab.n_vocab());
//! for t in vocab.encode("{\"a\": [1, true]}").unwrap() {
//!     engine.fill_mask(&mut mask).unwrap();
//!     assert!(mask.contains(t));
//!     engine.advance(t).unwrap();
//! }
//! assert!(engine.can_only_end());
//! ```

pub mod lexer;
pub(crate) mod syntax;

pub use lexer::{JsonGrammar, JsonState, TopLevel, Whitespace, MAX_DEPTH_LIMIT};

use crate::copy_engine::{CopyGrammar, CopyStateEngine, EngineOptions};
use crate::vocab::Vocabulary;
use std::fmt;
use std::sync::Arc;

/// Default longest whitespace run in flexible mode.
pub const DEFAULT_MAX_WS_RUN: u8 = 32;
/// Default deepest nesting.
pub const DEFAULT_MAX_DEPTH: usize = 64;

/// Options of the free-form JSON constraint.
#[derive(Clone, Debug)]
pub struct JsonConfig {
    /// Which values may stand at the top level (default: an object).
    pub top_level: TopLevel,
    /// Whitespace policy (default: flexible, runs of at most 32 bytes).
    pub whitespace: Whitespace,
    /// Deepest nesting of objects and arrays (default 64, at most 128).
    pub max_depth: usize,
    /// Engine limits (history for rollback, mask cache size).
    pub engine: EngineOptions,
}

impl Default for JsonConfig {
    fn default() -> Self {
        JsonConfig {
            top_level: TopLevel::Object,
            whitespace: Whitespace::Flexible { max_run: DEFAULT_MAX_WS_RUN },
            max_depth: DEFAULT_MAX_DEPTH,
            engine: EngineOptions::default(),
        }
    }
}

/// A bad [`JsonConfig`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonConfigError {
    message: String,
}

impl fmt::Display for JsonConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for JsonConfigError {}

impl JsonGrammar {
    /// Compile the grammar for `config`.
    ///
    /// # Errors
    /// `max_depth` of 0 or above [`MAX_DEPTH_LIMIT`]; a flexible whitespace run of 0.
    pub fn new(config: &JsonConfig) -> Result<JsonGrammar, JsonConfigError> {
        if config.max_depth == 0 || config.max_depth > MAX_DEPTH_LIMIT {
            return Err(JsonConfigError {
                message: format!(
                    "max_depth must be between 1 and {MAX_DEPTH_LIMIT}, not {}",
                    config.max_depth
                ),
            });
        }
        if config.whitespace == (Whitespace::Flexible { max_run: 0 }) {
            return Err(JsonConfigError {
                message: "flexible whitespace needs max_run >= 1 (use Compact for none)".into(),
            });
        }
        Ok(JsonGrammar {
            whitespace: config.whitespace,
            top: config.top_level,
            max_depth: config.max_depth as u8,
        })
    }
}

impl CopyGrammar for JsonGrammar {
    fn initial(&self) -> JsonState {
        self.start_state()
    }
    fn is_accepting(&self, s: &JsonState) -> bool {
        self.accepting(s)
    }
    fn can_continue(&self, s: &JsonState) -> bool {
        self.continues(s)
    }
    fn in_free_string(&self, s: &JsonState) -> bool {
        self.free_string(s)
    }
}

/// The free-form JSON engine.
pub type JsonObjectConstraint = CopyStateEngine<JsonGrammar>;

impl CopyStateEngine<JsonGrammar> {
    /// A free-form JSON engine over `vocab`.
    ///
    /// # Errors
    /// A bad configuration (see [`JsonGrammar::new`]).
    pub fn new_json(vocab: &Vocabulary, config: &JsonConfig) -> Result<Self, JsonConfigError> {
        // Build the vocabulary's string slice now (once per vocabulary), not in the first mask.
        vocab.string_slice();
        Ok(CopyStateEngine::with_grammar(
            Arc::new(JsonGrammar::new(config)?),
            vocab,
            config.engine.clone(),
        ))
    }

    /// Alias of [`CopyStateEngine::new_json`], the name the examples use.
    ///
    /// # Errors
    /// A bad configuration (see [`JsonGrammar::new`]).
    pub fn new(vocab: &Vocabulary, config: &JsonConfig) -> Result<Self, JsonConfigError> {
        Self::new_json(vocab, config)
    }
}
