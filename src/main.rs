//! The `grammask` command-line tool: decode with a random-logit model under a constraint
//! (`generate`), and walk a document token by token through a constraint (`walk`), printing
//! per-step mask latency. Errors print one clear line and exit with status 1 (2: a usage
//! error, from clap); `walk` exits with status 3 when the constraint refuses the document.

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
    /// Largest file read (tokenizer, config, schema, grammar, document), in bytes.
    #[arg(long, global = true, default_value_t = grammask::io::DEFAULT_MAX_FILE_BYTES)]
    max_file_bytes: u64,
}

/// `--max-file-bytes`, set once in `main` before any file is read.
static MAX_FILE_BYTES: std::sync::OnceLock<u64> = std::sync::OnceLock::new();

fn max_file_bytes() -> u64 {
    *MAX_FILE_BYTES.get().unwrap_or(&grammask::io::DEFAULT_MAX_FILE_BYTES)
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
    /// Serve an OpenAI-compatible API (chat and completions, structured outputs, tools) over a
    /// GGUF model (docs/server.md).
    #[cfg(feature = "server")]
    Serve(ServeArgs),
    /// Conformance fuzzing: valid instances of a schema (strings of a regex or grammar) and
    /// labelled near misses, one JSON line each; a coverage summary on stderr.
    Fuzz(FuzzArgs),
}

#[cfg(feature = "server")]
#[derive(Args)]
struct ServeArgs {
    /// A GGUF model file (llama architecture).
    #[arg(long)]
    model: PathBuf,
    /// Address to bind (loopback by default; 0.0.0.0 exposes the server to the network).
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port (0: pick a free one, printed on stderr).
    #[arg(long, default_value_t = grammask::server::DEFAULT_PORT)]
    port: u16,
    /// Requests decoding at once.
    #[arg(long, default_value_t = 8)]
    max_concurrent: usize,
    /// Requests waiting for a slot; past them, 429 with Retry-After.
    #[arg(long, default_value_t = 64)]
    max_queue: usize,
    /// Require `Authorization: Bearer KEY` (default: no key).
    #[arg(long)]
    api_key: Option<String>,
    /// Largest request body in bytes (larger: 413).
    #[arg(long, default_value_t = 4 << 20)]
    max_body_bytes: usize,
    /// max_tokens of a request that sets none.
    #[arg(long, default_value_t = 256)]
    default_max_tokens: usize,
    /// Context per sequence, in tokens.
    #[arg(long, default_value_t = 4096)]
    context: usize,
    /// Forward-pass threads (default: every core).
    #[arg(long)]
    threads: Option<usize>,
    /// The int8 dot kernels: scalar, avx2 or avx512-vnni (default: the best this
    /// CPU has).
    #[arg(long)]
    kernel: Option<grammask::model::DotKernel>,
    /// Run waiting sequences one after the other instead of as one batched pass (comparison).
    #[arg(long)]
    no_batch: bool,
    /// Milliseconds a step waits for the running sequences' next tokens before it runs without
    /// the late ones.
    #[arg(long, default_value_t = 3)]
    batch_wait_ms: u64,
    /// Seconds in-flight requests may run after SIGINT/SIGTERM.
    #[arg(long, default_value_t = 10)]
    shutdown_grace: u64,
    /// The model name responses carry (default: the file stem).
    #[arg(long)]
    model_name: Option<String>,
    /// How JSON Schemas (response formats, tools) compile: `generation` (the subset a model
    /// finishes, every output valid) or `exact` (the schema's whole language); a request may
    /// ask otherwise with `structured_outputs.profile`.
    #[arg(long, value_enum, default_value_t = ProfileArg::Generation)]
    profile: ProfileArg,
    /// Answer requests naming any model (default: a name other than the served one is a 404).
    #[arg(long)]
    accept_any_model: bool,
    /// What logprobs report by default: raw_logprobs (the model's, before the constraint's
    /// mask) or processed_logprobs (the distribution the token was drawn from).
    #[arg(long, default_value = "raw_logprobs", value_parser = ["raw_logprobs", "processed_logprobs"])]
    logprobs_mode: String,
}

