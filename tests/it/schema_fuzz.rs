//! Schema-conformance fuzzing and the naive-oracle property test.
//!
//! Random-logit decoding under several schemas with many seeds: every finished output must
//! validate with an independent validator (the `jsonschema` crate, formats asserted), and
//! generation must always finish (sampling is biased toward closing tokens as the output grows,
//! so a dead end — a state with an empty mask — or an endless loop fails the test). At sampled
//! states the mask is compared with the oracle: the set of tokens whose bytes the runtime
//! accepts from a copy of the state ([`ConstraintEngine::allows`]), which shares no code with
//! the trie walk, the string slice or the mask cache.

use grammask::schema::{CompiledSchema, PropertyOrder, SchemaConstraint, SchemaOptions};
use grammask::{ConstraintEngine, TokenId, TokenMask, Vocabulary, Whitespace};
use serde_json::json;
use std::sync::Arc;

/// xorshift64*: deterministic, dependency-free.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn schemas() -> Vec<serde_json::Value> {
    vec![
        json!({"type": "object", "properties": {"name": {"type": "string", "maxLength": 8}, "age": {"type": "integer", "minimum": 0, "maximum": 120}, "tags": {"type": "array", "items": {"enum": ["a", "b", 3]}, "maxItems": 3}}, "required": ["name", "age"], "additionalProperties": false}),
        json!({"anyOf": [{"type": "object", "properties": {"t": {"const": "x"}, "v": {"type": "number", "exclusiveMinimum": 0.5, "maximum": 2}}, "required": ["t", "v"], "additionalProperties": false}, {"type": "array", "prefixItems": [{"type": "boolean"}, {"type": "null"}], "items": false, "minItems": 1}]}),
        json!({"type": "object", "patternProperties": {"^k[0-9]$": {"type": "string", "pattern": "^[a-c]+$", "minLength": 2}}, "additionalProperties": false, "minProperties": 1, "maxProperties": 3}),
        json!({"$defs": {"t": {"type": "object", "properties": {"v": {"type": "integer", "multipleOf": 3}, "c": {"type": "array", "items": {"$ref": "#/$defs/t"}, "maxItems": 2}}, "required": ["v"], "additionalProperties": false}}, "$ref": "#/$defs/t"}),
        json!({"type": "object", "properties": {"when": {"type": "string", "format": "date"}, "ip": {"type": "string", "format": "ipv4"}, "kind": {"type": "string"}}, "oneOf": [{"required": ["when"]}, {"required": ["ip"]}], "dependentRequired": {"kind": ["when"]}, "additionalProperties": false}),
        json!({"type": "object", "properties": {"k": {"type": "string", "enum": ["num", "str"]}, "v": {}}, "required": ["k", "v"], "additionalProperties": false, "if": {"properties": {"k": {"const": "num"}}}, "then": {"properties": {"v": {"type": "integer", "minimum": -5, "maximum": 5}}}, "else": {"properties": {"v": {"type": "string", "maxLength": 3}}}, "not": {"properties": {"v": {"const": 0}}}}),
        json!({"type": "array", "items": {"type": "number", "minimum": -1.5, "maximum": 1e3}, "minItems": 2, "maxItems": 4}),
        json!({"type": "array", "items": {"not": {"type": "integer"}, "minimum": -3, "maximum": 7.5}, "maxItems": 4}),
        json!({"oneOf": [{"type": "integer"}, {"minimum": 2}]}),
        json!({"type": "array", "not": {"items": {"type": "string"}}, "maxItems": 4}),
        json!({"type": "object", "properties": {"a": {"type": "integer"}}, "allOf": [{"properties": {"b": {"type": "string"}}}], "oneOf": [{"required": ["c"], "properties": {"c": {"const": 1}}}, {"required": ["d"], "properties": {"d": {"type": "boolean"}}}], "unevaluatedProperties": false}),
        json!({"type": "array", "prefixItems": [{"type": "integer"}], "allOf": [{"prefixItems": [true, {"type": "string"}]}], "contains": {"type": "null"}, "minContains": 0, "unevaluatedItems": {"type": "boolean"}, "maxItems": 5}),
        json!({"type": "object", "if": {"properties": {"k": {"const": "x"}}, "required": ["k"]}, "then": {"properties": {"v": {"type": "integer"}}}, "else": {"properties": {"w": {"type": "string"}}}, "unevaluatedProperties": {"type": "null"}, "maxProperties": 3}),
        json!({"not": {"enum": [{"a": 1}, {"b": [true]}, [null, 2], "x"]}, "maxProperties": 2, "maxItems": 3}),
        json!({"type": "array", "not": {"anyOf": [{"maxItems": 1}, {"contains": {"type": "null"}}]}, "maxItems": 4}),
        json!({"type": "object", "not": {"minProperties": 2}}),
        json!({"type": "array", "prefixItems": [{"type": "boolean"}, {"type": ["boolean", "null"]}, {"type": "boolean"}], "items": {"type": "boolean"}, "uniqueItems": true}),
        json!({"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "boolean"}, {"type": "null"}]}, "uniqueItems": true, "minItems": 2, "maxItems": 6}),
        json!({"type": "array", "prefixItems": [{"type": "integer"}], "items": {"type": ["string", "integer"]}, "contains": {"type": "string", "pattern": "^b"}, "minContains": 2, "maxContains": 3, "maxItems": 6}),
        json!({"type": "array", "items": {"type": ["number", "object", "array"]}, "uniqueItems": true, "contains": {"type": "object"}, "maxContains": 1, "minItems": 3, "maxItems": 5}),
        // `uniqueItems` over finite string languages, decided member by member: members that
        // are prefixes of others, escapes, non-ASCII, an exhausted supply.
        json!({"type": "array", "items": {"enum": ["a", "ab", "abc", "b", "é", "x\"y"]}, "uniqueItems": true}),
        json!({"type": "array", "items": {"type": "string", "enum": ["red", "green", "blue"]}, "uniqueItems": true, "minItems": 3}),
        json!({"type": "array", "items": {"anyOf": [{"enum": ["on", "off"]}, {"type": "boolean"}, {"type": "string", "pattern": "^[xy]{1,2}$"}]}, "uniqueItems": true, "minItems": 2, "maxItems": 8}),
        // `uniqueItems` over strings bounded by `maxLength`, decided by counting completions:
        // few values (two letters, at most two of them), so duplicates are near at every step.
        json!({"type": "array", "items": {"type": "string", "pattern": "^[xy]*$", "maxLength": 2}, "uniqueItems": true, "maxItems": 9}),
        json!({"type": "array", "items": {"anyOf": [{"type": "string", "maxLength": 1, "pattern": "^[a-c]*$"}, {"type": "null"}]}, "uniqueItems": true, "minItems": 2}),
        json!({"type": "object", "properties": {"opts": {"type": "array", "items": {"enum": ["TestAssemblies"]}, "uniqueItems": true}, "cats": {"type": "array", "items": {"anyOf": [{"type": "string", "minLength": 1}, {"enum": ["ajax", "build"]}]}, "uniqueItems": true, "maxItems": 3}}, "required": ["opts", "cats"], "additionalProperties": false}),
        // `maxLength` counted beside a pattern/format automaton: the shortest completion
        // must still fit, or the mask would lead into a dead end.
        // An enum's numbers as one set alternative (with exponents, fractions, negatives),
        // merged with bounds; negated key rules over finite key languages; a hostname.
        json!({"type": "array", "items": {"enum": [0, 7, 15, 150, 1500, -2.5, 0.125, 1e-3, 2_000_000_000u64, "x"], "maximum": 1000}, "maxItems": 5}),
        json!({"type": "object", "properties": {"h": {"type": "string", "format": "hostname"}}, "patternProperties": {"^[a-d]$": {"type": "integer"}}, "not": {"anyOf": [{"propertyNames": {"not": {"enum": ["a", "b"]}}}, {"patternProperties": {"^[cd]$": {"maximum": 3}}}]}, "maxProperties": 4}),
        json!({"type": "object", "properties": {"e": {"type": "string", "format": "email", "maxLength": 12}, "p": {"type": "string", "pattern": "^[a-z]+-[0-9]{2,}$", "minLength": 5, "maxLength": 7}, "u": {"type": "string", "pattern": "é[a-z]*é", "maxLength": 5}}, "required": ["e", "p", "u"], "additionalProperties": false}),
    ]
}

fn check_oracle(engine: &SchemaConstraint, mask: &TokenMask, vocab: &Vocabulary, rng: &mut Rng) {
    for t in mask.iter() {
        assert!(engine.allows(t), "mask allows {} but the oracle refuses it", vocab.describe(t));
    }
    for _ in 0..1500 {
        let t = TokenId::from_index(rng.below(vocab.n_vocab()));
        assert_eq!(
            mask.contains(t),
            engine.allows(t),
            "mask and oracle disagree on {}",
            vocab.describe(t)
        );
    }
}

fn decode(compiled: &Arc<CompiledSchema>, vocab: &Vocabulary, seed: u64, oracle: bool) -> String {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut e = SchemaConstraint::new(compiled.clone(), vocab);
    let mut mask = TokenMask::new(vocab.n_vocab());
    let mut out = Vec::new();
    let closers: Vec<TokenId> =
        ["\"", "}", "]"].iter().map(|c| vocab.encode(c).unwrap()[0]).collect();
    for step in 0..600 {
        e.fill_mask(&mut mask).unwrap();
        let allowed: Vec<TokenId> = mask.iter().collect();
        assert!(!allowed.is_empty(), "dead end after {:?}", String::from_utf8_lossy(&out));
        if oracle && step % 7 == 3 {
            check_oracle(&e, &mask, vocab, &mut rng);
        }
        let eos = vocab.eos_ids()[0];
        let bias = (step as u64).min(100);
        let t = if mask.contains(eos) && (rng.below(100) as u64) < 10 + bias {
            eos
        } else if (rng.below(100) as u64) < bias {
            // Close something: one of the single-byte closers the mask allows, at random.
            let close: Vec<TokenId> =
                closers.iter().copied().filter(|&t| mask.contains(t)).collect();
            if close.is_empty() {
                allowed[rng.below(allowed.len())]
            } else {
                close[rng.below(close.len())]
            }
        } else {
            allowed[rng.below(allowed.len())]
        };
        e.advance(t).unwrap();
        if e.is_finished() {
            return String::from_utf8(out).expect("UTF-8 output");
        }
        out.extend_from_slice(vocab.token_bytes(t));
    }
    panic!("generation did not finish: {:?}", String::from_utf8_lossy(&out));
}

/// Numbers beyond 2^53 in magnitude: the validator's f64 arithmetic is not exact there.
fn imprecise(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Number(n) => n.as_f64().is_none_or(|x| x.abs() >= 9.0e15),
        serde_json::Value::Array(a) => a.iter().any(imprecise),
        serde_json::Value::Object(m) => m.values().any(imprecise),
        _ => false,
    }
}

