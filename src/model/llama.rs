//! The Llama forward pass over GGUF weights: embeddings, 𝑛 pre-norm blocks (RMSNorm →
//! grouped-query attention with rotary positions → RMSNorm → SwiGLU), final norm, output
//! projection (Touvron et al. 2023 §2.2; GQA: Ainslie et al. 2023; SwiGLU: Shazeer 2020).
//!
//! GGUF conventions this follows (llama.cpp `llama-model.cpp`, `LLM_ARCH_LLAMA`): a matrix
//! tensor `[cols, rows]` is `rows` rows of `cols` weights, so `y = W x` is one dot per row; the
//! converter permutes the Q and K projections so that the rotation pairs adjacent elements
//! `(x₂ᵢ, x₂ᵢ₊₁)` of each head ("normal" RoPE, Su et al. 2021 §3.4.2) with angle
//! `pos · base^(−2i/head_dim)`; `output.weight` absent means the output projection is tied to
//! `token_embd.weight`.
//!
//! The KV cache holds, per layer, the keys and values of every position fed so far; truncating
//! it to a prefix is how the model rolls back. A batch of new tokens (the prompt: prefill)
//! runs layer by layer with every weight row reused across the batch while it is in cache; a
//! single token (decode) is a matrix-vector product per weight. Rows are split over a rayon
//! pool the model owns (sized by [`ModelConfig`](super::ModelConfig)); the whole forward runs
//! inside the pool, so no step pays for handing work across to it. Buffers live in
//! [`Scratch`], sized once: a decode step allocates nothing.

use super::error::{ModelError, ModelErrorKind};
use super::gguf::{type_name, GgufFile, TensorInfo};
use super::quant::{
    attend_heads, bias_q8, dequantize_row, dot_f32, f16_to_f32, matmul_packed, matmul_q8_biased,
    matmul_rows, matvec_rows, pack8, packable, q8_pairs, quantize_q8, unpack_row8, BlockQ8,
    DotKernel, QType, HEADS_PER_PASS, PACK, QK,
};
use rayon::prelude::*;
use std::ops::Range;

/// The hyper-parameters read from `llama.*` metadata.
#[derive(Clone, Debug, PartialEq)]
pub struct LlamaParams {
    /// Transformer blocks.
    pub n_layer: usize,
    /// Embedding width.
    pub d_model: usize,
    /// Query heads.
    pub n_head: usize,
    /// Key/value heads (grouped-query attention when fewer than `n_head`).
    pub n_kv_head: usize,
    /// Width of the feed-forward hidden layer.
    pub d_ff: usize,
    /// Output width (tokens).
    pub n_vocab: usize,
    /// Context the model was trained for.
    pub context_train: usize,
    /// RMSNorm epsilon.
    pub rms_eps: f32,
    /// RoPE frequency base.
    pub rope_base: f32,
}

impl LlamaParams {
    /// Width of one head.
    pub fn head_dim(&self) -> usize {
        self.d_model / self.n_head
    }

    /// Width of the keys (and values) of all KV heads.
    pub fn kv_dim(&self) -> usize {
        self.head_dim() * self.n_kv_head
    }
}

/// A weight matrix: quantised blocks in the file's bytes (as the file has them, or repacked
/// in place into groups of eight rows, [`pack8`]), or widened to f32.
#[derive(Debug)]
enum Weight {
    Quant {
        ty: QType,
        range: Range<usize>,
        row_bytes: usize,
    },
    Packed {
        ty: QType,
        range: Range<usize>,
        row_bytes: usize,
    },
    /// Q8_0 with every quant byte's sign bit flipped (`quant::bias_q8`), for the AVX-512 VNNI
    /// output projection (`quant::matmul_q8_biased`).
    Q8Biased {
        range: Range<usize>,
        row_bytes: usize,
    },
    F32(Vec<f32>),
}

#[derive(Debug)]
pub(crate) struct Matrix {
    w: Weight,
    rows: usize,
    cols: usize,
}

#[derive(Debug)]
struct Layer {
    attn_norm: Vec<f32>,
    wq: Matrix,
    wk: Matrix,
    wv: Matrix,
    wo: Matrix,
    ffn_norm: Vec<f32>,
    w_gate: Matrix,
    w_up: Matrix,
    w_down: Matrix,
}

/// Reusable buffers of the forward pass, sized for `cap` tokens in one batch.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    cap: usize,
    x: Vec<f32>,
    xn: Vec<f32>,
    xq: Vec<BlockQ8>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    att: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
    hq: Vec<BlockQ8>,
    tmp: Vec<f32>,
    /// Attention scores of a single-token step: `HEADS_PER_PASS` rows of `context`.
    scores: Vec<f32>,
    /// `cos, sin` per position of the batch and rotation pair.
    rope: Vec<(f32, f32)>,
    /// Per token of the batch: its segment and its position in that segment's sequence.
    at: Vec<(usize, usize)>,
}

