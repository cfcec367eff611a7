//! Shared pieces of the fuzz targets: tiny vocabularies, the engine driver that checks every
//! verdict against the naive oracles, and the independent judges (serde_json, regex-automata,
//! a whole-string GBNF recogniser, the `jsonschema` crate).
//!
//! The properties (docs/fuzzing.md): no panic, no call over its budget (libFuzzer's `-timeout`
//! and `-rss_limit_mb`), every verdict equal to the oracle's.

/// The tests' independent whole-string GBNF recogniser, shared rather than copied.
#[path = "../../tests/it/common/gbnf_simple.rs"]
pub mod gbnf_simple;
pub mod schema_ast;

use arbitrary::{Arbitrary, Result, Unstructured};
use grammask::engine::CopyGrammar;
use grammask::recognizer::run_bytes;
use grammask::vocab::TokenKind;
use grammask::{ConstraintEngine, EngineErrorKind, TokenId, TokenMask, Vocabulary};
use std::time::Duration;

/// The budget of one engine call (`fill_mask`, `advance`, `rollback`, `allows`) in thread CPU
/// time, in the fuzz build (coverage instrumentation and debug assertions make it 2-3x slower
/// than a release build). Issue 19 asks for every call to be bounded to about a second.
pub const CALL_BUDGET: Duration = Duration::from_secs(1);
/// The budget of one compile (schema, regex, grammar, vocabulary) in thread CPU time.
pub const COMPILE_BUDGET: Duration = Duration::from_secs(2);

/// CPU time this thread has used: what a budget is measured in, so that a starved process on
/// a shared machine does not fail it (libFuzzer's `-timeout` is wall-clock).
pub fn thread_cpu() -> Duration {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID is always supported
    // on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    assert_eq!(rc, 0, "clock_gettime");
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Run `f`, panicking (a budget finding) when it uses more than `budget` of CPU time.
pub fn budgeted<T>(what: &str, budget: Duration, f: impl FnOnce() -> T) -> T {
    let start = thread_cpu();
    let out = f();
    let used = thread_cpu() - start;
    assert!(used <= budget, "{what} used {used:?} of CPU, over its budget of {budget:?}");
    out
}

/// Id of the EOS token in every [`tiny_vocab`]: after the 256 single bytes and the extra tokens.
pub fn eos_id(vocab: &Vocabulary) -> TokenId {
    vocab.eos_ids()[0]
}

/// A vocabulary of every single byte (ids 0..256, so any live state has a continuing token and an
/// empty mask is a dead end), then `extra` multi-byte tokens, then EOS and a second special
/// token, then two padding ids.
pub fn tiny_vocab(extra: &[Vec<u8>]) -> Vocabulary {
    let singles: Vec<[u8; 1]> = (0..=255u8).map(|b| [b]).collect();
    let mut tokens: Vec<Option<&[u8]>> = singles.iter().map(|b| Some(&b[..])).collect();
    for e in extra {
        if !e.is_empty() && e.len() <= 16 {
            tokens.push(Some(e));
        }
    }
    let eos = tokens.len() as u32;
    tokens.push(None);
    tokens.push(None);
    let n = tokens.len();
    Vocabulary::from_token_bytes(&tokens, &[eos], Some(n + 2)).expect("tiny vocabulary")
}

/// The tiny vocabulary of the schema targets (single bytes plus a few JSON pieces), built once:
/// the schema engine derives per-vocabulary classes on first use, which would otherwise cost
/// more than the input itself.
pub fn schema_vocab() -> &'static Vocabulary {
    static V: std::sync::OnceLock<Vocabulary> = std::sync::OnceLock::new();
    V.get_or_init(|| {
        tiny_vocab(&[b"\"a\"".to_vec(), b"{\"".to_vec(), b"\":".to_vec(), b"true".to_vec()])
    })
}

/// Up to 8 extra tokens of 2..=6 bytes, drawn from `alphabet` (so they are relevant to the
/// grammar under test) or from any byte.
pub fn extra_tokens(u: &mut Unstructured, alphabet: &[u8]) -> Result<Vec<Vec<u8>>> {
    let n = u.int_in_range(0..=8)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let len = u.int_in_range(2..=6)?;
        let mut t = Vec::with_capacity(len);
        for _ in 0..len {
            t.push(if alphabet.is_empty() || u.ratio(1, 8)? {
                u8::arbitrary(u)?
            } else {
                *u.choose(alphabet)?
            });
        }
        out.push(t);
    }
    Ok(out)
}

