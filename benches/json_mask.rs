//! Free-form JSON masks in characteristic states (start, inside a string, inside a number,
//! after a comma, deep nesting, after a key), uncached, on the embedded Qwen3 tokenizer and on
//! llama3/gemma3 from `../shared/tokenizers` when present.

use criterion::{criterion_group, criterion_main, Criterion};
use grammask::{
    ConstraintEngine, EngineOptions, JsonConfig, JsonObjectConstraint, TokenMask, Vocabulary,
};
use std::time::Duration;

const STATES: &[(&str, &str)] = &[
    ("start", ""),
    ("after_open", "{"),
    ("in_key", "{\"na"),
    ("after_key", "{\"name\""),
    ("value_start", "{\"name\": "),
    ("in_string", "{\"name\": \"Caf"),
    ("in_number", "{\"n\": 12"),
    ("after_comma", "{\"a\": [1, 2, "),
    ("deep", "{\"a\": [[[{\"b\": [{\"c\": [[1, 2], [3"),
    ("after_value", "{\"a\": 1"),
];

fn vocabs() -> Vec<(String, Vocabulary)> {
    let mut out = vec![("qwen3".to_string(), Vocabulary::embedded().unwrap())];
    for name in ["llama3", "gemma3"] {
        if let Ok(v) = Vocabulary::from_file(format!("../shared/tokenizers/{name}.json")) {
            out.push((name.to_string(), v));
        }
    }
    out
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("json_mask");
    g.warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(1));
    for (name, vocab) in vocabs() {
        let config = JsonConfig::default().with_engine(EngineOptions::default().with_mask_cache(0));
        for (state, prefix) in STATES {
            let mut e = JsonObjectConstraint::new(&vocab, &config).unwrap();
            e.advance_bytes(prefix.as_bytes()).unwrap();
            let mut mask = TokenMask::new(vocab.n_vocab());
            g.bench_function(format!("{name}/{state}"), |b| {
                b.iter(|| e.fill_mask(&mut mask).unwrap())
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
