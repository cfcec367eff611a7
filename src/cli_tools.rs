//! `--tools` for `generate` and `walk`: an OpenAI `tools` list and `tool_choice` become the
//! structural-tag constraint of the tokenizer's model format (`--tool-format`, detected from the
//! tokenizer's marker tokens by default), and the JSON output reports the calls (`tool_calls`:
//! name and parsed arguments) apart from the `content`. Kept out of `main.rs` so that the
//! constraint flags there change by one flattened struct.
//!
//! The reasoning block has one budget flag, `generate --think-budget N` (tokens; alias
//! `--reasoning-budget`): the decode loop's think gate owns the block (it starts open and
//! `</think>` is forced after N tokens), so the tools constraint then applies to the answer
//! after it with no think block of its own — otherwise the format's own `<think>` would open a
//! second, unbounded block after the forced close.

use clap::Args;
use grammask::constraint::tools::{
    extract_tool_calls, parse_tools, tool_constraint_with, Reasoning, ToolChoice, ToolFormat,
};
use grammask::{Constraint, SchemaOptions, Vocabulary};
use std::path::PathBuf;

/// The tool-calling flags.
#[derive(Args, Clone, Default)]
pub struct ToolArgs {
    /// An OpenAI `tools` list (JSON file): the output is text and reasoning with tool calls in
    /// the model's format, each call's arguments valid against its tool's parameters schema.
    #[arg(long, conflicts_with_all = ["regex", "grammar", "schema"])]
    pub tools: Option<PathBuf>,
    /// `auto` (text or calls), `required` (start with a call), `none`, or a function name.
    #[arg(long, default_value = "auto", requires = "tools")]
    pub tool_choice: String,
    /// `qwen3` (hermes), `llama3`, `harmony` (gpt-oss), `deepseek`, or `auto` (by the
    /// tokenizer's marker tokens).
    #[arg(long, default_value = "auto", requires = "tools")]
    pub tool_format: String,
    /// Set by `generate --think-budget`: the think gate owns the reasoning block, so the
    /// tools constraint allows none of its own.
    #[arg(skip)]
    pub think_gated: bool,
}

/// The format the flags name for `vocab`.
fn format(args: &ToolArgs, vocab: &Vocabulary) -> Result<ToolFormat, String> {
    if args.tool_format == "auto" {
        ToolFormat::detect(vocab).ok_or_else(|| {
            "--tool-format auto: the tokenizer has no known tool-call tokens; name a format".into()
        })
    } else {
        ToolFormat::parse(&args.tool_format)
            .ok_or_else(|| format!("--tool-format {}: unknown format", args.tool_format))
    }
}

/// The constraint `--tools` describes, or `None` without `--tools`.
pub fn constraint(
    args: &ToolArgs,
    vocab: &Vocabulary,
    options: &SchemaOptions,
) -> Result<Option<Constraint>, String> {
    let Some(path) = &args.tools else { return Ok(None) };
    let text = super::read_text(path)?;
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", path.display()))?;
    let tools = parse_tools(&json).map_err(|e| format!("{}: {e}", path.display()))?;
    let reasoning = if args.think_gated { Reasoning::Off } else { Reasoning::Free };
    let choice = ToolChoice::parse(&args.tool_choice);
    let tagged =
        tool_constraint_with(vocab, &tools, &choice, format(args, vocab)?, reasoning, options)
            .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Some(Constraint::tagged(tagged)))
}

/// With `--tools`, set `content` and `tool_calls` in a JSON report from the output `text`.
pub fn report(args: &ToolArgs, vocab: &Vocabulary, text: &str, v: &mut serde_json::Value) {
    if args.tools.is_none() {
        return;
    }
    let Ok(fmt) = format(args, vocab) else { return };
    // The gate's reasoning (the output starts inside it) is `reasoning_content`, not content.
    let text =
        if args.think_gated { text.split_once("</think>").map_or(text, |(_, a)| a) } else { text };
    let (content, calls) = extract_tool_calls(fmt, text);
    v["content"] = serde_json::Value::String(content);
    v["tool_calls"] = serde_json::Value::Array(
        calls
            .into_iter()
            .map(|c| serde_json::json!({"name": c.name, "arguments": c.arguments}))
            .collect(),
    );
    v["tool_format"] = serde_json::Value::String(fmt.as_str().to_owned());
}

/// With `--tools`, the calls as text lines.
pub fn lines(args: &ToolArgs, vocab: &Vocabulary, text: &str) -> Vec<String> {
    let Some(fmt) = args.tools.as_ref().and_then(|_| format(args, vocab).ok()) else {
        return Vec::new();
    };
    extract_tool_calls(fmt, text)
        .1
        .iter()
        .map(|c| format!("tool call: {} {}", c.name, c.arguments))
        .collect()
}