/// What the driver needs besides the [`ConstraintEngine`]: an oracle that does not use the
/// trie walk, and an independent judge of complete outputs.
pub trait Subject {
    /// The engine under test.
    fn engine(&mut self) -> &mut dyn ConstraintEngine;
    /// The naive byte-level oracle's mask at the current state: every text token whose bytes
    /// the grammar accepts one by one from here, plus EOS when the state accepts. `None` when
    /// the subject has no oracle beyond `allows`.
    fn byte_oracle(&mut self) -> Option<TokenMask>;
    /// Judge the output so far, given the engine's verdict (`accepting`: EOS allowed here).
    fn judge(&mut self, output: &[u8], accepting: bool);
}

/// A naive byte-level oracle for a `Copy`-state grammar (free-form JSON, regex).
pub fn copy_oracle<G: CopyGrammar>(vocab: &Vocabulary, g: &G, state: &G::State) -> TokenMask
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
        for &e in vocab.eos_ids() {
            m.insert(e);
        }
    }
    m
}

fn describe(vocab: &Vocabulary, m: &TokenMask, other: &TokenMask) -> String {
    let extra: Vec<String> =
        m.iter().filter(|&t| !other.contains(t)).take(5).map(|t| vocab.describe(t)).collect();
    let missing: Vec<String> =
        other.iter().filter(|&t| !m.contains(t)).take(5).map(|t| vocab.describe(t)).collect();
    format!("only in the mask: {extra:?}; only in the oracle: {missing:?}")
}

/// The outcome of a drive: how it ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// All operations ran.
    Done,
    /// An engine call hit a configured resource limit (a typed error, allowed).
    Limit,
}

/// Check every verdict at the current state; returns the mask, or `None` after a limit error.
fn check_state(
    s: &mut dyn Subject,
    mask: &mut TokenMask,
    output: &[u8],
    finished: bool,
) -> Option<()> {
    let e = s.engine();
    let vocab = e.vocab().clone();
    match budgeted("fill_mask", CALL_BUDGET, || e.fill_mask(mask)) {
        Ok(()) => {}
        Err(err) if matches!(err.kind(), EngineErrorKind::LimitExceeded { .. }) => return None,
        Err(err) => panic!("fill_mask failed: {err}"),
    }
    let n = vocab.n_vocab();
    // `allows` for every id (the sample-then-check path) agrees with the mask.
    for i in 0..n + 3 {
        let t = TokenId::from_index(i);
        let allowed = i < n && mask.contains(t);
        let allows = budgeted("allows", CALL_BUDGET, || e.allows(t));
        assert_eq!(allows, allowed, "allows({}) disagrees with the mask", vocab.describe(t));
    }
    // The contract's fixed points: EOS iff accepting, no special or padding ids, no dead end.
    let eos = eos_id(&vocab);
    assert_eq!(mask.contains(eos), e.is_accepting(), "EOS in the mask vs is_accepting");
    assert_eq!(e.is_finished(), finished, "is_finished");
    for t in mask.iter() {
        assert!(
            vocab.kind(t) == TokenKind::Text || t == eos,
            "mask allows a special or padding id {t:?}"
        );
    }
    if finished {
        assert!(mask.is_none_allowed(), "mask after EOS is not empty");
    } else {
        assert!(
            !mask.is_none_allowed(),
            "dead end: empty mask after {:?}",
            String::from_utf8_lossy(output)
        );
    }
    let text_allowed = mask.iter().any(|t| t != eos);
    // Sound, not complete: the schema engine says `true` only once the root value is closed
    // (a root number that cannot grow is complete, with only EOS allowed, yet `false`).
    if e.can_only_end() {
        assert!(
            !finished && e.is_accepting() && !text_allowed,
            "can_only_end after {:?} but accepting {} and text allowed {}",
            String::from_utf8_lossy(output),
            e.is_accepting(),
            text_allowed
        );
    }
    let bools = e.step_mask(n).expect("step_mask").to_vec();
    assert!(e.step_mask(n + 1).is_err(), "step_mask of the wrong width");
    assert!((0..n).all(|i| bools[i] == mask.contains(TokenId::from_index(i))), "step_mask view");
    let accepting = e.is_accepting();
    // After EOS the mask is empty (checked above); the byte oracle knows nothing of EOS.
    if let Some(oracle) = s.byte_oracle().filter(|_| !finished) {
        assert!(
            *mask == oracle,
            "mask differs from the naive oracle after {:?}: {}",
            String::from_utf8_lossy(output),
            describe(&vocab, mask, &oracle)
        );
    }
    if !finished {
        s.judge(output, accepting);
    }
    Some(())
}

