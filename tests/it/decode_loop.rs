//! The decode loop: stop reasons, typed errors (width, NaN, dead end, rollback), sample-then-check
//! exactness (χ² against the masked distribution), logprobs, EOS config files, and the
//! foundation's `generate_greedy` entry point.

use crate::common;

use grammask::decode::eos::{eos_id_from_tokenizer_config, eos_ids_from_config, load_eos_ids};
use grammask::decode::{
    decode, generate_greedy, DecodeConfig, DecodeErrorKind, LogitsSource, RandomLogits,
};
use grammask::sampler::{
    sampling_distribution, Logits, PenaltyConfig, SamplerConfig, SamplerScratch,
};
use grammask::{
    ConstraintEngine, EngineError, EngineErrorKind, JsonConfig, JsonObjectConstraint, TokenId,
    TokenMask, Vocabulary,
};

/// A tiny vocabulary: ten one-byte JSON-ish tokens and EOS (id 10, special).
fn tiny() -> Vocabulary {
    let toks: Vec<Option<&[u8]>> = vec![
        Some(b"{"),
        Some(b"}"),
        Some(b"\""),
        Some(b"a"),
        Some(b"1"),
        Some(b" "),
        Some(b":"),
        Some(b","),
        Some(b"["),
        Some(b"]"),
        None,
    ];
    Vocabulary::from_token_bytes(&toks, &[10], None).unwrap()
}

/// A model with fixed logits.
struct Fixed(Vec<f32>);
impl LogitsSource for Fixed {
    fn n_vocab(&self) -> usize {
        self.0.len()
    }
    fn logits(&mut self, _tokens: &[TokenId], out: &mut [f32]) {
        out.copy_from_slice(&self.0);
    }
}

/// An engine allowing a fixed set of tokens at every step (stateless but with a rollback
/// history, so the loop's error paths can be driven).
struct FixedSet {
    vocab: Vocabulary,
    allowed: TokenMask,
    advanced: usize,
    history: usize,
}
impl FixedSet {
    fn new(vocab: &Vocabulary, ids: &[u32]) -> FixedSet {
        let mut allowed = TokenMask::new(vocab.n_vocab());
        for &i in ids {
            allowed.insert(TokenId(i));
        }
        FixedSet { vocab: vocab.clone(), allowed, advanced: 0, history: 4 }
    }
}
impl ConstraintEngine for FixedSet {
    fn vocab(&self) -> &Vocabulary {
        &self.vocab
    }
    fn fill_mask(&mut self, mask: &mut TokenMask) -> Result<(), EngineError> {
        mask.copy_from(&self.allowed);
        Ok(())
    }
    fn advance(&mut self, token: TokenId) -> Result<(), EngineError> {
        if !self.allowed.contains(token) {
            return Err(EngineError::new(EngineErrorKind::Refused {
                token,
                text: String::new(),
                accepted_bytes: 0,
            }));
        }
        self.advanced += 1;
        Ok(())
    }
    fn is_accepting(&self) -> bool {
        false
    }
    fn is_finished(&self) -> bool {
        false
    }
    fn can_only_end(&self) -> bool {
        false
    }
    fn allows(&self, token: TokenId) -> bool {
        self.allowed.contains(token)
    }
    fn step_mask(&mut self, _vocab_size: usize) -> Result<&[bool], EngineError> {
        unimplemented!("not used by the loop")
    }
    fn rollback(&mut self, n: usize) -> Result<(), EngineError> {
        let available = self.advanced.min(self.history);
        if n > available {
            return Err(EngineError::new(EngineErrorKind::RollbackTooFar {
                requested: n,
                available,
            }));
        }
        self.advanced -= n;
        Ok(())
    }
}

