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
//!
//! With AVX2 the Q4_0/Q4_1 matrices of the transformer blocks are repacked at load into groups
//! of eight rows ([`pack8`], the idea of llama.cpp's `Q4_0_8x8` layouts, in place: the same
//! bytes): per block, the eight rows' scales side by side, then four 32-byte words whose lane
//! `r` holds four quant bytes of row `r`. One broadcast of four activation bytes then feeds a
//! `vpmaddubsw` for eight rows at once, the products of a whole block stay in 16-bit lanes
//! (|Σ| ≤ 16·15·127 < 2¹⁵), and the block's scales are one vector multiply for the eight rows
//! — instead of a widening, a conversion and a scalar broadcast per row. A tile of eight rows
//! × up to four tokens ([`matmul_packed`]) unpacks each weight word once for all its tokens.

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

/// Quantise `x` (a multiple of 32 long) into `out` (`x.len() / 32` blocks), rounding to
/// nearest, ties to even. The AVX2 kernel (when `simd`) gives the same bytes and scales for
/// finite input: the same IEEE operations, vectorised.
pub(crate) fn quantize_q8(x: &[f32], out: &mut [BlockQ8], simd: bool) {
    debug_assert_eq!(x.len(), out.len() * QK);
    #[cfg(target_arch = "x86_64")]
    if simd && has_avx2() {
        // SAFETY: AVX2 is present (checked just above); the kernel reads whole 32-blocks of
        // `x` for the blocks of `out` only.
        unsafe { avx2::quantize_q8(x, out) };
        return;
    }
    let _ = simd;
    for (b, chunk) in out.iter_mut().zip(x.chunks_exact(QK)) {
        let amax = chunk.iter().fold(0.0f32, |a, &v| a.max(v.abs()));
        let d = amax / 127.0;
        let id = if d > 0.0 { 1.0 / d } else { 0.0 };
        let mut sum = 0i32;
        for (q, &v) in b.qs.iter_mut().zip(chunk) {
            let r = (v * id).round_ties_even() as i32;
            *q = r as i8;
            sum += r;
        }
        b.d = d;
        b.s = d * sum as f32;
    }
}

/// `a · b` in f32 (the attention scores), with AVX2/FMA when `simd`.
#[inline]
pub(crate) fn dot(a: &[f32], b: &[f32], simd: bool) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if simd && has_avx2() {
        // SAFETY: AVX2 and FMA are present (checked just above; the check is a cached load).
        return unsafe { avx2::dot_f32(a, b) };
    }
    let _ = simd;
    dot_f32(a, b)
}

/// One query head's attention over `len` cached positions: `out = Σ_j p_j v_j` with `p` the
/// softmax of `scale · q·k_j`, where `k_j = keys[j·stride..][..q.len()]` and `v_j` likewise in
/// `values` (a head's slice of the KV cache). `scores` is scratch of at least `len` floats.
/// With AVX2 and 64-wide heads, one kernel keeps `q` and the output in registers (four keys
/// per step, the weighted sum without a load and store of the output per position); the
/// general path is the dot/axpy loop it is tested against.
#[allow(clippy::too_many_arguments)]
pub(crate) fn attend_head(
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    stride: usize,
    len: usize,
    scale: f32,
    scores: &mut [f32],
    out: &mut [f32],
    simd: bool,
) {
    let hd = q.len();
    assert!(len >= 1 && out.len() == hd && scores.len() >= len && stride >= hd);
    assert!(keys.len() >= (len - 1) * stride + hd && values.len() >= (len - 1) * stride + hd);
    #[cfg(target_arch = "x86_64")]
    if simd && hd == 64 && has_avx2() {
        // SAFETY: AVX2/FMA present; every k_j, v_j and the scores are in bounds (asserted).
        unsafe { avx2::attend_head64(q, keys, values, stride, len, scale, scores, out) };
        return;
    }
    let sc = &mut scores[..len];
    let mut max = f32::NEG_INFINITY;
    for (j, v) in sc.iter_mut().enumerate() {
        *v = dot(q, &keys[j * stride..j * stride + hd], simd) * scale;
        max = max.max(*v);
    }
    let mut sum = 0.0;
    for v in sc.iter_mut() {
        *v = crate::sampler::exp::exp(*v - max);
        sum += *v;
    }
    out.fill(0.0);
    for (j, &w) in sc.iter().enumerate() {
        axpy(out, w, &values[j * stride..j * stride + hd], simd);
    }
    let inv = 1.0 / sum;
    for o in out.iter_mut() {
        *o *= inv;
    }
}

/// Query heads that share one key/value head (grouped-query attention): `q` and `out` hold
/// `q.len() / hd` heads of `hd` side by side, each attended as by [`attend_head`] over the same
/// keys and values. `scores` is scratch of at least `HEADS_PER_PASS · len` floats. With the
/// AVX-512 kernel and 64-wide heads, up to three heads go through the keys and values in one
/// pass (each key and value row loaded once for all of them, 16-wide); otherwise one head at
/// a time.
#[allow(clippy::too_many_arguments)]
pub(crate) fn attend_heads(
    q: &[f32],
    hd: usize,
    keys: &[f32],
    values: &[f32],
    stride: usize,
    len: usize,
    scale: f32,
    scores: &mut [f32],
    out: &mut [f32],
    kernel: DotKernel,
) {
    let heads = q.len() / hd;
    assert!(len >= 1 && hd >= 1 && q.len() == heads * hd && out.len() == q.len());
    #[cfg(target_arch = "x86_64")]
    if kernel == DotKernel::Avx512Vnni && hd == 64 {
        assert!(stride >= hd && scores.len() >= HEADS_PER_PASS.min(heads) * len);
        assert!(keys.len() >= (len - 1) * stride + hd && values.len() >= (len - 1) * stride + hd);
        assert!(kernel.is_available());
        let mut h = 0;
        while h < heads {
            let g = (heads - h).min(HEADS_PER_PASS);
            let (qp, op) = (q[h * hd..].as_ptr(), out[h * hd..(h + g) * hd].as_mut_ptr());
            let (kp, vp, sp) = (keys.as_ptr(), values.as_ptr(), scores.as_mut_ptr());
            // SAFETY: AVX-512F is present (asserted); the kernel reads `g` heads of `q` from
            // `qp` and writes `g` heads of `out` from `op` (in bounds: `h + g ≤ heads`), keys
            // and values at `j · stride + 0..64` for `j < len` (asserted above), and scores
            // `0..g · len` (asserted above).
            unsafe {
                match g {
                    3 => avx512::attend64::<3>(qp, kp, vp, stride, len, scale, sp, op),
                    2 => avx512::attend64::<2>(qp, kp, vp, stride, len, scale, sp, op),
                    _ => avx512::attend64::<1>(qp, kp, vp, stride, len, scale, sp, op),
                }
            }
            h += g;
        }
        return;
    }
    let simd = kernel.simd();
    for (qh, o) in q.chunks_exact(hd).zip(out.chunks_exact_mut(hd)) {
        attend_head(qh, keys, values, stride, len, scale, scores, o, simd);
    }
}

