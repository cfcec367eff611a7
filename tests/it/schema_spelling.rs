//! The generation profile's spelling restrictions (`SchemaOptions::plain_numbers`,
//! `max_number_digits`, `plain_strings`) walked token by token on the embedded tokenizer:
//! documents that spell values plainly are accepted, the same values spelled otherwise are
//! refused (and accepted again with every spelling), and a schema whose numbers no plain
//! decimal reaches is a compile error naming the keyword and its pointer.

use crate::schema_walk::walk;
use grammask::schema::{CompiledSchema, SchemaConstraint, SchemaErrorKind, SchemaOptions};
use grammask::Vocabulary;
use serde_json::{json, Value};
use std::sync::OnceLock;

fn vocab() -> &'static Vocabulary {
    static V: OnceLock<Vocabulary> = OnceLock::new();
    V.get_or_init(|| Vocabulary::embedded().expect("embedded vocabulary"))
}

fn accepts(schema: &Value, opts: &SchemaOptions, doc: &str) -> Result<(), String> {
    let c = CompiledSchema::compile(schema, opts).expect("compiles");
    walk(&mut SchemaConstraint::new(c, vocab()), doc)
}

fn plain_numbers() -> SchemaOptions {
    SchemaOptions::default().with_plain_numbers(true)
}

#[test]
fn bounded_numbers_are_plain_decimals() {
    let unit = json!({"type": "number", "minimum": 0, "maximum": 1});
    let exact = SchemaOptions::default();
    for doc in ["0.5", "0", "1", "1.0", "-0", "0.000000000000001", "0.123456789012345"] {
        accepts(&unit, &plain_numbers(), doc).unwrap_or_else(|t| panic!("{doc}: {t}"));
    }
    for doc in ["1e-3", "5e-1", "0.0000000000000001", "1.1", "4"] {
        assert!(accepts(&unit, &plain_numbers(), doc).is_err(), "{doc} under plain_numbers");
    }
    for doc in ["1e-3", "5e-1", "0.0000000000000001"] {
        accepts(&unit, &exact, doc).unwrap_or_else(|t| panic!("{doc} with every spelling: {t}"));
    }
    // Integers are spelled as plain integers, within the digit cap too.
    let int = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
    assert!(accepts(&int, &plain_numbers(), r#"{"n": 123456789012345}"#).is_ok());
    assert!(accepts(&int, &plain_numbers(), r#"{"n": 1234567890123456}"#).is_err());
    assert!(accepts(&int, &plain_numbers(), r#"{"n": 1.0}"#).is_err());
    assert!(accepts(&int, &exact, r#"{"n": 1.0}"#).is_ok());
    // A spelling restriction at every depth and inside `not`.
    let not = json!({"type": "array", "items": {"not": {"type": "number", "maximum": 0}}});
    assert!(accepts(&not, &plain_numbers(), "[0.5, 2, \"x\"]").is_ok());
    assert!(accepts(&not, &plain_numbers(), "[2e0]").is_err());
    // A wider cap takes more digits.
    let wide = plain_numbers().with_max_number_digits(20);
    assert!(accepts(&int, &wide, r#"{"n": 12345678901234567890}"#).is_ok());
}

#[test]
fn numbers_no_plain_decimal_reaches_are_a_compile_error() {
    let cases = [
        (json!({"type": "number", "minimum": 1e300}), "minimum", ""),
        (
            json!({"type": "object", "properties": {"x": {"type": "number", "exclusiveMinimum": 0, "maximum": 1e-20}}, "required": ["x"]}),
            "maximum",
            "/properties/x",
        ),
        (serde_json::from_str(r#"{"const": 1e400}"#).unwrap(), "const", ""),
        (json!({"type": "integer", "maximum": -1e16}), "maximum", ""),
    ];
    for (schema, kw, ptr) in cases {
        let e = CompiledSchema::compile(&schema, &plain_numbers()).unwrap_err();
        match e.kind() {
            SchemaErrorKind::Unsatisfiable { pointer, reason } => {
                assert_eq!(pointer, ptr, "{schema}");
                assert!(reason.contains(&format!("`{kw}`")), "{schema}: {reason}");
                assert!(reason.contains("plain_numbers"), "{reason}");
            }
            k => panic!("{schema}: {k:?}"),
        }
        assert!(CompiledSchema::compile(&schema, &SchemaOptions::default()).is_ok(), "{schema}");
    }
    // One unreachable alternative among others is dropped, not an error.
    let either = json!({"anyOf": [{"type": "number", "minimum": 1e300}, {"type": "string"}]});
    assert!(accepts(&either, &plain_numbers(), r#""x""#).is_ok());
    assert!(accepts(&either, &plain_numbers(), "1").is_err());
    // A schema empty by its values keeps the plain error out of it.
    let empty = json!({"type": "number", "minimum": 2, "maximum": 1});
    let e = CompiledSchema::compile(&empty, &plain_numbers()).unwrap_err();
    assert!(!e.to_string().contains("plain_numbers"), "{e}");
}

#[test]
fn plain_strings_escape_only_what_must_be() {
    let opts = SchemaOptions::default().with_plain_strings(true);
    let exact = SchemaOptions::default();
    let s = json!({"type": "string"});
    for doc in [r#""A""#, r#""\n""#, r#""\u0001""#, r#""\u001f\t\"\\""#, "\"é\"", "\"日本\""] {
        accepts(&s, &opts, doc).unwrap_or_else(|t| panic!("{doc}: {t}"));
    }
    for doc in [r#""\u0041""#, r#""\u00e9""#, r#""\/""#, r#""\ud83d\ude00""#, r#""\u0020""#] {
        assert!(accepts(&s, &opts, doc).is_err(), "{doc} under plain_strings");
        accepts(&s, &exact, doc).unwrap_or_else(|t| panic!("{doc} with every spelling: {t}"));
    }
    // Keys too, and strings under automata, lengths and enums.
    let obj = json!({"type": "object", "additionalProperties": {"type": "string", "maxLength": 3}});
    assert!(accepts(&obj, &opts, r#"{"a\n": "x\ty"}"#).is_ok());
    assert!(accepts(&obj, &opts, r#"{"\u0061": "x"}"#).is_err());
    assert!(accepts(&obj, &opts, r#"{"a": "\u0078"}"#).is_err());
    let pat = json!({"type": "string", "pattern": "^[a-z/]+$"});
    assert!(accepts(&pat, &opts, r#""a/b""#).is_ok());
    assert!(accepts(&pat, &opts, r#""a\/b""#).is_err());
    assert!(accepts(&pat, &exact, r#""a\/b""#).is_ok());
}
