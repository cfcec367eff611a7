//! The MLX sampling path (`grammask::gpu`) against a host oracle, on whatever device MLX has —
//! its CPU device on Linux (through `../shared/mlx-linux`), the GPU on Apple silicon.
//!
//! Masked argmax must equal the host masked argmax (lowest id on ties, forbidden = −inf) on random
//! logits and masks: f32 and bf16, vocabularies up to 262,144, masks allowing one token, all but
//! one, and random densities; greedy argmax must equal the host argmax; batch rows must not see
//! each other's masks; and every misuse must come back as a typed `GpuError` naming the problem.
//!
//! Run with `cargo test --features mlx $MLX_CARGO_FLAGS --test gpu_mlx` (see `docs/gpu.md`).
#![cfg(feature = "mlx")]

use grammask::gpu::{self, GpuErrorKind, MaskedArgmax};
use grammask::{TokenId, TokenMask};
use mlx_rs::{Array, Dtype};
use proptest::prelude::*;

/// The host oracle every device result is compared with. When the sampler lands this body becomes
/// `grammask::sampler::apply_mask_argmax(logits, mask)` (adapting the return type) — one line.
/// The host path the GPU must equal: the sampler's `apply_mask_argmax` (lowest id on ties).
/// `None` when no token is allowed (the sampler's typed error). The plain loop in `reference`
/// cross-checks the sampler itself.
fn host_masked_argmax(logits: &[f32], mask: &TokenMask) -> Option<TokenId> {
    let sampler =
        grammask::sampler::apply_mask_argmax(grammask::sampler::Logits::F32(logits), mask).ok();
    let plain = reference::masked_argmax(logits, mask);
    if plain.is_some_and(|t| logits[t.index()] > f32::NEG_INFINITY) {
        assert_eq!(sampler, plain, "sampler::apply_mask_argmax agrees with the plain loop");
    }
    plain
}

mod reference {
    use grammask::{TokenId, TokenMask};

    /// The plainest masked argmax: the allowed id with the largest logit, the lowest id on ties;
    /// `None` when nothing is allowed. Forbidden tokens count as −inf, so they never win.
    pub fn masked_argmax(logits: &[f32], mask: &TokenMask) -> Option<TokenId> {
        assert_eq!(logits.len(), mask.len());
        let mut best: Option<(usize, f32)> = None;
        for (i, &x) in logits.iter().enumerate() {
            if mask.contains(TokenId::from_index(i)) && best.map_or(true, |(_, b)| x > b) {
                best = Some((i, x));
            }
        }
        best.map(|(i, _)| TokenId::from_index(i))
    }
}

/// SplitMix64 (Steele, Lea & Flood 2014): a seedable generator so every case is reproducible
/// from the seed printed in its failure message.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Random logits. `coarse` draws from 64 values a quarter apart, so ties are everywhere and the
/// lowest-id rule is exercised; otherwise values are spread over roughly [-20, 20).
fn random_logits(rng: &mut Rng, vocab: usize, coarse: bool) -> Vec<f32> {
    (0..vocab)
        .map(|_| {
            if coarse {
                (rng.below(64) as f32 - 32.0) * 0.25
            } else {
                (rng.unit() * 40.0 - 20.0) as f32
            }
        })
        .collect()
}

/// A mask allowing each token with probability `density`, plus one token so it is never empty.
fn random_mask(rng: &mut Rng, vocab: usize, density: f64) -> TokenMask {
    let mut m = TokenMask::new(vocab);
    for i in 0..vocab {
        if rng.unit() < density {
            m.insert(TokenId::from_index(i));
        }
    }
    m.insert(TokenId::from_index(rng.below(vocab)));
    m
}

/// Puts host logits on the device in `dtype`, shaped `shape`, and returns them with the values
/// the device actually holds (bf16 rounds them), read back with `gpu::logits_to_host` — whose
/// exactness `logits_to_host_is_exact_for_f32_and_bf16` checks on its own.
fn device_logits(values: &[f32], dtype: Dtype, shape: &[i32]) -> (Array, Vec<f32>) {
    let f32s = Array::from_slice(values, shape);
    let logits = if dtype == Dtype::Float32 { f32s } else { f32s.as_dtype(dtype).unwrap() };
    let mut held = Vec::new();
    gpu::logits_to_host(&logits, &mut held).unwrap();
    (logits, held)
}

const VOCABS: [usize; 9] = [1, 2, 31, 32, 33, 1000, 50_257, 151_936, 262_144];
const DTYPES: [Dtype; 2] = [Dtype::Float32, Dtype::Bfloat16];

