//! Sampler cost per decode step: vocabulary size × sampling configuration.
//!
//! Vocabularies 32k (Llama-2), 128k (Llama-3), 152k (Qwen2/3), 262k (Gemma-3) with realistic
//! logits (Gaussian body, a few peaked tokens). Each case is one full step, buffers reused
//! across iterations as in a decode loop. The full-sort top-p at 152k is the baseline a later
//! rejection sampler must beat. Figures are recorded in `docs/performance.md` (## Sampler).

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use grammask::sampler::{
    apply_mask_argmax, argmax, compute_top_logprobs_into, sample_token, Logits, Pcg32,
    PenaltyConfig, SamplerConfig, SamplerScratch, TokenLogprobs,
};
use grammask::{TokenId, TokenMask};

const VOCABS: [usize; 4] = [32_000, 128_256, 152_064, 262_144];

/// Gaussian logits (σ = 2.5) with a handful of strong tokens, like a real LM head.
fn logits(n: usize) -> Vec<f32> {
    let mut rng = Pcg32::new(n as u64);
    let mut v: Vec<f32> = (0..n)
        .map(|_| {
            // Box–Muller.
            let u1 = rng.next_f32().max(1e-7);
            let u2 = rng.next_f32();
            2.5 * (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
        })
        .collect();
    for j in 0..8 {
        let i = (rng.next_u32() as usize) % n;
        v[i] += 12.0 - j as f32;
    }
    v
}

/// A mask allowing about half the vocabulary, in runs (like a grammar state's byte classes).
fn mask(n: usize) -> TokenMask {
    let mut rng = Pcg32::new(7);
    let mut m = TokenMask::new(n);
    let mut i = 0;
    while i < n {
        let run = 1 + (rng.next_u32() % 64) as usize;
        if rng.next_u32().is_multiple_of(2) {
            for t in i..(i + run).min(n) {
                m.insert(TokenId::from_index(t));
            }
        }
        i += run;
    }
    m
}

fn bench(c: &mut Criterion) {
    let recent: Vec<TokenId> = (0..20).map(|i| TokenId(i * 37 % 1000)).collect();
    let penalties = PenaltyConfig::default()
        .with_repetition_penalty(1.1)
        .with_presence_penalty(0.2)
        .with_frequency_penalty(0.1)
        .with_bias(TokenId(5), 2.0)
        .with_bias(TokenId(6), -1.0);
    let t = SamplerConfig::default().with_temperature(0.8).with_seed(1);
    let configs: [(&str, SamplerConfig, PenaltyConfig); 5] = [
        ("temperature", t.clone(), PenaltyConfig::default()),
        ("top_p_0.9", t.clone().with_top_p(0.9), PenaltyConfig::default()),
        ("top_k_40", t.clone().with_top_k(40), PenaltyConfig::default()),
        ("min_p_0.05", t.clone().with_min_p(0.05), PenaltyConfig::default()),
        ("top_k40_top_p0.9_penalties", t.clone().with_top_k(40).with_top_p(0.9), penalties),
    ];
    let mut g = c.benchmark_group("sampler");
    for &n in &VOCABS {
        let row = logits(n);
        let m = mask(n);
        g.bench_with_input(BenchmarkId::new("greedy", n), &row, |b, row| {
            b.iter(|| argmax(Logits::F32(black_box(row))).unwrap())
        });
        g.bench_with_input(BenchmarkId::new("masked_greedy", n), &row, |b, row| {
            b.iter(|| apply_mask_argmax(Logits::F32(black_box(row)), &m).unwrap())
        });
        for (name, cfg, pen) in &configs {
            let mut scratch = SamplerScratch::with_capacity(n);
            let mut rng = Pcg32::new(cfg.seed_or_default());
            g.bench_with_input(BenchmarkId::new(*name, n), &row, |b, row| {
                b.iter(|| {
                    sample_token(
                        cfg,
                        pen,
                        Logits::F32(black_box(row)),
                        None,
                        &recent,
                        &mut rng,
                        &mut scratch,
                    )
                    .unwrap()
                })
            });
        }
        let mut out = TokenLogprobs::default();
        g.bench_with_input(BenchmarkId::new("logprobs_k20", n), &row, |b, row| {
            b.iter(|| {
                compute_top_logprobs_into(Logits::F32(black_box(row)), TokenId(3), 20, &mut out)
                    .unwrap()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
