//! Greedy and masked argmax on MLX arrays: the temperature-0 decode step without a host copy of
//! the logits.
//!
//! The masked form follows the seed design's `apply_mask_argmax`: the constraint side stays on the
//! host and only an additive `f32` bias (0.0 allowed, −inf forbidden) crosses to the device, where
//! it is added to the logits (bf16/f16 logits promote to f32 under MLX's type promotion) before the
//! argmax. The bias lives in a host buffer owned by [`MaskedArgmax`] and reused across steps.

use std::borrow::Borrow;

use mlx_rs::{ops::indexing::argmax_axis, Array, Dtype};

use super::error::GpuError;
use crate::mask::TokenMask;
use crate::token::TokenId;

/// The shapes [`argmax`] and [`MaskedArgmax::apply`] accept, for error messages.
const ROW_SHAPES: &str = "[vocab] or [1, vocab] with vocab > 0";
/// The shapes the batch entry points accept, for error messages.
const BATCH_SHAPES: &str = "[rows, vocab] with rows > 0 and vocab > 0";

/// Checks that `logits` is one row, `[vocab]` or `[1, vocab]`, of a supported dtype; returns vocab.
fn row_vocab(logits: &Array) -> Result<usize, GpuError> {
    check_dtype(logits)?;
    let vocab = match *logits.shape() {
        [v] | [1, v] if v > 0 => v,
        _ => return Err(GpuError::shape(logits.shape(), ROW_SHAPES)),
    };
    Ok(dim(vocab))
}

/// Checks that `logits` is `[rows, vocab]` of a supported dtype; returns `(rows, vocab)`.
fn batch_dims(logits: &Array) -> Result<(usize, usize), GpuError> {
    check_dtype(logits)?;
    match *logits.shape() {
        [r, v] if r > 0 && v > 0 => Ok((dim(r), dim(v))),
        _ => Err(GpuError::shape(logits.shape(), BATCH_SHAPES)),
    }
}

/// The floating dtypes a model emits logits in; all promote to f32 when the f32 bias is added.
pub(crate) fn check_dtype(logits: &Array) -> Result<(), GpuError> {
    match logits.dtype() {
        Dtype::Float32 | Dtype::Bfloat16 | Dtype::Float16 => Ok(()),
        other => Err(GpuError::dtype(other)),
    }
}

/// A positive MLX dimension as a `usize` (MLX shapes are `i32`; callers checked `> 0`).
#[inline]
fn dim(d: i32) -> usize {
    usize::try_from(d).expect("positive MLX dimension")
}

/// A host length as an MLX dimension. Vocabularies and batch sizes are far below `i32::MAX`.
#[inline]
fn mlx_dim(n: usize) -> i32 {
    i32::try_from(n).expect("dimension fits in i32")
}

/// Argmax over the last axis, as `i32` ids (MLX's argmax yields `uint32`; the decode loop reads
/// `[1] I32`, as in the seed design).
fn last_axis_argmax(x: &Array) -> Result<Array, GpuError> {
    argmax_axis(x, -1, false)
        .map_err(GpuError::mlx("argmax"))?
        .as_dtype(Dtype::Int32)
        .map_err(GpuError::mlx("astype(int32)"))
}

/// Greedy argmax of one logits row on the device: `[vocab]` or `[1, vocab]` logits (f32, bf16 or
/// f16) → a lazy `[1]` `i32` array holding the id of the largest logit (lowest id on ties).
///
/// Nothing is evaluated or copied to the host; read the id with [`token_id`] when it is needed.
/// The operation runs on MLX's default stream, or the one chosen with `mlx_rs::with_stream` /
/// `mlx_rs::with_device`.
///
/// # Errors
/// [`GpuErrorKind::Shape`](super::GpuErrorKind::Shape) or
/// [`GpuErrorKind::Dtype`](super::GpuErrorKind::Dtype) for other shapes or dtypes, naming them;
/// [`GpuErrorKind::Mlx`](super::GpuErrorKind::Mlx) if MLX rejects the graph.
///
/// # Example
/// ```
/// use grammask::gpu;
/// use mlx_rs::Array;
///
/// let logits = Array::from_slice(&[0.5f32, 3.0, -1.0, 3.0], &[1, 4]);
/// let ids = gpu::argmax(&logits)?;
/// assert_eq!(ids.shape(), &[1]);
/// assert_eq!(gpu::token_id(&ids)?, grammask::TokenId(1));
/// # Ok::<(), grammask::gpu::GpuError>(())
/// ```
pub fn argmax(logits: &Array) -> Result<Array, GpuError> {
    row_vocab(logits)?;
    let ids = last_axis_argmax(logits)?;
    if ids.ndim() == 0 {
        // `[vocab]` logits reduce to a scalar; keep the `[1]` contract.
        return ids.reshape(&[1]).map_err(GpuError::mlx("reshape"));
    }
    Ok(ids)
}

