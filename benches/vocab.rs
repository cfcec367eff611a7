//! Vocabulary construction: decoding every token to bytes and building the trie from an already
//! loaded tokenizer (the number the issue bounds at 100 ms for 151k tokens), reported apart from
//! the tokenizer's own load time, and the whole load of a file three ways: without a cache
//! (`from_file`: read, `tokenizers` load, decode, trie), and read back from the vocabulary cache
//! (`vocab/cache.rs`: hash the files, read, check, rebuild the derived trie arrays; issue 23
//! goal 4 bounds it at 30 ms for 150k tokens). Uses `../shared/tokenizers/*.json` when present,
//! the embedded Qwen3 tokenizer always.

use criterion::{criterion_group, criterion_main, Criterion};
use grammask::vocab::{CacheOutcome, VocabCache, VocabConfig};
use grammask::Vocabulary;
use std::path::PathBuf;
use std::time::Duration;

fn tokenizers() -> Vec<(String, Vec<u8>, Option<PathBuf>)> {
    let mut out = Vec::new();
    for name in ["qwen3", "llama3", "gemma3"] {
        let p = PathBuf::from(format!("../shared/tokenizers/{name}.json"));
        if let Ok(b) = std::fs::read(&p) {
            out.push((name.to_string(), b, Some(p)));
        }
    }
    if out.is_empty() {
        let v = Vocabulary::embedded().unwrap();
        let json = v.tokenizer().unwrap().to_string(false).unwrap();
        out.push(("qwen3-embedded".into(), json.into_bytes(), None));
    }
    out
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("vocab");
    g.sample_size(10).measurement_time(Duration::from_secs(8));
    let cache = std::env::temp_dir().join(format!("grammask-bench-vocab-{}", std::process::id()));
    let cached = VocabConfig::default().with_cache(VocabCache::Dir(cache.clone()));
    for (name, json, path) in tokenizers() {
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
        let Some(path) = path else { continue };
        g.bench_function(format!("file_uncached/{name}"), |b| {
            b.iter(|| Vocabulary::from_file(&path).unwrap())
        });
        let first = Vocabulary::from_file_with(&path, &cached).unwrap();
        assert!(matches!(first.cache_outcome(), Some(CacheOutcome::Stored { .. })));
        g.bench_function(format!("file_cached/{name}"), |b| {
            b.iter(|| {
                let v = Vocabulary::from_file_with(&path, &cached).unwrap();
                assert!(matches!(v.cache_outcome(), Some(CacheOutcome::Hit { .. })));
                v
            })
        });
    }
    g.finish();
    let _ = std::fs::remove_dir_all(&cache);
}

criterion_group!(benches, bench);
criterion_main!(benches);
