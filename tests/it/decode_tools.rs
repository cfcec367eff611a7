//! The decode loop's tools: draft-token validation and constrained speculative verification
//! (χ² against the masked target), fast-forward (forced bytes, canonical tokens with back-off),
//! and batch masks (parallel equals serial).

use crate::common;

use grammask::decode::batch::{fill_serial, BatchMasker};
use grammask::decode::speculative::{validate_draft, verify_constrained};
use grammask::decode::{decode, DecodeConfig, DecodeErrorKind, FastForward, RandomLogits};
use grammask::mask::words_for;
use grammask::sampler::{
    draw_index, sampling_distribution, Logits, Pcg32, PenaltyConfig, Sampler, SamplerConfig,
    SamplerScratch,
};
use grammask::{
    ConstraintEngine, EngineErrorKind, JsonConfig, JsonObjectConstraint, TokenId, TokenMask,
    Vocabulary,
};
use std::sync::Arc;

fn json(vocab: &Vocabulary) -> JsonObjectConstraint {
    JsonObjectConstraint::new(vocab, &JsonConfig::default()).unwrap()
}

#[test]
fn draft_masks_equal_step_by_step_masks_and_the_state_is_restored() {
    let vocab = common::qwen3();
    let mut engine = json(vocab);
    for &t in &vocab.encode("{\"list\": [").unwrap() {
        engine.advance(t).unwrap();
    }
    let mut draft = vocab.encode("1, 2, \"x\"]").unwrap();
    let good = draft.len();
    draft.extend(vocab.encode(":").unwrap()); // refused after `]` inside an object
    draft.extend(vocab.encode("3").unwrap());
    let n = vocab.n_vocab();
    let before = common::oracle_mask(&engine);
    let mut masks = vec![TokenMask::new(n); draft.len() + 1];
    let allowed = validate_draft(&mut engine, &draft, &mut masks).unwrap();
    assert_eq!(allowed, good, "{}", common::trace(vocab, &draft, Some(allowed)));
    assert_eq!(common::oracle_mask(&engine), before, "state restored");
    // Reference: advance a copy of the state step by step.
    let mut reference = json(vocab);
    for &t in &vocab.encode("{\"list\": [").unwrap() {
        reference.advance(t).unwrap();
    }
    let mut m = TokenMask::new(n);
    for i in 0..=allowed {
        reference.fill_mask(&mut m).unwrap();
        assert_eq!(masks[i], m, "mask {i}");
        if i < allowed {
            reference.advance(draft[i]).unwrap();
        }
    }
    assert!(!masks[allowed].contains(draft[allowed]));
    // Too few buffers: typed error.
    let err = validate_draft(&mut engine, &draft, &mut masks[..2]).unwrap_err();
    assert!(matches!(err.kind(), DecodeErrorKind::Config(_)));
}

#[test]
fn a_draft_longer_than_the_rollback_history_is_a_typed_error() {
    let vocab = common::qwen3();
    let mut cfg = JsonConfig::default();
    cfg.engine.history = 2;
    let mut engine = JsonObjectConstraint::new(vocab, &cfg).unwrap();
    let draft = vocab.encode("{\"a\": 1, \"b\": 2}").unwrap();
    assert!(draft.len() > 2);
    let mut masks = vec![TokenMask::new(vocab.n_vocab()); draft.len() + 1];
    let err = validate_draft(&mut engine, &draft, &mut masks).unwrap_err();
    match err.kind() {
        DecodeErrorKind::Engine(e) => {
            assert!(matches!(e.kind(), EngineErrorKind::RollbackTooFar { available: 2, .. }))
        }
        other => panic!("{other:?}"),
    }
}

/// A small vocabulary where JSON allows only a few tokens at the start.
fn tiny() -> Vocabulary {
    let toks: Vec<Option<&[u8]>> = vec![
        Some(b"{"),
        Some(b"}"),
        Some(b"\""),
        Some(b"a"),
        Some(b"1"),
        Some(b" "),
        Some(b"{\""),
        Some(b"\n"),
        Some(b"["),
        None,
    ];
    Vocabulary::from_token_bytes(&toks, &[9], None).unwrap()
}

