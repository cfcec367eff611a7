//! The `grammask` command-line tool: decode with a random-logit model under a constraint
//! (`generate`), and walk a document token by token through a constraint (`walk`), printing
//! per-step mask latency. Errors print one clear line and exit with status 1.

use clap::{Args, Parser, Subcommand, ValueEnum};
use grammask::decode::{decode, DecodeConfig, RandomLogits, ThinkGate, ThinkMarkers};
use grammask::harness::maskbench::{run_maskbench, MaskbenchOptions};
use grammask::json::TopLevel;
use grammask::schema::PropertyOrder;
use grammask::stats::Summary;
use grammask::{
    CfgConfig, Constraint, ConstraintEngine, JsonConfig, TokenMask, Vocabulary, Whitespace,
};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser)]
#[command(
    name = "grammask",
    version,
    about = "Grammar-constrained decoding: exact, fast token masks"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Decode with a seeded random-logit model under a constraint (default: free-form JSON on
    /// the embedded Qwen3 tokenizer).
    Generate(GenerateArgs),
    /// Tokenize a document and walk it token by token through a constraint.
    Walk(WalkArgs),
    /// Validate a GBNF grammar: print its rules, unreachable and unproductive rules.
    Check(CheckArgs),
    /// Score the JSON Schema engine on a folder of MaskBench files: compile every schema, walk
    /// every instance token by token timing each mask, print the summary.
    Maskbench(MaskbenchArgs),
}

#[derive(Args)]
struct MaskbenchArgs {
    /// Folder of MaskBench JSON files (e.g. ../shared/maskbench-dev).
    dir: PathBuf,
    #[command(flatten)]
    vocab: VocabArgs,
    /// Worker threads (use 1 for latency figures).
    #[arg(long, default_value_t = 1)]
    jobs: usize,
    /// Write one JSON line per schema here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Only files whose name contains this string.
    #[arg(long)]
    filter: Option<String>,
    /// Only the first N files.
    #[arg(long)]
    limit: Option<usize>,
    /// Only every N-th file (an evenly spread sample).
    #[arg(long, default_value_t = 1)]
    stride: usize,
    /// Keys in schema order instead of any order.
    #[arg(long)]
    schema_order: bool,
}

#[derive(Args)]
struct CheckArgs {
    /// The GBNF grammar file.
    #[arg(long)]
    grammar: PathBuf,
}

#[derive(Args, Clone)]
struct ConstraintArgs {
    /// Free-form JSON (the default constraint).
    #[arg(long)]
    json: bool,
    /// Allow any JSON value at the top level, not only an object (with --json).
    #[arg(long)]
    any_value: bool,
    /// Whitespace policy between JSON tokens.
    #[arg(long, value_enum, default_value_t = WsArg::Flexible)]
    whitespace: WsArg,
    /// A regex the whole output must match.
    #[arg(long, conflicts_with_all = ["json", "grammar", "schema"])]
    regex: Option<String>,
    /// A GBNF grammar file (llama.cpp format, `root` is the start rule).
    #[arg(long, conflicts_with_all = ["json", "regex", "schema"])]
    grammar: Option<PathBuf>,
    /// A JSON Schema file the output must validate against.
    #[arg(long, conflicts_with_all = ["json", "regex", "grammar"])]
    schema: Option<PathBuf>,
    #[command(flatten)]
    tools: cli_tools::ToolArgs,
}

#[derive(Clone, Copy, ValueEnum)]
enum WsArg {
    /// No whitespace at all.
    Compact,
    /// Whitespace where RFC 8259 allows it, in bounded runs.
    Flexible,
}

#[derive(Args, Clone)]
struct VocabArgs {
    /// Path to a Hugging Face tokenizer.json (default: the embedded Qwen3 tokenizer).
    #[arg(long)]
    tokenizer: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Format {
    /// Human-readable lines.
    Text,
    /// One JSON object.
    Json,
}

/// `--temperature-placement`, onto `sampler::TemperaturePlacement`.
#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum PlacementArg {
    /// Scale by 1/T, then filter (the default).
    Before,
    /// Filter the temperature-1 distribution, apply T in the draw.
    After,
}