/// Heads of one key/value group that [`attend_heads`]' AVX-512 kernel takes in one pass (its
/// queries and accumulators fill 24 of the 32 vector registers).
pub(crate) const HEADS_PER_PASS: usize = 3;

/// `o += w · v` (the attention's weighted values), with AVX2/FMA when `simd`.
#[inline]
pub(crate) fn axpy(o: &mut [f32], w: f32, v: &[f32], simd: bool) {
    #[cfg(target_arch = "x86_64")]
    if simd && has_avx2() {
        // SAFETY: as in `dot`.
        unsafe { avx2::axpy(o, w, v) };
        return;
    }
    let _ = simd;
    for (a, &b) in o.iter_mut().zip(v) {
        *a += w * b;
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

/// Rows per packed group ([`pack8`]).
pub(crate) const PACK: usize = 8;

/// Whether [`pack8`] has a layout for `ty`.
pub(crate) fn packable(ty: QType) -> bool {
    matches!(ty, QType::Q4_0 | QType::Q4_1)
}

/// Scale bytes at the start of one row's block (`d`, and `m` for Q4_1), in the file's layout.
fn scale_bytes(ty: QType) -> usize {
    if ty == QType::Q4_1 {
        4
    } else {
        2
    }
}

/// Where byte `j` (0..16) of row `r % 8`'s quants of a block sits in a packed group block.
#[inline]
fn packed_quant_at(ty: QType, r: usize, j: usize) -> usize {
    PACK * scale_bytes(ty) + 32 * (j / 4) + 4 * (r % PACK) + j % 4
}

/// Rewrite a `rows × nb`-block matrix of a [`packable`] type, row-major in the file's layout,
/// into groups of [`PACK`] rows, in place (the same number of bytes). Group `g`, block `i` is
/// `PACK · block_bytes` bytes at `(g · nb + i) · PACK · block_bytes`: the eight `d` (f16), for
/// Q4_1 the eight `m`, then for `k` in 0..4 a 32-byte word whose bytes `4r..4r + 4` are quant
/// bytes `4k..4k + 4` of row `r` (low nibbles: weights `4k..4k + 4`, high: `16 + 4k..`).
pub(crate) fn pack8(ty: QType, data: &mut [u8], rows: usize, nb: usize) {
    assert!(packable(ty) && rows.is_multiple_of(PACK), "pack8: {ty:?} with {rows} rows");
    let bb = ty.block_bytes();
    assert_eq!(data.len(), rows * nb * bb);
    let src = data.to_vec();
    let sb = scale_bytes(ty);
    for g in 0..rows / PACK {
        for i in 0..nb {
            let dst = &mut data[(g * nb + i) * PACK * bb..][..PACK * bb];
            for r in 0..PACK {
                let s = &src[((g * PACK + r) * nb + i) * bb..][..bb];
                dst[2 * r..2 * r + 2].copy_from_slice(&s[0..2]);
                if ty == QType::Q4_1 {
                    dst[16 + 2 * r..16 + 2 * r + 2].copy_from_slice(&s[2..4]);
                }
                for j in 0..16 {
                    dst[packed_quant_at(ty, r, j)] = s[sb + j];
                }
            }
        }
    }
}

/// Row `r` of a [`pack8`]ed matrix back in the file's layout (`nb` blocks): the inverse of
/// the packing, for embedding-style lookups and the tests.
pub(crate) fn unpack_row8(ty: QType, data: &[u8], nb: usize, r: usize, out: &mut [u8]) {
    let bb = ty.block_bytes();
    let (g, rr) = (r / PACK, r % PACK);
    for i in 0..nb {
        let src = &data[(g * nb + i) * PACK * bb..][..PACK * bb];
        let o = &mut out[i * bb..(i + 1) * bb];
        o[0..2].copy_from_slice(&src[2 * rr..2 * rr + 2]);
        if ty == QType::Q4_1 {
            o[2..4].copy_from_slice(&src[16 + 2 * rr..16 + 2 * rr + 2]);
        }
        let sb = scale_bytes(ty);
        for j in 0..16 {
            o[sb + j] = src[packed_quant_at(ty, rr, j)];
        }
    }
}

/// `out[t · w + i] = row_(first + i) · x_t` for the `w = out.len() / n` rows from `first` (a
/// multiple of [`PACK`], as is `w`) of a [`pack8`]ed matrix of `nb` blocks per row and the `n`
/// activation vectors in `xs` (`nb` blocks each): out is `[n][w]`, as the forward pass wants
/// its activations. With the AVX2 kernel when `simd`; the scalar one reads the same layout.
#[allow(clippy::too_many_arguments)]
pub(crate) fn matmul_packed(
    ty: QType,
    data: &[u8],
    nb: usize,
    first: usize,
    xs: &[BlockQ8],
    n: usize,
    out: &mut [f32],
    kernel: DotKernel,
) {
    assert!(
        packable(ty) && first.is_multiple_of(PACK) && n > 0 && out.len().is_multiple_of(n * PACK)
    );
    let w = out.len() / n;
    let bb = ty.block_bytes();
    assert!(xs.len() >= n * nb && data.len() >= (first + w) * nb * bb);
    #[cfg(target_arch = "x86_64")]
    if kernel.simd() {
        assert!(kernel.is_available(), "{kernel:?} kernel on a CPU without it");
        // SAFETY: the kernel's instructions are present (asserted just above; the checks are
        // cached loads), and the asserts above keep every group block and activation block
        // the kernels read inside their slices.
        unsafe {
            match kernel {
                DotKernel::Avx512Vnni => vnni::matmul_packed_512(ty, data, nb, first, xs, n, out),
                _ => avx2::matmul_packed(ty, data, nb, first, xs, n, out),
            }
        }
        return;
    }
    let _ = kernel;
    let mut row = vec![0u8; nb * bb];
    for i in 0..w {
        unpack_row8(ty, data, nb, first + i, &mut row);
        for t in 0..n {
            out[t * w + i] = dot_scalar(ty, &row, &xs[t * nb..(t + 1) * nb]);
        }
    }
}

/// Flip the sign bit of every quant byte of a Q8_0 matrix in place (`q + 128` as an unsigned
/// byte: [`matmul_q8_biased`]'s layout, whose `vpdpbusd` wants the weights unsigned); the same
/// call flips it back. Scales are untouched.
pub(crate) fn bias_q8(data: &mut [u8]) {
    let bb = QType::Q8_0.block_bytes();
    assert_eq!(data.len() % bb, 0);
    for b in data.chunks_exact_mut(bb) {
        for q in &mut b[2..] {
            *q ^= 0x80;
        }
    }
}

/// One token's activations laid out for [`matmul_q8_biased`]: per pair of blocks, the 64
/// quant bytes, then `d_x` of each block in eight lanes, then `s_x` likewise (zeros for the
/// missing half of an odd last pair).
#[repr(C, align(64))]
#[derive(Clone, Copy)]
pub(crate) struct Q8Pair {
    pub(crate) q: [i8; 64],
    pub(crate) d: [f32; 16],
    pub(crate) s: [f32; 16],
}

/// The [`Q8Pair`]s of `n` activation vectors of `nb` blocks (`n · ⌈nb/2⌉` of them), laid out
/// once per product and read by every task of it.
pub(crate) fn q8_pairs(xs: &[BlockQ8], nb: usize, n: usize) -> Vec<Q8Pair> {
    let np = nb.div_ceil(2);
    let mut out = vec![Q8Pair { q: [0; 64], d: [0.0; 16], s: [0.0; 16] }; n * np];
    for t in 0..n {
        for (i, b) in xs[t * nb..(t + 1) * nb].iter().enumerate() {
            let p = &mut out[t * np + i / 2];
            let h = i % 2;
            p.q[32 * h..32 * h + 32].copy_from_slice(&b.qs);
            p.d[8 * h..8 * h + 8].fill(b.d);
            p.s[8 * h..8 * h + 8].fill(b.s);
        }
    }
    out
}

/// `out[t · w + i] = row_(first + i) · x_t` for a Q8_0 matrix whose quant bytes were
/// [`bias_q8`]ed, with AVX-512 VNNI (asserted available): two blocks per 512-bit `vpdpbusd`,
/// `Σ (q + 128) x = Σ q x + 128 Σ x`, and the activations' block sums (`BlockQ8::s`) take the
/// `128 Σ x` back out, as Q4_1's minimum is. Rows are `row_bytes` long (`nb` blocks), `px`
/// holds the [`q8_pairs`] of `n` vectors, `out` is `[n][w]`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn matmul_q8_biased(
    data: &[u8],
    row_bytes: usize,
    nb: usize,
    first: usize,
    px: &[Q8Pair],
    n: usize,
    out: &mut [f32],
) {
    assert!(n > 0 && out.len().is_multiple_of(n) && row_bytes == nb * QType::Q8_0.block_bytes());
    let w = out.len() / n;
    assert!(px.len() >= n * nb.div_ceil(2) && data.len() >= (first + w) * row_bytes);
    #[cfg(target_arch = "x86_64")]
    {
        assert!(DotKernel::Avx512Vnni.is_available());
        // SAFETY: AVX-512 VNNI is present (asserted); every row and activation block the
        // kernel reads is inside the slices (asserted above).
        unsafe { vnni::matmul_q8_biased(data, row_bytes, nb, first, px, n, out) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    unreachable!("the biased Q8_0 layout is only made for the AVX-512 VNNI kernel");
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

/// The instruction set the model's int8 dot kernels run with: the best this CPU has by
/// default ([`DotKernel::best`]), or the one named in
/// [`ModelConfigBuilder::kernel`](super::ModelConfigBuilder::kernel) (to compare them, or to
/// rule one out). Every SIMD kernel computes the same 32-bit integer block sums as the scalar
/// reference, so they differ from it only in the order of the f32 additions after them, and
/// the AVX2 and AVX-512 matrix products agree with each other bit for bit (AVX-512 also
/// brings its own attention and output-projection kernels, whose sums round differently).
/// (A 256-bit AVX-VNNI tile — the AVX2 one with `vpdpbusd` — was measured at ~1.1× AVX2 on a
/// Xeon, bound by its float epilogue and broadcasts, and not kept.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DotKernel {
    /// Portable Rust, the reference the others are tested against (any CPU).
    Scalar,
    /// AVX2 + FMA + F16C: `vpmaddubsw` and `vpmaddwd` (x86-64 since Haswell / Zen 1).
    Avx2,
    /// AVX-512 VNNI: 512-bit `vpdpbusd` over two packed groups (sixteen rows) and tiles of
    /// eight tokens in the 32 vector registers, and attention of up to three query heads of
    /// a key/value group per pass (Ice Lake and later Xeons, Zen 4).
    Avx512Vnni,
}

impl DotKernel {
    /// Every kernel, from the reference up.
    pub const ALL: [DotKernel; 3] = [DotKernel::Scalar, DotKernel::Avx2, DotKernel::Avx512Vnni];

    /// The fastest kernel this CPU runs (checked at run time; the crate builds for the
    /// default x86-64 target and needs no `target-cpu` flag).
    pub fn best() -> DotKernel {
        [DotKernel::Avx512Vnni, DotKernel::Avx2]
            .into_iter()
            .find(|k| k.is_available())
            .unwrap_or(DotKernel::Scalar)
    }

    /// Whether this CPU has the instructions the kernel needs.
    pub fn is_available(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            match self {
                DotKernel::Scalar => true,
                DotKernel::Avx2 => has_avx2(),
                DotKernel::Avx512Vnni => {
                    has_avx2()
                        && is_x86_feature_detected!("avx512f")
                        && is_x86_feature_detected!("avx512bw")
                        && is_x86_feature_detected!("avx512vl")
                        && is_x86_feature_detected!("avx512vnni")
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self == DotKernel::Scalar
        }
    }

    /// A short name (`scalar`, `avx2`, `avx512-vnni`), as the CLI prints it.
    pub fn name(self) -> &'static str {
        match self {
            DotKernel::Scalar => "scalar",
            DotKernel::Avx2 => "avx2",
            DotKernel::Avx512Vnni => "avx512-vnni",
        }
    }

    /// Whether the AVX2 kernels (and the packed layout) are in use: every kernel but the
    /// scalar one.
    pub(crate) fn simd(self) -> bool {
        self != DotKernel::Scalar
    }
}

impl std::str::FromStr for DotKernel {
    type Err = String;

    fn from_str(s: &str) -> Result<DotKernel, String> {
        DotKernel::ALL.into_iter().find(|k| k.name() == s).ok_or_else(|| {
            let names: Vec<_> = DotKernel::ALL.iter().map(|k| k.name()).collect();
            format!("unknown kernel `{s}` (one of: {})", names.join(", "))
        })
    }
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

/// Bytes of one packed group block (eight rows' blocks) and the offset of its quant words.
#[cfg(target_arch = "x86_64")]
const fn group_block<const Q41: bool>() -> (usize, usize) {
    if Q41 {
        (160, 32)
    } else {
        (144, 16)
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

    /// The AVX2 body of [`super::quantize_q8`].
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn quantize_q8(x: &[f32], out: &mut [BlockQ8]) {
        let sign = _mm256_set1_ps(-0.0);
        let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        for (b, c) in out.iter_mut().zip(x.chunks_exact(32)) {
            let p = c.as_ptr();
            let v = [
                _mm256_loadu_ps(p),
                _mm256_loadu_ps(p.add(8)),
                _mm256_loadu_ps(p.add(16)),
                _mm256_loadu_ps(p.add(24)),
            ];
            let m = _mm256_max_ps(
                _mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])),
            );
            let h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
            let h = _mm_max_ps(h, _mm_movehl_ps(h, h));
            let amax = _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
            let d = amax / 127.0;
            let id = _mm256_set1_ps(if d > 0.0 { 1.0 / d } else { 0.0 });
            let q = v.map(|v| {
                _mm256_cvtps_epi32(_mm256_round_ps(
                    _mm256_mul_ps(v, id),
                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC,
                ))
            });
            let sum = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
            let s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
            let s2 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
            let s1 = _mm_add_epi32(s2, _mm_shuffle_epi32(s2, 1));
            // Packing works per 128-bit lane; the permutation puts the 32 bytes back in order.
            let w =
                _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
            let w = _mm256_permutevar8x32_epi32(w, order);
            _mm256_storeu_si256(b.qs.as_mut_ptr() as *mut __m256i, w);
            b.d = d;
            b.s = d * _mm_cvtsi128_si32(s1) as f32;
        }
    }

    /// `a · b`, two FMA accumulators of eight.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
        let n = a.len().min(b.len());
        let (pa, pb) = (a.as_ptr(), b.as_ptr());
        let (mut a0, mut a1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        let mut i = 0;
        while i + 16 <= n {
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), _mm256_loadu_ps(pb.add(i)), a0);
            a1 =
                _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i + 8)), _mm256_loadu_ps(pb.add(i + 8)), a1);
            i += 16;
        }
        if i + 8 <= n {
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), _mm256_loadu_ps(pb.add(i)), a0);
            i += 8;
        }
        let mut s = hsum(_mm256_add_ps(a0, a1));
        while i < n {
            s += a[i] * b[i];
            i += 1;
        }
        s
    }

    /// `o += w · v`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn axpy(o: &mut [f32], w: f32, v: &[f32]) {
        let n = o.len().min(v.len());
        let (po, pv) = (o.as_mut_ptr(), v.as_ptr());
        let wv = _mm256_set1_ps(w);
        let mut i = 0;
        while i + 8 <= n {
            let r = _mm256_fmadd_ps(wv, _mm256_loadu_ps(pv.add(i)), _mm256_loadu_ps(po.add(i)));
            _mm256_storeu_ps(po.add(i), r);
            i += 8;
        }
        while i < n {
            o[i] += w * v[i];
            i += 1;
        }
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

    /// [`super::attend_head`] for 64-wide heads (its asserts hold).
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn attend_head64(
        q: &[f32],
        keys: &[f32],
        values: &[f32],
        stride: usize,
        len: usize,
        scale: f32,
        scores: &mut [f32],
        out: &mut [f32],
    ) {
        let qv: [__m256; 8] = std::array::from_fn(|c| _mm256_loadu_ps(q.as_ptr().add(8 * c)));
        let (kp, sp) = (keys.as_ptr(), scores.as_mut_ptr());
        let mut j = 0;
        while j + 4 <= len {
            let mut a = [_mm256_setzero_ps(); 4];
            for (c, qc) in qv.iter().enumerate() {
                for (r, ar) in a.iter_mut().enumerate() {
                    let k = _mm256_loadu_ps(kp.add((j + r) * stride + 8 * c));
                    *ar = _mm256_fmadd_ps(*qc, k, *ar);
                }
            }
            // Lane r of `s` is key j + r's dot: pairwise sums, then the two 128-bit halves.
            let t = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
            let s = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
            _mm_storeu_ps(sp.add(j), _mm_mul_ps(s, _mm_set1_ps(scale)));
            j += 4;
        }
        while j < len {
            let mut a = _mm256_setzero_ps();
            for (c, qc) in qv.iter().enumerate() {
                a = _mm256_fmadd_ps(*qc, _mm256_loadu_ps(kp.add(j * stride + 8 * c)), a);
            }
            *sp.add(j) = hsum(a) * scale;
            j += 1;
        }
        let sc = &mut scores[..len];
        let max = sc.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
        let mut lanes = [0.0f32; 8];
        let mut chunks = sc.chunks_exact_mut(8);
        for c in &mut chunks {
            for (v, l) in c.iter_mut().zip(lanes.iter_mut()) {
                *v = crate::sampler::exp::exp(*v - max);
                *l += *v;
            }
        }
        for v in chunks.into_remainder() {
            *v = crate::sampler::exp::exp(*v - max);
            lanes[0] += *v;
        }
        let sum: f32 = lanes.iter().sum();
        let vp = values.as_ptr();
        let mut o = [_mm256_setzero_ps(); 8];
        for (j, &w) in sc.iter().enumerate() {
            let w = _mm256_set1_ps(w);
            let v = vp.add(j * stride);
            for (c, oc) in o.iter_mut().enumerate() {
                *oc = _mm256_fmadd_ps(w, _mm256_loadu_ps(v.add(8 * c)), *oc);
            }
        }
        let inv = _mm256_set1_ps(1.0 / sum);
        for (c, oc) in o.iter().enumerate() {
            _mm256_storeu_ps(out.as_mut_ptr().add(8 * c), _mm256_mul_ps(*oc, inv));
        }
    }

    use super::group_block;

    /// Eight packed rows × `T` tokens over all `nb` blocks: lane `r` of result `t` is
    /// `row_r · x_t`. `grp` is the group's first block, `x[t]` token `t`'s first block.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn tile<const Q41: bool, const T: usize>(
        grp: *const u8,
        nb: usize,
        x: [*const BlockQ8; T],
    ) -> [__m256; T] {
        let (bpb, qoff) = group_block::<Q41>();
        let low = _mm256_set1_epi8(0x0F);
        let ones = _mm256_set1_epi16(1);
        let mut acc = [_mm256_setzero_ps(); T];
        for i in 0..nb {
            let b = grp.add(i * bpb);
            let mut sum = [_mm256_setzero_si256(); T];
            for k in 0..4 {
                let w = _mm256_loadu_si256(b.add(qoff + 32 * k) as *const __m256i);
                let lo = _mm256_and_si256(w, low);
                let hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), low);
                for t in 0..T {
                    let q = (*x[t].add(i)).qs.as_ptr();
                    let xl = _mm256_set1_epi32((q.add(4 * k) as *const i32).read_unaligned());
                    let xh = _mm256_set1_epi32((q.add(16 + 4 * k) as *const i32).read_unaligned());
                    // 16-bit lanes: each ends as a sum of 16 products |q·x| ≤ 15·127, < 2¹⁵.
                    let p = _mm256_add_epi16(
                        _mm256_maddubs_epi16(lo, xl),
                        _mm256_maddubs_epi16(hi, xh),
                    );
                    sum[t] = _mm256_add_epi16(sum[t], p);
                }
            }
            let d = _mm256_cvtph_ps(_mm_loadu_si128(b as *const __m128i));
            let m = if Q41 {
                _mm256_cvtph_ps(_mm_loadu_si128(b.add(16) as *const __m128i))
            } else {
                _mm256_mul_ps(d, _mm256_set1_ps(-8.0))
            };
            for t in 0..T {
                let xb = &*x[t].add(i);
                let f = _mm256_cvtepi32_ps(_mm256_madd_epi16(sum[t], ones));
                acc[t] = _mm256_fmadd_ps(f, _mm256_mul_ps(d, _mm256_set1_ps(xb.d)), acc[t]);
                acc[t] = _mm256_fmadd_ps(m, _mm256_set1_ps(xb.s), acc[t]);
            }
        }
        acc
    }

    /// One group of eight rows against `T` tokens from `t0`, stored at `out[t · w + c]`.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn group<const Q41: bool, const T: usize>(
        grp: *const u8,
        nb: usize,
        xs: &[BlockQ8],
        t0: usize,
        out: &mut [f32],
        w: usize,
        c: usize,
    ) {
        let x: [*const BlockQ8; T] = std::array::from_fn(|t| xs.as_ptr().add((t0 + t) * nb));
        let acc = tile::<Q41, T>(grp, nb, x);
        for (t, a) in acc.iter().enumerate() {
            let o = &mut out[(t0 + t) * w + c..(t0 + t) * w + c + 8];
            _mm256_storeu_ps(o.as_mut_ptr(), *a);
        }
    }

    /// The AVX2 body of [`super::matmul_packed`] (its asserts hold).
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn matmul_packed(
        ty: QType,
        data: &[u8],
        nb: usize,
        first: usize,
        xs: &[BlockQ8],
        n: usize,
        out: &mut [f32],
    ) {
        if ty == QType::Q4_1 {
            rows::<true>(data, nb, first, xs, n, out);
        } else {
            rows::<false>(data, nb, first, xs, n, out);
        }
    }

    /// Every group of eight rows of `out`, in tiles of four tokens and one of the rest.
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn rows<const Q41: bool>(
        data: &[u8],
        nb: usize,
        first: usize,
        xs: &[BlockQ8],
        n: usize,
        out: &mut [f32],
    ) {
        rows_from::<Q41>(data, nb, first, xs, n, out, 0);
    }

    /// The groups of eight rows of `out` from row `from` on (a multiple of eight).
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn rows_from<const Q41: bool>(
        data: &[u8],
        nb: usize,
        first: usize,
        xs: &[BlockQ8],
        n: usize,
        out: &mut [f32],
        from: usize,
    ) {
        let w = out.len() / n;
        let gb = nb * group_block::<Q41>().0;
        for c in (from..w).step_by(8) {
            let grp = data.as_ptr().add((first + c) / 8 * gb);
            let mut t0 = 0;
            while t0 + 4 <= n {
                group::<Q41, 4>(grp, nb, xs, t0, out, w, c);
                t0 += 4;
            }
            match n - t0 {
                3 => group::<Q41, 3>(grp, nb, xs, t0, out, w, c),
                2 => group::<Q41, 2>(grp, nb, xs, t0, out, w, c),
                1 => group::<Q41, 1>(grp, nb, xs, t0, out, w, c),
                _ => {}
            }
        }
    }
}

