//! Per-step mask latency of free-form JSON on realistic documents: 24 real-world JSON objects
//! (valid MaskBench instances, serialised as Python's `json.dumps` does, in
//! `benches/data/json_docs.jsonl`) walked token by token, timing every mask as a decode loop
//! would see it (mask cache on, the default). Prints mean, p50, p99 and max per tokenizer:
//! the embedded Qwen3 always, llama3 and gemma3 from `../shared/tokenizers` when present, and
//! what the first engine over each vocabulary costs (its slices are built then).
//!
//! Run: `cargo bench --bench json_walk`

use grammask::stats::Summary;
use grammask::{
    ConstraintEngine, EngineOptions, JsonConfig, JsonObjectConstraint, TokenMask, Vocabulary,
};
use std::time::Instant;

fn main() {
    let docs: Vec<String> =
        include_str!("data/json_docs.jsonl").lines().map(String::from).collect();
    let mut vocabs = vec![("qwen3".to_string(), Vocabulary::embedded().unwrap())];
    for name in ["llama3", "gemma3"] {
        if let Ok(v) = Vocabulary::from_file(format!("../shared/tokenizers/{name}.json")) {
            vocabs.push((name.to_string(), v));
        }
    }
    for (name, vocab) in &vocabs {
        // The first engine over a vocabulary builds its string and structural slices.
        let t0 = Instant::now();
        JsonObjectConstraint::new(vocab, &JsonConfig::default()).unwrap();
        let first = t0.elapsed().as_secs_f64() * 1e3;
        let t0 = Instant::now();
        JsonObjectConstraint::new(vocab, &JsonConfig::default()).unwrap();
        let next = t0.elapsed().as_secs_f64() * 1e6;
        println!("{name:7} first engine {first:.1} ms (slices built), next {next:.1} µs");
        for (label, cache) in [("cache on (default)", 8), ("cache off", 0)] {
            let config =
                JsonConfig::default().with_engine(EngineOptions::default().with_mask_cache(cache));
            let mut times = Vec::new();
            let mut tokens = 0;
            for _round in 0..3 {
                for doc in &docs {
                    let ids = vocab.encode_continuation(doc).unwrap();
                    tokens += ids.len();
                    let mut e = JsonObjectConstraint::new(vocab, &config).unwrap();
                    let mut mask = TokenMask::new(vocab.n_vocab());
                    for &t in &ids {
                        let t0 = Instant::now();
                        e.fill_mask(&mut mask).unwrap();
                        times.push(t0.elapsed().as_secs_f64() * 1e6);
                        assert!(mask.contains(t));
                        e.advance(t).unwrap();
                    }
                }
            }
            let s = Summary::of(&times);
            println!(
                "{name:7} {label:18} {} docs, {} tokens/round: mean {:.1} µs  p50 {:.1}  p99 {:.1}  max {:.1}",
                docs.len(),
                tokens / 3,
                s.mean,
                s.p50,
                s.p99,
                s.max
            );
        }
    }
}
