//! The fuzz campaign's minimised crashers (`fuzz/`, docs/fuzzing.md), replayed as data: every
//! file in `fuzz/regressions/<target>/` goes through the API its target drives and must get a
//! typed verdict, never a panic. A new crasher is a new file there (and, where its verdict is
//! not the directory's rule, a line in the test below).

use grammask::vocab::{TokenKind, VocabConfig, VocabErrorKind};
use grammask::{Constraint, TokenId, TokenMask, Vocabulary};
use std::path::PathBuf;

/// The files of `fuzz/regressions/<target>/`, sorted by name.
fn crashers(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions").join(target);
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|f| {
            let path = f.expect("entry").path();
            let name = path.file_name().expect("name").to_string_lossy().into_owned();
            (name, std::fs::read(&path).expect("readable"))
        })
        .collect();
    out.sort();
    out
}

/// `vocab_load` inputs: `tokenizer.json` bytes, then optionally a NUL and the config's bytes.
fn split_nul(bytes: &[u8]) -> (&[u8], Option<&[u8]>) {
    match bytes.iter().position(|&b| b == 0) {
        Some(i) => (&bytes[..i], Some(&bytes[i + 1..])),
        None => (bytes, None),
    }
}

#[test]
fn malformed_tokenizer_files_are_typed_errors_not_panics() {
    let files = crashers("vocab_load");
    assert!(!files.is_empty(), "fuzz/regressions/vocab_load holds the crashers");
    for (name, bytes) in files.into_iter().filter(|(n, _)| !n.starts_with("loads_")) {
        let (tokenizer, config) = split_nul(&bytes);
        match Vocabulary::from_bytes(tokenizer, config, &VocabConfig::default()) {
            Err(e) => assert!(
                matches!(e.kind(), VocabErrorKind::Tokenizer(_)),
                "{name}: not a tokenizer error: {e}"
            ),
            Ok(v) => panic!("{name}: loaded a malformed tokenizer ({} tokens)", v.n_tokens()),
        }
    }
}

