//! GBNF token terminals (`<[id]>`, `<name>`, `!<…>`, as llama.cpp's grammar parser takes them)
//! through the CFG engine, on the embedded Qwen3 vocabulary: a token terminal is allowed exactly
//! where an Earley item expects it, matches that token id and never its spelling in text tokens,
//! a special token never matches a byte terminal, negation takes any one token but the named one,
//! unknown names and ids are typed errors, and rollback crosses token steps.
//!
//! Qwen3's `<|im_start|>` is a special token, `<|im_end|>` a special token that is also EOS,
//! `<tool_call>` / `<think>` / `</think>` added tokens that are text (they have bytes).

use crate::common;

use common::{mask_diff, qwen3, trace};
use grammask::cfg::{CfgConfig, CfgErrorKind};
use grammask::{CfgConstraint, ConstraintEngine, TokenId, TokenMask};

fn engine(gbnf: &str) -> CfgConstraint {
    CfgConstraint::from_gbnf(qwen3(), gbnf, &CfgConfig::default())
        .unwrap_or_else(|e| panic!("{gbnf}: {e}"))
}

fn id(name: &str) -> TokenId {
    qwen3().token_id(name).unwrap_or_else(|| panic!("{name} is a token"))
}

/// The single token that encodes `text`.
fn one(text: &str) -> TokenId {
    let t = qwen3().encode(text).unwrap();
    assert_eq!(t.len(), 1, "{text:?} is one token");
    t[0]
}

fn mask(e: &mut CfgConstraint) -> TokenMask {
    let mut m = TokenMask::new(qwen3().n_vocab());
    e.fill_mask(&mut m).unwrap();
    m
}

/// The naive oracle, by `advance`: the tokens a copy of the engine accepts.
fn advance_oracle(e: &CfgConstraint) -> TokenMask {
    let v = qwen3();
    let mut m = TokenMask::new(v.n_vocab());
    for i in 0..v.n_vocab() {
        let t = TokenId::from_index(i);
        if e.fork_at().advance(t).is_ok() {
            m.insert(t);
        }
    }
    m
}

/// The mask equals both oracles (`allows` for every id, and `advance` on a copy).
fn assert_exact(e: &mut CfgConstraint, what: &str) {
    let v = qwen3();
    let fast = mask(e);
    let by_allows = common::oracle_mask(e);
    assert!(fast == by_allows, "{what}: {}", mask_diff(v, &fast, &by_allows));
    let by_advance = advance_oracle(e);
    assert!(fast == by_advance, "{what}: {}", mask_diff(v, &fast, &by_advance));
}

fn kinds() -> (TokenId, TokenId, TokenId) {
    (id("<|im_start|>"), id("<|im_end|>"), id("<tool_call>"))
}

#[test]
fn the_vocabulary_has_the_tokens_these_tests_use() {
    let v = qwen3();
    let (start, end, call) = kinds();
    assert_eq!(v.kind(start), grammask::vocab::TokenKind::Special);
    assert!(v.is_eos(end));
    assert_eq!(v.token_bytes(call), b"<tool_call>");
}

#[test]
fn a_special_token_is_allowed_exactly_where_expected() {
    let v = qwen3();
    let start = id("<|im_start|>");
    let mut e = engine("root ::= \"hi\" <|im_start|> \"x\"");
    assert!(!mask(&mut e).contains(start), "not before \"hi\"");
    assert!(e.advance(start).is_err());
    e.advance(one("hi")).unwrap();
    let m = mask(&mut e);
    assert_eq!(m.iter().collect::<Vec<_>>(), vec![start], "only the special token after \"hi\"");
    assert_exact(&mut e, "after hi");
    // Its spelling in text tokens does not match it.
    assert!(e.advance(one("<")).is_err());
    assert!(!e.allows(one("<")));
    e.advance(start).unwrap();
    assert_eq!(e.output_bytes(), b"hi", "a special token adds no bytes");
    assert_eq!(e.bytes_consumed(), 2);
    assert!(mask(&mut e).contains(one("x")));
    assert!(!e.is_accepting());
    e.advance(one("x")).unwrap();
    assert!(e.is_accepting());
    assert!(mask(&mut e).contains(v.eos_ids()[0]));
    assert_eq!(e.output_bytes(), b"hix");
}

#[test]
fn by_id_is_the_same_as_by_name() {
    let start = id("<|im_start|>");
    let mut a = engine("root ::= \"a\" <|im_start|>");
    let mut b = engine(&format!("root ::= \"a\" <[{}]>", start.0));
    for e in [&mut a, &mut b] {
        e.advance(one("a")).unwrap();
        assert_eq!(mask(e).iter().collect::<Vec<_>>(), vec![start]);
        e.advance(start).unwrap();
        assert!(e.is_accepting());
    }
}

