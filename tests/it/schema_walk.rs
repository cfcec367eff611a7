//! Hand-written schemas with valid and invalid documents, walked token by token on the
//! embedded tokenizer: a valid document has every token in the mask and EOS allowed at the end;
//! an invalid one is refused somewhere (a token outside the mask, or EOS refused at the end).
//! Cases are data: `tests/data/schema/cases.json` (`[{name, schema, valid: [..], invalid: [..]}]`,
//! documents given as JSON text so that exact spelling — spaces, escapes, exponents — is tested).

use grammask::schema::{SchemaConstraint, SchemaOptions};
use grammask::{ConstraintEngine, TokenMask, Vocabulary};
use std::sync::OnceLock;

fn vocab() -> &'static Vocabulary {
    static V: OnceLock<Vocabulary> = OnceLock::new();
    V.get_or_init(|| Vocabulary::embedded().expect("embedded vocabulary"))
}

/// Walk `doc`; `Ok(())` when accepted to the end with EOS allowed, else a token trace with
/// `‧` between tokens and `✖` at the refusal.
pub fn walk(engine: &mut SchemaConstraint, doc: &str) -> Result<(), String> {
    let v = vocab();
    let mut mask = TokenMask::new(v.n_vocab());
    let mut trace = String::new();
    for t in v.encode(doc).expect("encode") {
        engine.fill_mask(&mut mask).expect("mask");
        let text = String::from_utf8_lossy(v.token_bytes(t)).into_owned();
        let allowed = mask.contains(t);
        assert_eq!(allowed, engine.allows(t), "allows() disagrees with the mask at {trace}‧{text}");
        if !allowed {
            return Err(format!("{trace}‧✖{text}"));
        }
        engine.advance(t).map_err(|e| format!("{trace}‧{text}: advance failed: {e}"))?;
        trace.push('‧');
        trace.push_str(&text);
    }
    engine.fill_mask(&mut mask).expect("mask");
    let eos = v.eos_ids()[0];
    if !mask.contains(eos) || !engine.is_accepting() {
        return Err(format!("{trace}‧✖≺EOS≻"));
    }
    Ok(())
}

#[test]
fn hand_written_cases() {
    let cases: serde_json::Value =
        serde_json::from_str(include_str!("../data/schema/cases.json")).expect("cases.json");
    let mut failures = Vec::new();
    for case in cases.as_array().expect("array") {
        let name = case["name"].as_str().unwrap();
        let opts = SchemaOptions::default();
        let compiled = match grammask::schema::CompiledSchema::compile(&case["schema"], &opts) {
            Ok(c) => c,
            Err(e) => {
                failures.push(format!("{name}: compile error {e}"));
                continue;
            }
        };
        for doc in case["valid"].as_array().unwrap() {
            let doc = doc.as_str().unwrap();
            let mut e = SchemaConstraint::new(compiled.clone(), vocab());
            if let Err(t) = walk(&mut e, doc) {
                failures.push(format!("{name}: valid {doc} refused: {t}"));
            }
        }
        for doc in case["invalid"].as_array().unwrap() {
            let doc = doc.as_str().unwrap();
            let mut e = SchemaConstraint::new(compiled.clone(), vocab());
            if walk(&mut e, doc).is_ok() {
                failures.push(format!("{name}: invalid {doc} accepted"));
            }
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// Unions wider than one 64-bit word of alternatives, built in code: every document is judged
/// by the `jsonschema` crate too, so the expectations are not ours alone.
#[test]
fn wide_unions_are_exact() {
    use serde_json::json;
    // One value served by 81 live alternatives: 9 object branches, each an anyOf of 9.
    let nested: Vec<_> = (0..9)
        .map(|i| {
            let inner: Vec<_> = (0..9)
                .map(|j| {
                    let k = format!("v{i}_{j}");
                    json!({"type": "object", "properties": {k.clone(): {"type": "integer"}},
                           "required": [k], "additionalProperties": false})
                })
                .collect();
            json!({"type": "object", "properties": {"k": {"type": "integer"}, "x": {"anyOf": inner}},
                   "required": ["x"]})
        })
        .collect();
    let enum_objects: Vec<_> =
        (0..100).map(|i| json!({"a": i, "b": [i, format!("x{i}")]})).collect();
    let tagged: Vec<_> = (0..200)
        .map(|i| {
            json!({"type": "object", "additionalProperties": false, "required": ["kind", "v"],
                   "properties": {"kind": {"const": format!("k{i}")},
                                  "v": {"type": "integer", "minimum": i}}})
        })
        .collect();
    let cases = [
        (
            json!({ "anyOf": nested }),
            &[
                r#"{"x": {"v8_8": 1}}"#,
                r#"{"k": 3, "x": {"v0_0": -2}}"#,
                r#"{"x":{"v4_7":0},"k":1}"#,
            ][..],
            &[
                r#"{"x": {"v8_8": 1.5}}"#,
                r#"{"x": {"v9_9": 1}}"#,
                r#"{"x": {}}"#,
                r#"{"x": {"v1_1": 1, "v2_2": 2}}"#,
                r#"{"k": 1}"#,
            ][..],
        ),
        (
            json!({ "enum": enum_objects }),
            &[
                r#"{"a": 77, "b": [77, "x77"]}"#,
                r#"{"a":0,"b":[0,"x0"]}"#,
                r#"{"b": [99, "x99"], "a": 99}"#,
            ][..],
            &[
                r#"{"a": 77, "b": [76, "x77"]}"#,
                r#"{"a": 100, "b": [100, "x100"]}"#,
                r#"{"a": 77}"#,
                r#"{"a": 7, "b": [7, "x7"], "c": 1}"#,
            ][..],
        ),
        (
            json!({ "anyOf": tagged }),
            &[
                r#"{"kind": "k199", "v": 199}"#,
                r#"{"v": 5, "kind": "k0"}"#,
                r#"{"kind": "k57", "v": 1000}"#,
            ][..],
            &[
                r#"{"kind": "k199", "v": 198}"#,
                r#"{"kind": "k200", "v": 1000}"#,
                r#"{"kind": "k5"}"#,
            ][..],
        ),
    ];
    for (schema, valid, invalid) in cases {
        let judge = jsonschema::validator_for(&schema).unwrap();
        let compiled =
            grammask::schema::CompiledSchema::compile(&schema, &SchemaOptions::default()).unwrap();
        for (docs, expect) in [(valid, true), (invalid, false)] {
            for doc in docs {
                let value: serde_json::Value = serde_json::from_str(doc).unwrap();
                assert_eq!(judge.is_valid(&value), expect, "the judge on {doc}");
                let mut e = SchemaConstraint::new(compiled.clone(), vocab());
                assert_eq!(walk(&mut e, doc).is_ok(), expect, "{doc}");
            }
        }
    }
}
