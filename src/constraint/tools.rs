//! Tool-call and reasoning formats of real models, as data over [`Tagged`]: an OpenAI `tools`
//! list and a `tool_choice` become the structural-tag constraint of one model family's chat
//! template, and [`extract_tool_calls`] reads the calls back out of an output.
//!
//! Each format is written from the model's own chat template (`../shared/tokenizers/*.config.json`;
//! the gpt-oss tokenizer ships none, so Harmony follows OpenAI's published format, and the Llama 3
//! tokenizer's template has no tool section, so Llama 3.1's documented JSON tool call is used). See
//! `docs/tagged.md` for each format's text.

use super::tagged::{Piece, Tag, Tagged, TriggeredTags};
use super::Constraint;
use crate::schema::SchemaOptions;
use crate::vocab::Vocabulary;
use serde_json::Value;
use std::fmt;

/// A model family's tool-call format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolFormat {
    /// Qwen3 / Hermes: `<tool_call>\n{"name": …, "arguments": …}\n</tool_call>`, reasoning in
    /// `<think>…</think>`.
    Qwen3,
    /// Llama 3.1 JSON tool calls: the message is `{"name": …, "parameters": …}`.
    Llama3,
    /// gpt-oss Harmony: `<|channel|>analysis<|message|>…<|end|>`, then
    /// `<|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>…<|call|>`
    /// or `<|channel|>final<|message|>…`.
    Harmony,
    /// DeepSeek-V3: `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n…\n```<｜tool▁call▁end｜>…<｜tool▁calls▁end｜>`.
    DeepSeek,
}

impl ToolFormat {
    /// `qwen3` (or `hermes`), `llama3`, `harmony` (or `gptoss`), `deepseek`.
    pub fn parse(s: &str) -> Option<ToolFormat> {
        Some(match s {
            "qwen3" | "hermes" => ToolFormat::Qwen3,
            "llama3" => ToolFormat::Llama3,
            "harmony" | "gptoss" | "gpt-oss" => ToolFormat::Harmony,
            "deepseek" | "deepseek_v3" => ToolFormat::DeepSeek,
            _ => return None,
        })
    }

    /// The format of the model whose tokenizer this is, by its marker tokens.
    pub fn detect(vocab: &Vocabulary) -> Option<ToolFormat> {
        let has = |s: &str| vocab.token_id(s).is_some();
        if has("<|channel|>") && has("<|call|>") {
            Some(ToolFormat::Harmony)
        } else if has("<tool_call>") {
            Some(ToolFormat::Qwen3)
        } else if has("<｜tool▁calls▁begin｜>") {
            Some(ToolFormat::DeepSeek)
        } else if has("<|start_header_id|>") {
            Some(ToolFormat::Llama3)
        } else {
            None
        }
    }

    /// The lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolFormat::Qwen3 => "qwen3",
            ToolFormat::Llama3 => "llama3",
            ToolFormat::Harmony => "harmony",
            ToolFormat::DeepSeek => "deepseek",
        }
    }
}

/// OpenAI's `tool_choice`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolChoice {
    /// Text or calls (default).
    Auto,
    /// At least one call.
    Required,
    /// No call.
    None,
    /// Exactly calls of this function.
    Named(String),
}

impl ToolChoice {
    /// `auto`, `required`, `none`, or a function name.
    pub fn parse(s: &str) -> ToolChoice {
        match s {
            "auto" => ToolChoice::Auto,
            "required" => ToolChoice::Required,
            "none" => ToolChoice::None,
            name => ToolChoice::Named(name.to_owned()),
        }
    }
}

/// Reasoning before the answer (Qwen3 `<think>`, Harmony's analysis channel).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Reasoning {
    /// Allowed, unbounded (default).
    #[default]
    Free,
    /// Allowed, at most this many bytes.
    Budget(usize),
    /// Not allowed.
    Off,
}

/// One function of a `tools` list.
#[derive(Clone, Debug)]
pub struct Tool {
    /// Its name.
    pub name: String,
    /// Its parameters' JSON Schema (`{"type": "object"}` when absent).
    pub parameters: Value,
}

