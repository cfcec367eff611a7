//! The vocabulary cache (`vocab/cache.rs`, issue 23 goal 4): a vocabulary read back from the
//! cache is the vocabulary built from the tokenizer — every token's bytes and kind, the EOS,
//! BOS and pad ids, the trie (the same masks), the same encodings through the lazily loaded
//! tokenizer — and a stale, corrupt or forged file is refused and rebuilt, never trusted.
//!
//! The tokenizer files are the embedded Qwen3 ones written to a scratch directory, so these run
//! on a fresh clone; Llama 2 (SentencePiece, byte fallback, prepended `▁`) from
//! `../shared/tokenizers` is checked too when present.
//!
//! A cached vocabulary encodes text with the cache's own BPE encoder (`vocab/bpe.rs`); the ids
//! it gives are checked against `tokenizers`' own on real and generated text for the embedded
//! tokenizer and every tokenizer of `../shared/tokenizers`.

use grammask::vocab::{CacheOutcome, VocabCache, VocabConfig, VocabErrorKind};
use grammask::{Constraint, TokenId, TokenMask, Vocabulary};
use std::io::Read;
use std::path::{Path, PathBuf};
use xxhash_rust::xxh3::xxh3_128;

/// A scratch directory unique to this process and test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("grammask-vcache-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn gunzip(path: &str) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap()).read_to_end(&mut out).unwrap();
    out
}

/// The embedded Qwen3 `tokenizer.json` and `tokenizer_config.json` written into `dir`.
fn qwen3_files(dir: &Path) -> PathBuf {
    let tok = dir.join("tokenizer.json");
    std::fs::write(&tok, gunzip("src/vocab/embedded/qwen3.tokenizer.json.gz")).unwrap();
    std::fs::write(
        dir.join("tokenizer_config.json"),
        gunzip("src/vocab/embedded/qwen3.tokenizer_config.json.gz"),
    )
    .unwrap();
    tok
}

fn cached(dir: &Path) -> VocabConfig {
    VocabConfig::default().with_cache(VocabCache::Dir(dir.to_path_buf()))
}

fn outcome(v: &Vocabulary) -> &CacheOutcome {
    v.cache_outcome().expect("a cache was asked for")
}

fn cache_file(v: &Vocabulary) -> PathBuf {
    match outcome(v) {
        CacheOutcome::Hit { path }
        | CacheOutcome::Stored { path }
        | CacheOutcome::Rebuilt { path, .. }
        | CacheOutcome::NotStored { path, .. } => path.clone(),
        other => panic!("unexpected outcome {other:?}"),
    }
}

/// Masks of a JSON engine after each token of `doc`, as bit vectors.
fn masks(v: &Vocabulary, doc: &str) -> Vec<Vec<u32>> {
    let compiled = Constraint::json().compile(v).unwrap();
    let mut engine = compiled.engine();
    let mut mask = TokenMask::new(v.n_vocab());
    let mut out = Vec::new();
    for t in v.encode_exact(doc).unwrap() {
        engine.fill_mask(&mut mask).unwrap();
        out.push(mask.words().to_vec());
        engine.advance(t).unwrap();
    }
    out
}

/// `got` (read back) is `want` (built from the tokenizer) in everything a vocabulary holds.
fn assert_same(got: &Vocabulary, want: &Vocabulary, name: &str) {
    assert_eq!(got.n_tokens(), want.n_tokens(), "{name}: tokens");
    assert_eq!(got.n_vocab(), want.n_vocab(), "{name}: logits width");
    assert_eq!(got.encoding(), want.encoding(), "{name}: encoding");
    assert_eq!(got.prepends_space(), want.prepends_space(), "{name}: prepends_space");
    assert_eq!(got.eos_ids(), want.eos_ids(), "{name}: EOS");
    assert_eq!(got.bos_id(), want.bos_id(), "{name}: BOS");
    assert_eq!(got.pad_id(), want.pad_id(), "{name}: pad");
    assert_eq!(got.source(), want.source(), "{name}: source");
    for i in 0..want.n_vocab() {
        let t = TokenId(i as u32);
        assert_eq!(got.kind(t), want.kind(t), "{name}: kind of {i}");
        assert_eq!(got.token_bytes(t), want.token_bytes(t), "{name}: bytes of {i}");
    }
    let (a, b) = (got.trie(), want.trie());
    assert_eq!(
        (a.node_count(), a.token_count(), a.max_depth()),
        (b.node_count(), b.token_count(), b.max_depth()),
        "{name}: trie shape"
    );
    let doc = r#"{"name": "Ada Lovelace", "tags": ["x", "é🎉"], "n": -12.5e3, "ok": true}"#;
    assert_eq!(masks(got, doc), masks(want, doc), "{name}: JSON masks along a document");
}

