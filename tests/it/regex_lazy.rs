//! The regex constraint's lazy fallback ([`grammask::automaton::LazyDfa`]) for patterns whose
//! dense DFA is over the limits: masks equal the naive oracle (each token's bytes fed to a copy
//! of the state) and the dense engine's masks where both exist, random-logit decoding finishes
//! with outputs the `regex` crate accepts, and the per-request memory bound is a typed error.

use crate::common;

use common::{grammar_oracle, mask_diff, qwen3};
use grammask::automaton::RegexErrorKind;
use grammask::decode::{decode, DecodeConfig, RandomLogits};
use grammask::vocab::TokenKind;
use grammask::{
    ConstraintEngine, EngineErrorKind, RegexConfig, RegexConstraint, TokenId, TokenMask,
};

/// Dense DFAs over 1 MiB are refused, so these patterns take the lazy path.
fn small_dense() -> RegexConfig {
    let mut c = RegexConfig::default();
    c.dfa.max_memory = 1 << 20;
    c
}

const LAZY: &[&str] = &[
    r"(a|b)*a(a|b){20}",
    r"^[ab]*a[ab]{16}( [0-9]+)?$",
    r"(\p{Greek}|[0-9])*\p{Greek}(\p{Greek}|[0-9]){14}",
];

/// The oracle: every text token whose bytes run from the engine's state, plus EOS when accepting.
fn oracle(e: &RegexConstraint) -> TokenMask {
    grammar_oracle(qwen3(), &**e.grammar(), e.state())
}

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

#[test]
fn too_big_patterns_fall_back_to_the_lazy_dfa() {
    let v = qwen3();
    for p in LAZY {
        let e = RegexConstraint::new(v, p, &small_dense()).unwrap_or_else(|e| panic!("{p}: {e}"));
        assert!(e.grammar().is_lazy(), "{p}");
        assert_eq!(e.slice_count(), 0);
    }
    // Without the fallback the same pattern is refused, as before.
    let off = small_dense().with_lazy_max_memory(0);
    let err = RegexConstraint::new(v, LAZY[0], &off).unwrap_err();
    assert!(matches!(err.kind(), RegexErrorKind::TooBig { .. }), "{err}");
    // Look-around inside the pattern: no exact lazy liveness, so still TooBig, saying why.
    let err = RegexConstraint::new(v, r"(a|b)*a(a|b){20}$c?", &small_dense()).unwrap_err();
    assert!(err.to_string().contains("no lazy fallback"), "{err}");
}

#[test]
fn lazy_masks_equal_the_oracle() {
    let v = qwen3();
    for (k, p) in LAZY.iter().enumerate() {
        let mut e = RegexConstraint::new(v, p, &small_dense()).unwrap();
        let mut rng = Rng(k as u64 + 1);
        let mut mask = TokenMask::new(v.n_vocab());
        for step in 0..25 {
            e.fill_mask(&mut mask).unwrap();
            let want = oracle(&e);
            assert!(mask == want, "{p} step {step}: {}", mask_diff(v, &mask, &want));
            let allowed: Vec<TokenId> = mask.iter().filter(|t| !v.is_eos(*t)).collect();
            assert!(!allowed.is_empty(), "{p}: a dead end at step {step}");
            let t = allowed[rng.below(allowed.len())];
            assert!(e.allows(t));
            e.advance(t).unwrap();
        }
    }
}

#[test]
fn lazy_and_dense_masks_agree_and_rollback_restores() {
    // Small enough for a dense DFA by default; a state limit of 8 forces the lazy one.
    let v = qwen3();
    let p = r"(a|b)*a(a|b){6}(, [0-9]{1,3})?";
    let mut dense = RegexConstraint::new(v, p, &RegexConfig::default()).unwrap();
    let mut lazy_cfg = RegexConfig::default();
    lazy_cfg.dfa.max_states = 8;
    let mut lazy = RegexConstraint::new(v, p, &lazy_cfg).unwrap();
    assert!(!dense.grammar().is_lazy() && lazy.grammar().is_lazy());
    let (mut a, mut b) = (TokenMask::new(v.n_vocab()), TokenMask::new(v.n_vocab()));
    let mut rng = Rng(7);
    let mut masks = Vec::new();
    for step in 0..30 {
        dense.fill_mask(&mut a).unwrap();
        lazy.fill_mask(&mut b).unwrap();
        assert!(a == b, "step {step}: {}", mask_diff(v, &b, &a));
        masks.push(b.clone());
        let allowed: Vec<TokenId> = a.iter().filter(|t| !v.is_eos(*t)).collect();
        if allowed.is_empty() {
            break;
        }
        let t = allowed[rng.below(allowed.len())];
        dense.advance(t).unwrap();
        lazy.advance(t).unwrap();
    }
    // Rollback returns to an earlier (still cached) lazy state with the same mask.
    let n = masks.len().min(10) - 1;
    lazy.rollback(n).unwrap();
    lazy.fill_mask(&mut b).unwrap();
    assert!(b == masks[masks.len() - 1 - n]);
    // A fork starts from a fresh cache of its own.
    let mut f = lazy.fork();
    f.fill_mask(&mut b).unwrap();
    assert!(b == masks[0]);
}

#[test]
fn random_logit_decoding_finishes_with_matching_outputs() {
    let v = qwen3();
    let p = LAZY[1];
    let reference = regex_automata::meta::Regex::new(&format!("^(?:{p})$")).unwrap();
    let base = RegexConstraint::new(v, p, &small_dense()).unwrap();
    let mut stops = 0;
    for seed in 0..4 {
        let mut engine = base.fork();
        let mut model = RandomLogits::new(v, seed);
        let cfg =
            DecodeConfig::builder().max_tokens(300).temperature(0.8).seed(seed).build().unwrap();
        let out = decode(&mut model, v, Some(&mut engine), &cfg).unwrap();
        match out.finish_reason.as_str() {
            "stop" => {
                stops += 1;
                assert!(reference.is_match(&out.text), "seed {seed}: {:?}", out.content());
            }
            "length" => assert_eq!(out.tokens.len(), 300),
            other => panic!("{other}"),
        }
    }
    assert!(stops >= 2, "{stops}/4 runs finished");
}

#[test]
fn the_per_request_memory_bound_is_a_typed_error() {
    let v = qwen3();
    let cfg = small_dense().with_lazy_max_memory(16 << 10);
    let mut e = RegexConstraint::new(v, LAZY[0], &cfg).unwrap();
    let mut mask = TokenMask::new(v.n_vocab());
    let ab: Vec<TokenId> =
        v.text_tokens().filter(|(_, b)| b == b"ab" || b == b"ba").map(|(t, _)| t).collect();
    assert_eq!(ab.len(), 2);
    let mut hit = None;
    for step in 0..400 {
        match e.fill_mask(&mut mask) {
            Ok(()) => {}
            Err(err) => {
                assert!(
                    matches!(
                        err.kind(),
                        EngineErrorKind::LimitExceeded {
                            limit: "RegexConfig::lazy_max_memory",
                            ..
                        }
                    ),
                    "{err}"
                );
                hit = Some(step);
                break;
            }
        }
        if let Err(err) = e.advance(ab[step % 2]) {
            assert!(matches!(err.kind(), EngineErrorKind::LimitExceeded { .. }), "{err}");
            hit = Some(step);
            break;
        }
    }
    assert!(hit.is_some(), "16 KiB of lazy states cannot hold 400 steps");
    // A fresh request has its own budget.
    let mut f = e.fork();
    f.fill_mask(&mut mask).unwrap();
    assert!(mask.iter().any(|t| v.kind(t) == TokenKind::Text));
}