/// Run a fuzzer-chosen sequence of `advance` / `rollback` / `fill_mask` / `step_mask` calls,
/// checking after each one that the mask equals `allows` for every id and the subject's naive
/// oracle, that EOS is allowed exactly when accepting, that a live state is never a dead end,
/// that a refused call changes nothing, and that `rollback(k)` restores the mask of `k` tokens
/// ago exactly (within the history bound).
pub fn drive(s: &mut dyn Subject, u: &mut Unstructured, history: usize) -> Ended {
    let vocab = s.engine().vocab().clone();
    let n = vocab.n_vocab();
    let mut mask = TokenMask::new(n);
    // The output, and per advanced token the (output length, mask, finished) before it.
    let mut output: Vec<u8> = Vec::new();
    let mut stack: Vec<(usize, TokenMask, bool)> = Vec::new();
    let mut available = 0usize;
    let mut finished = false;
    if check_state(s, &mut mask, &output, finished).is_none() {
        return Ended::Limit;
    }
    for _ in 0..96 {
        let Ok(op) = u.int_in_range(0..=9u8) else { break };
        let before = mask.clone();
        // Set where the call must leave the state (hence the mask) exactly as it was.
        let mut unchanged = false;
        match op {
            // Mostly advance an allowed token (so walks go deep), sometimes EOS.
            0..=5 => {
                let allowed: Vec<TokenId> = mask.iter().collect();
                if allowed.is_empty() {
                    break;
                }
                let Ok(&t) = u.choose(&allowed) else { break };
                let e = s.engine();
                match budgeted("advance", CALL_BUDGET, || e.advance(t)) {
                    Ok(()) => {}
                    Err(err) if matches!(err.kind(), EngineErrorKind::LimitExceeded { .. }) => {
                        return Ended::Limit;
                    }
                    Err(err) => panic!("advance of allowed {} failed: {err}", vocab.describe(t)),
                }
                stack.push((output.len(), before.clone(), finished));
                available = (available + 1).min(history);
                if vocab.is_eos(t) {
                    finished = true;
                } else {
                    output.extend_from_slice(vocab.token_bytes(t));
                }
            }
            // Any id, including refused, special, padding and out-of-range ones.
            6 | 7 => {
                let Ok(i) = u.int_in_range(0..=n + 2) else { break };
                let t = TokenId::from_index(i);
                let want = i < n && mask.contains(t);
                let e = s.engine();
                match budgeted("advance", CALL_BUDGET, || e.advance(t)) {
                    Ok(()) => {
                        assert!(want, "advance accepted {} outside the mask", vocab.describe(t));
                        stack.push((output.len(), before.clone(), finished));
                        available = (available + 1).min(history);
                        if vocab.is_eos(t) {
                            finished = true;
                        } else {
                            output.extend_from_slice(vocab.token_bytes(t));
                        }
                    }
                    Err(err) if matches!(err.kind(), EngineErrorKind::LimitExceeded { .. }) => {
                        return Ended::Limit;
                    }
                    Err(err) => {
                        assert!(!want, "advance refused {} in the mask: {err}", vocab.describe(t));
                        unchanged = true;
                    }
                }
            }
            8 => {
                let Ok(k) = u.int_in_range(0..=available + 1) else { break };
                let e = s.engine();
                match budgeted("rollback", CALL_BUDGET, || e.rollback(k)) {
                    Ok(()) => {
                        assert!(k <= available, "rollback({k}) past the history ({available})");
                        let mut restored = None;
                        for _ in 0..k {
                            restored = stack.pop();
                        }
                        available -= k;
                        if let Some((len, m, f)) = restored {
                            output.truncate(len);
                            finished = f;
                            if check_state(s, &mut mask, &output, finished).is_none() {
                                return Ended::Limit;
                            }
                            assert!(mask == m, "rollback({k}) did not restore the mask");
                            continue;
                        }
                        unchanged = true;
                    }
                    Err(err) => {
                        assert!(k > available, "rollback({k}) refused: {err}");
                        unchanged = true;
                    }
                }
            }
            // fill_mask again: the same mask (the cache and a recompute agree).
            _ => unchanged = true,
        }
        if check_state(s, &mut mask, &output, finished).is_none() {
            return Ended::Limit;
        }
        if unchanged {
            assert!(mask == before, "a refused or idempotent call changed the mask");
        }
    }
    Ended::Done
}

