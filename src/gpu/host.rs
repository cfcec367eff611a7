//! The device→host logits transfer that starts the temperature > 0 (host) sampling path.
//!
//! The seed design keeps exactly one GPU→host transfer per sampled step: the logits row crosses
//! once, as f32, and everything after it (mask, penalties, softmax, top-p/k, the draw) is host
//! code. bf16/f16 logits are converted to f32 on the device as part of that same evaluation, so
//! the host never sees a 16-bit float. The destination is a caller-owned buffer, reused across
//! steps.

use mlx_rs::{error::AsSliceError, Array, Dtype};

use super::argmax::check_dtype;
use super::error::GpuError;

/// Evaluates `logits` and hands `f` its values as f32, row-major, converting on the device if
/// needed. Non-contiguous views (e.g. the last position sliced out of `[batch, seq, vocab]`) are
/// made contiguous first.
fn with_host_f32<R>(logits: &Array, f: impl FnOnce(&[f32]) -> R) -> Result<R, GpuError> {
    check_dtype(logits)?;
    if logits.size() == 0 {
        return Err(GpuError::shape(logits.shape(), "a non-empty array"));
    }
    let converted;
    let src = if logits.dtype() == Dtype::Float32 {
        logits
    } else {
        converted = logits.as_dtype(Dtype::Float32).map_err(GpuError::mlx("astype(float32)"))?;
        &converted
    };
    match src.try_as_slice::<f32>() {
        Ok(values) => Ok(f(values)),
        Err(AsSliceError::NotContiguous) => {
            let dense = src.contiguous().map_err(GpuError::mlx("contiguous"))?;
            let values = dense.try_as_slice::<f32>().map_err(GpuError::slice("read logits"))?;
            Ok(f(values))
        }
        Err(e) => Err(GpuError::slice("read logits")(e)),
    }
}

/// Copies `logits` (any non-empty shape, typically `[1, vocab]` or `[vocab]`; f32, bf16 or f16)
/// to the host as f32 into `out`, row-major. `out` is cleared first and its capacity reused, so
/// a decode loop that keeps one `Vec` allocates once.
///
/// This evaluates the lazy graph that produced the logits: it is the step's one device→host
/// transfer.
///
/// # Errors
/// [`GpuErrorKind::Dtype`](super::GpuErrorKind::Dtype) for non-floating logits,
/// [`GpuErrorKind::Shape`](super::GpuErrorKind::Shape) for an empty array,
/// [`GpuErrorKind::Mlx`](super::GpuErrorKind::Mlx) if evaluation fails.
///
/// # Example
/// ```
/// use grammask::gpu;
/// use mlx_rs::{Array, Dtype};
///
/// let logits = Array::from_slice(&[1.0f32, -2.5, 0.25], &[1, 3]).as_dtype(Dtype::Bfloat16)?;
/// let mut host = Vec::new();
/// gpu::logits_to_host(&logits, &mut host)?;
/// assert_eq!(host, [1.0, -2.5, 0.25]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn logits_to_host(logits: &Array, out: &mut Vec<f32>) -> Result<(), GpuError> {
    with_host_f32(logits, |values| {
        out.clear();
        out.extend_from_slice(values);
    })
}

/// Copies `logits` to the host as f32 into a caller slice of exactly `logits.size()` floats.
///
/// # Errors
/// As [`logits_to_host`], plus [`GpuErrorKind::Shape`](super::GpuErrorKind::Shape) when
/// `out.len()` differs from the number of logits (the message names both).
pub fn logits_to_host_slice(logits: &Array, out: &mut [f32]) -> Result<(), GpuError> {
    if out.len() != logits.size() {
        return Err(GpuError::buffer_len(logits.shape(), out.len()));
    }
    with_host_f32(logits, |values| out.copy_from_slice(values))
}