/// Why a tools list, a tool choice or a format could not be used.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolsError {
    /// The tools JSON is not a list of `{"type": "function", "function": {"name", "parameters"}}`
    /// (or of bare `{"name", "parameters"}`); says where.
    BadTools(String),
    /// `tool_choice` names a function not in the list.
    UnknownTool(String),
    /// Two tools with one name.
    DuplicateTool(String),
    /// A calls-required choice with no tools.
    NoTools,
    /// The format needs tokens the vocabulary lacks.
    FormatTokens(&'static str),
}

impl fmt::Display for ToolsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolsError::BadTools(w) => write!(f, "bad tools list: {w}"),
            ToolsError::UnknownTool(n) => {
                write!(f, "tool_choice names {n:?}, which is not in tools")
            }
            ToolsError::DuplicateTool(n) => write!(f, "two tools are named {n:?}"),
            ToolsError::NoTools => write!(f, "tool_choice requires a call but tools is empty"),
            ToolsError::FormatTokens(fm) => {
                write!(f, "the vocabulary lacks the special tokens of the {fm} format")
            }
        }
    }
}

impl std::error::Error for ToolsError {}

/// Read an OpenAI `tools` list.
///
/// # Errors
/// [`ToolsError::BadTools`] naming the entry; [`ToolsError::DuplicateTool`].
pub fn parse_tools(tools: &Value) -> Result<Vec<Tool>, ToolsError> {
    let list = tools
        .as_array()
        .or_else(|| tools.get("tools").and_then(Value::as_array))
        .ok_or_else(|| ToolsError::BadTools("not a JSON array".into()))?;
    let mut out: Vec<Tool> = Vec::new();
    for (i, t) in list.iter().enumerate() {
        let f = t.get("function").unwrap_or(t);
        let name = f
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| ToolsError::BadTools(format!("entry {i} has no function name")))?;
        if out.iter().any(|o| o.name == name) {
            return Err(ToolsError::DuplicateTool(name.to_owned()));
        }
        let parameters =
            f.get("parameters").cloned().unwrap_or_else(|| serde_json::json!({"type": "object"}));
        out.push(Tool { name: name.to_owned(), parameters });
    }
    Ok(out)
}

fn t(s: &str) -> Piece {
    Piece::text(s)
}
fn k(s: &str) -> Piece {
    Piece::token(s)
}
fn schema(tool: &Tool, options: &SchemaOptions) -> Tagged {
    Tagged::content(Constraint::json_schema_with(&tool.parameters, options.clone()))
}
fn think_text(r: Reasoning) -> Tagged {
    match r {
        Reasoning::Budget(n) => Tagged::text_budget(n),
        _ => Tagged::text(),
    }
}

/// The structural-tag description of `format` for `tools` and `choice`.
///
/// # Errors
/// [`ToolsError::UnknownTool`], [`ToolsError::NoTools`], [`ToolsError::FormatTokens`]. A tool
/// whose schema does not compile is reported when the result is compiled
/// ([`super::TaggedErrorKind::Content`] naming the tool).
pub fn tool_constraint(
    vocab: &Vocabulary,
    tools: &[Tool],
    choice: &ToolChoice,
    format: ToolFormat,
    reasoning: Reasoning,
) -> Result<Tagged, ToolsError> {
    tool_constraint_with(vocab, tools, choice, format, reasoning, &SchemaOptions::default())
}

