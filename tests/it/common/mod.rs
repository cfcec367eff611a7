//! Helpers shared by the integration tests: the embedded vocabulary (loaded once), the naive
//! mask oracles (through `allows`, and through a `Copy`-state grammar's own steps), token-trace rendering (`‧` token boundary, `✖` refused, `≺EOS≻`), and an
//! independent whole-string GBNF recogniser ([`gbnf_simple`]).
#![allow(dead_code)]

use grammask::engine::CopyGrammar;
use grammask::recognizer::run_bytes;
use grammask::{ConstraintEngine, TokenId, TokenMask, Vocabulary};
use std::sync::OnceLock;

pub mod gbnf_simple;
#[allow(unused_imports)]
pub use gbnf_simple::Simple;

/// The embedded Qwen3 vocabulary, loaded once per test binary.
pub fn qwen3() -> &'static Vocabulary {
    static V: OnceLock<Vocabulary> = OnceLock::new();
    V.get_or_init(|| Vocabulary::embedded().expect("embedded vocabulary loads"))
}

/// `a‧b‧c` rendering of tokens, with `✖` before a refused one and `≺EOS≻` for EOS.
pub fn trace(vocab: &Vocabulary, tokens: &[TokenId], refused: Option<usize>) -> String {
    let mut s = String::new();
    for (i, &t) in tokens.iter().enumerate() {
        if i > 0 {
            s.push('‧');
        }
        if refused == Some(i) {
            s.push('✖');
        }
        if vocab.is_eos(t) {
            s.push_str("≺EOS≻");
        } else {
            s.push_str(&String::from_utf8_lossy(vocab.token_bytes(t)).escape_debug().to_string());
        }
    }
    s
}

/// The naive oracle: the set of tokens an engine allows, found by asking `allows` (which runs
/// the token's bytes through a copy of the state) for every id.
pub fn oracle_mask(engine: &dyn ConstraintEngine) -> TokenMask {
    let n = engine.vocab().n_vocab();
    let mut m = TokenMask::new(n);
    for i in 0..n {
        let t = TokenId(i as u32);
        if engine.allows(t) {
            m.insert(t);
        }
    }
    m
}

/// The naive oracle for a `Copy`-state grammar, independent of the engine: every text token
/// whose bytes run through the grammar from `state`, plus EOS where `state` accepts.
pub fn grammar_oracle<G: CopyGrammar>(vocab: &Vocabulary, g: &G, state: &G::State) -> TokenMask
where
    G::State: Eq + std::hash::Hash + Send + Sync + std::fmt::Debug,
{
    let mut m = TokenMask::new(vocab.n_vocab());
    for (t, b) in vocab.text_tokens() {
        if !b.is_empty() && run_bytes(g, state, b).is_some() {
            m.insert(t);
        }
    }
    if g.is_accepting(state) {
        for &x in vocab.eos_ids() {
            m.insert(x);
        }
    }
    m
}

/// Describe the difference between two masks (first few ids each way).
pub fn mask_diff(vocab: &Vocabulary, fast: &TokenMask, oracle: &TokenMask) -> String {
    let extra: Vec<String> =
        fast.iter().filter(|&t| !oracle.contains(t)).take(5).map(|t| vocab.describe(t)).collect();
    let missing: Vec<String> =
        oracle.iter().filter(|&t| !fast.contains(t)).take(5).map(|t| vocab.describe(t)).collect();
    format!("allowed but refused by the oracle: {extra:?}; refused but allowed by the oracle: {missing:?}")
}

/// Walk `tokens` through `engine`, checking every token is in the mask. Returns the index of
/// the first refused token, or `None` when all pass; `eos` says whether EOS is allowed at the end.
pub fn walk(engine: &mut dyn ConstraintEngine, tokens: &[TokenId]) -> (Option<usize>, bool) {
    let vocab = engine.vocab().clone();
    let mut mask = TokenMask::new(vocab.n_vocab());
    for (i, &t) in tokens.iter().enumerate() {
        engine.fill_mask(&mut mask).unwrap();
        let in_mask = mask.contains(t);
        let advanced = engine.advance(t).is_ok();
        assert_eq!(in_mask, advanced, "mask and advance disagree on {}", vocab.describe(t));
        if !advanced {
            return (Some(i), false);
        }
    }
    engine.fill_mask(&mut mask).unwrap();
    let eos = vocab.eos_ids().iter().any(|&e| mask.contains(e));
    assert_eq!(eos, engine.is_accepting());
    (None, eos)
}

/// Walk `doc` token by token through two CFG engines of one grammar (built with different
/// options), comparing every mask and the final one; the document must be accepted.
pub fn cfg_masks_agree(
    v: &Vocabulary,
    name: &str,
    a: &mut grammask::CfgConstraint,
    b: &mut grammask::CfgConstraint,
    doc: &str,
) {
    let mut m1 = TokenMask::new(v.n_vocab());
    let mut m2 = TokenMask::new(v.n_vocab());
    let toks = v.encode(doc).unwrap();
    for (i, &t) in toks.iter().enumerate() {
        a.fill_mask(&mut m1).unwrap();
        b.fill_mask(&mut m2).unwrap();
        assert!(
            m1 == m2,
            "{name} step {i} after {:?}: {} tokens from the first engine, {} from the second; {}",
            String::from_utf8_lossy(&a.output_bytes()),
            m1.count(),
            m2.count(),
            mask_diff(v, &m1, &m2)
        );
        assert!(m1.contains(t), "{name} step {i}: the document's token {} refused", v.describe(t));
        a.advance(t).unwrap();
        b.advance(t).unwrap();
    }
    a.fill_mask(&mut m1).unwrap();
    b.fill_mask(&mut m2).unwrap();
    assert!(m1 == m2, "{name}: final masks differ; {}", mask_diff(v, &m1, &m2));
    assert!(a.is_accepting(), "{name}: document not accepted");
}
