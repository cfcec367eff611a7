//! Sorting-free sampling against the sort-based chain: vocabulary {32k, 64k, 152k, 262k} ×
//! batch {1, 4, 8} × config {top-k 40, top-p 0.9, min-p 0.05, top-k 40 + top-p 0.9}, each as
//! `sort` (the seed-000 chain) and `rejection` (dual-pivot rejection, seed 002); and the top-k
//! candidate path (seed 003) for top-k 32 (alone and with top-p 0.9) against the two full
//! paths.
//!
//! One iteration samples every row of the batch once (one `SamplerScratch` and one `Pcg32` per
//! row, as one per request). Logits are those of `benches/sampler.rs` (Gaussian body, σ = 2.5,
//! eight strong tokens), a different row per batch slot, temperature 0.8. Results are recorded
//! in `docs/benchmark_results/rejection-sampling-*.md` (`scripts/rejection_table.py` turns the
//! criterion output into the table).

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use grammask::sampler::{
    sample_token, FilterAlgorithm, Logits, Pcg32, PenaltyConfig, SamplerConfig, SamplerScratch,
};

const VOCABS: [usize; 4] = [32_000, 64_000, 152_064, 262_144];
const BATCHES: [usize; 3] = [1, 4, 8];

/// Gaussian logits (σ = 2.5) with a handful of strong tokens, like a real LM head.
fn logits(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = Pcg32::new(n as u64 ^ (seed << 40));
    let mut v: Vec<f32> = (0..n)
        .map(|_| {
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

/// The algorithms a configuration is measured with, by name.
type Algorithms = &'static [(&'static str, FilterAlgorithm)];

fn bench(c: &mut Criterion) {
    let t = SamplerConfig::default().with_temperature(0.8).with_seed(1);
    let matrix: [(&str, SamplerConfig, Algorithms); 6] = {
        const BASE: Algorithms =
            &[("sort", FilterAlgorithm::Sort), ("rejection", FilterAlgorithm::Rejection)];
        const CANDS: Algorithms = &[
            ("sort", FilterAlgorithm::Sort),
            ("rejection", FilterAlgorithm::Rejection),
            ("candidates", FilterAlgorithm::Candidates),
        ];
        [
            ("top_k_40", t.clone().with_top_k(40), BASE),
            ("top_p_0.9", t.clone().with_top_p(0.9), BASE),
            ("min_p_0.05", t.clone().with_min_p(0.05), BASE),
            ("top_k40_top_p0.9", t.clone().with_top_k(40).with_top_p(0.9), BASE),
            ("top_k_32", t.clone().with_top_k(32), CANDS),
            ("top_k32_top_p0.9", t.clone().with_top_k(32).with_top_p(0.9), CANDS),
        ]
    };
    let pen = PenaltyConfig::default();
    let mut g = c.benchmark_group("rejection");
    for &n in &VOCABS {
        let rows: Vec<Vec<f32>> = (0..8).map(|r| logits(n, r)).collect();
        for &b in &BATCHES {
            for (name, cfg, algorithms) in &matrix {
                for &(alg, a) in algorithms.iter() {
                    let cfg = cfg.clone().with_filter_algorithm(a);
                    let mut scratch: Vec<SamplerScratch> =
                        (0..b).map(|_| SamplerScratch::with_capacity(n)).collect();
                    let mut rngs: Vec<Pcg32> = (0..b).map(|r| Pcg32::new(r as u64)).collect();
                    let id = BenchmarkId::new(format!("{name}.{alg}.b{b}"), n);
                    g.bench_function(id, |bch| {
                        bch.iter(|| {
                            for r in 0..b {
                                black_box(
                                    sample_token(
                                        &cfg,
                                        &pen,
                                        Logits::F32(black_box(&rows[r])),
                                        None,
                                        &[],
                                        &mut rngs[r],
                                        &mut scratch[r],
                                    )
                                    .unwrap(),
                                );
                            }
                        })
                    });
                }
            }
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