/// [`tool_constraint`] with the arguments' schemas compiled under `options` (for generation,
/// [`SchemaOptions::generation`]: closed objects, plain numbers, canonical whitespace).
///
/// # Errors
/// As [`tool_constraint`].
pub fn tool_constraint_with(
    vocab: &Vocabulary,
    tools: &[Tool],
    choice: &ToolChoice,
    format: ToolFormat,
    reasoning: Reasoning,
    options: &SchemaOptions,
) -> Result<Tagged, ToolsError> {
    let selected: Vec<&Tool> = match choice {
        ToolChoice::None => Vec::new(),
        ToolChoice::Named(n) => {
            vec![tools
                .iter()
                .find(|t| &t.name == n)
                .ok_or_else(|| ToolsError::UnknownTool(n.clone()))?]
        }
        _ => tools.iter().collect(),
    };
    let required = matches!(choice, ToolChoice::Required | ToolChoice::Named(_));
    if required && selected.is_empty() {
        return Err(ToolsError::NoTools);
    }
    let need = |names: &[&str], fm: &'static str| {
        if names.iter().all(|n| vocab.token_id(n).is_some()) {
            Ok(())
        } else {
            Err(ToolsError::FormatTokens(fm))
        }
    };
    Ok(match format {
        ToolFormat::Qwen3 => {
            need(&["<tool_call>", "</tool_call>"], "qwen3")?;
            let mut tags: Vec<Tag> = selected
                .iter()
                .map(|tool| {
                    Tag::new(
                        &tool.name,
                        vec![t(&format!(
                            "<tool_call>\n{{\"name\": \"{}\", \"arguments\": ",
                            tool.name
                        ))],
                        schema(tool, options),
                        vec![t("}\n</tool_call>")],
                    )
                })
                .collect();
            let think_ok = reasoning != Reasoning::Off && vocab.token_id("<think>").is_some();
            if required {
                let calls = Tagged::tags(
                    TriggeredTags::new(vec![t("<tool_call>")], tags).with_at_least_one(true),
                );
                if think_ok {
                    let with_think = Tagged::sequence(vec![
                        Tagged::literal("<think>"),
                        think_text(reasoning),
                        Tagged::literal("</think>\n\n"),
                        calls.clone(),
                    ]);
                    Tagged::choice(vec![with_think, calls])
                } else {
                    calls
                }
            } else {
                let mut triggers = Vec::new();
                if !tags.is_empty() {
                    triggers.push(t("<tool_call>"));
                }
                if think_ok {
                    triggers.push(t("<think>"));
                    tags.push(Tag::new(
                        "think",
                        vec![t("<think>")],
                        think_text(reasoning),
                        vec![t("</think>")],
                    ));
                }
                if triggers.is_empty() {
                    // `none`: no call, and no text that would read as one.
                    Tagged::text_excluding(&["<tool_call>"])
                } else {
                    Tagged::tags(TriggeredTags::new(triggers, tags))
                }
            }
        }
        ToolFormat::Llama3 => {
            let tags: Vec<Tag> = selected
                .iter()
                .map(|tool| {
                    Tag::new(
                        &tool.name,
                        vec![t(&format!("{{\"name\": \"{}\", \"parameters\": ", tool.name))],
                        schema(tool, options),
                        vec![t("}")],
                    )
                })
                .collect();
            if tags.is_empty() {
                Tagged::text()
            } else {
                Tagged::tags(
                    TriggeredTags::new(vec![t("{\"name\": \"")], tags)
                        .with_stop_after_first(true)
                        .with_at_least_one(required),
                )
            }
        }
        ToolFormat::Harmony => {
            need(
                &[
                    "<|channel|>",
                    "<|message|>",
                    "<|end|>",
                    "<|start|>",
                    "<|constrain|>",
                    "<|call|>",
                ],
                "harmony",
            )?;
            let calls: Vec<Tagged> = selected
                .iter()
                .map(|tool| {
                    Tagged::sequence(vec![
                        Tagged::pieces(vec![
                            t(&format!("commentary to=functions.{} ", tool.name)),
                            k("<|constrain|>"),
                            t("json"),
                            k("<|message|>"),
                        ]),
                        schema(tool, options),
                        Tagged::pieces(vec![k("<|call|>")]),
                    ])
                })
                .collect();
            let mut answers = calls;
            if !required {
                answers.push(Tagged::sequence(vec![
                    Tagged::pieces(vec![t("final"), k("<|message|>")]),
                    Tagged::text(),
                ]));
            }
            let answer = Tagged::sequence(vec![
                Tagged::pieces(vec![k("<|channel|>")]),
                Tagged::choice(answers),
            ]);
            if reasoning == Reasoning::Off {
                answer
            } else {
                let analysis = Tagged::sequence(vec![
                    Tagged::pieces(vec![k("<|channel|>"), t("analysis"), k("<|message|>")]),
                    think_text(reasoning),
                    Tagged::pieces(vec![k("<|end|>"), k("<|start|>"), t("assistant")]),
                    answer.clone(),
                ]);
                Tagged::choice(vec![analysis, answer])
            }
        }
        ToolFormat::DeepSeek => {
            need(
                &[
                    "<｜tool▁calls▁begin｜>",
                    "<｜tool▁call▁begin｜>",
                    "<｜tool▁sep｜>",
                    "<｜tool▁call▁end｜>",
                    "<｜tool▁calls▁end｜>",
                ],
                "deepseek",
            )?;
            if selected.is_empty() {
                return Ok(Tagged::Text {
                    exclude: vec!["<｜tool▁calls▁begin｜>".into()],
                    max_bytes: None,
                });
            }
            let calls: Vec<Tag> = selected
                .iter()
                .map(|tool| {
                    Tag::new(
                        &tool.name,
                        vec![
                            k("<｜tool▁call▁begin｜>"),
                            t("function"),
                            k("<｜tool▁sep｜>"),
                            t(&format!("{}\n```json\n", tool.name)),
                        ],
                        schema(tool, options),
                        vec![t("\n```"), k("<｜tool▁call▁end｜>")],
                    )
                })
                .collect();
            // Between calls the template writes one newline.
            let inner = TriggeredTags::new(vec![k("<｜tool▁call▁begin｜>")], calls)
                .with_at_least_one(true)
                .with_max_text_bytes(Some(1));
            let block = Tag::new(
                "tool_calls",
                vec![k("<｜tool▁calls▁begin｜>")],
                Tagged::tags(inner),
                vec![k("<｜tool▁calls▁end｜>")],
            );
            Tagged::tags(
                TriggeredTags::new(vec![k("<｜tool▁calls▁begin｜>")], vec![block])
                    .with_stop_after_first(true)
                    .with_at_least_one(required),
            )
        }
    })
}

