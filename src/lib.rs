//! grammask: grammar-constrained decoding — exact, fast per-step token masks and a sampler.
//!
//! (The full manual lands with the foundation; see README.md.)

#[cfg(feature = "mlx")]
pub mod gpu;
pub mod mask;
pub mod token;

pub use mask::TokenMask;
pub use token::TokenId;