#[derive(Parser)]
struct GenerateArgs {
    #[command(flatten)]
    vocab: VocabArgs,
    #[command(flatten)]
    constraint: ConstraintArgs,
    /// Seed of the random-logit model and of the sampler.
    #[arg(long, default_value_t = 0xA7A7)]
    seed: u64,
    /// Token limit.
    #[arg(long, default_value_t = 512)]
    max_tokens: usize,
    /// Sampling temperature (0: greedy).
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    /// Nucleus sampling threshold (1: off).
    #[arg(long, default_value_t = 1.0)]
    top_p: f32,
    /// Keep only the k most likely tokens (0: off).
    #[arg(long, default_value_t = 0)]
    top_k: usize,
    /// Drop tokens below min_p × the top probability (0: off).
    #[arg(long, default_value_t = 0.0)]
    min_p: f32,
    /// Report the top-K log-probabilities of every step (at most 20).
    #[arg(long, default_value_t = 0)]
    logprobs: usize,
    /// Temperature before top-p/min-p/top-k (HF, vLLM) or after them (mlx-lm).
    #[arg(long, value_enum, default_value_t = PlacementArg::Before)]
    temperature_placement: PlacementArg,
    /// Start inside a `<think>` block and force `</think>` after this many reasoning tokens;
    /// the constraint applies to the answer after it.
    #[arg(long)]
    think_budget: Option<usize>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    #[cfg(feature = "model")]
    #[command(flatten)]
    model: cli_model::ModelArgs,
}