/// A tool call read back from an output.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    /// The function.
    pub name: String,
    /// Its arguments (parsed).
    pub arguments: Value,
}

/// A call the output stopped inside (the token limit came first): its name and its arguments'
/// text so far, as OpenAI reports a call cut off by `max_tokens`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartialToolCall {
    /// The byte offset in the output where the call begins (its first marker).
    pub start: usize,
    /// The function's name as far as it was written (empty when the cut came before it).
    pub name: String,
    /// The arguments' text as far as it was written (not valid JSON in general).
    pub arguments: String,
}

/// The strings that begin a call (or a reasoning block read apart from the content) in
/// `format`'s output: text before the first of them is content, so a server can stream it
/// while holding back a suffix that could still grow into one of them. Harmony has none: its
/// content is itself inside channel markers.
pub fn call_triggers(format: ToolFormat) -> &'static [&'static str] {
    match format {
        ToolFormat::Qwen3 => &["<tool_call>", "<think>"],
        ToolFormat::Llama3 => &["{\"name\""],
        ToolFormat::DeepSeek => &["<｜tool▁calls▁begin｜>"],
        ToolFormat::Harmony => &[],
    }
}

/// The last call of `output` if the output ends inside it (no end marker, or JSON that does
/// not close), with its name and arguments text so far; `None` when every call is complete
/// or there is none. Read with [`extract_tool_calls`] on `output[..start]` for what precedes.
pub fn unfinished_tool_call(format: ToolFormat, output: &str) -> Option<PartialToolCall> {
    // `"name": "NAME…` then `"KEY": ARGS…` in the JSON formats.
    let json_call = |start: usize, body: &str, key: &str| {
        let after_name = body.find("\"name\"").map(|i| &body[i + "\"name\"".len()..]);
        let name_text = after_name
            .map(|r| r.trim_start().trim_start_matches(':').trim_start())
            .and_then(|r| r.strip_prefix('"'))
            .unwrap_or("");
        let name_end = name_text.find('"').unwrap_or(name_text.len());
        let name = name_text[..name_end].to_owned();
        let rest = &name_text[name_end..];
        let arguments = rest
            .find(key)
            .map(|i| rest[i + key.len()..].trim_start().trim_start_matches(':').trim_start())
            .unwrap_or("")
            .to_owned();
        PartialToolCall { start, name, arguments }
    };
    match format {
        ToolFormat::Llama3 => {
            let start = output.find("{\"name\"")?;
            let body = &output[start..];
            let complete = serde_json::Deserializer::from_str(body)
                .into_iter::<Value>()
                .next()
                .is_some_and(|r| r.is_ok());
            (!complete).then(|| json_call(start, body, "\"parameters\""))
        }
        ToolFormat::Qwen3 => {
            let start = output.rfind("<tool_call>")?;
            let body = &output[start + "<tool_call>".len()..];
            (!body.contains("</tool_call>")).then(|| json_call(start, body, "\"arguments\""))
        }
        ToolFormat::Harmony => {
            let start = output.rfind("<|channel|>")?;
            let body = &output[start + "<|channel|>".len()..];
            let name_text = body.split("to=functions.").nth(1)?;
            if body.contains("<|call|>") {
                return None;
            }
            let name = name_text.split([' ', '<']).next().unwrap_or("").to_owned();
            let arguments = body.split_once("<|message|>").map_or("", |(_, a)| a).to_owned();
            Some(PartialToolCall { start, name, arguments })
        }
        ToolFormat::DeepSeek => {
            let start = output.rfind("<｜tool▁call▁begin｜>")?;
            let body = &output[start..];
            if body.contains("<｜tool▁call▁end｜>") {
                return None;
            }
            let after = body.split_once("<｜tool▁sep｜>").map_or("", |(_, r)| r);
            let (name, args) = after.split_once('\n').unwrap_or((after, ""));
            let arguments = args.strip_prefix("```json\n").unwrap_or(args).to_owned();
            Some(PartialToolCall { start, name: name.to_owned(), arguments })
        }
    }
}

