//! `grammask generate --model PATH.gguf`: the generate command on a real model. Kept apart from
//! `main.rs` (which only adds the flags and the hand-over) so the model path stays one file:
//! loading with progress on stderr, the chat prompt, the vocabulary check, the overlapped loop,
//! and the timing fields of `--format json`. Also where the main job looks for the model.

use super::{build_engine, cli_tools, decode_setup, load_vocab, Format, GenerateArgs};
use clap::Args;
use grammask::decode::{decode, decode_overlapped};
use grammask::model::{GgufModel, LoadProgress, ModelConfig};
use grammask::stats::Summary;
use grammask::ConstraintEngine;
use std::io::Write as _;
use std::path::PathBuf;
use std::time::Instant;

/// The model file the repository's scripts and docs use.
pub const MODEL_FILE: &str = "smollm2-135m-instruct-q4_1.gguf";

/// The main job's prompt when none is given.
///
/// It names the keys and bounds the list: with "a list of hobbies" SmolLM2-135M greedily
/// repeated the same hobby object until the 512-token limit (`finish_reason: length`); with
/// three strings asked for it writes a whole document in ~40 tokens.
pub const DEFAULT_PROMPT: &str = "Describe a fictional person as a JSON object with the keys \
    name, age and hobbies (a list of three strings).";

#[derive(Args, Clone, Default)]
pub struct ModelArgs {
    /// A GGUF model file (llama architecture, e.g. ../shared/models/smollm2-135m-instruct-q4_1.gguf):
    /// decode with it instead of the random-logit model.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// The user message (rendered with the model's chat template; with --model).
    #[arg(long)]
    pub prompt: Option<String>,
    /// A system message (with --model).
    #[arg(long)]
    pub system: Option<String>,
    /// Decode without a constraint: the model's (or the random model's) own output.
    #[arg(long)]
    pub no_constraint: bool,
    /// No progress on stderr while the model loads.
    #[arg(long)]
    pub quiet: bool,
    /// Forward-pass threads (default: every core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// The int8 dot kernels: scalar, avx2 or avx512-vnni (default: the best this
    /// CPU has; with --model).
    #[arg(long)]
    pub kernel: Option<grammask::model::DotKernel>,
    /// Fill each mask while the forward pass runs (default: only when --threads leaves a core
    /// free; see docs/model.md).
    #[arg(long, conflicts_with = "no_overlap")]
    pub overlap: bool,
    /// Fill each mask after the forward pass (sample-then-check), never during it.
    #[arg(long)]
    pub no_overlap: bool,
}