#[derive(Args)]
struct WalkArgs {
    #[command(flatten)]
    vocab: VocabArgs,
    #[command(flatten)]
    constraint: ConstraintArgs,
    /// The document to walk (one trailing newline is ignored).
    #[arg(long)]
    input: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

type CliResult<T> = Result<T, String>;

/// `println!` that never panics: a closed stdout (`grammask … | head`) ends the output quietly.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

#[cfg(feature = "model")]
mod cli_model;
mod cli_tools;

fn load_vocab(args: &VocabArgs) -> CliResult<Vocabulary> {
    match &args.tokenizer {
        Some(p) => Vocabulary::from_file(p).map_err(|e| e.to_string()),
        None => Vocabulary::embedded().map_err(|e| e.to_string()),
    }
}

fn read_text(path: &PathBuf) -> CliResult<String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// The constraint the flags describe (free-form JSON when none is given).
fn constraint_of(c: &ConstraintArgs) -> CliResult<Constraint> {
    if let Some(pattern) = &c.regex {
        return Ok(Constraint::regex(pattern));
    }
    if let Some(path) = &c.schema {
        let text = read_text(path)?;
        let schema: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not JSON: {e}", path.display()))?;
        return Ok(Constraint::json_schema(&schema));
    }
    if let Some(path) = &c.grammar {
        return Ok(Constraint::gbnf(&read_text(path)?));
    }
    let top = if c.any_value { TopLevel::AnyValue } else { TopLevel::Object };
    let whitespace = match c.whitespace {
        WsArg::Compact => Whitespace::Compact,
        WsArg::Flexible => Whitespace::Flexible { max_run: JsonConfig::DEFAULT_MAX_WS_RUN },
    };
    Ok(Constraint::json_with(JsonConfig::default().with_top_level(top).with_whitespace(whitespace)))
}

fn build_engine(vocab: &Vocabulary, c: &ConstraintArgs) -> CliResult<Box<dyn ConstraintEngine>> {
    let source = c.schema.as_ref().or(c.grammar.as_ref()).or(c.tools.tools.as_ref());
    let constraint = match cli_tools::constraint(&c.tools, vocab)? {
        Some(t) => t,
        None => constraint_of(c)?,
    };
    let compiled = constraint.compile(vocab).map_err(|e| match source {
        Some(path) => format!("{}: {e}", path.display()),
        None => e.to_string(),
    })?;
    Ok(compiled.engine())
}

fn maskbench(args: MaskbenchArgs) -> CliResult<()> {
    let vocab = load_vocab(&args.vocab)?;
    let mut opts = MaskbenchOptions {
        jobs: args.jobs,
        out: args.out,
        filter: args.filter,
        limit: args.limit,
        stride: args.stride.max(1),
        progress_every: 100,
        ..MaskbenchOptions::default()
    };
    if args.schema_order {
        opts.schema.property_order = PropertyOrder::Schema;
    }
    let summary = run_maskbench(&args.dir, &vocab, &opts).map_err(|e| e.to_string())?;
    say!("{summary}");
    Ok(())
}

fn check(args: CheckArgs) -> CliResult<()> {
    let text = read_text(&args.grammar)?;
    let report = grammask::cfg::check(&text, &CfgConfig::default())
        .map_err(|e| format!("{}: {e}", args.grammar.display()))?;
    say!("{report}");
    Ok(())
}

/// The decode config the sampling flags describe (for the random-logit and the real model
/// alike), with the thinking gate put around `engine` when `--think-budget` asks for one.
fn decode_setup(
    args: &GenerateArgs,
    vocab: &Vocabulary,
    mut engine: Option<Box<dyn ConstraintEngine>>,
    max_tokens: usize,
) -> CliResult<(DecodeConfig, Option<Box<dyn ConstraintEngine>>)> {
    let mut builder = DecodeConfig::builder()
        .max_tokens(max_tokens)
        .temperature(args.temperature)
        .top_p(args.top_p)
        .top_k(args.top_k)
        .min_p(args.min_p)
        .logprobs(args.logprobs)
        .seed(args.seed);
    if let Some(budget) = args.think_budget {
        builder = builder.think_budget(Some(budget));
        let markers = ThinkMarkers::from_vocab(vocab).map_err(|e| e.to_string())?;
        if let Some(e) = engine.take() {
            engine = Some(Box::new(ThinkGate::new(e, markers)));
        }
    }
    let mut config = builder.build().map_err(|e| e.to_string())?;
    config.sampler.temperature_placement = match args.temperature_placement {
        PlacementArg::Before => grammask::sampler::TemperaturePlacement::BeforeFilters,
        PlacementArg::After => grammask::sampler::TemperaturePlacement::AfterFilters,
    };
    // The library reads no environment; the CLI keeps the old kill switch for its own runs.
    if std::env::var_os("GRAMMASK_SAMPLING_REJECTION").is_some_and(|v| v == "0") {
        config.sampler.filter_algorithm = grammask::sampler::FilterAlgorithm::Sort;
    }
    Ok((config, engine))
}

fn generate(args: GenerateArgs) -> CliResult<()> {
    #[cfg(feature = "model")]
    if let Some(path) = args.model.model.clone() {
        return cli_model::generate(&args, &path);
    }
    let vocab = load_vocab(&args.vocab)?;
    let engine = build_engine(&vocab, &args.constraint)?;
    let mut model = RandomLogits::new(&vocab, args.seed);
    #[cfg(feature = "model")]
    let unconstrained = args.model.no_constraint;
    #[cfg(not(feature = "model"))]
    let unconstrained = false;
    let engine = if unconstrained { None } else { Some(engine) };
    let (config, mut engine) = decode_setup(&args, &vocab, engine, args.max_tokens)?;
    let engine: Option<&mut dyn ConstraintEngine> = match engine.as_mut() {
        Some(e) => Some(e.as_mut()),
        None => None,
    };
    let gen = decode(&mut model, &vocab, engine, &config).map_err(|e| e.to_string())?;
    let summary = Summary::of(&gen.mask_us);
    let skipped = gen.counters.masks_skipped;
    match args.format {
        Format::Json => {
            let mut v = serde_json::json!({
                "content": gen.content(),
                "finish_reason": gen.finish_reason.as_str(),
                "n_tokens": gen.tokens.len(),
                "mask_us": summary.to_json(),
                "masks_skipped": skipped,
            });
            if args.think_budget.is_some() {
                v["reasoning_content"] = serde_json::Value::String(gen.reasoning_content());
            }
            let text = cli_tools::render(&vocab, &gen.tokens);
            cli_tools::report(&args.constraint.tools, &vocab, &text, &mut v);
            if args.logprobs > 0 {
                v["logprobs"] = serde_json::Value::Array(
                    gen.logprobs
                        .iter()
                        .map(|lp| match lp {
                            Some(lp) => serde_json::json!({
                                "token": lp.token.0,
                                "logprob": lp.logprob,
                                "top": lp.top.iter().map(|&(t, l)| serde_json::json!([t.0, l])).collect::<Vec<_>>(),
                            }),
                            None => serde_json::Value::Null,
                        })
                        .collect(),
                );
            }
            say!("{v}");
        }
        Format::Text => {
            if args.think_budget.is_some() {
                say!("reasoning: {}", gen.reasoning_content());
            }
            say!("{}", gen.content());
            for l in cli_tools::lines(
                &args.constraint.tools,
                &vocab,
                &cli_tools::render(&vocab, &gen.tokens),
            ) {
                say!("{l}");
            }
            say!("finish_reason: {}", gen.finish_reason);
            say!("steps: {}", gen.tokens.len());
            say!("mask latency: {summary}");
            say!(
                "masks skipped by sample-then-check: {skipped} of {} constrained steps",
                skipped + gen.counters.masks_filled
            );
        }
    }
    Ok(())
}

fn walk(args: WalkArgs) -> CliResult<()> {
    let vocab = load_vocab(&args.vocab)?;
    let mut engine = build_engine(&vocab, &args.constraint)?;
    let raw = read_text(&args.input)?;
    let text = raw.strip_suffix('\n').unwrap_or(&raw);
    let tokens = vocab.encode_continuation(text).map_err(|e| e.to_string())?;
    let mut mask = TokenMask::new(vocab.n_vocab());
    let mut times = Vec::with_capacity(tokens.len() + 1);
    let mut refused_at = None;
    for (i, &t) in tokens.iter().enumerate() {
        let t0 = Instant::now();
        engine.fill_mask(&mut mask).map_err(|e| e.to_string())?;
        times.push(t0.elapsed().as_secs_f64() * 1e6);
        if !mask.contains(t) || engine.advance(t).is_err() {
            refused_at = Some((i, t));
            break;
        }
    }
    let eos_allowed = refused_at.is_none() && {
        let t0 = Instant::now();
        engine.fill_mask(&mut mask).map_err(|e| e.to_string())?;
        times.push(t0.elapsed().as_secs_f64() * 1e6);
        vocab.eos_ids().iter().any(|&e| mask.contains(e))
    };
    let accepted = refused_at.is_none() && eos_allowed;
    let summary = Summary::of(&times);
    match args.format {
        Format::Json => {
            let refused = refused_at.map(|(i, t)| {
                serde_json::json!({
                    "index": i,
                    "id": t.0,
                    "bytes": String::from_utf8_lossy(vocab.token_bytes(t)),
                })
            });
            let mut v = serde_json::json!({
                "accepted": accepted,
                "refused_at": refused,
                "eos_allowed": eos_allowed,
                "n_tokens": tokens.len(),
                "mask_us": summary.to_json(),
            });
            if accepted {
                cli_tools::report(&args.constraint.tools, &vocab, text, &mut v);
            }
            say!("{v}");
        }
        Format::Text => {
            match refused_at {
                Some((i, t)) => say!("refused token {i}: {}", vocab.describe(t)),
                None => say!("all {} tokens accepted", tokens.len()),
            }
            say!("EOS allowed at the end: {eos_allowed}");
            say!("accepted: {accepted}");
            say!("mask latency: {summary}");
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let command = match cli.command {
        Some(c) => c,
        // No subcommand: the README's main job, `generate --json` on the embedded tokenizer.
        // With the real model when one is found (see `cli_model::find_model`).
        None => {
            #[allow(unused_mut)]
            let mut args = GenerateArgs::parse_from(["generate", "--json"]);
            #[cfg(feature = "model")]
            match cli_model::find_model() {
                Some(p) => args.model.model = Some(p),
                None => eprintln!("{}", cli_model::NO_MODEL_HINT),
            }
            Command::Generate(args)
        }
    };
    let result = match command {
        Command::Generate(a) => generate(a),
        Command::Walk(a) => walk(a),
        Command::Check(a) => check(a),
        Command::Maskbench(a) => maskbench(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