#[test]
fn constrained_speculative_sampling_has_the_masked_target_distribution() {
    let vocab = tiny();
    let target = [0.5f32, 2.0, 1.0, 0.0, 0.3, 1.2, 0.4, 0.9, 0.2, -1.0];
    let draft_row = [1.5f32, 0.0, 0.5, 1.0, 0.3, 0.2, -0.5, 0.1, 0.2, -1.0];
    let cfg = SamplerConfig::default().with_temperature(1.0);
    let pen = PenaltyConfig::default();
    let mut mask = TokenMask::new(vocab.n_vocab());
    json(&vocab).fill_mask(&mut mask).unwrap();
    assert!(mask.count() >= 2, "{mask:?}");
    let mut scratch = SamplerScratch::new();
    let p: Vec<f64> =
        sampling_distribution(&cfg, &pen, Logits::F32(&target), Some(&mask), &[], &mut scratch)
            .unwrap()
            .iter()
            .map(|&x| f64::from(x))
            .collect();
    let q: Vec<f32> =
        sampling_distribution(&cfg, &pen, Logits::F32(&draft_row), Some(&mask), &[], &mut scratch)
            .unwrap()
            .to_vec();
    let n = 20_000;
    let mut counts = vec![0usize; vocab.n_vocab()];
    let mut drafter = Pcg32::new(99);
    let mut masks = vec![TokenMask::new(vocab.n_vocab()); 2];
    let mut accepted = 0;
    for seed in 0..n as u64 {
        let x = TokenId::from_index(draw_index(&q, drafter.next_f32()).unwrap());
        let mut sampler = Sampler::new(cfg.clone().with_seed(seed), pen.clone()).unwrap();
        let mut engine = json(&vocab);
        let out = verify_constrained(
            &mut sampler,
            &mut engine,
            &[x],
            &[&draft_row],
            &[&target, &target],
            &[],
            &mut masks,
        )
        .unwrap();
        accepted += out.accepted;
        counts[out.tokens[0].index()] += 1;
    }
    assert!(accepted > 1000 && accepted < n - 1000, "both verdicts exercised: {accepted}");
    let mut stat = 0.0;
    let mut df = 0usize;
    for (&c, &pi) in counts.iter().zip(&p) {
        if pi > 0.0 {
            let e = pi * n as f64;
            stat += (c as f64 - e).powi(2) / e;
            df += 1;
        } else {
            assert_eq!(c, 0);
        }
    }
    let crit = [10.83, 13.82, 16.27, 18.47, 20.52, 22.46][df - 2];
    assert!(stat < crit, "χ² = {stat:.2}, counts {counts:?}, p {p:?}");
}

#[test]
fn forced_bytes_of_the_json_engine() {
    let vocab = common::qwen3();
    let mut engine = json(vocab);
    let mut bytes = Vec::new();
    for &t in &vocab.encode("{\"a\": tr").unwrap() {
        engine.advance(t).unwrap();
    }
    engine.forced_bytes(&mut bytes);
    assert_eq!(bytes, b"ue");
    let fresh = json(vocab);
    fresh.forced_bytes(&mut bytes);
    assert!(bytes.is_empty() || bytes == b"{", "{bytes:?}");
}

#[test]
fn fast_forward_tokens_back_off_where_a_longer_token_could_span_the_boundary() {
    // Tokenizer-less vocabulary: greedy longest match, then the back-off.
    let toks: Vec<Option<&[u8]>> = vec![
        Some(b"ab"),
        Some(b"abc"),
        Some(b"a"),
        Some(b"b"),
        Some(b"d"),
        Some(b"de"),
        Some(b"x"),
    ];
    let vocab = Vocabulary::from_token_bytes(&toks, &[], None).unwrap();
    let ff = FastForward::new(&vocab);
    let mut out = Vec::new();
    // `abd`: canonical ab‧d, but `de` could start at `d` and run past the end: keep `ab`.
    assert_eq!(ff.tokens_for(b"abd", &mut out), 2);
    assert_eq!(out, vec![TokenId(0)]);
    // `abx`: nothing extends `x`, `bx` or `abx`: all tokens.
    assert_eq!(ff.tokens_for(b"abx", &mut out), 3);
    assert_eq!(out, vec![TokenId(0), TokenId(6)]);
    // `ab` alone: `abc` extends it, so nothing is forced.
    assert_eq!(ff.tokens_for(b"ab", &mut out), 0);
    assert!(out.is_empty());
    assert!(ff.has_extension(b"a") && !ff.has_extension(b"abc"));
}

