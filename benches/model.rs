//! The constraint's cost next to a real forward pass: SmolLM2-135M (Q4_1) on the CPU, decoded
//! unconstrained and under free-form JSON, a MaskBench schema and a regex, in interleaved
//! rounds of one run, then the same on the random-logit model; then the validity of greedy
//! schema-constrained generations on MaskBench files, judged by the `jsonschema` crate.
//!
//! `cargo bench --bench model` (env: `GRAMMASK_MODEL` for another file, `GRAMMASK_THREADS`
//! (default 2), `GRAMMASK_ROUNDS` (3), `GRAMMASK_SCHEMAS` (50)). The figures go in
//! `docs/performance.md`. Speed lives here, not in timed test assertions.

use grammask::decode::{
    decode, decode_overlapped, DecodeConfig, Generation, LogitsSource, RandomLogits,
};
use grammask::model::{GgufModel, ModelConfig};
use grammask::schema::{SchemaConstraint, SchemaOptions};
use grammask::stats::Summary;
use grammask::{
    ConstraintEngine, JsonConfig, JsonObjectConstraint, RegexConfig, RegexConstraint, TokenId,
    Vocabulary,
};
use std::path::PathBuf;
use std::time::Instant;

const MODEL_FILE: &str = "smollm2-135m-instruct-q4_1.gguf";
const SCHEMA_FILE: &str = "BFCL_simple_10.json";
const REGEX: &str = r"(The answer is [0-9]{1,6}\. )?[A-Z][a-z]+( [a-z]+){3,12}\.";

fn env_usize(key: &str, default: usize) -> usize {
    std::env::var(key).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn shared() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared")
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        0.0
    } else {
        v[v.len() / 2]
    }
}

fn schema_of(name: &str) -> serde_json::Value {
    let text =
        std::fs::read_to_string(shared().join("maskbench-dev").join(name)).expect("maskbench file");
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    doc["schema"].clone()
}

fn engine(mode: &str, vocab: &Vocabulary) -> Option<Box<dyn ConstraintEngine>> {
    match mode {
        "none" => None,
        "json" => Some(Box::new(JsonObjectConstraint::new(vocab, &JsonConfig::default()).unwrap())),
        "schema" => Some(Box::new(
            SchemaConstraint::compile(&schema_of(SCHEMA_FILE), vocab, &SchemaOptions::default())
                .unwrap(),
        )),
        "regex" => {
            Some(Box::new(RegexConstraint::new(vocab, REGEX, &RegexConfig::default()).unwrap()))
        }
        _ => unreachable!(),
    }
}

fn user_prompt(mode: &str) -> String {
    match mode {
        "schema" => format!("Reply with a JSON object that follows this schema:\n{}", schema_of(SCHEMA_FILE)),
        "regex" => "Describe the sea in one sentence.".to_string(),
        _ => "Describe a fictional person as a JSON object with a name, an age and a list of hobbies.".to_string(),
    }
}

#[derive(Default)]
struct Row {
    tok_s: Vec<f64>,
    overhead: Vec<f64>,
    tokens: usize,
    mask_us: Vec<f64>,
    stops: usize,
    runs: usize,
}

fn run_once(
    model: &mut (dyn LogitsSource + Send),
    vocab: &Vocabulary,
    mode: &str,
    max_tokens: usize,
    overlap: bool,
    row: &mut Row,
) -> Generation {
    let mut e = engine(mode, vocab);
    let config = DecodeConfig::greedy(max_tokens);
    let t0 = Instant::now();
    let er: Option<&mut dyn ConstraintEngine> = match e.as_mut() {
        Some(e) => Some(e.as_mut()),
        None => None,
    };
    let g = if overlap {
        decode_overlapped(model, vocab, er, &config)
    } else {
        decode(model, vocab, er, &config)
    }
    .unwrap();
    let wall = t0.elapsed().as_secs_f64();
    let constraint: f64 = g.timings.iter().map(|t| t.constraint_us).sum::<f64>() / 1e6;
    row.tok_s.push(g.tokens.len() as f64 / wall);
    row.overhead.push(100.0 * constraint / wall);
    row.tokens += g.tokens.len();
    row.mask_us.extend_from_slice(&g.mask_us);
    row.stops += usize::from(g.finish_reason.as_str() == "stop");
    row.runs += 1;
    g
}