/// Advance `bytes` through the engine as tokens of the tiny vocabulary (greedy longest match
/// over the extra tokens, else single bytes), with every token checked against the mask first.
/// Returns how many bytes were accepted before the first refused token (or all of them) and
/// whether EOS is allowed at the end.
pub fn feed(e: &mut dyn ConstraintEngine, bytes: &[u8]) -> std::result::Result<(usize, bool), ()> {
    let vocab = e.vocab().clone();
    let mut mask = TokenMask::new(vocab.n_vocab());
    let mut i = 0;
    while i < bytes.len() {
        // Longest extra token that matches here, else the single byte.
        let mut best = TokenId::from_index(bytes[i] as usize);
        let mut best_len = 1;
        for (t, b) in vocab.text_tokens().skip(256) {
            if b.len() > best_len && bytes[i..].starts_with(b) {
                best = t;
                best_len = b.len();
            }
        }
        if budgeted("fill_mask", CALL_BUDGET, || e.fill_mask(&mut mask)).is_err() {
            return Err(());
        }
        let allowed = mask.contains(best);
        match budgeted("advance", CALL_BUDGET, || e.advance(best)) {
            Ok(()) => assert!(allowed, "advance accepted a token outside the mask"),
            Err(err) if matches!(err.kind(), EngineErrorKind::LimitExceeded { .. }) => {
                return Err(())
            }
            Err(_) => {
                assert!(!allowed, "advance refused a token in the mask");
                return Ok((i, false));
            }
        }
        i += best_len;
    }
    if e.fill_mask(&mut mask).is_err() {
        return Err(());
    }
    Ok((i, mask.contains(eos_id(&vocab))))
}

/// Is `bytes` one JSON text (RFC 8259), judged by serde_json without converting numbers (so
/// `1e400` and 30-digit integers are syntax, not range errors)? Depth is limited by serde_json's
/// recursion limit (128).
pub fn serde_json_syntax_ok(bytes: &[u8]) -> bool {
    std::str::from_utf8(bytes).is_ok()
        && serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok()
}

