//! Decode-loop figures for `docs/performance.md` (`## Decode loop`), on the embedded Qwen3
//! vocabulary (151,669 tokens) and the free-form JSON engine:
//!
//! 1. sample-then-check: the share of constrained steps whose full mask was skipped in
//!    random-logit `decode` runs, and the mean constraint time per step with and without it;
//! 2. batch masks: masks per second filling N = 1, 2, 8, 64 engines (at varied states) with
//!    [`BatchMasker`] on all cores, against serial filling;
//! 3. fast-forward: the share of tokens fast-forward would append when replaying the valid
//!    documents of MaskBench instances (`../shared/maskbench-dev`, when present) under the
//!    free-form JSON engine.
//!
//! A plain `main` (harness = false) with medians over repetitions, not criterion: the numbers
//! are shares and throughputs, and the machine is shared, so medians of short runs are steadier
//! than criterion's long sampling. Run: `cargo bench --bench decode`.

use grammask::decode::batch::{fill_serial, BatchMasker};
use grammask::decode::{decode, DecodeConfig, FastForward, RandomLogits};
use grammask::mask::words_for;
use grammask::schema::{PropertyOrder, SchemaConstraint, SchemaOptions};
use grammask::Whitespace;
use grammask::{ConstraintEngine, JsonConfig, JsonObjectConstraint, TokenMask, Vocabulary};
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn sample_then_check(vocab: &Vocabulary) {
    println!("## sample-then-check (random-logit decode, JSON, 300-token limit, 16 seeds)");
    println!("| temperature | mode | skip share | masks filled | steps | constraint µs/step | sample µs/step |");
    println!("|---|---|---|---|---|---|---|");
    for temperature in [0.0f32, 0.8] {
        for stc in [true, false] {
            let (mut skipped, mut rejected, mut filled, mut steps, mut us) = (0, 0, 0, 0, 0.0);
            let mut sample_us = 0.0;
            for seed in 0..16 {
                let mut engine = JsonObjectConstraint::new(vocab, &JsonConfig::default()).unwrap();
                let mut model = RandomLogits::new(vocab, seed);
                let cfg = DecodeConfig::builder()
                    .max_tokens(300)
                    .temperature(temperature)
                    .seed(seed)
                    .sample_then_check(stc)
                    .build()
                    .unwrap();
                let out = decode(&mut model, vocab, Some(&mut engine), &cfg).unwrap();
                skipped += out.counters.masks_skipped;
                rejected += out.counters.check_rejections;
                filled += out.counters.masks_filled;
                steps += out.counters.steps;
                us += out.timings.iter().map(|t| t.constraint_us).sum::<f64>();
                sample_us += out.timings.iter().map(|t| t.sample_us).sum::<f64>();
            }
            let share = if skipped + rejected == 0 {
                0.0
            } else {
                skipped as f64 / (skipped + rejected) as f64
            };
            println!(
                "| {temperature} | {} | {:.1}% | {filled} | {steps} | {:.1} | {:.1} |",
                if stc { "sample-then-check" } else { "mask first" },
                100.0 * share,
                us / steps as f64,
                sample_us / steps as f64
            );
        }
    }
}

