//! [`GpuError`]: everything that can go wrong on the device side of sampling.
//!
//! MLX reports problems as C++ exceptions that mlx-rs turns into `mlx_rs::error::Exception`
//! strings. Callers of grammask should not have to parse those, so the `gpu` module checks shapes,
//! dtypes and mask widths itself before building the MLX graph and names the offending shape or
//! dtype in the message; whatever MLX still rejects is wrapped with the operation that failed and
//! kept as the error's `source()`.

use std::fmt;

use mlx_rs::Dtype;

/// What kind of [`GpuError`] happened, for callers that branch on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GpuErrorKind {
    /// The logits array is not `[vocab]`, `[1, vocab]` (or `[rows, vocab]` for batch calls), or
    /// a host buffer does not hold exactly one float per logit.
    Shape,
    /// The logits dtype is not a floating type MLX can add an `f32` bias to.
    Dtype,
    /// A mask covers a different number of tokens than the logits row, or the number of masks
    /// differs from the number of rows.
    MaskMismatch,
    /// A mask allows no token at all, so there is nothing to pick.
    EmptyMask,
    /// Every allowed token has a `-inf` (or NaN) logit, so the argmax landed on a forbidden id.
    NoFiniteAllowedLogit,
    /// MLX itself rejected an operation (or its evaluation).
    Mlx,
}

/// An error from the MLX sampling path: a shape, dtype or mask problem, or an MLX exception.
///
/// Messages name the shapes and dtypes involved, e.g.
/// `logits shape [2, 10] is not [vocab] or [1, vocab]`.
pub struct GpuError {
    kind: Kind,
}

enum Kind {
    Shape { shape: Vec<i32>, expected: &'static str },
    BufferLen { shape: Vec<i32>, len: usize },
    Dtype { dtype: Dtype },
    MaskLen { row: usize, mask_len: usize, vocab: usize },
    MaskCount { masks: usize, rows: usize },
    EmptyMask { row: usize },
    NoFiniteAllowedLogit { row: usize, token: u32 },
    Mlx { op: &'static str, source: mlx_rs::error::Exception },
    Conversion { op: &'static str, source: mlx_rs::error::ConversionError },
    Slice { op: &'static str, source: mlx_rs::error::AsSliceError },
}

impl GpuError {
    /// The kind of error, for callers that want to branch on it.
    pub fn kind(&self) -> GpuErrorKind {
        match self.kind {
            Kind::Shape { .. } | Kind::BufferLen { .. } => GpuErrorKind::Shape,
            Kind::Dtype { .. } => GpuErrorKind::Dtype,
            Kind::MaskLen { .. } | Kind::MaskCount { .. } => GpuErrorKind::MaskMismatch,
            Kind::EmptyMask { .. } => GpuErrorKind::EmptyMask,
            Kind::NoFiniteAllowedLogit { .. } => GpuErrorKind::NoFiniteAllowedLogit,
            Kind::Mlx { .. } | Kind::Conversion { .. } | Kind::Slice { .. } => GpuErrorKind::Mlx,
        }
    }

    pub(crate) fn shape(shape: &[i32], expected: &'static str) -> GpuError {
        GpuError { kind: Kind::Shape { shape: shape.to_vec(), expected } }
    }

    pub(crate) fn buffer_len(shape: &[i32], len: usize) -> GpuError {
        GpuError { kind: Kind::BufferLen { shape: shape.to_vec(), len } }
    }

    pub(crate) fn dtype(dtype: Dtype) -> GpuError {
        GpuError { kind: Kind::Dtype { dtype } }
    }

    pub(crate) fn mask_len(row: usize, mask_len: usize, vocab: usize) -> GpuError {
        GpuError { kind: Kind::MaskLen { row, mask_len, vocab } }
    }

    pub(crate) fn mask_count(masks: usize, rows: usize) -> GpuError {
        GpuError { kind: Kind::MaskCount { masks, rows } }
    }

    pub(crate) fn empty_mask(row: usize) -> GpuError {
        GpuError { kind: Kind::EmptyMask { row } }
    }

    pub(crate) fn no_finite_allowed(row: usize, token: u32) -> GpuError {
        GpuError { kind: Kind::NoFiniteAllowedLogit { row, token } }
    }

    /// Wraps an MLX exception with the name of the operation that raised it.
    pub(crate) fn mlx(op: &'static str) -> impl FnOnce(mlx_rs::error::Exception) -> GpuError {
        move |source| GpuError { kind: Kind::Mlx { op, source } }
    }

    /// Wraps an MLX array-to-host conversion error with the name of the operation.
    pub(crate) fn conversion(
        op: &'static str,
    ) -> impl FnOnce(mlx_rs::error::ConversionError) -> GpuError {
        move |source| GpuError { kind: Kind::Conversion { op, source } }
    }

    /// Wraps an MLX error from borrowing an evaluated array as a host slice.
    pub(crate) fn slice(op: &'static str) -> impl FnOnce(mlx_rs::error::AsSliceError) -> GpuError {
        move |source| GpuError { kind: Kind::Slice { op, source } }
    }
}

impl fmt::Display for GpuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Shape { shape, expected } => {
                write!(f, "logits shape {shape:?} is not {expected}")
            }
            Kind::BufferLen { shape, len } => write!(
                f,
                "host buffer holds {len} floats but logits of shape {shape:?} have {}",
                shape.iter().map(|&d| d as i64).product::<i64>()
            ),
            Kind::Dtype { dtype } => write!(
                f,
                "logits dtype {dtype:?} is not supported (expected Float32, Bfloat16 or Float16)"
            ),
            Kind::MaskLen { row, mask_len, vocab } => write!(
                f,
                "mask for row {row} covers {mask_len} tokens but the logits row has {vocab}"
            ),
            Kind::MaskCount { masks, rows } => {
                write!(f, "{masks} masks given for {rows} logits rows (need one mask per row)")
            }
            Kind::EmptyMask { row } => write!(f, "mask for row {row} allows no token"),
            Kind::NoFiniteAllowedLogit { row, token } => write!(
                f,
                "every allowed token of row {row} has a -inf or NaN logit \
                 (argmax landed on forbidden token {token})"
            ),
            Kind::Mlx { op, source } => write!(f, "MLX {op} failed: {}", source.what()),
            Kind::Conversion { op, source } => write!(f, "MLX {op} failed: {source}"),
            Kind::Slice { op, source } => write!(f, "MLX {op} failed: {source}"),
        }
    }
}

impl fmt::Debug for GpuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GpuError({:?}: {self})", self.kind())
    }
}

impl std::error::Error for GpuError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            Kind::Mlx { source, .. } => Some(source),
            Kind::Conversion { source, .. } => Some(source),
            Kind::Slice { source, .. } => Some(source),
            _ => None,
        }
    }
}
