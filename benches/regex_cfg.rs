//! Per-mask latency of the regex and CFG engines on real tokenizers: the workloads the issue
//! sets targets for (an e-mail/phone-list regex with Llama-3; `json.gbnf` against the native
//! JSON engine), plus a few grammars of `grammars/`.
//!
//! Run: `cargo bench --bench regex_cfg` (reads `../shared/tokenizers/llama3.json`; falls back to
//! the embedded Qwen3 vocabulary). Each workload replays a fixed document token by token and
//! times every `fill_mask`; it prints mean / p50 / p99 / max in microseconds, with the engine's
//! mask cache on (as deployed) and off (every mask a trie walk), and the same for the first
//! replay alone (later replays are later requests of the same compiled constraint, which
//! share its masks where the engine has a shared cache).
//!
//! `ONLY=<part of a name>` runs only the matching workloads (for a profiler); `STEPS=<part of a
//! name>` also prints, per step, the best and worst mask time over the replays, the token
//! before it and how many tokens the mask allows (where the time goes). `SHARED=0` turns the
//! grammars' shared mask cache off, so every replay is a first request (for a profiler);
//! `POSITIONS=0` turns the position masks off (`CfgConfig::position_masks`), and `WARM=<n>`
//! computes up to n positions' masks when each grammar is built (`CfgConfig::warm_positions`,
//! default 128, within `CfgConfig::warm_time`; `WARM=0`: none).

use grammask::{json::TopLevel, Whitespace};
use grammask::{
    CfgConfig, CfgConstraint, ConstraintEngine, EngineOptions, JsonConfig, JsonObjectConstraint,
    RegexConfig, RegexConstraint, TokenMask, Vocabulary,
};
use std::time::{Duration, Instant};

const EMAIL_PHONE: &str = r"(([a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,6})|(\+1 )?\(\d{3}\) \d{3}-\d{4})(\n(([a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,6})|(\+1 )?\(\d{3}\) \d{3}-\d{4})){0,20}";

const EMAIL_PHONE_DOC: &str = "john.smith@example.com\n(555) 123-4567\nmary_jones+news@mail.company.org\n+1 (212) 555-0199\nsupport@grammask.dev\nfrank.o.neill@uni-heidelberg.de\n(800) 555-0000\nx@y.io";

const JSON_DOC: &str = r#"{"id": 12345, "name": "Widget Pro", "tags": ["tools", "hardware", "sale"], "price": 49.95, "in_stock": true, "dimensions": {"width": 10.5, "height": 3.25, "unit": "cm"}, "description": "A sturdy, well-made widget for everyday use; ships in 2-3 days.", "reviews": [{"user": "alice", "stars": 5, "text": "Excellent quality, would buy again!"}, {"user": "bob", "stars": 4, "text": "Good value."}], "discount": null}"#;

const SQL_DOC: &str = "SELECT DISTINCT u.name, COUNT(*) AS orders FROM users AS u LEFT JOIN orders AS o ON u.id = o.user_id WHERE o.total > 100 AND (u.country = 'DE' OR u.vip IS NOT NULL) GROUP BY u.name ORDER BY orders DESC LIMIT 20;";

const C_DOC: &str = "int total = 0;\nwhile (i < n) {\n  total += values[i] * weight(i, n);\n  if (total > limit && !force) { return total - limit; }\n  i = i + 1;\n}\nreturn total;";

fn stats(name: &str, mut t: Vec<Duration>) {
    t.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let mean = t.iter().map(|d| us(*d)).sum::<f64>() / t.len() as f64;
    let p = |q: f64| us(t[((t.len() as f64 - 1.0) * q).round() as usize]);
    // The mean without the samples above p99: on a shared machine, a preemption (~4 ms on a
    // loaded 2-core VM) landing inside one mask moves the mean more than the engine does.
    let kept = &t[..=((t.len() as f64 - 1.0) * 0.99).round() as usize];
    let trimmed = kept.iter().map(|d| us(*d)).sum::<f64>() / kept.len() as f64;
    println!(
        "{name:<44} n={:<5} mean {:>8.1}  p50 {:>8.1}  p99 {:>8.1}  max {:>8.1}  mean≤p99 {:>8.1} µs",
        t.len(),
        mean,
        p(0.5),
        p(0.99),
        us(*t.last().unwrap()),
        trimmed
    );
}

