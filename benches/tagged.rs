//! Per-mask latency of structural tags on real tokenizers (llama3, qwen3, gptoss): a tool-call
//! transcript in each model's format replayed token by token, every `fill_mask` timed and
//! classed by where the output is — free text, inside the call's arguments, or at a boundary
//! (the token or the one before it touches a trigger, `begin` or `end`) — and the arguments
//! replayed through the JSON Schema engine alone for comparison.
//!
//! Run: `cargo bench --bench tagged` (reads `../shared/tokenizers/*.json`, skips those absent).
//! Engines are fresh per repetition; the free-text masks are cached per compiled constraint (as
//! deployed: every request shares them), so the first repetition pays their walks once.

use grammask::constraint::tools::{
    parse_tools, tool_constraint, Reasoning, ToolChoice, ToolFormat,
};
use grammask::{Constraint, TokenMask, Vocabulary};
use std::path::Path;
use std::time::{Duration, Instant};

const REPS: usize = 30;

fn stats(name: &str, mut t: Vec<Duration>) {
    if t.is_empty() {
        return;
    }
    t.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let mean = t.iter().map(|d| us(*d)).sum::<f64>() / t.len() as f64;
    let p = |q: f64| us(t[((t.len() as f64 - 1.0) * q).round() as usize]);
    println!(
        "{name:<40} n={:<5} mean {:>8.1}  p50 {:>8.1}  p99 {:>8.1}  max {:>8.1} µs",
        t.len(),
        mean,
        p(0.5),
        p(0.99),
        us(*t.last().unwrap())
    );
}

const ARGS: &str = r#"{"location": "Paris, France", "unit": "celsius", "days": 3, "details": ["wind", "humidity"]}"#;
const PROSE: &str = "Sure, I can help with that. The forecast depends on the region, so let me look up the current conditions for the city you named and report the temperature, wind and humidity for the next few days. ";

fn main() {
    let tools = parse_tools(
        &serde_json::json!([{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object",
        "properties": {"location": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]},
                       "days": {"type": "integer", "minimum": 1, "maximum": 14},
                       "details": {"type": "array", "items": {"type": "string"}}},
        "required": ["location", "unit"], "additionalProperties": false}}}]),
    )
    .unwrap();
    let schema = tools[0].parameters.clone();
    for (name, format) in [
        ("llama3", ToolFormat::Llama3),
        ("qwen3", ToolFormat::Qwen3),
        ("gptoss", ToolFormat::Harmony),
    ] {
        let path = Path::new("../shared/tokenizers").join(format!("{name}.json"));
        if !path.is_file() {
            println!("{name}: {} absent, skipped", path.display());
            continue;
        }
        let vocab = Vocabulary::from_file(&path).unwrap();
        // (text, class): 0 free text, 1 literal (trigger/begin/end), 2 arguments.
        let parts: Vec<(String, u8)> = match format {
            ToolFormat::Qwen3 => vec![
                (PROSE.repeat(2), 0),
                ("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ".into(), 1),
                (ARGS.into(), 2),
                ("}\n</tool_call>".into(), 1),
                (PROSE.into(), 0),
            ],
            ToolFormat::Llama3 => vec![
                (PROSE.repeat(2), 0),
                ("{\"name\": \"get_weather\", \"parameters\": ".into(), 1),
                (ARGS.into(), 2),
                ("}".into(), 1),
            ],
            _ => vec![
                ("<|channel|>analysis<|message|>".into(), 1),
                (PROSE.repeat(2), 0),
                ("<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>".into(), 1),
                (ARGS.into(), 2),
                ("<|call|>".into(), 1),
            ],
        };
        let tagged =
            tool_constraint(&vocab, &tools, &ToolChoice::Auto, format, Reasoning::Free).unwrap();
        let t0 = Instant::now();
        let compiled = Constraint::tagged(tagged).compile(&vocab).unwrap();
        println!(
            "{name}: n_vocab {}, compile {:.1} ms",
            vocab.n_vocab(),
            t0.elapsed().as_secs_f64() * 1e3
        );
        // Tokenize part by part (as a model writes a call: each literal its own tokens), and
        // class each mask by the part its token starts in and the one before it.
        let mut toks = Vec::new();
        let mut class = Vec::new();
        for (text, c) in &parts {
            for t in vocab.encode(text).unwrap() {
                toks.push(t);
                class.push(*c);
            }
        }
        let mut mask = TokenMask::new(vocab.n_vocab());
        let (mut free, mut call, mut edge) = (Vec::new(), Vec::new(), Vec::new());
        for rep in 0..REPS {
            let mut e = compiled.engine();
            for (i, &t) in toks.iter().enumerate() {
                let s = Instant::now();
                e.fill_mask(&mut mask).unwrap();
                let d = s.elapsed();
                assert!(mask.contains(t), "{name}: token {i} allowed");
                let prev = if i > 0 { class[i - 1] } else { class[i] };
                if rep > 0 || class[i] != 0 {
                    match (class[i], prev) {
                        (0, 0) => free.push(d),
                        (2, 2) => call.push(d),
                        _ => edge.push(d),
                    }
                }
                e.advance(t).unwrap();
            }
            assert!(e.is_accepting() || e.is_finished(), "{name}: complete");
        }
        stats(&format!("{name} free text (warm)"), free);
        stats(&format!("{name} inside the call"), call);
        stats(&format!("{name} at a boundary"), edge);
        // The schema engine alone on the same arguments.
        let alone = Constraint::json_schema(&schema).compile(&vocab).unwrap();
        let args = vocab.encode(ARGS).unwrap();
        let mut times = Vec::new();
        for _ in 0..REPS {
            let mut e = alone.engine();
            for &t in &args {
                let s = Instant::now();
                e.fill_mask(&mut mask).unwrap();
                times.push(s.elapsed());
                e.advance(t).unwrap();
            }
        }
        stats(&format!("{name} schema engine alone"), times);
    }
}
