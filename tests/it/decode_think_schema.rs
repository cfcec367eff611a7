//! A reasoning model answering under a JSON Schema: the think block is unconstrained, the
//! budget forces `</think>` once, and every finished answer validates against the schema with
//! the independent `jsonschema` validator (random-logit model on the embedded Qwen3 tokenizer).

use crate::common;

use grammask::decode::{decode, DecodeConfig, RandomLogits, ThinkConfig, ThinkGate, ThinkMarkers};
use grammask::schema::{SchemaConstraint, SchemaOptions};
use serde_json::json;

#[test]
fn schema_answer_after_a_forced_think_close_validates() {
    let vocab = common::qwen3();
    let markers = ThinkMarkers::from_vocab(vocab).unwrap();
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 12},
            "born": {"type": "integer", "minimum": 1000, "maximum": 2100}
        },
        "required": ["name", "born"],
        "additionalProperties": false
    });
    let validator = jsonschema::validator_for(&schema).unwrap();
    let mut finished = 0;
    for seed in 0..6u64 {
        let engine = SchemaConstraint::compile(&schema, vocab, &SchemaOptions::default()).unwrap();
        let mut gate = ThinkGate::new(Box::new(engine), markers);
        let mut model = RandomLogits::new(vocab, seed);
        let config = DecodeConfig::builder()
            .max_tokens(300)
            .think(ThinkConfig { markers: None, starts_open: true, budget: Some(8) })
            .temperature(0.7)
            .seed(seed)
            .build()
            .unwrap();
        let out = decode(&mut model, vocab, Some(&mut gate), &config).unwrap();
        let trace = common::trace(vocab, &out.tokens, None);
        assert_eq!(out.tokens.iter().filter(|&&t| t == markers.close).count(), 1, "{trace}");
        assert!(out.counters.forced_think_close <= 1);
        if out.finish_reason.as_str() == "stop" {
            finished += 1;
            let answer: serde_json::Value = serde_json::from_str(out.content().trim())
                .unwrap_or_else(|e| panic!("seed {seed}: not JSON ({e}): {trace}"));
            assert!(validator.is_valid(&answer), "seed {seed}: {answer} does not validate");
        }
    }
    assert!(finished >= 3, "most runs finish ({finished}/6)");
}
