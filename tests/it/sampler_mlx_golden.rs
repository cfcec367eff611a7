//! Parity with mlx-lm: our filters, softmax, log-softmax and logits processors against outputs
//! recorded from the real `mlx_lm.sample_utils` (data: `tests/data/mlx_lm_golden/filters.json`,
//! generator: `scripts/mlx_lm_golden.py`, mlx-lm 0.32.2 on MLX's CPU build).
//!
//! What is compared, and why:
//! * Filters (top-p, min-p, top-k, and the `make_sampler` chain) at temperature 1 — the only
//!   temperature at which mlx-lm (filters on T=1 logprobs) and the spec (temperature before the
//!   filters) coincide. Our filters get `exp(logprobs)` as mlx computed it, so both sides see
//!   identical inputs. Checked: the surviving set and the renormalised probabilities (1e-6).
//! * mlx-lm works on log-probabilities, which stay finite where `exp` underflows to 0 in `f32`;
//!   such tokens survive a filter in mlx yet carry zero probability in both implementations.
//!   The surviving set is therefore compared as the set of tokens with non-zero renormalised
//!   probability.
//! * top-k ties at the cut: mlx-lm's `argpartition` breaks them in an unspecified order, ours
//!   by lowest id. Where the recorded case has a tie at the cut (`tie_at_cut`), we check the
//!   set size and that every token strictly above the cut survives in both.
//! * The full pipeline (`sampling_distribution` from raw logits, our own softmax) for the
//!   chain configs, within 1e-6.

use std::collections::BTreeSet;

use grammask::sampler::{
    apply_penalties, compute_top_logprobs, min_p_in_place, renormalise, sampling_distribution,
    softmax_in_place, top_k_in_place, top_p_in_place, Logits, PenaltyConfig, SamplerConfig,
    SamplerScratch,
};
use grammask::TokenId;
use serde_json::Value;

fn load() -> Value {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/mlx_lm_golden/filters.json"
    ))
    .expect("golden file");
    serde_json::from_str(&text).expect("golden json")
}

fn num(v: &Value) -> f32 {
    match v {
        Value::String(s) if s == "-inf" => f32::NEG_INFINITY,
        Value::String(s) if s == "inf" => f32::INFINITY,
        _ => v.as_f64().expect("number") as f32,
    }
}

fn row(v: &Value) -> Vec<f32> {
    v.as_array().expect("array").iter().map(num).collect()
}

fn ids(v: &Value) -> Vec<usize> {
    v.as_array().expect("array").iter().map(|x| x.as_u64().unwrap() as usize).collect()
}

/// mlx's renormalised row, dense (0 outside the kept set).
fn mlx_dense(n: usize, f: &Value) -> Vec<f32> {
    let mut dense = vec![0.0; n];
    for (i, p) in ids(&f["kept"]).into_iter().zip(row(&f["probs"])) {
        dense[i] = p;
    }
    dense
}

fn support(p: &[f32]) -> BTreeSet<usize> {
    p.iter().enumerate().filter(|(_, &x)| x > 0.0).map(|(i, _)| i).collect()
}

fn assert_close(name: &str, ours: &[f32], theirs: &[f32], tol: f32) {
    for (i, (a, b)) in ours.iter().zip(theirs).enumerate() {
        assert!((a - b).abs() <= tol, "{name}: token {i}: ours {a} vs mlx-lm {b}");
    }
}

/// Check the surviving sets; with a top-k tie at the cut, only what is determined.
fn check_sets(name: &str, ours: &[f32], theirs: &[f32], probs: &[f32], tie: bool) {
    let (a, b) = (support(ours), support(theirs));
    if !tie {
        assert_eq!(a, b, "{name}: surviving sets differ");
        return;
    }
    assert_eq!(a.len(), b.len(), "{name}: surviving set sizes differ");
    let cut = a.iter().chain(&b).map(|&i| probs[i]).fold(f32::INFINITY, f32::min);
    for (i, &p) in probs.iter().enumerate() {
        if p > cut {
            assert_eq!(a.contains(&i), b.contains(&i), "{name}: token {i} above the tie");
        }
    }
}

