//! The vocabulary against the real thing: for the embedded tokenizer (always) and every
//! tokenizer in `../shared/tokenizers/` (when present), encoding a corpus and concatenating the
//! token bytes gives back the text exactly. Plus config, padding and bad-input cases.

use crate::common;

use common::qwen3;
use grammask::vocab::{TokenEncoding, TokenKind, VocabConfig, VocabErrorKind};
use grammask::{TokenId, Vocabulary};
use std::path::Path;

const CORPUS: &[&str] = &[
    "Hello, world! The quick brown fox jumps over the lazy dog.",
    "Crème brûlée, naïve café, Ærøskøbing, São Paulo, Ελληνικά, Русский текст",
    "東京は日本の首都です。北京欢迎你。서울특별시",
    "emoji: 🎉🚀👩‍👩‍👧‍👦 🇫🇷 ❤️",
    "fn main() {\n    let x: Vec<u8> = vec![1, 2, 3];\n    println!(\"{x:?}\");\n}\n",
    "a  b   c    d\t\te\n\n\nf\r\n  \n    indented",
    "{\"name\": \"Café\", \"n\": [1, 2.5e-3, -0], \"ok\": true, \"nested\": {\"a\": null}}",
    "{\"s\":\"quote \\\" backslash \\\\ unicode \\u00e9\"}",
    "     leading spaces and trailing spaces     ",
    "1234567890 3.14159 -42 1e10",
];

fn check_round_trip(v: &Vocabulary, name: &str) {
    for text in CORPUS {
        let ids = v.encode(text).unwrap();
        let bytes: Vec<u8> = ids.iter().flat_map(|&t| v.token_bytes(t).to_vec()).collect();
        let expected = if v.prepends_space() { format!(" {text}") } else { text.to_string() };
        assert_eq!(
            String::from_utf8_lossy(&bytes),
            expected,
            "{name}: concatenated token bytes differ from the text"
        );
        let cont = v.encode_continuation(text).unwrap();
        let bytes: Vec<u8> = cont.iter().flat_map(|&t| v.token_bytes(t).to_vec()).collect();
        assert_eq!(bytes, text.as_bytes(), "{name}: encode_continuation is exact");
    }
}

fn check_trie(v: &Vocabulary, name: &str) {
    let text_tokens = (0..v.n_tokens())
        .filter(|&i| {
            let t = TokenId(i as u32);
            v.kind(t) == TokenKind::Text && !v.token_bytes(t).is_empty()
        })
        .count();
    assert_eq!(v.trie().token_count(), text_tokens, "{name}: the trie holds every text token");
    for &e in v.eos_ids() {
        assert_eq!(v.kind(e), TokenKind::Special, "{name}: EOS is special");
        assert!(v.token_bytes(e).is_empty());
    }
}

#[test]
fn embedded_round_trips_the_corpus() {
    let v = qwen3();
    assert_eq!(v.encoding(), TokenEncoding::ByteLevel);
    assert_eq!(v.n_tokens(), 151_669);
    assert_eq!(v.n_vocab(), v.n_tokens());
    check_round_trip(v, "qwen3 (embedded)");
    check_trie(v, "qwen3 (embedded)");
    // EOS from tokenizer_config.json.
    assert_eq!(v.eos_ids(), &[v.token_id("<|im_end|>").unwrap()]);
    assert_eq!(v.pad_id(), v.token_id("<|endoftext|>"));
    // Non-special added tokens are text.
    let think = v.token_id("<think>").unwrap();
    assert_eq!(v.kind(think), TokenKind::Text);
    assert_eq!(v.token_bytes(think), b"<think>");
    // Byte-level tokens that are fragments of a UTF-8 character exist and decode to one byte.
    assert!((0..v.n_tokens()).any(|i| {
        let b = v.token_bytes(TokenId(i as u32));
        b.len() == 1 && b[0] >= 0x80
    }));
}

#[test]
fn shared_tokenizers_round_trip_when_present() {
    let dir = Path::new("../shared/tokenizers");
    if !dir.is_dir() {
        eprintln!("../shared/tokenizers absent: only the embedded tokenizer is checked");
        return;
    }
    let mut checked = 0;
    for name in ["qwen3", "llama3", "gemma3", "llama2", "gptoss", "deepseek_v3"] {
        let path = dir.join(format!("{name}.json"));
        if !path.is_file() {
            continue;
        }
        let v = Vocabulary::from_file(&path).unwrap();
        assert!(!v.eos_ids().is_empty(), "{name}: EOS read from {name}.config.json");
        check_round_trip(&v, name);
        check_trie(&v, name);
        checked += 1;
    }
    assert!(checked > 0);
}

