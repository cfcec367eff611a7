//! Position masks (`CfgConfig::position_masks`): the part of a CFG mask that does not depend on
//! what came before the last Earley set, kept per position and shared by every engine of a
//! grammar, plus a walk of the trie nodes below which it does. Masks with them must equal
//! masks without them at every step, in particular where one position comes back under
//! another context (a member value one object deeper, an element of an array inside an
//! array, a statement inside a nested block): the tokens that close more than the position's
//! own rule (`"x"}]`, `1}}`, `; }`) are allowed in one context and refused in the other.

use grammask::engine::EngineOptions;
use grammask::{CfgConfig, CfgConstraint, ConstraintEngine, TokenId, TokenMask, Vocabulary};
use std::sync::OnceLock;

fn vocab() -> &'static Vocabulary {
    static V: OnceLock<Vocabulary> = OnceLock::new();
    V.get_or_init(|| Vocabulary::embedded().unwrap())
}

fn grammar(name: &str) -> String {
    std::fs::read_to_string(format!("{}/grammars/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// No per-engine or shared mask cache and no build-time warm-up: every mask is computed (or
/// taken from a position mask a request kept).
fn config(positions: usize) -> CfgConfig {
    CfgConfig::default()
        .with_position_masks(positions)
        .with_warm_positions(0)
        .with_engine(EngineOptions::default().with_mask_cache(0).with_shared_masks(0))
}

fn pick(mask: &TokenMask, v: &Vocabulary, rng: &mut u64) -> Option<TokenId> {
    let allowed: Vec<TokenId> = mask.iter().filter(|t| !v.is_eos(*t)).collect();
    if allowed.is_empty() {
        return None;
    }
    *rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    Some(allowed[(*rng >> 33) as usize % allowed.len()])
}

/// Replay `doc` through an engine with position masks and one without, comparing every mask.
fn compare(name: &str, with: &CfgConstraint, without: &CfgConstraint, doc: &str) {
    crate::common::cfg_masks_agree(vocab(), name, &mut with.fork(), &mut without.fork(), doc);
}

#[test]
fn position_masks_keep_masks_where_a_position_returns_under_another_context() {
    let docs: [(&str, &[&str]); 3] = [
        (
            "json.gbnf",
            &[
                r#"{"a": {"b": 1, "c": {"d": "x"}}, "e": [{"f": 2}, [3, [4, {"g": "y"}]]], "h": "z"}"#,
                r#"[[["a"], {"b": [1, 2]}], {"c": {"d": {"e": null}}}, "f", 5]"#,
                r#"{"k": [true, false, {"m": [[], {}]}], "n": {"o": [1.5e3, "p\"q"]}}"#,
            ],
        ),
        (
            "c_expr.gbnf",
            &[
                "int total = 0;\nwhile (i < n) {\n  if (x) { total += values[i]; }\n  i = i + 1;\n}\nreturn total;",
                "if (a) { if (b) { return c; } x = (y + (z * w)); }\nreturn -x;",
            ],
        ),
        (
            "sql_select.gbnf",
            &["SELECT a, COUNT(*) FROM t WHERE (x = 1 AND (y > 2 OR z IS NULL)) GROUP BY a ORDER BY a DESC LIMIT 3;"],
        ),
    ];
    for (name, docs) in docs {
        let text = grammar(name);
        let with = CfgConstraint::from_gbnf(vocab(), &text, &config(512)).unwrap();
        let without = CfgConstraint::from_gbnf(vocab(), &text, &config(0)).unwrap();
        // Twice: the second pass meets every position with its mask kept.
        for round in 0..2 {
            for (k, doc) in docs.iter().enumerate() {
                compare(&format!("{name} doc {k} round {round}"), &with, &without, doc);
            }
        }
        // Position masks computed before any request, each from the first chart that reached
        // its position (`warm_positions`), and a cap small enough that entries are evicted.
        let warm_cfg = config(64)
            .with_warm_positions(100_000)
            .with_warm_time(std::time::Duration::from_secs(600));
        let warm = CfgConstraint::from_gbnf(vocab(), &text, &warm_cfg).unwrap();
        assert!(warm.position_mask_count() > 0, "{name}: nothing warmed");
        for (k, doc) in docs.iter().enumerate() {
            compare(&format!("{name} doc {k} warmed"), &warm, &without, doc);
        }
        assert_eq!(without.position_mask_count(), 0);
        if name == "json.gbnf" {
            assert!(with.position_mask_count() > 0, "{name}: no position mask kept");
        }
    }
}

/// By default a grammar's first positions are warmed when it is built
/// (`CfgConfig::warm_positions`, 128), within `CfgConfig::warm_time`: none with no time.
#[test]
fn the_first_positions_are_warmed_by_default_within_the_time_given() {
    let text = grammar("json.gbnf");
    let warmed = CfgConstraint::from_gbnf(vocab(), &text, &CfgConfig::default()).unwrap();
    assert!(warmed.position_mask_count() > 0, "nothing warmed by default");
    let none = CfgConfig::default().with_warm_time(std::time::Duration::ZERO);
    let cold = CfgConstraint::from_gbnf(vocab(), &text, &none).unwrap();
    assert_eq!(cold.position_mask_count(), 0);
}

#[test]
fn position_masks_keep_masks_along_random_walks() {
    // Seeded random documents through the JSON and C grammars: deep nesting comes from the
    // walk itself, and every engine of a grammar shares the positions the earlier ones kept.
    let v = vocab();
    for name in ["json.gbnf", "c_expr.gbnf", "arithmetic.gbnf"] {
        let text = grammar(name);
        let with = CfgConstraint::from_gbnf(v, &text, &config(256)).unwrap();
        let without = CfgConstraint::from_gbnf(v, &text, &config(0)).unwrap();
        let mut m1 = TokenMask::new(v.n_vocab());
        let mut m2 = TokenMask::new(v.n_vocab());
        for seed in 0..12u64 {
            let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            let (mut a, mut b) = (with.fork(), without.fork());
            for step in 0..60 {
                a.fill_mask(&mut m1).unwrap();
                b.fill_mask(&mut m2).unwrap();
                assert!(
                    m1 == m2,
                    "{name} seed {seed} step {step} after {:?}: {}",
                    String::from_utf8_lossy(&a.output_bytes()),
                    crate::common::mask_diff(v, &m1, &m2)
                );
                let Some(t) = pick(&m1, v, &mut rng) else { break };
                a.advance(t).unwrap();
                b.advance(t).unwrap();
            }
        }
    }
}