#[test]
fn read_back_equals_the_vocabulary_built_from_the_tokenizer() {
    let dir = scratch("roundtrip");
    let tok = qwen3_files(&dir);
    let cache = dir.join("cache");
    let fresh = Vocabulary::from_file(&tok).unwrap();
    assert!(fresh.cache_outcome().is_none(), "the library's default is no cache");
    assert!(!cache.exists());

    let first = Vocabulary::from_file_with(&tok, &cached(&cache)).unwrap();
    assert!(matches!(outcome(&first), CacheOutcome::Stored { .. }), "{:?}", outcome(&first));
    assert!(cache_file(&first).is_file());
    let hit = Vocabulary::from_file_with(&tok, &cached(&cache)).unwrap();
    assert!(matches!(outcome(&hit), CacheOutcome::Hit { .. }), "{:?}", outcome(&hit));
    assert_eq!(cache_file(&hit), cache_file(&first));
    assert_same(&hit, &fresh, "qwen3 from the cache");
    // The lazily loaded tokenizer encodes as the eager one does, special tokens included.
    for text in ["Hello, world! 東京 🎉", "<|im_end|> and <think>", "  spaces\n\ttabs"] {
        assert_eq!(hit.encode(text).unwrap(), fresh.encode(text).unwrap(), "{text:?}");
    }
    assert_eq!(hit.token_id("<|im_end|>"), fresh.token_id("<|im_end|>"));
    // Exactly one file, no temporary left behind.
    let files: Vec<_> = std::fs::read_dir(&cache).unwrap().collect();
    assert_eq!(files.len(), 1, "{files:?}");
}

#[test]
fn options_and_config_are_part_of_the_key() {
    let dir = scratch("keys");
    let tok = qwen3_files(&dir);
    let cache = dir.join("cache");
    let plain = Vocabulary::from_file_with(&tok, &cached(&cache)).unwrap();
    let padded_cfg = cached(&cache).with_n_vocab(Some(151_936));
    let padded = Vocabulary::from_file_with(&tok, &padded_cfg).unwrap();
    assert!(matches!(outcome(&padded), CacheOutcome::Stored { .. }), "a new key");
    assert_ne!(cache_file(&padded), cache_file(&plain));
    let again = Vocabulary::from_file_with(&tok, &padded_cfg).unwrap();
    assert!(matches!(outcome(&again), CacheOutcome::Hit { .. }));
    assert_eq!(again.n_vocab(), 151_936);
    let eos_cfg = cached(&cache).with_extra_eos_tokens(vec!["<|endoftext|>".into()]);
    let eos = Vocabulary::from_file_with(&tok, &eos_cfg).unwrap();
    assert!(matches!(outcome(&eos), CacheOutcome::Stored { .. }));
    assert_eq!(eos.eos_ids().len(), 2);
    // A changed tokenizer_config.json is a changed key: the stale file is never read.
    let cfg_path = dir.join("tokenizer_config.json");
    let cfg = std::fs::read_to_string(&cfg_path).unwrap();
    std::fs::write(
        &cfg_path,
        cfg.replace("\"eos_token\": \"<|im_end|>\"", "\"eos_token\": \"<|endoftext|>\""),
    )
    .unwrap();
    let changed = Vocabulary::from_file_with(&tok, &cached(&cache)).unwrap();
    assert!(matches!(outcome(&changed), CacheOutcome::Stored { .. }), "{:?}", outcome(&changed));
    assert_eq!(changed.eos_ids(), &[changed.token_id("<|endoftext|>").unwrap()]);
    assert_ne!(changed.eos_ids(), plain.eos_ids());
}