#[test]
fn random_logit_runs_stop_with_valid_json_or_hit_the_limit() {
    let vocab = common::qwen3();
    let mut stops = 0;
    for seed in 0..4 {
        let mut engine = JsonObjectConstraint::new(vocab, &JsonConfig::default()).unwrap();
        let mut model = RandomLogits::new(vocab, seed);
        let cfg =
            DecodeConfig::builder().max_tokens(300).temperature(0.8).seed(seed).build().unwrap();
        let out = decode(&mut model, vocab, Some(&mut engine), &cfg).unwrap();
        assert_eq!(out.tokens.len(), out.counters.steps);
        assert_eq!(out.timings.len(), out.counters.steps);
        match out.finish_reason.as_str() {
            "stop" => {
                stops += 1;
                assert!(vocab.is_eos(*out.tokens.last().unwrap()));
                let v: serde_json::Value = serde_json::from_slice(&out.text)
                    .unwrap_or_else(|e| panic!("seed {seed}: {e}: {}", out.content()));
                assert!(v.is_object());
                assert!(engine.is_finished());
            }
            "length" => assert_eq!(out.tokens.len(), 300),
            other => panic!("{other}"),
        }
        let c = out.counters;
        assert_eq!(c.masks_skipped + c.check_rejections + c.forced_eos, c.steps);
        assert_eq!(c.masks_filled, c.check_rejections);
        assert_eq!(out.mask_us.len(), c.masks_filled);
    }
    assert!(stops >= 2, "{stops}/4 runs completed a document");
}

#[test]
fn greedy_sample_then_check_equals_mask_first_token_for_token() {
    let vocab = common::qwen3();
    for seed in [1, 2] {
        let run = |stc: bool| {
            let mut engine = JsonObjectConstraint::new(vocab, &JsonConfig::default()).unwrap();
            let mut model = RandomLogits::new(vocab, seed);
            let cfg =
                DecodeConfig::builder().max_tokens(120).sample_then_check(stc).build().unwrap();
            decode(&mut model, vocab, Some(&mut engine), &cfg).unwrap()
        };
        let (fast, full) = (run(true), run(false));
        assert_eq!(fast.tokens, full.tokens, "seed {seed}");
        assert_eq!(full.counters.masks_skipped, 0);
    }
}

#[test]
fn generate_greedy_still_masks_every_step() {
    let vocab = common::qwen3();
    let mut engine = JsonObjectConstraint::new(vocab, &JsonConfig::default()).unwrap();
    let mut model = RandomLogits::new(vocab, 7);
    let out = generate_greedy(&mut model, &mut engine, 200).unwrap();
    assert_eq!(out.mask_us.len(), out.tokens.len());
    if out.finish_reason.as_str() == "stop" {
        assert!(serde_json::from_slice::<serde_json::Value>(&out.text).unwrap().is_object());
    }
}

/// χ² critical values at p = 0.001 for 1..=9 degrees of freedom.
const CHI2_999: [f64; 9] = [10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88];

fn chi2(counts: &[usize], probs: &[f64], n: usize) -> (f64, usize) {
    let mut stat = 0.0;
    let mut cells = 0;
    for (&c, &p) in counts.iter().zip(probs) {
        if p > 0.0 {
            let e = p * n as f64;
            stat += (c as f64 - e).powi(2) / e;
            cells += 1;
        } else {
            assert_eq!(c, 0, "a forbidden token was drawn");
        }
    }
    (stat, cells - 1)
}

#[test]
fn sample_then_check_has_exactly_the_masked_distribution() {
    let vocab = tiny();
    let logits = vec![2.0, 1.0, 0.5, 0.0, -0.5, 1.5, 0.3, 0.8, 0.1, -1.0, -2.0];
    let allowed = [1u32, 3, 4, 6, 9];
    // The reference: the sampler's own masked distribution.
    let mut mask = TokenMask::new(vocab.n_vocab());
    allowed.iter().for_each(|&i| mask.insert(TokenId(i)));
    let scfg = SamplerConfig::default().with_temperature(1.3);
    let mut scratch = SamplerScratch::new();
    let p: Vec<f64> = sampling_distribution(
        &scfg,
        &PenaltyConfig::default(),
        Logits::F32(&logits),
        Some(&mask),
        &[],
        &mut scratch,
    )
    .unwrap()
    .iter()
    .map(|&x| f64::from(x))
    .collect();
    let n = 20_000;
    let mut counts = vec![0usize; vocab.n_vocab()];
    let (mut skipped, mut rejected) = (0, 0);
    for seed in 0..n as u64 {
        let mut engine = FixedSet::new(&vocab, &allowed);
        let mut model = Fixed(logits.clone());
        let cfg =
            DecodeConfig::builder().max_tokens(1).temperature(1.3).seed(seed).build().unwrap();
        let out = decode(&mut model, &vocab, Some(&mut engine), &cfg).unwrap();
        counts[out.tokens[0].index()] += 1;
        skipped += out.counters.masks_skipped;
        rejected += out.counters.check_rejections;
    }
    assert!(skipped > 1000 && rejected > 1000, "both paths exercised: {skipped} / {rejected}");
    let (stat, df) = chi2(&counts, &p, n);
    assert!(stat < CHI2_999[df - 1], "χ² = {stat:.2} with {df} df; counts {counts:?}, p {p:?}");
}

