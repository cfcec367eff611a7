//! Property tests of the free-form JSON engine on the real embedded tokenizer (Qwen3):
//! (1) the fast mask equals the naive oracle at states reached by random valid documents;
//! (2) random valid documents walk through with EOS allowed at the end;
//! (3) corrupted documents are refused exactly at the token holding the first invalid byte.

use crate::common;

use common::{mask_diff, oracle_mask, qwen3, trace, walk};
use grammask::{ConstraintEngine, JsonConfig, JsonObjectConstraint, TokenMask};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum J {
    Null,
    Bool(bool),
    Num(String),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

fn number() -> impl Strategy<Value = String> {
    (any::<i64>(), 0u8..4, 0u32..1000, -30i32..30).prop_map(|(i, shape, frac, exp)| match shape {
        0 => (i % 100_000).to_string(),
        1 => format!("{}.{}", i % 1000, frac),
        2 => format!("{}e{}", i % 100, exp),
        _ => format!("{}.{:03}E+{}", i % 10, frac, exp.unsigned_abs()),
    })
}

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            4 => "[a-zA-Z0-9 _.,:-]{1,8}",
            1 => Just("é".to_string()),
            1 => Just("東京".to_string()),
            1 => Just("🎉".to_string()),
            1 => Just("\"".to_string()),
            1 => Just("\\".to_string()),
            1 => Just("\n".to_string()),
            1 => Just("\u{1}".to_string()),
        ],
        0..5,
    )
    .prop_map(|v| v.concat())
}

fn json() -> impl Strategy<Value = J> {
    let leaf = prop_oneof![
        Just(J::Null),
        any::<bool>().prop_map(J::Bool),
        number().prop_map(J::Num),
        text().prop_map(J::Str),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(J::Arr),
            prop::collection::vec((text(), inner), 0..4).prop_map(J::Obj),
        ]
    })
}

/// Serialise with whitespace and escape choices drawn from `seed`.
struct Writer {
    out: String,
    seed: u64,
}

impl Writer {
    fn pick(&mut self, n: u64) -> u64 {
        self.seed = self.seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.seed >> 33) % n
    }
    fn ws(&mut self) {
        match self.pick(6) {
            0 => self.out.push(' '),
            1 => self.out.push_str("\n  "),
            _ => {}
        }
    }
    fn string(&mut self, s: &str) {
        self.out.push('"');
        for c in s.chars() {
            match c {
                '"' => self.out.push_str("\\\""),
                '\\' => self.out.push_str("\\\\"),
                '\n' => {
                    let esc = if self.pick(2) == 0 { "\\n" } else { "\\u000a" };
                    self.out.push_str(esc);
                }
                c if (c as u32) < 0x20 => self.out.push_str(&format!("\\u{:04X}", c as u32)),
                c if !c.is_ascii() && self.pick(3) == 0 => {
                    let mut buf = [0u16; 2];
                    for u in c.encode_utf16(&mut buf) {
                        self.out.push_str(&format!("\\u{u:04x}"));
                    }
                }
                c => self.out.push(c),
            }
        }
        self.out.push('"');
    }
    fn value(&mut self, v: &J) {
        match v {
            J::Null => self.out.push_str("null"),
            J::Bool(b) => self.out.push_str(if *b { "true" } else { "false" }),
            J::Num(n) => self.out.push_str(n),
            J::Str(s) => self.string(s),
            J::Arr(items) => {
                self.out.push('[');
                for (i, it) in items.iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    self.ws();
                    self.value(it);
                    self.ws();
                }
                self.out.push(']');
            }
            J::Obj(members) => {
                self.out.push('{');
                for (i, (k, it)) in members.iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    self.ws();
                    self.string(k);
                    self.ws();
                    self.out.push(':');
                    self.ws();
                    self.value(it);
                    self.ws();
                }
                self.out.push('}');
            }
        }
    }
}

