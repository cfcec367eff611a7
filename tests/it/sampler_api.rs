//! The sampler's contract, case by case: typed errors for bad input, greedy determinism and
//! tie rules, seeding, bf16 input, logprobs, penalties on the greedy path, and the speculative
//! helper at temperature 0.

use grammask::sampler::{
    apply_mask_argmax, argmax, argmax_with_penalties, compute_top_logprobs, f32_to_bf16,
    sample_token, sampling_distribution, Logits, Pcg32, PenaltyConfig, SampleError,
    SampleErrorKind, Sampler, SamplerConfig, SamplerScratch, Verdict, DEFAULT_SEED,
};
use grammask::{TokenId, TokenMask};

fn err(r: Result<TokenId, SampleError>) -> SampleError {
    r.expect_err("expected an error")
}

fn sample(
    cfg: &SamplerConfig,
    logits: &[f32],
    mask: Option<&TokenMask>,
) -> Result<TokenId, SampleError> {
    let mut rng = Pcg32::new(cfg.seed_or_default());
    let mut scratch = SamplerScratch::new();
    sample_token(
        cfg,
        &PenaltyConfig::default(),
        Logits::F32(logits),
        mask,
        &[],
        &mut rng,
        &mut scratch,
    )
}

#[test]
fn error_nan_logit_names_the_token() {
    let e = err(argmax(Logits::F32(&[0.0, f32::NAN, 1.0])));
    assert_eq!(e.kind(), &SampleErrorKind::NanLogit { token: TokenId(1) });
    assert!(e.to_string().contains("token 1"), "{e}");
    let hot = SamplerConfig::default().with_temperature(1.0);
    assert!(matches!(
        err(sample(&hot, &[0.0, 0.0, f32::NAN], None)).kind(),
        SampleErrorKind::NanLogit { .. }
    ));
}

#[test]
fn error_all_forbidden() {
    let mask = TokenMask::new(4);
    let logits = [1.0; 4];
    assert_eq!(
        err(apply_mask_argmax(Logits::F32(&logits), &mask)).kind(),
        &SampleErrorKind::AllForbidden
    );
    let hot = SamplerConfig::default().with_temperature(1.0);
    assert_eq!(err(sample(&hot, &logits, Some(&mask))).kind(), &SampleErrorKind::AllForbidden);
    // Every allowed logit -inf is the same situation.
    let mut one = TokenMask::new(4);
    one.insert(TokenId(2));
    let ninf = [0.0, 0.0, f32::NEG_INFINITY, 0.0];
    assert_eq!(err(sample(&hot, &ninf, Some(&one))).kind(), &SampleErrorKind::AllForbidden);
}

#[test]
fn error_mask_length_mismatch() {
    let mask = TokenMask::full(5);
    let e = err(apply_mask_argmax(Logits::F32(&[0.0; 4]), &mask));
    assert_eq!(e.kind(), &SampleErrorKind::LengthMismatch { mask: 5, logits: 4 });
    assert!(e.to_string().contains('5') && e.to_string().contains('4'));
    let hot = SamplerConfig::default().with_temperature(1.0);
    assert!(matches!(
        err(sample(&hot, &[0.0; 4], Some(&mask))).kind(),
        SampleErrorKind::LengthMismatch { .. }
    ));
}

#[test]
fn error_bad_config_values() {
    let base = SamplerConfig::default().with_temperature(1.0);
    let cases = [
        (base.clone().with_temperature(-0.5), "-0.5"),
        (base.clone().with_temperature(f32::NAN), "NaN"),
        (base.clone().with_top_p(0.0), "top_p"),
        (base.clone().with_top_p(1.5), "1.5"),
        (base.clone().with_min_p(-0.1), "-0.1"),
        (base.clone().with_min_p(1.1), "1.1"),
        (base.clone().with_top_logprobs(21), "21"),
    ];
    for (cfg, needle) in cases {
        let e = cfg.validate().expect_err("invalid config");
        assert!(e.to_string().contains(needle), "{e} should mention {needle}");
        assert!(Sampler::new(cfg.clone(), PenaltyConfig::default()).is_err());
        assert!(sample(&cfg, &[0.0, 1.0], None).is_err());
    }
    assert_eq!(
        base.clone().with_temperature(-1.0).validate().unwrap_err().kind(),
        &SampleErrorKind::Temperature(-1.0)
    );
    assert_eq!(
        base.clone().with_top_p(2.0).validate().unwrap_err().kind(),
        &SampleErrorKind::TopP(2.0)
    );
    assert_eq!(
        base.clone().with_min_p(2.0).validate().unwrap_err().kind(),
        &SampleErrorKind::MinP(2.0)
    );
    assert_eq!(
        base.clone().with_top_logprobs(21).validate().unwrap_err().kind(),
        &SampleErrorKind::TopLogprobsK(21)
    );
    assert!(base.clone().with_top_p(1.0).with_min_p(1.0).with_top_logprobs(20).validate().is_ok());
    let e = compute_top_logprobs(Logits::F32(&[0.0]), TokenId(0), 21).unwrap_err();
    assert_eq!(e.kind(), &SampleErrorKind::TopLogprobsK(21));
    let bad_pen = PenaltyConfig::default().with_repetition_penalty(0.0);
    assert!(bad_pen.validate().unwrap_err().to_string().contains("repetition_penalty"));
}

