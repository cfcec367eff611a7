//! Compile errors, analysis warnings and the engine contract (EOS, refusals, rollback, limits)
//! of the CFG engine, on small grammars and the embedded Qwen3 vocabulary.

use grammask::cfg::{self, CfgConfig, CfgErrorKind, CfgGrammar};
use grammask::{CfgConstraint, ConstraintEngine, EngineErrorKind, TokenMask, Vocabulary};

fn err(text: &str) -> CfgErrorKind {
    CfgGrammar::from_gbnf(text, &CfgConfig::default()).unwrap_err().kind().clone()
}

#[test]
fn undefined_rule_is_named_with_its_position() {
    let e = CfgGrammar::from_gbnf(
        "root ::= item+\nitem ::= \"a\" | missing-rule",
        &CfgConfig::default(),
    )
    .unwrap_err();
    assert_eq!(
        e.kind(),
        &CfgErrorKind::UndefinedRule { name: "missing-rule".into(), line: 2, column: 16 }
    );
    assert!(e.to_string().contains("undefined rule 'missing-rule'"), "{e}");
}

#[test]
fn structural_errors() {
    assert_eq!(err("start ::= \"a\""), CfgErrorKind::NoRoot);
    assert_eq!(err("root ::= \"a\" root"), CfgErrorKind::RootUnproductive);
    assert!(matches!(err("root ::= \"a\"\nroot ::= \"b\""), CfgErrorKind::DuplicateRule { .. }));
    assert!(matches!(err("root ::= [a-"), CfgErrorKind::Syntax { line: 1, .. }));
    assert!(matches!(err("root ::= \"a\"\n  x ::= \"b\" )"), CfgErrorKind::Syntax { line: 2, .. }));
    let small = CfgConfig::default().with_max_grammar_symbols(1000);
    let e = CfgGrammar::from_gbnf("root ::= [a-z]{5000}", &small).unwrap_err();
    assert!(matches!(e.kind(), CfgErrorKind::TooBig { .. }), "{e}");
}

#[test]
fn check_reports_unreachable_and_unproductive_rules() {
    let text =
        "root ::= a | loop\na ::= \"a\" b?\nb ::= \"b\"\nloop ::= \"x\" loop\norphan ::= \"o\"";
    let r = cfg::check(text, &CfgConfig::default()).unwrap();
    assert_eq!(r.unproductive, vec!["loop".to_string()]);
    assert_eq!(r.unreachable, vec!["orphan".to_string()]);
    assert_eq!(r.rules.len(), 5);
    assert_eq!(r.rules[1].definition, "\"a\" b?");
    let shown = r.to_string();
    assert!(shown.contains("unproductive rules (warning, removed): loop"), "{shown}");
    assert!(shown.contains("unreachable rules (warning): orphan"), "{shown}");
    // The unproductive alternative is gone: only "a", "ab" are accepted.
    let g = CfgGrammar::from_gbnf(text, &CfgConfig::default()).unwrap();
    assert!(g.accepts(b"ab", 1000));
    assert!(!g.accepts(b"x", 1000));
}

#[test]
fn engine_contract_eos_refusal_rollback() {
    let v = Vocabulary::embedded().unwrap();
    let mut e =
        CfgConstraint::from_gbnf(&v, "root ::= \"ab\" (\"cd\")?", &CfgConfig::default()).unwrap();
    let eos = v.eos_ids()[0];
    let mut mask = TokenMask::new(v.n_vocab());
    e.fill_mask(&mut mask).unwrap();
    assert!(!mask.contains(eos));
    let ab = v.encode("ab").unwrap();
    for &t in &ab {
        e.advance(t).unwrap();
    }
    assert!(e.is_accepting() && !e.can_only_end());
    e.fill_mask(&mut mask).unwrap();
    assert!(mask.contains(eos));
    // A refused token leaves the state unchanged.
    let x = v.encode("x").unwrap()[0];
    assert!(matches!(e.advance(x).unwrap_err().kind(), EngineErrorKind::Refused { .. }));
    assert!(e.is_accepting());
    let cd = v.encode("cd").unwrap();
    for &t in &cd {
        e.advance(t).unwrap();
    }
    assert!(e.can_only_end());
    e.fill_mask(&mut mask).unwrap();
    assert_eq!(mask.iter().collect::<Vec<_>>(), v.eos_ids().to_vec());
    e.advance(eos).unwrap();
    assert!(e.is_finished());
    assert!(matches!(e.advance(x).unwrap_err().kind(), EngineErrorKind::AfterEos { .. }));
    // Roll back EOS and "cd": the masks are those of the state after "ab".
    e.rollback(1 + cd.len()).unwrap();
    assert!(!e.is_finished() && e.is_accepting() && !e.can_only_end());
    assert_eq!(e.output_bytes(), b"ab");
    assert!(matches!(e.rollback(99).unwrap_err().kind(), EngineErrorKind::RollbackTooFar { .. }));
}

#[test]
fn item_limit_refuses_instead_of_exploding() {
    let v = Vocabulary::embedded().unwrap();
    // Highly ambiguous: e ::= e e | "a" gives Earley sets that grow with the input.
    let config = CfgConfig::default().with_max_items_per_set(40);
    let mut e = CfgConstraint::from_gbnf(&v, "root ::= e\ne ::= e e | \"a\"", &config).unwrap();
    let r = e.advance_bytes(&[b'a'; 64]);
    assert!(r.is_err() && e.overflowed());
    // The chart is unchanged by the refused run; feed the longest accepted prefix.
    let ok = r.unwrap_err();
    assert!(ok > 0);
    e.advance_bytes(&vec![b'a'; ok]).unwrap();
    assert!(!e.overflowed());
    let before = e.output_bytes();
    // The next byte overflows: advance and fill_mask say so instead of refusing or
    // returning an under-approximated mask, and the state stays as it was.
    let a = v.encode("a").unwrap()[0];
    let err = e.advance(a).unwrap_err();
    assert!(
        matches!(err.kind(), EngineErrorKind::LimitExceeded { limit, value: 40 } if limit.contains("max_items_per_set")),
        "{err}"
    );
    assert!(err.to_string().contains("max_items_per_set"));
    assert_eq!(e.output_bytes(), before);
    let mut mask = TokenMask::new(v.n_vocab());
    let err = e.fill_mask(&mut mask).unwrap_err();
    assert!(matches!(err.kind(), EngineErrorKind::LimitExceeded { .. }), "{err}");
    assert_eq!(mask.count(), 0);
    assert_eq!(e.output_bytes(), before);
    // With room, the same state masks and advances normally.
    let big = CfgConfig::default().with_max_items_per_set(1 << 20);
    let mut e2 = CfgConstraint::from_gbnf(&v, "root ::= e\ne ::= e e | \"a\"", &big).unwrap();
    e2.advance_bytes(&before).unwrap();
    e2.fill_mask(&mut mask).unwrap();
    assert!(mask.contains(a));
}

/// Every grammar of the library compiles cleanly: no unreachable or unproductive rules.
#[test]
fn library_grammars_are_clean() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/grammars");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "gbnf") {
            let text = std::fs::read_to_string(&path).unwrap();
            let r = cfg::check(&text, &CfgConfig::default())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(
                r.unreachable.is_empty(),
                "{}: unreachable {:?}",
                path.display(),
                r.unreachable
            );
            assert!(
                r.unproductive.is_empty(),
                "{}: unproductive {:?}",
                path.display(),
                r.unproductive
            );
            n += 1;
        }
    }
    assert_eq!(n, 10);
}
