//! The batched forward pass alone: tokens per second of one decode step over 1, 2, 4, 8 and
//! 16 sequences of the server's backend (`BatchedModel`), without HTTP, sampling or masks, to
//! tell the model's batching gain apart from the server's overheads (docs/performance.md).
//!
//! Also the prefill of one and of eight different ~216-token prompts in one step (the
//! server's burst of new requests, whose time to first token is that step).
//!
//! usage: cargo bench --features model --bench batch_forward [-- MODEL.gguf]
//! (env `GRAMMASK_KERNEL`: scalar, avx2 or avx512-vnni; default the best here)

use grammask::model::{GgufModel, ModelConfig, StepRequest};
use grammask::TokenId;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `cargo bench` passes `--bench`: the model is the first argument naming a .gguf file.
    let path = std::env::args()
        .skip(1)
        .find(|a| a.ends_with(".gguf"))
        .unwrap_or_else(|| "../shared/models/smollm2-135m-instruct-q4_1.gguf".into());
    let mut cfg = ModelConfig::builder().context(1024);
    if let Ok(k) = std::env::var("GRAMMASK_KERNEL") {
        cfg = cfg.kernel(k.parse()?);
    }
    let model = GgufModel::load(&path, &cfg.build()?)?;
    println!("{} kernels", model.kernel().name());
    let n = model.vocab().n_vocab();
    let prompt = model.chat_prompt(None, "Tell me a story.")?;
    // Prefill: 1 and 8 different prompts of ~216 tokens in one step (the server's burst of
    // new requests: time to first token is this step's time).
    let long = "The old lighthouse keeper walked along the shore every morning, counting the \
                boats that came back from the sea and writing their names in a worn notebook. "
        .repeat(6);
    let prompts: Vec<Vec<TokenId>> = (0..8)
        .map(|i| model.chat_prompt(None, &format!("Logbook {}. {long} Summarise this.", i + 1)))
        .collect::<Result<_, _>>()?;
    let mut b = model.into_batched();
    for bs in [1usize, 8] {
        let mut best = f64::INFINITY;
        for _ in 0..3 {
            let ids: Vec<_> = (0..bs).map(|_| b.new_sequence()).collect();
            let mut rows = vec![vec![0f32; n]; bs];
            let reqs: Vec<_> =
                ids.iter().zip(&prompts).map(|(s, t)| StepRequest { seq: *s, tokens: t }).collect();
            let mut out: Vec<&mut [f32]> = rows.iter_mut().map(|r| &mut r[..]).collect();
            let t0 = Instant::now();
            for r in b.step(&reqs, &mut out) {
                r?;
            }
            best = best.min(t0.elapsed().as_secs_f64());
            for id in ids {
                b.free(id);
            }
        }
        let tokens: usize = prompts[..bs].iter().map(Vec::len).sum();
        println!(
            "prefill {bs} x {} tokens: {:6.1} ms (best of 3), {:6.1} tokens/s",
            prompts[0].len(),
            best * 1e3,
            tokens as f64 / best
        );
    }
    for bs in [1usize, 2, 4, 8, 16] {
        let ids: Vec<_> = (0..bs).map(|_| b.new_sequence()).collect();
        let mut seqs: Vec<Vec<TokenId>> = (0..bs).map(|_| prompt.clone()).collect();
        let mut rows = vec![vec![0f32; n]; bs];
        let steps = 21;
        let mut t0 = Instant::now();
        for k in 0..steps {
            if k == 1 {
                t0 = Instant::now(); // step 0 is the prefill
            }
            if k > 0 {
                for s in seqs.iter_mut() {
                    s.push(TokenId(100 + k as u32));
                }
            }
            let reqs: Vec<_> =
                ids.iter().zip(&seqs).map(|(s, t)| StepRequest { seq: *s, tokens: t }).collect();
            let mut out: Vec<&mut [f32]> = rows.iter_mut().map(|r| &mut r[..]).collect();
            for r in b.step(&reqs, &mut out) {
                r?;
            }
        }
        let dt = t0.elapsed().as_secs_f64();
        let per = dt * 1e3 / (steps - 1) as f64;
        println!(
            "batch {bs:2}: {per:6.1} ms/step, {:6.1} tokens/s",
            (bs * (steps - 1)) as f64 / dt
        );
        for id in ids {
            b.free(id);
        }
    }
    Ok(())
}
