//! The seed's `step_mask(vocab_size) -> &[bool]` view agrees with `fill_mask` on every engine
//! (free-form JSON, regex, GBNF, JSON Schema), twice in a row (the kept scratch is reused), and a
//! wrong width is a typed error.

use crate::common;

use grammask::schema::{SchemaConstraint, SchemaOptions};
use grammask::{
    CfgConfig, CfgConstraint, ConstraintEngine, EngineErrorKind, JsonConfig, JsonObjectConstraint,
    RegexConfig, RegexConstraint, TokenMask,
};

fn check(mut engine: Box<dyn ConstraintEngine>, prefix: &str, name: &str) {
    let vocab = common::qwen3().clone();
    for t in vocab.encode(prefix).unwrap() {
        engine.advance(t).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    let mut mask = TokenMask::new(vocab.n_vocab());
    engine.fill_mask(&mut mask).unwrap();
    for _ in 0..2 {
        let bools = engine.step_mask(vocab.n_vocab()).unwrap().to_vec();
        assert_eq!(TokenMask::from_bools(&bools), mask, "{name}: the view equals fill_mask");
    }
    assert!(mask.count() > 0, "{name}: something is allowed");
    let err = engine.step_mask(vocab.n_vocab() + 1).unwrap_err();
    assert!(matches!(err.kind(), EngineErrorKind::MaskLength { .. }), "{name}: {err}");
}

#[test]
fn every_engine_views_its_mask_as_bools() {
    let vocab = common::qwen3();
    check(
        Box::new(JsonObjectConstraint::new(vocab, &JsonConfig::default()).unwrap()),
        "{\"a\": [1, ",
        "json",
    );
    check(
        Box::new(
            RegexConstraint::new(vocab, "[a-z]+@[a-z]+\\.com", &RegexConfig::default()).unwrap(),
        ),
        "alice@",
        "regex",
    );
    let gbnf = std::fs::read_to_string("grammars/arithmetic.gbnf").unwrap();
    check(
        Box::new(CfgConstraint::from_gbnf(vocab, &gbnf, &CfgConfig::default()).unwrap()),
        "(1 + ",
        "cfg",
    );
    let schema = serde_json::json!({"type": "object", "properties": {"n": {"type": "integer"}}});
    check(
        Box::new(SchemaConstraint::compile(&schema, vocab, &SchemaOptions::default()).unwrap()),
        "{\"n\": 1",
        "schema",
    );
}