/// Replay `doc` through fresh engines `reps` times, timing every mask.
fn replay(
    name: &str,
    vocab: &Vocabulary,
    doc: &str,
    reps: usize,
    mut make: impl FnMut() -> Box<dyn ConstraintEngine>,
) {
    // `ONLY=<part of a workload's name>`: run only the workloads that match (for a profiler).
    if std::env::var("ONLY").is_ok_and(|s| !name.contains(s.as_str())) {
        return;
    }
    let toks = vocab.encode(doc).unwrap();
    let mut mask = TokenMask::new(vocab.n_vocab());
    let mut times = Vec::new();
    let mut first = Vec::new();
    let mut checks = Vec::new();
    // `STEPS=<part of a workload's name>`: also print each step's best time over the replays,
    // the token it follows and how many tokens its mask allows (where the time goes).
    let steps = std::env::var("STEPS").is_ok_and(|s| !s.is_empty() && name.contains(s.as_str()));
    let mut best = vec![Duration::MAX; toks.len() + 1];
    let mut worst = vec![Duration::ZERO; toks.len() + 1];
    let mut allowed = vec![0usize; toks.len() + 1];
    for rep in 0..reps {
        let mut e = make();
        for (i, &t) in toks.iter().enumerate() {
            let start = Instant::now();
            let ok = e.allows(t);
            checks.push(start.elapsed());
            assert!(ok, "{name}: allows refused {}", vocab.describe(t));
            let start = Instant::now();
            e.fill_mask(&mut mask).unwrap();
            let took = start.elapsed();
            times.push(took);
            if rep == 0 {
                first.push(took);
            }
            best[i] = best[i].min(took);
            worst[i] = worst[i].max(took);
            allowed[i] = mask.count();
            assert!(mask.contains(t), "{name}: token {} refused", vocab.describe(t));
            e.advance(t).unwrap();
        }
        let start = Instant::now();
        e.fill_mask(&mut mask).unwrap();
        let took = start.elapsed();
        times.push(took);
        if rep == 0 {
            first.push(took);
        }
        best[toks.len()] = best[toks.len()].min(took);
        worst[toks.len()] = worst[toks.len()].max(took);
        allowed[toks.len()] = mask.count();
        assert!(e.is_accepting(), "{name}: document incomplete");
    }
    if steps {
        let mut before = String::from("(start)");
        for (i, (b, n)) in best.iter().zip(&allowed).enumerate() {
            println!(
                "  step {i:>3} after {before:<24} best {:>8.1} worst {:>8.1} µs  allows {n}",
                b.as_secs_f64() * 1e6,
                worst[i].as_secs_f64() * 1e6
            );
            if let Some(&t) = toks.get(i) {
                before = vocab.describe(t);
            }
        }
    }
    stats(&format!("{name} ({} tokens)", toks.len()), times);
    // Engines forked from one compiled constraint share its masks (`shared_masks`): the first
    // replay is the first request of the grammar, the others meet its states again.
    stats("  └ first replay only", first);
    stats("  └ allows(sampled token) only", checks);
}

fn main() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/tokenizers/llama3.json");
    let (vocab, vname) = match Vocabulary::from_file(path) {
        Ok(v) => (v, "llama3"),
        Err(_) => (Vocabulary::embedded().unwrap(), "qwen3 (embedded)"),
    };
    println!("vocabulary: {vname}, {} tokens", vocab.n_vocab());
    let reps = std::env::var("REPS").ok().and_then(|s| s.parse().ok()).unwrap_or(5);

    // Regex.
    let t0 = Instant::now();
    let re_cfg = RegexConfig::default();
    let grammar =
        std::sync::Arc::new(grammask::regex::RegexGrammar::new(EMAIL_PHONE, &re_cfg.dfa).unwrap());
    println!(
        "email/phone regex: compiled in {:.2} ms, {} DFA states, {} classes",
        t0.elapsed().as_secs_f64() * 1e3,
        grammar.dfa().map_or(0, |d| d.state_count()),
        grammar.dfa().map_or(0, |d| d.class_count())
    );
    let t0 = Instant::now();
    let base = RegexConstraint::from_grammar(grammar.clone(), &vocab, &re_cfg);
    println!(
        "email/phone regex: {} vocabulary slices built in {:.1} ms",
        base.slice_count(),
        t0.elapsed().as_secs_f64() * 1e3
    );
    replay("regex email/phone, cache on", &vocab, EMAIL_PHONE_DOC, reps, || Box::new(base.fork()));
    let cold = RegexConfig::default().with_engine(EngineOptions::default().with_mask_cache(0));
    let cold_base = RegexConstraint::from_grammar(grammar.clone(), &vocab, &cold);
    replay("regex email/phone, cache off", &vocab, EMAIL_PHONE_DOC, reps, || {
        Box::new(cold_base.fork())
    });

    // JSON: native vs json.gbnf.
    let native_cfg = JsonConfig::default()
        .with_top_level(TopLevel::AnyValue)
        .with_whitespace(Whitespace::Flexible { max_run: 32 });
    replay("native JSON engine, cache on", &vocab, JSON_DOC, reps, || {
        Box::new(JsonObjectConstraint::new(&vocab, &native_cfg).unwrap())
    });
    let grammars = concat!(env!("CARGO_MANIFEST_DIR"), "/grammars/");
    let load = |n: &str| std::fs::read_to_string(format!("{grammars}{n}")).unwrap();
    for (label, file, doc, cache) in [
        ("json.gbnf CFG, cache on", "json.gbnf", JSON_DOC, 32),
        ("json.gbnf CFG, cache off", "json.gbnf", JSON_DOC, 0),
        ("sql_select.gbnf CFG, cache on", "sql_select.gbnf", SQL_DOC, 32),
        ("c_expr.gbnf CFG, cache on", "c_expr.gbnf", C_DOC, 32),
    ] {
        // `SHARED=0`: no masks shared between replays, so each is a first request (profiling).
        let shared = std::env::var("SHARED").ok().and_then(|s| s.parse().ok()).unwrap_or(256);
        let options = EngineOptions::default().with_mask_cache(cache).with_shared_masks(shared);
        let positions = std::env::var("POSITIONS").ok().and_then(|s| s.parse().ok()).unwrap_or(512);
        let cfg = CfgConfig::default().with_engine(options).with_position_masks(positions);
        // `WARM=<n>`: compute the masks of up to n positions when the engine is built
        // (`CfgConfig::warm_positions`, default 128; 0: none), so the first replay finds them
        // made.
        let warm = std::env::var("WARM")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(CfgConfig::default().warm_positions);
        let cfg = cfg.with_warm_positions(warm);
        let t0 = Instant::now();
        let base = CfgConstraint::from_gbnf(&vocab, &load(file), &cfg).unwrap();
        println!(
            "{file}: compiled with {} slices in {:.1} ms (warm positions: {warm}, {} kept)",
            base.slice_count(),
            t0.elapsed().as_secs_f64() * 1e3,
            base.position_mask_count()
        );
        replay(label, &vocab, doc, reps, || Box::new(base.fork()));
    }
}