/// The masks each random case is run under, named for failure messages.
fn masks_for(rng: &mut Rng, logits: &[f32]) -> Vec<(&'static str, TokenMask)> {
    let vocab = logits.len();
    let full = TokenMask::full(vocab);
    let unmasked_best = host_masked_argmax(logits, &full).unwrap();
    let mut out = Vec::new();

    let mut one = TokenMask::new(vocab);
    one.insert(TokenId::from_index(rng.below(vocab)));
    out.push(("one random token", one));
    let mut last = TokenMask::new(vocab);
    last.insert(TokenId::from_index(vocab - 1));
    out.push(("only the last token", last));
    if vocab > 1 {
        // Forbidding the unmasked winner makes the bias decide the answer.
        let mut all_but_best = full.clone();
        all_but_best.remove(unmasked_best);
        out.push(("all but the unmasked argmax", all_but_best));
        let mut all_but_first = full.clone();
        all_but_first.remove(TokenId(0));
        out.push(("all but token 0", all_but_first));
    }
    out.push(("all allowed", full));
    for density in [0.001, 0.1, 0.5, 0.95] {
        out.push(("random density", random_mask(rng, vocab, density)));
    }
    out
}

#[test]
fn masked_argmax_equals_host_reference() {
    let mut masked = MaskedArgmax::new();
    for (vi, &vocab) in VOCABS.iter().enumerate() {
        for dtype in DTYPES {
            for coarse in [false, true] {
                let seed = 0x6d61_736b ^ ((vi as u64) << 8) ^ (coarse as u64);
                let mut rng = Rng(seed);
                let values = random_logits(&mut rng, vocab, coarse);
                // Alternate `[1, vocab]` and `[vocab]`; both must give a `[1]` id.
                let shape: &[i32] = if coarse { &[vocab as i32] } else { &[1, vocab as i32] };
                let (logits, held) = device_logits(&values, dtype, shape);
                for (what, mask) in masks_for(&mut rng, &held) {
                    let ctx = format!(
                        "vocab {vocab}, {dtype:?}, shape {shape:?}, coarse {coarse}, seed {seed:#x}, \
                         mask {what} ({} allowed)",
                        mask.count()
                    );
                    let want = host_masked_argmax(&held, &mask).unwrap();
                    let ids = masked.apply(&logits, &mask).unwrap();
                    assert_eq!(ids.shape(), &[1], "{ctx}");
                    assert_eq!(ids.dtype(), Dtype::Int32, "{ctx}");
                    assert_eq!(gpu::token_id(&ids).unwrap(), want, "{ctx}");
                    assert_eq!(masked.apply_token(&logits, &mask).unwrap(), want, "{ctx}");
                }
            }
        }
    }
}

#[test]
fn greedy_argmax_equals_host_argmax() {
    for (vi, &vocab) in VOCABS.iter().enumerate() {
        for dtype in DTYPES {
            for coarse in [false, true] {
                let seed = 0x6772_6479 ^ ((vi as u64) << 8) ^ (coarse as u64);
                let mut rng = Rng(seed);
                let values = random_logits(&mut rng, vocab, coarse);
                for shape in [&[vocab as i32][..], &[1, vocab as i32][..]] {
                    let (logits, held) = device_logits(&values, dtype, shape);
                    let want = host_masked_argmax(&held, &TokenMask::full(vocab)).unwrap();
                    let ids = gpu::argmax(&logits).unwrap();
                    let ctx = format!("vocab {vocab}, {dtype:?}, shape {shape:?}, seed {seed:#x}");
                    assert_eq!(ids.shape(), &[1], "{ctx}");
                    assert_eq!(ids.dtype(), Dtype::Int32, "{ctx}");
                    assert_eq!(gpu::token_id(&ids).unwrap(), want, "{ctx}");
                }
            }
        }
    }
}

#[test]
fn bf16_promotes_to_f32_and_keeps_the_bf16_order() {
    // 1.0 and 1.00390625 (1 + 2^-8) differ in f32 but round to the same bf16 value, so in bf16
    // the lowest id wins the tie; the bias add must not reintroduce the f32 difference.
    let values = [0.0f32, 1.0, 1.003_906_3, -3.0];
    let (f32_logits, _) = device_logits(&values, Dtype::Float32, &[1, 4]);
    let (bf16_logits, held) = device_logits(&values, Dtype::Bfloat16, &[1, 4]);
    assert_eq!(held[1], held[2], "the test premise: a bf16 tie");
    let mask = TokenMask::full(4);
    let mut masked = MaskedArgmax::new();
    assert_eq!(masked.apply_token(&f32_logits, &mask).unwrap(), TokenId(2));
    assert_eq!(masked.apply_token(&bf16_logits, &mask).unwrap(), TokenId(1));
    assert_eq!(gpu::token_id(&gpu::argmax(&bf16_logits).unwrap()).unwrap(), TokenId(1));
}

