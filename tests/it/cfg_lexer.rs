//! The lexical level of the CFG engine (regular sub-rules run as DFAs, lexeme completions
//! deferred until a byte that can follow them) against the byte-level Earley engine it
//! replaces: on every grammar of `grammars/`, along seeded random walks on the embedded Qwen3
//! vocabulary, both allow exactly the same tokens at every step, accept at the same states and
//! agree on `allows`. Also: which rules become lexemes, and the fallback when a lexeme's DFA
//! is over `max_lexeme_states` or its determinisation over `max_lexer_work`.

use grammask::cfg::CfgGrammar;
use grammask::{CfgConfig, CfgConstraint, ConstraintEngine, TokenId, TokenMask, Vocabulary};
use std::sync::OnceLock;

fn vocab() -> &'static Vocabulary {
    static V: OnceLock<Vocabulary> = OnceLock::new();
    V.get_or_init(|| Vocabulary::embedded().unwrap())
}

fn grammar(name: &str) -> String {
    std::fs::read_to_string(format!("{}/grammars/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn library() -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/grammars"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".gbnf"))
            .collect();
    names.sort();
    names
}

fn pick(mask: &TokenMask, v: &Vocabulary, rng: &mut u64) -> Option<TokenId> {
    let allowed: Vec<TokenId> = mask.iter().filter(|t| !v.is_eos(*t)).collect();
    if allowed.is_empty() {
        return None;
    }
    *rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    Some(allowed[(*rng >> 33) as usize % allowed.len()])
}

/// Walk `fast` and `slow` side by side with random allowed tokens, comparing masks.
fn compare(
    name: &str,
    fast: &mut CfgConstraint,
    slow: &mut CfgConstraint,
    seed: u64,
    steps: usize,
) {
    let v = vocab();
    let mut m1 = TokenMask::new(v.n_vocab());
    let mut m2 = TokenMask::new(v.n_vocab());
    let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for step in 0..steps {
        fast.fill_mask(&mut m1).unwrap();
        slow.fill_mask(&mut m2).unwrap();
        assert!(
            m1 == m2,
            "{name} seed {seed} step {step}: masks differ after {:?}: lexer-only {:?}, byte-level-only {:?}",
            String::from_utf8_lossy(&fast.output_bytes()),
            m1.iter().filter(|t| !m2.contains(*t)).take(5).map(|t| v.describe(t)).collect::<Vec<_>>(),
            m2.iter().filter(|t| !m1.contains(*t)).take(5).map(|t| v.describe(t)).collect::<Vec<_>>()
        );
        assert_eq!(fast.is_accepting(), slow.is_accepting(), "{name} seed {seed} step {step}");
        // `allows` (sample-then-check) on a spread of tokens agrees with the mask.
        for k in 0..64 {
            let t = TokenId::from_index((k * 2_371 + step * 97 + seed as usize) % v.n_tokens());
            assert_eq!(fast.allows(t), m1.contains(t), "{name}: allows({}) ", v.describe(t));
        }
        let Some(t) = pick(&m1, v, &mut rng) else { break };
        fast.advance(t).unwrap();
        slow.advance(t).unwrap();
        assert_eq!(fast.output_bytes(), slow.output_bytes());
    }
}

#[test]
fn lexer_masks_equal_byte_level_masks_on_every_library_grammar() {
    let v = vocab();
    let names = library();
    assert!(names.len() >= 10, "{names:?}");
    let slow_cfg = CfgConfig::default().with_lexer(false);
    for name in &names {
        let text = grammar(name);
        let fast = CfgConstraint::from_gbnf(v, &text, &CfgConfig::default()).unwrap();
        let slow = CfgConstraint::from_gbnf(v, &text, &slow_cfg).unwrap();
        assert!(fast.grammar().lexeme_count() > 0, "{name}: no lexemes");
        assert_eq!(slow.grammar().lexeme_count(), 0);
        for seed in 0..3u64 {
            compare(name, &mut fast.fork(), &mut slow.fork(), seed, 14);
        }
    }
}

#[test]
fn rollback_through_deferred_lexemes() {
    // An identifier lexeme that is accepting at every byte, followed by operators: rollback
    // and re-advance reproduce the same masks.
    let v = vocab();
    let text = grammar("c_expr.gbnf");
    let mut e = CfgConstraint::from_gbnf(v, &text, &CfgConfig::default()).unwrap();
    let toks = v.encode("int total = count + limit;").unwrap();
    let mut masks = Vec::new();
    let mut m = TokenMask::new(v.n_vocab());
    for &t in &toks {
        e.fill_mask(&mut m).unwrap();
        masks.push(m.clone());
        e.advance(t).unwrap();
    }
    e.rollback(toks.len() - 2).unwrap();
    for (i, &t) in toks.iter().enumerate().skip(2) {
        e.fill_mask(&mut m).unwrap();
        assert!(m == masks[i], "mask {i} differs after rollback");
        e.advance(t).unwrap();
    }
}

