//! [`SchemaOptions::closed_objects`], the generation profile's closed objects: hand-written
//! cases walked token by token on the embedded tokenizer, and the soundness property on the
//! JSON Schema Test Suite and MaskBench — the closed language is a subset of the schema's, so
//! the closed engine never accepts an instance the schema refuses.
//!
//! Cases are data: `tests/data/schema/closed_objects.json`, `[{name, schema, closed,
//! open_only, invalid}]` with documents as JSON text. `closed`: accepted in both modes;
//! `open_only`: valid (exact mode and the `jsonschema` crate accept it) but refused closed;
//! `invalid`: refused by both modes and by `jsonschema`.

use super::schema_walk::walk;
use grammask::harness::maskbench::{run_maskbench_with, MaskbenchOptions};
use grammask::harness::schema::SchemaCompiler;
use grammask::harness::suite::{load_remotes, run_suite, CaseOutcome};
use grammask::schema::{CompiledSchema, SchemaConstraint, SchemaErrorKind, SchemaOptions};
use grammask::Vocabulary;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

fn vocab() -> &'static Vocabulary {
    static V: std::sync::OnceLock<Vocabulary> = std::sync::OnceLock::new();
    V.get_or_init(|| Vocabulary::embedded().expect("embedded vocabulary"))
}

fn closed() -> SchemaOptions {
    SchemaOptions::default().with_closed_objects(true)
}

fn accepts(c: &Arc<CompiledSchema>, doc: &str) -> Result<(), String> {
    walk(&mut SchemaConstraint::new(c.clone(), vocab()), doc)
}

