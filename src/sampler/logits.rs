//! The logits row as the sampler receives it: `f32`, or bf16 as raw bits.
//!
//! Models emit either dtype; the sampler reads both without the caller converting first. bf16
//! is the top half of an IEEE-754 binary32, so widening is a 16-bit shift — no `half` crate.

/// Widen one bf16 value (raw bits) to `f32`. Exact: every bf16 is an `f32`.
///
/// # Example
/// ```
/// use grammask::sampler::bf16_to_f32;
/// assert_eq!(bf16_to_f32(0x3f80), 1.0);
/// assert_eq!(bf16_to_f32(0xff80), f32::NEG_INFINITY);
/// ```
#[inline]
pub fn bf16_to_f32(bits: u16) -> f32 {
    f32::from_bits(u32::from(bits) << 16)
}

/// Narrow an `f32` to bf16 bits, rounding to nearest-even (NaN stays NaN). For tests and
/// fixtures; the sampler itself only widens.
pub fn f32_to_bf16(x: f32) -> u16 {
    let bits = x.to_bits();
    if x.is_nan() {
        return ((bits >> 16) as u16) | 0x0040;
    }
    let round = 0x7fff + ((bits >> 16) & 1);
    (bits.wrapping_add(round) >> 16) as u16
}

/// One row of logits, `[vocab]`, borrowed from the caller.
#[derive(Clone, Copy, Debug)]
pub enum Logits<'a> {
    /// 32-bit floats.
    F32(&'a [f32]),
    /// bf16 values as their raw 16-bit patterns (the top half of the `f32` bits).
    Bf16(&'a [u16]),
}

impl<'a> From<&'a [f32]> for Logits<'a> {
    fn from(v: &'a [f32]) -> Self {
        Logits::F32(v)
    }
}

impl<'a> From<&'a Vec<f32>> for Logits<'a> {
    fn from(v: &'a Vec<f32>) -> Self {
        Logits::F32(v)
    }
}

impl<'a> Logits<'a> {
    /// Number of logits (the vocabulary size).
    #[inline]
    pub fn len(&self) -> usize {
        match self {
            Logits::F32(v) => v.len(),
            Logits::Bf16(v) => v.len(),
        }
    }

    /// True when the row is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The logit at `i` as `f32`.
    ///
    /// # Panics
    /// Panics if `i >= len()`.
    #[inline]
    pub fn get(&self, i: usize) -> f32 {
        match self {
            Logits::F32(v) => v[i],
            Logits::Bf16(v) => bf16_to_f32(v[i]),
        }
    }

    /// Copy (widening bf16) the row into `out`, which must have the same length.
    ///
    /// # Panics
    /// Panics if `out.len() != self.len()`.
    pub fn load_into(&self, out: &mut [f32]) {
        assert_eq!(out.len(), self.len(), "logits buffer length mismatch");
        match self {
            Logits::F32(v) => out.copy_from_slice(v),
            Logits::Bf16(v) => {
                for (o, &b) in out.iter_mut().zip(v.iter()) {
                    *o = bf16_to_f32(b);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_round_trip() {
        for x in [0.0f32, -0.0, 1.0, -2.5, 65280.0, f32::INFINITY, f32::NEG_INFINITY] {
            assert_eq!(bf16_to_f32(f32_to_bf16(x)), x);
        }
        assert!(bf16_to_f32(f32_to_bf16(f32::NAN)).is_nan());
        // 1 + 2^-8 is exactly halfway between two bf16 values and rounds to even (1.0).
        assert_eq!(bf16_to_f32(f32_to_bf16(1.0 + 1.0 / 256.0)), 1.0);
    }
}