/// Loaded weights: immutable after load, shared by `Arc` between every sequence that runs on
/// them (one [`Llama`], or the many sequences of a [`super::BatchedModel`]).
#[derive(Debug)]
pub(crate) struct Weights {
    pub params: LlamaParams,
    /// The whole file: quantised tensors are ranges into it.
    bytes: Vec<u8>,
    tok_embd: Matrix,
    layers: Vec<Layer>,
    out_norm: Vec<f32>,
    output: Option<Matrix>,
    inv_freq: Vec<f32>,
    /// The int8 dot kernels' instruction set ([`DotKernel::Scalar`]: the reference kernels
    /// and the file's layout; any other: AVX2 and the packed layout).
    kernel: DotKernel,
}

/// The keys and values of one sequence: per layer `[position][kv_dim]`.
#[derive(Debug, Default)]
pub(crate) struct KvCache {
    kv: Vec<(Vec<f32>, Vec<f32>)>,
    n_cached: usize,
}

impl KvCache {
    /// An empty cache for `w`'s layers.
    pub fn new(w: &Weights) -> KvCache {
        KvCache {
            kv: (0..w.params.n_layer).map(|_| (Vec::new(), Vec::new())).collect(),
            n_cached: 0,
        }
    }

    /// Positions held.
    pub fn len(&self) -> usize {
        self.n_cached
    }

    /// Forget every position from `n` on (rollback).
    pub fn truncate(&mut self, n: usize, kv_dim: usize) {
        if n < self.n_cached {
            for (k, v) in &mut self.kv {
                k.truncate(n * kv_dim);
                v.truncate(n * kv_dim);
            }
            self.n_cached = n;
        }
    }

    /// Bytes held (for memory accounting).
    pub fn bytes(&self) -> usize {
        self.kv.iter().map(|(k, v)| (k.capacity() + v.capacity()) * 4).sum()
    }
}

/// One sequence's part of a batched forward pass: its cache and the tokens to append to it.
pub(crate) struct Segment<'a> {
    pub cache: &'a mut KvCache,
    pub tokens: &'a [u32],
}

/// Shared weights plus one KV cache and its buffers: the state of one sequence.
#[derive(Debug)]
pub(crate) struct Llama {
    pub params: LlamaParams,
    weights: std::sync::Arc<Weights>,
    cache: KvCache,
    context: usize,
    scratch: Scratch,
}

fn meta_usize(f: &GgufFile, key: &str) -> Result<usize, ModelError> {
    f.get_u64(key)
        .map(|v| v as usize)
        .ok_or_else(|| ModelError::new(ModelErrorKind::MissingKey { key: key.into() }))
}

fn bad(name: &str, why: String) -> ModelError {
    ModelError::new(ModelErrorKind::BadTensor { name: name.into(), why })
}

fn find<'a>(f: &'a GgufFile, name: &str) -> Result<&'a TensorInfo, ModelError> {
    f.tensor(name).ok_or_else(|| bad(name, "missing".into()))
}

fn f32_values(bytes: &[u8], t: &TensorInfo) -> Result<Vec<f32>, ModelError> {
    let b = &bytes[t.range.clone()];
    match t.ggml_type {
        0 => Ok(b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()),
        1 => Ok(b.chunks_exact(2).map(|c| f16_to_f32(u16::from_le_bytes([c[0], c[1]]))).collect()),
        other => Err(ModelError::new(ModelErrorKind::UnsupportedQuantization {
            tensor: t.name.clone(),
            ggml_type: type_name(other).into(),
        })),
    }
}

fn vector(f: &GgufFile, bytes: &[u8], name: &str, len: usize) -> Result<Vec<f32>, ModelError> {
    let t = find(f, name)?;
    if t.n_elements() != len as u64 {
        return Err(bad(name, format!("has {} elements, expected {len}", t.n_elements())));
    }
    f32_values(bytes, t)
}

fn matrix(
    f: &GgufFile,
    bytes: &[u8],
    name: &str,
    rows: usize,
    cols: usize,
) -> Result<Matrix, ModelError> {
    let t = find(f, name)?;
    if t.dims.len() != 2 || t.dims[0] != cols as u64 || t.dims[1] != rows as u64 {
        return Err(bad(name, format!("has dims {:?}, expected [{cols}, {rows}]", t.dims)));
    }
    let w = match QType::from_ggml(t.ggml_type) {
        Some(ty) => {
            Weight::Quant { ty, range: t.range.clone(), row_bytes: cols / QK * ty.block_bytes() }
        }
        None => Weight::F32(f32_values(bytes, t)?),
    };
    Ok(Matrix { w, rows, cols })
}