/// Sample-then-check with a model that mostly writes valid JSON: the replay model over MaskBench
/// documents, its document token at logit 14 (≈ 82% of the mass at temperature 1 over 151k
/// tokens of noise in [0, 1)).
fn sample_then_check_replay(vocab: &Vocabulary) {
    let docs = maskbench_docs(60);
    if docs.is_empty() {
        return;
    }
    println!(
        "\n## sample-then-check, replay model (strength 14, {} MaskBench documents)",
        docs.len()
    );
    println!(
        "| temperature | skip share | masks filled | steps | constraint µs/step | sample µs/step |"
    );
    println!("|---|---|---|---|---|---|");
    for temperature in [0.0f32, 1.0] {
        let (mut skipped, mut rejected, mut filled, mut steps, mut us, mut sus) =
            (0, 0, 0, 0, 0.0, 0.0);
        for (i, doc) in docs.iter().enumerate() {
            let ids = vocab.encode(doc).unwrap();
            let mut engine = JsonObjectConstraint::new(vocab, &JsonConfig::default()).unwrap();
            let mut model =
                grammask::decode::ReplayModel::new(vocab, ids.clone()).with_strength(14.0);
            let cfg = DecodeConfig::builder()
                .max_tokens(ids.len() + 20)
                .temperature(temperature)
                .seed(i as u64)
                .build()
                .unwrap();
            let out = decode(&mut model, vocab, Some(&mut engine), &cfg).unwrap();
            skipped += out.counters.masks_skipped;
            rejected += out.counters.check_rejections;
            filled += out.counters.masks_filled;
            steps += out.counters.steps;
            us += out.timings.iter().map(|t| t.constraint_us).sum::<f64>();
            sus += out.timings.iter().map(|t| t.sample_us).sum::<f64>();
        }
        println!(
            "| {temperature} | {:.1}% | {filled} | {steps} | {:.1} | {:.1} |",
            100.0 * skipped as f64 / (skipped + rejected).max(1) as f64,
            us / steps as f64,
            sus / steps as f64
        );
    }
}

/// Compact serialisations of the valid test documents of MaskBench instances (every `step`-th
/// file so that at most `max` come back), or nothing when the directory is absent.
fn maskbench_docs(max: usize) -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/maskbench-dev");
    let Ok(rd) = std::fs::read_dir(&dir) else { return Vec::new() };
    let mut files: Vec<_> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    files.sort();
    let mut docs = Vec::new();
    for path in files.iter().step_by((files.len() / max).max(1)) {
        let Ok(text) = std::fs::read_to_string(path) else { continue };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else { continue };
        let Some(tests) = v["tests"].as_array() else { continue };
        if let Some(t) = tests.iter().find(|t| t["valid"] == true && t["data"].is_object()) {
            docs.push(serde_json::to_string(&t["data"]).unwrap());
        }
        if docs.len() == max {
            break;
        }
    }
    docs
}

fn batch(vocab: &Vocabulary) {
    let prefixes = [
        "",
        "{",
        "{\"a\"",
        "{\"a\": ",
        "{\"a\": \"x",
        "{\"a\": [1, ",
        "{\"a\": tr",
        "{\"a\": {\"b\": null}",
    ];
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("\n## batch masks (JSON engines at 8 varied states, mask cache off, {cores} cores)");
    println!("| N | serial ms | parallel ms | parallel masks/s | speed-up |");
    println!("|---|---|---|---|---|");
    let mut opts = JsonConfig::default();
    opts.engine.mask_cache = 0;
    for n in [1usize, 2, 8, 64] {
        let mut engines: Vec<JsonObjectConstraint> = (0..n)
            .map(|i| {
                let mut e = JsonObjectConstraint::new(vocab, &opts).unwrap();
                for &t in &vocab.encode(prefixes[i % prefixes.len()]).unwrap() {
                    e.advance(t).unwrap();
                }
                e
            })
            .collect();
        let w = words_for(vocab.n_vocab());
        let mut buf = vec![0u32; n * w];
        let mut masker = BatchMasker::new(vocab.n_vocab(), 0);
        let mut scratch = TokenMask::new(vocab.n_vocab());
        let reps = (64 / n).clamp(3, 16);
        let (mut ser, mut par) = (Vec::new(), Vec::new());
        for _ in 0..reps {
            let mut refs: Vec<&mut dyn ConstraintEngine> =
                engines.iter_mut().map(|e| e as &mut dyn ConstraintEngine).collect();
            let t0 = Instant::now();
            fill_serial(&mut refs, &mut buf, &mut scratch, w).unwrap();
            ser.push(t0.elapsed().as_secs_f64() * 1e3);
            let t0 = Instant::now();
            masker.fill(&mut refs, &mut buf).unwrap();
            par.push(t0.elapsed().as_secs_f64() * 1e3);
        }
        let (s, p) = (median(ser), median(par));
        println!("| {n} | {s:.2} | {p:.2} | {:.0} | {:.2}× |", n as f64 / (p / 1e3), s / p);
    }
}

