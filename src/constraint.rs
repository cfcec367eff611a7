//! The one way to build any constraint: describe it with a [`Constraint`] value, compile it once
//! against a [`Vocabulary`] into a [`CompiledConstraint`] (immutable, `Arc`-shared, `Send +
//! Sync`), and create a cheap per-request engine from that for every request.
//!
//! This is the layer above the engines (json, schema, regex, cfg): it knows each engine's
//! constructor and nothing else, so the CLI, a server and the bindings all build constraints the
//! same way. The engines' own constructors stay available for callers who want a concrete type.
//!
//! ```
//! use grammask::{Constraint, ConstraintEngine, TokenMask, Vocabulary};
//!
//! let vocab = Vocabulary::embedded()?;
//! let compiled = Constraint::regex(r"[0-9]{3}-[0-9]{4}").compile(&vocab)?;  // once
//! let mut engine = compiled.engine();                                       // per request
//! let mut mask = TokenMask::new(vocab.n_vocab());
//! for t in vocab.encode("555-0199")? {
//!     engine.fill_mask(&mut mask)?;
//!     assert!(mask.contains(t));
//!     engine.advance(t)?;
//! }
//! assert!(engine.is_accepting());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::automaton::RegexError;
use crate::cfg::{CfgConfig, CfgConstraint, CfgError};
use crate::engine::{ConstraintEngine, EngineOptions};
use crate::json::{JsonConfig, JsonConfigError, JsonGrammar, JsonObjectConstraint};
use crate::regex::{RegexConfig, RegexConstraint};
use crate::schema::{CompiledSchema, SchemaConstraint, SchemaError, SchemaOptions};
use crate::vocab::Vocabulary;
use std::fmt;

pub mod tagged;
pub mod tools;

use std::sync::Arc;
pub use tagged::{Piece, Tag, Tagged, TaggedEngine, TaggedError, TaggedErrorKind, TriggeredTags};

/// What the output must be: a description, not yet compiled. Build one with [`Constraint::json`],
/// [`Constraint::json_schema`], [`Constraint::regex`] or [`Constraint::gbnf`] (each with its
/// config through the `*_with` form), then [`Constraint::compile`] it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Constraint {
    /// Free-form JSON (RFC 8259; by default an object, OpenAI's `json_object`).
    Json(JsonConfig),
    /// A JSON Schema (draft 2020-12 and earlier; keyword table in `docs/json-schema.md`).
    JsonSchema {
        /// The schema.
        schema: serde_json::Value,
        /// Compiler and engine options.
        options: SchemaOptions,
    },
    /// A regex the whole output must match.
    Regex {
        /// The pattern (regex-syntax dialect, implicitly anchored at both ends).
        pattern: String,
        /// DFA limits and engine options.
        config: RegexConfig,
    },
    /// A GBNF grammar (llama.cpp's format; start rule `root`).
    Gbnf {
        /// The grammar text.
        grammar: String,
        /// Grammar limits and engine options.
        config: CfgConfig,
    },
    /// Structural tags: free text with constrained islands (see [`tagged`] and
    /// `docs/tagged.md`).
    Tagged {
        /// The description.
        tagged: Arc<Tagged>,
        /// Rollback history and the inner engines' options.
        options: EngineOptions,
    },
}

/// Which kind of constraint a [`Constraint`] or [`CompiledConstraint`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConstraintKind {
    /// [`Constraint::Json`].
    Json,
    /// [`Constraint::JsonSchema`].
    JsonSchema,
    /// [`Constraint::Regex`].
    Regex,
    /// [`Constraint::Gbnf`].
    Gbnf,
    /// [`Constraint::Tagged`].
    Tagged,
}

impl ConstraintKind {
    /// `"json"`, `"json_schema"`, `"regex"`, `"gbnf"` or `"tagged"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConstraintKind::Json => "json",
            ConstraintKind::JsonSchema => "json_schema",
            ConstraintKind::Regex => "regex",
            ConstraintKind::Gbnf => "gbnf",
            ConstraintKind::Tagged => "tagged",
        }
    }
}

