//! grammask: grammar-constrained decoding — exact, fast per-step token masks and a sampler.
//!
//! (The full manual lands with the foundation; see README.md.)

pub mod mask;
pub mod sampler;
pub mod token;

pub use mask::TokenMask;
pub use token::TokenId;