#[test]
fn batch_rows_are_independent() {
    let (rows, vocab) = (5usize, 4099usize);
    let mut rng = Rng(0xba7c);
    let values = random_logits(&mut rng, rows * vocab, true);
    for dtype in DTYPES {
        let (logits, held) = device_logits(&values, dtype, &[rows as i32, vocab as i32]);
        let mut masks: Vec<TokenMask> =
            (0..rows).map(|r| random_mask(&mut rng, vocab, [0.001, 0.3, 0.9][r % 3])).collect();
        // Row 3 allows exactly the token row 0 would pick, as a trap for a shared bias.
        let row0_pick = host_masked_argmax(&held[..vocab], &masks[0]).unwrap();
        masks[3] = TokenMask::new(vocab);
        masks[3].insert(TokenId(row0_pick.0 ^ 1));
        let want: Vec<TokenId> = masks
            .iter()
            .enumerate()
            .map(|(r, m)| host_masked_argmax(&held[r * vocab..(r + 1) * vocab], m).unwrap())
            .collect();

        let mut masked = MaskedArgmax::new();
        let ids = masked.apply_rows(&logits, &masks).unwrap();
        assert_eq!(ids.shape(), &[rows as i32]);
        let mut got = Vec::new();
        gpu::token_ids_into(&ids, &mut got).unwrap();
        assert_eq!(got, want, "{dtype:?}");

        // The same through `&[&TokenMask]` and the checked host form.
        let refs: Vec<&TokenMask> = masks.iter().collect();
        masked.apply_rows_tokens(&logits, &refs, &mut got).unwrap();
        assert_eq!(got, want, "{dtype:?} via &[&TokenMask]");

        // Each row alone gives the same answer as inside the batch.
        for (r, mask) in masks.iter().enumerate() {
            let (row, _) = device_logits(
                &held[r * vocab..(r + 1) * vocab],
                Dtype::Float32,
                &[1, vocab as i32],
            );
            assert_eq!(masked.apply_token(&row, mask).unwrap(), want[r], "{dtype:?} row {r}");
        }

        let greedy = gpu::argmax_rows(&logits).unwrap();
        gpu::token_ids_into(&greedy, &mut got).unwrap();
        let full = TokenMask::full(vocab);
        for r in 0..rows {
            let want = host_masked_argmax(&held[r * vocab..(r + 1) * vocab], &full).unwrap();
            assert_eq!(got[r], want, "{dtype:?} greedy row {r}");
        }
    }
}

#[test]
fn one_masked_argmax_serves_changing_widths() {
    // The bias buffer grows and is then used in part: a stale tail must never leak in.
    let mut masked = MaskedArgmax::with_capacity(16);
    let mut rng = Rng(0x5eed);
    for vocab in [10usize, 5000, 7, 262_144, 33, 1] {
        let values = random_logits(&mut rng, vocab, false);
        let (logits, held) = device_logits(&values, Dtype::Float32, &[1, vocab as i32]);
        let mask = random_mask(&mut rng, vocab, 0.2);
        let want = host_masked_argmax(&held, &mask).unwrap();
        assert_eq!(masked.apply_token(&logits, &mask).unwrap(), want, "vocab {vocab}");
    }
    // Debug shows the buffer's size, not 262,144 floats.
    assert_eq!(format!("{masked:?}"), "MaskedArgmax { bias_len: 262144 }");
}

#[test]
fn logits_to_host_is_exact_for_f32_and_bf16() {
    // Quarter steps in [-8, 8) are exact in bf16, so both dtypes must read back unchanged.
    let mut rng = Rng(0x4057);
    let values = random_logits(&mut rng, 151_936, true);
    for dtype in DTYPES {
        let logits = Array::from_slice(&values, &[1, 151_936]).as_dtype(dtype).unwrap();
        let mut out = vec![1.0; 3]; // stale contents must be replaced
        gpu::logits_to_host(&logits, &mut out).unwrap();
        assert!(out == values, "{dtype:?}");
        let mut slice = vec![0.0; values.len()];
        gpu::logits_to_host_slice(&logits, &mut slice).unwrap();
        assert!(slice == values, "{dtype:?} into a slice");
    }
}

#[test]
fn logits_to_host_reads_non_contiguous_views_row_major() {
    // A transposed array is a strided view; the host copy must follow its logical order.
    let base = Array::from_slice(&[0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0], &[3, 2]);
    let view = base.transpose().unwrap();
    let mut out = Vec::new();
    gpu::logits_to_host(&view, &mut out).unwrap();
    assert_eq!(out, [0.0, 2.0, 4.0, 1.0, 3.0, 5.0]);
}

