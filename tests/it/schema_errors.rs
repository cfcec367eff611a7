//! Bad input to the schema compiler: every way a schema can be refused is a typed error naming
//! the keyword and its JSON pointer, and `lenient` mode reports what it ignored.

use grammask::schema::{CompiledSchema, SchemaErrorKind, SchemaLimits, SchemaOptions};
use serde_json::json;

fn err(schema: serde_json::Value) -> SchemaErrorKind {
    CompiledSchema::compile(&schema, &SchemaOptions::default())
        .expect_err("the schema must be refused")
        .kind()
        .clone()
}

#[test]
fn malformed_schemas_are_invalid() {
    // Malformed JSON never reaches the compiler (serde refuses it); a non-schema value does.
    assert!(serde_json::from_str::<serde_json::Value>("{\"type\": ").is_err());
    assert!(matches!(err(json!(42)), SchemaErrorKind::Invalid { .. }));
    match err(json!({"type": "object", "properties": {"a": {"minimum": "x"}}})) {
        SchemaErrorKind::Invalid { pointer, message } => {
            assert_eq!(pointer, "/properties/a");
            assert!(message.contains("minimum"), "{message}");
        }
        e => panic!("{e:?}"),
    }
    assert!(matches!(err(json!({"type": "strin"})), SchemaErrorKind::Invalid { .. }));
    assert!(matches!(err(json!({"maxLength": -1})), SchemaErrorKind::Invalid { .. }));
    assert!(matches!(err(json!({"pattern": "(unclosed"})), SchemaErrorKind::Invalid { .. }));
}

#[test]
fn dangling_refs() {
    match err(json!({"properties": {"a": {"$ref": "#/definitions/missing"}}})) {
        SchemaErrorKind::DanglingRef { reference, pointer } => {
            assert_eq!(reference, "#/definitions/missing");
            assert_eq!(pointer, "/properties/a");
        }
        e => panic!("{e:?}"),
    }
    assert!(matches!(err(json!({"$ref": "#nowhere"})), SchemaErrorKind::DanglingRef { .. }));
    // `$dynamicRef` first resolves like `$ref`.
    assert!(matches!(err(json!({"$dynamicRef": "#meta"})), SchemaErrorKind::DanglingRef { .. }));
}

#[test]
fn unsupported_keywords_name_keyword_and_pointer() {
    let cases = [
        (json!({"$ref": "https://example.com/other.json"}), "$ref", ""),
        // Finite item languages: a partial item could be a dead end (every completion a
        // duplicate), which the runtime decides for strings (by their members or by counting
        // completions), not for bounded numbers or integers.
        (
            json!({"properties": {"a": {"type": "array", "items": {"type": "number", "maximum": 3}, "uniqueItems": true}}}),
            "uniqueItems",
            "/properties/a",
        ),
        (
            json!({"type": "array", "items": {"type": "integer"}, "uniqueItems": true}),
            "uniqueItems",
            "",
        ),
        // maxContains needs the items that do not match, i.e. `not` of the contains schema.
        (
            json!({"contains": {"type": "object", "additionalProperties": false}, "maxContains": 2}),
            "maxContains",
            "",
        ),
        (json!({"type": "string", "pattern": "(?=a)b"}), "pattern", ""),
        (json!({"type": "string", "format": "regex"}), "format", ""),
        // "Some undeclared key exists" has no exact form.
        (json!({"not": {"type": "object", "additionalProperties": false}}), "not", ""),
        (
            json!({"oneOf": [{"type": "object", "additionalProperties": false}, {"type": "object", "maxProperties": 2}]}),
            "oneOf",
            "",
        ),
    ];
    for (schema, keyword, pointer) in cases {
        match err(schema.clone()) {
            SchemaErrorKind::Unsupported { keyword: k, pointer: p, .. } => {
                assert_eq!((k.as_str(), p.as_str()), (keyword, pointer), "{schema}");
            }
            e => panic!("{schema}: {e:?}"),
        }
    }
}

