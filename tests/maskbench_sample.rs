//! A handful of MaskBench files (copied from `../shared/maskbench-dev` into
//! `tests/data/maskbench/`) run through the MaskBench harness with the embedded Qwen3
//! vocabulary: the harness's own behaviour (counts, verdicts, JSONL) with the free-form JSON
//! engine as a stand-in whose verdicts are known exactly.

use grammask::bench::maskbench::{run_maskbench_with, MaskbenchErrorKind, MaskbenchOptions};
use grammask::bench::FreeJsonCompiler;
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
    assert_eq!(s.masks.count, s.tokens + 41);
    assert!(s.masks.max_us >= s.masks.p50_us && s.masks.mean_us > 0.0);
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
    assert_eq!(masks, s.masks.count);
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
