//! Sampling on the accelerator through [MLX](https://github.com/ml-explore/mlx) (`mlx-rs`):
//! greedy and masked argmax without a host copy of the logits, and the one device→host logits
//! transfer of the temperature > 0 path. Compiled only with the cargo feature `mlx`.
//!
//! # What runs where
//! The constraint side (engines, [`TokenMask`](crate::TokenMask)) always runs on the host. A
//! temperature-0 step then takes one of two device paths (seed design, "Fast greedy"):
//!
//! | step                            | entry point                    | crosses host↔device           |
//! |---------------------------------|--------------------------------|-------------------------------|
//! | greedy, no constraint           | [`argmax`]                     | the `[1]` id, when read       |
//! | greedy + constraint mask        | [`MaskedArgmax::apply`]        | f32 bias up, `[1]` id down    |
//! | batch of rows, one mask each    | [`MaskedArgmax::apply_rows`]   | `[rows, vocab]` bias up       |
//! | temperature > 0 (host sampler)  | [`logits_to_host`]             | the logits row down, as f32   |
//!
//! The masked path writes the mask into a reused host `f32` buffer (0.0 allowed, −inf forbidden),
//! uploads it as a `[1, vocab]` array, adds it to the logits (bf16 and f16 logits promote to f32)
//! and takes the argmax; the result is a lazy `[1]` `i32` MLX array, as the decode loop expects.
//! [`token_id`] (or [`MaskedArgmax::apply_token`]) evaluates it and reads the id on the host.
//!
//! Operations run on MLX's default device and stream — the GPU on Apple silicon with the
//! `mlx-metal` feature, the CPU otherwise — or on the one selected with `mlx_rs::with_device` /
//! `mlx_rs::with_stream` around the call.
//!
//! # Ties, −inf and NaN
//! Ties go to the lowest token id: MLX's CPU argmax keeps the first maximum (tested on Linux) and
//! its Metal arg-reduce kernel breaks equal values by lower index. A masked argmax whose
//! allowed tokens all have −inf logits has no meaningful answer: the lazy forms return some
//! forbidden id and the `*_token(s)` forms report
//! [`GpuErrorKind::NoFiniteAllowedLogit`]. A mask that allows nothing is rejected up front
//! ([`GpuErrorKind::EmptyMask`]).
//!
//! # Errors
//! Every entry point validates shapes, dtypes and mask widths before building the MLX graph and
//! returns a [`GpuError`] naming them; exceptions MLX raises anyway are wrapped with the
//! operation's name and kept as the error's `source()`.
//!
//! # Building
//! See `docs/gpu.md`: on macOS the stock `mlx-rs` builds (`--features mlx-metal` for the GPU);
//! on Linux the `mlx` feature links MLX's CPU build through `../shared/mlx-linux/setup.sh`.

mod argmax;
mod error;
mod host;

pub use argmax::{argmax, argmax_rows, token_id, token_ids_into, MaskedArgmax};
pub use error::{GpuError, GpuErrorKind};
pub use host::{logits_to_host, logits_to_host_slice};