impl Llama {
    /// Read the hyper-parameters and locate every tensor of a `llama` GGUF file.
    pub fn new(
        f: &GgufFile,
        file: Vec<u8>,
        context: usize,
        kernel: DotKernel,
    ) -> Result<Llama, ModelError> {
        let weights = std::sync::Arc::new(Weights::new(f, file, kernel)?);
        Ok(Llama::over(weights, context))
    }

    /// A fresh sequence over shared weights.
    pub fn over(weights: std::sync::Arc<Weights>, context: usize) -> Llama {
        Llama {
            params: weights.params.clone(),
            cache: KvCache::new(&weights),
            weights,
            context,
            scratch: Scratch::default(),
        }
    }

    /// The shared weights.
    pub fn weights(&self) -> &std::sync::Arc<Weights> {
        &self.weights
    }

    /// The int8 dot kernels' instruction set.
    pub fn kernel(&self) -> DotKernel {
        self.weights.kernel
    }

    /// The context window (positions the cache may hold).
    pub fn context(&self) -> usize {
        self.context
    }

    /// Forget every position from `n` on (rollback).
    pub fn truncate(&mut self, n: usize) {
        self.cache.truncate(n, self.params.kv_dim());
    }

    /// Run `tokens` at positions `n_cached..`, append them to the cache, and write the logits
    /// after the last one into `logits` (`n_vocab` wide).
    ///
    /// # Errors
    /// [`ModelErrorKind::ContextFull`] when the cache would outgrow the context,
    /// [`ModelErrorKind::TokenOutOfRange`] for an id past the vocabulary.
    pub fn forward(&mut self, tokens: &[u32], logits: &mut [f32]) -> Result<(), ModelError> {
        let mut seg = [Segment { cache: &mut self.cache, tokens }];
        self.weights.forward(&mut seg, self.context, &mut self.scratch, logits)
    }
}

impl Weights {
    fn new(f: &GgufFile, file: Vec<u8>, kernel: DotKernel) -> Result<Weights, ModelError> {
        let bytes = &file[..];
        let arch = f.get_str("general.architecture").unwrap_or("");
        if arch != "llama" {
            return Err(ModelError::new(ModelErrorKind::UnsupportedArchitecture(arch.into())));
        }
        let d_model = meta_usize(f, "llama.embedding_length")?;
        let n_head = meta_usize(f, "llama.attention.head_count")?;
        let tok = find(f, "token_embd.weight")?;
        let n_vocab = tok.dims.get(1).copied().unwrap_or(0) as usize;
        let params = LlamaParams {
            n_layer: meta_usize(f, "llama.block_count")?,
            d_model,
            n_head,
            n_kv_head: f.get_u64("llama.attention.head_count_kv").map_or(n_head, |v| v as usize),
            d_ff: meta_usize(f, "llama.feed_forward_length")?,
            n_vocab,
            context_train: meta_usize(f, "llama.context_length")?,
            rms_eps: f.get_f64("llama.attention.layer_norm_rms_epsilon").unwrap_or(1e-5) as f32,
            rope_base: f.get_f64("llama.rope.freq_base").unwrap_or(10_000.0) as f32,
        };
        let p = &params;
        if n_head == 0
            || p.n_kv_head == 0
            || d_model % n_head != 0
            || n_head % p.n_kv_head != 0
            || d_model % QK != 0
            || !p.d_ff.is_multiple_of(QK)
            || !p.head_dim().is_multiple_of(2)
        {
            return Err(ModelError::new(ModelErrorKind::Malformed(format!(
                "unusable llama shape: d_model {d_model}, heads {n_head}/{}, d_ff {}",
                p.n_kv_head, p.d_ff
            ))));
        }
        if let Some(rd) = f.get_u64("llama.rope.dimension_count") {
            if rd as usize != p.head_dim() {
                return Err(ModelError::new(ModelErrorKind::Malformed(format!(
                    "partial rotary embeddings ({rd} of {} dims) are not supported",
                    p.head_dim()
                ))));
            }
        }
        let (d, kvd, ff) = (d_model, p.kv_dim(), p.d_ff);
        let mut layers = Vec::with_capacity(p.n_layer);
        for i in 0..p.n_layer {
            let n = |s: &str| format!("blk.{i}.{s}.weight");
            layers.push(Layer {
                attn_norm: vector(f, bytes, &n("attn_norm"), d)?,
                wq: matrix(f, bytes, &n("attn_q"), d, d)?,
                wk: matrix(f, bytes, &n("attn_k"), kvd, d)?,
                wv: matrix(f, bytes, &n("attn_v"), kvd, d)?,
                wo: matrix(f, bytes, &n("attn_output"), d, d)?,
                ffn_norm: vector(f, bytes, &n("ffn_norm"), d)?,
                w_gate: matrix(f, bytes, &n("ffn_gate"), ff, d)?,
                w_up: matrix(f, bytes, &n("ffn_up"), ff, d)?,
                w_down: matrix(f, bytes, &n("ffn_down"), d, ff)?,
            });
        }
        let tok_embd = matrix(f, bytes, "token_embd.weight", n_vocab, d)?;
        let output = match f.tensor("output.weight") {
            Some(_) => Some(matrix(f, bytes, "output.weight", n_vocab, d)?),
            None => None,
        };
        let hd = p.head_dim();
        let inv_freq = (0..hd / 2).map(|i| p.rope_base.powf(-2.0 * i as f32 / hd as f32)).collect();
        // The blocks' matrices in the 8-row layout of the AVX2 kernels (`quant::pack8`); the
        // embedding table keeps the file's layout (its rows are looked up one at a time, and
        // a tied output projection runs on one token per sequence).
        let out_norm = vector(f, bytes, "output_norm.weight", d)?;
        let mut file = file;
        if kernel.simd() {
            for layer in &mut layers {
                for m in [
                    &mut layer.wq,
                    &mut layer.wk,
                    &mut layer.wv,
                    &mut layer.wo,
                    &mut layer.w_gate,
                    &mut layer.w_up,
                    &mut layer.w_down,
                ] {
                    m.pack(&mut file);
                }
            }
        }
        // The output projection (often the embedding table, tied) in the biased Q8_0 layout of
        // the AVX-512 VNNI kernel: it is a fifth of a decode step's arithmetic for SmolLM2.
        let (mut tok_embd, mut output) = (tok_embd, output);
        if kernel == DotKernel::Avx512Vnni {
            output.as_mut().unwrap_or(&mut tok_embd).bias(&mut file);
        }
        Ok(Weights { out_norm, bytes: file, params, tok_embd, layers, output, inv_freq, kernel })
    }

