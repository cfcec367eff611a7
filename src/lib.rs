//! grammask: grammar-constrained decoding — exact, fast per-step token masks and a sampler.
//!
//! (The full manual lands with the foundation; see README.md.)

pub mod bench;
pub mod copy_engine;
pub mod engine;
pub mod json;
pub mod mask;
pub mod recognizer;
pub mod schema;
pub mod token;
pub mod vocab;

pub use copy_engine::{CopyGrammar, CopyStateEngine, EngineOptions};
pub use engine::{ConstraintEngine, EngineError, EngineErrorKind};
pub use json::{JsonConfig, JsonObjectConstraint};
pub use mask::TokenMask;
pub use schema::{CompiledSchema, SchemaConstraint, SchemaError, SchemaErrorKind, SchemaOptions};
pub use token::TokenId;
pub use vocab::Vocabulary;