/// An output as text with special tokens written as their strings (EOS left out): what the
/// tool-call formats are read back from ([`extract_tool_calls`]), since a call's begin and end
/// markers are often special tokens.
pub fn render_output(vocab: &Vocabulary, tokens: &[crate::TokenId]) -> String {
    let mut out = Vec::new();
    for &t in tokens {
        if vocab.is_eos(t) {
            continue;
        }
        match vocab.token_bytes(t) {
            [] => {
                if let Some(s) = vocab.tokenizer().and_then(|k| k.id_to_token(t.0)) {
                    out.extend_from_slice(s.as_bytes());
                }
            }
            b => out.extend_from_slice(b),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The calls in `output` (the decoded text, special tokens written as their strings) and the
/// text outside them (the content; Qwen3 `<think>` blocks and Harmony's analysis left out).
pub fn extract_tool_calls(format: ToolFormat, output: &str) -> (String, Vec<ToolCall>) {
    let mut calls = Vec::new();
    let mut content = String::new();
    let json_prefix = |s: &str| -> Option<(Value, usize)> {
        let mut it = serde_json::Deserializer::from_str(s).into_iter::<Value>();
        let v = it.next()?.ok()?;
        Some((v, it.byte_offset()))
    };
    match format {
        ToolFormat::Qwen3 => {
            let mut rest = output;
            if let (Some(a), Some(b)) = (rest.find("<think>"), rest.find("</think>")) {
                if a < b {
                    content.push_str(&rest[..a]);
                    rest = &rest[b + "</think>".len()..];
                }
            }
            while let Some(i) = rest.find("<tool_call>") {
                content.push_str(&rest[..i]);
                let body = rest[i + "<tool_call>".len()..].trim_start();
                // The value first (an end string inside one of its strings is content).
                let Some((v, used)) = json_prefix(body) else { break };
                if let (Some(n), Some(a)) =
                    (v.get("name").and_then(Value::as_str), v.get("arguments"))
                {
                    calls.push(ToolCall { name: n.to_owned(), arguments: a.clone() });
                }
                let after = &body[used..];
                rest =
                    after.find("</tool_call>").map_or("", |j| &after[j + "</tool_call>".len()..]);
            }
            content.push_str(rest);
        }
        ToolFormat::Llama3 => {
            let i = output.find("{\"name\"").unwrap_or(output.len());
            content.push_str(&output[..i]);
            if let Some((v, _)) = json_prefix(&output[i..]) {
                if let (Some(n), Some(a)) =
                    (v.get("name").and_then(Value::as_str), v.get("parameters"))
                {
                    calls.push(ToolCall { name: n.to_owned(), arguments: a.clone() });
                }
            }
        }
        ToolFormat::Harmony => {
            let mut rest = output;
            while let Some(i) = rest.find("<|channel|>") {
                let body = &rest[i + "<|channel|>".len()..];
                let Some(m) = body.find("<|message|>") else { break };
                let header = &body[..m];
                let msg = &body[m + "<|message|>".len()..];
                let stop = ["<|end|>", "<|call|>", "<|return|>"]
                    .iter()
                    .filter_map(|s| msg.find(s))
                    .min()
                    .unwrap_or(msg.len());
                if let Some(n) = header.split("to=functions.").nth(1) {
                    let name = n.split([' ', '<']).next().unwrap_or("").to_owned();
                    if let Ok(a) = serde_json::from_str::<Value>(&msg[..stop]) {
                        calls.push(ToolCall { name, arguments: a });
                    }
                } else if header.starts_with("final") {
                    content.push_str(&msg[..stop]);
                }
                rest = &msg[stop..];
            }
        }
        ToolFormat::DeepSeek => {
            let i = output.find("<｜tool▁calls▁begin｜>").unwrap_or(output.len());
            content.push_str(&output[..i]);
            let mut rest = &output[i..];
            while let Some(j) = rest.find("<｜tool▁sep｜>") {
                let body = &rest[j + "<｜tool▁sep｜>".len()..];
                let Some(nl) = body.find('\n') else { break };
                let name = body[..nl].to_owned();
                let args = body[nl..].trim_start_matches("\n```json\n");
                let Some(e) = args.find("\n```") else { break };
                if let Ok(a) = serde_json::from_str::<Value>(&args[..e]) {
                    calls.push(ToolCall { name, arguments: a });
                }
                rest = &args[e..];
            }
        }
    }
    (content, calls)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_cut_off_by_the_token_limit_are_read_as_far_as_they_go() {
        let cut = |f, s: &str| unfinished_tool_call(f, s).map(|p| (p.start, p.name, p.arguments));
        let l = ToolFormat::Llama3;
        assert_eq!(cut(l, "Hi {\"name\": \"get"), Some((3, "get".into(), String::new())));
        assert_eq!(
            cut(l, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Pa"),
            Some((0, "get_weather".into(), "{\"city\": \"Pa".into()))
        );
        assert_eq!(cut(l, "{\"name\": \"f\", \"parameters\": {}}"), None, "complete");
        assert_eq!(cut(l, "no call"), None);
        let q = ToolFormat::Qwen3;
        let done = "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>";
        assert_eq!(cut(q, done), None);
        let two = format!("{done}\n<tool_call>\n{{\"name\": \"b\", \"arguments\": {{\"x\": 1");
        assert_eq!(cut(q, &two), Some((done.len() + 1, "b".into(), "{\"x\": 1".into())));
        let h = "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\"";
        assert_eq!(cut(ToolFormat::Harmony, h), Some((0, "f".into(), "{\"a\"".into())));
        assert_eq!(call_triggers(l), ["{\"name\""]);
    }
}