    fn ensure_scratch(&self, s: &mut Scratch, n: usize, n_seg: usize, context: usize) {
        let p = &self.params;
        let out = n_seg * p.n_vocab;
        if s.tmp.len() < out {
            s.tmp.resize(out, 0.0);
        }
        if s.cap >= n && s.scores.len() >= HEADS_PER_PASS * context {
            return;
        }
        let (d, kvd, ff) = (p.d_model, p.kv_dim(), p.d_ff);
        s.cap = n;
        s.x.resize(n * d, 0.0);
        s.xn.resize(n * d, 0.0);
        s.xq.resize(n * d / QK, BlockQ8::default());
        s.q.resize(n * d, 0.0);
        s.k.resize(n * kvd, 0.0);
        s.v.resize(n * kvd, 0.0);
        s.att.resize(n * d, 0.0);
        s.gate.resize(n * ff, 0.0);
        s.up.resize(n * ff, 0.0);
        s.hq.resize(n * ff / QK, BlockQ8::default());
        s.tmp.resize((n * ff.max(d)).max(out), 0.0);
        s.scores.resize(HEADS_PER_PASS * context, 0.0);
        s.rope.resize(n * p.head_dim() / 2, (0.0, 0.0));
        s.at.resize(n, (0, 0));
    }

    /// One forward pass over several sequences at once: each segment's tokens run at positions
    /// `cache.len()..` of its own sequence and are appended to its cache; the logits after
    /// each segment's last token go to `logits[i * n_vocab..(i + 1) * n_vocab]`. Every matrix
    /// product runs over all the batch's tokens together (each weight row read once for the
    /// batch); attention is per token over its own sequence's cache.
    ///
    /// # Errors
    /// [`ModelErrorKind::ContextFull`] when a cache would outgrow `context`,
    /// [`ModelErrorKind::TokenOutOfRange`] for an id past the vocabulary; checked for every
    /// segment before anything runs, so on an error no cache has changed.
    pub fn forward(
        &self,
        segs: &mut [Segment<'_>],
        context: usize,
        s: &mut Scratch,
        logits: &mut [f32],
    ) -> Result<(), ModelError> {
        let nv = self.params.n_vocab;
        let mut n = 0;
        for seg in segs.iter() {
            let p0 = seg.cache.len();
            if p0 + seg.tokens.len() > context {
                return Err(ModelError::new(ModelErrorKind::ContextFull {
                    tokens: p0 + seg.tokens.len(),
                    context,
                }));
            }
            if let Some(&id) = seg.tokens.iter().find(|&&t| t as usize >= nv) {
                return Err(ModelError::new(ModelErrorKind::TokenOutOfRange { id, n_vocab: nv }));
            }
            n += seg.tokens.len();
        }
        if n == 0 {
            return Ok(());
        }
        // A segment without tokens has no logits to give: refuse rather than write stale ones.
        if segs.iter().any(|g| g.tokens.is_empty()) {
            return Err(ModelError::new(ModelErrorKind::Config(
                "a batch segment without tokens".into(),
            )));
        }
        let n_seg = segs.len();
        self.ensure_scratch(s, n, n_seg, context);
        let d = self.params.d_model;
        // Embeddings, and where each token sits.
        let mut i = 0;
        for (g, seg) in segs.iter().enumerate() {
            let p0 = seg.cache.len();
            for (j, &t) in seg.tokens.iter().enumerate() {
                self.tok_embd.row(&self.bytes, t as usize, &mut s.x[i * d..(i + 1) * d]);
                s.at[i] = (g, p0 + j);
                i += 1;
            }
        }
        // Rotation angles for the batch's positions, shared by every head and layer.
        let half = self.params.head_dim() / 2;
        for i in 0..n {
            let pos = s.at[i].1 as f32;
            for (j, &f) in self.inv_freq.iter().enumerate() {
                let (sn, c) = (pos * f).sin_cos();
                s.rope[i * half + j] = (c, sn);
            }
        }
        for l in 0..self.layers.len() {
            self.layer(l, n, segs, context, s);
        }
        for seg in segs.iter_mut() {
            seg.cache.n_cached += seg.tokens.len();
        }
        // The output projection for each segment's last token only.
        let eps = self.params.rms_eps;
        let bytes = &self.bytes[..];
        let mut end = 0;
        for (g, seg) in segs.iter().enumerate() {
            end += seg.tokens.len();
            let last = (end - 1) * d;
            let (x, xn) = (&s.x, &mut s.xn);
            rms_norm(&x[last..last + d], &self.out_norm, eps, &mut xn[g * d..(g + 1) * d]);
        }
        quantize_q8(&s.xn[..n_seg * d], &mut s.xq[..n_seg * d / QK], self.kernel.simd());
        let out = self.output.as_ref().unwrap_or(&self.tok_embd);
        out.matmul(
            bytes,
            &s.xn[..n_seg * d],
            &s.xq[..n_seg * d / QK],
            n_seg,
            &mut logits[..n_seg * nv],
            &mut s.tmp,
            self.kernel,
        );
        Ok(())
    }

    fn layer(&self, l: usize, n: usize, segs: &mut [Segment<'_>], ctx: usize, s: &mut Scratch) {
        let p = &self.params;
        let (d, kvd, ff, hd) = (p.d_model, p.kv_dim(), p.d_ff, p.head_dim());
        let (n_head, group) = (p.n_head, p.n_head / p.n_kv_head);
        let eps = p.rms_eps;
        let kernel = self.kernel;
        let simd = kernel.simd();
        let layer = &self.layers[l];
        let bytes = &self.bytes[..];
        // Per-token work (norms, quantisation, rotations, SiLU, residuals) runs on the pool
        // for a batch of many tokens (a prompt): serial, it was a quarter of a 2-thread prefill.
        let par = n >= PAR_TOKENS;
        // Attention block.
        norm_quantize(&s.x[..n * d], &layer.attn_norm, eps, &mut s.xn, &mut s.xq, d, simd, par);
        let (xn, xq) = (&s.xn[..n * d], &s.xq[..n * d / QK]);
        layer.wq.matmul(bytes, xn, xq, n, &mut s.q[..n * d], &mut s.tmp, kernel);
        layer.wk.matmul(bytes, xn, xq, n, &mut s.k[..n * kvd], &mut s.tmp, kernel);
        layer.wv.matmul(bytes, xn, xq, n, &mut s.v[..n * kvd], &mut s.tmp, kernel);
        let half = hd / 2;
        let rope = &s.rope[..n * half];
        type Rot<'a> = ((&'a mut [f32], &'a mut [f32]), &'a [(f32, f32)]);
        let rot = |((q, k), r): Rot<'_>| {
            for h in q.chunks_exact_mut(hd) {
                rotate(h, r);
            }
            for h in k.chunks_exact_mut(hd) {
                rotate(h, r);
            }
        };
        let (q, k) = (&mut s.q[..n * d], &mut s.k[..n * kvd]);
        if par {
            q.par_chunks_mut(d).zip(k.par_chunks_mut(kvd)).zip(rope.par_chunks(half)).for_each(rot);
        } else {
            q.chunks_mut(d).zip(k.chunks_mut(kvd)).zip(rope.chunks(half)).for_each(rot);
        }
        let mut a = 0;
        for seg in segs.iter_mut() {
            let b = a + seg.tokens.len();
            let (kc, vc) = &mut seg.cache.kv[l];
            kc.extend_from_slice(&s.k[a * kvd..b * kvd]);
            vc.extend_from_slice(&s.v[a * kvd..b * kvd]);
            a = b;
        }
        let views: smallvec::SmallVec<[(&[f32], &[f32]); 16]> =
            segs.iter().map(|g| (&g.cache.kv[l].0[..], &g.cache.kv[l].1[..])).collect();
        let scale = 1.0 / (hd as f32).sqrt();
        let q = &s.q[..n * d];
        let at = &s.at[..n];
        // The query heads of one key/value head go together (`attend_heads`).
        let attend = |i: usize, out: &mut [f32], scores: &mut [f32]| {
            let (g, pos) = at[i];
            let (kc, vc) = views[g];
            let len = pos + 1;
            for kh in 0..n_head / group {
                let (a, b) = (i * d + kh * group * hd, i * d + (kh + 1) * group * hd);
                let o = &mut out[kh * group * hd..(kh + 1) * group * hd];
                let (kc, vc) = (&kc[kh * hd..], &vc[kh * hd..]);
                attend_heads(&q[a..b], hd, kc, vc, kvd, len, scale, scores, o, kernel);
            }
        };
        // Each token's attention output is quantised for `wo` where it is made.
        let attend_q = |i: usize, (out, oq): (&mut [f32], &mut [BlockQ8]), sc: &mut [f32]| {
            attend(i, out, sc);
            quantize_q8(out, oq, simd);
        };
        let (att, xq) = (&mut s.att[..n * d], &mut s.xq[..n * d / QK]);
        if n == 1 {
            attend_q(0, (att, xq), &mut s.scores[..HEADS_PER_PASS * ctx]);
        } else {
            // Scores are scratch of the task, not of the token (a prompt of 1,500 tokens
            // would otherwise hold 1,500 rows of the context).
            att.par_chunks_mut(d).zip(xq.par_chunks_mut(d / QK)).enumerate().for_each_init(
                || vec![0.0f32; HEADS_PER_PASS * ctx],
                |sc, (i, c)| attend_q(i, c, sc),
            );
        }
        layer.wo.matmul(
            bytes,
            &s.att[..n * d],
            &s.xq[..n * d / QK],
            n,
            &mut s.xn[..n * d],
            &mut s.tmp,
            kernel,
        );
        // The residual, then the feed-forward block's norm of it (`xn` holds `wo`'s output
        // until the norm overwrites it, token by token).
        let ffn_norm = &layer.ffn_norm;
        let resid_norm = |((x, o), oq): ((&mut [f32], &mut [f32]), &mut [BlockQ8])| {
            for (x, a) in x.iter_mut().zip(o.iter()) {
                *x += a;
            }
            rms_norm(x, ffn_norm, eps, o);
            quantize_q8(o, oq, simd);
        };
        let (x, o, oq) = (&mut s.x[..n * d], &mut s.xn[..n * d], &mut s.xq[..n * d / QK]);
        if par {
            x.par_chunks_mut(d)
                .zip(o.par_chunks_mut(d))
                .zip(oq.par_chunks_mut(d / QK))
                .for_each(resid_norm);
        } else {
            x.chunks_mut(d).zip(o.chunks_mut(d)).zip(oq.chunks_mut(d / QK)).for_each(resid_norm);
        }
        let (xn, xq) = (&s.xn[..n * d], &s.xq[..n * d / QK]);
        layer.w_gate.matmul(bytes, xn, xq, n, &mut s.gate[..n * ff], &mut s.tmp, kernel);
        layer.w_up.matmul(bytes, xn, xq, n, &mut s.up[..n * ff], &mut s.tmp, kernel);
        let swiglu = |((g, u), gq): ((&mut [f32], &[f32]), &mut [BlockQ8])| {
            for (g, &u) in g.iter_mut().zip(u) {
                // SiLU(g) · u, with the branch-free `exp` that vectorises (libm's `expf` was
                // a call per element); clamped to its domain, where `g / (1 + e^88)` is 0 to
                // within f32 for every g below −88 anyway.
                *g = *g / (1.0 + crate::sampler::exp::exp((-*g).min(88.0))) * u;
            }
            quantize_q8(g, gq, simd);
        };
        let (g, u, gq) = (&mut s.gate[..n * ff], &s.up[..n * ff], &mut s.hq[..n * ff / QK]);
        if par {
            g.par_chunks_mut(ff)
                .zip(u.par_chunks(ff))
                .zip(gq.par_chunks_mut(ff / QK))
                .for_each(swiglu);
        } else {
            g.chunks_mut(ff).zip(u.chunks(ff)).zip(gq.chunks_mut(ff / QK)).for_each(swiglu);
        }
        layer.w_down.matmul(
            bytes,
            &s.gate[..n * ff],
            &s.hq[..n * ff / QK],
            n,
            &mut s.xn[..n * d],
            &mut s.tmp,
            kernel,
        );
        let (x, o) = (&mut s.x[..n * d], &s.xn[..n * d]);
        let add = |(x, o): (&mut [f32], &[f32])| {
            for (x, a) in x.iter_mut().zip(o) {
                *x += a;
            }
        };
        if par {
            x.par_chunks_mut(d).zip(o.par_chunks(d)).for_each(add);
        } else {
            x.chunks_mut(d).zip(o.chunks(d)).for_each(add);
        }
    }
}

