//! Quantised weights and the dot-product kernels the forward pass spends its time in.
//!
//! Weights stay in their GGUF blocks (ggml `ggml-common.h` layouts): Q4_0 (18 bytes per 32
//! weights: an f16 scale `d`, 16 bytes of nibbles, weight = `d·(q − 8)`), Q4_1 (20 bytes: `d`,
//! an f16 minimum `m`, 16 bytes of nibbles, weight = `d·q + m`) and Q8_0 (34 bytes: `d`, 32
//! signed bytes). Low nibbles are weights 0..16 of a block, high nibbles 16..32. F32 and F16
//! tensors are widened to `f32` at load.
//!
//! Activations are quantised per 32-block to signed bytes with an f32 scale ([`BlockQ8`], the
//! `Q8_1` idea of llama.cpp: the block also keeps `d·Σq`, so the Q4_1 minimum costs one
//! multiply per block). A Q4_1 block dot is then
//!
//! ```text
//! Σ_j (d_w q_j + m_w)(d_x x_j) = d_w d_x Σ_j q_j x_j + m_w · (d_x Σ_j x_j)
//! ```
//!
//! and Q4_0 is the same with `m_w = −8 d_w`. The integer sum is one `vpmaddubsw` (unsigned
//! nibbles × signed bytes, no saturation: 2·15·127 < 2¹⁵) and one `vpmaddwd` per block in the
//! AVX2 kernels, which are picked at run time (`is_x86_feature_detected!`: AVX2, FMA, F16C), so
//! the crate builds for the default x86-64 target and needs no `target-cpu` flag; the scalar
//! kernels are the reference they are tested against and the fallback elsewhere.

/// A 32-element activation block: `x_j ≈ d · qs[j]`, `s = d · Σ qs`.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(8))]
pub(crate) struct BlockQ8 {
    pub d: f32,
    pub s: f32,
    pub qs: [i8; 32],
}

impl Default for BlockQ8 {
    fn default() -> Self {
        BlockQ8 { d: 0.0, s: 0.0, qs: [0; 32] }
    }
}

/// Elements per block, for every quantised type here.
pub(crate) const QK: usize = 32;

/// The quantised storage types the kernels run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QType {
    Q4_0,
    Q4_1,
    Q8_0,
}

impl QType {
    pub fn from_ggml(t: u32) -> Option<QType> {
        match t {
            2 => Some(QType::Q4_0),
            3 => Some(QType::Q4_1),
            8 => Some(QType::Q8_0),
            _ => None,
        }
    }

    /// Bytes per 32-element block.
    pub fn block_bytes(self) -> usize {
        match self {
            QType::Q4_0 => 18,
            QType::Q4_1 => 20,
            QType::Q8_0 => 34,
        }
    }
}