#[test]
fn lenient_mode_reports_what_it_ignored() {
    let opts = SchemaOptions::default().with_lenient(true);
    let c = CompiledSchema::compile(
        &json!({"type": "object", "properties": {"a": {"type": "array", "items": {"const": 1}, "uniqueItems": true}}}),
        &opts,
    )
    .unwrap();
    assert_eq!(c.ignored_keywords(), ["uniqueItems at /properties/a"]);
    let strict =
        CompiledSchema::compile(&json!({"type": "object"}), &SchemaOptions::default()).unwrap();
    assert!(strict.ignored_keywords().is_empty());
}

#[test]
fn unsatisfiable_schemas_are_compile_errors() {
    for s in [
        json!(false),
        json!({"type": "integer", "minimum": 5, "maximum": 1}),
        json!({"allOf": [{"type": "string"}, {"type": "number"}]}),
        json!({"type": "object", "required": ["a"], "properties": {"a": false}}),
        json!({"type": "string", "minLength": 3, "maxLength": 2}),
        // The shortest string the pattern accepts is longer than maxLength (counted).
        json!({"type": "string", "pattern": "^[a-z]{5,}$", "maxLength": 4}),
        json!({"type": "string", "format": "date", "maxLength": 9}),
        json!({"type": "integer", "exclusiveMinimum": 1, "exclusiveMaximum": 2}),
        json!({"enum": ["a", "b"], "type": "integer"}),
        json!({"$ref": "#/$defs/n", "$defs": {"n": {"type": "object", "required": ["x"], "properties": {"x": {"$ref": "#/$defs/n"}}}}}),
    ] {
        assert!(matches!(err(s.clone()), SchemaErrorKind::Unsatisfiable { .. }), "{s}");
    }
}

#[test]
fn limits_are_typed_errors() {
    let small =
        SchemaOptions::default().with_limits(SchemaLimits::default().with_max_dfa_states(50));
    let e = CompiledSchema::compile(&json!({"type": "string", "pattern": "^[a-z]{100}$"}), &small)
        .unwrap_err();
    assert!(
        matches!(e.kind(), SchemaErrorKind::Limit { limit: "dfa_states", value: 50, .. }),
        "{e}"
    );
    let small = SchemaOptions::default().with_limits(SchemaLimits::default().with_max_nodes(20));
    let props: serde_json::Map<String, serde_json::Value> =
        (0..50).map(|i| (format!("p{i}"), json!({"type": "integer"}))).collect();
    let e = CompiledSchema::compile(&json!({"type": "object", "properties": props}), &small)
        .unwrap_err();
    assert!(matches!(e.kind(), SchemaErrorKind::Limit { limit: "nodes", .. }), "{e}");
    let alts: Vec<serde_json::Value> =
        (0..300).map(|i| json!({"type": "integer", "minimum": i})).collect();
    let schema = json!({"properties": {"n": {"anyOf": alts}}});
    let e = CompiledSchema::compile(&schema, &SchemaOptions::default()).unwrap_err();
    assert!(matches!(e.kind(), SchemaErrorKind::Limit { limit: "alternatives", .. }), "{e}");
    // Display names the limit and where it was passed.
    assert!(e.to_string().contains("alternatives limit at /properties/n"), "{e}");
    // `$dynamicRef` compiles one copy per dynamic scope: a chain of 20 resources, each
    // reached through two resources that bind a different name, has 2^20 scopes at its end.
    let e = CompiledSchema::compile(&dynamic_blowup(20), &SchemaOptions::default()).unwrap_err();
    assert!(matches!(e.kind(), SchemaErrorKind::Limit { limit: "nodes", .. }), "{e}");
    // The same shape with 3 levels (8 scopes) compiles.
    assert!(CompiledSchema::compile(&dynamic_blowup(3), &SchemaOptions::default()).is_ok());
}