/// Tokens in a forward pass from which the per-token work between the matrix products runs
/// on the pool (below, a rayon call per step costs more than it saves: batched decode of a
/// few sequences).
const PAR_TOKENS: usize = 16;

/// RMSNorm of each `d`-wide row of `x` into `xn`, quantised into `xq`, one task per row when
/// `par`.
#[allow(clippy::too_many_arguments)]
fn norm_quantize(
    x: &[f32],
    w: &[f32],
    eps: f32,
    xn: &mut [f32],
    xq: &mut [BlockQ8],
    d: usize,
    simd: bool,
    par: bool,
) {
    let n = x.len() / d;
    let (xn, xq) = (&mut xn[..n * d], &mut xq[..n * d / QK]);
    let f = |((x, o), oq): ((&[f32], &mut [f32]), &mut [BlockQ8])| {
        rms_norm(x, w, eps, o);
        quantize_q8(o, oq, simd);
    };
    if par {
        x.par_chunks(d).zip(xn.par_chunks_mut(d)).zip(xq.par_chunks_mut(d / QK)).for_each(f);
    } else {
        x.chunks(d).zip(xn.chunks_mut(d)).zip(xq.chunks_mut(d / QK)).for_each(f);
    }
}

/// Rows per parallel task: small enough for two threads to share a 576-row matrix and to
/// rebalance when one of them is descheduled on a busy machine.
const ROWS_PER_TASK: usize = 32;

