//! Thinking models on the embedded Qwen3 tokenizer, golden-token style: the replay model
//! proposes a reasoning block and a JSON answer; the splitter routes them, the thinking budget
//! injects `</think>` exactly once at the right step, and the gated JSON engine constrains only
//! the answer.

use crate::common;

use grammask::decode::{
    decode, DecodeConfig, RandomLogits, ReplayModel, ThinkConfig, ThinkGate, ThinkMarkers,
};
use grammask::{ConstraintEngine, JsonConfig, JsonObjectConstraint, TokenId, TokenMask};

const REASONING: &str =
    "\nThe user wants a person as JSON. Ada Lovelace, born 1815, so: name and year.\n";
const ANSWER: &str = "\n\n{\"name\": \"Ada\", \"born\": 1815}";

/// The generation after a prompt whose template prefilled `<think>`.
fn doc() -> Vec<TokenId> {
    let vocab = common::qwen3();
    let text = format!("{REASONING}</think>{ANSWER}");
    vocab.encode(&text).unwrap()
}

fn markers() -> ThinkMarkers {
    ThinkMarkers::from_vocab(common::qwen3()).unwrap()
}

fn gated() -> ThinkGate<JsonObjectConstraint> {
    let vocab = common::qwen3();
    ThinkGate::new(
        Box::new(JsonObjectConstraint::new(vocab, &JsonConfig::default()).unwrap()),
        markers(),
    )
}

fn run(budget: Option<usize>, logprobs: usize) -> grammask::decode::Generation {
    let vocab = common::qwen3();
    let mut engine = gated();
    let mut model = ReplayModel::new(vocab, doc());
    let cfg = DecodeConfig::builder()
        .max_tokens(200)
        .think(ThinkConfig { markers: None, starts_open: true, budget })
        .logprobs(logprobs)
        .build()
        .unwrap();
    decode(&mut model, vocab, Some(&mut engine), &cfg).unwrap()
}

#[test]
fn markers_are_added_text_tokens_in_qwen3() {
    let vocab = common::qwen3();
    let m = markers();
    assert_eq!(vocab.token_bytes(m.close), b"</think>");
    assert_eq!(vocab.token_bytes(m.open), b"<think>");
    let d = doc();
    assert_eq!(d.iter().filter(|&&t| t == m.close).count(), 1, "`</think>` is one token");
}

#[test]
fn without_a_budget_reasoning_and_content_are_split() {
    let out = run(None, 0);
    let m = markers();
    let mut expected = doc();
    expected.push(*common::qwen3().eos_ids().first().unwrap());
    // The answer's last token closes the document; EOS follows (forced: only EOS can follow).
    assert_eq!(&out.tokens[..expected.len() - 1], &expected[..expected.len() - 1]);
    assert_eq!(out.finish_reason.as_str(), "stop");
    assert_eq!(out.reasoning_content(), REASONING);
    assert_eq!(out.content(), ANSWER);
    assert_eq!(out.counters.forced_think_close, 0);
    assert_eq!(out.tokens.iter().filter(|&&t| t == m.close).count(), 1);
    let v: serde_json::Value = serde_json::from_str(out.content().trim()).unwrap();
    assert_eq!(v["born"], 1815);
    // The reasoning was unconstrained, the answer constrained.
    let reasoning_tokens = doc().iter().position(|&t| t == m.close).unwrap();
    assert!(out.counters.unconstrained_steps > reasoning_tokens);
}

#[test]
fn a_budget_injects_the_close_exactly_once_at_the_right_step() {
    let m = markers();
    let d = doc();
    for budget in [0usize, 1, 5, 12] {
        let out = run(Some(budget), 3);
        let trace = common::trace(common::qwen3(), &out.tokens, None);
        // Exactly `budget` reasoning tokens, the model's own; then the forced close.
        assert_eq!(&out.tokens[..budget], &d[..budget], "budget {budget}: {trace}");
        assert_eq!(out.tokens[budget], m.close, "budget {budget}: {trace}");
        assert_eq!(out.tokens.iter().filter(|&&t| t == m.close).count(), 1, "{trace}");
        assert_eq!(out.counters.forced_think_close, 1);
        assert!(out.timings[budget].forced);
        // The forced token carries no logprobs; sampled ones do.
        assert_eq!(out.logprobs.len(), out.tokens.len());
        assert!(out.logprobs[budget].is_none());
        for (l, t) in out.logprobs.iter().zip(&out.timings) {
            assert_eq!(l.is_some(), !t.forced);
        }
        // Reasoning holds exactly the first `budget` pieces.
        let vocab = common::qwen3();
        let pieces: Vec<u8> =
            d[..budget].iter().flat_map(|&t| vocab.token_bytes(t).to_vec()).collect();
        assert_eq!(out.reasoning, pieces);
        // The answer after `</think>` conforms.
        assert_eq!(out.finish_reason.as_str(), "stop", "{trace}");
        let v: serde_json::Value = serde_json::from_str(out.content().trim())
            .unwrap_or_else(|e| panic!("budget {budget}: {e}: {trace}"));
        assert_eq!(v["name"], "Ada");
    }
}