/// Resources `r{i}x{b}` (level `i`, choice `b`) declare `$dynamicAnchor: a{i}` and refer to
/// both choices of the next level; the last resource uses every name.
fn dynamic_blowup(k: usize) -> serde_json::Value {
    let mut defs = serde_json::Map::new();
    for i in 0..k {
        for b in 0..2 {
            defs.insert(
                format!("r{i}x{b}"),
                json!({
                    "$id": format!("r{i}x{b}"),
                    "$defs": {"a": {"$dynamicAnchor": format!("a{i}"), "minimum": b}},
                    "anyOf": [{"$ref": format!("r{}x0", i + 1)}, {"$ref": format!("r{}x1", i + 1)}]
                }),
            );
        }
    }
    let uses: Vec<serde_json::Value> =
        (0..k).map(|i| json!({"$dynamicRef": format!("#a{i}")})).collect();
    let bookends: serde_json::Map<String, serde_json::Value> =
        (0..k).map(|i| (format!("a{i}"), json!({"$dynamicAnchor": format!("a{i}")}))).collect();
    defs.insert(
        format!("r{k}x0"),
        json!({"$id": format!("r{k}x0"), "allOf": uses, "$defs": bookends}),
    );
    defs.insert(format!("r{k}x1"), json!({"$id": format!("r{k}x1"), "type": "integer"}));
    json!({"$id": "https://example.com/blowup", "$ref": "r0x0", "$defs": defs})
}