#[test]
fn filters_match_mlx_lm() {
    let golden = load();
    let mut keys = Vec::new();
    let mut checked = 0;
    for case in golden["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let probs = row(&case["probs"]);
        let n = probs.len();
        for f in case["filters"].as_array().unwrap() {
            let op = f["op"].as_str().unwrap();
            let mut ours = probs.clone();
            let tie = f["tie_at_cut"].as_bool().unwrap_or(false);
            match op {
                "top_p" => top_p_in_place(&mut ours, num(&f["param"]), &mut keys),
                "min_p" => min_p_in_place(&mut ours, num(&f["param"])),
                "top_k" => {
                    top_k_in_place(&mut ours, f["param"].as_u64().unwrap() as usize, &mut keys)
                }
                "chain" => {
                    top_p_in_place(&mut ours, num(&f["top_p"]), &mut keys);
                    min_p_in_place(&mut ours, num(&f["min_p"]));
                    top_k_in_place(&mut ours, f["top_k"].as_u64().unwrap() as usize, &mut keys);
                }
                other => panic!("unknown op {other}"),
            }
            renormalise(&mut ours);
            let theirs = mlx_dense(n, f);
            let label = format!("{name} {op} {}", f.get("param").unwrap_or(&Value::Null));
            check_sets(&label, &ours, &theirs, &probs, tie);
            if !tie {
                assert_close(&label, &ours, &theirs, 1e-6);
            }
            checked += 1;
        }
    }
    assert!(checked > 100, "only {checked} filter cases");
}

#[test]
fn pipeline_at_temperature_one_matches_mlx_lm_chain() {
    let golden = load();
    let mut scratch = SamplerScratch::new();
    for case in golden["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let logits = row(&case["logits"]);
        let probs = row(&case["probs"]);
        for f in case["filters"].as_array().unwrap().iter().filter(|f| f["op"] == "chain") {
            let cfg = SamplerConfig::default()
                .with_temperature(1.0)
                .with_top_p(num(&f["top_p"]))
                .with_min_p(num(&f["min_p"]))
                .with_top_k(f["top_k"].as_u64().unwrap() as usize);
            let ours = sampling_distribution(
                &cfg,
                &PenaltyConfig::default(),
                Logits::F32(&logits),
                None,
                &[],
                &mut scratch,
            )
            .unwrap()
            .to_vec();
            let theirs = mlx_dense(logits.len(), f);
            let tie = f["tie_at_cut"].as_bool().unwrap();
            let label = format!("{name} pipeline chain");
            check_sets(&label, &ours, &theirs, &probs, tie);
            if !tie {
                assert_close(&label, &ours, &theirs, 1e-6);
            }
        }
    }
}

#[test]
fn softmax_and_log_softmax_match_mlx_lm() {
    let golden = load();
    for case in golden["cases"].as_array().unwrap() {
        let Some(softmax) = case.get("softmax") else { continue };
        let name = case["name"].as_str().unwrap();
        let logits = row(&case["logits"]);
        let mut ours = logits.clone();
        softmax_in_place(&mut ours, 1.0).unwrap();
        assert_close(name, &ours, &row(softmax), 1e-6);
        // Log-softmax: the top-20 logprobs and a few chosen tokens, relative tolerance.
        let theirs = row(&case["logprobs"]);
        for chosen in [0, logits.len() / 2, logits.len() - 1] {
            let lp = compute_top_logprobs(Logits::F32(&logits), TokenId(chosen as u32), 20)
                .unwrap()
                .unwrap();
            let close = |a: f32, b: f32| (a - b).abs() <= 1e-6 * b.abs().max(1.0);
            assert!(close(lp.logprob, theirs[chosen]), "{name} token {chosen}");
            for &(t, l) in &lp.top {
                assert!(close(l, theirs[t.index()]), "{name} top token {t}");
            }
        }
    }
}

#[test]
fn logits_processors_match_mlx_lm() {
    let golden = load();
    for p in golden["processors"].as_array().unwrap() {
        let c = &p["config"];
        let mut cfg = PenaltyConfig::default();
        if let Some(v) = c.get("repetition_penalty") {
            cfg.repetition_penalty = num(v);
        }
        if let Some(v) = c.get("presence_penalty") {
            cfg.presence_penalty = num(v);
        }
        if let Some(v) = c.get("frequency_penalty") {
            cfg.frequency_penalty = num(v);
        }
        if let Some(v) = c.get("logit_bias") {
            for pair in v.as_array().unwrap() {
                cfg.logit_bias.push((TokenId(pair[0].as_u64().unwrap() as u32), num(&pair[1])));
            }
        }
        let history: Vec<TokenId> =
            ids(&p["history"]).into_iter().map(TokenId::from_index).collect();
        let mut ours = row(&p["logits"]);
        apply_penalties(&mut ours, &history, &cfg, None);
        let theirs = row(&p["out"]);
        for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            assert!(
                (a - b).abs() <= 1e-6 * b.abs().max(1.0),
                "{c}: token {i}: ours {a} vs mlx-lm {b}"
            );
        }
    }
}
