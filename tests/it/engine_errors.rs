//! Bad input to an engine: every refusal is a typed error and leaves the state exactly as it
//! was (same mask, same acceptance) afterwards.

use crate::common;

use common::qwen3;
use grammask::{
    ConstraintEngine, EngineErrorKind, JsonConfig, JsonObjectConstraint, TokenId, TokenMask,
    Vocabulary,
};

fn engine_after(vocab: &Vocabulary, text: &str) -> JsonObjectConstraint {
    let mut e = JsonObjectConstraint::new(vocab, &JsonConfig::default()).unwrap();
    for t in vocab.encode(text).unwrap() {
        e.advance(t).unwrap();
    }
    e
}

fn snapshot(e: &mut JsonObjectConstraint) -> (TokenMask, bool, bool) {
    let mut m = TokenMask::new(e.vocab().n_vocab());
    e.fill_mask(&mut m).unwrap();
    (m, e.is_accepting(), e.is_finished())
}

/// Assert `f` fails with a kind matching `pred` and the engine is unchanged.
fn refused_unchanged(
    e: &mut JsonObjectConstraint,
    f: impl FnOnce(&mut JsonObjectConstraint) -> Result<(), grammask::EngineError>,
    pred: impl Fn(&EngineErrorKind) -> bool,
) {
    let before = snapshot(e);
    let err = f(e).expect_err("must be refused");
    assert!(pred(err.kind()), "unexpected error kind: {err}");
    assert!(!err.to_string().is_empty());
    assert_eq!(snapshot(e), before, "state changed after a refused call ({err})");
}

#[test]
fn refused_token_names_the_token() {
    let vocab = qwen3();
    let mut e = engine_after(vocab, "{\"a\":");
    let bad = vocab.encode("}").unwrap()[0];
    refused_unchanged(&mut e, |e| e.advance(bad), |k| matches!(k, EngineErrorKind::Refused { .. }));
    let msg = e.advance(bad).unwrap_err().to_string();
    assert!(msg.contains('}'), "message names the token's text: {msg}");
}

#[test]
fn out_of_range_id() {
    let vocab = qwen3();
    let mut e = engine_after(vocab, "{");
    let id = TokenId(vocab.n_vocab() as u32 + 5);
    refused_unchanged(
        &mut e,
        |e| e.advance(id),
        |k| matches!(k, EngineErrorKind::OutOfRange { .. }),
    );
}

#[test]
fn padding_id_of_a_padded_vocabulary() {
    let vocab = Vocabulary::from_token_bytes(
        &[Some(b"{"), Some(b"}"), Some(b"\""), Some(b"a"), Some(b":"), Some(b"1"), None],
        &[6],
        Some(64),
    )
    .unwrap();
    let mut e = JsonObjectConstraint::new(&vocab, &JsonConfig::default()).unwrap();
    let mut m = TokenMask::new(64);
    e.fill_mask(&mut m).unwrap();
    assert_eq!(m.iter().collect::<Vec<_>>(), vec![TokenId(0)], "only `{{` at the start");
    refused_unchanged(
        &mut e,
        |e| e.advance(TokenId(40)),
        |k| matches!(k, EngineErrorKind::OutOfRange { .. }),
    );
}

#[test]
fn special_token_mid_document() {
    let vocab = qwen3();
    let special = vocab.token_id("<|im_start|>").expect("Qwen3 has <|im_start|>");
    let mut e = engine_after(vocab, "{\"a\":\"");
    refused_unchanged(
        &mut e,
        |e| e.advance(special),
        |k| matches!(k, EngineErrorKind::SpecialToken { .. }),
    );
}

#[test]
fn eos_before_the_end_and_after_eos() {
    let vocab = qwen3();
    let eos = vocab.eos_ids()[0];
    let mut e = engine_after(vocab, "{\"a\":1");
    refused_unchanged(
        &mut e,
        |e| e.advance(eos),
        |k| matches!(k, EngineErrorKind::EosNotAllowed { .. }),
    );
    let close = vocab.encode("}").unwrap()[0];
    e.advance(close).unwrap();
    assert!(e.can_only_end());
    let mut m = TokenMask::new(vocab.n_vocab());
    e.fill_mask(&mut m).unwrap();
    assert_eq!(m.iter().collect::<Vec<_>>(), vocab.eos_ids().to_vec(), "only EOS at the end");
    e.advance(eos).unwrap();
    assert!(e.is_finished());
    refused_unchanged(
        &mut e,
        |e| e.advance(close),
        |k| matches!(k, EngineErrorKind::AfterEos { .. }),
    );
    refused_unchanged(
        &mut e,
        |e| e.advance(eos),
        |k| matches!(k, EngineErrorKind::AfterEos { .. }),
    );
}

#[test]
fn mask_of_the_wrong_length() {
    let vocab = qwen3();
    let mut e = engine_after(vocab, "{");
    let mut short = TokenMask::new(vocab.n_vocab() - 1);
    let err = e.fill_mask(&mut short).unwrap_err();
    assert!(matches!(err.kind(), EngineErrorKind::MaskLength { .. }));
    let err = e.step_mask(10).unwrap_err();
    assert!(matches!(err.kind(), EngineErrorKind::MaskLength { .. }));
    let bools = e.step_mask(vocab.n_vocab()).unwrap();
    assert_eq!(bools.len(), vocab.n_vocab());
    assert!(bools[vocab.encode("\"").unwrap()[0].index()]);
}

#[test]
fn rollback_restores_masks_and_refuses_too_far() {
    let vocab = qwen3();
    let tokens = vocab.encode("{\"name\": [1, 2, {\"x\": \"y\"}]}").unwrap();
    let mut e = JsonObjectConstraint::new(vocab, &JsonConfig::default()).unwrap();
    let mut masks = Vec::new();
    for &t in &tokens {
        masks.push(snapshot(&mut e));
        e.advance(t).unwrap();
    }
    e.advance(vocab.eos_ids()[0]).unwrap();
    for k in (0..tokens.len()).rev() {
        e.rollback(if k + 1 == tokens.len() { 2 } else { 1 }).unwrap();
        assert_eq!(snapshot(&mut e), masks[k], "mask after rolling back to token {k}");
    }
    refused_unchanged(
        &mut e,
        |e| e.rollback(1),
        |k| matches!(k, EngineErrorKind::RollbackTooFar { .. }),
    );
}