/// Tokens per parallel task of a packed product over many tokens (a prompt): one tile of the
/// AVX-512 kernel, two of the AVX2 ones.
const TOKENS_PER_TASK: usize = 8;

impl Matrix {
    /// Repack a Q4_0/Q4_1 matrix whose rows come in eights into [`pack8`]'s layout, in place
    /// in the file's bytes; other matrices stay as they are.
    fn pack(&mut self, bytes: &mut [u8]) {
        if let Weight::Quant { ty, range, row_bytes } = &self.w {
            if packable(*ty) && self.rows.is_multiple_of(PACK) {
                pack8(*ty, &mut bytes[range.clone()], self.rows, self.cols / QK);
                self.w = Weight::Packed { ty: *ty, range: range.clone(), row_bytes: *row_bytes };
            }
        }
    }

    /// A Q8_0 matrix into the [`Weight::Q8Biased`] layout, in place; others stay.
    fn bias(&mut self, bytes: &mut [u8]) {
        if let Weight::Quant { ty: QType::Q8_0, range, row_bytes } = &self.w {
            bias_q8(&mut bytes[range.clone()]);
            self.w = Weight::Q8Biased { range: range.clone(), row_bytes: *row_bytes };
        }
    }

    /// Row `r` as f32 (embedding lookup).
    fn row(&self, bytes: &[u8], r: usize, out: &mut [f32]) {
        match &self.w {
            Weight::Quant { ty, range, row_bytes } => {
                let data = &bytes[range.clone()];
                dequantize_row(*ty, &data[r * row_bytes..(r + 1) * row_bytes], out);
            }
            Weight::Packed { ty, range, row_bytes } => {
                let mut row = vec![0u8; *row_bytes];
                unpack_row8(*ty, &bytes[range.clone()], self.cols / QK, r, &mut row);
                dequantize_row(*ty, &row, out);
            }
            Weight::Q8Biased { range, row_bytes } => {
                let mut row = bytes[range.clone()][r * row_bytes..(r + 1) * row_bytes].to_vec();
                bias_q8(&mut row);
                dequantize_row(QType::Q8_0, &row, out);
            }
            Weight::F32(v) => out.copy_from_slice(&v[r * self.cols..(r + 1) * self.cols]),
        }
    }