/// Where the main job looks for the model, in order: `$GRAMMASK_MODEL`, `../shared/models`
/// (from the working directory, then from the crate's source), the per-user cache that
/// `scripts/fetch-model.sh` fills (`$XDG_CACHE_HOME/grammask` or `~/.cache/grammask`).
pub fn find_model() -> Option<PathBuf> {
    let mut candidates = Vec::new();
    if let Some(p) = std::env::var_os("GRAMMASK_MODEL") {
        candidates.push(PathBuf::from(p));
    }
    candidates.push(PathBuf::from("../shared/models").join(MODEL_FILE));
    candidates
        .push(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/models").join(MODEL_FILE));
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")));
    if let Some(c) = cache {
        candidates.push(c.join("grammask").join(MODEL_FILE));
    }
    candidates.into_iter().find(|p| p.is_file())
}

/// The one line the main job prints when it found no model.
pub const NO_MODEL_HINT: &str = "note: no model found (run scripts/fetch-model.sh, or pass \
    --model PATH.gguf); decoding with the random-logit model";

fn progress(quiet: bool) -> impl FnMut(LoadProgress) {
    let mut last = u64::MAX;
    move |p| {
        if quiet {
            return;
        }
        let mut err = std::io::stderr().lock();
        match p {
            LoadProgress::Reading { done, total } => {
                let pct = done * 100 / total.max(1);
                if pct != last {
                    last = pct;
                    let _ = write!(err, "\rloading model: {pct:3}%");
                }
            }
            LoadProgress::Vocabulary => {
                let _ = write!(err, "\rloading model: vocabulary");
            }
            LoadProgress::Ready => {
                let _ = writeln!(err, "\rloading model: ready      ");
            }
            _ => {}
        }
    }
}

/// `generate` on the model at `path`.
pub fn generate(args: &GenerateArgs, path: &PathBuf) -> Result<(), String> {
    let m = &args.model;
    if args.finish_after.is_some() {
        return Err(
            "--finish-after steers the random-logit model; it is not supported with --model".into(),
        );
    }
    let mut builder = ModelConfig::builder();
    if let Some(t) = m.threads {
        builder = builder.threads(t);
    }
    if let Some(k) = m.kernel {
        builder = builder.kernel(k);
    }
    let config = builder.build().map_err(|e| e.to_string())?;
    let mut model = GgufModel::load_with_progress(path, &config, &mut progress(m.quiet))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let vocab = model.vocab().clone();
    // A constraint over another vocabulary is refused before anything runs.
    if args.vocab.tokenizer.is_some() {
        let other = load_vocab(&args.vocab)?;
        model.check_vocab(&other).map_err(|e| e.to_string())?;
    }
    let engine: Option<Box<dyn ConstraintEngine>> =
        if m.no_constraint { None } else { Some(build_engine(&vocab, &args.constraint)?) };
    let user = m.prompt.as_deref().unwrap_or(DEFAULT_PROMPT);
    let prompt = model.chat_prompt(m.system.as_deref(), user).map_err(|e| e.to_string())?;
    model.set_prompt(&prompt).map_err(|e| e.to_string())?;
    // The context bounds the generation: the limit is what fits after the prompt.
    let max_tokens = args.max_tokens.min(model.context() - prompt.len());
    let (dc, mut engine) = decode_setup(args, &vocab, engine, max_tokens)?;
    let prefill = model.prefill().map_err(|e| e.to_string())?;
    model.reset_stats();
    let t0 = Instant::now();
    let engine_ref: Option<&mut dyn ConstraintEngine> = match engine.as_mut() {
        Some(e) => Some(e.as_mut()),
        None => None,
    };
    // Overlap hides the mask only on a core the forward pass leaves idle.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let overlap = m.overlap || (!m.no_overlap && config.threads() < cores);
    let gen = if !overlap {
        decode(&mut model, &vocab, engine_ref, &dc)
    } else {
        decode_overlapped(&mut model, &vocab, engine_ref, &dc)
    }
    .map_err(|e| e.to_string())?;
    let wall = t0.elapsed().as_secs_f64();
    let stats = model.stats();
    let summary = Summary::of(&gen.mask_us);
    let forward_ms_mean = if stats.decode_calls > 0 {
        stats.decode_time.as_secs_f64() * 1e3 / stats.decode_calls as f64
    } else {
        0.0
    };
    let tokens_per_s = gen.tokens.len() as f64 / wall.max(1e-9);
    let constraint_s: f64 = gen.timings.iter().map(|t| t.constraint_us).sum::<f64>() / 1e6;
    let overhead_pct = 100.0 * constraint_s / wall.max(1e-9);
    let r2 = |v: f64| (v * 100.0).round() / 100.0;
    match args.format {
        Format::Json => {
            let mut v = serde_json::json!({
                "content": gen.content(),
                "finish_reason": gen.finish_reason.as_str(),
                "n_tokens": gen.tokens.len(),
                "prompt_tokens": prompt.len(),
                "mask_us": summary.to_json(),
                "masks_skipped": gen.counters.masks_skipped,
                "overlap": overlap,
                "timing": {
                    "prefill_ms": r2(prefill.as_secs_f64() * 1e3),
                    "forward_ms_mean": r2(forward_ms_mean),
                    "tokens_per_s": r2(tokens_per_s),
                    "constraint_overhead_pct": r2(overhead_pct),
                },
            });
            if args.think_budget.is_some() {
                v["reasoning_content"] = serde_json::Value::String(gen.reasoning_content());
            }
            let text = grammask::constraint::tools::render_output(&vocab, &gen.tokens);
            cli_tools::report(&args.constraint.tools, &vocab, &text, &mut v);
            say!("{v}");
        }
        Format::Text => {
            if args.think_budget.is_some() {
                say!("reasoning: {}", gen.reasoning_content());
            }
            say!("{}", gen.content());
            say!("finish_reason: {}", gen.finish_reason);
            say!("steps: {} (prompt {} tokens)", gen.tokens.len(), prompt.len());
            say!("mask latency: {summary}");
            let c = &gen.counters;
            if c.masks_skipped > 0 {
                // Sample-then-check: a step whose free draw the engine allowed fills no mask.
                say!(
                    "masks: {} filled, {} steps needed none (the sampled token was checked and \
                     allowed), {} draws refused and redrawn from the mask",
                    c.masks_filled,
                    c.masks_skipped,
                    c.check_rejections
                );
            }
            say!(
                "prefill {:.1} ms, forward {forward_ms_mean:.2} ms/token, {tokens_per_s:.1} \
                 tokens/s, constraint overhead {overhead_pct:.2}% ({} kernels)",
                prefill.as_secs_f64() * 1e3,
                model.kernel().name()
            );
        }
    }
    Ok(())
}
