//! Vocabulary construction: decoding every token to bytes and building the trie from an already
//! loaded tokenizer (the number the issue bounds at 100 ms for 151k tokens), reported apart from
//! the tokenizer's own load time. Uses `../shared/tokenizers/*.json` when present, the embedded
//! Qwen3 tokenizer always.

use criterion::{criterion_group, criterion_main, Criterion};
use grammask::vocab::VocabConfig;
use grammask::Vocabulary;
use std::time::Duration;

fn tokenizers() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for name in ["qwen3", "llama3", "gemma3"] {
        let p = format!("../shared/tokenizers/{name}.json");
        if let Ok(b) = std::fs::read(&p) {
            out.push((name.to_string(), b));
        }
    }
    if out.is_empty() {
        let v = Vocabulary::embedded().unwrap();
        let json = v.tokenizer().unwrap().to_string(false).unwrap();
        out.push(("qwen3-embedded".into(), json.into_bytes()));
    }
    out
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("vocab");
    g.sample_size(10).measurement_time(Duration::from_secs(8));
    for (name, json) in tokenizers() {
        g.bench_function(format!("tokenizer_load/{name}"), |b| {
            b.iter(|| tokenizers::Tokenizer::from_bytes(&json).unwrap())
        });
        let tok = tokenizers::Tokenizer::from_bytes(&json).unwrap();
        g.bench_function(format!("bytes_and_trie/{name}"), |b| {
            b.iter_batched(
                || tok.clone(),
                |t| Vocabulary::from_tokenizer(t, None, &VocabConfig::default()).unwrap(),
                criterion::BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
