//! The `grammask` binary: the README's main command works on the embedded default, `generate`
//! and `walk` print the documented JSON objects, and errors exit non-zero with one clear line.

use std::process::Command;

fn grammask(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_grammask")).args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn no_arguments_runs_the_main_job() {
    let (ok, out, err) = grammask(&[]);
    assert!(ok, "{err}");
    assert!(out.contains("finish_reason: "), "{out}");
    assert!(out.contains("mask latency: n=") && out.contains(" p99 "), "{out}");
}

#[test]
fn generate_json_format_gives_valid_documents() {
    let mut finished = 0;
    for seed in 1..=8 {
        let (ok, out, err) =
            grammask(&["generate", "--json", "--seed", &seed.to_string(), "--format", "json"]);
        assert!(ok, "{err}");
        let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        for key in ["content", "finish_reason", "n_tokens", "mask_us"] {
            assert!(v.get(key).is_some(), "missing {key} in {out}");
        }
        for key in ["mean", "p50", "p99", "max"] {
            assert!(v["mask_us"][key].is_number(), "mask_us.{key} in {out}");
        }
        if v["finish_reason"] == "stop" {
            finished += 1;
            let doc: serde_json::Value = serde_json::from_str(v["content"].as_str().unwrap())
                .unwrap_or_else(|e| panic!("seed {seed}: not JSON ({e}): {}", v["content"]));
            assert!(doc.is_object());
        }
    }
    assert!(finished >= 6, "most random-logit runs reach a complete document ({finished}/8)");
}