#[test]
fn embedded_vocabulary_is_cached_too() {
    let dir = scratch("embedded");
    let first = Vocabulary::embedded_with(&cached(&dir)).unwrap();
    assert!(matches!(outcome(&first), CacheOutcome::Stored { .. }));
    let hit = Vocabulary::embedded_with(&cached(&dir)).unwrap();
    assert!(matches!(outcome(&hit), CacheOutcome::Hit { .. }));
    assert_same(&hit, crate::common::qwen3(), "embedded from the cache");
    assert_eq!(
        hit.encode("{\"a\": 1}").unwrap(),
        crate::common::qwen3().encode("{\"a\": 1}").unwrap()
    );
}

/// The header of a cache file: magic (8), version (4), reserved (4), key (16), checksum (16),
/// payload length (8).
const HEADER: usize = 56;

/// Rewrite the payload's checksum so that only the structural checks stand between the file
/// and the vocabulary.
fn reseal(data: &mut [u8]) {
    let sum = xxh3_128(&data[HEADER..]);
    data[32..48].copy_from_slice(&sum.to_le_bytes());
}

#[test]
fn corrupt_stale_and_forged_files_are_rebuilt_never_trusted() {
    let dir = scratch("corrupt");
    let tok = qwen3_files(&dir);
    let cache = dir.join("cache");
    let fresh = Vocabulary::from_file(&tok).unwrap();
    let stored = Vocabulary::from_file_with(&tok, &cached(&cache)).unwrap();
    let path = cache_file(&stored);
    let good = std::fs::read(&path).unwrap();
    let n = fresh.n_vocab();
    let n_eos = fresh.eos_ids().len();
    // Payload layout (vocab/cache.rs): encoding, flag, n_tokens, n_vocab, EOS (len + ids),
    // BOS, pad, kinds (len + bytes), offsets (len + u32s), bytes (len + bytes), trie nodes.
    let kinds_at = HEADER + 2 + 8 + 8 + 8 + 4 * n_eos + 8 + 8 + 8;
    let offsets_at = kinds_at + n;
    let bytes_at = offsets_at + 8 + 4 * (fresh.n_tokens() + 1) + 8;
    let n_bytes: usize =
        (0..fresh.n_tokens()).map(|i| fresh.token_bytes(TokenId(i as u32)).len()).sum();
    let nodes_at = bytes_at + n_bytes + 8;
    // The first text token's first byte, found through the public API.
    let first_text =
        (0..fresh.n_tokens()).find(|&i| !fresh.token_bytes(TokenId(i as u32)).is_empty()).unwrap();
    let first_text_at = bytes_at
        + (0..first_text).map(|i| fresh.token_bytes(TokenId(i as u32)).len()).sum::<usize>();
    assert_eq!(good[first_text_at], fresh.token_bytes(TokenId(first_text as u32))[0]);

    let mut other_key = good.clone();
    other_key[16] ^= 1;
    let mut flipped = good.clone();
    flipped[good.len() / 2] ^= 0x10;
    let mut version = good.clone();
    version[8] = 99;
    let mut forged_bytes = good.clone();
    forged_bytes[first_text_at] ^= 0x01;
    reseal(&mut forged_bytes);
    let mut forged_kind = good.clone();
    forged_kind[kinds_at + first_text] = 1; // a text token claimed special (bytes kept)
    reseal(&mut forged_kind);
    let mut forged_node = good.clone();
    // Node 1's subtree size (the second u32 of the second node) grown by one.
    let size_at = nodes_at + 8 + 4;
    let size = u32::from_le_bytes(forged_node[size_at..size_at + 4].try_into().unwrap());
    forged_node[size_at..size_at + 4].copy_from_slice(&(size + 1).to_le_bytes());
    reseal(&mut forged_node);
    // The last id of the stored merge table (the payload's last u32) past every token.
    let mut forged_merge = good.clone();
    let end = forged_merge.len();
    forged_merge[end - 4..].copy_from_slice(&u32::MAX.to_le_bytes());
    reseal(&mut forged_merge);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty", Vec::new(), "not a grammask vocabulary cache"),
        ("garbage", b"{\"not\": \"a cache\"}".to_vec(), "not a grammask vocabulary cache"),
        ("truncated", good[..good.len() - 1000].to_vec(), "header says"),
        ("another key", other_key, "another key"),
        ("a flipped bit", flipped, "checksum"),
        ("another format version", version, "format version"),
        ("a forged token byte", forged_bytes, "does not spell its bytes"),
        ("a forged token kind", forged_kind, "offsets are inconsistent"),
        ("a forged node size", forged_node, "the trie does not match the token table"),
        ("a forged merge", forged_merge, "the merge table is malformed"),
    ];
    for (what, data, why_has) in cases {
        std::fs::write(&path, &data).unwrap();
        let v = Vocabulary::from_file_with(&tok, &cached(&cache)).unwrap();
        match outcome(&v) {
            CacheOutcome::Rebuilt { why, .. } => {
                assert!(why.contains(why_has), "{what}: refused for {why:?}, not {why_has:?}")
            }
            other => panic!("{what}: {other:?}"),
        }
        assert_eq!(v.encode("abc é").unwrap(), fresh.encode("abc é").unwrap(), "{what}");
        // The rebuilt file is good again.
        assert_eq!(std::fs::read(&path).unwrap(), good, "{what}: the file is rewritten");
        let again = Vocabulary::from_file_with(&tok, &cached(&cache)).unwrap();
        assert!(matches!(outcome(&again), CacheOutcome::Hit { .. }), "{what}");
    }
    let last = Vocabulary::from_file_with(&tok, &cached(&cache)).unwrap();
    assert_same(&last, &fresh, "after the rebuilds");
}

