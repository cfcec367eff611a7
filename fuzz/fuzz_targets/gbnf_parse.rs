//! (3) The GBNF parser and grammar compiler on arbitrary text: never a panic, within budget;
//! `check` and `parse` agree on what parses; a grammar that compiles gives a first mask equal
//! to the naive oracle and to `allows`.
#![no_main]
use grammask::cfg::{check, gbnf, CfgConfig};
use grammask::{CfgConstraint, ConstraintEngine};
use grammask_fuzz::{budgeted, COMPILE_BUDGET};
use grammask_fuzz::{drive, tiny_vocab, CfgSubject};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let config = CfgConfig::default();
    let parsed = budgeted("parse", COMPILE_BUDGET, || gbnf::parse(text));
    let checked = budgeted("check", COMPILE_BUDGET, || check(text, &config));
    if checked.is_ok() {
        assert!(parsed.is_ok(), "check accepts a grammar parse refuses");
    }
    static VOCAB: std::sync::OnceLock<grammask::Vocabulary> = std::sync::OnceLock::new();
    let vocab = VOCAB.get_or_init(|| tiny_vocab(&[]));
    let Ok(engine) =
        budgeted("compile", COMPILE_BUDGET, || CfgConstraint::from_gbnf(vocab, text, &config))
    else {
        return;
    };
    assert!(parsed.is_ok(), "from_gbnf compiles a grammar parse refuses");
    let _ = engine.is_accepting();
    let mut subject = CfgSubject { engine, judge: None };
    // No fuzzer-chosen walk here (the bytes are the grammar): fill, compare, stop.
    drive(&mut subject, &mut arbitrary::Unstructured::new(&[]), 64);
});
