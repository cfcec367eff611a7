//! A handful of MaskBench files (copied from `../shared/maskbench-dev` into
//! `tests/data/maskbench/`) run through the MaskBench harness with the embedded Qwen3
//! vocabulary: the harness's own behaviour (counts, verdicts, JSONL) with the free-form JSON
//! engine as a stand-in whose verdicts are known exactly.

use grammask::harness::maskbench::{run_maskbench_with, MaskbenchErrorKind, MaskbenchOptions};
use grammask::harness::FreeJsonCompiler;
use grammask::Vocabulary;
use std::path::{Path, PathBuf};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/maskbench")
}

/// The sample holds 12 schemas with 17 valid and 24 invalid instances. Free-form JSON accepts
/// every instance (all are JSON), so every valid one walks through and every invalid one is a
/// false acceptance — which checks both verdict paths of the harness.
#[test]
fn free_json_stand_in_verdicts_and_jsonl() {
    let vocab = Vocabulary::embedded().unwrap();
    let out = std::env::temp_dir().join(format!("grammask-maskbench-{}.jsonl", std::process::id()));
    let opts = MaskbenchOptions { jobs: 2, out: Some(out.clone()), ..MaskbenchOptions::default() };
    let s = run_maskbench_with(&data_dir(), &vocab, &opts, &FreeJsonCompiler::default()).unwrap();
    assert_eq!(s.schemas, 12);
    assert_eq!(s.compiled, 12);
    assert_eq!(s.compile_error_count(), 0);
    assert_eq!((s.valid_instances, s.invalid_instances), (17, 24));
    assert!(s.false_rejections.is_empty(), "{s}");
    assert_eq!(s.false_acceptances.len(), 24);
    assert!(s.inconsistencies.is_empty() && s.instance_errors.is_empty(), "{s}");
    // Only the 3 schemas whose tests are all valid pass.
    let all_valid =
        ["BFCL_simple_279.json", "Glaiveai2K---calculate_area_f9891ca5.json", "JME_27.json"];
    assert_eq!(s.passed, all_valid.len(), "{s}");
    // One mask per token plus one for EOS per instance.
    assert_eq!(s.masks.n, s.tokens + 41);
    assert!(s.masks.max >= s.masks.p50 && s.masks.mean > 0.0);
    let text = format!("{s}");
    assert!(text.contains("passed:            3 / 12 (25.0%)"), "{text}");

    let jsonl = std::fs::read_to_string(&out).unwrap();
    std::fs::remove_file(&out).unwrap();
    let records: Vec<serde_json::Value> =
        jsonl.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(records.len(), 12);
    let mut masks = 0;
    for r in &records {
        let file = r["file"].as_str().unwrap();
        assert_eq!(r["passed"].as_bool().unwrap(), all_valid.contains(&file), "{file}");
        assert_eq!(r["compile"]["ok"], true);
        for inst in r["instances"].as_array().unwrap() {
            assert_eq!(inst["verdict"], "accepted");
            assert_eq!(inst["correct"], inst["valid"]);
            let n = inst["mask_ns"].as_array().unwrap().len();
            assert_eq!(n as u64, inst["tokens"].as_u64().unwrap() + 1);
            masks += n;
        }
    }
    assert_eq!(masks, s.masks.n);
}

#[test]
fn filter_limit_and_missing_folder() {
    let vocab = Vocabulary::embedded().unwrap();
    let opts = MaskbenchOptions {
        filter: Some("Github".into()),
        limit: Some(2),
        ..MaskbenchOptions::default()
    };
    let s = run_maskbench_with(&data_dir(), &vocab, &opts, &FreeJsonCompiler::default()).unwrap();
    assert_eq!(s.schemas, 2);

    let opts = MaskbenchOptions { filter: Some("no such file".into()), ..opts };
    let e = run_maskbench_with(&data_dir(), &vocab, &opts, &FreeJsonCompiler::default());
    assert!(matches!(e.unwrap_err().kind(), MaskbenchErrorKind::NoFiles { .. }));
    let e = run_maskbench_with(
        Path::new("/nonexistent/grammask"),
        &vocab,
        &MaskbenchOptions::default(),
        &FreeJsonCompiler::default(),
    );
    assert!(matches!(e.unwrap_err().kind(), MaskbenchErrorKind::Io { .. }));
}

const EXPECTED: &str = "tests/data/maskbench-sample-expected.json";

/// The schema engine on the sample, against the committed per-instance outcomes in
/// `tests/data/maskbench-sample-expected.json` (a ratchet like the JSON Schema Test Suite's:
/// any change of a schema's compile result or of an instance's verdict fails the test;
/// `GRAMMASK_BLESS=1` rewrites the file). Each instance's label is `ok`, `false-rejection`,
/// `false-acceptance`, `not-compiled` or `error`.
#[test]
fn schema_engine_on_sample_matches_expected() {
    use grammask::harness::maskbench::{load_file, run_file, CompileOutcome, SchemaRun};
    use grammask::harness::schema::SchemaCompiler;
    use grammask::TokenMask;

    let vocab = Vocabulary::embedded().unwrap();
    let compiler = SchemaCompiler::default();
    let mut mask = TokenMask::new(vocab.n_vocab());
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(data_dir()).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let label = |run: &SchemaRun| -> serde_json::Value {
        let compile = match &run.compile {
            CompileOutcome::Compiled { .. } => "ok".to_string(),
            CompileOutcome::Failed { failure, .. } => failure.kind.clone(),
            CompileOutcome::NotLoaded { message } => format!("unreadable: {message}"),
        };
        let verdicts: Vec<&str> = run
            .instances
            .iter()
            .map(|i| match (i.accepted(), i.valid) {
                _ if !i.inconsistencies.is_empty() => "error",
                (Some(a), v) if a == v => "ok",
                (Some(_), true) => "false-rejection",
                (Some(_), false) => "false-acceptance",
                (None, _) if matches!(run.compile, CompileOutcome::Compiled { .. }) => "error",
                (None, _) => "not-compiled",
            })
            .collect();
        serde_json::json!({"compile": compile, "verdicts": verdicts})
    };
    let mut got = serde_json::Map::new();
    let mut report = String::new();
    for path in &files {
        load_file(path).unwrap();
        let run = run_file(path, &vocab, &compiler, &mut mask);
        for i in run.instances.iter().filter(|i| !i.correct() && i.accepted().is_some()) {
            report += &format!("  {} #{}: {}: {}\n", run.file, i.index, i.detail(), i.text);
        }
        got.insert(run.file.clone(), label(&run));
    }
    println!("{report}");
    let got = serde_json::Value::Object(got);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(EXPECTED);
    if std::env::var_os("GRAMMASK_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, serde_json::to_string_pretty(&got).unwrap() + "\n").unwrap();
        return;
    }
    let want: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&path).expect("expected file missing: run with GRAMMASK_BLESS=1"),
    )
    .unwrap();
    let mut diffs = Vec::new();
    for (file, g) in got.as_object().unwrap() {
        if want.get(file) != Some(g) {
            diffs.push(format!(
                "  {file}: expected {}, got {g}",
                want.get(file).unwrap_or(&"(absent)".into())
            ));
        }
    }
    assert!(
        diffs.is_empty(),
        "MaskBench sample outcomes changed (GRAMMASK_BLESS=1 to accept):\n{}",
        diffs.join("\n")
    );
}