#[test]
fn errors_are_typed_and_name_the_problem() {
    let mut masked = MaskedArgmax::new();
    let logits = Array::from_slice(&[0.0f32; 8], &[1, 8]);

    let e = masked.apply(&logits, &TokenMask::full(7)).unwrap_err();
    assert_eq!(e.kind(), GpuErrorKind::MaskMismatch);
    assert!(e.to_string().contains("7 tokens") && e.to_string().contains("has 8"), "{e}");

    let cube = Array::from_slice(&[0.0f32; 8], &[1, 1, 8]);
    let e = masked.apply(&cube, &TokenMask::full(8)).unwrap_err();
    assert_eq!(e.kind(), GpuErrorKind::Shape);
    assert!(e.to_string().contains("[1, 1, 8]"), "{e}");
    let e = gpu::argmax(&Array::from_slice(&[0.0f32; 8], &[2, 4])).unwrap_err();
    assert_eq!(e.kind(), GpuErrorKind::Shape);
    assert!(e.to_string().contains("[2, 4]"), "{e}");
    let e = gpu::argmax_rows(&Array::from_slice(&[0.0f32; 8], &[8])).unwrap_err();
    assert_eq!(e.kind(), GpuErrorKind::Shape);

    let ints = Array::from_slice(&[0i32; 8], &[1, 8]);
    let e = gpu::argmax(&ints).unwrap_err();
    assert_eq!(e.kind(), GpuErrorKind::Dtype);
    assert!(e.to_string().contains("Int32"), "{e}");
    let e = gpu::logits_to_host(&ints, &mut Vec::new()).unwrap_err();
    assert_eq!(e.kind(), GpuErrorKind::Dtype);

    let e = masked.apply(&logits, &TokenMask::new(8)).unwrap_err();
    assert_eq!(e.kind(), GpuErrorKind::EmptyMask);
    assert!(e.to_string().contains("row 0"), "{e}");

    let batch = Array::from_slice(&[0.0f32; 8], &[2, 4]);
    let e = masked.apply_rows(&batch, &[TokenMask::full(4)]).unwrap_err();
    assert_eq!(e.kind(), GpuErrorKind::MaskMismatch);
    assert!(e.to_string().contains("1 masks given for 2"), "{e}");
    let e = masked.apply_rows(&batch, &[TokenMask::full(4), TokenMask::new(4)]).unwrap_err();
    assert_eq!(e.kind(), GpuErrorKind::EmptyMask);
    assert!(e.to_string().contains("row 1"), "{e}");

    // Allowed tokens whose logits are all -inf: the checked forms refuse to name a forbidden id.
    let ninf = Array::from_slice(&[0.0f32, f32::NEG_INFINITY, f32::NEG_INFINITY, 1.0], &[1, 4]);
    let mut mask = TokenMask::new(4);
    mask.insert(TokenId(1));
    mask.insert(TokenId(2));
    let e = masked.apply_token(&ninf, &mask).unwrap_err();
    assert_eq!(e.kind(), GpuErrorKind::NoFiniteAllowedLogit);

    let e = gpu::logits_to_host_slice(&logits, &mut [0.0; 3]).unwrap_err();
    assert_eq!(e.kind(), GpuErrorKind::Shape);
    assert!(e.to_string().contains("3 floats") && e.to_string().contains("have 8"), "{e}");

    // Errors MLX itself raises come back wrapped, with the MLX error as the source.
    let e = gpu::token_id(&Array::from_slice(&[1i32, 2], &[2])).unwrap_err();
    assert_eq!(e.kind(), GpuErrorKind::Mlx);
    assert!(std::error::Error::source(&e).is_some());
    let e = gpu::token_id(&Array::from_slice(&[1.0f32], &[1])).unwrap_err();
    assert_eq!(e.kind(), GpuErrorKind::Mlx);
    assert!(e.to_string().contains("Float32"), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Small vocabularies, any logits (including ties) and any non-empty mask.
    #[test]
    fn masked_argmax_matches_reference_on_small_cases(
        values in prop::collection::vec(-4i8..4, 1..300),
        bits in prop::collection::vec(any::<bool>(), 300),
        bf16 in any::<bool>(),
    ) {
        let vocab = values.len();
        let values: Vec<f32> = values.iter().map(|&v| f32::from(v) * 0.5).collect();
        let mut mask = TokenMask::from_bools(&bits[..vocab]);
        if mask.is_none_allowed() {
            mask.insert(TokenId(0));
        }
        let dtype = if bf16 { Dtype::Bfloat16 } else { Dtype::Float32 };
        let (logits, held) = device_logits(&values, dtype, &[1, vocab as i32]);
        let want = host_masked_argmax(&held, &mask).unwrap();
        prop_assert_eq!(MaskedArgmax::new().apply_token(&logits, &mask).unwrap(), want);
    }
}
