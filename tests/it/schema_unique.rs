//! `uniqueItems` over string items the runtime decides by counting completions (strings
//! bounded by `maxLength`, patterns with finitely many completions from some state): every
//! byte the recogniser accepts must leave a completion to a valid document, and every byte
//! that does must be accepted. The oracle enumerates every valid document of a small
//! language, every spelling of every item included (`a` or `\u0061`), and answers from the
//! set of their prefixes; it shares no code with the runtime.

use grammask::schema::{CompiledSchema, SchemaConstraint, SchemaOptions};
use grammask::{ConstraintEngine, TokenMask, Vocabulary, Whitespace};
use serde_json::json;
use std::collections::HashSet;

/// The spellings of a string over `a`/`b` as a JSON string token (quotes included).
fn spellings(value: &str) -> Vec<String> {
    let mut out = vec![String::from("\"")];
    for c in value.chars() {
        let escaped = format!("\\u{:04x}", c as u32);
        out = out.iter().flat_map(|p| [format!("{p}{c}"), format!("{p}{escaped}")]).collect();
    }
    out.into_iter().map(|p| p + "\"").collect()
}

/// Every compact document of a `uniqueItems` array of distinct `values`, with `min..=max`
/// items, in every spelling.
fn documents(values: &[&str], min: usize, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    fn go(values: &[&str], used: &mut Vec<usize>, min: usize, max: usize, out: &mut Vec<String>) {
        if used.len() >= min {
            let mut docs = vec![String::from("[")];
            for (k, &i) in used.iter().enumerate() {
                let sep = if k == 0 { "" } else { "," };
                docs = docs
                    .iter()
                    .flat_map(|d| {
                        spellings(values[i]).into_iter().map(move |s| format!("{d}{sep}{s}"))
                    })
                    .collect();
            }
            out.extend(docs.into_iter().map(|d| d + "]"));
        }
        if used.len() == max {
            return;
        }
        for i in 0..values.len() {
            if !used.contains(&i) {
                used.push(i);
                go(values, used, min, max, out);
                used.pop();
            }
        }
    }
    go(values, &mut Vec::new(), min, max, &mut out);
    out
}

/// Every byte of `alphabet` after every prefix of every document: accepted by the
/// recogniser iff the prefix grows into a document.
fn check(schema: serde_json::Value, values: &[&str], min: usize, max: usize) -> usize {
    let opts = SchemaOptions::default().with_whitespace(Whitespace::Compact);
    let compiled = CompiledSchema::compile(&schema, &opts).expect("compiles");
    let vocab = Vocabulary::embedded().expect("embedded vocabulary");
    let docs = documents(values, min, max);
    let mut prefixes: HashSet<&[u8]> = HashSet::new();
    for d in &docs {
        for i in 0..=d.len() {
            prefixes.insert(&d.as_bytes()[..i]);
        }
    }
    let alphabet = b"[],\"ab\\u0612cx7";
    let mut checked = 0;
    for p in &prefixes {
        let mut e = SchemaConstraint::new(compiled.clone(), &vocab);
        e.advance_bytes(p)
            .unwrap_or_else(|i| panic!("{:?} refused at byte {i}", String::from_utf8_lossy(p)));
        for &b in alphabet {
            let mut next = p.to_vec();
            next.push(b);
            let want = prefixes.contains(next.as_slice());
            let mut e2 = SchemaConstraint::new(compiled.clone(), &vocab);
            let got = e2.advance_bytes(&next).is_ok();
            assert_eq!(
                got,
                want,
                "{schema}: after {:?} the byte {:?}",
                String::from_utf8_lossy(p),
                b as char
            );
            checked += 1;
        }
        let complete = docs.iter().any(|d| d.as_bytes() == *p);
        assert_eq!(
            e.is_accepting(),
            complete,
            "{schema}: end after {:?}",
            String::from_utf8_lossy(p)
        );
    }
    checked
}

#[test]
fn a_bounded_pattern_refuses_the_third_item_once_both_letters_are_used() {
    // maxLength 1 over [ab]*: "", "a", "b" — after all three, no fourth item can start.
    let s = json!({"type": "array", "items": {"type": "string", "pattern": "^[ab]*$", "maxLength": 1}, "uniqueItems": true});
    assert!(check(s, &["", "a", "b"], 0, 3) > 1000);
    let s = json!({"type": "array", "items": {"type": "string", "pattern": "^[ab]+$", "maxLength": 1}, "uniqueItems": true});
    assert!(check(s, &["a", "b"], 0, 2) > 100);
}