#[cfg(feature = "server")]
fn serve(a: ServeArgs) -> CliResult<()> {
    let config = grammask::server::ServerConfig::builder(&a.model)
        .host(&a.host)
        .port(a.port)
        .max_concurrent(a.max_concurrent)
        .max_queue(a.max_queue)
        .api_key(a.api_key)
        .max_body_bytes(a.max_body_bytes)
        .default_max_tokens(a.default_max_tokens)
        .context(a.context)
        .threads(a.threads)
        .kernel(a.kernel)
        .batched(!a.no_batch)
        .batch_wait(std::time::Duration::from_millis(a.batch_wait_ms))
        .shutdown_grace(std::time::Duration::from_secs(a.shutdown_grace))
        .model_name(a.model_name)
        .profile(match a.profile {
            ProfileArg::Exact => grammask::Profile::Exact,
            ProfileArg::Generation => grammask::Profile::Generation,
        })
        .accept_any_model(a.accept_any_model)
        .logprobs_mode(
            grammask::sampler::LogprobsMode::parse(&a.logprobs_mode)
                .ok_or("--logprobs-mode: raw_logprobs or processed_logprobs")?,
        )
        .build()
        .map_err(|e| e.to_string())?;
    grammask::server::serve(config).map_err(|e| e.to_string())
}

