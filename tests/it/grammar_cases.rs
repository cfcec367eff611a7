//! The data-driven conformance suite: every file in `tests/data/grammars/` lists inputs with the
//! expected verdict — `accept` (a complete sentence), `prefix` (viable but incomplete), `reject`
//! (some byte is refused) — for a grammar of `grammars/`, inline GBNF, or a regex.
//!
//! Each case is checked three ways: byte by byte through the engine's recogniser, token by token
//! through the engine with the embedded Qwen3 tokenizer (each token must be in the mask, with
//! EOS allowed exactly at the end of `accept` inputs), and — for grammars — against the
//! independent whole-string recogniser in `tests/common`.

use crate::common;

use grammask::automaton::{ByteDfa, DfaConfig};
use grammask::cfg::{CfgConfig, CfgGrammar};
use grammask::{
    CfgConstraint, ConstraintEngine, RegexConfig, RegexConstraint, TokenMask, Vocabulary,
};
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|s| s.as_str().expect("string").to_string()).collect())
        .unwrap_or_default()
}

/// Run `text` token by token through `engine`, checking each token against a full mask.
/// Returns an error message, or Ok(()) when the expectation holds.
fn trace(
    engine: &mut dyn ConstraintEngine,
    vocab: &Vocabulary,
    text: &str,
    complete: bool,
) -> Result<(), String> {
    let mut mask = TokenMask::new(vocab.n_vocab());
    let toks = vocab.encode(text).map_err(|e| e.to_string())?;
    let mut shown = String::new();
    for (k, &t) in toks.iter().enumerate() {
        // Full masks on the first two tokens, the cheap `allows` afterwards.
        let allowed = if k < 2 {
            engine.fill_mask(&mut mask).map_err(|e| e.to_string())?;
            let m = mask.contains(t);
            if m != engine.allows(t) {
                return Err(format!("mask and allows disagree on {}", vocab.describe(t)));
            }
            m
        } else {
            engine.allows(t)
        };
        if !allowed {
            return Err(format!("{shown}✖{}", vocab.describe(t)));
        }
        engine.advance(t).map_err(|e| e.to_string())?;
        shown.push_str(&String::from_utf8_lossy(vocab.token_bytes(t)));
        shown.push('‧');
    }
    let eos = vocab.eos_ids()[0];
    engine.fill_mask(&mut mask).map_err(|e| e.to_string())?;
    if mask.contains(eos) != complete || engine.is_accepting() != complete {
        return Err(format!("{shown}≺EOS≻ allowed={} expected={complete}", mask.contains(eos)));
    }
    Ok(())
}

fn check_grammar(
    name: &str,
    gbnf: &str,
    case: &Value,
    vocab: &Vocabulary,
    failures: &mut Vec<String>,
) {
    let config = CfgConfig::default();
    let g =
        Arc::new(CfgGrammar::from_gbnf(gbnf, &config).unwrap_or_else(|e| panic!("{name}: {e}")));
    let simple = common::Simple::new(gbnf);
    let mut engine = CfgConstraint::new(vocab, g.clone(), &config).unwrap();
    for (verdict, inputs) in [
        ("accept", strings(case, "accept")),
        ("prefix", strings(case, "prefix")),
        ("reject", strings(case, "reject")),
    ] {
        for input in inputs {
            let mut e = engine.fork();
            let bytes_ok = e.advance_bytes(input.as_bytes()).is_ok();
            let accepted = bytes_ok && e.is_accepting();
            let got = if accepted {
                "accept"
            } else if bytes_ok {
                "prefix"
            } else {
                "reject"
            };
            if got != verdict {
                failures.push(format!("{name}: {input:?}: expected {verdict}, engine says {got}"));
                continue;
            }
            if g.accepts(input.as_bytes(), 100_000) != (verdict == "accept") {
                failures.push(format!("{name}: {input:?}: earley::accepts disagrees"));
            }
            if simple.accepts(input.as_bytes()) != (verdict == "accept") {
                failures.push(format!(
                    "{name}: {input:?}: independent recogniser disagrees ({verdict})"
                ));
            }
            if verdict != "reject" {
                if let Err(m) = trace(&mut engine, vocab, &input, verdict == "accept") {
                    failures.push(format!("{name}: {input:?}: token trace: {m}"));
                }
                engine = engine.fork();
            }
        }
    }
}

fn check_regex(pattern: &str, case: &Value, vocab: &Vocabulary, failures: &mut Vec<String>) {
    let dfa = ByteDfa::from_regex(pattern, &DfaConfig::default()).unwrap();
    for (verdict, inputs) in [
        ("accept", strings(case, "accept")),
        ("prefix", strings(case, "prefix")),
        ("reject", strings(case, "reject")),
    ] {
        for input in inputs {
            let got = match dfa.run(dfa.start(), input.as_bytes()) {
                Some(s) if dfa.is_accepting(s) => "accept",
                Some(_) => "prefix",
                None => "reject",
            };
            if got != verdict {
                failures.push(format!("regex {pattern}: {input:?}: expected {verdict}, got {got}"));
                continue;
            }
            let reference = regex_automata::meta::Regex::new(&format!("^(?:{pattern})$")).unwrap();
            if reference.is_match(input.as_bytes()) != (verdict == "accept") {
                failures.push(format!("regex {pattern}: {input:?}: regex crate disagrees"));
            }
            if verdict != "reject" {
                let mut e = RegexConstraint::new(vocab, pattern, &RegexConfig::default()).unwrap();
                if let Err(m) = trace(&mut e, vocab, &input, verdict == "accept") {
                    failures.push(format!("regex {pattern}: {input:?}: token trace: {m}"));
                }
            }
        }
    }
}

#[test]
fn all_cases() {
    let vocab = Vocabulary::embedded().unwrap();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/grammars");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut failures = Vec::new();
    let mut n = 0;
    for f in files {
        let data: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        let cases: Vec<Value> = match data.get("cases") {
            Some(Value::Array(a)) => a.clone(),
            _ => vec![data.clone()],
        };
        for case in &cases {
            n += 1;
            if let Some(file) = case.get("grammar").and_then(Value::as_str) {
                let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("grammars").join(file);
                let text = std::fs::read_to_string(&path).unwrap();
                check_grammar(file, &text, case, &vocab, &mut failures);
            } else if let Some(gbnf) = case.get("gbnf").and_then(Value::as_str) {
                check_grammar(gbnf, gbnf, case, &vocab, &mut failures);
            } else if let Some(re) = case.get("regex").and_then(Value::as_str) {
                check_regex(re, case, &vocab, &mut failures);
            }
        }
    }
    assert!(n >= 20, "only {n} cases found");
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}
