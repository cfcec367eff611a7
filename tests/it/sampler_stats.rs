//! Statistical tests: the empirical distribution of 10⁶ draws of the full sampler matches
//! `sampling_distribution` (Pearson χ², fixed seed), for temperature-only, top-p, top-k, min-p
//! and combined configurations, plus the speculative acceptance rule (Leviathan et al. 2023
//! §2.3), whose output must be distributed as the target.
//!
//! Vocabularies are small (48 tokens) so a million draws take about a second in release.
//! The critical value is deliberately conservative: `df + 6·√(2·df)` (a tail probability far
//! below 10⁻⁶), and the seed is fixed, so the tests are deterministic.

use grammask::sampler::{
    sample_token, sampling_distribution, speculative_accept, Logits, Pcg32, PenaltyConfig,
    SamplerConfig, SamplerScratch,
};
use grammask::{TokenId, TokenMask};

const VOCAB: usize = 48;
/// 10⁶ draws in release (the suite's setting); a debug `cargo test` uses 10⁵ so that an
/// unoptimised run stays quick — the statistic is scaled to the count either way.
const DRAWS: usize = if cfg!(debug_assertions) { 100_000 } else { 1_000_000 };

/// Deterministic test logits (a spread of magnitudes, a few exact ties).
fn logits() -> Vec<f32> {
    let mut rng = Pcg32::new(2024);
    (0..VOCAB).map(|i| if i % 11 == 3 { 1.0 } else { rng.next_f32() * 6.0 - 3.0 }).collect()
}

/// Pearson χ² of `counts` against `probs`; bins with zero probability must stay empty.
fn chi_square(counts: &[u64], probs: &[f32], draws: usize) -> (f64, usize) {
    let mut chi = 0.0;
    let mut bins = 0;
    for (&c, &p) in counts.iter().zip(probs) {
        if p == 0.0 {
            assert_eq!(c, 0, "a zero-probability token was drawn");
            continue;
        }
        let e = f64::from(p) * draws as f64;
        chi += (c as f64 - e).powi(2) / e;
        bins += 1;
    }
    (chi, bins.max(2) - 1)
}

fn critical(df: usize) -> f64 {
    df as f64 + 6.0 * (2.0 * df as f64).sqrt()
}

fn check(cfg: SamplerConfig, pen: PenaltyConfig, mask: Option<&TokenMask>) {
    let logits = logits();
    let recent = [TokenId(5), TokenId(7), TokenId(5)];
    let mut scratch = SamplerScratch::new();
    let probs =
        sampling_distribution(&cfg, &pen, Logits::F32(&logits), mask, &recent, &mut scratch)
            .unwrap()
            .to_vec();
    let mut rng = Pcg32::new(cfg.seed_or_default());
    let mut counts = vec![0u64; VOCAB];
    for _ in 0..DRAWS {
        let t =
            sample_token(&cfg, &pen, Logits::F32(&logits), mask, &recent, &mut rng, &mut scratch)
                .unwrap();
        counts[t.index()] += 1;
    }
    let (chi, df) = chi_square(&counts, &probs, DRAWS);
    assert!(chi < critical(df), "{cfg:?}: χ² = {chi:.1} with {df} degrees of freedom");
}

#[test]
fn chi_square_temperature_only() {
    check(
        SamplerConfig::default().with_temperature(0.7).with_seed(1),
        PenaltyConfig::default(),
        None,
    );
}

#[test]
fn chi_square_top_p() {
    check(
        SamplerConfig::default().with_temperature(1.0).with_top_p(0.8).with_seed(2),
        PenaltyConfig::default(),
        None,
    );
}

#[test]
fn chi_square_top_k() {
    check(
        SamplerConfig::default().with_temperature(1.3).with_top_k(10).with_seed(3),
        PenaltyConfig::default(),
        None,
    );
}

#[test]
fn chi_square_min_p() {
    check(
        SamplerConfig::default().with_temperature(1.0).with_min_p(0.1).with_seed(4),
        PenaltyConfig::default(),
        None,
    );
}

#[test]
fn chi_square_combined_with_mask_and_penalties() {
    let mut mask = TokenMask::full(VOCAB);
    for t in (0..VOCAB).step_by(5) {
        mask.remove(TokenId::from_index(t));
    }
    let pen = PenaltyConfig::default()
        .with_repetition_penalty(1.2)
        .with_presence_penalty(0.3)
        .with_frequency_penalty(0.1)
        .with_bias(TokenId(9), 1.5);
    check(
        SamplerConfig::default()
            .with_temperature(0.9)
            .with_top_p(0.95)
            .with_min_p(0.02)
            .with_top_k(20)
            .with_seed(5),
        pen,
        Some(&mask),
    );
}

/// Draft from q, verify against p: the emitted tokens must follow p.
#[test]
fn chi_square_speculative_acceptance_follows_target() {
    const N: usize = 16;
    const TRIALS: usize = if cfg!(debug_assertions) { 50_000 } else { 400_000 };
    let mut rng = Pcg32::new(99);
    let mut make = |skew: f32| {
        let mut v: Vec<f32> =
            (0..N).map(|i| (rng.next_f32() + 0.05) * (1.0 + skew * i as f32)).collect();
        let s: f32 = v.iter().sum();
        v.iter_mut().for_each(|x| *x /= s);
        v
    };
    let mut p = make(0.0);
    p[3] = 0.0; // the target forbids a token the draft likes
    let s: f32 = p.iter().sum();
    p.iter_mut().for_each(|x| *x /= s);
    let q = make(0.5);
    let mut rng = Pcg32::new(7);
    let mut residual = Vec::new();
    let mut counts = vec![0u64; N];
    let mut accepted = 0;
    for _ in 0..TRIALS {
        let x = grammask::sampler::draw_index(&q, rng.next_f32()).unwrap();
        let v =
            speculative_accept(&p, &q, TokenId::from_index(x), &mut rng, &mut residual).unwrap();
        accepted += usize::from(v.is_accepted());
        counts[v.token().index()] += 1;
    }
    let (chi, df) = chi_square(&counts, &p, TRIALS);
    assert!(chi < critical(df), "χ² = {chi:.1} with {df} degrees of freedom");
    // Expected acceptance rate is Σ min(p, q) (Leviathan et al. 2023, §3.1).
    let alpha: f32 = p.iter().zip(&q).map(|(a, b)| a.min(*b)).sum();
    let rate = accepted as f32 / TRIALS as f32;
    assert!((rate - alpha).abs() < 0.01, "acceptance {rate} vs α {alpha}");
}