#[test]
fn longer_items_die_at_the_byte_that_leaves_only_duplicates() {
    let s = json!({"type": "array", "items": {"type": "string", "pattern": "^[ab]*$", "maxLength": 2}, "uniqueItems": true, "maxItems": 3});
    assert!(check(s, &["", "a", "b", "aa", "ab", "ba", "bb"], 0, 3) > 10_000);
    // Required positions: minItems within the supply.
    let s = json!({"type": "array", "items": {"type": "string", "pattern": "^a?b?$", "minLength": 1, "maxLength": 2}, "uniqueItems": true, "minItems": 2});
    check(s, &["a", "b", "ab"], 2, 3);
}

#[test]
fn too_few_values_for_min_items_stay_unsupported() {
    let s = json!({"type": "array", "items": {"type": "string", "pattern": "^[ab]*$", "maxLength": 1}, "uniqueItems": true, "minItems": 4});
    let err = CompiledSchema::compile(&s, &SchemaOptions::default()).unwrap_err();
    assert!(err.to_string().contains("uniqueItems"), "{err}");
    let s = json!({"type": "array", "items": {"type": "string", "pattern": "^[ab]*$", "maxLength": 1}, "uniqueItems": true, "minItems": 3});
    assert!(CompiledSchema::compile(&s, &SchemaOptions::default()).is_ok());
}

/// A real vocabulary: `keywords` with `maxLength`, walked token by token; a duplicate is
/// refused, distinct items pass, and masks equal the per-token oracle (`allows`).
#[test]
fn keywords_with_max_length_walk_token_by_token() {
    let s =
        json!({"type": "array", "items": {"type": "string", "maxLength": 20}, "uniqueItems": true});
    let compiled = CompiledSchema::compile(&s, &SchemaOptions::default()).expect("compiles");
    let vocab = Vocabulary::embedded().expect("embedded vocabulary");
    let mut mask = TokenMask::new(vocab.n_vocab());
    let walk = |doc: &str| -> Result<(), String> {
        let mut e = SchemaConstraint::new(compiled.clone(), &vocab);
        let mut mask = TokenMask::new(vocab.n_vocab());
        for t in vocab.encode(doc).expect("encode") {
            e.fill_mask(&mut mask).expect("mask");
            if !mask.contains(t) {
                return Err(String::from_utf8_lossy(vocab.token_bytes(t)).into_owned());
            }
            e.advance(t).expect("advance");
        }
        Ok(())
    };
    assert!(walk(r#"["rust", "json", "schema", "rusty"]"#).is_ok());
    assert!(walk(r#"["rust", "json", "rust"]"#).is_err());
    assert!(walk(r#"["rust", "json", "\u0072ust"]"#).is_err());
    // After every one-letter item of a two-letter pattern, the mask equals the oracle.
    let s = json!({"type": "array", "items": {"type": "string", "pattern": "^[xy]+$", "maxLength": 2}, "uniqueItems": true});
    let compiled = CompiledSchema::compile(&s, &SchemaOptions::default()).expect("compiles");
    for prefix in
        [r#"["x","y","xx","xy","yx""#, r#"["x","y","xx","xy","yx","y"#, r#"["xx","xy","x"#]
    {
        let mut e = SchemaConstraint::new(compiled.clone(), &vocab);
        e.advance_bytes(prefix.as_bytes()).expect("prefix");
        e.fill_mask(&mut mask).expect("mask");
        for t in 0..vocab.n_vocab() {
            let t = grammask::TokenId::from_index(t);
            assert_eq!(mask.contains(t), e.allows(t), "{prefix} ‧ {}", vocab.describe(t));
        }
    }
    let mut e = SchemaConstraint::new(compiled.clone(), &vocab);
    e.advance_bytes(br#"["x","y","xx","xy","yx","yy""#).expect("all six");
    assert!(e.advance_bytes(b",").is_err(), "no seventh value");
    let mut e = SchemaConstraint::new(compiled, &vocab);
    e.advance_bytes(br#"["xx","xy","x"#).expect("x then y is new");
    assert!(e.advance_bytes(b"x").is_err(), "xx is written");
}