fn huge_exponent(text: &str) -> bool {
    let b = text.as_bytes();
    (0..b.len()).any(|i| {
        matches!(b[i], b'e' | b'E')
            && i > 0
            && b[i - 1].is_ascii_digit()
            && b[i + 1..]
                .iter()
                .skip_while(|c| matches!(c, b'+' | b'-'))
                .take_while(|c| c.is_ascii_digit())
                .count()
                >= 3
    })
}

/// The validator reads numbers as f64: past ~15 significant digits its `multipleOf` and bound
/// checks are approximate where ours are exact.
fn long_digit_run(text: &str) -> bool {
    let mut run = 0;
    for b in text.bytes() {
        if b.is_ascii_digit() {
            run += 1;
            if run >= 15 {
                return true;
            }
        } else if b != b'.' {
            run = 0;
        }
    }
    false
}

#[test]
fn random_decoding_always_validates() {
    let vocab = Vocabulary::embedded().unwrap();
    let options = [
        SchemaOptions::default(),
        SchemaOptions::default()
            .with_whitespace(Whitespace::Compact)
            .with_property_order(PropertyOrder::Schema),
        SchemaOptions::default()
            .with_whitespace(Whitespace::Separators { item: ", ".into(), key: ": ".into() }),
    ];
    let mut judged = 0;
    for (si, schema) in schemas().iter().enumerate() {
        let validator = jsonschema::options().should_validate_formats(true).build(schema).unwrap();
        for (oi, opts) in options.iter().enumerate() {
            let compiled = CompiledSchema::compile(schema, opts).unwrap();
            for seed in 0..8u64 {
                let text =
                    decode(&compiled, &vocab, seed * 31 + si as u64 * 7 + oi as u64, seed < 2);
                // Exact decimals beyond f64 (`1e400`, 20-digit mantissas) are valid JSON that
                // the validator cannot judge: skip those outputs.
                if long_digit_run(&text) || huge_exponent(&text) {
                    continue;
                }
                let value: serde_json::Value = serde_json::from_str(&text)
                    .unwrap_or_else(|e| panic!("schema {si}: output is not JSON ({e}): {text}"));
                if imprecise(&value) {
                    continue;
                }
                assert!(
                    validator.is_valid(&value),
                    "schema {si} options {oi}: invalid output {text}"
                );
                judged += 1;
            }
        }
    }
    assert!(judged >= 100, "only {judged} outputs judged");
}