#[test]
fn a_special_token_does_not_match_a_text_terminal() {
    let start = id("<|im_start|>");
    let mut e = engine("root ::= \"<|im_start|>\" \"x\"");
    let m = mask(&mut e);
    assert!(!m.contains(start));
    assert!(m.contains(one("<")), "the spelling in text tokens is allowed");
    assert!(e.advance(start).is_err());
    assert_exact(&mut e, "text terminal");
}

#[test]
fn a_text_added_token_named_matches_its_id_not_its_spelling() {
    // `<tool_call>` is an added token with bytes: as a token terminal only its id matches; the
    // same bytes spelled by other tokens do not.
    let call = id("<tool_call>");
    let mut e = engine("root ::= <tool_call> \"{}\" </tool_call>");
    let m = mask(&mut e);
    assert_eq!(m.iter().collect::<Vec<_>>(), vec![call]);
    assert!(e.advance(one("<")).is_err());
    e.advance(call).unwrap();
    assert_eq!(e.output_bytes(), b"<tool_call>", "a text token keeps its bytes");
    e.advance(one("{}")).unwrap();
    assert_eq!(mask(&mut e).iter().collect::<Vec<_>>(), vec![id("</tool_call>")]);
    e.advance(id("</tool_call>")).unwrap();
    assert!(e.is_accepting());
    // As a literal, the same token is plain text and matches by its bytes.
    let mut lit = engine("root ::= \"<tool_call>\"");
    let m = mask(&mut lit);
    assert!(m.contains(call) && m.contains(one("<")));
}

#[test]
fn an_eos_token_named_by_the_grammar_is_a_grammar_token_where_expected() {
    let v = qwen3();
    let end = id("<|im_end|>");
    let mut e = engine("root ::= \"a\" <|im_end|> \"b\"");
    e.advance(one("a")).unwrap();
    assert!(!e.is_accepting());
    assert_eq!(mask(&mut e).iter().collect::<Vec<_>>(), vec![end]);
    e.advance(end).unwrap();
    assert!(!e.is_finished(), "scanned by the grammar, not EOS");
    e.advance(one("b")).unwrap();
    assert!(e.is_accepting());
    let m = mask(&mut e);
    assert!(m.contains(end), "EOS where the chart accepts");
    e.advance(v.eos_ids()[0]).unwrap();
    assert!(e.is_finished());
}

#[test]
fn negation_takes_any_one_token_but_the_named_one() {
    let v = qwen3();
    let start = id("<|im_start|>");
    let mut e = engine("root ::= !<|im_start|> \"a\"");
    let m = mask(&mut e);
    assert!(!m.contains(start));
    assert!(v.eos_ids().iter().all(|&x| !m.contains(x)), "EOS is never a grammar token");
    assert!(
        m.contains(one("hello")) && m.contains(id("<|vision_pad|>")) && m.contains(id("<think>"))
    );
    assert_eq!(m.count(), v.n_tokens() - 1 - v.eos_ids().len());
    e.advance(one("hello")).unwrap();
    assert_eq!(e.output_bytes(), b"hello");
    assert_exact(&mut e, "after a negated token");
    assert_eq!(mask(&mut e).iter().filter(|&t| v.token_bytes(t) == b"a").count(), 1);
    e.advance(one("a")).unwrap();
    assert!(e.is_accepting());
}

#[test]
fn negation_and_bytes_in_one_token_are_both_kept() {
    // `ab` as one token is the negated terminal whole, or the literal "ab": both paths reach
    // "c". `a` alone is the negated terminal (then "c") or half the literal (then "b").
    let mut e = engine("root ::= (!<|im_start|> | \"ab\") \"c\"");
    let mut f = e.fork();
    e.advance(one("ab")).unwrap();
    assert_exact(&mut e, "after ab");
    f.advance(one("a")).unwrap();
    let m = mask(&mut f);
    assert!(m.contains(one("b")) && m.contains(one("c")));
    assert!(!m.contains(one("d")));
    assert_exact(&mut f, "after a");
    f.advance(one("b")).unwrap();
    assert!(mask(&mut f).contains(one("c")));
    assert!(!f.is_accepting());
}

#[test]
fn think_block_of_any_tokens() {
    let v = qwen3();
    let (think, end_think) = (id("<think>"), id("</think>"));
    let mut e = engine("root ::= <think> (!</think>)* </think> [a-z]+");
    assert_eq!(mask(&mut e).iter().collect::<Vec<_>>(), vec![think]);
    e.advance(think).unwrap();
    for t in ["Let", " me", " think", "</", "think", ">"] {
        let t = one(t);
        assert!(mask(&mut e).contains(t), "{}", v.describe(t));
        e.advance(t).unwrap();
    }
    assert!(!e.is_accepting());
    e.advance(end_think).unwrap();
    assert_exact(&mut e, "after </think>");
    e.advance(one("ok")).unwrap();
    assert!(e.is_accepting());
}