/// Greedy argmax of each row of `[rows, vocab]` logits → a lazy `[rows]` `i32` array.
///
/// # Errors
/// As [`argmax`], for anything but a non-empty 2-D floating array.
pub fn argmax_rows(logits: &Array) -> Result<Array, GpuError> {
    batch_dims(logits)?;
    last_axis_argmax(logits)
}

/// Evaluates a `[1]` (or scalar) id array from [`argmax`] / [`MaskedArgmax::apply`] and reads the
/// token id on the host. This is the one device→host synchronisation of a greedy step.
///
/// # Errors
/// [`GpuErrorKind::Mlx`](super::GpuErrorKind::Mlx) if evaluation fails, the array holds more than
/// one element, or it is not `i32`.
pub fn token_id(ids: &Array) -> Result<TokenId, GpuError> {
    let id = ids.try_item_exact::<i32>().map_err(GpuError::conversion("read token id"))?;
    Ok(TokenId(id as u32))
}

/// Evaluates a `[rows]` id array from [`argmax_rows`] / [`MaskedArgmax::apply_rows`] and writes
/// the ids into `out` (cleared first; its capacity is reused).
///
/// # Errors
/// [`GpuErrorKind::Mlx`](super::GpuErrorKind::Mlx) if evaluation fails or the array is not `i32`.
pub fn token_ids_into(ids: &Array, out: &mut Vec<TokenId>) -> Result<(), GpuError> {
    let ids = ids.try_as_slice::<i32>().map_err(GpuError::slice("read token ids"))?;
    out.clear();
    out.extend(ids.iter().map(|&id| TokenId(id as u32)));
    Ok(())
}

/// Masked greedy argmax on the device, with the host-side bias buffer reused across steps.
///
/// Each call writes the mask into the buffer as an additive bias (0.0 allowed, −inf forbidden,
/// [`TokenMask::write_bias`]), uploads it as a `[rows, vocab]` f32 array, adds it to the logits
/// and takes the argmax over the last axis. The buffer only grows, so a decode loop allocates on
/// the host once; MLX copies the bias into its own (cached) buffer on each upload.
///
/// Keep one `MaskedArgmax` per decode loop (it is cheap, but the buffer is the point).
///
/// # Example
/// ```
/// use grammask::{gpu::MaskedArgmax, TokenId, TokenMask};
/// use mlx_rs::Array;
///
/// let logits = Array::from_slice(&[0.1f32, 2.0, 0.5, 3.0], &[1, 4]);
/// let mut mask = TokenMask::new(4);
/// mask.insert(TokenId(1));
/// mask.insert(TokenId(2));
/// let mut masked = MaskedArgmax::new();
/// // Token 3 has the largest logit but is forbidden.
/// assert_eq!(masked.apply_token(&logits, &mask)?, TokenId(1));
/// # Ok::<(), grammask::gpu::GpuError>(())
/// ```
#[derive(Default)]
pub struct MaskedArgmax {
    bias: Vec<f32>,
}

impl std::fmt::Debug for MaskedArgmax {
    // The buffer is up to a few hundred thousand floats of scratch; its size is what matters.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MaskedArgmax").field("bias_len", &self.bias.len()).finish()
    }
}

impl MaskedArgmax {
    /// A masked argmax with an empty bias buffer (it grows on the first call).
    pub fn new() -> MaskedArgmax {
        MaskedArgmax { bias: Vec::new() }
    }

    /// A masked argmax whose bias buffer already holds `n` floats (`rows × vocab` of the largest
    /// batch to come), so that not even the first step allocates.
    pub fn with_capacity(n: usize) -> MaskedArgmax {
        MaskedArgmax { bias: vec![0.0; n] }
    }

    /// The bias buffer for `n` values, grown (never shrunk) if needed.
    fn bias(&mut self, n: usize) -> &mut [f32] {
        if self.bias.len() < n {
            self.bias.resize(n, 0.0);
        }
        &mut self.bias[..n]
    }