#[test]
fn a_changed_tokenizer_is_refused_by_the_lazy_load() {
    let dir = scratch("lazy");
    let tok = qwen3_files(&dir);
    let cache = dir.join("cache");
    Vocabulary::from_file_with(&tok, &cached(&cache)).unwrap();
    let hit = Vocabulary::from_file_with(&tok, &cached(&cache)).unwrap();
    assert!(matches!(outcome(&hit), CacheOutcome::Hit { .. }));
    // The file changes after the vocabulary was read back and before `tokenizers` is needed.
    let mut bytes = std::fs::read(&tok).unwrap();
    bytes.extend_from_slice(b"\n");
    std::fs::write(&tok, &bytes).unwrap();
    // Text is encoded by the encoder the cache stored with the vocabulary (added tokens
    // included): the tokenizer as it was keyed, not the file as it is now.
    for text in ["hello", "hello<|im_end|>"] {
        assert_eq!(hit.encode(text).unwrap(), crate::common::qwen3().encode(text).unwrap());
    }
    // The `tokenizers` model itself is refused.
    let err = hit.try_tokenizer().unwrap_err();
    assert!(matches!(err.kind(), VocabErrorKind::Tokenizer(_)), "{err:?}");
    assert!(err.to_string().contains("changed since"), "{err}");
    assert!(hit.tokenizer().is_none());
    // Masks never needed the encoder.
    let compiled = Constraint::json().compile(&hit).unwrap();
    let mut mask = TokenMask::new(hit.n_vocab());
    compiled.engine().fill_mask(&mut mask).unwrap();
    assert!(mask.count() > 0);
    // Loading again keys by the new bytes: a miss, built from the file as it is now.
    let now = Vocabulary::from_file_with(&tok, &cached(&cache)).unwrap();
    assert!(matches!(outcome(&now), CacheOutcome::Stored { .. }), "{:?}", outcome(&now));
    assert_eq!(now.encode("hello").unwrap(), crate::common::qwen3().encode("hello").unwrap());
}

#[test]
fn an_unwritable_cache_directory_still_gives_the_vocabulary() {
    let dir = scratch("unwritable");
    let tok = qwen3_files(&dir);
    // A directory under a regular file cannot be created.
    let blocker = dir.join("file");
    std::fs::write(&blocker, b"x").unwrap();
    let v = Vocabulary::from_file_with(&tok, &cached(&blocker.join("cache"))).unwrap();
    assert!(matches!(outcome(&v), CacheOutcome::NotStored { .. }), "{:?}", outcome(&v));
    assert_eq!(v.n_tokens(), crate::common::qwen3().n_tokens());
}