#[test]
fn fast_forward_in_the_loop_keeps_documents_valid() {
    let vocab = common::qwen3();
    let ff = Arc::new(FastForward::new(vocab));
    let mut forced = 0;
    for seed in 0..4 {
        let mut engine = json(vocab);
        let mut model = RandomLogits::new(vocab, seed);
        let cfg = DecodeConfig::builder()
            .max_tokens(300)
            .temperature(0.8)
            .seed(seed)
            .fast_forward(ff.clone())
            .build()
            .unwrap();
        let out = decode(&mut model, vocab, Some(&mut engine), &cfg).unwrap();
        forced += out.counters.fast_forward_tokens;
        assert_eq!(
            out.counters.model_calls + out.counters.fast_forward_tokens + out.counters.forced_eos,
            out.tokens.len()
        );
        if out.finish_reason.as_str() == "stop" {
            let v: serde_json::Value = serde_json::from_slice(&out.text).unwrap();
            assert!(v.is_object());
        }
    }
    // Free-form JSON forces little (literals' tails, mostly backed off): just count.
    let _ = forced;
}

#[test]
fn batch_masks_equal_serial_masks() {
    let vocab = common::qwen3();
    let prefixes = [
        "",
        "{",
        "{\"a\"",
        "{\"a\": ",
        "{\"a\": \"x",
        "{\"a\": [1, ",
        "{\"a\": tr",
        "{\"a\": {\"b\": null}",
        "{\"k\": -1.5e",
    ];
    let make = || -> Vec<JsonObjectConstraint> {
        prefixes
            .iter()
            .map(|p| {
                let mut e = json(vocab);
                for &t in &vocab.encode(p).unwrap() {
                    e.advance(t).unwrap();
                }
                e
            })
            .collect()
    };
    let w = words_for(vocab.n_vocab());
    let mut serial = vec![0u32; prefixes.len() * w];
    let mut engines = make();
    let mut refs: Vec<&mut dyn ConstraintEngine> =
        engines.iter_mut().map(|e| e as &mut dyn ConstraintEngine).collect();
    fill_serial(&mut refs, &mut serial, &mut TokenMask::new(vocab.n_vocab()), w).unwrap();
    for threads in [1, 2, 3, 8] {
        let mut engines = make();
        let mut refs: Vec<&mut dyn ConstraintEngine> =
            engines.iter_mut().map(|e| e as &mut dyn ConstraintEngine).collect();
        let mut batch = vec![0xFFFF_FFFFu32; prefixes.len() * w];
        let mut masker = BatchMasker::new(vocab.n_vocab(), threads);
        masker.fill(&mut refs, &mut batch).unwrap();
        assert!(batch == serial, "threads {threads}");
    }
    let mut masker = BatchMasker::new(vocab.n_vocab(), 2);
    let err = masker.fill(&mut refs, &mut serial[..w]).unwrap_err();
    assert!(matches!(err.kind(), DecodeErrorKind::Config(_)));
}

#[test]
fn fast_forward_appends_forced_tokens_without_the_model() {
    // One-byte tokens: nothing can span a boundary, so every forced byte is fast-forwarded.
    let toks: Vec<Option<&[u8]>> =
        [&b"{"[..], b"}", b"\"", b"a", b":", b"t", b"r", b"u", b"e", b"1"]
            .iter()
            .map(|&b| Some(b))
            .chain([None])
            .collect();
    let vocab = Vocabulary::from_token_bytes(&toks, &[10], None).unwrap();
    let cfg = JsonConfig::default().with_whitespace(grammask::Whitespace::Compact);
    let mut engine = JsonObjectConstraint::new(&vocab, &cfg).unwrap();
    // The replay model writes `{"a":true}`; `{` is forced at the start, `:` after the key,
    // `rue` after `t`; `}` is not (the grammar also allows `,`, even though no token spells it).
    let doc: Vec<TokenId> = b"{\"a\":true}"
        .iter()
        .map(|b| TokenId::from_index(toks.iter().position(|t| *t == Some(&[*b][..])).unwrap()))
        .collect();
    let mut model = grammask::decode::ReplayModel::new(&vocab, doc.clone());
    let decode_cfg = DecodeConfig::builder()
        .max_tokens(20)
        .fast_forward(Arc::new(FastForward::new(&vocab)))
        .build()
        .unwrap();
    let out = decode(&mut model, &vocab, Some(&mut engine), &decode_cfg).unwrap();
    assert_eq!(out.text, b"{\"a\":true}");
    assert_eq!(out.finish_reason.as_str(), "stop");
    let forced: Vec<bool> = out.timings.iter().map(|t| t.forced).collect();
    // { " a " : t r u e } EOS — `{`, `:`, `rue` fast-forwarded, EOS forced at the end.
    assert_eq!(
        forced,
        vec![true, false, false, false, true, false, true, true, true, false, true],
        "{}",
        common::trace(&vocab, &out.tokens, None)
    );
    assert_eq!(out.counters.fast_forward_tokens, 5);
    assert_eq!(out.counters.forced_eos, 1);
    assert_eq!(out.counters.model_calls, 5);
}
