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

/// `doc` spelled one byte per token (every byte has a single-byte token in Qwen3), so a walk
/// stops at every byte position.
fn byte_tokens(vocab: &grammask::Vocabulary, doc: &str) -> Vec<grammask::TokenId> {
    let mut single = vec![None; 256];
    for (t, b) in vocab.text_tokens() {
        if b.len() == 1 {
            single[b[0] as usize] = Some(t);
        }
    }
    doc.bytes().map(|b| single[b as usize].expect("a single-byte token")).collect()
}

/// Every string sub-state has a slice of its own (after `\`, inside `\uXXXX` and between the
/// halves of a surrogate pair, inside a multi-byte character): walking documents one byte-token
/// at a time reaches each of them, in keys and values, at two depths, and at every position the
/// mask must equal the grammar's naive oracle (the bytes of every token run from the state).
#[test]
fn masks_inside_escapes_and_split_characters_equal_the_oracle() {
    use grammask::engine::CopyGrammar;
    let vocab = qwen3();
    let byte_tokens = |doc: &str| byte_tokens(vocab, doc);
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

/// Structural slices (between values, inside numbers and literals, shared by every state that
/// differs only in the containers below the innermost): at every position of documents nested
/// in both container kinds — walked one byte-token at a time and as the tokenizer spells them —
/// the mask equals the grammar's naive oracle, under the default whitespace, compact
/// whitespace, runs of at most 2 bytes (and runs of 6–7, past the slices' 4), and a
/// `max_depth` past which the slices stop applying
/// (18: depth 3 and deeper walk the trie; 8: the second document reaches it, where `[` and
/// `[[` must be refused).
#[test]
fn masks_between_values_equal_the_oracle_at_every_depth_and_policy() {
    use grammask::json::TopLevel;
    use grammask::Whitespace;
    let vocab = qwen3();
    let byte_tokens = |doc: &str| byte_tokens(vocab, doc);
    let compact = [
        r#"{"a":[1,-2.5e+3,true,false,null,{"b":[[],{}],"c":"x"}],"d":{"e":{"f":[0,0.1,"y",[-0]]}},"g":[]}"#,
        r#"[{"k":[{"k":[{"k":[1E9,{"z":null}]}]}]},[[[[true]]]],12]"#,
    ];
    let spaced = [
        "{ \"a\" : [ 1 ,  2 ] ,\n \"b\" : { \"c\" : [ ] , \"d\" :  {  } } , \"e\" : [ [ 3 ] ] }",
        "[ { \"k\" : [ 1.5 , { \"q\" : false } ] } ,\t[ ] ]",
    ];
    let flexible = JsonConfig::default().with_top_level(TopLevel::AnyValue);
    let configs = [
        ("default", flexible.clone(), true),
        ("compact", flexible.clone().with_whitespace(Whitespace::Compact), false),
        ("runs of 2", flexible.clone().with_whitespace(Whitespace::Flexible { max_run: 2 }), true),
        ("max_depth 18", flexible.clone().with_max_depth(18), true),
        ("max_depth 8", flexible.clone().with_max_depth(8), true),
    ];
    let mut mask = TokenMask::new(vocab.n_vocab());
    let mut positions = 0;
    for (name, config, spaces) in &configs {
        // Runs past the slices' 4 whitespace bytes (walked there), where runs may be long.
        let long =
            ["{\"a\" :      [ 1 ,       {\"b\" :\n\n\n\n\n\n null } ] ,     \"c\":       -1 }"];
        let docs = compact
            .iter()
            .chain(if *spaces { &spaced[..] } else { &[][..] })
            .chain(if *name == "default" { &long[..] } else { &[][..] });
        for doc in docs {
            for tokens in [byte_tokens(doc), vocab.encode(doc).unwrap()] {
                let mut e = JsonObjectConstraint::new(vocab, config).unwrap();
                for (i, &t) in tokens.iter().enumerate() {
                    e.fill_mask(&mut mask).unwrap();
                    let o = common::grammar_oracle(vocab, &**e.grammar(), e.state());
                    assert!(
                        mask == o,
                        "{name}: {doc:?} after {}: {}",
                        trace(vocab, &tokens[..i], None),
                        mask_diff(vocab, &mask, &o)
                    );
                    assert!(mask.contains(t), "{name}: {doc:?} token {i} refused");
                    e.advance(t).unwrap();
                    positions += 1;
                }
                e.fill_mask(&mut mask).unwrap();
                assert!(e.is_accepting(), "{name}: {doc:?} is complete");
            }
        }
    }
    assert!(positions > 1000, "{positions}");
}

/// Over a vocabulary with a token of 17 `[` (more levels than a structural slice has room
/// for), the slices do not apply and masks are walked: still the oracle's, at every position,
/// also where that token is allowed and where `max_depth` refuses it.
#[test]
fn a_token_deeper_than_the_slices_room_is_still_masked_exactly() {
    use grammask::json::TopLevel;
    use grammask::vocab::VocabConfig;
    use grammask::{TokenId, Vocabulary};
    let deep = "[".repeat(17);
    let mut pieces: Vec<serde_json::Value> = vec![
        serde_json::json!(["</s>", 0.0]),
        serde_json::json!(["<unk>", 0.0]),
        serde_json::json!([deep, -0.5]),
    ];
    for p in ["[", "]", "{", "}", "\"", ":", ",", "a", "1", " ", "]]", "1]", "}]", "],", "\"a\""] {
        pieces.push(serde_json::json!([p, -1.0]));
    }
    let tok = serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [{"id": 0, "content": "</s>", "single_word": false, "lstrip": false,
                          "rstrip": false, "normalized": false, "special": true}],
        "normalizer": null, "pre_tokenizer": null, "post_processor": null, "decoder": null,
        "model": {"type": "Unigram", "unk_id": 1, "byte_fallback": false, "vocab": pieces}
    });
    let vocab =
        Vocabulary::from_bytes(tok.to_string().as_bytes(), None, &VocabConfig::default()).unwrap();
    let deep_id = TokenId(2);
    let doc = format!("[{{\"a\":[{deep}1{}]}}, 1]", "]".repeat(17));
    let mut mask = TokenMask::new(vocab.n_vocab());
    for max_depth in [64, 19, 20] {
        let config =
            JsonConfig::default().with_top_level(TopLevel::AnyValue).with_max_depth(max_depth);
        let tokens = vocab.encode(&doc).unwrap();
        let mut e = JsonObjectConstraint::new(&vocab, &config).unwrap();
        assert!(tokens.contains(&deep_id), "the document is spelled with the deep token");
        for (i, &t) in tokens.iter().enumerate() {
            e.fill_mask(&mut mask).unwrap();
            let o = common::grammar_oracle(&vocab, &**e.grammar(), e.state());
            assert!(
                mask == o,
                "max_depth {max_depth}, token {i}: {}",
                mask_diff(&vocab, &mask, &o)
            );
            if t == deep_id {
                // 3 levels open: 17 more fit in 20, not in 19.
                assert_eq!(mask.contains(t), max_depth != 19, "max_depth {max_depth}");
                if max_depth == 19 {
                    break;
                }
            }
            e.advance(t).unwrap();
        }
    }
}