    /// `out[t][r] = row_r · x_t` for the `n` vectors of the batch (`x` in f32, `xq` quantised).
    #[allow(clippy::too_many_arguments)]
    fn matmul(
        &self,
        bytes: &[u8],
        x: &[f32],
        xq: &[BlockQ8],
        n: usize,
        out: &mut [f32],
        tmp: &mut [f32],
        kernel: DotKernel,
    ) {
        let (rows, cols) = (self.rows, self.cols);
        let simd = kernel.simd();
        debug_assert_eq!(out.len(), n * rows);
        match &self.w {
            Weight::Quant { ty, range, row_bytes } => {
                let data = &bytes[range.clone()];
                let nb = cols / QK;
                if n == 1 {
                    out.par_chunks_mut(ROWS_PER_TASK).enumerate().for_each(|(c, o)| {
                        matvec_rows(*ty, data, *row_bytes, c * ROWS_PER_TASK, xq, o, simd)
                    });
                } else {
                    let tmp = &mut tmp[..n * rows];
                    tmp.par_chunks_mut(ROWS_PER_TASK * n).enumerate().for_each(|(c, o)| {
                        matmul_rows(*ty, data, *row_bytes, c * ROWS_PER_TASK, xq, nb, o, simd)
                    });
                    for r in 0..rows {
                        for t in 0..n {
                            out[t * rows + r] = tmp[r * n + t];
                        }
                    }
                }
            }
            Weight::Packed { ty, range, .. } => {
                let data = &bytes[range.clone()];
                let nb = cols / QK;
                if n >= 4 * TOKENS_PER_TASK {
                    // A prompt: each task runs every row for its own tokens, whose outputs
                    // are one contiguous `[tokens][rows]` slice of `out` (no copy after), and
                    // the matrix (≤ 0.6 MB here) streams from each core's cache.
                    out.par_chunks_mut(TOKENS_PER_TASK * rows).enumerate().for_each(|(c, o)| {
                        let (t0, m) = (c * TOKENS_PER_TASK, o.len() / rows);
                        matmul_packed(*ty, data, nb, 0, &xq[t0 * nb..(t0 + m) * nb], m, o, kernel)
                    });
                    return;
                }
                split_rows(out, tmp, n, rows, |first, o| {
                    matmul_packed(*ty, data, nb, first, xq, n, o, kernel)
                });
            }
            Weight::Q8Biased { range, row_bytes } => {
                let data = &bytes[range.clone()];
                let nb = cols / QK;
                // The activations laid out for the kernel once, read by every task.
                let px = q8_pairs(xq, nb, n);
                split_rows(out, tmp, n, rows, |first, o| {
                    matmul_q8_biased(data, *row_bytes, nb, first, &px, n, o)
                });
            }
            Weight::F32(w) => {
                for t in 0..n {
                    let xt = &x[t * cols..(t + 1) * cols];
                    out[t * rows..(t + 1) * rows].par_iter_mut().enumerate().for_each(|(r, o)| {
                        *o = dot_f32(&w[r * cols..(r + 1) * cols], xt);
                    });
                }
            }
        }
    }
}