impl Constraint {
    /// Free-form JSON with the default [`JsonConfig`] (a top-level object, flexible whitespace).
    pub fn json() -> Constraint {
        Constraint::Json(JsonConfig::default())
    }

    /// Free-form JSON with `config`.
    pub fn json_with(config: JsonConfig) -> Constraint {
        Constraint::Json(config)
    }

    /// Output conforming to `schema`, with the default [`SchemaOptions`].
    pub fn json_schema(schema: &serde_json::Value) -> Constraint {
        Constraint::json_schema_with(schema, SchemaOptions::default())
    }

    /// Output conforming to `schema`, with `options`.
    pub fn json_schema_with(schema: &serde_json::Value, options: SchemaOptions) -> Constraint {
        Constraint::JsonSchema { schema: schema.clone(), options }
    }

    /// Output matching `pattern` in full, with the default [`RegexConfig`].
    pub fn regex(pattern: &str) -> Constraint {
        Constraint::regex_with(pattern, RegexConfig::default())
    }

    /// Output matching `pattern` in full, with `config`.
    pub fn regex_with(pattern: &str, config: RegexConfig) -> Constraint {
        Constraint::Regex { pattern: pattern.to_owned(), config }
    }

    /// Output in the language of the GBNF `grammar`, with the default [`CfgConfig`].
    pub fn gbnf(grammar: &str) -> Constraint {
        Constraint::gbnf_with(grammar, CfgConfig::default())
    }

    /// Output in the language of the GBNF `grammar`, with `config`.
    pub fn gbnf_with(grammar: &str, config: CfgConfig) -> Constraint {
        Constraint::Gbnf { grammar: grammar.to_owned(), config }
    }

    /// Structural tags (free text with triggered, constrained islands) with the default
    /// [`EngineOptions`].
    pub fn tagged(tagged: Tagged) -> Constraint {
        Constraint::Tagged { tagged: Arc::new(tagged), options: EngineOptions::default() }
    }

    /// The same constraint with other engine options (rollback history, mask cache), whatever
    /// its kind.
    #[must_use]
    pub fn with_engine_options(mut self, engine: EngineOptions) -> Constraint {
        match &mut self {
            Constraint::Json(c) => c.engine = engine,
            Constraint::JsonSchema { options, .. } => options.engine = engine,
            Constraint::Regex { config, .. } => config.engine = engine,
            Constraint::Gbnf { config, .. } => config.engine = engine,
            Constraint::Tagged { options, .. } => *options = engine,
        }
        self
    }

    /// Which kind of constraint this is.
    pub fn kind(&self) -> ConstraintKind {
        match self {
            Constraint::Json(_) => ConstraintKind::Json,
            Constraint::JsonSchema { .. } => ConstraintKind::JsonSchema,
            Constraint::Regex { .. } => ConstraintKind::Regex,
            Constraint::Gbnf { .. } => ConstraintKind::Gbnf,
            Constraint::Tagged { .. } => ConstraintKind::Tagged,
        }
    }

    /// Compile against `vocab`: the expensive part (automata, grammar analysis, vocabulary
    /// slices), done once and shared by every engine made from the result.
    ///
    /// # Errors
    /// A [`ConstraintError`] wrapping the engine's own typed error (a bad config, a schema
    /// keyword that is not supported, a regex or grammar that does not compile or is over its
    /// limits, a token terminal the vocabulary lacks).
    pub fn compile(&self, vocab: &Vocabulary) -> Result<CompiledConstraint, ConstraintError> {
        let compiled = match self {
            Constraint::Json(config) => {
                Compiled::Json(Arc::new(JsonGrammar::new(config)?), config.engine.clone())
            }
            Constraint::JsonSchema { schema, options } => {
                let compiled = CompiledSchema::compile(schema, options)?;
                // Builds the vocabulary's JSON classes now, not in the first request.
                drop(SchemaConstraint::new(compiled.clone(), vocab));
                Compiled::Schema(compiled)
            }
            Constraint::Regex { pattern, config } => {
                Compiled::Regex(RegexConstraint::new(vocab, pattern, config)?.shared())
            }
            Constraint::Gbnf { grammar, config } => {
                Compiled::Gbnf(CfgConstraint::from_gbnf(vocab, grammar, config)?.shared())
            }
            Constraint::Tagged { tagged, options } => {
                Compiled::Tagged(tagged::compile(tagged, options, vocab)?)
            }
        };
        let source = match self {
            Constraint::JsonSchema { schema, .. } => Some(Arc::new(schema.clone())),
            _ => None,
        };
        Ok(CompiledConstraint { inner: Arc::new(compiled), vocab: vocab.clone(), source })
    }
}