#[test]
fn regular_rules_become_lexemes() {
    let c = CfgConfig::default();
    let json = CfgGrammar::from_gbnf(&grammar("json.gbnf"), &c).unwrap();
    let names = json.lexeme_names();
    for want in ["string", "number", "ws"] {
        assert!(names.contains(&want), "json.gbnf lexemes {names:?} lack {want}");
    }
    // `value` is recursive (through object and array): it stays a rule.
    assert!(!names.contains(&"value"), "{names:?}");
    let c_expr = CfgGrammar::from_gbnf(&grammar("c_expr.gbnf"), &c).unwrap();
    assert!(c_expr.lexeme_names().contains(&"ident"), "{:?}", c_expr.lexeme_names());
    // A wholly regular grammar is one lexeme: its root.
    let g = CfgGrammar::from_gbnf("root ::= [a-z]+ (\",\" [a-z]+)*", &c).unwrap();
    assert_eq!(g.lexeme_names(), vec!["root"]);
    // Left recursion through a rule other than the loop form is not regular.
    let g =
        CfgGrammar::from_gbnf("root ::= e\ne ::= e \"+\" t | t\nt ::= \"(\" e \")\" | [0-9]", &c)
            .unwrap();
    assert!(!g.lexeme_names().contains(&"e"));
}

#[test]
fn oversized_lexeme_falls_back_to_rules_with_the_same_masks() {
    let v = vocab();
    // `word{0,20}` of a 5-letter lexeme has far more than 8 DFA states: the root stays a rule,
    // its sub-rules become lexemes instead, and the masks do not change.
    let text = "root ::= (word \" \"){0,20}\nword ::= [a-e] [a-e] [a-e] [a-e] [a-e]";
    let small = CfgConfig::default().with_max_lexeme_states(8);
    let g = CfgGrammar::from_gbnf(text, &small).unwrap();
    assert!(!g.lexeme_names().contains(&"root"), "{:?}", g.lexeme_names());
    let full = CfgGrammar::from_gbnf(text, &CfgConfig::default()).unwrap();
    assert_eq!(full.lexeme_names(), vec!["root"]);
    let mut a = CfgConstraint::from_gbnf(v, text, &small).unwrap();
    let mut b = CfgConstraint::from_gbnf(v, text, &CfgConfig::default().with_lexer(false)).unwrap();
    compare("word-list", &mut a, &mut b, 7, 12);
}

#[test]
fn lexer_work_budget_falls_back_to_rules_with_the_same_masks() {
    let v = vocab();
    // The same grammar under a determinisation budget too small for the root's DFA (an NFA
    // of ~150 states) but not for its item's, `word " "`: the root stays a rule, the item is
    // a lexeme.
    let text = "root ::= (word \" \"){0,20}\nword ::= [a-e] [a-e] [a-e] [a-e] [a-e]";
    let tight = CfgConfig::default().with_max_lexer_work(2_000);
    let g = CfgGrammar::from_gbnf(text, &tight).unwrap();
    assert_eq!(g.lexeme_names(), vec!["<root-item>"]);
    let full = CfgGrammar::from_gbnf(text, &CfgConfig::default()).unwrap();
    assert_eq!(full.lexeme_names(), vec!["root"]);
    let none = CfgGrammar::from_gbnf(text, &CfgConfig::default().with_max_lexer_work(0)).unwrap();
    assert_eq!(none.lexeme_count(), 0);
    let mut a = CfgConstraint::from_gbnf(v, text, &tight).unwrap();
    let mut b = CfgConstraint::from_gbnf(v, text, &CfgConfig::default().with_lexer(false)).unwrap();
    compare("word-list-work", &mut a, &mut b, 11, 12);
}

#[test]
fn long_rule_chains_compile_and_stay_exact() {
    // 3,000 rules, each a literal and the next rule: regular, but too deep to inline whole
    // (HIR depth bound), so the chain is split between grammar rules and lexemes. The analysis
    // is linear, so this compiles promptly; the language is still exactly "a"×3000 "b".
    let n = 3_000;
    let mut text = String::from("root ::= r0\n");
    for i in 0..n {
        text += &format!("r{i} ::= \"a\" r{}\n", i + 1);
    }
    text += &format!("r{n} ::= \"b\"\n");
    let g = CfgGrammar::from_gbnf(&text, &CfgConfig::default()).unwrap();
    assert!(g.lexeme_count() >= 1);
    assert!(!g.lexeme_names().contains(&"root"));
    let v = vocab();
    let mut e = CfgConstraint::from_gbnf(v, &text, &CfgConfig::default()).unwrap();
    let mut doc = vec![b'a'; n];
    doc.push(b'b');
    assert_eq!(e.fork().advance_bytes(&doc[..n - 1]).map(|_| ()), Ok(()));
    assert!(e.fork().advance_bytes(b"aab").is_err());
    e.advance_bytes(&doc).unwrap();
    assert!(e.is_accepting());
}