/// Nesting depth of a JSON text (brackets outside strings), for texts serde_json accepted.
pub fn json_depth(bytes: &[u8]) -> usize {
    let (mut depth, mut max, mut in_str, mut esc) = (0usize, 0usize, false, false);
    for &b in bytes {
        if in_str {
            if esc {
                esc = false;
            } else if b == b'\\' {
                esc = true;
            } else if b == b'"' {
                in_str = false;
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'{' | b'[' => {
                depth += 1;
                max = max.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// The longest run of JSON whitespace outside strings.
pub fn longest_ws_run(bytes: &[u8]) -> usize {
    let (mut run, mut max, mut in_str, mut esc) = (0usize, 0usize, false, false);
    for &b in bytes {
        if in_str {
            if esc {
                esc = false;
            } else if b == b'\\' {
                esc = true;
            } else if b == b'"' {
                in_str = false;
            }
            continue;
        }
        if matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            run += 1;
            max = max.max(run);
        } else {
            run = 0;
            in_str = b == b'"';
        }
    }
    max
}

/// Free-form JSON: the byte oracle runs the grammar's own steps (no trie, no slices, no cache);
/// the judge is serde_json (a complete document parses, and is an object when the top level
/// must be one).
pub struct JsonSubject {
    pub engine: grammask::JsonObjectConstraint,
    pub object_only: bool,
}

impl Subject for JsonSubject {
    fn engine(&mut self) -> &mut dyn ConstraintEngine {
        &mut self.engine
    }
    fn byte_oracle(&mut self) -> Option<TokenMask> {
        let e = &self.engine;
        Some(copy_oracle(e.vocab(), &**e.grammar(), e.state()))
    }
    fn judge(&mut self, output: &[u8], accepting: bool) {
        if accepting {
            assert!(
                serde_json_syntax_ok(output),
                "accepted non-JSON {:?}",
                String::from_utf8_lossy(output)
            );
            if self.object_only {
                assert_eq!(output.first(), Some(&b'{'), "accepted a non-object top level");
            }
        }
    }
}

/// A full-match regex judged by regex-automata's meta engine (`\A(?:p)\z`).
pub fn full_matcher(pattern: &str) -> Option<regex_automata::meta::Regex> {
    // Only patterns that parse alone: a wrapped unbalanced one would change meaning.
    regex_automata::util::syntax::parse(pattern).ok()?;
    regex_automata::meta::Regex::builder()
        .syntax(regex_automata::util::syntax::Config::new().utf8(true))
        .build(&format!(r"\A(?:{pattern})\z"))
        .ok()
}

/// A regex: the byte oracle runs the DFA (dense or lazy) byte by byte; the judge is
/// regex-automata's meta regex: EOS allowed exactly when the output matches in full.
pub struct RegexSubject {
    pub engine: grammask::RegexConstraint,
    pub judge: Option<regex_automata::meta::Regex>,
}

impl Subject for RegexSubject {
    fn engine(&mut self) -> &mut dyn ConstraintEngine {
        &mut self.engine
    }
    fn byte_oracle(&mut self) -> Option<TokenMask> {
        let e = &self.engine;
        Some(copy_oracle(e.vocab(), &**e.grammar(), e.state()))
    }
    fn judge(&mut self, output: &[u8], accepting: bool) {
        if let Some(re) = &self.judge {
            let input = regex_automata::Input::new(output).anchored(regex_automata::Anchored::Yes);
            let full = re.search(&input).is_some_and(|m| m.end() == output.len());
            assert_eq!(accepting, full, "regex verdict on {:?}", String::from_utf8_lossy(output));
        }
    }
}

/// A GBNF grammar: the byte oracle feeds each token's bytes to a copy of the Earley chart; the
/// judge is the independent whole-string recogniser [`gbnf_simple::Simple`] on the AST.
pub struct CfgSubject {
    pub engine: grammask::CfgConstraint,
    pub judge: Option<gbnf_simple::Simple>,
}

impl Subject for CfgSubject {
    fn engine(&mut self) -> &mut dyn ConstraintEngine {
        &mut self.engine
    }
    fn byte_oracle(&mut self) -> Option<TokenMask> {
        let e = &self.engine;
        let vocab = e.vocab().clone();
        let mut m = TokenMask::new(vocab.n_vocab());
        for (t, b) in vocab.text_tokens() {
            let mut c = e.fork_at();
            if !b.is_empty() && c.advance_bytes(b).is_ok() {
                m.insert(t);
            }
            if c.overflowed() {
                return None;
            }
        }
        if e.is_accepting() {
            for &x in vocab.eos_ids() {
                m.insert(x);
            }
        }
        Some(m)
    }
    fn judge(&mut self, output: &[u8], accepting: bool) {
        if let Some(simple) = &self.judge {
            if output.len() <= 24 {
                assert_eq!(
                    accepting,
                    simple.accepts(output),
                    "GBNF verdict on {:?}",
                    String::from_utf8_lossy(output)
                );
            }
        }
    }
}

/// A JSON Schema: the byte oracle pushes each token's bytes through the schema runtime on the
/// current state (no trie walk, no fast string/number masks, no cache); the judge is the
/// `jsonschema` crate on complete documents.
pub struct SchemaSubject {
    pub engine: grammask::SchemaConstraint,
    pub validator: Option<jsonschema::Validator>,
}

impl Subject for SchemaSubject {
    fn engine(&mut self) -> &mut dyn ConstraintEngine {
        &mut self.engine
    }
    fn byte_oracle(&mut self) -> Option<TokenMask> {
        let vocab = self.engine.vocab().clone();
        let mut m = TokenMask::new(vocab.n_vocab());
        for (t, b) in vocab.text_tokens() {
            if !b.is_empty() && self.engine.accepts_bytes(b) {
                m.insert(t);
            }
        }
        if self.engine.is_accepting() {
            for &x in vocab.eos_ids() {
                m.insert(x);
            }
        }
        Some(m)
    }
    fn judge(&mut self, output: &[u8], accepting: bool) {
        if !accepting {
            return;
        }
        let text = std::str::from_utf8(output).expect("accepted output is UTF-8");
        assert!(serde_json_syntax_ok(output), "accepted non-JSON {text:?}");
        if let Some(v) = &self.validator {
            if let Ok(value) = serde_json::from_str::<serde_json::Value>(text) {
                if !imprecise(text) {
                    assert!(
                        v.is_valid(&value),
                        "accepted an instance the validator refuses: {text}"
                    );
                }
            }
        }
    }
}

/// Numbers the validator's f64 arithmetic cannot judge exactly: long digit runs, exponents.
pub fn imprecise(text: &str) -> bool {
    let mut run = 0;
    for b in text.bytes() {
        if b.is_ascii_digit() {
            run += 1;
            if run >= 15 {
                return true;
            }
        } else if b != b'.' {
            run = 0;
        }
    }
    text.bytes()
        .zip(text.bytes().skip(1))
        .any(|(a, b)| a.is_ascii_digit() && matches!(b, b'e' | b'E'))
}