/// A constraint compiled against one vocabulary: immutable and cheap to clone (an `Arc`), shared
/// by every request. [`CompiledConstraint::engine`] starts a request.
#[derive(Clone)]
pub struct CompiledConstraint {
    inner: Arc<Compiled>,
    vocab: Vocabulary,
    /// The schema a JSON Schema constraint was compiled from (the fuzzer's near misses and
    /// coverage read it).
    source: Option<Arc<serde_json::Value>>,
}

enum Compiled {
    Json(Arc<JsonGrammar>, EngineOptions),
    Schema(Arc<CompiledSchema>),
    Regex(Arc<crate::regex::Shared>),
    Gbnf(Arc<crate::cfg::engine::Shared>),
    Tagged(Arc<tagged::Program>),
}

impl fmt::Debug for CompiledConstraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledConstraint")
            .field("kind", &self.kind())
            .field("vocab", &self.vocab)
            .finish()
    }
}

impl CompiledConstraint {
    /// A fresh engine at the start of the output (a new request): no compilation, a few small
    /// allocations.
    pub fn engine(&self) -> Box<dyn ConstraintEngine> {
        let v = &self.vocab;
        match &*self.inner {
            Compiled::Json(g, o) => Box::new(JsonObjectConstraint::from_grammar(v, g.clone(), o)),
            Compiled::Schema(s) => Box::new(SchemaConstraint::new(s.clone(), v)),
            Compiled::Regex(s) => Box::new(RegexConstraint::with_shared(v, s.clone())),
            Compiled::Gbnf(s) => Box::new(CfgConstraint::with_shared(v, s.clone())),
            Compiled::Tagged(p) => Box::new(TaggedEngine::new(p.clone())),
        }
    }

    /// The JSON Schema this constraint was compiled from; `None` for the other kinds.
    pub fn schema(&self) -> Option<&serde_json::Value> {
        self.source.as_deref()
    }

    /// A byte-level probe at the start of the output: push and pop single bytes, ask whether
    /// the bytes so far are a complete document. `None` for structural tags. The schema
    /// fuzzer (`crate::fuzz`) generates through it.
    pub(crate) fn byte_probe(&self) -> Option<tagged::InnerSlot> {
        if let Compiled::Tagged(_) = &*self.inner {
            return None;
        }
        let mut slot = tagged::InnerSlot::fresh(&self.inner, &self.vocab);
        slot.start();
        Some(slot)
    }

    /// The vocabulary it was compiled against (its engines mask over exactly this one).
    pub fn vocab(&self) -> &Vocabulary {
        &self.vocab
    }

    /// Which kind of constraint this is.
    pub fn kind(&self) -> ConstraintKind {
        match &*self.inner {
            Compiled::Json(..) => ConstraintKind::Json,
            Compiled::Schema(_) => ConstraintKind::JsonSchema,
            Compiled::Regex(_) => ConstraintKind::Regex,
            Compiled::Gbnf(_) => ConstraintKind::Gbnf,
            Compiled::Tagged(_) => ConstraintKind::Tagged,
        }
    }
}