#[test]
fn truncation_filters_always_mask_first() {
    let vocab = tiny();
    let mut engine = FixedSet::new(&vocab, &[1, 3]);
    let mut model = Fixed(vec![2.0, 1.0, 0.5, 0.0, -0.5, 1.5, 0.3, 0.8, 0.1, -1.0, -2.0]);
    let cfg = DecodeConfig::builder().max_tokens(5).temperature(1.0).top_k(2).build().unwrap();
    let out = decode(&mut model, &vocab, Some(&mut engine), &cfg).unwrap();
    assert_eq!(out.counters.masks_filled, 5);
    assert_eq!(out.counters.masks_skipped, 0);
}

#[test]
fn wrong_width_is_a_typed_error() {
    let vocab = tiny();
    let mut model = Fixed(vec![0.0; 12]);
    let err = decode(&mut model, &vocab, None, &DecodeConfig::greedy(3)).unwrap_err();
    assert!(matches!(err.kind(), DecodeErrorKind::WidthMismatch { model: 12, vocab: 11 }), "{err}");
    let qwen = common::qwen3();
    let mut engine = JsonObjectConstraint::new(qwen, &JsonConfig::default()).unwrap();
    let mut model = Fixed(vec![0.0; 11]);
    let err = decode(&mut model, &vocab, Some(&mut engine), &DecodeConfig::greedy(3)).unwrap_err();
    assert!(matches!(err.kind(), DecodeErrorKind::WidthMismatch { .. }), "{err}");
}

#[test]
fn nan_logits_are_a_typed_error_only_where_read() {
    let vocab = tiny();
    let mut logits = vec![0.0f32; 11];
    logits[2] = f32::NAN;
    for temperature in [0.0, 1.0] {
        let cfg = DecodeConfig::builder().max_tokens(3).temperature(temperature).build().unwrap();
        // Unconstrained: every logit is read.
        let err = decode(&mut Fixed(logits.clone()), &vocab, None, &cfg).unwrap_err();
        assert!(
            matches!(err.kind(), DecodeErrorKind::NanLogit { step: 0, token: TokenId(2) }),
            "{err}"
        );
        assert!(err.to_string().contains("NaN"));
        // Constrained, NaN on a forbidden token: never read, no error.
        let mut engine = FixedSet::new(&vocab, &[0, 1]);
        decode(&mut Fixed(logits.clone()), &vocab, Some(&mut engine), &cfg).unwrap();
        // Constrained, NaN on an allowed token: reported.
        let mut engine = FixedSet::new(&vocab, &[1, 2]);
        let err = decode(&mut Fixed(logits.clone()), &vocab, Some(&mut engine), &cfg).unwrap_err();
        assert!(matches!(err.kind(), DecodeErrorKind::NanLogit { token: TokenId(2), .. }), "{err}");
    }
}

#[test]
fn a_dead_end_stops_with_a_typed_error() {
    let vocab = tiny();
    for stc in [true, false] {
        let mut engine = FixedSet::new(&vocab, &[]);
        let cfg = DecodeConfig::builder().max_tokens(3).sample_then_check(stc).build().unwrap();
        let err = decode(&mut Fixed(vec![0.0; 11]), &vocab, Some(&mut engine), &cfg).unwrap_err();
        assert!(matches!(err.kind(), DecodeErrorKind::DeadEnd { step: 0 }), "{err}");
    }
    // Allowed tokens whose logits are all -inf: also a dead end, not a spin.
    let mut engine = FixedSet::new(&vocab, &[3]);
    let mut logits = vec![0.0f32; 11];
    logits[3] = f32::NEG_INFINITY;
    let err = decode(&mut Fixed(logits), &vocab, Some(&mut engine), &DecodeConfig::greedy(3))
        .unwrap_err();
    assert!(matches!(err.kind(), DecodeErrorKind::DeadEnd { step: 0 }), "{err}");
}