fn document() -> impl Strategy<Value = String> {
    (prop::collection::vec((text(), json()), 0..5), any::<u64>()).prop_map(|(members, seed)| {
        let mut w = Writer { out: String::new(), seed };
        w.value(&J::Obj(members));
        w.out
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn fast_mask_equals_oracle(doc in document(), pick in any::<u64>()) {
        let vocab = qwen3();
        let tokens = vocab.encode(&doc).unwrap();
        let mut e = JsonObjectConstraint::new(vocab, &JsonConfig::default()).unwrap();
        let mut mask = TokenMask::new(vocab.n_vocab());
        // Check the oracle at up to 4 positions spread over the document, plus the end.
        let stride = (tokens.len() / 4).max(1);
        let offset = (pick as usize) % stride;
        for (i, &t) in tokens.iter().enumerate() {
            if i % stride == offset {
                e.fill_mask(&mut mask).unwrap();
                let o = oracle_mask(&e);
                prop_assert!(mask == o, "at {}: {}", trace(vocab, &tokens[..i], None), mask_diff(vocab, &mask, &o));
            }
            e.advance(t).unwrap();
        }
        e.fill_mask(&mut mask).unwrap();
        let o = oracle_mask(&e);
        prop_assert!(mask == o, "at the end: {}", mask_diff(vocab, &mask, &o));
    }

    #[test]
    fn valid_documents_walk_through(doc in document()) {
        let vocab = qwen3();
        let tokens = vocab.encode(&doc).unwrap();
        let mut e = JsonObjectConstraint::new(vocab, &JsonConfig::default()).unwrap();
        let (refused, eos) = walk(&mut e, &tokens);
        prop_assert!(refused.is_none(), "{}", trace(vocab, &tokens, refused));
        prop_assert!(eos, "EOS refused after {}", trace(vocab, &tokens, None));
        prop_assert!(e.can_only_end());
    }

    #[test]
    fn corrupted_documents_are_refused_at_the_first_bad_token(
        doc in document(),
        at in any::<prop::sample::Index>(),
        junk in prop::sample::select(vec!["'", "}", "]", ",", ":", "x", "\u{1}", "\\q", "01", "\"\""]),
    ) {
        let vocab = qwen3();
        let pos = at.index(doc.len());
        if !doc.is_char_boundary(pos) {
            return Ok(());
        }
        let bad = format!("{}{}{}", &doc[..pos], junk, &doc[pos..]);
        // Where the byte-level engine refuses (if at all).
        let mut b = JsonObjectConstraint::new(vocab, &JsonConfig::default()).unwrap();
        let first_bad = match b.advance_bytes(bad.as_bytes()) {
            Err(i) => i,
            Ok(()) => {
                // Still a valid prefix: then it must be incomplete or complete; nothing to check.
                return Ok(());
            }
        };
        let tokens = vocab.encode(&bad).unwrap();
        let mut e = JsonObjectConstraint::new(vocab, &JsonConfig::default()).unwrap();
        let (refused, _) = walk(&mut e, &tokens);
        // The token holding byte `first_bad`.
        let mut end = 0;
        let mut expected = None;
        for (i, &t) in tokens.iter().enumerate() {
            end += vocab.token_bytes(t).len();
            if end > first_bad {
                expected = Some(i);
                break;
            }
        }
        prop_assert_eq!(refused, expected, "{}", trace(vocab, &tokens, refused));
    }
}

/// Every string sub-state has a slice of its own (after `\`, inside `\uXXXX` and between the
/// halves of a surrogate pair, inside a multi-byte character): walking documents one byte-token
/// at a time reaches each of them, in keys and values, at two depths, and at every position the
/// mask must equal the grammar's naive oracle (the bytes of every token run from the state).
#[test]
fn masks_inside_escapes_and_split_characters_equal_the_oracle() {
    use grammask::engine::CopyGrammar;
    use grammask::TokenId;
    let vocab = qwen3();
    let mut single = vec![None; 256];
    for (t, b) in vocab.text_tokens() {
        if b.len() == 1 {
            single[b[0] as usize] = Some(t);
        }
    }
    let byte_tokens = |doc: &str| -> Vec<TokenId> {
        doc.bytes().map(|b| single[b as usize].expect("a single-byte token")).collect()
    };
    let docs = [
        r#"{"k\u00e9y":"caf\u00E9 \ud83c\udf89 \"q\" \\ \/ \b\f\n\r\t","a":["\u6771\u4eac"]}"#,
        "{\"東京\":\"🎉é\",\"x\":[{\"\\u00e9\":\"\\uD83D\\uDE00\"}]}",
    ];
    let mut mask = TokenMask::new(vocab.n_vocab());
    let mut positions = 0;
    for doc in docs {
        let mut e = JsonObjectConstraint::new(vocab, &JsonConfig::default()).unwrap();
        let tokens = byte_tokens(doc);
        for (i, &t) in tokens.iter().enumerate() {
            e.fill_mask(&mut mask).unwrap();
            let o = common::grammar_oracle(vocab, &**e.grammar(), e.state());
            assert!(mask == o, "{doc:?} after {} bytes: {}", i, mask_diff(vocab, &mask, &o));
            e.advance(t).unwrap();
            positions += 1;
        }
        assert!(e.grammar().is_accepting(e.state()), "{doc:?} is complete");
    }
    assert!(positions > 100);
}
