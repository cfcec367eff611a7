//! The CFG engine against oracles on the embedded Qwen3 vocabulary.
//!
//! - Naive oracle: at random reachable states, the mask equals the set of tokens whose bytes a
//!   fresh copy of the state accepts one by one (plus EOS exactly when accepting).
//! - Native JSON: `grammars/json.gbnf` through the CFG engine and the native
//!   [`JsonObjectConstraint`] (any top-level value, whitespace runs ≤ 32) allow the same tokens
//!   at the same states, step after step.

use grammask::json::{TopLevel, Whitespace};
use grammask::vocab::TokenKind;
use grammask::{
    CfgConfig, CfgConstraint, ConstraintEngine, JsonConfig, JsonObjectConstraint, TokenId,
    TokenMask, Vocabulary,
};
use proptest::prelude::*;
use std::sync::OnceLock;

fn vocab() -> &'static Vocabulary {
    static V: OnceLock<Vocabulary> = OnceLock::new();
    V.get_or_init(|| Vocabulary::embedded().unwrap())
}

fn grammar(name: &str) -> String {
    std::fs::read_to_string(format!("{}/grammars/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn engines() -> &'static Vec<(String, CfgConstraint)> {
    static E: OnceLock<Vec<(String, CfgConstraint)>> = OnceLock::new();
    // Engines are built once (slices cost a vocabulary pass); tests fork them.
    E.get_or_init(|| {
        ["arithmetic.gbnf", "sql_select.gbnf", "csv.gbnf", "c_expr.gbnf", "tool_call.gbnf"]
            .iter()
            .map(|n| {
                (
                    n.to_string(),
                    CfgConstraint::from_gbnf(vocab(), &grammar(n), &CfgConfig::default()).unwrap(),
                )
            })
            .collect()
    })
}

fn oracle(e: &CfgConstraint) -> TokenMask {
    let v = vocab();
    let mut m = TokenMask::new(v.n_vocab());
    for i in 0..v.n_tokens() {
        let t = TokenId::from_index(i);
        if v.kind(t) != TokenKind::Text || v.token_bytes(t).is_empty() {
            continue;
        }
        let mut c = e.fork_at();
        if c.advance_bytes(v.token_bytes(t)).is_ok() {
            m.insert(t);
        }
    }
    if e.is_accepting() {
        for &x in v.eos_ids() {
            m.insert(x);
        }
    }
    m
}

fn pick(mask: &TokenMask, v: &Vocabulary, rng: &mut u64) -> Option<TokenId> {
    let allowed: Vec<TokenId> = mask.iter().filter(|t| !v.is_eos(*t)).collect();
    if allowed.is_empty() {
        return None;
    }
    *rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    Some(allowed[(*rng >> 33) as usize % allowed.len()])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]
    #[test]
    fn mask_equals_naive_oracle(which in 0usize..5, seed in any::<u64>(), steps in 1usize..8) {
        let v = vocab();
        let (name, base) = &engines()[which];
        let mut e = base.fork();
        let mut mask = TokenMask::new(v.n_vocab());
        let mut rng = seed;
        for _ in 0..steps {
            e.fill_mask(&mut mask).unwrap();
            let Some(t) = pick(&mask, v, &mut rng) else { break };
            e.advance(t).unwrap();
        }
        e.fill_mask(&mut mask).unwrap();
        let want = oracle(&e);
        prop_assert!(mask == want, "{}: mask differs from oracle after {} bytes: extra {:?} missing {:?}",
            name, e.bytes_consumed(),
            mask.iter().filter(|t| !want.contains(*t)).take(5).map(|t| v.describe(t)).collect::<Vec<_>>(),
            want.iter().filter(|t| !mask.contains(*t)).take(5).map(|t| v.describe(t)).collect::<Vec<_>>());
    }
}

#[test]
fn json_gbnf_agrees_with_native_json_engine() {
    let v = vocab();
    let native_cfg = JsonConfig {
        top_level: TopLevel::AnyValue,
        whitespace: Whitespace::Flexible { max_run: 32 },
        ..JsonConfig::default()
    };
    let cfg = CfgConstraint::from_gbnf(v, &grammar("json.gbnf"), &CfgConfig::default()).unwrap();
    let mut m1 = TokenMask::new(v.n_vocab());
    let mut m2 = TokenMask::new(v.n_vocab());
    let mut steps = 0;
    for seed in 0..6u64 {
        let mut native = JsonObjectConstraint::new(v, &native_cfg).unwrap();
        let mut e = cfg.fork();
        let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        for step in 0..25 {
            native.fill_mask(&mut m1).unwrap();
            e.fill_mask(&mut m2).unwrap();
            steps += 1;
            assert!(
                m1 == m2,
                "seed {seed} step {step}: masks differ after {:?}: native-only {:?}, cfg-only {:?}",
                String::from_utf8_lossy(&e.output_bytes()),
                m1.iter()
                    .filter(|t| !m2.contains(*t))
                    .take(5)
                    .map(|t| v.describe(t))
                    .collect::<Vec<_>>(),
                m2.iter()
                    .filter(|t| !m1.contains(*t))
                    .take(5)
                    .map(|t| v.describe(t))
                    .collect::<Vec<_>>()
            );
            // Bias towards structure so documents nest and close: prefer short tokens.
            let Some(mut t) = pick(&m1, v, &mut rng) else { break };
            if rng % 3 != 0 {
                let short: Vec<TokenId> =
                    m1.iter().filter(|t| !v.is_eos(*t) && v.token_bytes(*t).len() <= 2).collect();
                if !short.is_empty() {
                    t = short[(rng >> 40) as usize % short.len()];
                }
            }
            native.advance(t).unwrap();
            e.advance(t).unwrap();
        }
    }
    assert!(steps >= 100);
}

/// The mask cache is keyed by the chart's structural signature: cached masks must equal
/// recomputed ones along random walks (structure repeats a lot in these grammars).
#[test]
fn cached_masks_equal_recomputed_masks() {
    let v = vocab();
    for name in ["json.gbnf", "arithmetic.gbnf", "csv.gbnf", "yaml_flat.gbnf", "chess_san.gbnf"] {
        let text = grammar(name);
        let cached = CfgConstraint::from_gbnf(v, &text, &CfgConfig::default()).unwrap();
        let mut no_cache = CfgConfig::default();
        no_cache.engine.mask_cache = 0;
        let fresh = CfgConstraint::from_gbnf(v, &text, &no_cache).unwrap();
        let (mut a, mut b) = (TokenMask::new(v.n_vocab()), TokenMask::new(v.n_vocab()));
        for seed in 0..2u64 {
            let (mut c, mut f) = (cached.fork(), fresh.fork());
            let mut rng = seed.wrapping_add(7).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            for step in 0..30 {
                c.fill_mask(&mut a).unwrap();
                f.fill_mask(&mut b).unwrap();
                assert!(
                    a == b,
                    "{name} seed {seed} step {step}: cached mask differs after {:?}",
                    String::from_utf8_lossy(&c.output_bytes())
                );
                // Prefer one-byte tokens so that structure (separators) repeats.
                let short: Vec<TokenId> =
                    a.iter().filter(|t| !v.is_eos(*t) && v.token_bytes(*t).len() == 1).collect();
                let t = if !short.is_empty() && rng % 4 != 0 {
                    rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    short[(rng >> 33) as usize % short.len()]
                } else {
                    match pick(&a, v, &mut rng) {
                        Some(t) => t,
                        None => break,
                    }
                };
                c.advance(t).unwrap();
                f.advance(t).unwrap();
            }
        }
    }
}
