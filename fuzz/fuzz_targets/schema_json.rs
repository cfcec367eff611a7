//! (1) The schema compiler on arbitrary bytes parsed as JSON: compiling never panics and stays
//! within its budget; a schema that compiles gives an engine whose masks equal the naive oracle
//! (and `allows`) along a fuzzer-chosen walk over a tiny vocabulary.
#![no_main]
use grammask::{CompiledSchema, SchemaConstraint, SchemaOptions};
use grammask_fuzz::{budgeted, COMPILE_BUDGET};
use grammask_fuzz::{drive, SchemaSubject};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the options; the rest is the schema text.
    let Some((&opt, text)) = data.split_first() else { return };
    let Ok(schema) = serde_json::from_slice::<serde_json::Value>(text) else { return };
    let options = match opt % 3 {
        0 => SchemaOptions::default(),
        1 => SchemaOptions::default().with_whitespace(grammask::Whitespace::Compact),
        _ => SchemaOptions::default().with_lenient(true),
    };
    let Ok(compiled) =
        budgeted("compile", COMPILE_BUDGET, || CompiledSchema::compile(&schema, &options))
    else {
        return;
    };
    let vocab = grammask_fuzz::schema_vocab().clone();
    let engine = SchemaConstraint::new(compiled, &vocab);
    let mut subject = SchemaSubject { engine, validator: None };
    // The walk's choices come from the schema's own bytes (reversed, so they differ).
    let choices: Vec<u8> = text.iter().rev().copied().collect();
    let mut u = arbitrary::Unstructured::new(&choices);
    drive(&mut subject, &mut u, 64);
});
