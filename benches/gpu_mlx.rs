//! Masked argmax on the MLX device against the host path, at real vocabulary widths.
//!
//! What a temperature-0 constrained step costs each way (seed design, `apply_mask_argmax`):
//! - `mlx_masked_argmax`: fill the reused f32 bias from the mask, upload it, add it to the logits
//!   on the device, argmax, evaluate and read the id — everything but the engine's mask build.
//! - `mlx_greedy_argmax`: the unconstrained fast path, for the overhead of the mask.
//! - `host_transfer_masked_argmax`: the alternative — copy the logits to the host as f32 (the
//!   host path's one transfer), then a host masked argmax over the bitset.
//! - `host_masked_argmax` and `bias_fill`: the host pieces alone.
//!
//! Widths: 151,936 (Qwen2/2.5 logits) and 262,144 (Gemma 3). Masks allow a random half of the
//! vocabulary. Results and the machine they came from are in `docs/performance.md`.
//! Run: `eval cargo bench --features mlx $MLX_CARGO_FLAGS --bench gpu_mlx` (see `docs/gpu.md`).

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use grammask::gpu::{self, MaskedArgmax};
use grammask::{TokenId, TokenMask};
use mlx_rs::{Array, Dtype};

const WIDTHS: [usize; 2] = [151_936, 262_144];

/// SplitMix64, so every run measures the same logits and masks.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A host masked argmax as the host sampler would do it: walk the set bits of the bitset, keep
/// the largest logit (lowest id on ties).
fn host_masked_argmax(logits: &[f32], mask: &TokenMask) -> Option<TokenId> {
    let mut best: Option<(usize, f32)> = None;
    for (wi, &w) in mask.words().iter().enumerate() {
        let mut bits = w;
        while bits != 0 {
            let i = wi * 32 + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let x = logits[i];
            if best.map_or(true, |(_, b)| x > b) {
                best = Some((i, x));
            }
        }
    }
    best.map(|(i, _)| TokenId::from_index(i))
}

fn bench_masked_argmax(c: &mut Criterion) {
    let mut group = c.benchmark_group("gpu_mlx");
    group.sample_size(20).warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(2));
    for vocab in WIDTHS {
        let mut seed = vocab as u64;
        let values: Vec<f32> =
            (0..vocab).map(|_| (splitmix(&mut seed) >> 40) as f32 / (1u64 << 20) as f32).collect();
        let mut mask = TokenMask::new(vocab);
        for i in 0..vocab {
            if splitmix(&mut seed) & 1 == 1 {
                mask.insert(TokenId::from_index(i));
            }
        }
        group.throughput(Throughput::Elements(vocab as u64));

        for dtype in [Dtype::Float32, Dtype::Bfloat16] {
            let logits = Array::from_slice(&values, &[1, vocab as i32]).as_dtype(dtype).unwrap();
            logits.eval().unwrap();
            let tag = format!("{vocab}/{dtype:?}");

            let mut masked = MaskedArgmax::with_capacity(vocab);
            group.bench_function(BenchmarkId::new("mlx_masked_argmax", &tag), |b| {
                b.iter(|| masked.apply_token(black_box(&logits), black_box(&mask)).unwrap())
            });
            group.bench_function(BenchmarkId::new("mlx_greedy_argmax", &tag), |b| {
                b.iter(|| gpu::token_id(&gpu::argmax(black_box(&logits)).unwrap()).unwrap())
            });
            let mut host = Vec::with_capacity(vocab);
            group.bench_function(BenchmarkId::new("host_transfer_masked_argmax", &tag), |b| {
                b.iter(|| {
                    gpu::logits_to_host(black_box(&logits), &mut host).unwrap();
                    host_masked_argmax(&host, black_box(&mask)).unwrap()
                })
            });
        }

        group.bench_function(BenchmarkId::new("host_masked_argmax", vocab), |b| {
            b.iter(|| host_masked_argmax(black_box(&values), black_box(&mask)).unwrap())
        });
        let mut bias = vec![0.0f32; vocab];
        group.bench_function(BenchmarkId::new("bias_fill", vocab), |b| {
            b.iter(|| black_box(&mask).write_bias(black_box(&mut bias)))
        });
    }
    group.finish();
}

criterion_group!(benches, bench_masked_argmax);
criterion_main!(benches);
