//! The official JSON Schema Test Suite (draft 2020-12, copied into
//! `tests/data/json-schema-test-suite/`) run through the schema engine ([`SchemaCompiler`]),
//! against committed expected outcomes — a ratchet: a test fails when any case's outcome differs
//! from its file, in either direction, so every behaviour change shows in the diff.
//! `GRAMMASK_BLESS=1 cargo test --release --test json_schema_suite` rewrites the files from the
//! current outcomes.
//!
//! - The main (non-optional) tests run with [`FormatMode::Annotate`], as the 2020-12
//!   specification says (`format` is an annotation unless the format-assertion vocabulary is
//!   in use); expected outcomes in `tests/data/json-schema-test-suite-expected.json`.
//! - Remote `$ref`s resolve to the suite's `remotes/` documents, pre-loaded through
//!   [`SchemaOptions::documents`] under `http://localhost:1234/…` as the suite names them.
//! - `optional/format/` runs with [`FormatMode::Assert`] (our default), which is what those
//!   tests assume; expected outcomes in `tests/data/json-schema-test-suite-format-expected.json`.
//!
//! Instances are serialised compactly and walked token by token with the embedded Qwen3
//! vocabulary; the verdict (every token allowed, EOS allowed at the end) must equal `valid`.

use grammask::harness::schema::SchemaCompiler;
use grammask::harness::suite::{load_remotes, run_suite};
use grammask::schema::{FormatMode, SchemaOptions};
use grammask::Vocabulary;
use std::path::Path;

const SUITE: &str = "tests/data/json-schema-test-suite/tests/draft2020-12";

fn check(dir: &str, expected: &str, formats: FormatMode) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let vocab = Vocabulary::embedded().unwrap();
    // The suite's remote `$ref` targets, pre-loaded (never fetched).
    let documents = load_remotes(&root.join("tests/data/json-schema-test-suite/remotes")).unwrap();
    let compiler = SchemaCompiler {
        options: SchemaOptions::default().with_formats(formats).with_documents(documents),
    };
    let report = run_suite(&root.join(dir), &vocab, &compiler).unwrap();
    println!("{report}");
    let expected_path = root.join(expected);
    if std::env::var_os("GRAMMASK_BLESS").is_some_and(|v| v == "1") {
        let text = serde_json::to_string_pretty(&report.to_expected()).unwrap() + "\n";
        std::fs::write(&expected_path, text).unwrap();
        return;
    }
    let expected_json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&expected_path)
            .expect("expected-results file missing: run with GRAMMASK_BLESS=1"),
    )
    .unwrap();
    let diff = report.diff(&expected_json);
    let lines: Vec<String> = diff
        .iter()
        .map(|(k, want, got)| {
            format!(
                "  {k}: expected {}, got {}",
                want.as_deref().unwrap_or("(absent)"),
                got.as_deref().unwrap_or("(absent)")
            )
        })
        .collect();
    assert!(
        diff.is_empty(),
        "{} suite outcomes differ from {expected} (GRAMMASK_BLESS=1 to accept):\n{}",
        diff.len(),
        lines.join("\n")
    );
}

#[test]
fn json_schema_test_suite_matches_expected() {
    check(SUITE, "tests/data/json-schema-test-suite-expected.json", FormatMode::Annotate);
}

#[test]
fn json_schema_test_suite_optional_format_matches_expected() {
    check(
        &format!("{SUITE}/optional/format"),
        "tests/data/json-schema-test-suite-format-expected.json",
        FormatMode::Assert,
    );
}
