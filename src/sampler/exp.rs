//! A vectorisable `exp` for the softmax and log-sum-exp loops.
//!
//! `f32::exp` is a libm call per element and dominates a 152k-token softmax (~1 ms). This is the
//! Cephes `expf` range reduction and degree-6 polynomial (Moshier 1992), written branch-free so
//! the loops auto-vectorise on baseline x86-64 (SSE2: rounding by the 1.5·2²³ magic constant,
//! no `roundps`). The scale 2ⁿ is applied as two factors so results in the subnormal range
//! are still produced (rounded once), matching libm's support: `exp(x)` is non-zero exactly
//! for `x >= -103.97`. Accuracy: within 2 ulp of the correctly rounded result on
//! `[-103, 88]`, tested against `f64::exp`.

const LOG2E: f32 = std::f32::consts::LOG2_E;
/// ln 2 split in two so `x − n·ln2` is exact for the `n` we meet (Cody & Waite 1980).
/// `LN2_HI` is 355/512, exactly representable (clippy cannot tell).
#[allow(clippy::excessive_precision)]
const LN2_HI: f32 = 0.693_359_375;
const LN2_LO: f32 = -2.121_944_4e-4;
/// Adding then subtracting 1.5·2²³ rounds an `f32` of magnitude < 2²² to the nearest integer.
const ROUND_MAGIC: f32 = 12_582_912.0;
/// Below this, `exp` underflows to zero even as a subnormal.
const UNDERFLOW: f32 = -104.0;

/// `e^x` for `x <= 88`; `-inf` and anything below −104 give `0.0`. Not for NaN input.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    let xc = if x < UNDERFLOW { UNDERFLOW } else { x };
    let t = xc * LOG2E + ROUND_MAGIC;
    let n = t - ROUND_MAGIC;
    let r = xc - n * LN2_HI - n * LN2_LO;
    let mut p = 1.987_569_1e-4f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    // Cephes writes 5.0000001e-1, which is 0.5 in f32.
    p = p * r + 0.5;
    let y = p * r * r + r + 1.0;
    // The integer n sits in the low mantissa bits of `t` (no saturating float→int cast, which
    // would not vectorise).
    let ni = (t.to_bits() as i32) - ROUND_MAGIC.to_bits() as i32;
    let h = ni >> 1;
    let s1 = f32::from_bits(((h + 127) as u32) << 23);
    let s2 = f32::from_bits(((ni - h + 127) as u32) << 23);
    let v = y * s1 * s2;
    if x < UNDERFLOW {
        0.0
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_to_libm() {
        let mut x = -103.0f32;
        let mut worst = 0.0f64;
        while x < 88.0 {
            let want = f64::from(x).exp();
            let got = f64::from(exp(x));
            let ulp = f64::from(f32::EPSILON) * want.max(f64::from(f32::MIN_POSITIVE));
            worst = worst.max((got - want).abs() / ulp);
            x += 0.000_37;
        }
        assert!(worst <= 2.0, "worst error {worst} ulp");
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(-200.0), 0.0);
        assert_eq!(exp(0.0), 1.0);
        assert!(exp(-103.5) > 0.0, "subnormal results are kept");
    }
}
