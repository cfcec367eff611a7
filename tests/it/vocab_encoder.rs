//! The vocabulary cache's own BPE encoder (`vocab/bpe.rs`) against `tokenizers` on generated
//! tokenizers: the cases real tokenizers rarely reach. `vocab_cache.rs` checks the real ones
//! on real text; here each of many small BPE models is made at random — merges over a few
//! characters, some repeated (the last one counts, as in `tokenizers`' merge map), some making
//! a token another pair already makes, whole words no merge makes, `ignore_merges` on or off,
//! the byte-level pre-tokenizer with and without its regex, an added token that is plain text,
//! and SentencePiece-style models whose missing characters fall back to `<0xXX>` tokens where
//! all their bytes have one and to the unknown token (fused or not) where not — and random
//! texts over those characters must encode to the same ids through the encoder stored with a
//! cached vocabulary and through `tokenizers`.

use grammask::vocab::{VocabCache, VocabConfig};
use grammask::Vocabulary;
use serde_json::{json, Value};
use std::path::PathBuf;

/// GPT-2's byte → char map (what the byte-level pre-tokenizer writes).
fn byte_char(b: u8) -> char {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    if printable(b) {
        return char::from(b);
    }
    let n = (0..b).filter(|&x| !printable(x)).count() as u32;
    char::from_u32(256 + n).unwrap()
}

/// A xorshift generator: the cases are the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// The characters texts are made of: letters, a space, a newline and a two-byte character.
const TEXT_CHARS: &[char] = &['a', 'b', 'c', ' ', '\n', 'é'];

/// Random merges over `base` (vocabulary strings), added to `vocab` with the ids that follow.
fn merges(rng: &mut Rng, base: &[String], vocab: &mut Vec<String>) -> Vec<Value> {
    let mut pieces: Vec<String> = base.to_vec();
    let mut out: Vec<Value> = Vec::new();
    for _ in 0..rng.below(40) {
        if !out.is_empty() && rng.chance(10) {
            // The same pair again, later: its rank is the later one.
            let again = out[rng.below(out.len())].clone();
            out.push(again);
            continue;
        }
        let a = pieces[rng.below(pieces.len())].clone();
        let b = pieces[rng.below(pieces.len())].clone();
        let joined = format!("{a}{b}");
        if !vocab.contains(&joined) {
            vocab.push(joined.clone());
        }
        if !pieces.contains(&joined) {
            pieces.push(joined);
        }
        out.push(json!([a, b]));
    }
    out
}

/// A random byte-level BPE tokenizer, as `tokenizer.json`.
fn byte_level(rng: &mut Rng) -> Value {
    let mut vocab: Vec<String> = (0..=255u8).map(|b| byte_char(b).to_string()).collect();
    let base: Vec<String> = TEXT_CHARS
        .iter()
        .flat_map(|c| c.to_string().into_bytes())
        .map(|b| byte_char(b).to_string())
        .collect();
    let merges = merges(rng, &base, &mut vocab);
    // Whole words no merge makes: only `ignore_merges` finds them.
    for _ in 0..rng.below(6) {
        let word: String =
            (0..2 + rng.below(3)).map(|_| base[rng.below(base.len())].as_str()).collect();
        if !vocab.contains(&word) {
            vocab.push(word);
        }
    }
    let n = vocab.len();
    let mut added = vec![json!({"id": n, "content": "<|end|>", "single_word": false,
        "lstrip": false, "rstrip": false, "normalized": false, "special": true})];
    if rng.chance(30) {
        added.push(json!({"id": n + 1, "content": "cab", "single_word": false, "lstrip": false,
            "rstrip": false, "normalized": false, "special": false}));
    }
    let vocab: serde_json::Map<String, Value> =
        vocab.into_iter().enumerate().map(|(i, s)| (s, json!(i))).collect();
    json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
            "use_regex": rng.chance(50)},
        "post_processor": null,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true,
            "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null,
            "continuing_subword_prefix": null, "end_of_word_suffix": null, "fuse_unk": false,
            "byte_fallback": false, "ignore_merges": rng.chance(50), "vocab": vocab,
            "merges": merges}
    })
}

/// A random SentencePiece-style BPE tokenizer (`▁` for spaces, `<0xXX>` byte fallback for
/// some bytes only, an unknown token), as `tokenizer.json`.
fn sentencepiece(rng: &mut Rng) -> Value {
    let mut vocab: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    // `<0x0A>` (the newline) and each byte of `é` (C3 A9), each present or not.
    for b in [0x0Au8, 0xC3, 0xA9] {
        if rng.chance(60) {
            vocab.push(format!("<0x{b:02X}>"));
        }
    }
    let base: Vec<String> = ["a", "b", "c", "▁"].iter().map(|s| s.to_string()).collect();
    vocab.extend(base.iter().cloned());
    let merges = merges(rng, &base, &mut vocab);
    let vocab: serde_json::Map<String, Value> =
        vocab.into_iter().enumerate().map(|(i, s)| (s, json!(i))).collect();
    json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [
            {"id": 0, "content": "<unk>", "single_word": false, "lstrip": false, "rstrip": false,
             "normalized": false, "special": true},
            {"id": 1, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false,
             "normalized": false, "special": true},
            {"id": 2, "content": "</s>", "single_word": false, "lstrip": false, "rstrip": false,
             "normalized": false, "special": true}],
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
        "pre_tokenizer": null,
        "post_processor": null,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}]},
        "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>",
            "continuing_subword_prefix": null, "end_of_word_suffix": null,
            "fuse_unk": rng.chance(50), "byte_fallback": rng.chance(70), "ignore_merges": false,
            "vocab": vocab, "merges": merges}
    })
}

#[test]
fn generated_tokenizers_encode_as_tokenizers_does() {
    let dir = std::env::temp_dir().join(format!("grammask-vencoder-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config = VocabConfig::default().with_cache(VocabCache::Dir(dir.join("cache")));
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let (mut checked, mut unknown) = (0, 0);
    for case in 0..160 {
        let spec = if case % 2 == 0 { byte_level(&mut rng) } else { sentencepiece(&mut rng) };
        let path: PathBuf = dir.join(format!("t{case}.json"));
        std::fs::write(&path, serde_json::to_vec(&spec).unwrap()).unwrap();
        let stored = Vocabulary::from_file_with(&path, &config).unwrap();
        let hit = Vocabulary::from_file_with(&path, &config).unwrap();
        assert!(stored.has_cached_encoder() && hit.has_cached_encoder(), "case {case}: {spec}");
        let tok = hit.tokenizer().unwrap();
        for _ in 0..60 {
            let text: String =
                (0..rng.below(24)).map(|_| TEXT_CHARS[rng.below(TEXT_CHARS.len())]).collect();
            let theirs = tok.encode(text.as_str(), false).unwrap().get_ids().to_vec();
            for v in [&stored, &hit] {
                let ours: Vec<u32> = v.encode(&text).unwrap().iter().map(|t| t.0).collect();
                assert_eq!(ours, theirs, "case {case}, text {text:?}: {spec}");
            }
            unknown += usize::from(theirs.contains(&0) && case % 2 == 1);
            checked += 1;
        }
    }
    // The unknown-token paths were taken, not only the happy ones.
    assert!(unknown > 100, "only {unknown} of {checked} texts met an unknown character");
    let _ = std::fs::remove_dir_all(&dir);
}