#[derive(Args)]
struct FuzzArgs {
    #[command(flatten)]
    vocab: VocabArgs,
    /// A JSON Schema file.
    #[arg(long, conflicts_with_all = ["regex", "grammar"])]
    schema: Option<PathBuf>,
    /// A regex (strings matching it in full).
    #[arg(long, conflicts_with_all = ["schema", "grammar"])]
    regex: Option<String>,
    /// A GBNF grammar file.
    #[arg(long, conflicts_with_all = ["schema", "regex"])]
    grammar: Option<PathBuf>,
    /// Valid instances wanted.
    #[arg(long, default_value_t = 1000)]
    n: usize,
    /// Near-miss invalid instances wanted.
    #[arg(long, default_value_t = 0)]
    invalid: usize,
    /// Seed of the run.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Longest document, in bytes (the completion search ends every document within it).
    /// Default 4096, raised where the schema's shortest documents need more (twice the
    /// engine's lower bound on a whole document); given, it is kept as it is.
    #[arg(long)]
    max_bytes: Option<usize>,
    /// Byte pushes one document may spend, its completion search included.
    #[arg(long, default_value_t = grammask::fuzz::FuzzConfig::default().max_work)]
    max_work: u64,
    /// Byte pushes the whole run may spend: past it the run stops with the instances it has
    /// and says so (reproducible by seed, unlike a time limit). Default 6,000,000, raised
    /// with --max-bytes's default where the schema's shortest documents are long (4 pushes
    /// per byte of the raised limit for each instance wanted); given, it is kept as it is.
    #[arg(long)]
    max_total_work: Option<u64>,
    /// Threads the run may use: where walks are costly it makes them two at a time (the
    /// instances are the same on one thread or two).
    #[arg(long, default_value_t = grammask::fuzz::FuzzConfig::default().threads)]
    threads: usize,
    /// Write the JSON lines here instead of stdout.
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Args)]
struct MaskbenchArgs {
    /// Folder of MaskBench JSON files (e.g. ../shared/maskbench-dev).
    dir: PathBuf,
    #[command(flatten)]
    vocab: VocabArgs,
    /// Worker threads (use 1 for latency figures).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1024))]
    jobs: u64,
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
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    stride: u64,
    /// Keys in schema order instead of any order.
    #[arg(long)]
    schema_order: bool,
    /// Compile under this profile (default exact). Under `generation` (with `json.dumps`
    /// separators, the spelling MaskBench's documents are written in) the valid documents that spell what the profile leaves out (undeclared
    /// keys, exponents, escapes) count as refused: use it to time masks and compiles beside
    /// exact, not for verdicts.
    #[arg(long, value_enum, default_value_t = ProfileArg::Exact)]
    profile: ProfileArg,
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
    /// Whitespace policy between JSON tokens, for --json and --schema [default: flexible, in
    /// runs of at most 4].
    #[arg(long, value_enum, conflicts_with_all = ["regex", "grammar"])]
    whitespace: Option<WsArg>,
    /// A regex the whole output must match.
    #[arg(long, conflicts_with_all = ["json", "grammar", "schema"])]
    regex: Option<String>,
    /// A GBNF grammar file (llama.cpp format, `root` is the start rule).
    #[arg(long, conflicts_with_all = ["json", "regex", "schema"])]
    grammar: Option<PathBuf>,
    /// A JSON Schema file the output must validate against.
    #[arg(long, conflicts_with_all = ["json", "regex", "grammar"])]
    schema: Option<PathBuf>,
    /// How --schema and --tools' schemas compile: `exact` (every document the schema accepts,
    /// in every spelling) or `generation` (the subset a model finishes: objects closed where the
    /// schema says nothing, plain bounded numbers, canonical whitespace; every output valid).
    /// [default: generation for `generate`, exact for `walk`]
    #[arg(long, value_enum, conflicts_with_all = ["json", "regex", "grammar"])]
    profile: Option<ProfileArg>,
    /// With --schema: `integer` values as plain literals `-?(0|[1-9][0-9]*)` only, as
    /// XGrammar and llguidance generate them (default: every spelling of an integer value,
    /// `1.0` and `1e3` too, as validators accept them).
    #[arg(long, requires = "schema", conflicts_with_all = ["json", "regex", "grammar"])]
    plain_integers: bool,
    /// With --schema: in objects that take no other keys, declared names spelled as written
    /// (an escape only where a name's character needs one; default: any JSON spelling, so
    /// `"colo\u0072"` is the key `color`).
    #[arg(long, requires = "schema", conflicts_with_all = ["json", "regex", "grammar"])]
    literal_keys: bool,
    /// With --schema: string values with finitely many choices left (`enum`, `const`)
    /// spelled as written (an escape only where a character needs one; default: any JSON
    /// spelling, so `"p\u0075rple"` is `purple`).
    #[arg(long, requires = "schema", conflicts_with_all = ["json", "regex", "grammar"])]
    literal_values: bool,
    /// Raise or lower a compile or engine limit, as NAME=N (repeatable; docs/limits.md lists
    /// each limit, its default and the error that names it): alternatives, dfa_states, nodes,
    /// ref_depth, instance_depth, compile_ms (--schema); grammar_symbols, items_per_set, work_per_call,
    /// lexeme_states, lexer_work, position_masks, warm_positions, warm_ms (--grammar); regex_states, regex_memory, lazy_memory, dense_memory (--regex); json_depth (--json);
    /// history, mask_cache (any).
    #[arg(long = "limit", value_name = "NAME=N", value_parser = parse_limit)]
    limits: Vec<(String, usize)>,
    #[command(flatten)]
    tools: cli_tools::ToolArgs,
}

/// `--limit NAME=N`.
fn parse_limit(s: &str) -> Result<(String, usize), String> {
    let (name, value) = s.split_once('=').ok_or_else(|| format!("{s:?} is not NAME=N"))?;
    let value: usize =
        value.trim().replace('_', "").parse().map_err(|e| format!("{name}: {value:?}: {e}"))?;
    if !LIMIT_NAMES.contains(&name.trim()) {
        return Err(format!("unknown limit {name:?}; known: {}", LIMIT_NAMES.join(", ")));
    }
    Ok((name.trim().to_string(), value))
}

const LIMIT_NAMES: &[&str] = &[
    "alternatives",
    "dfa_states",
    "nodes",
    "ref_depth",
    "instance_depth",
    "compile_ms",
    "grammar_symbols",
    "items_per_set",
    "work_per_call",
    "lexeme_states",
    "lexer_work",
    "position_masks",
    "warm_positions",
    "warm_ms",
    "regex_states",
    "regex_memory",
    "lazy_memory",
    "dense_memory",
    "json_depth",
    "history",
    "mask_cache",
];

