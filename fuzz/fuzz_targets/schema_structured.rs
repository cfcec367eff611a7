//! (2) Structure-aware schemas: an `arbitrary` AST (types, bounds, pattern, enum/const,
//! anyOf/oneOf/allOf/not, if/then/else, properties/required/items, $ref/$defs) rendered to JSON
//! and compiled against a tiny vocabulary. Then (a) a fuzzer-chosen walk checks the mask against
//! `allows` and the runtime's byte oracle, and every accepted document against the `jsonschema`
//! crate; (b) small instances are fed as documents: the engine accepts one exactly when the
//! validator says it is valid.
#![no_main]
use arbitrary::{Arbitrary, Unstructured};
use grammask::{CompiledSchema, ConstraintEngine, SchemaConstraint, SchemaOptions};
use grammask_fuzz::schema_ast::{Inst, Root};
use grammask_fuzz::{budgeted, COMPILE_BUDGET};
use grammask_fuzz::{drive, feed, SchemaSubject};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(root) = Root::arbitrary(&mut u) else { return };
    let Ok(compact) = bool::arbitrary(&mut u) else { return };
    let schema = root.to_json();
    if std::env::var_os("FUZZ_DEBUG").is_some() {
        eprintln!("schema {schema}");
    }
    let options = if compact {
        SchemaOptions::default().with_whitespace(grammask::Whitespace::Compact)
    } else {
        SchemaOptions::default()
    };
    let Ok(compiled) =
        budgeted("compile", COMPILE_BUDGET, || CompiledSchema::compile(&schema, &options))
    else {
        return;
    };
    let Ok(validator) = jsonschema::options().build(&schema) else { return };
    let vocab = grammask_fuzz::schema_vocab().clone();
    // (b) Instances: accepted iff valid (compact serialisation is valid under either option).
    for _ in 0..4 {
        let Ok(inst) = Inst::arbitrary(&mut u) else { break };
        let value = inst.to_json(0);
        let text = serde_json::to_string(&value).expect("serialises");
        let mut e = SchemaConstraint::new(compiled.clone(), &vocab);
        let Ok((n, eos)) = feed(&mut e, text.as_bytes()) else { return };
        let accepted = n == text.len() && eos;
        assert_eq!(
            accepted,
            validator.is_valid(&value),
            "schema {schema} instance {text}: grammask {} (refused after {n} bytes), validator {}",
            if accepted { "accepts" } else { "refuses" },
            validator.is_valid(&value)
        );
        if accepted {
            assert!(e.advance(grammask_fuzz::eos_id(&vocab)).is_ok());
        }
    }
    // (a) A walk.
    let engine = SchemaConstraint::new(compiled, &vocab);
    let mut subject = SchemaSubject { engine, validator: Some(validator) };
    drive(&mut subject, &mut u, 64);
});