/// The AVX-512 VNNI kernels: `vpdpbusd` sums four `u8 × i8` products into each 32-bit lane in
/// one instruction, where AVX2 needs `vpmaddubsw`, a 16-bit add and, per block, `vpmaddwd`.
/// On the packed layout the integer block sums are the AVX2 kernel's exactly, so the results
/// are too; the biased Q8_0 output projection sums in another order.
#[cfg(target_arch = "x86_64")]
mod vnni {
    use super::{avx2, group_block, BlockQ8, Q8Pair, QType};
    use std::arch::x86_64::*;

    /// Two neighbouring packed groups (sixteen rows: `a`, then `a + gb`) × `T` tokens with
    /// 512-bit VNNI: lane `r` of result `t` is `row_r · x_t`. Each 512-bit weight word is the
    /// two groups' 256-bit words side by side, so the layout is [`super::pack8`]'s.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    unsafe fn tile16<const Q41: bool, const T: usize>(
        a: *const u8,
        gb: usize,
        nb: usize,
        x: [*const BlockQ8; T],
    ) -> [__m512; T] {
        let (bpb, qoff) = group_block::<Q41>();
        let low = _mm512_set1_epi8(0x0F);
        let mut acc = [_mm512_setzero_ps(); T];
        for i in 0..nb {
            let ba = a.add(i * bpb);
            let bb = ba.add(gb);
            let mut sum = [_mm512_setzero_si512(); T];
            for k in 0..4 {
                let wa = _mm256_loadu_si256(ba.add(qoff + 32 * k) as *const __m256i);
                let wb = _mm256_loadu_si256(bb.add(qoff + 32 * k) as *const __m256i);
                let w = _mm512_inserti64x4(_mm512_castsi256_si512(wa), wb, 1);
                let lo = _mm512_and_si512(w, low);
                let hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), low);
                for t in 0..T {
                    let q = (*x[t].add(i)).qs.as_ptr();
                    let xl = _mm512_set1_epi32((q.add(4 * k) as *const i32).read_unaligned());
                    let xh = _mm512_set1_epi32((q.add(16 + 4 * k) as *const i32).read_unaligned());
                    sum[t] = _mm512_dpbusd_epi32(sum[t], lo, xl);
                    sum[t] = _mm512_dpbusd_epi32(sum[t], hi, xh);
                }
            }
            let halves = |off: usize| {
                let l = _mm_loadu_si128(ba.add(off) as *const __m128i);
                let h = _mm_loadu_si128(bb.add(off) as *const __m128i);
                _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(l), h, 1))
            };
            let d = halves(0);
            let m = if Q41 { halves(16) } else { _mm512_mul_ps(d, _mm512_set1_ps(-8.0)) };
            for t in 0..T {
                let xb = &*x[t].add(i);
                let f = _mm512_cvtepi32_ps(sum[t]);
                acc[t] = _mm512_fmadd_ps(f, _mm512_mul_ps(d, _mm512_set1_ps(xb.d)), acc[t]);
                acc[t] = _mm512_fmadd_ps(m, _mm512_set1_ps(xb.s), acc[t]);
            }
        }
        acc
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn group16<const Q41: bool, const T: usize>(
        a: *const u8,
        gb: usize,
        nb: usize,
        xs: &[BlockQ8],
        t0: usize,
        out: &mut [f32],
        w: usize,
        c: usize,
    ) {
        let x: [*const BlockQ8; T] = std::array::from_fn(|t| xs.as_ptr().add((t0 + t) * nb));
        let acc = tile16::<Q41, T>(a, gb, nb, x);
        for (t, v) in acc.iter().enumerate() {
            let o = &mut out[(t0 + t) * w + c..(t0 + t) * w + c + 16];
            _mm512_storeu_ps(o.as_mut_ptr(), *v);
        }
    }

    /// [`super::matmul_packed`] with AVX-512 VNNI (its asserts hold).
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(super) unsafe fn matmul_packed_512(
        ty: QType,
        data: &[u8],
        nb: usize,
        first: usize,
        xs: &[BlockQ8],
        n: usize,
        out: &mut [f32],
    ) {
        if ty == QType::Q4_1 {
            rows_512::<true>(data, nb, first, xs, n, out);
        } else {
            rows_512::<false>(data, nb, first, xs, n, out);
        }
    }

    /// Pairs of groups in tiles of eight tokens and one of the rest; a last odd group of
    /// eight rows goes to the AVX2 kernel.
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    unsafe fn rows_512<const Q41: bool>(
        data: &[u8],
        nb: usize,
        first: usize,
        xs: &[BlockQ8],
        n: usize,
        out: &mut [f32],
    ) {
        let w = out.len() / n;
        let gb = nb * group_block::<Q41>().0;
        let mut c = 0;
        while c + 16 <= w {
            let a = data.as_ptr().add((first + c) / 8 * gb);
            let mut t0 = 0;
            while t0 + 8 <= n {
                group16::<Q41, 8>(a, gb, nb, xs, t0, out, w, c);
                t0 += 8;
            }
            match n - t0 {
                7 => group16::<Q41, 7>(a, gb, nb, xs, t0, out, w, c),
                6 => group16::<Q41, 6>(a, gb, nb, xs, t0, out, w, c),
                5 => group16::<Q41, 5>(a, gb, nb, xs, t0, out, w, c),
                4 => group16::<Q41, 4>(a, gb, nb, xs, t0, out, w, c),
                3 => group16::<Q41, 3>(a, gb, nb, xs, t0, out, w, c),
                2 => group16::<Q41, 2>(a, gb, nb, xs, t0, out, w, c),
                1 => group16::<Q41, 1>(a, gb, nb, xs, t0, out, w, c),
                _ => {}
            }
            c += 16;
        }
        if c < w {
            avx2::rows_from::<Q41>(data, nb, first, xs, n, out, c);
        }
    }

    /// One biased Q8_0 row against `T` tokens: per pair of blocks one 512-bit `vpdpbusd` per
    /// token (lanes 0..8: block `2p`, 8..16: block `2p + 1`), scaled by `d_w d_x` per half, and
    /// the `−128 d_w · s_x / 8` correction in each of a block's eight lanes (the row's sum of
    /// lanes then counts it once per block).
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    unsafe fn q8_row<const T: usize>(row: *const u8, nb: usize, x: [*const Q8Pair; T]) -> [f32; T] {
        let mut acc = [_mm512_setzero_ps(); T];
        let f16 = |p: *const u8| {
            let h = u16::from_le_bytes([*p, *p.add(1)]);
            _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(h))))
        };
        for p in 0..nb.div_ceil(2) {
            let i = 2 * p;
            let two = i + 1 < nb;
            let (ba, bb) = (row.add(34 * i), row.add(34 * (i + 1)));
            let wa = _mm256_loadu_si256(ba.add(2) as *const __m256i);
            let (w, db) = if two {
                let wb = _mm256_loadu_si256(bb.add(2) as *const __m256i);
                (_mm512_inserti64x4(_mm512_castsi256_si512(wa), wb, 1), f16(bb))
            } else {
                (_mm512_zextsi256_si512(wa), 0.0)
            };
            let dw = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(f16(ba)), _mm512_set1_ps(db));
            let mw = _mm512_mul_ps(dw, _mm512_set1_ps(-16.0)); // −128 d_w over eight lanes
            for t in 0..T {
                let xp = &*x[t].add(p);
                let q = _mm512_load_si512(xp.q.as_ptr() as *const __m512i);
                let sum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, q);
                let d = _mm512_mul_ps(dw, _mm512_load_ps(xp.d.as_ptr()));
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), d, acc[t]);
                acc[t] = _mm512_fmadd_ps(mw, _mm512_load_ps(xp.s.as_ptr()), acc[t]);
            }
        }
        std::array::from_fn(|t| _mm512_reduce_add_ps(acc[t]))
    }

    /// [`super::matmul_q8_biased`] (its asserts hold): every row against tiles of eight tokens.
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(super) unsafe fn matmul_q8_biased(
        data: &[u8],
        row_bytes: usize,
        nb: usize,
        first: usize,
        px: &[Q8Pair],
        n: usize,
        out: &mut [f32],
    ) {
        let w = out.len() / n;
        let np = nb.div_ceil(2);
        let x = |t: usize| px.as_ptr().add(t * np);
        for i in 0..w {
            let row = data.as_ptr().add((first + i) * row_bytes);
            let mut t = 0;
            while t + 8 <= n {
                let r = q8_row::<8>(row, nb, std::array::from_fn(|k| x(t + k)));
                for (k, v) in r.iter().enumerate() {
                    out[(t + k) * w + i] = *v;
                }
                t += 8;
            }
            while t + 4 <= n {
                let r = q8_row::<4>(row, nb, std::array::from_fn(|k| x(t + k)));
                for (k, v) in r.iter().enumerate() {
                    out[(t + k) * w + i] = *v;
                }
                t += 4;
            }
            while t < n {
                out[t * w + i] = q8_row::<1>(row, nb, [x(t)])[0];
                t += 1;
            }
        }
    }
}