#[test]
fn a_budget_the_model_stays_within_never_fires() {
    let out = run(Some(1000), 0);
    assert_eq!(out.counters.forced_think_close, 0);
    assert_eq!(out.reasoning_content(), REASONING);
    assert_eq!(out.content(), ANSWER);
}

#[test]
fn random_thinking_then_a_constrained_answer() {
    let vocab = common::qwen3();
    let mut finished = 0;
    for seed in 0..3 {
        let mut engine = gated();
        let mut model = RandomLogits::new(vocab, seed);
        let cfg = DecodeConfig::builder()
            .max_tokens(300)
            .temperature(0.7)
            .seed(seed)
            .think_budget(Some(8))
            .build()
            .unwrap();
        let out = decode(&mut model, vocab, Some(&mut engine), &cfg).unwrap();
        let closes = out.tokens.iter().filter(|&&t| t == markers().close).count();
        assert_eq!(closes, 1);
        if out.finish_reason.as_str() == "stop" && out.counters.forced_think_close == 1 {
            finished += 1;
            let v: serde_json::Value = serde_json::from_str(out.content().trim())
                .unwrap_or_else(|e| panic!("seed {seed}: {e}: {:?}", out.content()));
            assert!(v.is_object());
        }
    }
    assert!(finished >= 1);
}

#[test]
fn the_gate_masks_only_eos_while_thinking_and_rolls_back_across_the_close() {
    let vocab = common::qwen3();
    let mut gate = gated();
    let d = doc();
    let close_at = d.iter().position(|&t| t == markers().close).unwrap();
    assert!(!gate.wants_mask());
    let mut mask = TokenMask::new(vocab.n_vocab());
    gate.fill_mask(&mut mask).unwrap();
    // Everything but EOS: the answer the constraint describes is still pending.
    assert_eq!(mask.count(), vocab.n_tokens() - vocab.eos_ids().len());
    assert!(vocab.eos_ids().iter().all(|&e| !mask.contains(e)));
    for &t in &d[..close_at + 3] {
        gate.advance(t).unwrap();
    }
    assert!(gate.wants_mask());
    let mut after = TokenMask::new(vocab.n_vocab());
    gate.fill_mask(&mut after).unwrap();
    assert!(after.count() < vocab.n_tokens());
    // Undo the close and two answer tokens: thinking again, everything allowed.
    gate.rollback(3).unwrap();
    assert!(gate.is_thinking());
    assert!(!gate.wants_mask());
    for &t in &d[close_at..close_at + 3] {
        gate.advance(t).unwrap();
    }
    let mut again = TokenMask::new(vocab.n_vocab());
    gate.fill_mask(&mut again).unwrap();
    assert_eq!(again, after);
    assert!(gate.rollback(1000).is_err());
}

#[test]
fn the_splitter_opens_on_the_marker_when_the_prompt_did_not() {
    use grammask::decode::think::Channel;
    use grammask::decode::ThinkSplitter;
    let m = ThinkMarkers { open: TokenId(1), close: TokenId(2) };
    let mut s = ThinkSplitter::new(m, false, Some(0));
    let (mut r, mut c) = (Vec::new(), Vec::new());
    assert!(!s.take_force_close(), "no budget use before the block opens");
    assert_eq!(s.push(TokenId(7), b"x", &mut r, &mut c), Channel::Content);
    assert_eq!(s.push(m.open, b"<think>", &mut r, &mut c), Channel::Marker);
    assert!(s.is_thinking());
    assert!(s.take_force_close(), "budget 0: close right after the opening");
    assert_eq!(s.push(m.close, b"</think>", &mut r, &mut c), Channel::Marker);
    assert_eq!(s.push(TokenId(8), b"z", &mut r, &mut c), Channel::Content);
    assert!(r.is_empty());
    assert_eq!(c, b"xz");
    // Without a budget nothing is ever latched.
    let mut s = ThinkSplitter::new(m, true, None);
    for _ in 0..1000 {
        s.push(TokenId(9), b"y", &mut r, &mut c);
        assert!(!s.take_force_close());
    }
    assert_eq!(s.reasoning_pieces(), 1000);
}

#[test]
fn a_boxed_engine_can_be_gated_and_boxed_again() {
    // The CLI holds `Box<dyn ConstraintEngine>`; the gate takes it and is one itself.
    let vocab = common::qwen3();
    let inner: Box<dyn ConstraintEngine> =
        Box::new(JsonObjectConstraint::new(vocab, &JsonConfig::default()).unwrap());
    let mut engine: Box<dyn ConstraintEngine> = Box::new(ThinkGate::new(inner, markers()));
    let mut model = ReplayModel::new(vocab, doc());
    let cfg = DecodeConfig::builder().max_tokens(200).think_budget(Some(3)).build().unwrap();
    let out = decode(&mut model, vocab, Some(engine.as_mut()), &cfg).unwrap();
    assert_eq!(out.counters.forced_think_close, 1);
    assert_eq!(out.content(), ANSWER);
}
