//! The regex constraint against the naive oracle on the embedded Qwen3 vocabulary: at random
//! reachable DFA states, the mask must equal the set of tokens whose bytes run through the DFA
//! from that state (plus EOS exactly at accepting states).

use crate::common;

use common::{grammar_oracle, qwen3};
use grammask::{ConstraintEngine, RegexConfig, RegexConstraint, TokenId, TokenMask};
use proptest::prelude::*;

const PATTERNS: &[&str] = &[
    r"[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,4}(, [a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,4})*",
    r"\(\d{3}\) \d{3}-\d{4}(; \(\d{3}\) \d{3}-\d{4}){0,3}",
    r"(X)(; X)*",
    r"\p{Greek}{1,5} [αβ]+é?",
    r"(true|false|null|-?\d+(\.\d+)?)",
    r"[^\n]{0,12}\n",
];

/// The oracle mask: every text token whose bytes run from the engine's state, plus EOS when
/// accepting.
fn oracle(engine: &RegexConstraint) -> TokenMask {
    grammar_oracle(qwen3(), &**engine.grammar(), engine.state())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]
    #[test]
    fn mask_equals_oracle(p in 0..PATTERNS.len(), seed in any::<u64>(), steps in 0usize..12) {
        let v = qwen3();
        let mut e = RegexConstraint::new(v, PATTERNS[p], &RegexConfig::default()).unwrap();
        let mut mask = TokenMask::new(v.n_vocab());
        let mut rng = seed;
        for _ in 0..steps {
            e.fill_mask(&mut mask).unwrap();
            let want = oracle(&e);
            prop_assert_eq!(&mask, &want, "pattern {} at state {:?}", PATTERNS[p], e.state());
            let allowed: Vec<TokenId> =
                mask.iter().filter(|t| !v.is_eos(*t)).collect();
            if allowed.is_empty() {
                break;
            }
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let t = allowed[(rng >> 33) as usize % allowed.len()];
            prop_assert!(e.allows(t));
            e.advance(t).unwrap();
        }
        e.fill_mask(&mut mask).unwrap();
        prop_assert_eq!(&mask, &oracle(&e));
    }
}

#[test]
fn eos_only_at_accepting_states_and_rollback() {
    let v = qwen3();
    let mut e = RegexConstraint::new(v, r"ab|abcd", &RegexConfig::default()).unwrap();
    let eos = v.eos_ids()[0];
    assert!(!e.allows(eos));
    for t in v.encode("ab").unwrap() {
        e.advance(t).unwrap();
    }
    assert!(e.is_accepting() && !e.can_only_end());
    assert!(e.allows(eos));
    let before = *e.state();
    let cd = v.encode("cd").unwrap();
    for &t in &cd {
        e.advance(t).unwrap();
    }
    assert!(e.can_only_end());
    e.rollback(cd.len()).unwrap();
    assert_eq!(*e.state(), before);
    // A refused token leaves the state unchanged.
    let x = v.encode("x").unwrap()[0];
    assert!(e.advance(x).is_err());
    assert_eq!(*e.state(), before);
}

#[test]
fn compile_errors_are_typed() {
    let v = qwen3();
    let Err(err) = RegexConstraint::new(v, r"(ab", &RegexConfig::default()) else { panic!() };
    assert!(err.to_string().contains("offset 0"), "{err}");
    let mut cfg = RegexConfig::default();
    cfg.dfa.max_memory = 1 << 20;
    // Over the dense limits: the lazy fallback (tests/regex_lazy.rs), or `TooBig` without it.
    let lazy = RegexConstraint::new(v, r"[ab]*a[ab]{24}", &cfg).unwrap();
    assert!(lazy.grammar().is_lazy());
    cfg.lazy_max_memory = 0;
    let Err(err) = RegexConstraint::new(v, r"[ab]*a[ab]{24}", &cfg) else { panic!() };
    assert!(err.to_string().contains("too big"), "{err}");
}
