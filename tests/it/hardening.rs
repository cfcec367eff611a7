//! Hostile input (issue #19): each class of input that once stalled grammask, grew its memory
//! without bound or got a wrong verdict with exit 0, at a size small enough for the test suite.
//! The bound each test shows is a typed error naming its limit (the big inputs that show the
//! time bound live in the fuzz targets and `docs/limits.md`), or the right verdict.

use crate::common;
use grammask::cfg::CfgConfig;
use grammask::decode::{decode, DecodeConfig, LogitsSource, ThinkConfig, ThinkGate, ThinkMarkers};
use grammask::schema::{parse_schema_text, SchemaErrorKind, SchemaLimits};
use grammask::vocab::{VocabConfig, VocabErrorKind};
use grammask::{
    Constraint, ConstraintEngine, ConstraintError, EngineErrorKind, SchemaOptions, TokenId,
    TokenMask, Vocabulary,
};
use serde_json::json;
use std::process::Command;

fn schema_error(schema: &serde_json::Value, options: SchemaOptions) -> SchemaErrorKind {
    match Constraint::json_schema_with(schema, options).compile(common::qwen3()) {
        Err(ConstraintError::Schema(e)) => e.kind().clone(),
        Err(other) => panic!("{schema}: not a schema error: {other}"),
        Ok(_) => panic!("{schema}: compiled"),
    }
}

fn walk_text(c: &Constraint, text: &str) -> (Option<usize>, bool) {
    let vocab = common::qwen3();
    let mut e = c.compile(vocab).unwrap().engine();
    let tokens = vocab.encode_exact(text).unwrap();
    common::walk(&mut *e, &tokens)
}

fn accepts(c: &Constraint, text: &str) -> bool {
    let (refused, eos) = walk_text(c, text);
    refused.is_none() && eos
}

// --- Budgets checked before and during the work -------------------------------------------

#[test]
fn a_huge_enum_is_refused_by_its_size_before_pairwise_work() {
    let members: Vec<_> = (0..20_000).map(|i| json!({ "k": i })).collect();
    let k = schema_error(&json!({ "enum": members }), SchemaOptions::default());
    assert!(matches!(k, SchemaErrorKind::Limit { limit: "alternatives", value: 256, .. }), "{k:?}");
    // An enum's numbers are one alternative (a sorted set), however many.
    let numbers: Vec<u32> = (0..20_000).collect();
    let c = Constraint::json_schema(&json!({ "enum": numbers }));
    assert!(accepts(&c, "19999") && accepts(&c, "1.25e2") && !accepts(&c, "20000"));
    let anyof: Vec<_> = (0..2_000).map(|i| json!({ "const": i })).collect();
    let k = schema_error(&json!({ "anyOf": anyof }), SchemaOptions::default());
    assert!(matches!(k, SchemaErrorKind::Limit { limit: "alternatives", value: 256, .. }), "{k:?}");
}

#[test]
fn a_huge_one_of_is_refused_before_the_disjointness_check() {
    let branches: Vec<_> = (0..5_000).map(|i| json!({ "const": i })).collect();
    let k = schema_error(&json!({ "oneOf": branches }), SchemaOptions::default());
    assert!(matches!(k, SchemaErrorKind::Limit { limit: "alternatives", value: 256, .. }), "{k:?}");
    // Under the limit the same shape compiles and is exact.
    let small: Vec<_> = (0..10).map(|i| json!({ "const": i })).collect();
    let c = Constraint::json_schema(&json!({ "oneOf": small }));
    assert!(accepts(&c, "7") && !accepts(&c, "10"));
}

