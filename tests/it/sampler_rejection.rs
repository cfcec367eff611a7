//! Regression guard of the sorting-free rejection sampler (`sampler::rejection`, seed 002)
//! against the sort-based chain it replaces:
//!
//! * support equality on random rows with many ties (top-k set by id at ties, top-p minimal
//!   tie-closed prefix, min-p threshold set, and their combinations), with the sort-based
//!   filters as the oracle;
//! * Pearson χ² with 10⁶ draws per case (release) against the renormalised truncated
//!   distribution, with masked (`-inf`) tokens present and never drawn;
//! * the round cap: an adversarial near-uniform 152k row, the fallback counter and valid
//!   samples after a fallback; subnormal-scale rows; determinism; greedy and temperature-only
//!   steps identical whatever the algorithm; the kill switch as a config field (the library
//!   ignores the old `GRAMMASK_SAMPLING_REJECTION` variable).

use grammask::sampler::{
    min_p_in_place, rejection_sample, sample_token, sampling_distribution, softmax_in_place,
    top_k_in_place, top_p_in_place, FilterAlgorithm, Logits, Pcg32, PenaltyConfig,
    RejectionScratch, Sampler, SamplerConfig, SamplerScratch, SamplingPath,
};
use grammask::{TokenId, TokenMask};

const RELEASE: bool = !cfg!(debug_assertions);
/// 10⁶ draws per χ² case in release (the suite's setting), 10⁵ in an unoptimised build.
const DRAWS: usize = if RELEASE { 1_000_000 } else { 100_000 };

fn base() -> SamplerConfig {
    SamplerConfig::default().with_temperature(1.0)
}

/// The sort-based chain's truncated (unnormalised) row: the oracle.
fn oracle(probs: &[f32], cfg: &SamplerConfig) -> Vec<f32> {
    let mut q = probs.to_vec();
    let mut keys = Vec::new();
    top_p_in_place(&mut q, cfg.top_p, &mut keys);
    min_p_in_place(&mut q, cfg.min_p);
    top_k_in_place(&mut q, cfg.top_k, &mut keys);
    q
}

/// A random probability row from logits on a coarse grid (many ties), some entries masked.
fn random_row(rng: &mut Pcg32, n: usize) -> Vec<f32> {
    let mut x: Vec<f32> = (0..n)
        .map(|_| {
            if rng.next_u32().is_multiple_of(7) {
                f32::NEG_INFINITY
            } else {
                (rng.next_u32() % 9) as f32 * 0.5 - 2.0
            }
        })
        .collect();
    x[rng.next_u32() as usize % n] = 1.0; // at least one finite entry
    softmax_in_place(&mut x, 1.0).unwrap();
    x
}

/// Draw until every oracle token is seen with overwhelming probability; every draw must lie in
/// the oracle support and every support token must appear.
fn assert_support(probs: &[f32], cfg: &SamplerConfig, seed: u64) {
    let want = oracle(probs, cfg);
    let mass: f64 = want.iter().map(|&p| f64::from(p)).sum();
    let min_q = want.iter().filter(|&&p| p > 0.0).map(|&p| f64::from(p) / mass).fold(1.0, f64::min);
    // P(a support token is never drawn) ≤ e^-25 per token.
    let draws = (25.0 / min_q).ceil() as usize;
    let mut rng = Pcg32::new(seed);
    let mut scratch = RejectionScratch::new();
    let mut seen = vec![false; probs.len()];
    for _ in 0..draws {
        let t = rejection_sample(probs, cfg, &mut rng, &mut scratch).unwrap();
        assert!(want[t] > 0.0, "{cfg:?}: drew {t} outside the support of {probs:?}");
        seen[t] = true;
    }
    for (i, &p) in want.iter().enumerate() {
        assert_eq!(seen[i], p > 0.0, "{cfg:?}: support token {i} never drawn from {probs:?}");
    }
}

#[test]
fn support_equals_sort_based_filters_on_tied_rows() {
    let cases = if RELEASE { 400 } else { 40 };
    let mut rng = Pcg32::new(11);
    let mut checked = 0;
    for case in 0..cases {
        let n = 2 + rng.next_u32() as usize % 40;
        let probs = random_row(&mut rng, n);
        let k = 1 + rng.next_u32() as usize % 12;
        let p = 0.05 + 0.9 * rng.next_f32();
        let m = 0.3 * rng.next_f32();
        let cfg = match case % 5 {
            0 => base().with_top_k(k),
            1 => base().with_top_p(p),
            2 => base().with_min_p(m),
            3 => base().with_top_k(k).with_top_p(p),
            _ => base().with_top_k(k).with_top_p(p).with_min_p(m),
        };
        // Exact top-p sums: no row is too close to call any more (issue 22).
        assert_support(&probs, &cfg, case);
        checked += 1;
    }
    assert_eq!(checked, cases);
}