#[test]
fn hand_written_cases() {
    let cases: Value =
        serde_json::from_str(include_str!("../data/schema/closed_objects.json")).expect("json");
    let mut failures = Vec::new();
    for case in cases.as_array().expect("array") {
        let name = case["name"].as_str().unwrap();
        let schema = &case["schema"];
        let oracle = jsonschema::validator_for(schema).expect("jsonschema compiles the case");
        let exact = CompiledSchema::compile(schema, &SchemaOptions::default()).expect(name);
        let shut = match CompiledSchema::compile(schema, &closed()) {
            Ok(c) => c,
            Err(e) => {
                failures.push(format!("{name}: closed compile error {e}"));
                continue;
            }
        };
        assert!(shut.closed_objects() && !exact.closed_objects());
        let docs = |k: &str| case[k].as_array().unwrap().iter().map(|d| d.as_str().unwrap());
        for (kind, doc) in docs("closed")
            .map(|d| ("closed", d))
            .chain(docs("open_only").map(|d| ("open_only", d)))
            .chain(docs("invalid").map(|d| ("invalid", d)))
        {
            let valid = oracle.is_valid(&serde_json::from_str(doc).expect("document JSON"));
            let in_exact = accepts(&exact, doc);
            let in_closed = accepts(&shut, doc);
            // Soundness first: whatever the closed engine accepts, the schema accepts.
            if in_closed.is_ok() && !valid {
                failures.push(format!("{name}: closed accepts the invalid {doc}"));
            }
            let want = match kind {
                "closed" => (true, true, true),
                "open_only" => (true, true, false),
                _ => (false, false, false),
            };
            let got = (valid, in_exact.is_ok(), in_closed.is_ok());
            if got != want {
                failures.push(format!(
                    "{name}: {kind} {doc}: (jsonschema, exact, closed) = {got:?}, want {want:?}; \
                     exact {in_exact:?}, closed {in_closed:?}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// The token trace of an extra key: after a complete pydantic-style object the only ways on
/// are `,` to another declared key and `}`; an undeclared key is refused at its first
/// distinguishing byte, and `}` is refused until the required keys are there.
#[test]
fn extra_keys_are_refused_where_they_start() {
    let schema = json!({"type": "object", "required": ["name"],
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}});
    let shut = CompiledSchema::compile(&schema, &closed()).unwrap();
    let err = accepts(&shut, r#"{"name": "Ada", "zzz": 1}"#).unwrap_err();
    let before = &err[..err.find('✖').expect("refused")];
    assert!(before.contains("Ada") && !before.contains('z'), "{err}");
    assert!(accepts(&shut, r#"{"name": "Ada"}"#).is_ok());
    // `}` needs the required key.
    let err = accepts(&shut, "{}").unwrap_err();
    assert!(err.starts_with("‧✖{"), "{err}");
    // Exact mode takes the extra key.
    let exact = CompiledSchema::compile(&schema, &SchemaOptions::default()).unwrap();
    assert!(accepts(&exact, r#"{"name": "Ada", "zzz": 1}"#).is_ok());
}

#[test]
fn closing_that_leaves_no_instance_is_a_typed_error() {
    // `minProperties` above the declared keys: no closed object exists. (Without `type`, the
    // other types are left and the schema compiles to them: closing narrows, as in an
    // `anyOf`, see the cases.)
    let nested = json!({"type": "object", "required": ["o"], "properties": {
        "o": {"type": "object", "properties": {"a": {}}, "minProperties": 2}}});
    for (schema, ptr) in [
        (json!({"type": "object", "properties": {"a": {}}, "minProperties": 2}), ""),
        (nested, "/properties/o"),
    ] {
        assert!(CompiledSchema::compile(&schema, &SchemaOptions::default()).is_ok());
        let e = CompiledSchema::compile(&schema, &closed()).unwrap_err();
        let SchemaErrorKind::Unsatisfiable { pointer, reason } = e.kind() else {
            panic!("{schema}: {e}")
        };
        assert_eq!(pointer, ptr, "{e}");
        assert!(reason.contains("closed_objects") && reason.contains("additionalProperties"));
    }
    // Unsatisfiable as written: the usual error.
    let e = CompiledSchema::compile(
        &json!({"type": "object", "properties": {"a": false}, "required": ["a"]}),
        &closed(),
    )
    .unwrap_err();
    let SchemaErrorKind::Unsatisfiable { reason, .. } = e.kind() else { panic!("{e}") };
    assert!(!reason.contains("closed_objects"), "{e}");
}

/// The JSON Schema Test Suite (draft 2020-12, in `tests/data`): compiled closed, no instance
/// the suite marks invalid is accepted (beyond what exact mode already gets wrong: nothing),
/// and the valid instances the closed profile refuses are counted.
#[test]
fn closed_objects_are_sound_on_the_test_suite() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let data = root.join("tests/data/json-schema-test-suite");
    let documents = load_remotes(&data.join("remotes")).unwrap();
    let opts = SchemaOptions::default()
        .with_formats(grammask::schema::FormatMode::Annotate)
        .with_documents(documents);
    let suite = data.join("tests/draft2020-12");
    let exact = run_suite(&suite, vocab(), &SchemaCompiler { options: opts.clone() }).unwrap();
    let shut =
        run_suite(&suite, vocab(), &SchemaCompiler { options: opts.with_closed_objects(true) })
            .unwrap();
    assert_eq!(exact.cases.len(), shut.cases.len());
    let (mut refused, mut newly_unsupported, mut unsound) = (0, 0, Vec::new());
    for (x, c) in exact.cases.iter().zip(&shut.cases) {
        assert_eq!(x.key, c.key);
        match (&x.outcome, &c.outcome) {
            (_, CaseOutcome::FalseAcceptance) if x.outcome != CaseOutcome::FalseAcceptance => {
                unsound.push(c.key.clone())
            }
            (CaseOutcome::Pass, CaseOutcome::FalseRejection { detail }) => {
                refused += 1;
                println!("  refused closed: {} {} ({detail})", c.key, c.instance);
            }
            (CaseOutcome::CompileError(_), _) | (_, CaseOutcome::Pass) => {}
            (_, CaseOutcome::CompileError(_)) => newly_unsupported += 1,
            _ => {}
        }
    }
    let valid = exact.cases.iter().filter(|c| c.valid).count();
    println!(
        "closed_objects on the Test Suite: {} cases, {valid} valid; {refused} valid refused \
         closed, {newly_unsupported} cases no longer compile, {} unsound",
        exact.cases.len(),
        unsound.len()
    );
    assert!(unsound.is_empty(), "closed accepts invalid instances:\n{}", unsound.join("\n"));
    // Closing refuses some valid instances (those with undeclared keys), and not most.
    assert!(refused > 0 && refused < valid / 4, "{refused} of {valid}");
}

/// MaskBench: the committed sample always; the whole `../shared/maskbench-dev` when
/// `GRAMMASK_MASKBENCH_DEV=1` and the folder is there. Closed never accepts an instance the
/// benchmark marks invalid.
#[test]
fn closed_objects_are_sound_on_maskbench() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut dirs = vec![root.join("tests/data/maskbench")];
    let dev = root.join("../shared/maskbench-dev");
    if std::env::var_os("GRAMMASK_MASKBENCH_DEV").is_some_and(|v| v == "1") && dev.is_dir() {
        dirs.push(dev);
    }
    for dir in dirs {
        let run = |schema: SchemaOptions| {
            let opts = MaskbenchOptions { jobs: 2, schema: schema.clone(), ..Default::default() };
            run_maskbench_with(&dir, vocab(), &opts, &SchemaCompiler { options: schema }).unwrap()
        };
        let exact = run(SchemaOptions::default());
        let shut = run(closed());
        let key = |f: &grammask::harness::maskbench::Finding| (f.file.clone(), f.instance);
        let before: BTreeSet<_> = exact.false_acceptances.iter().map(key).collect();
        let unsound: Vec<_> =
            shut.false_acceptances.iter().map(key).filter(|k| !before.contains(k)).collect();
        println!(
            "closed_objects on {}: {} schemas, {} compiled (exact {}), {} valid instances, {} \
             refused closed (exact {}), {} false acceptances (exact {})",
            dir.display(),
            shut.schemas,
            shut.compiled,
            exact.compiled,
            shut.valid_instances,
            shut.false_rejections.len(),
            exact.false_rejections.len(),
            shut.false_acceptances.len(),
            exact.false_acceptances.len()
        );
        for f in &shut.false_rejections {
            println!("  refused closed: {f}");
        }
        assert!(unsound.is_empty(), "closed accepts invalid instances: {unsound:?}");
    }
}