#[test]
fn a_pattern_whose_automaton_explodes_stops_at_the_state_limit() {
    // A search for an `a` 20 characters from the end: 2^21 states over characters as over
    // bytes; the determinisers (letters, then bytes) stop at the limit as they go.
    let options =
        SchemaOptions::default().with_limits(SchemaLimits::default().with_max_dfa_states(2_000));
    let k =
        schema_error(&json!({"type": "string", "pattern": "(a|b)*a(a|b){20}"}), options.clone());
    assert!(matches!(k, SchemaErrorKind::Limit { limit: "dfa_states", value: 2_000, .. }), "{k:?}");
    // A search for 5..=500 letters exploded over bytes (thousands of NFA states behind each
    // state); over letters it is six states (a run of five letters is a match, whatever
    // follows), so it compiles under the same limit and decides exactly.
    let c = Constraint::json_schema_with(
        &json!({"type": "string", "pattern": "\\p{L}{5,500}"}),
        options,
    );
    assert!(accepts(&c, "\"ab1cdéfg!\"") && !accepts(&c, "\"ab1cd2éfgh\""));
    // A small anchored pattern of the same kind is decided exactly.
    let c = Constraint::json_schema(&json!({"type": "string", "pattern": "^\\p{L}{2,3}$"}));
    assert!(accepts(&c, "\"éa\"") && !accepts(&c, "\"a\"") && !accepts(&c, "\"abcd\""));
}

#[test]
fn a_compile_deadline_stops_the_compiler_with_the_limit_named() {
    let schema = json!({"type": "string", "pattern": "^[a-z]{3,40}@[a-z]{2,30}\\.[a-z]{2,6}$"});
    let limits = SchemaLimits::default().with_max_compile_time(Some(std::time::Duration::ZERO));
    let k = schema_error(&schema, SchemaOptions::default().with_limits(limits));
    assert!(
        matches!(k, SchemaErrorKind::Limit { limit: "compile_time_ms", value: 0, .. }),
        "{k:?}"
    );
    // Without a deadline the same schema compiles.
    assert!(Constraint::json_schema(&schema).compile(common::qwen3()).is_ok());
}

#[test]
fn instance_nesting_is_bounded_and_the_mask_agrees() {
    let schema = json!({"type": "array", "items": {"$ref": "#"}});
    let options =
        SchemaOptions::default().with_limits(SchemaLimits::default().with_max_instance_depth(3));
    let c = Constraint::json_schema_with(&schema, options);
    assert!(accepts(&c, "[[[]]]"));
    // `common::walk` asserts mask and advance agree at every step, the refused `[` included.
    let (refused, _) = walk_text(&c, "[[[[]]]]");
    assert!(refused.is_some(), "a fourth level is refused");
    let vocab = common::qwen3();
    let mut e = c.compile(vocab).unwrap().engine();
    for t in vocab.encode_exact("[[[").unwrap() {
        e.advance(t).unwrap();
    }
    let mut mask = TokenMask::new(vocab.n_vocab());
    e.fill_mask(&mut mask).unwrap();
    let opens = vocab.text_tokens().filter(|(_, b)| b.first() == Some(&b'[')).count();
    assert!(opens > 10);
    for (t, b) in vocab.text_tokens() {
        if b.first() == Some(&b'[') {
            assert!(!mask.contains(t), "{} allowed at the depth limit", vocab.describe(t));
        }
    }
    assert!(mask.contains(vocab.encode_exact("]").unwrap()[0]));
}

#[test]
fn an_ambiguous_grammar_stops_at_the_per_call_work_budget() {
    let grammar = "root ::= s\ns ::= s s | \"a\" | \"\"\n";
    let config = CfgConfig::default().with_max_work_per_call(20_000);
    let vocab = common::qwen3();
    let mut e = Constraint::gbnf_with(grammar, config).compile(vocab).unwrap().engine();
    let a = vocab.encode_exact("a").unwrap()[0];
    let mut mask = TokenMask::new(vocab.n_vocab());
    let mut hit = None;
    for step in 0..400 {
        match e.fill_mask(&mut mask).and_then(|()| e.advance(a)) {
            Ok(()) => {}
            Err(err) => {
                hit = Some((step, err));
                break;
            }
        }
    }
    let (step, err) = hit.expect("the work per call grows with the output: the budget is hit");
    assert!(step > 3, "small outputs are within the budget (hit at {step})");
    assert!(
        matches!(
            err.kind(),
            EngineErrorKind::LimitExceeded { limit: "CfgConfig::max_work_per_call", value: 20_000 }
        ),
        "{err}"
    );
    // The state is unchanged: a smaller step still works after the error.
    assert!(e.rollback(1).is_ok());
}