/// Walk `doc` token by token through `a` and `b`, comparing every mask (and the final one).
fn compare_on_document(name: &str, a: &mut CfgConstraint, b: &mut CfgConstraint, doc: &str) {
    crate::common::cfg_masks_agree(vocab(), name, a, b, doc);
}

#[test]
fn slices_and_pure_exits_keep_masks_on_documents_of_permissive_grammars() {
    // The vocabulary slices (tokens that stay inside a lexeme state, allowed as a block; the
    // other tokens walked as suffixes after the lexeme, `PureExits`) against the plain trie
    // walk, on documents that pass through a string body, identifiers, keywords and
    // whitespace runs: the states that get slices are chosen by how many tokens they keep,
    // so a string body (`'…'` in SQL) gets one even after many identifier states.
    let v = vocab();
    let plain = CfgConfig::default().with_slice_min_tokens(usize::MAX);
    for (name, doc) in [
        (
            "sql_select.gbnf",
            "SELECT DISTINCT u.name, COUNT(*) AS orders FROM users AS u LEFT JOIN orders AS o ON u.id = o.user_id WHERE o.total > 100 AND (u.country = 'DE, \"Berlin\"' OR u.vip IS NOT NULL) GROUP BY u.name ORDER BY orders DESC LIMIT 20;",
        ),
        (
            "c_expr.gbnf",
            "int total = 0;\nwhile (i < n) {\n  total += values[i] * weight(i, n);\n  if (total > limit && !force) { return total - limit; }\n  i = i + 1;\n}\nreturn total;",
        ),
        ("json.gbnf", r#"{"id": 12345, "name": "Widget \"Pro\" \u00e9", "tags": ["a", "b"], "ok": true}"#),
    ] {
        let text = grammar(name);
        let fast = CfgConstraint::from_gbnf(v, &text, &CfgConfig::default()).unwrap();
        assert!(fast.slice_count() > 0, "{name}: no slices");
        // The tokens after a space that run inside an identifier (or a string body): a block
        // below the trie's `' '` node where the set after the space holds such an item.
        if name != "json.gbnf" {
            assert!(fast.node_slice_count() > 0, "{name}: no node slices");
        }
        let slow = CfgConstraint::from_gbnf(v, &text, &plain).unwrap();
        assert_eq!(slow.slice_count(), 0);
        compare_on_document(name, &mut fast.fork(), &mut slow.fork(), doc);
    }
}

#[test]
fn node_slices_keep_masks_on_byte_level_and_sentencepiece_vocabularies() {
    // The tokens below the vocabulary's space node that run inside one lexeme (a block where
    // the set after the space holds its item): Llama 3 spells the space as the byte ` `,
    // Llama 2 (SentencePiece) as `▁`, decoded to a space. On a C document with statement
    // starts, spaces before operands and runs of indentation, masks with all slices equal
    // masks without any, step by step.
    let dir = std::env::var_os("GRAMMASK_SHARED")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared"));
    let doc = "int total = 0;\nwhile (i < n) {\n    total += values[i] * weight(i, n);\n    if (total > limit && !force) { return total - limit; }\n  i = i + 1;\n}\nreturn total;";
    let text = grammar("c_expr.gbnf");
    let plain = CfgConfig::default().with_slice_min_tokens(usize::MAX);
    for name in ["llama3", "llama2"] {
        let path = dir.join("tokenizers").join(format!("{name}.json"));
        if !path.is_file() {
            eprintln!(
                "skipped {name}: {} absent (the shared data is beside the repository in CI)",
                path.display()
            );
            continue;
        }
        let v = Vocabulary::from_file(&path).unwrap();
        let fast = CfgConstraint::from_gbnf(&v, &text, &CfgConfig::default()).unwrap();
        assert!(fast.node_slice_count() > 0, "{name}: no node slices");
        let slow = CfgConstraint::from_gbnf(&v, &text, &plain).unwrap();
        assert_eq!(slow.node_slice_count(), 0);
        crate::common::cfg_masks_agree(&v, name, &mut fast.fork(), &mut slow.fork(), doc);
    }
}