#[test]
fn defaults_are_identity() {
    let cfg = SamplerConfig::default();
    assert!(!cfg.sampling_active());
    assert_eq!(cfg.seed_or_default(), 0xA7A7);
    assert_eq!(DEFAULT_SEED, 0xA7A7);
    assert!(!PenaltyConfig::default().penalties_active());
    assert!(PenaltyConfig::default().with_presence_penalty(0.1).penalties_active());
}

#[test]
fn greedy_ties_go_to_lowest_id_and_are_stable() {
    let logits = [1.0, 5.0, 2.0, 5.0, 5.0];
    for _ in 0..3 {
        assert_eq!(argmax(Logits::F32(&logits)).unwrap(), TokenId(1));
        assert_eq!(sample(&SamplerConfig::default(), &logits, None).unwrap(), TokenId(1));
    }
    let mut mask = TokenMask::full(5);
    mask.remove(TokenId(1));
    assert_eq!(apply_mask_argmax(Logits::F32(&logits), &mask).unwrap(), TokenId(3));
    // A NaN under a forbidden token is never read.
    let with_nan = [f32::NAN, 5.0, 2.0, 5.0, 5.0];
    let mut m0 = TokenMask::full(5);
    m0.remove(TokenId(0));
    assert_eq!(apply_mask_argmax(Logits::F32(&with_nan), &m0).unwrap(), TokenId(1));
}

#[test]
fn masked_argmax_equals_argmax_of_biased_logits() {
    let mut rng = Pcg32::new(11);
    for round in 0..50 {
        let n = 1 + (rng.next_u32() % 300) as usize;
        let logits: Vec<f32> = (0..n).map(|_| (rng.next_u32() % 16) as f32).collect();
        let mut mask = TokenMask::new(n);
        for i in 0..n {
            if !rng.next_u32().is_multiple_of(3) {
                mask.insert(TokenId::from_index(i));
            }
        }
        if mask.is_none_allowed() {
            mask.insert(TokenId(0));
        }
        let mut biased = mask.to_bias();
        biased.iter_mut().zip(&logits).for_each(|(b, l)| *b += l);
        assert_eq!(
            apply_mask_argmax(Logits::F32(&logits), &mask).unwrap(),
            argmax(Logits::F32(&biased)).unwrap(),
            "round {round}"
        );
    }
}

#[test]
fn greedy_with_penalties() {
    let logits = [3.0, 2.9, 0.0];
    let mut scratch = SamplerScratch::new();
    let pen = PenaltyConfig::default().with_repetition_penalty(1.5);
    let t = argmax_with_penalties(Logits::F32(&logits), &pen, &[TokenId(0)], None, &mut scratch)
        .unwrap();
    assert_eq!(t, TokenId(1));
    let ban = PenaltyConfig::default()
        .with_bias(TokenId(0), f32::NEG_INFINITY)
        .with_bias(TokenId(1), -10.0);
    assert_eq!(
        argmax_with_penalties(Logits::F32(&logits), &ban, &[], None, &mut scratch).unwrap(),
        TokenId(2)
    );
    // The caller's logits are not modified.
    assert_eq!(logits, [3.0, 2.9, 0.0]);
}

#[test]
fn same_seed_same_stream() {
    let logits: Vec<f32> = (0..64).map(|i| (i as f32 * 0.37).sin() * 3.0).collect();
    let run = |seed: Option<u64>| {
        let mut cfg = SamplerConfig::default().with_temperature(1.0).with_top_p(0.95);
        cfg.seed = seed;
        let mut s = Sampler::new(cfg, PenaltyConfig::default()).unwrap();
        let mut out = Vec::new();
        for _ in 0..200 {
            let t = s.sample(Logits::F32(&logits), None, &out).unwrap();
            out.push(t);
        }
        out
    };
    assert_eq!(run(Some(3)), run(Some(3)));
    assert_ne!(run(Some(3)), run(Some(4)));
    assert_eq!(run(None), run(Some(0xA7A7)), "absent seed is 0xA7A7");
}