#[test]
fn shared_sentencepiece_tokenizer_round_trips_when_present() {
    let tok = Path::new("../shared/tokenizers/llama2.json");
    if !tok.is_file() {
        eprintln!("../shared/tokenizers/llama2.json absent: only Qwen3 is checked");
        return;
    }
    let cache = scratch("llama2");
    let fresh = Vocabulary::from_file(tok).unwrap();
    Vocabulary::from_file_with(tok, &cached(&cache)).unwrap();
    let hit = Vocabulary::from_file_with(tok, &cached(&cache)).unwrap();
    assert!(matches!(outcome(&hit), CacheOutcome::Hit { .. }));
    assert!(fresh.prepends_space());
    assert_same(&hit, &fresh, "llama2 from the cache");
    let text = "Héllo wörld 🎉 {\"a\": 1}";
    assert_eq!(hit.encode_exact(text).unwrap(), fresh.encode_exact(text).unwrap());
}

/// The bytes a vocabulary stores are pinned by [`grammask::vocab::CACHE_FORMAT_VERSION`]: a
/// change to token decoding, EOS rules or the trie layout changes this fingerprint, and must bump
/// the version so that old cache files are no longer read as current.
#[test]
fn fingerprint_pins_format_version() {
    let dir = scratch("fingerprint");
    let v = Vocabulary::embedded_with(&cached(&dir)).unwrap();
    let data = std::fs::read(cache_file(&v)).unwrap();
    let sum = u128::from_le_bytes(data[32..48].try_into().unwrap());
    assert_eq!(
        (grammask::vocab::CACHE_FORMAT_VERSION, format!("{sum:032x}")),
        (2, "be221dfe1b4f2de6a6de81b634347e2b".to_string()),
        "the embedded vocabulary's stored form changed: bump vocab::cache::FORMAT_VERSION \
         and update this fingerprint"
    );
}

#[test]
fn the_cache_directory_is_bounded_least_recently_used_first() {
    use std::time::{Duration, SystemTime};
    let dir = scratch("bounded");
    let tok = qwen3_files(&dir);
    let cache = dir.join("cache");
    let first = Vocabulary::from_file_with(&tok, &cached(&cache)).unwrap();
    let ours = cache_file(&first);
    let aged = |path: &Path, secs: u64| {
        let f = std::fs::File::options().append(true).open(path).unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(secs)).unwrap();
    };
    // Our file is the oldest of all; a hit must make it the most recently used.
    aged(&ours, 100_000);
    let max = grammask::vocab::CACHE_MAX_FILES;
    let others: Vec<PathBuf> = (0..max + 8)
        .map(|i| {
            let p = cache.join(format!("{:032x}.gmvocab", i + 1));
            std::fs::write(&p, b"an old vocabulary").unwrap();
            aged(&p, 50_000 - i as u64 * 10); // file 0 the oldest of them
            p
        })
        .collect();
    let dead_writer = cache.join(".0123.77.5.tmp");
    std::fs::write(&dead_writer, b"half").unwrap();
    aged(&dead_writer, 7200);
    let live_writer = cache.join(".0123.78.6.tmp");
    std::fs::write(&live_writer, b"in progress").unwrap();
    let hit = Vocabulary::from_file_with(&tok, &cached(&cache)).unwrap();
    assert!(matches!(outcome(&hit), CacheOutcome::Hit { .. }));
    let touched = std::fs::metadata(&ours).unwrap().modified().unwrap();
    assert!(SystemTime::now().duration_since(touched).unwrap() < Duration::from_secs(600));
    // Storing another vocabulary prunes: the oldest others go, ours (just used) stays.
    let padded = cached(&cache).with_n_vocab(Some(151_700));
    let new = Vocabulary::from_file_with(&tok, &padded).unwrap();
    assert!(matches!(outcome(&new), CacheOutcome::Stored { .. }));
    let kept: Vec<PathBuf> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "gmvocab"))
        .collect();
    assert_eq!(kept.len(), max, "{kept:?}");
    assert!(kept.contains(&ours) && kept.contains(&cache_file(&new)));
    assert!(!others[0].exists() && others[max + 7].exists(), "least recently used first");
    assert!(!dead_writer.exists(), "a dead writer's temporary file is removed");
    assert!(live_writer.exists(), "a recent temporary file is left to its writer");
}