/// Why a [`Constraint`] did not compile: the engine's own typed error, kept whole.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ConstraintError {
    /// A bad [`JsonConfig`].
    Json(JsonConfigError),
    /// A schema that does not compile ([`SchemaError::kind`] says why).
    Schema(SchemaError),
    /// A regex that does not compile ([`RegexError::kind`] says why).
    Regex(RegexError),
    /// A grammar that does not compile ([`CfgError::kind`] says why).
    Gbnf(CfgError),
    /// A structural-tag description that does not compile ([`TaggedError::kind`] says why,
    /// naming the tag).
    Tagged(TaggedError),
}

impl ConstraintError {
    /// The kind of constraint that failed.
    pub fn kind(&self) -> ConstraintKind {
        match self {
            ConstraintError::Json(_) => ConstraintKind::Json,
            ConstraintError::Schema(_) => ConstraintKind::JsonSchema,
            ConstraintError::Regex(_) => ConstraintKind::Regex,
            ConstraintError::Gbnf(_) => ConstraintKind::Gbnf,
            ConstraintError::Tagged(_) => ConstraintKind::Tagged,
        }
    }
}

impl fmt::Display for ConstraintError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConstraintError::Json(e) => write!(f, "json: {e}"),
            ConstraintError::Schema(e) => write!(f, "json schema: {e}"),
            ConstraintError::Regex(e) => write!(f, "regex: {e}"),
            ConstraintError::Gbnf(e) => write!(f, "grammar: {e}"),
            ConstraintError::Tagged(e) => write!(f, "structural tags: {e}"),
        }
    }
}

impl std::error::Error for ConstraintError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(match self {
            ConstraintError::Json(e) => e,
            ConstraintError::Schema(e) => e,
            ConstraintError::Regex(e) => e,
            ConstraintError::Gbnf(e) => e,
            ConstraintError::Tagged(e) => e,
        })
    }
}

macro_rules! from_engine_error {
    ($($err:ty => $variant:ident),*) => {
        $(impl From<$err> for ConstraintError {
            fn from(e: $err) -> Self {
                ConstraintError::$variant(e)
            }
        })*
    };
}
from_engine_error!(JsonConfigError => Json, SchemaError => Schema, RegexError => Regex, CfgError => Gbnf, TaggedError => Tagged);

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn compiled_constraints_are_shared_across_threads() {
        assert_send_sync::<CompiledConstraint>();
        assert_send_sync::<Constraint>();
    }

    #[test]
    fn kinds_and_errors_name_the_constraint() {
        assert_eq!(Constraint::json().kind(), ConstraintKind::Json);
        assert_eq!(Constraint::gbnf("root ::= \"a\"").kind().as_str(), "gbnf");
        let vocab = Vocabulary::from_token_bytes(&[Some(b"a"), Some(b"b"), None], &[2], None)
            .expect("vocabulary");
        let err = Constraint::regex("(").compile(&vocab).unwrap_err();
        assert_eq!(err.kind(), ConstraintKind::Regex);
        assert!(err.to_string().starts_with("regex: "), "{err}");
        let err = Constraint::json_schema(&serde_json::json!({"type": 3})).compile(&vocab);
        assert_eq!(err.unwrap_err().kind(), ConstraintKind::JsonSchema);
        let bad = JsonConfig::default().with_max_depth(0);
        assert!(matches!(
            Constraint::json_with(bad).compile(&vocab),
            Err(ConstraintError::Json(_))
        ));
    }

    #[test]
    fn engines_from_one_compiled_constraint_are_independent() {
        let vocab = Vocabulary::from_token_bytes(&[Some(b"a"), Some(b"b"), None], &[2], None)
            .expect("vocabulary");
        let compiled = Constraint::regex("ab").compile(&vocab).expect("compiles");
        let (mut one, two) = (compiled.engine(), compiled.engine());
        one.advance(crate::TokenId(0)).expect("a");
        assert!(one.allows(crate::TokenId(1)) && !two.allows(crate::TokenId(1)));
        assert!(two.allows(crate::TokenId(0)));
    }
}
