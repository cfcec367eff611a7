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