/// A product over `n` tokens split by rows, [`ROWS_PER_TASK`] a task: `run(first, o)` writes
/// rows `first..` for every token, `[n][its rows]`. For one token that is `out` itself; for
/// more, each task's part of `tmp`, whose rows then go to their places, 32 floats a copy.
fn split_rows(
    out: &mut [f32],
    tmp: &mut [f32],
    n: usize,
    rows: usize,
    run: impl Fn(usize, &mut [f32]) + Sync,
) {
    if n == 1 {
        out.par_chunks_mut(ROWS_PER_TASK).enumerate().for_each(|(c, o)| run(c * ROWS_PER_TASK, o));
        return;
    }
    let tmp = &mut tmp[..n * rows];
    tmp.par_chunks_mut(ROWS_PER_TASK * n).enumerate().for_each(|(c, o)| run(c * ROWS_PER_TASK, o));
    let tmp = &*tmp;
    let gather = |(t, o): (usize, &mut [f32])| {
        for (c, chunk) in tmp.chunks(ROWS_PER_TASK * n).enumerate() {
            let w = chunk.len() / n;
            let at = c * ROWS_PER_TASK;
            o[at..at + w].copy_from_slice(&chunk[t * w..(t + 1) * w]);
        }
    };
    if n >= PAR_TOKENS {
        out.par_chunks_mut(rows).enumerate().for_each(gather);
    } else {
        out.chunks_mut(rows).enumerate().for_each(gather);
    }
}

fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let ms = dot_f32(x, x) / x.len() as f32;
    let k = 1.0 / (ms + eps).sqrt();
    for ((o, &a), &b) in out.iter_mut().zip(x).zip(w) {
        *o = a * k * b;
    }
}

fn rotate(h: &mut [f32], rope: &[(f32, f32)]) {
    for (pair, &(c, s)) in h.chunks_exact_mut(2).zip(rope) {
        let (a, b) = (pair[0], pair[1]);
        pair[0] = a * c - b * s;
        pair[1] = a * s + b * c;
    }
}