/// The limits `c.limits` names that do not apply to the constraint `kind` describes.
fn check_limit_kinds(c: &ConstraintArgs, kind: &str, own: &[&str]) -> CliResult<()> {
    for (name, _) in &c.limits {
        if !own.contains(&name.as_str()) && name != "history" && name != "mask_cache" {
            return Err(format!("--limit {name} does not apply to {kind}"));
        }
    }
    Ok(())
}

/// `--limit history=…`/`mask_cache=…` onto engine options.
fn engine_limits(c: &ConstraintArgs, mut e: grammask::EngineOptions) -> grammask::EngineOptions {
    for (name, v) in &c.limits {
        match name.as_str() {
            "history" => e.history = *v,
            "mask_cache" => e.mask_cache = *v,
            _ => {}
        }
    }
    e
}

#[derive(Clone, Copy, ValueEnum)]
enum ProfileArg {
    /// The schema's whole language (validation, conformance).
    Exact,
    /// The subset a model finishes, every output valid (docs/json-schema.md).
    Generation,
}

/// The schema options the flags describe: the profile's, then the explicit flags on top.
fn schema_options(c: &ConstraintArgs) -> grammask::SchemaOptions {
    let profile = match c.profile {
        Some(ProfileArg::Generation) => grammask::Profile::Generation,
        _ => grammask::Profile::Exact,
    };
    let mut options = grammask::SchemaOptions::for_profile(profile);
    match c.whitespace {
        Some(WsArg::Compact) => options.whitespace = Whitespace::Compact,
        Some(WsArg::Separators) => {
            options.whitespace = Whitespace::Separators { item: ", ".into(), key: ": ".into() }
        }
        Some(WsArg::Flexible) => {
            options.whitespace =
                Whitespace::Flexible { max_run: grammask::SchemaOptions::DEFAULT_MAX_WS_RUN }
        }
        None => {}
    }
    options.plain_integers |= c.plain_integers;
    options.literal_keys |= c.literal_keys;
    options.literal_values |= c.literal_values;
    options
}

#[derive(Clone, Copy, ValueEnum)]
enum WsArg {
    /// No whitespace at all.
    Compact,
    /// Whitespace where RFC 8259 allows it, in bounded runs.
    Flexible,
    /// Python `json.dumps`'s `", "` and `": "` and no other whitespace (--schema, --tools).
    Separators,
}