#[test]
fn padded_logits_and_extra_eos() {
    let v = Vocabulary::from_token_bytes(&[Some(b"a"), Some(b"b"), None], &[2], Some(8)).unwrap();
    assert_eq!(v.n_vocab(), 8);
    assert_eq!(v.n_tokens(), 3);
    assert_eq!(v.kind(TokenId(5)), TokenKind::Padding);
    assert_eq!(v.kind(TokenId(100)), TokenKind::Padding);
    assert!(v.token_bytes(TokenId(5)).is_empty());
    let err = Vocabulary::from_token_bytes(&[Some(b"a")], &[], Some(0)).unwrap_err();
    assert!(matches!(err.kind(), VocabErrorKind::LogitsTooNarrow { .. }));
    let err = Vocabulary::from_token_bytes(&[Some(b"a")], &[7], None).unwrap_err();
    assert!(matches!(err.kind(), VocabErrorKind::EosOutOfRange { .. }));
}

#[test]
fn embedded_with_pads_the_logits_row() {
    // Qwen3 models emit 151,936 logits for the tokenizer's 151,669 tokens (the Python package's
    // `vocab_size` override reaches this through `embedded_with`).
    let v = Vocabulary::embedded_with(&VocabConfig::default().with_n_vocab(Some(151_936))).unwrap();
    assert_eq!((v.n_vocab(), v.n_tokens()), (151_936, qwen3().n_tokens()));
    assert_eq!(v.kind(TokenId(151_700)), TokenKind::Padding);
    assert_eq!(v.eos_ids(), qwen3().eos_ids());
    let narrow = Vocabulary::embedded_with(&VocabConfig::default().with_n_vocab(Some(10)));
    assert!(matches!(narrow.unwrap_err().kind(), VocabErrorKind::LogitsTooNarrow { .. }));
}

#[test]
fn bad_inputs_are_typed_errors() {
    let err = Vocabulary::from_file("/nonexistent/tokenizer.json").unwrap_err();
    assert!(matches!(err.kind(), VocabErrorKind::Io { .. }));
    assert!(err.to_string().contains("/nonexistent/tokenizer.json"));
    let err = Vocabulary::from_bytes(b"{not json", None, &VocabConfig::default()).unwrap_err();
    assert!(matches!(err.kind(), VocabErrorKind::Tokenizer(_)));
    let tok = qwen3().tokenizer().unwrap().clone();
    let err =
        Vocabulary::from_tokenizer(tok.clone(), Some(b"[1]"), &VocabConfig::default()).unwrap_err();
    assert!(matches!(err.kind(), VocabErrorKind::Config(_)));
    let err = Vocabulary::from_tokenizer(
        tok.clone(),
        Some(br#"{"eos_token": "<|no such token|>"}"#),
        &VocabConfig::default(),
    )
    .unwrap_err();
    assert!(matches!(err.kind(), VocabErrorKind::UnknownToken { .. }));
    let err = Vocabulary::from_tokenizer(
        tok.clone(),
        Some(br#"{"eos_token": 5}"#),
        &VocabConfig::default(),
    )
    .unwrap_err();
    assert!(matches!(err.kind(), VocabErrorKind::Config(_)));
    let cfg = VocabConfig::default().with_n_vocab(Some(1000));
    let err = Vocabulary::from_tokenizer(tok.clone(), None, &cfg).unwrap_err();
    assert!(matches!(err.kind(), VocabErrorKind::LogitsTooNarrow { .. }));
    // Several EOS ids: the config's plus generation_config.json's.
    let cfg = VocabConfig::default().with_n_vocab(Some(151_936)).with_extra_eos(vec![151_643]);
    let v =
        Vocabulary::from_tokenizer(tok, Some(br#"{"eos_token": {"content": "<|im_end|>"}}"#), &cfg)
            .unwrap();
    assert_eq!(v.eos_ids(), &[TokenId(151_643), TokenId(151_645)]);
    assert_eq!(v.n_vocab(), 151_936);
}