/// AVX-512F kernels that are not dot products of quantised blocks: the attention of a group of
/// query heads.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    /// 16 lanes summed into 8.
    #[inline]
    #[target_feature(enable = "avx2,fma,avx512f")]
    unsafe fn halves(v: __m512) -> __m256 {
        let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
        _mm256_add_ps(_mm512_castps512_ps256(v), hi)
    }

    /// [`super::attend_heads`] for `G` 64-wide heads (`q`, `out`: `G · 64` floats; keys and
    /// values `j · stride + 0..64` for `j < len`; `scores`: `G · len` floats).
    #[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
    #[target_feature(enable = "avx2,fma,avx512f")]
    pub(super) unsafe fn attend64<const G: usize>(
        q: *const f32,
        keys: *const f32,
        values: *const f32,
        stride: usize,
        len: usize,
        scale: f32,
        scores: *mut f32,
        out: *mut f32,
    ) {
        let qv: [[__m512; 4]; G] = std::array::from_fn(|g| {
            std::array::from_fn(|c| _mm512_loadu_ps(q.add(64 * g + 16 * c)))
        });
        // Scores, four keys at a time: each 16-float piece of a key is loaded once for the
        // G heads.
        let mut j = 0;
        while j + 4 <= len {
            let mut a = [[_mm512_setzero_ps(); 4]; G];
            for c in 0..4 {
                for r in 0..4 {
                    let k = _mm512_loadu_ps(keys.add((j + r) * stride + 16 * c));
                    for g in 0..G {
                        a[g][r] = _mm512_fmadd_ps(qv[g][c], k, a[g][r]);
                    }
                }
            }
            for (g, ag) in a.iter().enumerate() {
                let h = [halves(ag[0]), halves(ag[1]), halves(ag[2]), halves(ag[3])];
                // Lane r of `s` is key j + r's dot: pairwise sums, then the two 128-bit halves.
                let t = _mm256_hadd_ps(_mm256_hadd_ps(h[0], h[1]), _mm256_hadd_ps(h[2], h[3]));
                let s = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
                _mm_storeu_ps(scores.add(g * len + j), _mm_mul_ps(s, _mm_set1_ps(scale)));
            }
            j += 4;
        }
        while j < len {
            for (g, qg) in qv.iter().enumerate() {
                let mut a = _mm512_setzero_ps();
                for (c, qc) in qg.iter().enumerate() {
                    a = _mm512_fmadd_ps(*qc, _mm512_loadu_ps(keys.add(j * stride + 16 * c)), a);
                }
                *scores.add(g * len + j) = _mm512_reduce_add_ps(a) * scale;
            }
            j += 1;
        }
        // Softmax of each head's row, as the AVX2 kernel does it.
        let mut inv = [0.0f32; G];
        for (g, ig) in inv.iter_mut().enumerate() {
            let sc = std::slice::from_raw_parts_mut(scores.add(g * len), len);
            let max = sc.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
            let mut lanes = [0.0f32; 8];
            let mut chunks = sc.chunks_exact_mut(8);
            for ch in &mut chunks {
                for (v, l) in ch.iter_mut().zip(lanes.iter_mut()) {
                    *v = crate::sampler::exp::exp(*v - max);
                    *l += *v;
                }
            }
            for v in chunks.into_remainder() {
                *v = crate::sampler::exp::exp(*v - max);
                lanes[0] += *v;
            }
            *ig = 1.0 / lanes.iter().sum::<f32>();
        }
        // The weighted values: each value row loaded once for the G heads.
        let mut o = [[_mm512_setzero_ps(); 4]; G];
        for j in 0..len {
            let v: [__m512; 4] =
                std::array::from_fn(|c| _mm512_loadu_ps(values.add(j * stride + 16 * c)));
            for (g, og) in o.iter_mut().enumerate() {
                let w = _mm512_set1_ps(*scores.add(g * len + j));
                for (oc, vc) in og.iter_mut().zip(v.iter()) {
                    *oc = _mm512_fmadd_ps(w, *vc, *oc);
                }
            }
        }
        for (g, og) in o.iter().enumerate() {
            let k = _mm512_set1_ps(inv[g]);
            for (c, oc) in og.iter().enumerate() {
                _mm512_storeu_ps(out.add(64 * g + 16 * c), _mm512_mul_ps(*oc, k));
            }
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
        quantize_q8(&x, &mut xq, false);
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

    /// The 64-wide AVX2 attention against the dot/axpy path, written out here: every length
    /// through one and two steps of four keys plus each remainder, a cache stride wider than a
    /// head (three KV heads), and a key far above the rest (the softmax's maximum shift).
    #[test]
    fn biased_q8_kernel_agrees_with_the_scalar_dot() {
        if !DotKernel::Avx512Vnni.is_available() {
            eprintln!("skipped: no AVX-512 VNNI on this CPU (the layout is only made for it)");
            return;
        }
        // Odd and even block counts (the last block alone in its pair), tiles of four tokens
        // and the rest, extreme bytes (−128, 127) in both operands.
        for nb in [1, 2, 5, 18] {
            let rows = 11;
            let ty = QType::Q8_0;
            let mut m: Vec<u8> = (0..rows).flat_map(|r| rand_row(ty, nb, 300 + r as u64)).collect();
            m[2..34].fill(0x80);
            m[34 * nb + 2..34 * nb + 34].fill(0x7F);
            let x: Vec<f32> = (0..9 * nb * QK)
                .map(|i| if i < QK { -1.0 } else { ((i * 37 % 101) as f32 - 50.0) / 9.0 })
                .collect();
            let mut xq = vec![BlockQ8::default(); 9 * nb];
            quantize_q8(&x, &mut xq, false);
            let mut biased = m.clone();
            bias_q8(&mut biased);
            assert_ne!(biased, m);
            let rb = nb * ty.block_bytes();
            for n in 1..=9 {
                let (first, w) = (2, 9);
                let mut out = vec![f32::NAN; n * w];
                let px = q8_pairs(&xq, nb, n);
                matmul_q8_biased(&biased, rb, nb, first, &px, n, &mut out);
                for t in 0..n {
                    for i in 0..w {
                        let r = first + i;
                        let want =
                            dot_scalar(ty, &m[r * rb..(r + 1) * rb], &xq[t * nb..(t + 1) * nb]);
                        let got = out[t * w + i];
                        assert!(
                            (got - want).abs() <= 1e-4 * want.abs().max(1.0),
                            "nb {nb} n {n} t {t} row {r}: {got} vs {want}"
                        );
                    }
                }
            }
            bias_q8(&mut biased);
            assert_eq!(biased, m, "biasing twice restores the bytes");
        }
    }

    #[test]
    fn grouped_attention_agrees_with_one_head_at_a_time() {
        // 1..7 query heads over one KV head (passes of three, two and one), keys on both
        // sides of the four-key steps, a key far above the others (softmax's max).
        let (hd, stride, kv) = (64, 192, 64);
        let val = |i: usize, k: usize| ((i * 31 + k * 17) % 97) as f32 / 48.5 - 1.0;
        for heads in 1..=7 {
            for len in [1, 2, 3, 4, 5, 8, 9, 37] {
                let q: Vec<f32> = (0..heads * hd).map(|i| val(i, 3)).collect();
                let mut keys: Vec<f32> = (0..len * stride).map(|i| val(i, 5)).collect();
                let values: Vec<f32> = (0..len * stride).map(|i| val(i, 7)).collect();
                keys[(len - 1) * stride + kv] = 40.0;
                let mut want = vec![0.0f32; heads * hd];
                let mut scores = vec![0.0f32; HEADS_PER_PASS * len];
                for (qh, o) in q.chunks(hd).zip(want.chunks_mut(hd)) {
                    let (k, v) = (&keys[kv..], &values[kv..]);
                    attend_head(qh, k, v, stride, len, 0.125, &mut scores, o, false);
                }
                for kernel in DotKernel::ALL.into_iter().filter(|k| k.is_available()) {
                    let mut out = vec![f32::NAN; heads * hd];
                    let (k, v) = (&keys[kv..], &values[kv..]);
                    attend_heads(&q, hd, k, v, stride, len, 0.125, &mut scores, &mut out, kernel);
                    for (i, (o, w)) in out.iter().zip(&want).enumerate() {
                        assert!(
                            (o - w).abs() <= 1e-5 * w.abs().max(1.0),
                            "{kernel:?} heads {heads} len {len} [{i}]: {o} vs {w}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn attention_kernel_agrees_with_the_reference() {
        let (hd, stride) = (64, 192);
        let val = |i: usize, k: usize| ((i * 31 + k * 17) % 97) as f32 / 48.5 - 1.0;
        for len in 1..=11 {
            let q: Vec<f32> = (0..hd).map(|i| val(i, 3)).collect();
            let mut keys: Vec<f32> = (0..len * stride).map(|i| val(i, 5)).collect();
            let values: Vec<f32> = (0..len * stride).map(|i| val(i, 7)).collect();
            keys[(len - 1) * stride + 64] = 40.0;
            let kv = 64; // the second KV head
            let scale = 0.125;
            let mut want = vec![0.0f32; hd];
            let sc: Vec<f32> = (0..len)
                .map(|j| dot_f32(&q, &keys[kv + j * stride..kv + j * stride + hd]) * scale)
                .collect();
            let max = sc.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
            let e: Vec<f64> = sc.iter().map(|&v| f64::from(v - max).exp()).collect();
            let sum: f64 = e.iter().sum();
            for (j, &p) in e.iter().enumerate() {
                for (o, &v) in want.iter_mut().zip(&values[kv + j * stride..]) {
                    *o += (p / sum) as f32 * v;
                }
            }
            for simd in [false, true] {
                let (mut out, mut scores) = (vec![0.0f32; hd], vec![0.0f32; len]);
                attend_head(
                    &q,
                    &keys[kv..],
                    &values[kv..],
                    stride,
                    len,
                    scale,
                    &mut scores,
                    &mut out,
                    simd,
                );
                for (o, w) in out.iter().zip(&want) {
                    assert!((o - w).abs() < 1e-5, "len {len} simd {simd}: {o} vs {w}");
                }
            }
        }
    }

    #[test]
    fn packed_layout_round_trips_and_its_kernels_agree_with_the_scalar_dot() {
        let (nb, rows) = (5, 40);
        // Tokens 0 and 1 are all +1 and all −1 (quantised to ±127 everywhere), and row 8 is
        // all 15s: the 16-bit lanes' extreme sums, ±16·15·127.
        let x: Vec<f32> = (0..17 * nb * QK)
            .map(|i| match i / (nb * QK) {
                0 => 1.0,
                1 => -1.0,
                _ => ((i * 53 % 97) as f32 - 48.0) / 11.0,
            })
            .collect();
        let mut xq = vec![BlockQ8::default(); 17 * nb];
        quantize_q8(&x, &mut xq, false);
        for ty in [QType::Q4_0, QType::Q4_1] {
            let rb = nb * ty.block_bytes();
            let mut orig: Vec<u8> =
                (0..rows).flat_map(|r| rand_row(ty, nb, 100 + r as u64)).collect();
            for b in orig[8 * rb..9 * rb].chunks_exact_mut(ty.block_bytes()) {
                let sb = scale_bytes(ty);
                b[sb..].fill(0xFF);
            }
            let mut packed = orig.clone();
            pack8(ty, &mut packed, rows, nb);
            assert_ne!(packed, orig);
            let mut row = vec![0u8; rb];
            for r in 0..rows {
                unpack_row8(ty, &packed, nb, r, &mut row);
                assert_eq!(row, orig[r * rb..(r + 1) * rb], "{ty:?} row {r}");
            }
            // Every tile width (1..8 and a remainder), a group offset, and row counts that
            // leave an odd group of eight beside the 512-bit kernel's pairs.
            for n in 1..=17 {
                for (first, w) in [(8, 16), (0, 24), (8, 32)] {
                    let mut first_simd: Option<Vec<f32>> = None;
                    for simd in DotKernel::ALL.into_iter().filter(|k| k.is_available()) {
                        let mut out = vec![f32::NAN; n * w];
                        matmul_packed(ty, &packed, nb, first, &xq, n, &mut out, simd);
                        // The SIMD kernels sum the same integers and add the same floats in the
                        // same order, lane by lane: their results agree bit for bit.
                        if simd.simd() {
                            let bits: Vec<u32> = out.iter().map(|v| v.to_bits()).collect();
                            match &first_simd {
                                None => first_simd = Some(out.clone()),
                                Some(o) => {
                                    let want: Vec<u32> = o.iter().map(|v| v.to_bits()).collect();
                                    assert_eq!(bits, want, "{ty:?} {simd:?} n {n} w {w}");
                                }
                            }
                        }
                        for t in 0..n {
                            for i in 0..w {
                                let r = first + i;
                                let want = dot_scalar(
                                    ty,
                                    &orig[r * rb..(r + 1) * rb],
                                    &xq[t * nb..(t + 1) * nb],
                                );
                                let got = out[t * w + i];
                                assert!(
                                    (got - want).abs() <= 1e-4 * want.abs().max(1.0),
                                    "{ty:?} {simd:?} n {n} t {t} row {r}: {got} vs {want}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn avx2_quantisation_and_f32_kernels_equal_the_scalar_ones() {
        if !has_avx2() {
            return;
        }
        // Ties (2.5 · d), zeros, a zero block, and values of both signs.
        let mut x: Vec<f32> = (0..8 * QK).map(|i| ((i * 71 % 113) as f32 - 56.0) / 7.0).collect();
        x[3] = 127.0;
        x[4] = 2.5;
        x[QK..2 * QK].fill(0.0);
        let (mut a, mut b) = (vec![BlockQ8::default(); 8], vec![BlockQ8::default(); 8]);
        quantize_q8(&x, &mut a, false);
        quantize_q8(&x, &mut b, true);
        for (p, q) in a.iter().zip(&b) {
            assert_eq!((p.qs, p.d.to_bits(), p.s.to_bits()), (q.qs, q.d.to_bits(), q.s.to_bits()));
        }
        for n in [0, 5, 8, 19, 64, 70] {
            let (u, v) = (&x[..n], &x[7..7 + n]);
            let (s, f) = (dot(u, v, false), dot(u, v, true));
            assert!((s - f).abs() <= 1e-4 * s.abs().max(1.0), "dot {n}: {s} vs {f}");
            let (mut o1, mut o2) = (x[..n].to_vec(), x[..n].to_vec());
            axpy(&mut o1, 0.3, v, false);
            axpy(&mut o2, 0.3, v, true);
            for (p, q) in o1.iter().zip(&o2) {
                assert!((p - q).abs() <= 1e-5 * p.abs().max(1.0), "axpy {n}");
            }
        }
    }
}
