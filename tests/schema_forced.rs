//! Fast-forward for schemas: `forced_bytes` reports exactly the bytes every completion starts
//! with and stops where two bytes are possible or the document may end. Inside a string an
//! escape (`\u006c` for `l`) is always a second possibility, so exactness forces nothing there;
//! structure (`":"` after a fixed key in compact mode, the tail of a literal) is forced.

use grammask::schema::{SchemaConstraint, SchemaOptions, SchemaWhitespace};
use grammask::{ConstraintEngine, Vocabulary};
use serde_json::json;

fn forced(schema: serde_json::Value, ws: SchemaWhitespace, prefix: &str) -> String {
    let vocab = Vocabulary::embedded().unwrap();
    let options = SchemaOptions { whitespace: ws, ..SchemaOptions::default() };
    let mut e = SchemaConstraint::compile(&schema, &vocab, &options).unwrap();
    e.advance_bytes(prefix.as_bytes()).unwrap();
    let mut out = Vec::new();
    e.forced_bytes(&mut out);
    // Every forced byte is accepted, in order.
    e.advance_bytes(&out).expect("forced bytes are accepted");
    String::from_utf8(out).unwrap()
}

#[test]
fn separator_after_a_fixed_key() {
    let schema = json!({
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"],
        "additionalProperties": false
    });
    assert_eq!(forced(schema.clone(), SchemaWhitespace::Compact, "{\"name\""), ":\"");
    assert_eq!(forced(schema.clone(), SchemaWhitespace::Compact, "{"), "\"");
    // With flexible whitespace the byte after the key's closing quote is open.
    let ws = SchemaWhitespace::Flexible { max_run: 4 };
    assert_eq!(forced(schema.clone(), ws, "{\"name\""), "");
    // Inside the key an escape is always possible: nothing is forced.
    assert_eq!(forced(schema, SchemaWhitespace::Compact, "{\"na"), "");
}

#[test]
fn literals_and_end_of_document() {
    assert_eq!(forced(json!({"const": true}), SchemaWhitespace::Compact, ""), "true");
    assert_eq!(forced(json!({"type": "null"}), SchemaWhitespace::Compact, ""), "null");
    let schema = json!({"enum": ["alpha", "beta", "gamma"]});
    assert_eq!(forced(schema.clone(), SchemaWhitespace::Compact, ""), "\"");
    // A complete document forces nothing.
    assert_eq!(forced(schema, SchemaWhitespace::Compact, "\"beta\""), "");
}
