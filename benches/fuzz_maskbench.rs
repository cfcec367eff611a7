//! `grammask fuzz` measured on a folder of MaskBench schemas (out of CI): for every schema that
//! compiles, `--n` valid instances and `--invalid` near misses, each judged by an independent
//! validator (the `jsonschema` crate, formats checked as the engine checks them); the share of valid
//! instances it accepts, of near misses it rejects, of distinct valid instances, the coverage
//! of schema locations and the time per schema. Figures in `docs/schema-fuzzing.md`.
//!
//! ```sh
//! cargo bench --bench fuzz_maskbench -- ../shared/maskbench-dev \
//!     --tokenizer ../shared/tokenizers/llama3.json [--n 100] [--invalid 20] [--stride 1] \
//!     [--out instances.jsonl]
//! ```
//! (`--out` writes one line per schema with its instances, which
//! `scripts/fuzz_compare.py` re-judges with Python's `jsonschema`.)

use grammask::fuzz::{FuzzConfig, Fuzzer};
use grammask::{Constraint, Vocabulary};
use std::io::Write;
use std::time::Instant;

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let Some(dir) = args.first().filter(|a| !a.starts_with("--")).cloned() else {
        eprintln!("usage: fuzz_maskbench DIR --tokenizer FILE [--n N] [--invalid K] [--stride S] [--out FILE]");
        return;
    };
    let tok = arg(&args, "--tokenizer").expect("--tokenizer FILE");
    let n: usize = arg(&args, "--n").map_or(100, |v| v.parse().expect("--n"));
    let k: usize = arg(&args, "--invalid").map_or(20, |v| v.parse().expect("--invalid"));
    let stride: usize = arg(&args, "--stride").map_or(1, |v| v.parse().expect("--stride"));
    let mut out = arg(&args, "--out").map(|p| std::fs::File::create(p).expect("--out"));
    let vocab = Vocabulary::from_file(&tok).expect("tokenizer");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let files: Vec<_> = files.into_iter().step_by(stride.max(1)).collect();
    let (mut schemas, mut compiled_n, mut generated, mut full_n, mut full_k) = (0, 0, 0, 0, 0);
    let (mut valid_total, mut valid_ok, mut invalid_total, mut invalid_rejected) = (0, 0, 0, 0);
    let (mut distinct, mut validator_errors, mut over_1s, mut errors) = (0, 0, 0, 0);
    let (mut cov_sum, mut cov_total, mut cov_hit) = (0.0, 0usize, 0usize);
    let mut times = Vec::new();
    let mut wrong: Vec<String> = Vec::new();
    for path in &files {
        schemas += 1;
        let text = std::fs::read_to_string(path).expect("read");
        let Ok(file) = serde_json::from_str::<serde_json::Value>(&text) else { continue };
        let schema = file["schema"].clone();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let t0 = Instant::now();
        let Ok(compiled) = Constraint::json_schema(&schema).compile(&vocab) else { continue };
        compiled_n += 1;
        let config = FuzzConfig::default().with_n(n).with_invalid(k).with_seed(1);
        let report = match Fuzzer::new(&compiled, config).and_then(|f| f.run()) {
            Ok(r) => r,
            Err(e) => {
                errors += 1;
                wrong.push(format!("{name}: {e}"));
                continue;
            }
        };
        let secs = t0.elapsed().as_secs_f64();
        if secs > 1.0 {
            eprintln!(
                "{name}: {secs:.2} s, {} valid, {} near misses",
                report.n_valid(),
                report.n_invalid()
            );
        }
        times.push(secs);
        over_1s += usize::from(secs > 1.0);
        generated += usize::from(report.n_valid() > 0);
        full_n += usize::from(report.n_valid() == n);
        full_k += usize::from(report.n_invalid() == k);
        let Ok(validator) = jsonschema::options().should_validate_formats(true).build(&schema)
        else {
            validator_errors += 1;
            continue;
        };
        let mut seen = std::collections::HashSet::new();
        for inst in &report.instances {
            let v: serde_json::Value = serde_json::from_str(&inst.text).expect("JSON");
            if inst.valid {
                valid_total += 1;
                // Distinct as JSON values (key order and number spelling aside).
                distinct += usize::from(
                    seen.insert(grammask::fuzz::canonical_key(&inst.text).expect("JSON")),
                );
                if validator.is_valid(&v) {
                    valid_ok += 1;
                } else if wrong.len() < 40 {
                    wrong.push(format!("{name}: valid instance rejected: {}", inst.text));
                }
            } else {
                invalid_total += 1;
                // With formats asserted, as for valid instances and as the engine does: a near
                // miss may be one because a `format` branch of its `anyOf` fails too
                // (`[""]` under `anyOf: [{format: email}, {minLength: 1}]`).
                if !validator.is_valid(&v) {
                    invalid_rejected += 1;
                } else if wrong.len() < 40 {
                    wrong.push(format!(
                        "{name}: near miss accepted ({:?}): {}",
                        inst.violates, inst.text
                    ));
                }
            }
        }
        cov_sum += report.coverage.share();
        cov_total += report.coverage.total();
        cov_hit += report.coverage.exercised();
        if let Some(f) = out.as_mut() {
            let line = serde_json::json!({
                "file": name,
                "instances": report.instances.iter().map(|i| i.to_json()).collect::<Vec<_>>(),
                "seconds": secs,
            });
            writeln!(f, "{line}").expect("write");
        }
    }
    times.sort_by(f64::total_cmp);
    let pct = |a: usize, b: usize| 100.0 * a as f64 / b.max(1) as f64;
    let q = |p: f64| times.get(((times.len() as f64 - 1.0) * p) as usize).copied().unwrap_or(0.0);
    println!("schemas: {schemas}, compiled: {compiled_n}, generated for: {generated}, fuzz errors: {errors}");
    println!("  all {n} valid: {full_n}; all {k} near misses: {full_k}");
    println!(
        "valid accepted by jsonschema: {valid_ok} / {valid_total} ({:.2}%)",
        pct(valid_ok, valid_total)
    );
    println!(
        "near misses rejected by jsonschema: {invalid_rejected} / {invalid_total} ({:.2}%)",
        pct(invalid_rejected, invalid_total)
    );
    println!("distinct valid: {distinct} / {valid_total} ({:.2}%)", pct(distinct, valid_total));
    println!(
        "coverage: mean per schema {:.1}%, pooled {cov_hit}/{cov_total} ({:.1}%)",
        100.0 * cov_sum / generated.max(1) as f64,
        pct(cov_hit, cov_total)
    );
    println!("time per schema (compile included): p50 {:.3} s, p90 {:.3} s, p99 {:.3} s, max {:.3} s; over 1 s: {over_1s}", q(0.5), q(0.9), q(0.99), q(1.0));
    println!("validator could not build: {validator_errors}");
    for w in &wrong {
        println!("  {w}");
    }
}
