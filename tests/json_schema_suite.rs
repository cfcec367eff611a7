//! The official JSON Schema Test Suite (draft 2020-12, copied into
//! `tests/data/json-schema-test-suite/`) run through the schema engine ([`SchemaCompiler`], default options), against the committed
//! expected outcomes in `tests/data/json-schema-test-suite-expected.json` — a ratchet: the test
//! fails when any case's outcome differs from the file, in either direction, so every behaviour
//! change shows in the diff. `GRAMMASK_BLESS=1 cargo test --release --test json_schema_suite`
//! rewrites the file from the current outcomes.
//!
//! Instances are serialised compactly and walked token by token with the embedded Qwen3
//! vocabulary; the verdict (every token allowed, EOS allowed at the end) must equal `valid`.

use grammask::bench::schema::SchemaCompiler;
use grammask::bench::suite::run_suite;
use grammask::Vocabulary;
use std::path::Path;

const SUITE: &str = "tests/data/json-schema-test-suite/tests/draft2020-12";
const EXPECTED: &str = "tests/data/json-schema-test-suite-expected.json";

#[test]
fn json_schema_test_suite_matches_expected() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let vocab = Vocabulary::embedded().unwrap();
    let report = run_suite(&root.join(SUITE), &vocab, &SchemaCompiler::default()).unwrap();
    println!("{report}");
    let expected_path = root.join(EXPECTED);
    if std::env::var_os("GRAMMASK_BLESS").is_some_and(|v| v == "1") {
        let text = serde_json::to_string_pretty(&report.to_expected()).unwrap() + "\n";
        std::fs::write(&expected_path, text).unwrap();
        return;
    }
    let expected: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&expected_path)
            .expect("expected-results file missing: run with GRAMMASK_BLESS=1"),
    )
    .unwrap();
    let diff = report.diff(&expected);
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
        "{} suite outcomes differ from {EXPECTED} (GRAMMASK_BLESS=1 to accept):\n{}",
        diff.len(),
        lines.join("\n")
    );
}
