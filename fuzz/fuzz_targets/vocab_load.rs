//! (5) The tokenizer/config loaders on arbitrary bytes: `Vocabulary::from_bytes` never panics
//! and stays within budget; a vocabulary that loads keeps its invariants (text tokens have
//! bytes, special and padding ones none, EOS ids in range and special or text) and a JSON
//! constraint compiles over it with a first mask equal to `allows`.
#![no_main]
use arbitrary::{Arbitrary, Unstructured};
use grammask::vocab::{TokenKind, VocabConfig};
use grammask::{Constraint, TokenId, TokenMask, Vocabulary};
use grammask_fuzz::{budgeted, COMPILE_BUDGET};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input {
    tokenizer: Vec<u8>,
    config: Option<Vec<u8>>,
    n_vocab_extra: Option<u8>,
}

/// libFuzzer's hook aborts at any panic, even one grammask catches: the loader catches the
/// `tokenizers` crate's panics on malformed files (a typed error instead), so put the default
/// hook back, silent for those. A panic nobody catches still aborts (libfuzzer-sys aborts when
/// the closure unwinds).
fn hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _abort = std::panic::take_hook();
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.location().is_some_and(|l| l.file().contains("/tokenizers-")) {
                default(info);
            }
        }));
    });
}

fuzz_target!(|data: &[u8]| {
    hook();
    // Split on the first NUL byte (seed files are tokenizer \0 config), else arbitrary.
    let input = match data.iter().position(|&b| b == 0) {
        Some(i) => Input {
            tokenizer: data[..i].to_vec(),
            config: Some(data[i + 1..].to_vec()),
            n_vocab_extra: None,
        },
        None => match Input::arbitrary(&mut Unstructured::new(data)) {
            Ok(i) => i,
            Err(_) => return,
        },
    };
    let mut config = VocabConfig::default();
    let probe = match budgeted("load", COMPILE_BUDGET, || {
        Vocabulary::from_bytes(&input.tokenizer, input.config.as_deref(), &config)
    }) {
        Ok(v) => v,
        Err(_) => return,
    };
    if let Some(x) = input.n_vocab_extra {
        config = config.with_n_vocab(Some(probe.n_tokens() + x as usize));
    }
    let Ok(vocab) = budgeted("load", COMPILE_BUDGET, || {
        Vocabulary::from_bytes(&input.tokenizer, input.config.as_deref(), &config)
    }) else {
        return;
    };
    assert!(vocab.n_vocab() >= vocab.n_tokens());
    for i in 0..vocab.n_vocab() {
        let t = TokenId::from_index(i);
        let k = vocab.kind(t);
        // Past n_tokens is padding; below it, a hole in the tokenizer's id space is too.
        if i >= vocab.n_tokens() {
            assert_eq!(k, TokenKind::Padding, "id {i} past n_tokens is not padding");
        }
        if k != TokenKind::Text {
            assert!(vocab.token_bytes(t).is_empty(), "special/padding token {i} has bytes");
        }
    }
    for &e in vocab.eos_ids() {
        assert!(e.index() < vocab.n_tokens(), "EOS {e:?} out of range");
    }
    assert_eq!(
        vocab.text_tokens().count(),
        (0..vocab.n_tokens())
            .filter(|&i| vocab.kind(TokenId::from_index(i)) == TokenKind::Text)
            .count()
    );
    let compiled =
        Constraint::json().compile(&vocab).expect("free-form JSON compiles on any vocabulary");
    let mut e = compiled.engine();
    let mut mask = TokenMask::new(vocab.n_vocab());
    e.fill_mask(&mut mask).expect("mask");
    for i in 0..vocab.n_vocab() {
        let t = TokenId::from_index(i);
        assert_eq!(mask.contains(t), e.allows(t), "mask vs allows on {}", vocab.describe(t));
    }
    let _ = vocab.encode("{\"a\": 1}");
});