#[test]
fn a_syntax_error_inside_the_decoder_says_the_file_is_malformed() {
    // tokenizers 0.22 panics on it (`expect("Helper")`); the loader turns that into its error.
    let e = Vocabulary::from_bytes(br#"{"decoder":["#, None, &VocabConfig::default()).unwrap_err();
    assert!(e.to_string().contains("malformed tokenizer.json"), "{e}");
}

/// `loads_*` crashers are valid vocabularies the target found a wrong verdict on: they load,
/// EOS is never text, and free-form JSON's first mask equals `allows` for every id.
#[test]
fn vocabularies_the_fuzzer_found_give_masks_equal_to_allows() {
    let files: Vec<_> =
        crashers("vocab_load").into_iter().filter(|(n, _)| n.starts_with("loads_")).collect();
    assert!(!files.is_empty(), "fuzz/regressions/vocab_load holds loads_* files");
    for (name, bytes) in files {
        let (tokenizer, config) = split_nul(&bytes);
        let vocab = Vocabulary::from_bytes(tokenizer, config, &VocabConfig::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!vocab.eos_ids().is_empty(), "{name}: has an EOS");
        for &e in vocab.eos_ids() {
            assert_ne!(vocab.kind(e), TokenKind::Text, "{name}: EOS {e:?} is text");
            assert!(vocab.token_bytes(e).is_empty(), "{name}: EOS {e:?} has bytes");
            assert!(vocab.text_tokens().all(|(t, _)| t != e), "{name}: EOS in the trie's tokens");
        }
        let compiled = Constraint::json().compile(&vocab).expect("compiles");
        let mut engine = compiled.engine();
        let mut mask = TokenMask::new(vocab.n_vocab());
        // At the start, and inside a string where the vocabulary can open one (the string
        // slices: `loads_empty_text_token_*` has a text token with no bytes, which their
        // build indexed by its first byte).
        let quote = vocab.text_tokens().find(|(_, b)| *b == b"\"").map(|(t, _)| t);
        for step in 0..2 {
            engine.fill_mask(&mut mask).expect("mask");
            for i in 0..vocab.n_vocab() {
                let t = TokenId::from_index(i);
                let ours = mask.contains(t);
                assert_eq!(
                    ours,
                    engine.allows(t),
                    "{name}: mask vs allows on {t:?} at step {step}"
                );
            }
            match quote {
                Some(q) if step == 0 && engine.allows(q) => engine.advance(q).expect("a quote"),
                _ => break,
            }
        }
    }
}

/// `regex_compile` crashers: `*.regex` files hold the plain pattern (the others are the target's
/// raw inputs, for `cargo fuzz run`). Patterns whose dense DFA took seconds to build before the
/// determiniser hit its 64 MiB limit; the dense attempt is now held to
/// [`RegexConfig::dense_max_memory`], so each goes to the lazy DFA (its compile bounded by that
/// budget, not by the pattern), and the lazy DFA's verdicts on strings of and near the language
/// are regex-automata's.
#[test]
fn patterns_the_fuzzer_found_slow_go_lazy_with_the_right_verdicts() {
    use grammask::engine::CopyGrammar;
    use grammask::recognizer::run_bytes;
    use grammask::regex::RegexGrammar;
    use grammask::RegexConfig;
    let files: Vec<_> =
        crashers("regex_compile").into_iter().filter(|(n, _)| n.ends_with(".regex")).collect();
    assert!(files.len() >= 2, "fuzz/regressions/regex_compile holds *.regex files");
    // Members of the first two patterns' languages (the second also matches the other one).
    let member_1 = "aa6aawaaaaaqaawaaaaaq".to_string();
    let member_2 = format!("aa6aawaaaaa{}aawaaaaa{}7qq", "q".repeat(13), "q".repeat(53));
    for (name, bytes) in files {
        let pattern = String::from_utf8(bytes).expect("a pattern is text");
        let g = RegexGrammar::with_config(&pattern, &RegexConfig::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(g.is_lazy(), "{name}: over the dense budget, so lazy");
        let judge = regex_automata::meta::Regex::new(&format!(r"\A(?:{pattern})\z")).unwrap();
        let mut probes = vec![String::new(), member_1.clone(), member_2.clone()];
        for i in 1..3 {
            // One character off: dropped, or a `q` turned into a space.
            let p = probes[i].clone();
            probes.push(p[1..].to_string());
            probes.push(p.replacen('q', " ", 1));
        }
        // Random strings over the patterns' letters.
        let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..200 {
            let n = 10 + (rng % 90) as usize;
            let s: String = (0..n)
                .map(|_| {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    ['a', 'q', '6', ' ', '\u{b}', '\0', 'g', 't'][(rng % 8) as usize]
                })
                .collect();
            probes.push(s);
        }
        let start = g.initial();
        let mut members = 0;
        for p in &probes {
            let end = run_bytes(&g, &start, p.as_bytes());
            let ours = end.as_ref().is_some_and(|s| g.is_accepting(s));
            assert_eq!(ours, judge.is_match(p), "{name}: verdict on {p:?}");
            members += usize::from(ours);
        }
        if name.starts_with("dense_dfa") || name.starts_with("fuzzer_original") {
            assert!(members > 0, "{name}: a probe is in the language");
        }
    }
}

/// `gbnf_parse` finding 11: a character class that swallowed the separators of the rules
/// around it (`[a-zA\x14…\x14-Z0-9_]`: a range from 0x14 to `Z`, which takes in space, `,`,
/// `(`, `)`) made two regular rules of the SQL grammar determinise to ~60,000 states each
/// before the lexeme limit refused them — 10 s of CPU in `cfg::check` in a release build. The
/// determiniser's work is now budgeted (`CfgConfig::max_lexer_work`); past it the rule stays a
/// grammar rule, so the language is the same: the masks along a walk equal the byte-level
/// engine's, and `allows` agrees with them.
#[test]
fn grammars_the_fuzzer_found_slow_compile_with_byte_level_masks() {
    use grammask::{CfgConfig, CfgConstraint, ConstraintEngine};
    let files = crashers("gbnf_parse");
    assert!(!files.is_empty(), "fuzz/regressions/gbnf_parse holds the grammars");
    let v = Vocabulary::embedded().unwrap();
    for (name, bytes) in files {
        let text = String::from_utf8(bytes).expect("a grammar is text");
        let mut fast = CfgConstraint::from_gbnf(&v, &text, &CfgConfig::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut slow = CfgConstraint::from_gbnf(&v, &text, &CfgConfig::default().with_lexer(false))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let (mut m1, mut m2) = (TokenMask::new(v.n_vocab()), TokenMask::new(v.n_vocab()));
        // Spell the start of a query, then take the mask's lowest allowed text tokens.
        for step in 0..12 {
            fast.fill_mask(&mut m1).unwrap();
            slow.fill_mask(&mut m2).unwrap();
            assert!(m1 == m2, "{name} step {step}: masks differ after {:?}", fast.output_bytes());
            for k in 0..64 {
                let t = TokenId::from_index((k * 2_371 + step * 97) % v.n_tokens());
                assert_eq!(fast.allows(t), m1.contains(t), "{name} step {step}: allows");
            }
            let Some(t) = m1.iter().filter(|t| !v.is_eos(*t)).nth(step % 3) else { break };
            fast.advance(t).unwrap();
            slow.advance(t).unwrap();
        }
    }
}

/// `schema_json` finding: under `uniqueItems`, a number item in its exponent has finitely many
/// completions (an exponent has at most nine digits; a zero mantissa is zero whatever follows),
/// so `[4,true,42,422,4E+000000000` — nine exponent digits, the value 4 again — was a dead end
/// the mask allowed into. The byte that makes every completion a duplicate is now refused.
#[test]
fn a_unique_number_item_cannot_enter_an_exponent_with_only_duplicates() {
    use grammask::schema::{CompiledSchema, SchemaConstraint, SchemaOptions};
    let files = crashers("schema_json");
    assert!(!files.is_empty());
    let vocab = crate::common::qwen3();
    for (name, bytes) in &files {
        // The target's input: an options byte, then the schema's text.
        let schema: serde_json::Value = serde_json::from_slice(&bytes[1..]).expect(name);
        let compiled = CompiledSchema::compile(&schema, &SchemaOptions::default()).expect(name);
        let mut e = SchemaConstraint::new(compiled, vocab);
        assert!(e.accepts_bytes(b"[4,true,42,422,4E+00000000"), "{name}");
        assert!(!e.accepts_bytes(b"[4,true,42,422,4E+000000000"), "{name}: a duplicate of 4");
        assert!(e.accepts_bytes(b"[4,true,42,422,4E+000000001"), "{name}");
        assert!(!e.accepts_bytes(b"[0,-0.0e"), "{name}: 0 whatever follows");
        assert!(!e.accepts_bytes(b"[0,0E"), "{name}");
        assert!(e.accepts_bytes(b"[1,0E"), "{name}");
        assert!(e.accepts_bytes(b"[0,0.0"), "{name}: 0.01 is new");
    }
    // Without uniqueItems nothing changes.
    let plain =
        CompiledSchema::compile(&serde_json::json!({"type": "array"}), &SchemaOptions::default())
            .unwrap();
    let mut e = SchemaConstraint::new(plain, vocab);
    assert!(e.accepts_bytes(b"[0,0E") && e.accepts_bytes(b"[4,4E+000000000"));
}

/// `schema_json` finding after the fix above: the mask's number fast path took exponent tokens
/// from a set cached by the text's class, so under `uniqueItems` it allowed `E` where `allows`
/// (and the items seen) refuse it. Masks of a number item are now walked, never cached: after
/// `[0` and then `[0,0` on the same compiled schema, the mask equals `allows`.
#[test]
fn a_unique_number_items_mask_equals_allows_in_its_exponent() {
    use grammask::schema::{CompiledSchema, SchemaConstraint, SchemaOptions};
    use grammask::ConstraintEngine;
    let vocab = crate::common::qwen3();
    let schema = serde_json::json!({"type": "array", "uniqueItems": true, "maxItems": 3});
    let compiled = CompiledSchema::compile(&schema, &SchemaOptions::default()).unwrap();
    let mut mask = TokenMask::new(vocab.n_vocab());
    // `[0` first: its mask (nothing seen, `E` allowed) was cached for the text class of `0`
    // and then served to `[0,0`, where `E` leads only to a duplicate.
    for doc in ["[0", "[0,0", "[4,4e+00000000", "[1,0.0"] {
        let mut e = SchemaConstraint::new(compiled.clone(), vocab);
        for b in doc.bytes() {
            let t = vocab.text_tokens().find(|(_, x)| *x == [b]).expect("a one-byte token").0;
            e.advance(t).expect(doc);
        }
        e.fill_mask(&mut mask).unwrap();
        for i in 0..vocab.n_vocab() {
            let t = TokenId::from_index(i);
            assert_eq!(mask.contains(t), e.allows(t), "{doc}: {}", vocab.describe(t));
        }
    }
}