#[test]
fn walk_token_ids_on_a_cached_vocabulary_gives_the_same_masks() {
    let dir = std::env::temp_dir().join(format!("grammask-cli-ids-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cache = dir.join("cache");
    let (cache_s, doc, ids, m1, m2) = (
        cache.to_str().unwrap(),
        dir.join("doc.json"),
        dir.join("ids.json"),
        dir.join("m1.bin"),
        dir.join("m2.bin"),
    );
    std::fs::write(&doc, "{\"name\": \"Café 🎉\", \"n\": [1, -2.5e3]}").unwrap();
    let walk = |input: &std::path::Path, dump: &std::path::Path, extra: &[&str]| {
        let mut a = vec!["walk", "--vocab-cache", cache_s, "--format", "json"];
        a.extend(["--input", input.to_str().unwrap(), "--dump-masks", dump.to_str().unwrap()]);
        a.extend(extra);
        let (ok, out, err) = grammask(&a);
        assert!(ok, "{err}");
        serde_json::from_str::<serde_json::Value>(out.trim()).unwrap()
    };
    let text = walk(&doc, &m1, &[]);
    assert_eq!(text["accepted"], true, "{text}");
    let files: Vec<_> = std::fs::read_dir(&cache).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 1, "one vocabulary file in the cache: {files:?}");
    std::fs::write(&ids, text["tokens"].to_string()).unwrap();
    let by_id = walk(&ids, &m2, &["--token-ids"]);
    assert_eq!(by_id["accepted"], true, "{by_id}");
    assert_eq!(by_id["tokens"], text["tokens"]);
    assert_eq!(std::fs::read(&m1).unwrap(), std::fs::read(&m2).unwrap(), "the same masks");
    // Ids past the logits width, and input that is not an array of ids, are clear errors.
    std::fs::write(&ids, "[1, 99999999]").unwrap();
    let (ok, _, err) = grammask(&["walk", "--token-ids", "--input", ids.to_str().unwrap()]);
    assert!(!ok && err.contains("token 1 of the input is id 99999999"), "{err}");
    std::fs::write(&ids, "{\"a\": 1}").unwrap();
    let (ok, _, err) = grammask(&["walk", "--token-ids", "--input", ids.to_str().unwrap()]);
    assert!(!ok && err.contains("JSON array of token ids"), "{err}");
    let (ok, _, err) =
        grammask(&["walk", "--no-vocab-cache", "--vocab-cache", cache_s, "--input", "x"]);
    assert!(!ok && err.contains("cannot be used with"), "{err}");
}

#[test]
fn walk_reports_acceptance_and_the_first_refused_token() {
    let dir = std::env::temp_dir().join(format!("grammask-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.json");
    std::fs::write(&good, "{\"name\": \"Café\", \"n\": [1, 2]}\n").unwrap();
    let (ok, out, err) =
        grammask(&["walk", "--json", "--input", good.to_str().unwrap(), "--format", "json"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["accepted"], true, "{out}");
    assert_eq!(v["eos_allowed"], true);
    assert!(v["refused_at"].is_null());
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "{\"name\": 01}").unwrap();
    let (ok, out, _) = grammask(&["walk", "--input", bad.to_str().unwrap(), "--format", "json"]);
    assert!(!ok, "a refused document exits non-zero (status 3, tests/it/hardening.rs)");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["accepted"], false);
    assert!(v["refused_at"]["index"].is_number(), "{out}");
    assert!(v["refused_at"]["bytes"].as_str().unwrap().contains('1'), "{out}");
}

/// `--plain-integers` (with `--schema`): `integer` takes plain literals only; without it every
/// spelling of an integer value; the flag without `--schema` is a usage error. `--literal-keys`:
/// a closed object's declared names only as written.
#[test]
fn plain_integers_and_literal_spelling_flags_refuse_other_spellings() {
    let dir = std::env::temp_dir().join(format!("grammask-cli-int-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let schema = dir.join("schema.json");
    std::fs::write(&schema, r#"{"type": "object", "properties": {"n": {"type": "integer"}}}"#)
        .unwrap();
    let walk = |doc: &str, flag: bool| {
        let input = dir.join("doc.json");
        std::fs::write(&input, doc).unwrap();
        let mut a = vec!["walk", "--schema", schema.to_str().unwrap()];
        a.extend(["--input", input.to_str().unwrap(), "--format", "json"]);
        if flag {
            a.push("--plain-integers");
        }
        let (_, out, err) = grammask(&a);
        let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_else(|_| {
            panic!("{doc}: {out} {err}");
        });
        v["accepted"] == true
    };
    assert!(walk(r#"{"n": 12}"#, true) && walk(r#"{"n": 12}"#, false));
    assert!(!walk(r#"{"n": 1.0}"#, true) && walk(r#"{"n": 1.0}"#, false));
    assert!(!walk(r#"{"n": 1e3}"#, true) && walk(r#"{"n": 1e3}"#, false));
    // --literal-keys: a closed object's names as written.
    let closed = dir.join("closed.json");
    std::fs::write(
        &closed,
        r#"{"type": "object", "additionalProperties": false, "properties": {"color": {}}}"#,
    )
    .unwrap();
    let keyed = |doc: &str, flag: &str| {
        let input = dir.join("keys.json");
        std::fs::write(&input, doc).unwrap();
        let mut a = vec!["walk", "--schema", closed.to_str().unwrap(), "--format", "json"];
        a.extend(["--input", input.to_str().unwrap()]);
        a.extend((!flag.is_empty()).then_some(flag));
        let (_, out, _) = grammask(&a);
        serde_json::from_str::<serde_json::Value>(out.trim()).unwrap()["accepted"] == true
    };
    assert!(keyed(r#"{"color": 1}"#, "--literal-keys"));
    assert!(!keyed(r#"{"colo\u0072": 1}"#, "--literal-keys"));
    assert!(keyed(r#"{"colo\u0072": 1}"#, ""));
    // --literal-values: an enum member as written.
    std::fs::write(&closed, r#"{"enum": ["purple", "red"]}"#).unwrap();
    assert!(keyed(r#""purple""#, "--literal-values"));
    assert!(!keyed(r#""p\u0075rple""#, "--literal-values"));
    assert!(keyed(r#""p\u0075rple""#, ""));
    let (ok, _, err) = grammask(&["walk", "--plain-integers", "--input", "x"]);
    assert!(!ok && err.contains("--schema"), "{err}");
    let (ok, _, err) = grammask(&["walk", "--json", "--plain-integers", "--input", "x"]);
    assert!(!ok && err.contains("cannot be used with"), "{err}");
}

/// `--profile`: `walk` is exact unless told otherwise; under `generation` an object that says
/// nothing of other keys takes only its own and numbers are plain, and `--whitespace` overrides
/// the profile's whitespace. `generate` compiles under the profile.
#[test]
fn profile_flag_picks_the_schema_language() {
    let dir = std::env::temp_dir().join(format!("grammask-cli-profile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let schema = dir.join("schema.json");
    std::fs::write(
        &schema,
        r#"{"type": "object", "properties": {"p": {"type": "number", "minimum": 0, "maximum": 1}}}"#,
    )
    .unwrap();
    let walk = |doc: &str, extra: &[&str]| {
        let input = dir.join("doc.json");
        std::fs::write(&input, doc).unwrap();
        let mut a = vec!["walk", "--schema", schema.to_str().unwrap(), "--format", "json"];
        a.extend(["--input", input.to_str().unwrap()]);
        a.extend(extra);
        let (_, out, err) = grammask(&a);
        let v: serde_json::Value =
            serde_json::from_str(out.trim()).unwrap_or_else(|_| panic!("{doc}: {out} {err}"));
        v["accepted"] == true
    };
    let generation: &[&str] = &["--profile", "generation"];
    assert!(walk(r#"{"p": 0.5, "q": 1}"#, &[]) && walk(r#"{"p": 5e-1}"#, &[]), "exact");
    assert!(walk(r#"{"p":0.5}"#, generation));
    assert!(!walk(r#"{"p":0.5,"q":1}"#, generation), "closed");
    assert!(!walk(r#"{"p":5e-1}"#, generation), "plain numbers");
    assert!(walk(r#"{"p": 0.5}"#, generation), "flexible runs");
    assert!(!walk(r#"{"p": 0.5}"#, &["--profile", "generation", "--whitespace", "compact"]));
    assert!(walk(r#"{"p": 0.5}"#, &["--profile", "generation", "--whitespace", "separators"]));
    let (ok, out, err) = grammask(&[
        "generate",
        "--schema",
        schema.to_str().unwrap(),
        "--format",
        "json",
        "--max-tokens",
        "64",
    ]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    if v["finish_reason"] == "stop" {
        let doc: serde_json::Value = serde_json::from_str(v["content"].as_str().unwrap()).unwrap();
        assert!(doc.as_object().unwrap().keys().all(|k| k == "p"), "{doc}");
    }
    let (ok, _, err) = grammask(&["walk", "--json", "--whitespace", "separators", "--input", "x"]);
    assert!(!ok && err.contains("separators"), "{err}");
}

#[test]
fn walk_dumps_every_mask_in_the_token_mask_layout() {
    let dir = std::env::temp_dir().join(format!("grammask-cli-dump-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let doc = dir.join("doc.json");
    std::fs::write(&doc, "{\"a\": [1, true]}").unwrap();
    let dump = dir.join("masks.bin");
    let (ok, out, err) = grammask(&[
        "walk",
        "--input",
        doc.to_str().unwrap(),
        "--format",
        "json",
        "--dump-masks",
        dump.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let tokens: Vec<u32> =
        v["tokens"].as_array().unwrap().iter().map(|t| t.as_u64().unwrap() as u32).collect();
    let words = (v["n_vocab"].as_u64().unwrap() as usize).div_ceil(32);
    let bytes = std::fs::read(&dump).unwrap();
    assert_eq!(bytes.len(), (tokens.len() + 1) * words * 4, "one mask per token, then the last");
    let bit = |step: usize, t: u32| {
        let w = step * words + t as usize / 32;
        let word = u32::from_le_bytes(bytes[w * 4..w * 4 + 4].try_into().unwrap());
        word >> (t % 32) & 1 == 1
    };
    for (step, &t) in tokens.iter().enumerate() {
        assert!(bit(step, t), "step {step}: token {t} is in its mask");
    }
    // The first mask of a `{`-object constraint refuses `1` (token ids of digits vary, so look
    // for the id of the second token of the document, `"`, which cannot start it).
    assert!(!bit(0, tokens[1]) || tokens[0] == tokens[1]);
}

#[test]
fn errors_are_one_line_and_non_zero() {
    let (ok, _, err) = grammask(&["walk", "--input", "/nonexistent/doc.json"]);
    assert!(!ok);
    assert!(err.starts_with("error: cannot read /nonexistent/doc.json"), "{err}");
    assert!(!err.contains("panicked"));
    let (ok, _, err) = grammask(&["generate", "--tokenizer", "/nonexistent/tokenizer.json"]);
    assert!(!ok);
    assert!(err.starts_with("error: "), "{err}");
}

#[test]
fn generate_samples_and_splits_reasoning() {
    let (ok, out, err) = grammask(&[
        "generate",
        "--temperature",
        "0.8",
        "--top-p",
        "0.95",
        "--top-k",
        "50",
        "--min-p",
        "0.01",
        "--seed",
        "5",
        "--logprobs",
        "3",
        "--think-budget",
        "4",
        "--format",
        "json",
    ]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert!(v["reasoning_content"].is_string(), "{out}");
    let lps = v["logprobs"].as_array().expect("logprobs array");
    assert_eq!(lps.len() as u64, v["n_tokens"].as_u64().unwrap());
    // The forced </think> carries no logprobs; sampled steps carry 3 alternatives.
    assert!(lps.iter().any(|l| l.is_null()));
    assert!(lps.iter().filter(|l| !l.is_null()).all(|l| l["top"].as_array().unwrap().len() == 3));
    let (ok, _, err) = grammask(&["generate", "--top-p", "1.5"]);
    assert!(!ok);
    assert!(err.starts_with("error: ") && err.contains("top_p"), "{err}");
}

#[test]
fn think_budget_bounds_the_reasoning_block_with_tools_too() {
    // With --tools the format's own `<think>` used to open a second, unbounded block after the
    // forced `</think>`: the reasoning ran to --max-tokens and no call was made.
    let dir = std::env::temp_dir().join(format!("grammask-cli-think-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tools = dir.join("tools.json");
    std::fs::write(
        &tools,
        r#"[{"type": "function", "function": {"name": "get_weather", "parameters": {"type":
        "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
        "additionalProperties": false}}}]"#,
    )
    .unwrap();
    let t = tools.to_str().unwrap();
    let run = |flag: &str, seed: &str| {
        let (ok, out, err) = grammask(&[
            "generate",
            "--tools",
            t,
            "--tool-choice",
            "required",
            flag,
            "8",
            "--max-tokens",
            "300",
            "--logprobs",
            "1",
            "--seed",
            seed,
            "--format",
            "json",
        ]);
        assert!(ok, "{err}");
        serde_json::from_str::<serde_json::Value>(out.trim()).unwrap()
    };
    let mut called = 0;
    for seed in ["1", "2", "3", "4"] {
        let v = run("--think-budget", seed);
        // The forced `</think>` (no logprobs) comes after exactly 8 reasoning tokens.
        let lps = v["logprobs"].as_array().unwrap();
        assert_eq!(lps.iter().position(serde_json::Value::is_null), Some(8), "{v}");
        assert!(!v["content"].as_str().unwrap().contains("think>"), "one think block: {v}");
        if v["finish_reason"] == "stop" {
            assert_eq!(v["tool_calls"][0]["name"], "get_weather", "{v}");
            called += 1;
        }
        // --reasoning-budget is the same flag (timings aside, the same output).
        let w = run("--reasoning-budget", seed);
        for key in ["content", "reasoning_content", "tool_calls", "n_tokens", "logprobs"] {
            assert_eq!(w[key], v[key], "{key}");
        }
    }
    assert!(called >= 2, "most runs end with their call ({called}/4)");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn regex_grammar_and_check() {
    let (ok, out, err) =
        grammask(&["generate", "--regex", "[a-z]{2,5}@[a-z]{2,4}\\.(com|org)", "--format", "json"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    if v["finish_reason"] == "stop" {
        let s = v["content"].as_str().unwrap();
        let (user, domain) = s.split_once('@').expect("an e-mail");
        assert!((2..=5).contains(&user.len()) && user.bytes().all(|b| b.is_ascii_lowercase()));
        assert!(domain.ends_with(".com") || domain.ends_with(".org"), "{s}");
    }
    let (ok, out, err) =
        grammask(&["generate", "--grammar", "grammars/list.gbnf", "--max-tokens", "64"]);
    assert!(ok, "{err}");
    assert!(out.starts_with("- "), "{out}");
    let (ok, out, err) = grammask(&["check", "--grammar", "grammars/json.gbnf"]);
    assert!(ok, "{err}");
    assert!(out.contains("root ::="), "{out}");
    let (ok, _, err) = grammask(&["generate", "--regex", "(ab"]);
    assert!(!ok);
    assert!(err.starts_with("error: ") && err.contains("unclosed"), "{err}");
    let dir = std::env::temp_dir().join(format!("grammask-cli-g-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.gbnf");
    std::fs::write(&bad, "root ::= item\n").unwrap();
    let (ok, _, err) = grammask(&["check", "--grammar", bad.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("item"), "the error names the undefined rule: {err}");
}

#[test]
fn temperature_placement_is_a_flag() {
    let run = |placement: &str| {
        grammask(&[
            "generate",
            "--json",
            "--seed",
            "3",
            "--temperature",
            "0.7",
            "--top-p",
            "0.9",
            "--max-tokens",
            "40",
            "--temperature-placement",
            placement,
            "--format",
            "json",
        ])
    };
    for placement in ["before", "after"] {
        let (ok, out, err) = run(placement);
        assert!(ok, "{placement}: {err}");
        let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        assert!(v["n_tokens"].as_u64().is_some_and(|n| n > 0), "{out}");
    }
    let (ok, _, err) = run("sideways");
    assert!(!ok && err.contains("sideways"), "{err}");
}