#[test]
fn rollback_beyond_history_is_a_typed_error_and_changes_nothing() {
    let vocab = common::qwen3();
    let mut cfg = JsonConfig::default();
    cfg.engine.history = 3;
    let mut engine = JsonObjectConstraint::new(vocab, &cfg).unwrap();
    let toks = vocab.encode("{\"key\": [1, 2, 3]}").unwrap();
    for &t in &toks {
        engine.advance(t).unwrap();
    }
    let before = common::oracle_mask(&engine);
    let err = engine.rollback(4).unwrap_err();
    assert!(matches!(err.kind(), EngineErrorKind::RollbackTooFar { requested: 4, available: 3 }));
    assert_eq!(common::oracle_mask(&engine), before);
    engine.rollback(3).unwrap();
}

#[test]
fn eos_ends_with_stop_and_the_limit_with_length() {
    let vocab = tiny();
    let mut logits = vec![0.0f32; 11];
    logits[10] = 5.0;
    let out = decode(&mut Fixed(logits.clone()), &vocab, None, &DecodeConfig::greedy(4)).unwrap();
    assert_eq!(out.finish_reason.as_str(), "stop");
    assert_eq!(out.tokens, vec![TokenId(10)]);
    assert!(out.text.is_empty());
    logits[10] = -5.0;
    logits[3] = 5.0;
    let out = decode(&mut Fixed(logits.clone()), &vocab, None, &DecodeConfig::greedy(4)).unwrap();
    assert_eq!(out.finish_reason.as_str(), "length");
    assert_eq!(out.text, b"aaaa");
    // A configured EOS list replaces the vocabulary's.
    let cfg = DecodeConfig::builder().max_tokens(4).eos_ids(vec![TokenId(3)]).build().unwrap();
    let out = decode(&mut Fixed(logits), &vocab, None, &cfg).unwrap();
    assert_eq!(out.finish_reason.as_str(), "stop");
    assert_eq!(out.tokens, vec![TokenId(3)]);
}

#[test]
fn a_finished_document_gets_eos_without_a_model_call() {
    let vocab = common::qwen3();
    let doc = vocab.encode("{\"a\":1}").unwrap();
    let mut model = grammask::decode::ReplayModel::new(vocab, doc.clone());
    let cfg = JsonConfig::default().with_whitespace(grammask::Whitespace::Compact);
    let mut engine = JsonObjectConstraint::new(vocab, &cfg).unwrap();
    let out = decode(&mut model, vocab, Some(&mut engine), &DecodeConfig::greedy(20)).unwrap();
    assert_eq!(out.text, b"{\"a\":1}");
    assert_eq!(out.finish_reason.as_str(), "stop");
    assert_eq!(out.counters.forced_eos, 1);
    assert_eq!(out.counters.model_calls, out.tokens.len() - 1);
    assert!(out.timings.last().unwrap().forced);
}

#[test]
fn logprobs_are_per_step_from_raw_logits() {
    let vocab = tiny();
    let logits = vec![2.0, 1.0, 0.5, 0.0, -0.5, 1.5, 0.3, 0.8, 0.1, -1.0, -2.0];
    let mut engine = FixedSet::new(&vocab, &[1, 3]);
    let cfg = DecodeConfig::builder().max_tokens(3).logprobs(2).build().unwrap();
    let out = decode(&mut Fixed(logits.clone()), &vocab, Some(&mut engine), &cfg).unwrap();
    assert_eq!(out.logprobs.len(), 3);
    let lp = out.logprobs[0].as_ref().unwrap();
    assert_eq!(lp.token, TokenId(1));
    let lse = logits.iter().map(|&x| f64::from(x).exp()).sum::<f64>().ln();
    assert!((f64::from(lp.logprob) - (1.0 - lse)).abs() < 1e-4);
    assert_eq!(lp.top[0].0, TokenId(0), "raw logits: the forbidden best token is reported");
    let none = decode(&mut Fixed(logits), &vocab, None, &DecodeConfig::greedy(3)).unwrap();
    assert!(none.logprobs.is_empty());
}