#[test]
fn top_k_ties_at_the_cut_keep_the_lowest_ids() {
    // Six tokens tied at the cut, top-k 4 with two above it: ids 1 and 3 (the two lowest tied
    // ids) survive with the two larger tokens.
    let probs = [0.05f32, 0.1, 0.3, 0.1, 0.1, 0.2, 0.1, 0.1, 0.1, 0.0];
    let cfg = base().with_top_k(4);
    assert_eq!(oracle(&probs, &cfg).iter().filter(|&&p| p > 0.0).count(), 4);
    assert_support(&probs, &cfg, 3);
    // All tied (a uniform row): the k lowest ids.
    assert_support(&[0.25; 8], &base().with_top_k(3), 4);
    // Top-p keeps the whole tied group at its cut, with or without top-k.
    assert_support(&[0.3, 0.2, 0.2, 0.2, 0.1], &base().with_top_p(0.4), 5);
    assert_support(&[0.3, 0.2, 0.2, 0.2, 0.1], &base().with_top_p(0.4).with_top_k(2), 6);
    // Min-p keeps `p == max × min_p`.
    assert_support(&[0.5, 0.25, 0.125, 0.125], &base().with_min_p(0.5), 7);
}

#[test]
fn subnormal_scale_rows_keep_exact_supports() {
    // Unnormalised rows whose every entry is subnormal (or just above the smallest normal):
    // the pivots and masses must neither flush to zero nor reorder.
    let tiny = f32::from_bits(1); // 1.4e-45
    let rows: [Vec<f32>; 3] = [
        (0..12).map(|i| tiny * (1 + i % 5) as f32).collect(),
        (0..20).map(|i| f32::MIN_POSITIVE * 0.5 + tiny * (i % 7) as f32).collect(),
        vec![tiny, tiny * 2.0, tiny * 2.0, tiny * 3.0, 0.0, tiny * 8.0],
    ];
    for (r, row) in rows.iter().enumerate() {
        for (c, cfg) in [
            base().with_top_k(3),
            base().with_top_p(0.5),
            base().with_min_p(0.5),
            base().with_top_k(4).with_top_p(0.7).with_min_p(0.2),
        ]
        .iter()
        .enumerate()
        {
            assert_support(row, cfg, (r * 10 + c) as u64);
        }
    }
}

/// Deterministic test logits over a small vocabulary (a spread of magnitudes, exact ties).
fn chi_logits(vocab: usize) -> Vec<f32> {
    let mut rng = Pcg32::new(2024);
    (0..vocab).map(|i| if i % 11 == 3 { 1.0 } else { rng.next_f32() * 6.0 - 3.0 }).collect()
}

fn chi_square(counts: &[u64], probs: &[f32], draws: usize) -> (f64, usize) {
    let mut chi = 0.0;
    let mut bins = 0;
    for (i, (&c, &p)) in counts.iter().zip(probs).enumerate() {
        if p == 0.0 {
            assert_eq!(c, 0, "token {i} has zero probability but was drawn");
            continue;
        }
        let e = f64::from(p) * draws as f64;
        chi += (c as f64 - e).powi(2) / e;
        bins += 1;
    }
    (chi, bins.max(2) - 1)
}

/// Draw `DRAWS` tokens with the given algorithm and test them against the sort-based
/// truncated distribution; every fifth token is masked.
fn chi_case(cfg: SamplerConfig) {
    const VOCAB: usize = 48;
    let logits = chi_logits(VOCAB);
    let mut mask = TokenMask::full(VOCAB);
    for t in (0..VOCAB).step_by(5) {
        mask.remove(TokenId::from_index(t));
    }
    let pen = PenaltyConfig::default();
    let mut scratch = SamplerScratch::new();
    let want =
        sampling_distribution(&cfg, &pen, Logits::F32(&logits), Some(&mask), &[], &mut scratch)
            .unwrap()
            .to_vec();
    let mut rng = Pcg32::new(cfg.seed_or_default());
    let mut counts = vec![0u64; VOCAB];
    for _ in 0..DRAWS {
        let t = sample_token(
            &cfg,
            &pen,
            Logits::F32(&logits),
            Some(&mask),
            &[],
            &mut rng,
            &mut scratch,
        )
        .unwrap();
        counts[t.index()] += 1;
    }
    let (chi, df) = chi_square(&counts, &want, DRAWS);
    let critical = df as f64 + 6.0 * (2.0 * df as f64).sqrt();
    assert!(chi < critical, "{cfg:?}: χ² = {chi:.1} with {df} degrees of freedom");
    let stats = scratch.rejection_stats();
    assert_eq!(stats.rows, DRAWS as u64, "every draw went through rejection");
    assert_eq!(stats.fallbacks, 0);
}

