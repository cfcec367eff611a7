//! The CFG engine against oracles on the embedded Qwen3 vocabulary.
//!
//! - Naive oracle: at random reachable states, the mask equals the set of tokens whose bytes a
//!   fresh copy of the state accepts one by one (plus EOS exactly when accepting).
//! - Native JSON: `grammars/json.gbnf` through the CFG engine and the native
//!   [`JsonObjectConstraint`] (any top-level value, whitespace runs ≤ 32) allow the same tokens
//!   at the same states, step after step.

use grammask::vocab::TokenKind;
use grammask::{json::TopLevel, Whitespace};
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
    let native_cfg = JsonConfig::default()
        .with_top_level(TopLevel::AnyValue)
        .with_whitespace(Whitespace::Flexible { max_run: 32 });
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

/// Nested brackets that differ only in their closer, separated lists (first element and the
/// others), a left-recursive list, mutual recursion and a nullable tail: states that share
/// most of their structure but not their future, for the signature to tell apart.
const CONTEXTS_GBNF: &str = r#"root ::= s
s ::= "(" l ")" | "[" l "]" | "<" m ">" | "x" | "y" s | "{" n
l ::= s ("," s)*
m ::= m ";" s | s | "=" n
n ::= s "}" n? | "!" s "}"
"#;

/// The mask cache is keyed by the chart's signature of its future (see `cfg::earley`): cached
/// masks must equal recomputed ones along random walks (structure repeats a lot here, and the
/// signature deliberately equates states reached in different ways).
#[test]
fn cached_masks_equal_recomputed_masks() {
    let v = vocab();
    let names = [
        "json.gbnf",
        "arithmetic.gbnf",
        "csv.gbnf",
        "yaml_flat.gbnf",
        "chess_san.gbnf",
        "c_expr.gbnf",
        "list.gbnf",
        "contexts",
    ];
    for name in names {
        let text = if name == "contexts" { CONTEXTS_GBNF.to_string() } else { grammar(name) };
        let cached = CfgConstraint::from_gbnf(v, &text, &CfgConfig::default()).unwrap();
        let mut no_cache = CfgConfig::default();
        no_cache.engine.mask_cache = 0;
        let fresh = CfgConstraint::from_gbnf(v, &text, &no_cache).unwrap();
        let (mut a, mut b) = (TokenMask::new(v.n_vocab()), TokenMask::new(v.n_vocab()));
        for seed in 0..3u64 {
            let (mut c, mut f) = (cached.fork(), fresh.fork());
            let mut rng = seed.wrapping_add(7).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            for step in 0..40 {
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

fn signature_after(e: &CfgConstraint, text: &str) -> u64 {
    let mut e = e.fork();
    e.advance_bytes(text.as_bytes()).unwrap();
    e.chart_signature()
}

/// States with the same future share a signature (and so a cached mask) however they were
/// reached; states with different futures do not.
#[test]
fn signatures_equate_states_with_the_same_future() {
    let e =
        CfgConstraint::from_gbnf(vocab(), &grammar("json.gbnf"), &CfgConfig::default()).unwrap();
    let sig = |t: &str| signature_after(&e, t);
    // First member and later ones (the list lowering of `member (ws "," ws member)*`).
    assert_eq!(sig(r#"{"a": "#), sig(r#"{"a": 1, "b": "#));
    assert_eq!(sig(r#"{"a": 1, "b": "#), sig(r#"{"a": 1, "b": 2, "c": "#));
    assert_eq!(sig(r#"{""#), sig(r#"{"a": [], ""#));
    assert_eq!(sig("[1, "), sig("[1, 2, 3, "));
    // Minimised lexeme states: after `3` and after `10` a number goes on alike.
    assert_eq!(sig(r#"{"a": 3"#), sig(r#"{"a": 10"#));
    // Different futures.
    assert_ne!(sig("[1, "), sig("["), "`[` also allows `]`");
    assert_ne!(sig(r#"{"a": "#), sig(r#"[{"a": "#));
    assert_ne!(sig(r#"{"a": {"b": "#), sig(r#"{"a": "#));
    assert_ne!(sig(r#"{"a": 3"#), sig(r#"{"a": 0"#), "`0` takes no digit");
    assert_ne!(sig(r#"{"a": "x"#), sig(r#"["x"#));

    let c = CfgConstraint::from_gbnf(vocab(), CONTEXTS_GBNF, &CfgConfig::default()).unwrap();
    let sig = |t: &str| signature_after(&c, t);
    assert_eq!(sig("(x,"), sig("(x,x,"));
    assert_eq!(sig("<x;"), sig("<x;x;"));
    assert_ne!(sig("(x,"), sig("[x,"));
    assert_ne!(sig("<x;"), sig("(x,"));
    assert_ne!(sig("{x}"), sig("{!x}"), "only the first may go on with `n`");
}
