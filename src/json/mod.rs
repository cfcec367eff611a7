//! Free-form JSON (RFC 8259): OpenAI's `json_object` response format, or any JSON value.
//!
//! [`JsonObjectConstraint`] is a [`CopyStateEngine`] over the [`JsonGrammar`] state machine in
//! `lexer`: the whole per-request state is one 32-byte `Copy` value, the mask is one trie walk
//! (or the vocabulary's string slice plus a walk of the few tokens outside it when inside a
//! string), and masks are cached by exact state.
//!
//! # Defaults
//! - Top level: an object ([`TopLevel::Object`]).
//! - Whitespace: [`Whitespace::Flexible`] with runs of at most [`JsonConfig::DEFAULT_MAX_WS_RUN`] bytes
//!   between tokens of the document, none before or after the top-level value.
//! - Nesting depth: at most [`JsonConfig::DEFAULT_MAX_DEPTH`] (configurable up to [`MAX_DEPTH_LIMIT`]).
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

pub(crate) mod lexer;
pub(crate) mod slices;
pub(crate) mod syntax;

pub use lexer::{JsonGrammar, JsonState, TopLevel, MAX_DEPTH_LIMIT};

use crate::engine::{CopyGrammar, CopyStateEngine, EngineOptions, Whitespace};
use crate::vocab::Vocabulary;
use lexer::Whitespace as LexWhitespace;
use slices::JsonVocab;
use std::fmt;
use std::sync::Arc;

/// Options of the free-form JSON constraint.
///
/// ```
/// use grammask::{json::TopLevel, JsonConfig, Whitespace};
/// let c = JsonConfig::default().with_top_level(TopLevel::AnyValue).with_whitespace(Whitespace::Compact);
/// assert_eq!(c.max_depth, JsonConfig::DEFAULT_MAX_DEPTH);
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct JsonConfig {
    /// Which values may stand at the top level (default: an object).
    pub top_level: TopLevel,
    /// Whitespace policy (default: flexible, runs of at most
    /// [`JsonConfig::DEFAULT_MAX_WS_RUN`] = 32 bytes; [`Whitespace::Separators`] is refused).
    pub whitespace: Whitespace,
    /// Deepest nesting of objects and arrays (default 64, at most 128).
    pub max_depth: usize,
    /// Engine limits (history for rollback, mask cache size).
    pub engine: EngineOptions,
}

impl JsonConfig {
    /// Default longest whitespace run in flexible mode.
    pub const DEFAULT_MAX_WS_RUN: u8 = 32;
    /// Default deepest nesting.
    pub const DEFAULT_MAX_DEPTH: usize = 64;
}

impl Default for JsonConfig {
    fn default() -> Self {
        JsonConfig {
            top_level: TopLevel::Object,
            whitespace: Whitespace::Flexible { max_run: Self::DEFAULT_MAX_WS_RUN },
            max_depth: Self::DEFAULT_MAX_DEPTH,
            engine: EngineOptions::default(),
        }
    }
}

builder!(JsonConfig {
    /// Which values may stand at the top level (default: an object).
    with_top_level => top_level: TopLevel,
    /// Whitespace policy (default: flexible, runs of at most 32 bytes).
    with_whitespace => whitespace: Whitespace,
    /// Deepest nesting of objects and arrays (default 64, at most 128).
    with_max_depth => max_depth: usize,
    /// Engine limits (history for rollback, mask cache size).
    with_engine => engine: EngineOptions,
});

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
        let whitespace = match &config.whitespace {
            Whitespace::Compact => LexWhitespace::Compact,
            Whitespace::Flexible { max_run } if *max_run > 0 => {
                LexWhitespace::Flexible { max_run: *max_run }
            }
            Whitespace::Flexible { .. } => {
                return Err(JsonConfigError {
                    message: "flexible whitespace needs max_run >= 1 (use Compact for none)".into(),
                })
            }
            _ => {
                return Err(JsonConfigError {
                    message: "the free-form JSON engine supports Compact and Flexible whitespace, \
                              not Separators (use a JSON Schema `{}` for fixed separators)"
                        .into(),
                })
            }
        };
        Ok(JsonGrammar { whitespace, top: config.top_level, max_depth: config.max_depth as u8 })
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
    fn slice_exit(&self, s: &JsonState) -> Option<Option<JsonState>> {
        if JsonGrammar::in_string_body(s) {
            Some(self.after_string(s))
        } else {
            self.structural_slice_index(s).map(|_| Some(self.pop(*s)))
        }
    }
    fn slice_index(&self, s: &JsonState) -> usize {
        JsonGrammar::string_slice_index(s)
            .or_else(|| self.structural_slice_index(s))
            .unwrap_or(usize::MAX)
    }
}

/// The free-form JSON engine.
pub type JsonObjectConstraint = CopyStateEngine<JsonGrammar>;

impl CopyStateEngine<JsonGrammar> {
    /// A free-form JSON engine over `vocab`.
    ///
    /// # Errors
    /// A bad configuration (see [`JsonGrammar::new`]).
    pub fn new(vocab: &Vocabulary, config: &JsonConfig) -> Result<Self, JsonConfigError> {
        Ok(Self::from_grammar(vocab, Arc::new(JsonGrammar::new(config)?), &config.engine))
    }

    /// An engine over an already compiled grammar (a new request: no compilation).
    pub fn from_grammar(
        vocab: &Vocabulary,
        grammar: Arc<JsonGrammar>,
        engine: &EngineOptions,
    ) -> Self {
        // The vocabulary's string and structural slices: built once per vocabulary (and
        // whitespace policy), each on its first use.
        let slices = vocab.json_slices(grammar.whitespace);
        CopyStateEngine::with_grammar(grammar, vocab, engine.clone()).with_slices(slices)
    }
}