fn rejection_cfg(seed: u64) -> SamplerConfig {
    base().with_temperature(0.9).with_seed(seed).with_filter_algorithm(FilterAlgorithm::Rejection)
}

#[test]
fn chi_square_top_k() {
    chi_case(rejection_cfg(1).with_top_k(10));
}

#[test]
fn chi_square_top_p() {
    chi_case(rejection_cfg(2).with_top_p(0.8));
}

#[test]
fn chi_square_min_p() {
    chi_case(rejection_cfg(3).with_min_p(0.1));
}

#[test]
fn chi_square_top_k_top_p() {
    chi_case(rejection_cfg(4).with_top_k(12).with_top_p(0.9));
}

#[test]
fn chi_square_all_three() {
    chi_case(rejection_cfg(5).with_top_k(20).with_top_p(0.95).with_min_p(0.02));
}

/// A near-uniform row over 152k tokens: values `1 + i·2⁻²³`-spaced noise, so the top-k cut sits
/// among ~152k nearly equal values.
fn near_uniform(n: usize) -> Vec<f32> {
    let mut rng = Pcg32::new(77);
    let mut x: Vec<f32> = (0..n).map(|_| 1.0 + (rng.next_u32() % 4096) as f32 * 1e-7).collect();
    let s: f32 = x.iter().sum();
    x.iter_mut().for_each(|v| *v /= s);
    x
}

#[test]
fn near_uniform_152k_exercises_the_cap_and_counts_fallbacks() {
    const N: usize = 152_064;
    let rows = if RELEASE { 24 } else { 3 };
    let probs = near_uniform(N);
    for cfg in
        [base().with_top_k(40), base().with_top_p(0.001), base().with_top_k(40).with_top_p(0.5)]
    {
        let want = oracle(&probs, &cfg);
        // Default cap: valid samples; the counters tell how hard the row was.
        let mut rng = Pcg32::new(9);
        let mut scratch = RejectionScratch::new();
        for _ in 0..rows {
            let t = rejection_sample(&probs, &cfg, &mut rng, &mut scratch).unwrap();
            assert!(want[t] > 0.0, "{cfg:?}: token {t} outside the support");
        }
        let s = scratch.stats();
        eprintln!("near-uniform {N}, {cfg:?}: {s:?}");
        assert_eq!(s.rows, rows as u64);
        assert!(s.rounds >= s.rows && s.rounds <= s.rows * 32, "{s:?}");
        // A tight cap forces the sort-based fallback: counted, and the sample is still valid.
        let mut tight = RejectionScratch::new().with_max_rounds(2);
        let mut fell_back = 0;
        for _ in 0..rows {
            let before = tight.stats().fallbacks;
            let t = rejection_sample(&probs, &cfg, &mut rng, &mut tight).unwrap();
            assert!(want[t] > 0.0, "{cfg:?}: fallback token {t} outside the support");
            fell_back += tight.stats().fallbacks - before;
        }
        assert!(fell_back > 0, "{cfg:?}: the near-uniform row never hit a 2-round cap");
        assert_eq!(tight.stats().fallbacks, fell_back);
        assert!(tight.stats().rounds <= 2 * rows as u64);
    }
}

#[test]
fn same_seed_same_stream() {
    let logits = chi_logits(3000);
    let cfg = rejection_cfg(8).with_top_k(50).with_top_p(0.9);
    let run = || {
        let mut s = Sampler::new(cfg.clone(), PenaltyConfig::default()).unwrap();
        (0..200).map(|_| s.sample(Logits::F32(&logits), None, &[]).unwrap()).collect::<Vec<_>>()
    };
    assert_eq!(run(), run());
}

/// Greedy and temperature-only steps must not depend on the filter algorithm: the same stream
/// of tokens, step for step, with masks and penalties.
#[test]
fn greedy_and_temperature_only_are_unchanged() {
    const VOCAB: usize = 5000;
    let logits = chi_logits(VOCAB);
    let mut mask = TokenMask::full(VOCAB);
    for t in (0..VOCAB).step_by(3) {
        mask.remove(TokenId::from_index(t));
    }
    let pen = PenaltyConfig::default().with_repetition_penalty(1.2).with_bias(TokenId(4), 2.0);
    let recent = [TokenId(1), TokenId(4), TokenId(7)];
    let algorithms = [
        FilterAlgorithm::Auto,
        FilterAlgorithm::Rejection,
        FilterAlgorithm::Candidates,
        FilterAlgorithm::Sort,
    ];
    for t in [0.0, 0.7, 1.3] {
        // top_p = 1 and top_k >= vocab are no-op filters: still the temperature-only path.
        for cfg in [base(), base().with_top_p(1.0).with_top_k(VOCAB)] {
            let streams: Vec<Vec<TokenId>> = algorithms
                .iter()
                .map(|&a| {
                    let c = cfg.clone().with_temperature(t).with_seed(3).with_filter_algorithm(a);
                    let mut s = Sampler::new(c, pen.clone()).unwrap();
                    (0..300)
                        .map(|_| s.sample(Logits::F32(&logits), Some(&mask), &recent).unwrap())
                        .collect()
                })
                .collect();
            for s in &streams[..3] {
                assert_eq!(s, &streams[3], "T = {t}");
            }
        }
    }
}