#[test]
fn a_grammar_of_many_rules_parses_with_exact_positions() {
    let mut g = String::from("root ::= r0\n");
    for i in 0..20_000 {
        g.push_str(&format!("r{i} ::= \"a\" r{} | \"b\"\n", i + 1));
    }
    g.push_str("r20000 ::= \"c\"\nr5 ::= \"x\"\n");
    let e = grammask::cfg::check(&g, &CfgConfig::default()).unwrap_err();
    // The duplicate is on the last line: 1 (root) + 20,001 rules + 1.
    assert!(e.to_string().contains("20003"), "{e}");
    let bad = "x ::= \"a\"\noops ::= \"a\" |\n  ) \n";
    let e = grammask::cfg::check(bad, &CfgConfig::default()).unwrap_err();
    assert!(e.to_string().contains("line 3"), "{e}");
}

// --- Bounded input -------------------------------------------------------------------------

#[test]
fn files_over_the_size_limit_are_refused_with_the_limit_named() {
    let dir = std::env::temp_dir().join(format!("grammask-hardening-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("tokenizer.json");
    std::fs::write(&p, vec![b' '; 10_000]).unwrap();
    let cfg = VocabConfig::default().with_max_file_bytes(1_000);
    let e = Vocabulary::from_file_with(&p, &cfg).unwrap_err();
    assert!(matches!(e.kind(), VocabErrorKind::TooLarge { limit: 1_000, .. }), "{e}");
    // An endless stream costs at most the limit.
    let e = Vocabulary::from_file_with("/dev/zero", &cfg).unwrap_err();
    assert!(matches!(e.kind(), VocabErrorKind::TooLarge { .. }), "{e}");
    let (code, _, err) = grammask(&["walk", "--tokenizer", "/dev/zero", "--input", "/dev/null"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("file size limit"), "{err}");
    let doc = dir.join("doc.json");
    std::fs::write(&doc, "{\"a\": 1}").unwrap();
    let (code, _, err) =
        grammask(&["walk", "--max-file-bytes", "4", "--input", doc.to_str().unwrap()]);
    assert_eq!(code, Some(1));
    assert!(err.contains("limit of 4 bytes"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_large_document_is_encoded_in_pieces_that_still_spell_it() {
    let vocab = common::qwen3();
    let item = "{\"k\": \"caf\u{e9} e\u{301} <|endoftext|>\"}, ";
    let n = Vocabulary::ENCODE_PIECE_BYTES * 3 / item.len();
    let text = format!("[{}1]", item.repeat(n));
    let ids = vocab.encode_exact(&text).unwrap();
    let bytes: Vec<u8> = ids.iter().flat_map(|&t| vocab.token_bytes(t).to_vec()).collect();
    assert_eq!(bytes, text.as_bytes());
    assert!(ids.iter().all(|&t| vocab.kind(t) == grammask::vocab::TokenKind::Text));
}

// --- Verdict integrity ---------------------------------------------------------------------

#[test]
fn a_normalising_tokenizer_cannot_change_the_walked_document() {
    // Qwen3 normalises to NFC; `e` + U+0301 is two characters, `é` one.
    let c = Constraint::json_schema(&json!({"type": "string", "maxLength": 1}));
    assert!(!accepts(&c, "\"e\u{301}\""));
    assert!(accepts(&c, "\"\u{e9}\""));
    let r = Constraint::regex("\\x{e9}");
    assert!(!accepts(&r, "e\u{301}"));
    assert!(accepts(&r, "\u{e9}"));
}

#[test]
fn special_token_text_in_a_document_is_text() {
    let vocab = common::qwen3();
    let doc = "{\"a\": \"<|endoftext|>\"}";
    let ids = vocab.encode_exact(doc).unwrap();
    assert!(ids.iter().all(|&t| !vocab.is_eos(t)), "the text is not the EOS token");
    assert!(accepts(&Constraint::json(), doc));
}

#[test]
fn a_character_the_tokenizer_cannot_spell_is_an_error_not_a_dropped_byte() {
    // A Unigram tokenizer without byte fallback: `z` is unknown and becomes `<unk>`.
    let tok = json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [{"id": 0, "content": "</s>", "single_word": false, "lstrip": false,
                          "rstrip": false, "normalized": false, "special": true}],
        "normalizer": null, "pre_tokenizer": null, "post_processor": null, "decoder": null,
        "model": {"type": "Unigram", "unk_id": 1, "byte_fallback": false,
                  "vocab": [["</s>", 0.0], ["<unk>", 0.0], ["{", -1.0], ["}", -1.0],
                            ["a", -1.0], ["\"", -1.0], [":", -1.0], ["1", -1.0]]}
    });
    let vocab =
        Vocabulary::from_bytes(tok.to_string().as_bytes(), None, &VocabConfig::default()).unwrap();
    // No config: EOS comes from the tokenizer's own special tokens by name.
    assert_eq!(vocab.eos_ids(), &[TokenId(0)]);
    assert!(vocab.encode_exact("{\"a\":1}").is_ok());
    let e = vocab.encode_exact("{\"z\":1}").unwrap_err();
    assert!(matches!(e.kind(), VocabErrorKind::CannotSpell { offset: 2, .. }), "{e}");
}

#[test]
fn schema_numbers_are_exact_decimals() {
    let big = parse_schema_text(r#"{"const": 18446744073709551617}"#).unwrap();
    let c = Constraint::json_schema(&big);
    assert!(accepts(&c, "18446744073709551617"));
    assert!(!accepts(&c, "18446744073709552000"), "the f64 neighbour is another number");
    let e = parse_schema_text(r#"{"enum": [123456789012345678901234567890, "x"]}"#).unwrap();
    let c = Constraint::json_schema(&e);
    assert!(accepts(&c, "123456789012345678901234567890"));
    assert!(!accepts(&c, "123456789012345678901234567891"));
    let m = parse_schema_text(r#"{"type": "integer", "maximum": 36893488147419103232}"#).unwrap();
    let c = Constraint::json_schema(&m);
    assert!(accepts(&c, "36893488147419103232"));
    assert!(!accepts(&c, "36893488147419103233"), "2^65 + 1 is over the bound");
    let huge = parse_schema_text(r#"{"type": "number", "minimum": 1e400}"#).unwrap();
    let c = Constraint::json_schema(&huge);
    assert!(accepts(&c, "2e400") && !accepts(&c, "1e399"));
}

#[test]
fn schema_text_errors_say_what_is_wrong() {
    let deep = format!("{}{}", "{\"not\":".repeat(200), "}".repeat(200));
    let e = parse_schema_text(&deep).unwrap_err();
    assert!(e.to_string().contains("deeper than 128"), "{e}");
    let e = parse_schema_text("{\"type\": }").unwrap_err();
    assert!(e.to_string().contains("not JSON") && e.to_string().contains("column"), "{e}");
}

#[test]
fn unsupported_patterns_and_ref_cycles_say_why() {
    for (pattern, why) in
        [("a(?=b)", "look-around"), ("(a)\\1", "back-references"), ("(?i)abc", "inline flags")]
    {
        let k = schema_error(&json!({"type": "string", "pattern": pattern}), Default::default());
        let SchemaErrorKind::Unsupported { keyword, reason, .. } = &k else {
            panic!("{pattern}: {k:?}")
        };
        assert_eq!(keyword, "pattern");
        assert!(reason.contains(why), "{pattern}: {reason}");
    }
    let k = schema_error(&json!({"type": "string", "pattern": "a{2,1}"}), Default::default());
    let SchemaErrorKind::Invalid { message, .. } = &k else { panic!("{k:?}") };
    assert!(message.contains("repetition"), "the regex-syntax message: {message}");
    let cyc = json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
                     "$ref": "#/$defs/a"});
    let k = schema_error(&cyc, Default::default());
    let SchemaErrorKind::Unsupported { keyword, reason, .. } = &k else { panic!("{k:?}") };
    assert_eq!(keyword, "$ref");
    assert!(reason.contains("cycle"), "{reason}");
}

/// A model that always puts EOS first: before the fix, a think block ended at its first step
/// with `stop` and empty content.
struct EosFirst {
    n: usize,
    eos: TokenId,
    close: TokenId,
}

impl LogitsSource for EosFirst {
    fn n_vocab(&self) -> usize {
        self.n
    }
    fn logits(&mut self, tokens: &[TokenId], out: &mut [f32]) {
        for (i, x) in out.iter_mut().enumerate() {
            *x = ((i * 2_654_435_761 + tokens.len() * 97) % 1000) as f32 / 1000.0;
        }
        out[self.eos.index()] = 50.0;
        out[self.close.index()] = 40.0;
    }
}

#[test]
fn eos_inside_the_think_block_cannot_end_a_constrained_request() {
    let vocab = common::qwen3();
    let markers = ThinkMarkers::from_vocab(vocab).unwrap();
    let inner =
        Constraint::json_schema(&json!({"type": "object", "properties": {"a": {"const": 1}},
                                               "required": ["a"], "additionalProperties": false}))
        .compile(vocab)
        .unwrap()
        .engine();
    let mut gate = ThinkGate::new(inner, markers);
    let eos = vocab.eos_ids()[0];
    assert!(!gate.allows(eos), "EOS is refused while the answer is pending");
    assert!(gate.advance(eos).is_err());
    let mut model = EosFirst { n: vocab.n_vocab(), eos, close: markers.close };
    let cfg = DecodeConfig::builder()
        .max_tokens(64)
        .think(ThinkConfig { markers: None, starts_open: true, budget: Some(4) })
        .build()
        .unwrap();
    let out = decode(&mut model, vocab, Some(&mut gate), &cfg).unwrap();
    assert_ne!(out.tokens[0], eos, "the first thinking step does not stop");
    assert_eq!(out.finish_reason.as_str(), "stop", "{:?}", out.content());
    // `stop` means the content satisfies the constraint (`1`, or an equal number such as
    // `0.0000001e+7`: JSON Schema compares numbers by value).
    let v: serde_json::Value = serde_json::from_str(out.content().trim()).unwrap();
    let o = v.as_object().unwrap();
    assert_eq!(o.len(), 1, "{v}");
    assert_eq!(o["a"].as_f64(), Some(1.0), "{v}");
}

// --- The CLI ---------------------------------------------------------------------------------

fn grammask(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_grammask")).args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn cli_exit_codes_and_flag_checks() {
    let dir = std::env::temp_dir().join(format!("grammask-hardening-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let good = path("good.json", "{\"a\": 1}");
    let bad = path("bad.json", "{\"a\": 01}");
    assert_eq!(grammask(&["walk", "--input", &good]).0, Some(0));
    assert_eq!(grammask(&["walk", "--input", &bad]).0, Some(3), "refused: status 3");
    // --whitespace applies to --schema too.
    let schema = path("s.json", "{\"type\": \"object\"}");
    assert_eq!(grammask(&["walk", "--schema", &schema, "--input", &good]).0, Some(0));
    let (code, out, _) =
        grammask(&["walk", "--schema", &schema, "--whitespace", "compact", "--input", &good]);
    assert_eq!(code, Some(3), "{out}");
    let (code, _, err) =
        grammask(&["walk", "--regex", "a", "--whitespace", "compact", "--input", &good]);
    assert_eq!(code, Some(2), "clap refuses the combination: {err}");
    // --jobs 0 is refused, not read as 1; a folder of unreadable files is a failure.
    let mb = dir.join("mb");
    std::fs::create_dir_all(&mb).unwrap();
    std::fs::write(mb.join("x.json"), "nope").unwrap();
    let (code, _, err) = grammask(&["maskbench", mb.to_str().unwrap(), "--jobs", "0"]);
    assert_ne!(code, Some(0), "{err}");
    let (code, _, err) = grammask(&["maskbench", mb.to_str().unwrap()]);
    assert_eq!(code, Some(1));
    assert!(err.contains("none of the 1 files"), "{err}");
    // Limits can be raised from the CLI, and the error names the flag.
    // (Objects and arrays: a union's scalar cores would be united into one per type.)
    let consts: Vec<_> =
        (0..150).flat_map(|i| [json!({ "const": { "k": i } }), json!({ "const": [i] })]).collect();
    let many = path("many.json", &json!({ "anyOf": consts }).to_string());
    let (code, _, err) = grammask(&["walk", "--schema", &many, "--input", &good]);
    assert_eq!(code, Some(1));
    assert!(err.contains("--limit alternatives=N"), "{err}");
    let num = path("n.txt", "42");
    let obj = path("o.json", r#"{"k": 42}"#);
    let (code, _, err) =
        grammask(&["walk", "--schema", &many, "--limit", "alternatives=512", "--input", &obj]);
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) = grammask(&["walk", "--limit", "bogus=1", "--input", &num]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("unknown limit"), "{err}");
    // The grammar's lexer limits: with no determinisation work at all every rule stays at the
    // byte level and the walk still accepts; they do not apply to a regex.
    let g = path("g.gbnf", "root ::= [a-z]+ \"!\"");
    let word = path("w.txt", "abc!");
    let (code, _, err) = grammask(&[
        "walk",
        "--grammar",
        &g,
        "--limit",
        "lexer_work=0",
        "--limit",
        "lexeme_states=1",
        "--input",
        &word,
    ]);
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) =
        grammask(&["walk", "--regex", "a", "--limit", "lexer_work=0", "--input", &word]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("--limit lexer_work does not apply to --regex"), "{err}");
    // A tokenizer.json that is JSON but not a tokenizer says so.
    let foo = path("foo.json", "{\"foo\": 1}");
    let (code, _, err) = grammask(&["walk", "--tokenizer", &foo, "--input", &good]);
    assert_eq!(code, Some(1));
    assert!(err.contains("not a tokenizer.json"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_tokenizer_without_a_known_eos_needs_eos_from_the_user() {
    let dir = std::env::temp_dir().join(format!("grammask-hardening-eos-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tok = json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [{"id": 0, "content": "<stop>", "single_word": false, "lstrip": false,
                          "rstrip": false, "normalized": false, "special": true}],
        "normalizer": null, "pre_tokenizer": null, "post_processor": null, "decoder": null,
        "model": {"type": "Unigram", "unk_id": 1, "byte_fallback": false,
                  "vocab": [["<stop>", 0.0], ["<unk>", 0.0], ["{", -1.0], ["}", -1.0],
                            ["a", -1.0], ["\"", -1.0], [":", -1.0], ["1", -1.0]]}
    });
    let p = dir.join("tokenizer.json");
    std::fs::write(&p, tok.to_string()).unwrap();
    let doc = dir.join("doc.json");
    std::fs::write(&doc, "{\"a\":1}").unwrap();
    let (t, d) = (p.to_str().unwrap(), doc.to_str().unwrap());
    let (code, _, err) = grammask(&["walk", "--tokenizer", t, "--input", d]);
    assert_eq!(code, Some(1));
    assert!(err.contains("no EOS token is known") && err.contains("--eos"), "{err}");
    for eos in ["<stop>", "0"] {
        let (code, out, err) = grammask(&["walk", "--tokenizer", t, "--eos", eos, "--input", d]);
        assert_eq!(code, Some(0), "--eos {eos}: {out}{err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