#[test]
fn bf16_logits_behave_like_their_f32_values() {
    let f: Vec<f32> = (0..100).map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0).collect();
    let b: Vec<u16> = f.iter().map(|&x| f32_to_bf16(x)).collect();
    let widened: Vec<f32> = b.iter().map(|&x| grammask::sampler::bf16_to_f32(x)).collect();
    assert_eq!(argmax(Logits::Bf16(&b)).unwrap(), argmax(Logits::F32(&widened)).unwrap());
    let cfg = SamplerConfig::default().with_temperature(0.8).with_top_k(10).with_seed(9);
    let mut s1 = SamplerScratch::new();
    let mut s2 = SamplerScratch::new();
    let pen = PenaltyConfig::default();
    let d1 = sampling_distribution(&cfg, &pen, Logits::Bf16(&b), None, &[], &mut s1).unwrap();
    let d2 = sampling_distribution(&cfg, &pen, Logits::F32(&widened), None, &[], &mut s2).unwrap();
    assert_eq!(d1, d2);
    let lb = compute_top_logprobs(Logits::Bf16(&b), TokenId(3), 5).unwrap();
    let lf = compute_top_logprobs(Logits::F32(&widened), TokenId(3), 5).unwrap();
    assert_eq!(lb, lf);
}

#[test]
fn logprobs_of_raw_logits() {
    assert_eq!(compute_top_logprobs(Logits::F32(&[1.0, 2.0]), TokenId(0), 0).unwrap(), None);
    let logits = [0.0, 2.0, 2.0, -1.0, f32::NEG_INFINITY];
    let lp = compute_top_logprobs(Logits::F32(&logits), TokenId(4), 3).unwrap().unwrap();
    assert_eq!(lp.token, TokenId(4));
    assert_eq!(lp.logprob, f32::NEG_INFINITY);
    let ids: Vec<u32> = lp.top.iter().map(|e| e.0 .0).collect();
    assert_eq!(ids, vec![1, 2, 0], "descending, ties by lower id");
    let lse = (1.0f64 + 2.0 * 2f64.exp() + (-1f64).exp()).ln();
    assert!((f64::from(lp.top[0].1) - (2.0 - lse)).abs() < 1e-6);
    // Logprobs ignore temperature, mask and penalties: a Sampler reports the raw ones.
    let cfg = SamplerConfig::default().with_temperature(5.0).with_top_logprobs(2);
    let pen = PenaltyConfig::default().with_bias(TokenId(1), -100.0);
    let mut s = Sampler::new(cfg, pen).unwrap();
    let (_, lp) = s.sample_with_logprobs(Logits::F32(&logits), None, &[]).unwrap();
    let lp = lp.unwrap();
    assert_eq!(lp.top[0].0, TokenId(1));
    assert!((f64::from(lp.top[0].1) - (2.0 - lse)).abs() < 1e-6);
    let mut off = Sampler::new(SamplerConfig::default(), PenaltyConfig::default()).unwrap();
    assert!(off.sample_with_logprobs(Logits::F32(&logits), None, &[]).unwrap().1.is_none());
}

#[test]
fn distribution_respects_mask_and_sums_to_one() {
    let logits: Vec<f32> = (0..40).map(|i| (i % 7) as f32).collect();
    let mut mask = TokenMask::full(40);
    mask.remove(TokenId(6));
    mask.remove(TokenId(13));
    let cfg = SamplerConfig::default()
        .with_temperature(0.5)
        .with_top_p(0.9)
        .with_min_p(0.01)
        .with_top_k(12);
    let mut scratch = SamplerScratch::new();
    let d = sampling_distribution(
        &cfg,
        &PenaltyConfig::default(),
        Logits::F32(&logits),
        Some(&mask),
        &[],
        &mut scratch,
    )
    .unwrap();
    assert_eq!(d[6], 0.0);
    assert_eq!(d[13], 0.0);
    let s: f64 = d.iter().map(|&p| f64::from(p)).sum();
    assert!((s - 1.0).abs() < 1e-6);
    assert!(d.iter().filter(|&&p| p > 0.0).count() <= 12);
    // Temperature 0: the one-hot row of the greedy choice.
    let g = sampling_distribution(
        &SamplerConfig::default(),
        &PenaltyConfig::default(),
        Logits::F32(&logits),
        Some(&mask),
        &[],
        &mut scratch,
    )
    .unwrap();
    assert_eq!(g.iter().filter(|&&p| p == 1.0).count(), 1);
    assert_eq!(g[20], 1.0);
}

#[test]
fn speculative_greedy_accepts_exactly_the_argmax() {
    let target = [0.0, 3.0, 1.0];
    let draft = [0.0, 1.0, 3.0];
    let mut s = Sampler::new(SamplerConfig::default(), PenaltyConfig::default()).unwrap();
    assert_eq!(
        s.verify_draft(Logits::F32(&target), Logits::F32(&draft), None, &[], TokenId(2)).unwrap(),
        Verdict::Resampled(TokenId(1))
    );
    assert_eq!(
        s.verify_draft(Logits::F32(&target), Logits::F32(&target), None, &[], TokenId(1)).unwrap(),
        Verdict::Accepted(TokenId(1))
    );
}
