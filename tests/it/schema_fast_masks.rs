//! The schema engine's fast string masks (`src/schema/runtime/fast.rs`) against the plain walk
//! of the whole trie with the general recogniser (`fill_mask_reference`): at every step of
//! every document, on hand-written schemas aimed at each fast path and on the MaskBench
//! samples in `tests/data/maskbench`, the two masks must be identical.

use grammask::harness::{maskbench::load_file, pyjson::dumps, walk::tokenize};
use grammask::schema::{CompiledSchema, SchemaConstraint, SchemaOptions};
use grammask::{ConstraintEngine, TokenMask, Vocabulary};
use serde_json::Value;
use std::sync::Arc;

/// Walks `doc` as far as the engine accepts it, comparing the two masks before every token and
/// at the end. Returns the number of masks compared.
fn compare(vocab: &Vocabulary, schema: &Arc<CompiledSchema>, doc: &str, what: &str) -> usize {
    compare_tokens(vocab, schema, &tokenize(vocab, doc).unwrap(), what)
}

#[test]
fn fast_masks_equal_the_plain_walk_on_targeted_schemas() {
    let vocab = Vocabulary::embedded().unwrap();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/schema/fast_masks.json");
    let cases: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut n = 0;
    for case in cases.as_array().unwrap() {
        let schema = CompiledSchema::compile(&case["schema"], &options(case)).unwrap();
        for doc in case["docs"].as_array().unwrap() {
            n += compare(&vocab, &schema, doc.as_str().unwrap(), &case["schema"].to_string());
        }
    }
    assert!(n > 300, "only {n} masks compared");
}

/// A case's `"options"`: `{"plain_integers": true, "literal_keys": true,
/// "literal_values": true, "plain_numbers": true, "plain_strings": true}` (the others
/// default).
fn options(case: &Value) -> SchemaOptions {
    let flag = |name: &str| case["options"][name].as_bool().unwrap_or(false);
    SchemaOptions::default()
        .with_plain_integers(flag("plain_integers"))
        .with_literal_keys(flag("literal_keys"))
        .with_literal_values(flag("literal_values"))
        .with_plain_numbers(flag("plain_numbers"))
        .with_plain_strings(flag("plain_strings"))
}

#[test]
fn fast_masks_equal_the_plain_walk_on_maskbench_samples() {
    let vocab = Vocabulary::embedded().unwrap();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/maskbench");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let (schema, tests) = load_file(&path).unwrap();
        let Ok(schema) = CompiledSchema::compile(&schema, &SchemaOptions::default()) else {
            continue;
        };
        for (_, _, data) in tests {
            n += compare(&vocab, &schema, &dumps(&data), &path.display().to_string());
        }
    }
    assert!(n > 500, "only {n} masks compared");
}

/// A vocabulary made of every byte plus every 2–8-byte substring of the documents, so tokens
/// cross every boundary the fast paths treat specially (`1,"a`, `":{"`, `"},"b`, `\"x`…),
/// which real vocabularies rarely have. Each document is cut into tokens several ways
/// (longest match, and pseudo-random lengths) and every mask is compared with the walk.
#[test]
fn fast_masks_equal_the_plain_walk_on_a_substring_vocabulary() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/schema/fast_masks.json");
    let cases: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut docs: Vec<String> = Vec::new();
    for case in cases.as_array().unwrap() {
        docs.extend(case["docs"].as_array().unwrap().iter().map(|d| d.as_str().unwrap().into()));
    }
    let mut pieces: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for d in &docs {
        let b = d.as_bytes();
        for len in 2..=8 {
            for w in b.windows(len) {
                pieces.push(w.to_vec());
            }
        }
    }
    pieces.sort();
    pieces.dedup();
    let eos = pieces.len() as u32;
    let mut tokens: Vec<Option<&[u8]>> = pieces.iter().map(|p| Some(p.as_slice())).collect();
    tokens.push(None);
    let vocab = Vocabulary::from_token_bytes(&tokens, &[eos], None).unwrap();
    let ids: std::collections::HashMap<&[u8], u32> =
        pieces.iter().enumerate().map(|(i, p)| (p.as_slice(), i as u32)).collect();
    let mut n = 0;
    let mut seed = 0x9e37_79b9_u64;
    for case in cases.as_array().unwrap() {
        let schema = CompiledSchema::compile(&case["schema"], &options(case)).unwrap();
        for doc in case["docs"].as_array().unwrap() {
            let text = doc.as_str().unwrap().as_bytes();
            for cut in 0..6 {
                let mut toks = Vec::new();
                let mut i = 0;
                while i < text.len() {
                    let longest = (1..=8.min(text.len() - i))
                        .rev()
                        .find(|&l| ids.contains_key(&text[i..i + l]))
                        .unwrap();
                    let l = if cut == 0 {
                        longest
                    } else {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        1 + (seed % longest as u64) as usize
                    };
                    toks.push(grammask::TokenId::from_index(ids[&text[i..i + l]] as usize));
                    i += l;
                }
                n += compare_tokens(&vocab, &schema, &toks, &case["schema"].to_string());
            }
        }
    }
    assert!(n > 800, "only {n} masks compared");
}

/// Walks `tokens` as far as the engine accepts them, comparing the two masks before every
/// token and at the end (EOS). Returns the number of masks compared.
fn compare_tokens(
    vocab: &Vocabulary,
    schema: &Arc<CompiledSchema>,
    tokens: &[grammask::TokenId],
    what: &str,
) -> usize {
    let mut fast = SchemaConstraint::new(schema.clone(), vocab);
    let mut slow = SchemaConstraint::new(schema.clone(), vocab);
    let mut a = TokenMask::new(vocab.n_vocab());
    let mut b = TokenMask::new(vocab.n_vocab());
    let mut n = 0;
    for (i, &t) in tokens.iter().chain(std::iter::once(&vocab.eos_ids()[0])).enumerate() {
        fast.fill_mask(&mut a).unwrap();
        slow.fill_mask_reference(&mut b).unwrap();
        n += 1;
        if a != b {
            let extra: Vec<String> =
                a.iter().filter(|&x| !b.contains(x)).take(8).map(|x| vocab.describe(x)).collect();
            let missing: Vec<String> =
                b.iter().filter(|&x| !a.contains(x)).take(8).map(|x| vocab.describe(x)).collect();
            panic!(
                "{what}: masks differ before token {i} ({}): fast allows {extra:?} the walk \
                 refuses; fast refuses {missing:?} the walk allows",
                fast.context()
            );
        }
        if i == tokens.len() || fast.advance(t).is_err() {
            return n;
        }
        slow.advance(t).unwrap();
    }
    n
}
