//! Data-driven conformance of the free-form JSON engine: every case in `tests/data/json/*.json`
//! is walked byte by byte and (when it is valid UTF-8) token by token, and both verdicts must
//! equal the expected one.

use crate::common;

use common::{qwen3, trace, walk};
use grammask::{json::TopLevel, Whitespace};
use grammask::{ConstraintEngine, JsonConfig, JsonObjectConstraint};
use serde_json::Value;

fn config_of(case: &Value) -> JsonConfig {
    let mut c = JsonConfig::default();
    if case.get("top").and_then(Value::as_str) == Some("any") {
        c.top_level = TopLevel::AnyValue;
    }
    if case.get("whitespace").and_then(Value::as_str) == Some("compact") {
        c.whitespace = Whitespace::Compact;
    }
    if let Some(d) = case.get("max_depth").and_then(Value::as_u64) {
        c.max_depth = d as usize;
    }
    c
}

fn input_bytes(case: &Value) -> Vec<u8> {
    if let Some(h) = case.get("hex").and_then(Value::as_str) {
        (0..h.len()).step_by(2).map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap()).collect()
    } else {
        case["input"].as_str().expect("input").as_bytes().to_vec()
    }
}

#[test]
fn rfc8259_cases() {
    let vocab = qwen3();
    let mut failures = Vec::new();
    let mut n = 0;
    for entry in std::fs::read_dir("tests/data/json").unwrap() {
        let path = entry.unwrap().path();
        let doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        for case in doc["cases"].as_array().unwrap() {
            n += 1;
            let name = case["name"].as_str().unwrap();
            let expected = case["valid"].as_bool().unwrap();
            let config = config_of(case);
            let bytes = input_bytes(case);
            // Byte level.
            let mut e = JsonObjectConstraint::new(vocab, &config).unwrap();
            let byte_verdict = e.advance_bytes(&bytes).is_ok() && e.is_accepting();
            if byte_verdict != expected {
                failures.push(format!("{name}: bytes gave {byte_verdict}, expected {expected}"));
            }
            // Token level (only for text inputs).
            if let Ok(text) = std::str::from_utf8(&bytes) {
                let tokens = vocab.encode(text).unwrap();
                let mut e = JsonObjectConstraint::new(vocab, &config).unwrap();
                let (refused, eos) = walk(&mut e, &tokens);
                let verdict = refused.is_none() && eos;
                if verdict != expected {
                    failures.push(format!(
                        "{name}: tokens gave {verdict}, expected {expected}: {}",
                        trace(vocab, &tokens, refused)
                    ));
                }
            }
        }
    }
    assert!(n > 60, "the case files were found");
    assert!(
        failures.is_empty(),
        "{} of {n} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
