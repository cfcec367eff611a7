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

/// [`exp`] on eight lanes with AVX2: the same operations in the same order (no FMA), so every
/// lane equals the scalar function's result bit for bit (tested).
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2 {
    use super::{LN2_HI, LN2_LO, LOG2E, ROUND_MAGIC, UNDERFLOW};
    use std::arch::x86_64::*;

    /// `exp` of each lane; the caller must have checked for AVX2.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn exp8(x: __m256) -> __m256 {
        let u = _mm256_set1_ps(UNDERFLOW);
        // `x < UNDERFLOW`, false for NaN as in the scalar comparison.
        let low = _mm256_cmp_ps::<_CMP_LT_OQ>(x, u);
        let xc = _mm256_blendv_ps(x, u, low);
        let magic = _mm256_set1_ps(ROUND_MAGIC);
        let t = _mm256_add_ps(_mm256_mul_ps(xc, _mm256_set1_ps(LOG2E)), magic);
        let n = _mm256_sub_ps(t, magic);
        let r = _mm256_sub_ps(
            _mm256_sub_ps(xc, _mm256_mul_ps(n, _mm256_set1_ps(LN2_HI))),
            _mm256_mul_ps(n, _mm256_set1_ps(LN2_LO)),
        );
        let mut p = _mm256_set1_ps(1.987_569_1e-4);
        for c in [1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 1.666_666_5e-1, 0.5] {
            p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(c));
        }
        let y = _mm256_add_ps(
            _mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(p, r), r), r),
            _mm256_set1_ps(1.0),
        );
        let ni = _mm256_sub_epi32(
            _mm256_castps_si256(t),
            _mm256_set1_epi32(ROUND_MAGIC.to_bits() as i32),
        );
        let h = _mm256_srai_epi32::<1>(ni);
        let bias = _mm256_set1_epi32(127);
        let s1 = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(h, bias)));
        let s2 = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(
            _mm256_sub_epi32(ni, h),
            bias,
        )));
        let v = _mm256_mul_ps(_mm256_mul_ps(y, s1), s2);
        _mm256_andnot_ps(low, v)
    }

    /// Add the eight lanes of `e`, widened to `f64`, to the lane sums `acc` (lanes 0–3 in
    /// `acc[0]`, 4–7 in `acc[1]`): lane `j` receives exactly `f64::from(e[j])`, as the scalar
    /// loops' `lanes[j] += f64::from(e)` does.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn add_lanes(acc: &mut [__m256d; 2], e: __m256) {
        acc[0] = _mm256_add_pd(acc[0], _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        acc[1] = _mm256_add_pd(acc[1], _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(e)));
    }

    /// The lane sums of [`add_lanes`] as an array, lane `j` at index `j`.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn lanes(acc: [__m256d; 2]) -> [f64; 8] {
        let mut out = [0.0f64; 8];
        _mm256_storeu_pd(out.as_mut_ptr(), acc[0]);
        _mm256_storeu_pd(out.as_mut_ptr().add(4), acc[1]);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn eight_lanes_equal_the_scalar_function_bit_for_bit() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            return;
        }
        let mut xs: Vec<f32> = (-2_000_000..2_000_000).map(|i| i as f32 * 6.0e-5).collect();
        xs.extend([f32::NEG_INFINITY, -1e30, -104.5, -103.97, 88.0, 88.7, 0.0, -0.0, f32::NAN]);
        while !xs.len().is_multiple_of(8) {
            xs.push(1.0);
        }
        for c in xs.chunks_exact(8) {
            let mut got = [0.0f32; 8];
            // SAFETY: AVX2 checked above.
            unsafe {
                use std::arch::x86_64::*;
                let v = avx2::exp8(_mm256_loadu_ps(c.as_ptr()));
                _mm256_storeu_ps(got.as_mut_ptr(), v);
            }
            for (x, g) in c.iter().zip(got) {
                assert_eq!(exp(*x).to_bits(), g.to_bits(), "exp({x})");
            }
        }
    }

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