fn print_rows(title: &str, rows: &mut [(String, Row)]) {
    println!("\n{title}");
    println!("| constraint | runs | tokens | tokens/s (median) | vs none | overhead % (median) | mask µs mean / p99 | stop |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let base = median(&mut rows[0].1.tok_s.clone());
    for (name, r) in rows.iter_mut() {
        let t = median(&mut r.tok_s);
        let s = Summary::of(&r.mask_us);
        println!(
            "| {name} | {} | {} | {t:.1} | {:.1}% | {:.2} | {:.1} / {:.1} | {}/{} |",
            r.runs,
            r.tokens,
            100.0 * t / base,
            median(&mut r.overhead),
            s.mean,
            s.p99,
            r.stops,
            r.runs
        );
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let path = std::env::var_os("GRAMMASK_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| shared().join("models").join(MODEL_FILE));
    if !path.is_file() {
        println!("skipped: no model at {} (scripts/fetch-model.sh fetches it)", path.display());
        return;
    }
    let threads = env_usize("GRAMMASK_THREADS", 2);
    let rounds = env_usize("GRAMMASK_ROUNDS", 3);
    let n_schemas = env_usize("GRAMMASK_SCHEMAS", 50);
    let config = ModelConfig::builder().threads(threads).build().unwrap();
    let mut model = GgufModel::load(&path, &config).unwrap();
    let vocab = model.vocab().clone();
    println!("model {} ({} threads, AVX2 kernels: {})", path.display(), threads, model.uses_simd());
    if let Ok(l) = std::fs::read_to_string("/proc/loadavg") {
        println!("load average at start: {}", l.trim());
    }

    // Prefill: a 200-token prompt, from an empty cache each time.
    let text = "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. \
        It is named after the engineer Gustave Eiffel, whose company designed and built the tower. ";
    let mut long: Vec<TokenId> = Vec::new();
    while long.len() < 200 {
        long.extend(vocab.encode(text).unwrap());
    }
    long.truncate(200);
    let mut pf = Vec::new();
    for _ in 0..rounds.max(3) {
        model.truncate_cache(0);
        model.set_prompt(&long).unwrap();
        let dt = model.prefill().unwrap();
        pf.push(200.0 / dt.as_secs_f64());
    }
    println!(
        "\nprefill, 200-token prompt: {:.1} tokens/s (median of {})",
        median(&mut pf),
        pf.len()
    );

    // Decode speed, interleaved rounds.
    let modes = ["none", "json", "schema", "regex"];
    let max_tokens = 128;
    let mut rows: Vec<(String, Row)> =
        modes.iter().map(|m| (m.to_string(), Row::default())).collect();
    let mut seq_rows: Vec<(String, Row)> =
        modes.iter().map(|m| (m.to_string(), Row::default())).collect();
    let mut forward_ms = Vec::new();
    for _ in 0..rounds {
        for (i, mode) in modes.iter().enumerate() {
            for overlap in [true, false] {
                let prompt = model.chat_prompt(None, &user_prompt(mode)).unwrap();
                model.set_prompt(&prompt).unwrap();
                model.prefill().unwrap();
                model.reset_stats();
                let row = if overlap { &mut rows[i].1 } else { &mut seq_rows[i].1 };
                run_once(&mut model, &vocab, mode, max_tokens, overlap, row);
                let s = model.stats();
                if s.decode_calls > 0 {
                    forward_ms.push(s.decode_time.as_secs_f64() * 1e3 / s.decode_calls as f64);
                }
            }
        }
    }
    println!("forward pass: {:.2} ms/token (median over runs)", median(&mut forward_ms));
    print_rows(
        &format!("SmolLM2-135M Q4_1, greedy, ≤{max_tokens} tokens, overlapped loop"),
        &mut rows,
    );
    print_rows("same, sequential loop (sample-then-check)", &mut seq_rows);

    // The random-logit model over the same vocabulary: the mask is the only real cost.
    let mut rrows: Vec<(String, Row)> =
        modes.iter().map(|m| (m.to_string(), Row::default())).collect();
    for round in 0..rounds {
        for (i, mode) in modes.iter().enumerate() {
            let mut rl = RandomLogits::new(&vocab, 7 + round as u64);
            run_once(&mut rl, &vocab, mode, 256, false, &mut rrows[i].1);
        }
    }
    print_rows(
        "random-logit model, same vocabulary, greedy, ≤256 tokens, sequential loop",
        &mut rrows,
    );

    // Validity on MaskBench schemas.
    let dir = shared().join("maskbench-dev");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.sort();
    let stride = (files.len() / (n_schemas * 3).max(1)).max(1);
    let (mut tried, mut compiled, mut stop, mut length, mut valid, mut invalid) =
        (0, 0, 0, 0, 0, 0);
    let mut invalid_names = Vec::new();
    let t0 = Instant::now();
    for f in files.iter().step_by(stride) {
        if compiled >= n_schemas {
            break;
        }
        let Ok(text) = std::fs::read_to_string(f) else { continue };
        let Ok(doc) = serde_json::from_str::<serde_json::Value>(&text) else { continue };
        let schema = &doc["schema"];
        let compact = schema.to_string();
        if compact.len() > 2500 {
            continue; // Keep prompts inside a few hundred tokens.
        }
        tried += 1;
        let Ok(mut e) = SchemaConstraint::compile(schema, &vocab, &SchemaOptions::default()) else {
            continue;
        };
        let Ok(validator) = jsonschema::validator_for(schema) else { continue };
        compiled += 1;
        let prompt = model
            .chat_prompt(
                None,
                &format!("Reply with a JSON object that follows this schema:\n{compact}"),
            )
            .unwrap();
        model.set_prompt(&prompt).unwrap();
        let g = decode_overlapped(&mut model, &vocab, Some(&mut e), &DecodeConfig::greedy(384))
            .unwrap();
        match g.finish_reason.as_str() {
            "stop" => {
                stop += 1;
                let ok = serde_json::from_slice::<serde_json::Value>(&g.text)
                    .is_ok_and(|v| validator.is_valid(&v));
                if ok {
                    valid += 1;
                } else {
                    invalid += 1;
                    invalid_names.push(f.file_name().unwrap().to_string_lossy().into_owned());
                }
            }
            _ => length += 1,
        }
    }
    println!(
        "\nMaskBench validity ({} files every {stride}th, schemas ≤ 2,500 bytes, greedy, ≤384 tokens, {:.0} s): \
         {tried} tried, {compiled} compiled, {stop} stop ({valid} valid, {invalid} invalid), {length} length",
        files.len(),
        t0.elapsed().as_secs_f64()
    );
    if !invalid_names.is_empty() {
        println!("invalid: {invalid_names:?}");
    }
    if let Ok(l) = std::fs::read_to_string("/proc/loadavg") {
        println!("load average at end: {}", l.trim());
    }
}