#[test]
fn remote_refs_resolve_to_preloaded_documents_only() {
    use grammask::schema::SchemaConstraint;
    use grammask::Vocabulary;
    let schema = json!({"type": "object", "properties": {"id": {"$ref": "https://example.com/defs.json#/$defs/id"}}});
    // Not loaded: a typed error, never a fetch.
    match err(schema.clone()) {
        SchemaErrorKind::Unsupported { keyword, pointer, .. } => {
            assert_eq!((keyword.as_str(), pointer.as_str()), ("$ref", "/properties/id"));
        }
        e => panic!("{e:?}"),
    }
    let mut opts = SchemaOptions::default();
    opts.documents.insert(
        "https://example.com/defs.json".into(),
        json!({"$defs": {"id": {"type": "integer", "minimum": 1}}}),
    );
    let vocab = Vocabulary::embedded().unwrap();
    let mut e = SchemaConstraint::compile(&schema, &vocab, &opts).unwrap();
    assert!(e.accepts_bytes(br#"{"id": 3}"#));
    assert!(!e.accepts_bytes(br#"{"id": 0}"#));
    assert!(!e.accepts_bytes(br#"{"id": "x"}"#));
    // A pointer into the document that does not resolve is dangling.
    let bad = json!({"$ref": "https://example.com/defs.json#/$defs/nope"});
    let got = CompiledSchema::compile(&bad, &opts).expect_err("dangling");
    assert!(matches!(got.kind(), SchemaErrorKind::DanglingRef { .. }), "{got}");
}

#[test]
fn custom_metaschema_vocabularies() {
    use grammask::schema::SchemaConstraint;
    use grammask::Vocabulary;
    let meta = |vocab: serde_json::Value| {
        let mut opts = SchemaOptions::default();
        opts.documents.insert(
            "https://example.com/meta".into(),
            json!({"$id": "https://example.com/meta", "$vocabulary": vocab}),
        );
        opts
    };
    let schema = json!({
        "$schema": "https://example.com/meta",
        "type": "object",
        "properties": {"n": {"minimum": 10, "type": "integer"}, "gone": false},
        "required": ["n"]
    });
    let vocab = Vocabulary::embedded().unwrap();
    // Without the validation vocabulary `type`, `minimum` and `required` are annotations;
    // applicators (`properties`, a `false` subschema) still apply.
    let opts = meta(json!({
        "https://json-schema.org/draft/2020-12/vocab/core": true,
        "https://json-schema.org/draft/2020-12/vocab/applicator": true
    }));
    let mut e = SchemaConstraint::compile(&schema, &vocab, &opts).unwrap();
    assert!(e.accepts_bytes(br#"{"n": 1.5}"#));
    assert!(e.accepts_bytes(br#"{}"#));
    assert!(e.accepts_bytes(br#"[1]"#));
    assert!(!e.accepts_bytes(br#"{"gone": 1}"#));
    // With it (and an unknown optional vocabulary) they assert.
    let opts = meta(json!({
        "https://json-schema.org/draft/2020-12/vocab/core": true,
        "https://json-schema.org/draft/2020-12/vocab/validation": true,
        "https://example.com/vocab/custom": false
    }));
    let mut e = SchemaConstraint::compile(&schema, &vocab, &opts).unwrap();
    assert!(e.accepts_bytes(br#"{"n": 10}"#));
    assert!(!e.accepts_bytes(br#"{"n": 1.5}"#));
    assert!(!e.accepts_bytes(br#"{}"#));
    // A required vocabulary we do not know is refused.
    let opts = meta(json!({
        "https://json-schema.org/draft/2020-12/vocab/core": true,
        "https://example.com/vocab/custom": true
    }));
    let got = CompiledSchema::compile(&schema, &opts).expect_err("unknown required vocabulary");
    match got.kind() {
        SchemaErrorKind::Unsupported { keyword, pointer, .. } => {
            assert_eq!((keyword.as_str(), pointer.as_str()), ("$vocabulary", ""));
        }
        e => panic!("{e:?}"),
    }
}

#[test]
fn preloaded_documents_keep_their_own_id() {
    use grammask::schema::SchemaConstraint;
    use grammask::Vocabulary;
    // Registered under one URI, identified inside by another: anchors and dynamic anchors
    // live under the `$id`, and the dynamic scope still enters the document.
    let mut opts = SchemaOptions::default();
    opts.documents.insert(
        "https://example.com/tree-key.json".into(),
        json!({
            "$id": "https://example.com/tree.json",
            "$dynamicAnchor": "node",
            "type": "object",
            "properties": {
                "data": {"$ref": "#int"},
                "children": {"type": "array", "items": {"$dynamicRef": "#node"}}
            },
            "$defs": {"i": {"$anchor": "int", "type": "integer"}}
        }),
    );
    let schema = json!({
        "$id": "https://example.com/strict",
        "$dynamicAnchor": "node",
        "$ref": "https://example.com/tree-key.json",
        "required": ["data"]
    });
    let vocab = Vocabulary::embedded().unwrap();
    let mut e = SchemaConstraint::compile(&schema, &vocab, &opts).unwrap();
    assert!(e.accepts_bytes(br#"{"data": 1, "children": [{"data": 2}]}"#));
    assert!(!e.accepts_bytes(br#"{"data": 1, "children": [{}]}"#));
    assert!(!e.accepts_bytes(br#"{"data": "x"}"#));
    // The document alone: children need no `data`.
    let plain = json!({"$ref": "https://example.com/tree.json"});
    let mut e = SchemaConstraint::compile(&plain, &vocab, &opts).unwrap();
    assert!(e.accepts_bytes(br#"{"children": [{}]}"#));
}

#[test]
fn refusals_say_why() {
    let cases = [
        (json!({"type": "string", "format": "regex"}), "format", "not regular"),
        (
            json!({"allOf": [{"contains": {"const": 1}, "maxContains": 1}, {"contains": {"const": 2}}]}),
            "contains",
            "its own count",
        ),
        (
            json!({"patternProperties": {"^(?!a).+$": {"type": "integer"}}}),
            "patternProperties",
            "look-around",
        ),
    ];
    for (schema, keyword, why) in cases {
        match err(schema.clone()) {
            SchemaErrorKind::Unsupported { keyword: k, reason, .. } => {
                assert_eq!(k, keyword, "{schema}");
                assert!(reason.contains(why), "{schema}: {reason}");
            }
            e => panic!("{schema}: {e:?}"),
        }
    }
}