#[test]
fn rollback_across_a_special_token() {
    let start = id("<|im_start|>");
    let mut e = engine("root ::= \"hi\" (<|im_start|> \"x\" | \"y\")");
    e.advance(one("hi")).unwrap();
    let before = mask(&mut e);
    assert!(before.contains(start) && before.contains(one("y")));
    e.advance(start).unwrap();
    e.advance(one("x")).unwrap();
    assert!(e.is_accepting());
    e.rollback(2).unwrap();
    assert_eq!(e.output_bytes(), b"hi");
    assert_eq!(e.bytes_consumed(), 2);
    let after = mask(&mut e);
    assert!(after == before, "{}", mask_diff(qwen3(), &after, &before));
    e.advance(one("y")).unwrap();
    assert!(e.is_accepting());
    e.rollback(1).unwrap();
    e.advance(start).unwrap();
    e.rollback(1).unwrap();
    assert!(mask(&mut e) == before);
}

#[test]
fn unknown_names_and_ids_are_typed_errors() {
    let v = qwen3();
    let e = CfgConstraint::from_gbnf(v, "root ::= \"a\"\n  <|no_such|>", &CfgConfig::default())
        .unwrap_err();
    assert_eq!(
        e.kind(),
        &CfgErrorKind::UnknownToken { name: "<|no_such|>".into(), line: 2, column: 3 }
    );
    assert!(e.to_string().contains("<|no_such|>"), "{e}");
    let e =
        CfgConstraint::from_gbnf(v, "root ::= !<[99999999]>", &CfgConfig::default()).unwrap_err();
    assert!(
        matches!(
            e.kind(),
            CfgErrorKind::TokenOutOfRange { id: 99_999_999, line: 1, column: 10, .. }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("99999999"), "{e}");
    // The grammar alone compiles: names resolve against a vocabulary.
    assert!(grammask::cfg::check("root ::= <|no_such|>", &CfgConfig::default()).is_ok());
}

#[test]
fn random_generation_through_token_terminals() {
    // A small xorshift: every sample is a token of the mask; the output must then have the
    // grammar's shape (checked on the token sequence, not by the engine).
    let v = qwen3();
    let (start, end) = (id("<|im_start|>"), id("<|im_end|>"));
    let base = engine("root ::= (<|im_start|> [a-z]{1,3} <|im_end|>){1,3}");
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    for _ in 0..20 {
        let mut e = base.fork();
        let mut toks = Vec::new();
        let mut m = TokenMask::new(v.n_vocab());
        while !e.is_finished() && toks.len() < 40 {
            e.fill_mask(&mut m).unwrap();
            let allowed: Vec<TokenId> = m.iter().collect();
            assert!(!allowed.is_empty(), "{}", trace(v, &toks, None));
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let t = allowed[(seed % allowed.len() as u64) as usize];
            e.advance(t).unwrap();
            toks.push(t);
        }
        assert!(e.is_finished(), "{}", trace(v, &toks, None));
        // Shape: (start text+ end)+ then EOS; text tokens are lowercase letters.
        let body = &toks[..toks.len() - 1];
        let mut i = 0;
        let mut blocks = 0;
        while i < body.len() {
            assert_eq!(body[i], start, "{}", trace(v, &toks, Some(i)));
            let mut j = i + 1;
            let mut letters = 0;
            while body[j] != end {
                let b = v.token_bytes(body[j]);
                assert!(b.iter().all(u8::is_ascii_lowercase), "{}", trace(v, &toks, Some(j)));
                letters += b.len();
                j += 1;
            }
            assert!((1..=3).contains(&letters), "{}", trace(v, &toks, None));
            blocks += 1;
            i = j + 1;
        }
        assert!((1..=3).contains(&blocks));
        assert!(v.is_eos(*toks.last().unwrap()));
    }
}

#[test]
fn check_lists_the_token_terminals() {
    let r = grammask::cfg::check("root ::= <[7]> (!<|im_end|>)* <think>", &CfgConfig::default())
        .unwrap();
    assert_eq!(r.tokens, vec!["<[7]>", "!<|im_end|>", "<think>"]);
    let text = r.to_string();
    assert!(text.contains("token terminals: <[7]>, !<|im_end|>, <think>"), "{text}");
    assert!(text.contains("root ::= <[7]> !<|im_end|>* <think>"), "{text}");
}
