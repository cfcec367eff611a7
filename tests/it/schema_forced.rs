//! Fast-forward for schemas: `forced_bytes` reports the bytes every completion starts with and
//! stops where two values are possible or the document may end. Inside a string an escape
//! (`\u006d` for `m`) is always a second *spelling*, but when it spells the same character the
//! value is forced and the plain byte is reported (`{"na` → `me"` for a lone key `name`).

use grammask::schema::{SchemaConstraint, SchemaOptions};
use grammask::Whitespace;
use grammask::{ConstraintEngine, Vocabulary};
use serde_json::json;

fn forced(schema: serde_json::Value, ws: Whitespace, prefix: &str) -> String {
    let vocab = Vocabulary::embedded().unwrap();
    let options = SchemaOptions::default().with_whitespace(ws);
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
    assert_eq!(forced(schema.clone(), Whitespace::Compact, "{\"name\""), ":\"");
    assert_eq!(forced(schema.clone(), Whitespace::Compact, "{"), "\"");
    // With flexible whitespace the byte after the key's closing quote is open.
    let ws = Whitespace::Flexible { max_run: 4 };
    assert_eq!(forced(schema.clone(), ws, "{\"name\""), "");
    // Inside the key the escape `\u006d` spells the same `m`: the value is forced.
    assert_eq!(forced(schema.clone(), Whitespace::Compact, "{\"na"), "me\":\"");
    assert_eq!(forced(schema.clone(), Whitespace::Flexible { max_run: 4 }, "{\"na"), "me\"");
    // Two keys share no prefix at `{"`: nothing is forced there.
    assert_eq!(forced(schema, Whitespace::Compact, "{\""), "");
}

#[test]
fn literals_and_end_of_document() {
    assert_eq!(forced(json!({"const": true}), Whitespace::Compact, ""), "true");
    assert_eq!(forced(json!({"type": "null"}), Whitespace::Compact, ""), "null");
    let schema = json!({"enum": ["alpha", "beta", "gamma"]});
    assert_eq!(forced(schema.clone(), Whitespace::Compact, ""), "\"");
    assert_eq!(forced(schema.clone(), Whitespace::Compact, "\"a"), "lpha\"");
    // `/` may also be spelled `\/`: still one value.
    let slash = json!({"enum": ["a/b"]});
    assert_eq!(forced(slash, Whitespace::Compact, "\"a"), "/b\"");
    // A newline can only be escaped: the backslash is forced, then `\n` and `\u000a` are two
    // spellings of a non-printable character, which are not chosen between.
    let nl = json!({"enum": ["a\nb"]});
    assert_eq!(forced(nl, Whitespace::Compact, "\"a"), "\\");
    // A complete document forces nothing.
    assert_eq!(forced(schema, Whitespace::Compact, "\"beta\""), "");
}