#[test]
fn an_oversized_cache_file_is_refused_unread() {
    let dir = scratch("oversized");
    let tok = qwen3_files(&dir);
    let cache = dir.join("cache");
    let limit = std::fs::metadata(&tok).unwrap().len() + 1000;
    let cfg = cached(&cache).with_max_file_bytes(limit);
    let stored = Vocabulary::from_file_with(&tok, &cfg).unwrap();
    let path = cache_file(&stored);
    std::fs::write(&path, vec![0u8; limit as usize + 1]).unwrap();
    let v = Vocabulary::from_file_with(&tok, &cfg).unwrap();
    match outcome(&v) {
        CacheOutcome::Rebuilt { why, .. } => assert!(why.contains("larger than"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert!(std::fs::metadata(&path).unwrap().len() < limit, "rewritten");
}

/// `text` as Python's `json.dumps` writes it by default (`ensure_ascii`): every character past
/// ASCII as `\uXXXX`, surrogate pairs past the BMP.
fn ascii_escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    out
}

/// Texts that exercise a pre-tokenizer and the merges: real JSON documents (every 32nd file of
/// `../shared/maskbench-dev`, its schema and instances, compact, pretty and ASCII-escaped, when
/// present), generated strings over an alphabet of what tokenizers split or normalise
/// differently (Unicode whitespace, combining marks, contractions in both cases, CJK, emoji
/// with modifiers and joiners, control characters), and long runs of one character.
fn encoder_texts() -> Vec<String> {
    let mut texts: Vec<String> = vec![
        String::new(),
        "Héllo wörld 🎉 {\"a\": 1}".into(),
        "I'LL say it's 12345678 o'clock\r\n\r\n  \t x".into(),
        "e\u{301} vs é, ﬁ, Å vs A\u{30a}".into(),
    ];
    // Chat prompts: the added tokens of each family, split out before pre-tokenizing (or, for
    // tokenizers whose added tokens are matched after normalisation, left to `tokenizers`).
    texts.extend(
        [
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
            "<｜begin▁of▁sentence｜><｜User｜>Hi <｜Assistant｜><think>\n",
            "<bos><start_of_turn>user\nHi <end_of_turn>\n<start_of_turn>model\n",
            "<s>[INST] Hi [/INST] x</s>",
            "<|start|>user<|message|>Hi<|end|><|start|>assistant",
            "a <tool_call>{\"x\": 1}</tool_call> <|im_end|><|im_end|>x<|im_end",
        ]
        .map(String::from),
    );
    let dir = Path::new("../shared/maskbench-dev");
    match std::fs::read_dir(dir) {
        Err(e) => eprintln!("{}: {e}; generated texts only", dir.display()),
        Ok(entries) => {
            let mut files: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
            files.sort();
            for f in files.iter().step_by(32) {
                let j: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap();
                texts.push(j["schema"].to_string());
                for t in j["tests"].as_array().into_iter().flatten() {
                    let compact = t["data"].to_string();
                    texts.push(ascii_escaped(&compact));
                    texts.push(compact);
                    texts.push(serde_json::to_string_pretty(&t["data"]).unwrap());
                }
            }
        }
    }
    let alphabet: Vec<char> = " \t\n\r\u{a0}\u{3000}\u{2003}\u{85}\u{200b}aAzZ'sStTlLdD0123456789\
        éE\u{301}\u{308}中文字日本語한국어🎉👍🏽\u{200d}ÿ€\\\"{}[]:,.-_!?<|>/ſßİıǅ\u{fffd}\u{10ffff}\
        \u{7f}\u{0}\u{1f}"
        .chars()
        .collect();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..5_000 {
        let n = (next() % 40) as usize;
        texts.push((0..n).map(|_| alphabet[(next() % alphabet.len() as u64) as usize]).collect());
    }
    for c in ["a", " ", "1", "中", "\n", "'s", "!", "é"] {
        texts.push(c.repeat(3000));
    }
    texts
}

/// Every text of [`encoder_texts`] encodes to the same ids through `v`'s cached encoder as
/// through `tokenizers`.
fn assert_encodes_as_tokenizers(v: &Vocabulary, texts: &[String], name: &str) {
    assert!(v.has_cached_encoder(), "{name}: the cache keeps no encoder");
    let tok = v.tokenizer().expect("the lazily loaded tokenizer");
    for text in texts {
        let ours: Vec<u32> = v.encode(text).unwrap().iter().map(|t| t.0).collect();
        let theirs = tok.encode(text.as_str(), false).unwrap().get_ids().to_vec();
        assert_eq!(ours, theirs, "{name}: {:?}", text.chars().take(120).collect::<String>());
    }
}

#[test]
fn the_cached_encoder_gives_the_ids_tokenizers_gives() {
    let texts = encoder_texts();
    let dir = scratch("encoder");
    let cache = dir.join("cache");
    let mut files = vec![("embedded qwen3".to_string(), qwen3_files(&dir))];
    // Byte-level BPE with and without ignore_merges, NFC, several Split regexes, and
    // SentencePiece-style BPE with byte fallback: every BPE tokenizer in ../shared.
    let shared = ["llama3", "qwen3", "gptoss", "deepseek_v3", "gemma3", "llama2"];
    for name in shared {
        let path = PathBuf::from(format!("../shared/tokenizers/{name}.json"));
        match path.is_file() {
            true => files.push((name.to_string(), path)),
            false => eprintln!("{} absent: not checked", path.display()),
        }
    }
    for (name, path) in &files {
        let cache = cache.join(name.replace(' ', "_"));
        let stored = Vocabulary::from_file_with(path, &cached(&cache)).unwrap();
        assert!(matches!(outcome(&stored), CacheOutcome::Stored { .. }), "{name}");
        let hit = Vocabulary::from_file_with(path, &cached(&cache)).unwrap();
        assert!(matches!(outcome(&hit), CacheOutcome::Hit { .. }), "{name}");
        assert_encodes_as_tokenizers(&hit, &texts, name);
        // Every 3rd text token's own bytes, as text: what `ignore_merges` (Llama 3, gpt-oss)
        // and the merges' order decide.
        let own: Vec<String> = (0..hit.n_tokens())
            .step_by(3)
            .filter_map(|i| std::str::from_utf8(hit.token_bytes(TokenId(i as u32))).ok())
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        assert_encodes_as_tokenizers(&hit, &own, name);
        // The vocabulary that stored the file encodes with the same encoder.
        assert!(stored.has_cached_encoder(), "{name}");
        assert_eq!(stored.encode(&texts[1]).unwrap(), hit.encode(&texts[1]).unwrap(), "{name}");
    }
    // Without a cache, `tokenizers` encodes.
    assert!(!Vocabulary::from_file(&files[0].1).unwrap().has_cached_encoder());
}

#[test]
fn added_tokens_are_split_out_without_tokenizers() {
    let dir = scratch("added");
    let tok = qwen3_files(&dir);
    let cache = dir.join("cache");
    let fresh = Vocabulary::from_file(&tok).unwrap();
    Vocabulary::from_file_with(&tok, &cached(&cache)).unwrap();
    let hit = Vocabulary::from_file_with(&tok, &cached(&cache)).unwrap();
    assert!(hit.has_cached_encoder());
    // With the tokenizer file gone, `tokenizers` cannot be loaded: whatever is encoded below
    // is the cached encoder's work.
    std::fs::remove_file(&tok).unwrap();
    assert!(hit.try_tokenizer().is_err());
    let added = fresh.tokenizer().unwrap().get_added_tokens_decoder();
    // `<|im_end|>` is special, `<tool_call>` an added token that is not: both are split out of
    // the text before the normaliser and pre-tokenizer run, as `tokenizers` does.
    for text in [
        "say <|im_end|> now",
        "a <tool_call>{\"x\": 1}</tool_call>",
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
        "<|im_end|><|im_end|>x<|im_end",
    ] {
        let ids = hit.encode(text).unwrap();
        assert_eq!(ids, fresh.encode(text).unwrap(), "{text}");
        assert!(ids.iter().any(|t| added.contains_key(&t.0)), "{text}: {ids:?}");
        // As a document, the text is spelled by text tokens only.
        let exact = hit.encode_exact(text).unwrap();
        assert_eq!(exact, fresh.encode_exact(text).unwrap(), "{text}");
        let spelled: Vec<u8> = exact.iter().flat_map(|&t| hit.token_bytes(t).to_vec()).collect();
        assert_eq!(spelled, text.as_bytes());
    }
}