    /// Masked argmax of one row: `[vocab]` or `[1, vocab]` logits and a mask over `vocab` tokens
    /// → a lazy `[1]` `i32` array with the allowed token of largest logit (lowest id on ties).
    ///
    /// If every allowed token has a −inf logit the result is a forbidden id;
    /// [`apply_token`](Self::apply_token) checks for that, this lazy form cannot.
    ///
    /// # Errors
    /// [`GpuErrorKind::Shape`](super::GpuErrorKind::Shape) /
    /// [`Dtype`](super::GpuErrorKind::Dtype) as [`argmax`];
    /// [`MaskMismatch`](super::GpuErrorKind::MaskMismatch) if `mask.len() != vocab`;
    /// [`EmptyMask`](super::GpuErrorKind::EmptyMask) if the mask allows nothing;
    /// [`Mlx`](super::GpuErrorKind::Mlx) if MLX rejects the graph.
    pub fn apply(&mut self, logits: &Array, mask: &TokenMask) -> Result<Array, GpuError> {
        let vocab = row_vocab(logits)?;
        check_mask(0, mask, vocab)?;
        let bias = self.bias(vocab);
        mask.write_bias(bias);
        let bias = Array::from_slice(bias, &[1, mlx_dim(vocab)]);
        // `[vocab] + [1, vocab]` broadcasts to `[1, vocab]`, so both shapes end as a `[1]` id.
        let biased = logits.add(&bias).map_err(GpuError::mlx("add bias"))?;
        last_axis_argmax(&biased)
    }

    /// [`apply`](Self::apply), then evaluate and read the token id on the host.
    ///
    /// # Errors
    /// As [`apply`](Self::apply), plus
    /// [`NoFiniteAllowedLogit`](super::GpuErrorKind::NoFiniteAllowedLogit) when every allowed
    /// token has a −inf or NaN logit (the argmax then names a forbidden token).
    pub fn apply_token(&mut self, logits: &Array, mask: &TokenMask) -> Result<TokenId, GpuError> {
        let id = token_id(&self.apply(logits, mask)?)?;
        if !mask.contains(id) {
            return Err(GpuError::no_finite_allowed(0, id.0));
        }
        Ok(id)
    }

    /// Masked argmax of each row of `[rows, vocab]` logits, row `r` under `masks[r]`
    /// → a lazy `[rows]` `i32` array. Rows are independent.
    ///
    /// `masks` may be `&[TokenMask]` or `&[&TokenMask]`.
    ///
    /// # Errors
    /// [`Shape`](super::GpuErrorKind::Shape) / [`Dtype`](super::GpuErrorKind::Dtype) for anything
    /// but non-empty 2-D floating logits; [`MaskMismatch`](super::GpuErrorKind::MaskMismatch) if
    /// `masks.len() != rows` or a mask's length differs from `vocab`;
    /// [`EmptyMask`](super::GpuErrorKind::EmptyMask) naming the first row whose mask allows
    /// nothing; [`Mlx`](super::GpuErrorKind::Mlx) if MLX rejects the graph.
    pub fn apply_rows<M: Borrow<TokenMask>>(
        &mut self,
        logits: &Array,
        masks: &[M],
    ) -> Result<Array, GpuError> {
        let (rows, vocab) = batch_dims(logits)?;
        if masks.len() != rows {
            return Err(GpuError::mask_count(masks.len(), rows));
        }
        for (row, mask) in masks.iter().enumerate() {
            check_mask(row, mask.borrow(), vocab)?;
        }
        let bias = self.bias(rows * vocab);
        for (chunk, mask) in bias.chunks_exact_mut(vocab).zip(masks) {
            mask.borrow().write_bias(chunk);
        }
        let bias = Array::from_slice(bias, &[mlx_dim(rows), mlx_dim(vocab)]);
        let biased = logits.add(&bias).map_err(GpuError::mlx("add bias"))?;
        last_axis_argmax(&biased)
    }

    /// [`apply_rows`](Self::apply_rows), then evaluate and write one token id per row into `out`
    /// (cleared first; its capacity is reused).
    ///
    /// # Errors
    /// As [`apply_rows`](Self::apply_rows), plus
    /// [`NoFiniteAllowedLogit`](super::GpuErrorKind::NoFiniteAllowedLogit) naming the first row
    /// whose allowed tokens all have −inf or NaN logits.
    pub fn apply_rows_tokens<M: Borrow<TokenMask>>(
        &mut self,
        logits: &Array,
        masks: &[M],
        out: &mut Vec<TokenId>,
    ) -> Result<(), GpuError> {
        let ids = self.apply_rows(logits, masks)?;
        token_ids_into(&ids, out)?;
        for (row, (&id, mask)) in out.iter().zip(masks).enumerate() {
            if !mask.borrow().contains(id) {
                return Err(GpuError::no_finite_allowed(row, id.0));
            }
        }
        Ok(())
    }
}

/// Checks one row's mask against the logits width and for at least one allowed token.
fn check_mask(row: usize, mask: &TokenMask, vocab: usize) -> Result<(), GpuError> {
    if mask.len() != vocab {
        return Err(GpuError::mask_len(row, mask.len(), vocab));
    }
    if mask.is_none_allowed() {
        return Err(GpuError::empty_mask(row));
    }
    Ok(())
}