fn fast_forward(vocab: &Vocabulary) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/maskbench-dev");
    let Ok(rd) = std::fs::read_dir(&dir) else {
        println!("\n## fast-forward: {} not found, skipped", dir.display());
        return;
    };
    let mut files: Vec<_> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    files.sort();
    let ff = FastForward::new(vocab);
    // (label, per-schema engine factory): the free-form JSON engine, and the schema engine in
    // compact mode with keys in any order (the default) and in schema order.
    type Factory<'a> = Box<dyn Fn(&serde_json::Value) -> Option<Box<dyn ConstraintEngine>> + 'a>;
    let schema_engine = |order: PropertyOrder| -> Factory<'_> {
        Box::new(move |schema: &serde_json::Value| {
            let options = SchemaOptions::default()
                .with_whitespace(Whitespace::Compact)
                .with_property_order(order);
            let e = SchemaConstraint::compile(schema, vocab, &options).ok()?;
            Some(Box::new(e) as Box<dyn ConstraintEngine>)
        })
    };
    let engines: Vec<(&str, Factory<'_>)> = vec![
        (
            "free-form JSON engine",
            Box::new(|_: &serde_json::Value| {
                let e = JsonObjectConstraint::new(vocab, &JsonConfig::default()).ok()?;
                Some(Box::new(e) as Box<dyn ConstraintEngine>)
            }),
        ),
        ("schema engine, compact, any key order", schema_engine(PropertyOrder::Any)),
        ("schema engine, compact, schema key order", schema_engine(PropertyOrder::Schema)),
    ];
    for (label, make) in &engines {
        let (mut docs, mut total, mut forced, mut forced_bytes_total) =
            (0usize, 0usize, 0usize, 0usize);
        let (mut bytes, mut toks) = (Vec::new(), Vec::new());
        let t_all = Instant::now();
        for path in files.iter().step_by((files.len() / 400).max(1)) {
            let Ok(text) = std::fs::read_to_string(path) else { continue };
            let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else { continue };
            let Some(tests) = v["tests"].as_array() else { continue };
            for t in tests.iter().filter(|t| t["valid"] == true && t["data"].is_object()) {
                let doc = serde_json::to_string(&t["data"]).unwrap();
                let Ok(ids) = vocab.encode(&doc) else { continue };
                let Some(mut engine) = make(&v["schema"]) else { continue };
                // Replay: where fast-forward's tokens are the document's next tokens, they are
                // appended without the model; otherwise the document's token is "sampled".
                let (mut i, mut ok, mut doc_forced, mut doc_bytes) = (0, true, 0, 0);
                while i < ids.len() && ok {
                    ff.forced_tokens(engine.as_ref(), &mut bytes, &mut toks).unwrap();
                    doc_bytes += bytes.len();
                    let k = toks.iter().zip(&ids[i..]).take_while(|(a, b)| a == b).count();
                    let take = if k > 0 { k } else { 1 };
                    doc_forced += k;
                    for &t in &ids[i..i + take] {
                        ok &= engine.advance(t).is_ok();
                    }
                    i += take;
                }
                // Only documents the engine walks completely are counted.
                if ok {
                    docs += 1;
                    total += ids.len();
                    forced += doc_forced;
                    forced_bytes_total += doc_bytes;
                }
            }
        }
        println!(
            "\n## fast-forward ({label}, {docs} valid MaskBench documents walked, compact \
             serde_json serialisation, {:.1} s)",
            t_all.elapsed().as_secs_f64()
        );
        println!(
            "forced tokens: {forced} of {total} ({:.2}%); forced bytes reported: {forced_bytes_total}",
            100.0 * forced as f64 / total.max(1) as f64
        );
    }
}

fn main() {
    let vocab = Vocabulary::embedded().unwrap();
    let which = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    let run = |name: &str| which.as_deref().is_none_or(|w| w == name);
    if run("stc") {
        sample_then_check(&vocab);
        sample_then_check_replay(&vocab);
    }
    if run("batch") {
        batch(&vocab);
    }
    if run("ff") {
        fast_forward(&vocab);
    }
}
