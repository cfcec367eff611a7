//! The vocabulary cache's own BPE encoder (`vocab/bpe.rs`) against `tokenizers` on a large
//! corpus: every schema and instance of a MaskBench folder (compact and pretty), 100,000
//! generated strings over characters pre-tokenizers treat unusually, long runs of one
//! character, and any files named. Prints how many texts encode to different ids (the
//! first few shown) and each encoder's time; exits 1 on any difference.
//!
//! Run: `cargo bench --bench encoder -- ../shared/tokenizers/llama3.json [FILES…]`
//! (`MASKBENCH=<dir>`, default `../shared/maskbench-dev`). The vocabulary is stored in and read
//! back from a scratch cache first, so `Vocabulary::encode` runs the cached encoder;
//! `tokenizers` is the lazily loaded model of the same file.

use grammask::vocab::{VocabCache, VocabConfig};
use grammask::Vocabulary;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let Some(tok) = args.first() else {
        eprintln!("usage: cargo bench --bench encoder -- TOKENIZER.json [FILES…]");
        std::process::exit(2);
    };
    let dir = std::env::temp_dir().join(format!("grammask-encoder-bench-{}", std::process::id()));
    let cfg = VocabConfig::default().with_cache(VocabCache::Dir(dir.clone()));
    Vocabulary::from_file_with(tok, &cfg).expect("tokenizer");
    let t0 = Instant::now();
    let v = Vocabulary::from_file_with(tok, &cfg).expect("tokenizer");
    println!("{tok}: cache read {:?}, own encoder: {}", t0.elapsed(), v.has_cached_encoder());
    let mut texts: Vec<String> = Vec::new();
    let mb = std::env::var("MASKBENCH").unwrap_or_else(|_| "../shared/maskbench-dev".into());
    if let Ok(entries) = std::fs::read_dir(&mb) {
        for e in entries.flatten() {
            let Ok(j) = serde_json::from_slice::<serde_json::Value>(
                &std::fs::read(e.path()).unwrap_or_default(),
            ) else {
                continue;
            };
            texts.push(j["schema"].to_string());
            for t in j["tests"].as_array().into_iter().flatten() {
                texts.push(t["data"].to_string());
                texts.push(serde_json::to_string_pretty(&t["data"]).expect("JSON"));
            }
        }
    }
    let alphabet: Vec<char> = " \t\n\r\u{a0}\u{3000}\u{2003}\u{85}\u{200b}aAzZ'sStT0123456789éE\
        \u{301}\u{308}中文字日本語한국어🎉👍🏽\u{200d}ÿ€\\\"{}[]:,.-_!?<|>/ſßİıǅ\u{fffd}\u{10ffff}\u{7f}\
        \u{0}\u{1f}"
        .chars()
        .collect();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..100_000 {
        let n = (next() % 40) as usize;
        texts.push((0..n).map(|_| alphabet[(next() % alphabet.len() as u64) as usize]).collect());
    }
    for c in ["a", " ", "1", "中", "\n", "'s", "!"] {
        texts.push(c.repeat(5000));
    }
    for f in &args[1..] {
        texts.push(std::fs::read_to_string(f).expect("a UTF-8 file"));
    }
    let t0 = Instant::now();
    let ours: Vec<Vec<u32>> =
        texts.iter().map(|t| v.encode(t).expect("encode").iter().map(|t| t.0).collect()).collect();
    let t_ours = t0.elapsed();
    let tk = v.tokenizer().expect("the tokenizers model");
    let t0 = Instant::now();
    let theirs: Vec<Vec<u32>> = texts
        .iter()
        .map(|t| tk.encode(t.as_str(), false).expect("encode").get_ids().to_vec())
        .collect();
    let t_theirs = t0.elapsed();
    let mut differ = 0;
    for ((text, a), b) in texts.iter().zip(&ours).zip(&theirs) {
        if a != b {
            differ += 1;
            if differ <= 3 {
                let head: String = text.chars().take(120).collect();
                println!("differ: {head:?}\n  ours   {a:?}\n  theirs {b:?}");
            }
        }
    }
    let bytes: usize = texts.iter().map(String::len).sum();
    println!(
        "{} texts, {:.1} MB: {differ} differ; cached encoder {t_ours:?}, tokenizers {t_theirs:?}",
        texts.len(),
        bytes as f64 / 1e6
    );
    let _ = std::fs::remove_dir_all(&dir);
    if differ > 0 {
        std::process::exit(1);
    }
}