#[test]
fn the_token_hook_sees_every_token_as_it_is_appended_with_its_logprobs() {
    // A sampled run with logprobs, then a document whose EOS is forced (logprobs `None`).
    let vocab = tiny();
    let logits = vec![2.0, 1.0, 0.5, 0.0, -0.5, 1.5, 0.3, 0.8, 0.1, -1.0, -2.0];
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = seen.clone();
    let cfg = DecodeConfig::builder()
        .max_tokens(3)
        .logprobs(2)
        .on_token(move |i, t, lp| sink.lock().unwrap().push((i, t, lp.map(|l| l.logprob))))
        .build()
        .unwrap();
    let mut engine = FixedSet::new(&vocab, &[1, 3]);
    let out = decode(&mut Fixed(logits), &vocab, Some(&mut engine), &cfg).unwrap();
    let want: Vec<_> = out
        .tokens
        .iter()
        .enumerate()
        .map(|(i, &t)| (i, t, out.logprobs[i].as_ref().map(|l| l.logprob)))
        .collect();
    assert_eq!(*seen.lock().unwrap(), want);
    assert!(want.iter().all(|w| w.2.is_some()));
    let vocab = common::qwen3();
    let doc = vocab.encode("{\"a\":1}").unwrap();
    let mut model = grammask::decode::ReplayModel::new(vocab, doc);
    let js = JsonConfig::default().with_whitespace(grammask::Whitespace::Compact);
    let mut engine = JsonObjectConstraint::new(vocab, &js).unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = seen.clone();
    let cfg = DecodeConfig::builder()
        .max_tokens(20)
        .logprobs(1)
        .on_token(move |i, t, lp| sink.lock().unwrap().push((i, t, lp.is_some())))
        .build()
        .unwrap();
    let out = decode(&mut model, vocab, Some(&mut engine), &cfg).unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), out.tokens.len());
    assert!(!seen.last().unwrap().2, "the forced EOS has no logprobs");
    assert!(seen[..seen.len() - 1].iter().all(|s| s.2));
}

#[test]
fn eos_ids_from_config_files() {
    assert_eq!(eos_ids_from_config(br#"{"eos_token_id": 7}"#, "c").unwrap(), vec![TokenId(7)]);
    assert_eq!(
        eos_ids_from_config(br#"{"eos_token_id": [1, 2]}"#, "c").unwrap(),
        vec![TokenId(1), TokenId(2)]
    );
    assert!(eos_ids_from_config(br#"{"eos_token_id": null}"#, "c").unwrap().is_empty());
    assert!(eos_ids_from_config(br#"{}"#, "c").unwrap().is_empty());
    let err = eos_ids_from_config(br#"{"eos_token_id": "x"}"#, "config.json").unwrap_err();
    assert!(matches!(err.kind(), DecodeErrorKind::EosConfig { .. }));
    assert!(err.to_string().contains("config.json"));
    assert!(eos_ids_from_config(b"{", "c").is_err());
    let vocab = common::qwen3();
    let im_end = vocab.token_id("<|im_end|>").unwrap();
    let tc = br#"{"eos_token": {"content": "<|im_end|>", "special": true}}"#;
    assert_eq!(eos_id_from_tokenizer_config(tc, vocab, "t").unwrap(), Some(im_end));
    let tc = br#"{"eos_token": "<|im_end|>"}"#;
    assert_eq!(eos_id_from_tokenizer_config(tc, vocab, "t").unwrap(), Some(im_end));
    assert!(eos_id_from_tokenizer_config(br#"{"eos_token": "<nope>"}"#, vocab, "t").is_err());

    let dir = std::env::temp_dir().join(format!("grammask-eos-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.json"), br#"{"eos_token_id": 151643}"#).unwrap();
    std::fs::write(dir.join("generation_config.json"), br#"{"eos_token_id": [151645, 151643]}"#)
        .unwrap();
    std::fs::write(dir.join("tokenizer_config.json"), br#"{"eos_token": "<|im_end|>"}"#).unwrap();
    let ids = load_eos_ids(&dir, vocab).unwrap();
    assert_eq!(ids, vec![TokenId(151643), TokenId(151645)]);
    std::fs::write(dir.join("config.json"), br#"{"eos_token_id": 999999}"#).unwrap();
    assert!(load_eos_ids(&dir, vocab).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}