#[derive(Args, Clone)]
struct VocabArgs {
    /// Path to a Hugging Face tokenizer.json (default: the embedded Qwen3 tokenizer).
    #[arg(long)]
    tokenizer: Option<PathBuf>,
    /// An end-of-sequence token, by id or by content (repeatable), added to the one the
    /// tokenizer's config names. Needed for a tokenizer.json without tokenizer_config.json
    /// whose special tokens have no known end-of-text name.
    #[arg(long = "eos", value_name = "ID|TOKEN")]
    eos: Vec<String>,
    /// Directory of the vocabulary cache (default: $GRAMMASK_CACHE_DIR, else the per-user cache
    /// directory, e.g. ~/.cache/grammask/vocab): the decoded tokens and trie of a tokenizer,
    /// keyed by a hash of its files, read back in milliseconds on the next run.
    #[arg(long, value_name = "DIR", conflicts_with = "no_vocab_cache")]
    vocab_cache: Option<PathBuf>,
    /// Neither read nor write the vocabulary cache.
    #[arg(long)]
    no_vocab_cache: bool,
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
    /// the constraint (with --tools, the calls and text) applies to the answer after it.
    /// `--reasoning-budget` is the same flag.
    #[arg(long, visible_alias = "reasoning-budget")]
    think_budget: Option<usize>,
    /// After this many tokens, steer the random-logit model to the nearest end of the document
    /// the completion search finds (then EOS), so a generation finishes instead of running
    /// into --max-tokens; the mask still checks every token, and `finish_reason` is `stop`
    /// only for an accepted document (`length` where --max-tokens comes first). JSON, JSON
    /// Schema, regex and GBNF constraints; not with --think-budget, --tools or --model.
    #[arg(long)]
    finish_after: Option<usize>,
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
    /// The input is a JSON array of token ids (what a model emitted, say), walked exactly as
    /// given instead of tokenizing a text: no tokenizer encoder is loaded, so on a cached
    /// vocabulary the walk starts in milliseconds.
    #[arg(long)]
    token_ids: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Write every mask of the walk to this file: for each step (one per token, then the final
    /// one), the mask's `ceil(n_vocab / 32)` `u32` words little-endian, LSB-first (the
    /// `TokenMask` layout). With `--format json` the output then also lists the token ids. The
    /// reference the Python package's tests compare their masks with.
    #[arg(long)]
    dump_masks: Option<PathBuf>,
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
    let (ids, names): (Vec<&String>, Vec<&String>) =
        args.eos.iter().partition(|e| e.parse::<u32>().is_ok());
    let config = grammask::vocab::VocabConfig::default()
        .with_extra_eos(ids.iter().map(|e| e.parse().expect("partitioned")).collect())
        .with_extra_eos_tokens(names.into_iter().cloned().collect())
        .with_max_file_bytes(max_file_bytes())
        .with_cache(match (&args.vocab_cache, args.no_vocab_cache) {
            (_, true) => grammask::vocab::VocabCache::Off,
            (Some(dir), false) => grammask::vocab::VocabCache::Dir(dir.clone()),
            (None, false) => grammask::vocab::VocabCache::User,
        });
    let vocab = match &args.tokenizer {
        Some(p) => Vocabulary::from_file_with(p, &config).map_err(|e| e.to_string())?,
        None if args.eos.is_empty() => {
            Vocabulary::embedded_with(&config).map_err(|e| e.to_string())?
        }
        None => return Err("--eos needs --tokenizer (the embedded tokenizer knows its EOS)".into()),
    };
    if vocab.eos_ids().is_empty() {
        return Err(format!(
            "no EOS token is known for {}: no tokenizer_config.json beside it names one and none \
             of its special tokens has a known end-of-text name; give --eos ID|TOKEN",
            args.tokenizer.as_ref().map_or("the tokenizer".into(), |p| p.display().to_string())
        ));
    }
    Ok(vocab)
}

fn read_text(path: &PathBuf) -> CliResult<String> {
    grammask::io::read_text_limited(path, max_file_bytes()).map_err(|e| e.to_string())
}

/// The constraint the flags describe (free-form JSON when none is given).
fn constraint_of(c: &ConstraintArgs) -> CliResult<Constraint> {
    let get = |name: &str| c.limits.iter().rev().find(|(n, _)| n == name).map(|&(_, v)| v);
    if let Some(pattern) = &c.regex {
        check_limit_kinds(
            c,
            "--regex",
            &["regex_states", "regex_memory", "lazy_memory", "dense_memory"],
        )?;
        let mut config = grammask::RegexConfig::default();
        if let Some(v) = get("regex_states") {
            config.dfa.max_states = v;
        }
        if let Some(v) = get("regex_memory") {
            config.dfa.max_memory = v;
        }
        if let Some(v) = get("lazy_memory") {
            config.lazy_max_memory = v;
        }
        if let Some(v) = get("dense_memory") {
            config.dense_max_memory = v;
        }
        config.engine = engine_limits(c, config.engine);
        return Ok(Constraint::regex_with(pattern, config));
    }
    if let Some(path) = &c.schema {
        check_limit_kinds(
            c,
            "--schema",
            &["alternatives", "dfa_states", "nodes", "ref_depth", "instance_depth", "compile_ms"],
        )?;
        let text = read_text(path)?;
        let schema: serde_json::Value = grammask::schema::parse_schema_text(&text)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let mut options = schema_options(c);
        let l = &mut options.limits;
        for (name, v) in &c.limits {
            match name.as_str() {
                "alternatives" => l.max_alternatives = *v,
                "dfa_states" => l.max_dfa_states = *v,
                "nodes" => l.max_nodes = *v,
                "ref_depth" => l.max_ref_depth = *v,
                "instance_depth" => l.max_instance_depth = *v,
                "compile_ms" => {
                    l.max_compile_time = Some(std::time::Duration::from_millis(*v as u64));
                }
                _ => {}
            }
        }
        options.engine = engine_limits(c, options.engine);
        return Ok(Constraint::json_schema_with(&schema, options));
    }
    if let Some(path) = &c.grammar {
        check_limit_kinds(
            c,
            "--grammar",
            &[
                "grammar_symbols",
                "items_per_set",
                "work_per_call",
                "lexeme_states",
                "lexer_work",
                "position_masks",
                "warm_positions",
                "warm_ms",
            ],
        )?;
        let mut config = CfgConfig::default();
        for (name, v) in &c.limits {
            match name.as_str() {
                "grammar_symbols" => config.max_grammar_symbols = *v,
                "items_per_set" => config.max_items_per_set = *v,
                "work_per_call" => config.max_work_per_call = *v,
                "lexeme_states" => config.max_lexeme_states = *v,
                "lexer_work" => config.max_lexer_work = *v,
                "position_masks" => config.position_masks = *v,
                "warm_positions" => config.warm_positions = *v,
                "warm_ms" => config.warm_time = std::time::Duration::from_millis(*v as u64),
                _ => {}
            }
        }
        config.engine = engine_limits(c, config.engine);
        return Ok(Constraint::gbnf_with(&read_text(path)?, config));
    }
    check_limit_kinds(c, "--json", &["json_depth"])?;
    let top = if c.any_value { TopLevel::AnyValue } else { TopLevel::Object };
    let whitespace = match c.whitespace.unwrap_or(WsArg::Flexible) {
        WsArg::Compact => Whitespace::Compact,
        WsArg::Flexible => Whitespace::Flexible { max_run: JsonConfig::DEFAULT_MAX_WS_RUN },
        WsArg::Separators => {
            return Err("--whitespace separators applies to --schema and --tools, not --json".into())
        }
    };
    let mut config = JsonConfig::default().with_top_level(top).with_whitespace(whitespace);
    if let Some(v) = get("json_depth") {
        config.max_depth = v;
    }
    config.engine = engine_limits(c, config.engine);
    Ok(Constraint::json_with(config))
}

fn build_engine(vocab: &Vocabulary, c: &ConstraintArgs) -> CliResult<Box<dyn ConstraintEngine>> {
    Ok(build_compiled(vocab, c)?.engine())
}

fn build_compiled(
    vocab: &Vocabulary,
    c: &ConstraintArgs,
) -> CliResult<grammask::constraint::CompiledConstraint> {
    let source = c.schema.as_ref().or(c.grammar.as_ref()).or(c.tools.tools.as_ref());
    let constraint = match cli_tools::constraint(&c.tools, vocab, &schema_options(c))? {
        Some(t) => t,
        None => constraint_of(c)?,
    };
    let compiled = constraint.compile(vocab).map_err(|e| match source {
        Some(path) => format!("{}: {e}", path.display()),
        None => e.to_string(),
    })?;
    Ok(compiled)
}

fn maskbench(args: MaskbenchArgs) -> CliResult<()> {
    let vocab = load_vocab(&args.vocab)?;
    let mut opts = MaskbenchOptions {
        jobs: usize::try_from(args.jobs).unwrap_or(1),
        out: args.out,
        filter: args.filter,
        limit: args.limit,
        stride: usize::try_from(args.stride).unwrap_or(usize::MAX),
        progress_every: 100,
        ..MaskbenchOptions::default()
    };
    if let ProfileArg::Generation = args.profile {
        opts.schema = grammask::SchemaOptions::generation()
            .with_whitespace(Whitespace::Separators { item: ", ".into(), key: ": ".into() });
    }
    if args.schema_order {
        opts.schema.property_order = PropertyOrder::Schema;
    }
    let summary = run_maskbench(&args.dir, &vocab, &opts).map_err(|e| e.to_string())?;
    say!("{summary}");
    if summary.schemas > 0 && summary.load_errors.len() == summary.schemas {
        return Err(format!(
            "none of the {} files in {} is a readable MaskBench file",
            summary.schemas,
            args.dir.display()
        ));
    }
    Ok(())
}

fn fuzz(args: FuzzArgs) -> CliResult<()> {
    use grammask::fuzz::{FuzzConfig, Fuzzer};
    use std::io::Write as _;
    let vocab = load_vocab(&args.vocab)?;
    let (constraint, source) = if let Some(path) = &args.schema {
        let text = read_text(path)?;
        let schema = grammask::schema::parse_schema_text(&text)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        (Constraint::json_schema(&schema), path.display().to_string())
    } else if let Some(pattern) = &args.regex {
        (Constraint::regex(pattern), format!("--regex {pattern:?}"))
    } else if let Some(path) = &args.grammar {
        (Constraint::gbnf(&read_text(path)?), path.display().to_string())
    } else {
        return Err("fuzz needs --schema FILE, --regex R or --grammar FILE".into());
    };
    let compiled = constraint.compile(&vocab).map_err(|e| format!("{source}: {e}"))?;
    let mut config = FuzzConfig::default()
        .with_n(args.n)
        .with_invalid(args.invalid)
        .with_seed(args.seed)
        .with_max_work(args.max_work)
        .with_threads(args.threads);
    if let Some(w) = args.max_total_work {
        config = config.with_max_total_work(w).with_fit_max_total_work(false);
    }
    if let Some(b) = args.max_bytes {
        config = config.with_max_bytes(b).with_fit_max_bytes(false);
    }
    let t0 = Instant::now();
    let fuzzer = Fuzzer::new(&compiled, config.clone()).map_err(|e| format!("{source}: {e}"))?;
    if fuzzer.max_bytes() > config.max_bytes {
        eprintln!(
            "max-bytes {} (raised from {}: the shortest documents need at least half of it; \
             --max-bytes keeps a limit as given)",
            fuzzer.max_bytes(),
            config.max_bytes
        );
    }
    let report = fuzzer.run().map_err(|e| format!("{source}: {e}"))?;
    let secs = t0.elapsed().as_secs_f64();
    let mut text = String::new();
    for i in &report.instances {
        text.push_str(&i.to_json().to_string());
        text.push('\n');
    }
    match &args.out {
        Some(path) => std::fs::write(path, text)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?,
        None => {
            let _ = std::io::stdout().lock().write_all(text.as_bytes());
        }
    }
    eprint!("{report}");
    eprintln!("{:.3} s ({:.0} instances/s)", secs, report.instances.len() as f64 / secs.max(1e-9));
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

fn generate(mut args: GenerateArgs) -> CliResult<()> {
    // What is generated compiles under the generation profile unless told otherwise.
    args.constraint.profile.get_or_insert(ProfileArg::Generation);
    // With --think-budget the gate owns the reasoning block, with --tools too.
    args.constraint.tools.think_gated = args.think_budget.is_some();
    #[cfg(feature = "model")]
    if let Some(path) = args.model.model.clone() {
        return cli_model::generate(&args, &path);
    }
    let vocab = load_vocab(&args.vocab)?;
    let compiled = build_compiled(&vocab, &args.constraint)?;
    let engine = compiled.engine();
    let random = RandomLogits::new(&vocab, args.seed);
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
    let gen = match args.finish_after {
        None => {
            let mut model = random;
            decode(&mut model, &vocab, engine, &config)
        }
        Some(after) => {
            if args.think_budget.is_some() || unconstrained {
                return Err("--finish-after works with a constraint and without --think-budget \
                            (the completion is of the constrained document)"
                    .into());
            }
            let fuzz_config = grammask::fuzz::FuzzConfig::default();
            let fuzzer = grammask::fuzz::Fuzzer::new(&compiled, fuzz_config)
                .map_err(|e| format!("--finish-after: {e}"))?;
            let mut model = grammask::fuzz::Finisher::new(random, &fuzzer, after);
            decode(&mut model, &vocab, engine, &config)
        }
    }
    .map_err(|e| e.to_string())?;
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
            let text = grammask::constraint::tools::render_output(&vocab, &gen.tokens);
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
                &grammask::constraint::tools::render_output(&vocab, &gen.tokens),
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

/// `walk --token-ids`: a JSON array of ids, each inside the logits width.
fn token_ids(raw: &str, n_vocab: usize) -> CliResult<Vec<grammask::TokenId>> {
    let ids: Vec<u64> = serde_json::from_str(raw)
        .map_err(|e| format!("--token-ids wants a JSON array of token ids: {e}"))?;
    ids.iter()
        .enumerate()
        .map(|(i, &id)| match id < n_vocab as u64 {
            true => Ok(grammask::TokenId(id as u32)),
            false => Err(format!("token {i} of the input is id {id}, past the {n_vocab} ids")),
        })
        .collect()
}

/// Walk the document; `Ok(false)` when the constraint refuses it (exit status 3).
fn walk(args: WalkArgs) -> CliResult<bool> {
    let vocab = load_vocab(&args.vocab)?;
    let mut engine = build_engine(&vocab, &args.constraint)?;
    let raw = read_text(&args.input)?;
    let (tokens, text) = if args.token_ids {
        let ids = token_ids(&raw, vocab.n_vocab())
            .map_err(|e| format!("{}: {e}", args.input.display()))?;
        let bytes: Vec<u8> = ids.iter().flat_map(|&t| vocab.token_bytes(t).to_vec()).collect();
        (ids, String::from_utf8_lossy(&bytes).into_owned())
    } else {
        let text = raw.strip_suffix('\n').unwrap_or(&raw);
        let ids = vocab.encode_exact(text).map_err(|e| format!("{}: {e}", args.input.display()))?;
        (ids, text.to_string())
    };
    let mut mask = TokenMask::new(vocab.n_vocab());
    let mut times = Vec::with_capacity(tokens.len() + 1);
    let mut refused_at = None;
    let mut dump = Vec::new();
    let mut keep = |mask: &TokenMask| {
        if args.dump_masks.is_some() {
            dump.extend(mask.words().iter().flat_map(|w| w.to_le_bytes()));
        }
    };
    for (i, &t) in tokens.iter().enumerate() {
        let t0 = Instant::now();
        engine.fill_mask(&mut mask).map_err(|e| e.to_string())?;
        times.push(t0.elapsed().as_secs_f64() * 1e6);
        keep(&mask);
        if !mask.contains(t) || engine.advance(t).is_err() {
            refused_at = Some((i, t));
            break;
        }
    }
    let eos_allowed = refused_at.is_none() && {
        let t0 = Instant::now();
        engine.fill_mask(&mut mask).map_err(|e| e.to_string())?;
        times.push(t0.elapsed().as_secs_f64() * 1e6);
        keep(&mask);
        vocab.eos_ids().iter().any(|&e| mask.contains(e))
    };
    if let Some(path) = &args.dump_masks {
        std::fs::write(path, &dump).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
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
            if args.dump_masks.is_some() {
                v["tokens"] = tokens.iter().map(|t| t.0).collect();
                v["n_vocab"] = vocab.n_vocab().into();
            }
            if accepted {
                cli_tools::report(&args.constraint.tools, &vocab, &text, &mut v);
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
    Ok(accepted)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    MAX_FILE_BYTES.set(cli.max_file_bytes).expect("set once");
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
        Command::Generate(a) => generate(a).map(|()| true),
        Command::Walk(a) => walk(a),
        Command::Check(a) => check(a).map(|()| true),
        Command::Maskbench(a) => maskbench(a).map(|()| true),
        #[cfg(feature = "server")]
        Command::Serve(a) => serve(a).map(|()| true),
        Command::Fuzz(a) => fuzz(a).map(|()| true),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        // A refused document: the verdict was printed; the status says it too (2 is clap's
        // usage error).
        Ok(false) => ExitCode::from(3),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
