//! Random-logit generation through every grammar of `grammars/`: seeded random tokens from the
//! engine's mask, then a bias towards closing once the output is long enough. Every finished
//! output must be accepted by the independent whole-string recogniser in `tests/common` (not by
//! the masking code), and every step's sampled token must have been in the mask.

use crate::common;

use grammask::{CfgConfig, CfgConstraint, ConstraintEngine, TokenId, TokenMask, Vocabulary};

const GRAMMARS: &[&str] = &[
    "json.gbnf",
    "json_arr.gbnf",
    "arithmetic.gbnf",
    "list.gbnf",
    "csv.gbnf",
    "sql_select.gbnf",
    "chess_san.gbnf",
    "c_expr.gbnf",
    "yaml_flat.gbnf",
    "tool_call.gbnf",
];

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // PCG-style LCG step with an xorshift output (O'Neill 2014, simplified).
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let x = self.0;
        (x ^ (x >> 22)) >> 11
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Generate one output; `None` if it did not finish within the token budget.
fn generate(engine: &mut CfgConstraint, vocab: &Vocabulary, rng: &mut Rng) -> Option<Vec<u8>> {
    let mut mask = TokenMask::new(vocab.n_vocab());
    let mut out = Vec::new();
    for step in 0..160 {
        engine.fill_mask(&mut mask).unwrap();
        let eos = vocab.eos_ids()[0];
        let closing = step >= 12;
        if mask.contains(eos) && (closing || rng.below(4) == 0) {
            engine.advance(eos).unwrap();
            return Some(out);
        }
        let allowed: Vec<TokenId> = mask.iter().filter(|t| !vocab.is_eos(*t)).collect();
        assert!(!allowed.is_empty(), "dead end after {:?}", String::from_utf8_lossy(&out));
        // Random logits over the allowed set; once closing, prefer one-byte closers/newlines.
        let t = if closing {
            let closers: Vec<TokenId> = allowed
                .iter()
                .copied()
                .filter(|t| {
                    matches!(
                        vocab.token_bytes(*t),
                        b"}" | b"]"
                            | b"\""
                            | b")"
                            | b"\n"
                            | b";"
                            | b"0"
                            | b"1"
                            | b">"
                            | b":"
                            | b" "
                    )
                })
                .collect();
            if !closers.is_empty() && rng.below(4) != 0 {
                closers[rng.below(closers.len())]
            } else {
                let short: Vec<TokenId> =
                    allowed.iter().copied().filter(|t| vocab.token_bytes(*t).len() == 1).collect();
                if short.is_empty() {
                    allowed[rng.below(allowed.len())]
                } else {
                    short[rng.below(short.len())]
                }
            }
        } else {
            allowed[rng.below(allowed.len())]
        };
        assert!(engine.allows(t));
        out.extend_from_slice(vocab.token_bytes(t));
        engine.advance(t).unwrap();
    }
    None
}

#[test]
fn random_generation_is_accepted_by_an_independent_recogniser() {
    let vocab = Vocabulary::embedded().unwrap();
    let mut report = Vec::new();
    for name in GRAMMARS {
        let text =
            std::fs::read_to_string(format!("{}/grammars/{name}", env!("CARGO_MANIFEST_DIR")))
                .unwrap();
        let simple = common::Simple::new(&text);
        let base = CfgConstraint::from_gbnf(&vocab, &text, &CfgConfig::default()).unwrap();
        let mut finished = 0;
        for seed in 0..3u64 {
            let mut rng = Rng(seed.wrapping_add(0x5EED) * 0x9E37_79B9_7F4A_7C15);
            let mut e = base.fork();
            if let Some(out) = generate(&mut e, &vocab, &mut rng) {
                finished += 1;
                assert!(
                    simple.accepts(&out),
                    "{name}: generated output refused by the independent recogniser: {:?}",
                    String::from_utf8_lossy(&out)
                );
            }
        }
        report.push(format!("{name}: {finished}/3 finished"));
        assert!(finished >= 1, "{name}: no run finished ({report:?})");
    }
    eprintln!("{}", report.join("\n"));
}