/// IEEE half to single precision (the software path; the AVX2 kernels use F16C).
#[inline]
pub(crate) fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1F);
    let man = u32::from(h & 0x3FF);
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, _) => {
            // Subnormal: normalise the mantissa.
            let mut e = 127 - 15 + 1;
            let mut m = man;
            while m & 0x400 == 0 {
                m <<= 1;
                e -= 1;
            }
            sign | ((e as u32) << 23) | ((m & 0x3FF) << 13)
        }
        (0x1F, _) => sign | 0x7F80_0000 | (man << 13),
        _ => sign | ((exp + 127 - 15) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

#[inline]
fn read_f16(b: &[u8], at: usize) -> f32 {
    f16_to_f32(u16::from_le_bytes([b[at], b[at + 1]]))
}

/// Quantise `x` (a multiple of 32 long) into `out` (`x.len() / 32` blocks).
pub(crate) fn quantize_q8(x: &[f32], out: &mut [BlockQ8]) {
    debug_assert_eq!(x.len(), out.len() * QK);
    for (b, chunk) in out.iter_mut().zip(x.chunks_exact(QK)) {
        let amax = chunk.iter().fold(0.0f32, |a, &v| a.max(v.abs()));
        let d = amax / 127.0;
        let id = if d > 0.0 { 1.0 / d } else { 0.0 };
        let mut sum = 0i32;
        for (q, &v) in b.qs.iter_mut().zip(chunk) {
            let r = (v * id).round() as i32;
            *q = r as i8;
            sum += r;
        }
        b.d = d;
        b.s = d * sum as f32;
    }
}

/// Dequantise one row (`cols` weights) of type `ty` from its blocks.
pub(crate) fn dequantize_row(ty: QType, row: &[u8], out: &mut [f32]) {
    let bb = ty.block_bytes();
    for (blk, o) in row.chunks_exact(bb).zip(out.chunks_exact_mut(QK)) {
        let d = read_f16(blk, 0);
        match ty {
            QType::Q4_0 | QType::Q4_1 => {
                let (m, qs) = if ty == QType::Q4_1 {
                    (read_f16(blk, 2), &blk[4..20])
                } else {
                    (-8.0 * d, &blk[2..18])
                };
                for j in 0..16 {
                    o[j] = f32::from(qs[j] & 0x0F) * d + m;
                    o[j + 16] = f32::from(qs[j] >> 4) * d + m;
                }
            }
            QType::Q8_0 => {
                for j in 0..32 {
                    o[j] = f32::from(blk[2 + j] as i8) * d;
                }
            }
        }
    }
}

/// The scalar dot of one weight row with quantised activations (the reference kernel).
pub(crate) fn dot_scalar(ty: QType, row: &[u8], x: &[BlockQ8]) -> f32 {
    let bb = ty.block_bytes();
    let mut acc = 0.0f32;
    for (blk, xb) in row.chunks_exact(bb).zip(x) {
        let d = read_f16(blk, 0);
        match ty {
            QType::Q4_0 | QType::Q4_1 => {
                let (m, qs) = if ty == QType::Q4_1 {
                    (read_f16(blk, 2), &blk[4..20])
                } else {
                    (-8.0 * d, &blk[2..18])
                };
                let mut isum = 0i32;
                for (j, &q) in qs.iter().enumerate() {
                    isum += i32::from(q & 0x0F) * i32::from(xb.qs[j]);
                    isum += i32::from(q >> 4) * i32::from(xb.qs[j + 16]);
                }
                acc += d * xb.d * isum as f32 + m * xb.s;
            }
            QType::Q8_0 => {
                let mut isum = 0i32;
                for j in 0..32 {
                    isum += i32::from(blk[2 + j] as i8) * i32::from(xb.qs[j]);
                }
                acc += d * xb.d * isum as f32;
            }
        }
    }
    acc
}

/// A plain f32 dot product, written with eight accumulators so it vectorises.
#[inline]
pub(crate) fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (ac, bc) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ac.remainder().iter().zip(bc.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ac.zip(bc) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// True when the AVX2 kernels can run here (checked once by the caller and kept).
pub(crate) fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `out[r] = row_r · x` for the rows `first..first + out.len()` of a `ty` matrix whose rows
/// are `row_bytes` long, with the AVX2 kernel when `simd`.
pub(crate) fn matvec_rows(
    ty: QType,
    data: &[u8],
    row_bytes: usize,
    first: usize,
    x: &[BlockQ8],
    out: &mut [f32],
    simd: bool,
) {
    #[cfg(target_arch = "x86_64")]
    if simd {
        // SAFETY: `simd` is only true when `has_avx2()` found AVX2, FMA and F16C.
        unsafe { avx2::matvec_rows(ty, data, row_bytes, first, x, out) };
        return;
    }
    let _ = simd;
    for (i, o) in out.iter_mut().enumerate() {
        let r = first + i;
        *o = dot_scalar(ty, &data[r * row_bytes..(r + 1) * row_bytes], x);
    }
}

/// `out[t][r] = row_r · x_t` for several activation vectors: the weight row is read once into
/// cache and reused for every `x_t` (prefill). `xs` holds `n_tok` vectors of `nb` blocks, `out`
/// is `[rows][n_tok]`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn matmul_rows(
    ty: QType,
    data: &[u8],
    row_bytes: usize,
    first: usize,
    xs: &[BlockQ8],
    nb: usize,
    out: &mut [f32],
    simd: bool,
) {
    let n_tok = xs.len() / nb;
    for (i, o) in out.chunks_exact_mut(n_tok).enumerate() {
        let r = first + i;
        let row = &data[r * row_bytes..(r + 1) * row_bytes];
        #[cfg(target_arch = "x86_64")]
        if simd {
            // SAFETY: as in `matvec_rows`.
            unsafe { avx2::dot_many(ty, row, xs, nb, o) };
            continue;
        }
        let _ = simd;
        for (t, v) in o.iter_mut().enumerate() {
            *v = dot_scalar(ty, row, &xs[t * nb..(t + 1) * nb]);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    //! The AVX2/FMA/F16C kernels (ggml's `ggml_vec_dot_q4_1_q8_1` scheme).
    use super::{BlockQ8, QType};
    use std::arch::x86_64::*;

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn f16(p: *const u8) -> f32 {
        let h = u16::from_le_bytes([*p, *p.add(1)]);
        _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(h))))
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn hsum(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_movehdup_ps(s));
        _mm_cvtss_f32(s)
    }

    /// One row against one activation vector.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn dot(ty: QType, row: &[u8], x: &[BlockQ8]) -> f32 {
        let bb = ty.block_bytes();
        debug_assert!(row.len() >= x.len() * bb);
        let p = row.as_ptr();
        let mut acc = _mm256_setzero_ps();
        let mut mins = 0.0f32;
        let low = _mm256_set1_epi8(0x0F);
        let ones = _mm256_set1_epi16(1);
        for (i, xb) in x.iter().enumerate() {
            let b = p.add(i * bb);
            let qx = _mm256_loadu_si256(xb.qs.as_ptr() as *const __m256i);
            let d = f16(b);
            let prod = match ty {
                QType::Q4_0 | QType::Q4_1 => {
                    let (m, qs) = if ty == QType::Q4_1 {
                        (f16(b.add(2)), b.add(4))
                    } else {
                        (-8.0 * d, b.add(2))
                    };
                    mins += m * xb.s;
                    let q = _mm_loadu_si128(qs as *const __m128i);
                    let qw = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), low);
                    _mm256_maddubs_epi16(qw, qx)
                }
                QType::Q8_0 => {
                    let qw = _mm256_loadu_si256(b.add(2) as *const __m256i);
                    _mm256_maddubs_epi16(_mm256_sign_epi8(qw, qw), _mm256_sign_epi8(qx, qw))
                }
            };
            let f = _mm256_cvtepi32_ps(_mm256_madd_epi16(prod, ones));
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d * xb.d), f, acc);
        }
        hsum(acc) + mins
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn matvec_rows(
        ty: QType,
        data: &[u8],
        row_bytes: usize,
        first: usize,
        x: &[BlockQ8],
        out: &mut [f32],
    ) {
        for (i, o) in out.iter_mut().enumerate() {
            let r = first + i;
            *o = dot(ty, &data[r * row_bytes..(r + 1) * row_bytes], x);
        }
    }

    /// One row against four activation vectors (`xs[t * nb..]`, t = 0..4): each weight block
    /// is loaded and unpacked once for the four (prefill).
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn dot4(ty: QType, row: &[u8], xs: &[BlockQ8], nb: usize) -> [f32; 4] {
        let bb = ty.block_bytes();
        assert!(row.len() >= nb * bb && xs.len() >= 4 * nb);
        let p = row.as_ptr();
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut mins = [0.0f32; 4];
        let low = _mm256_set1_epi8(0x0F);
        let ones = _mm256_set1_epi16(1);
        for i in 0..nb {
            let b = p.add(i * bb);
            let d = f16(b);
            let (qw, m) = match ty {
                QType::Q4_0 | QType::Q4_1 => {
                    let (m, qs) = if ty == QType::Q4_1 {
                        (f16(b.add(2)), b.add(4))
                    } else {
                        (-8.0 * d, b.add(2))
                    };
                    let q = _mm_loadu_si128(qs as *const __m128i);
                    (_mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), low), m)
                }
                QType::Q8_0 => (_mm256_loadu_si256(b.add(2) as *const __m256i), 0.0),
            };
            let absw = _mm256_sign_epi8(qw, qw);
            for t in 0..4 {
                let xb = &xs[t * nb + i];
                let qx = _mm256_loadu_si256(xb.qs.as_ptr() as *const __m256i);
                let prod = match ty {
                    QType::Q8_0 => _mm256_maddubs_epi16(absw, _mm256_sign_epi8(qx, qw)),
                    _ => _mm256_maddubs_epi16(qw, qx),
                };
                mins[t] += m * xb.s;
                let f = _mm256_cvtepi32_ps(_mm256_madd_epi16(prod, ones));
                acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * xb.d), f, acc[t]);
            }
        }
        [
            hsum(acc[0]) + mins[0],
            hsum(acc[1]) + mins[1],
            hsum(acc[2]) + mins[2],
            hsum(acc[3]) + mins[3],
        ]
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn dot_many(
        ty: QType,
        row: &[u8],
        xs: &[BlockQ8],
        nb: usize,
        out: &mut [f32],
    ) {
        let n = out.len();
        let mut t = 0;
        while t + 4 <= n {
            let r = dot4(ty, row, &xs[t * nb..(t + 4) * nb], nb);
            out[t..t + 4].copy_from_slice(&r);
            t += 4;
        }
        for (k, o) in out[t..].iter_mut().enumerate() {
            *o = dot(ty, row, &xs[(t + k) * nb..(t + k + 1) * nb]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rand_bytes(n: usize, seed: u64) -> Vec<u8> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (s >> 56) as u8
            })
            .collect()
    }

    /// Blocks with sane f16 scales (random bytes would make NaN/inf scales).
    fn rand_row(ty: QType, nb: usize, seed: u64) -> Vec<u8> {
        let mut row = rand_bytes(nb * ty.block_bytes(), seed);
        for b in row.chunks_exact_mut(ty.block_bytes()) {
            b[0..2].copy_from_slice(&0x2C00u16.to_le_bytes()); // 0.0625
            if ty == QType::Q4_1 {
                b[2..4].copy_from_slice(&0xB800u16.to_le_bytes()); // -0.5
            }
        }
        row
    }

    #[test]
    fn f16_conversion_matches_known_values() {
        assert_eq!(f16_to_f32(0x3C00), 1.0);
        assert_eq!(f16_to_f32(0xC000), -2.0);
        assert_eq!(f16_to_f32(0x2C00), 0.0625);
        assert_eq!(f16_to_f32(0x0001), 5.960_464_5e-8);
        assert!(f16_to_f32(0x7C00).is_infinite());
    }

    #[test]
    fn kernels_agree_with_dequantised_dot() {
        let nb = 18;
        let x: Vec<f32> = (0..nb * QK).map(|i| ((i * 37 % 101) as f32 - 50.0) / 17.0).collect();
        let mut xq = vec![BlockQ8::default(); nb];
        quantize_q8(&x, &mut xq);
        let mut xd = vec![0.0f32; nb * QK];
        for (b, o) in xq.iter().zip(xd.chunks_exact_mut(QK)) {
            for (v, &q) in o.iter_mut().zip(&b.qs) {
                *v = b.d * f32::from(q);
            }
        }
        for ty in [QType::Q4_0, QType::Q4_1, QType::Q8_0] {
            let row = rand_row(ty, nb, 9);
            let mut w = vec![0.0f32; nb * QK];
            dequantize_row(ty, &row, &mut w);
            let want = dot_f32(&w, &xd);
            let scalar = dot_scalar(ty, &row, &xq);
            assert!((scalar - want).abs() < 1e-3 * want.abs().max(1.0), "{ty:?} {scalar} {want}");
            if has_avx2() {
                // Six copies of x: one tile of four plus two singles in `dot_many`.
                let xs: Vec<BlockQ8> = (0..6).flat_map(|_| xq.iter().copied()).collect();
                let mut many = vec![0.0f32; 6];
                matmul_rows(ty, &row, row.len(), 0, &xs, nb, &mut many, true);
                for v in many {
                    assert!((v - scalar).abs() < 1e-3 * scalar.abs().max(1.0), "{ty:?} tile");
                }
                let mut out = [0.0f32; 1];
                matvec_rows(ty, &row, row.len(), 0, &xq, &mut out, true);
                assert!((out[0] - scalar).abs() < 1e-3 * scalar.abs().max(1.0), "{ty:?}");
            }
        }
    }
}