#[test]
fn sampler_exposes_the_counters() {
    let logits = chi_logits(4000);
    let cfg = rejection_cfg(1).with_top_p(0.7);
    let mut s = Sampler::new(cfg, PenaltyConfig::default()).unwrap();
    for _ in 0..10 {
        s.sample(Logits::F32(&logits), None, &[]).unwrap();
    }
    let st = s.rejection_stats();
    assert_eq!(st.rows, 10);
    assert!(st.rounds >= 10);
    assert_eq!(st.candidate_rows, 0);
}

/// The library reads no environment variable: the old kill switch
/// `GRAMMASK_SAMPLING_REJECTION=0` is set in a child process running [`env_is_ignored_child`],
/// which checks that the default config still takes the sorting-free paths. The kill switch is
/// now the config field (`FilterAlgorithm::Sort`), which the CLI maps the variable onto.
#[test]
fn the_library_ignores_the_old_environment_switch() {
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args([
            "--exact",
            "sampler_rejection::env_is_ignored_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("GRAMMASK_SAMPLING_REJECTION", "0")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "child failed:\n{text}");
    assert!(text.contains("environment ignored"), "child did not run:\n{text}");
}

#[test]
fn env_is_ignored_child() {
    if std::env::var_os("GRAMMASK_SAMPLING_REJECTION").is_none_or(|v| v != "0") {
        return; // Only meaningful in the child process.
    }
    let logits = chi_logits(3000);
    let cfg = base().with_temperature(0.8).with_seed(12).with_top_k(20).with_top_p(0.9);
    assert_eq!(cfg.effective_filter_algorithm(), FilterAlgorithm::Candidates);
    let mut s = Sampler::new(cfg, PenaltyConfig::default()).unwrap();
    for _ in 0..20 {
        assert_eq!(
            s.sample_draw(Logits::F32(&logits), None, &[]).unwrap().path,
            SamplingPath::Candidates
        );
    }
    assert_eq!(s.rejection_stats().candidate_rows, 20);
    println!("environment ignored");
}

/// The kill switch as a config field: `FilterAlgorithm::Sort` never touches the sorting-free
/// paths, whatever the filters.
#[test]
fn sort_config_is_the_kill_switch() {
    let logits = chi_logits(3000);
    let base = base().with_temperature(0.8).with_seed(12).with_top_k(20).with_top_p(0.9);
    let cfg = base.with_filter_algorithm(FilterAlgorithm::Sort);
    assert_eq!(cfg.effective_filter_algorithm(), FilterAlgorithm::Sort);
    let mut s = Sampler::new(cfg, PenaltyConfig::default()).unwrap();
    for _ in 0..50 {
        assert_eq!(
            s.sample_draw(Logits::F32(&logits), None, &[]).unwrap().path,
            SamplingPath::Sort
        );
    }
    assert_eq!(s.rejection_stats().rows + s.rejection_stats().candidate_rows, 0);
}

/// The row that used to split the paths (issue 22): 65,536 tokens of 2⁻²⁶ under one token of
/// 0.5. Summed in `f32` from the top, each 2⁻²⁶ is below half an ulp of 0.5 and vanished, so the
/// old sort-based top-p 0.999 kept only the big token while the rejection path kept the group.
/// With exact sums (`sampler::mass`) both keep it: the mass above the small group, 0.5, is below
/// 0.999 × 0.500977.
#[test]
fn top_p_rounding_no_longer_splits_the_paths() {
    let t = 2f32.powi(-26);
    let mut row = vec![t; 1 << 16];
    row.insert(0, 0.5);
    let cfg = base().with_top_p(0.999);
    let sort_support = oracle(&row, &cfg).iter().filter(|&&p| p > 0.0).count();
    assert_eq!(sort_support, row.len(), "the exact sums keep the small group");
    let mut rng = Pcg32::new(1);
    let mut scratch = RejectionScratch::new();
    let draws = if RELEASE { 8000 } else { 2000 };
    let small = (0..draws)
        .filter(|_| rejection_sample(&row, &cfg, &mut rng, &mut scratch).unwrap() != 0)
        .count();
    // Expected draws × 2⁻¹⁰ / 0.500977 ≈ draws / 513.
    assert!(small > 0 && small < draws / 100, "{small} of {draws} draws from the small group");
}
