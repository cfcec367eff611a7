//! A few MaskBench schemas (copied from `maskbench-dev`): each instance serialised as Python's
//! `json.dumps` does (separators `", "` and `": "`) and walked token by token; valid instances
//! walk through with EOS allowed, invalid ones are refused somewhere.

use grammask::schema::{CompiledSchema, SchemaConstraint, SchemaOptions};
use grammask::{ConstraintEngine, TokenMask, Vocabulary};

/// `json.dumps(v, ensure_ascii=False)`.
fn dumps(v: &serde_json::Value, out: &mut String) {
    match v {
        serde_json::Value::Object(m) => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&serde_json::to_string(k).unwrap());
                out.push_str(": ");
                dumps(x, out);
            }
            out.push('}');
        }
        serde_json::Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                dumps(x, out);
            }
            out.push(']');
        }
        _ => out.push_str(&serde_json::to_string(v).unwrap()),
    }
}

/// Does the engine accept `doc` token by token (mask checked at every step) and allow EOS?
fn walks(engine: &mut SchemaConstraint, vocab: &Vocabulary, doc: &str) -> bool {
    let mut mask = TokenMask::new(vocab.n_vocab());
    for t in vocab.encode(doc).unwrap() {
        engine.fill_mask(&mut mask).unwrap();
        if !mask.contains(t) {
            assert!(engine.advance(t).is_err(), "advance must refuse what the mask refuses");
            return false;
        }
        engine.advance(t).unwrap();
    }
    engine.fill_mask(&mut mask).unwrap();
    mask.contains(vocab.eos_ids()[0])
}

#[test]
fn maskbench_samples() {
    let vocab = Vocabulary::embedded().unwrap();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/schema/maskbench");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let d: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let compiled = CompiledSchema::compile(&d["schema"], &SchemaOptions::default())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for t in d["tests"].as_array().unwrap() {
            let mut doc = String::new();
            dumps(&t["data"], &mut doc);
            let mut e = SchemaConstraint::new(compiled.clone(), &vocab);
            let valid = t["valid"].as_bool().unwrap();
            assert_eq!(walks(&mut e, &vocab, &doc), valid, "{}: {doc}", path.display());
            n += 1;
        }
    }
    assert!(n >= 10, "only {n} instances");
}
