//! (6) `advance` / `rollback` / `fill_mask` / `step_mask` sequences against the naive oracle on
//! tiny vocabularies, for the free-form JSON, regex and GBNF engines: after every call the mask
//! equals `allows` for every id and the byte-level oracle (the grammar's own steps on each
//! token's bytes), EOS is allowed exactly when the independent judge (serde_json, regex-automata,
//! a whole-string GBNF recogniser) says the output is complete, and a refused call changes
//! nothing. Then a fuzzer-chosen document: every prefix of a document the judge accepts is
//! accepted by the engine.
#![no_main]
use arbitrary::{Arbitrary, Unstructured};
use grammask::json::TopLevel;
use grammask::{
    CfgConfig, CfgConstraint, EngineOptions, JsonConfig, JsonObjectConstraint, RegexConfig,
    RegexConstraint, Whitespace,
};
use grammask_fuzz::gbnf_simple::Simple;
use grammask_fuzz::schema_ast::Inst;
use grammask_fuzz::{budgeted, COMPILE_BUDGET};
use grammask_fuzz::{
    drive, extra_tokens, feed, full_matcher, json_depth, longest_ws_run, serde_json_syntax_ok,
    tiny_vocab, CfgSubject, JsonSubject, RegexSubject,
};
use libfuzzer_sys::fuzz_target;

/// Regex pieces: small, so their languages are small enough for a walk to reach accepting.
const ATOMS: &[&str] = &[
    "a", "b", "ab", "[a-c]", "[^a]", ".", "é", "[α-ω]", r"\d", "x?", "(a|bc)", "😀", r"\n",
    "[0-9]{2}", "(ab)*", "c+",
];

/// A member of each atom's language, per seed bit (the reverse check: a member is accepted).
const ATOM_MEMBERS: &[[&str; 2]] = &[
    ["a", "a"],
    ["b", "b"],
    ["ab", "ab"],
    ["b", "c"],
    ["z", "é"],
    ["q", " "],
    ["é", "é"],
    ["β", "ω"],
    ["7", "0"],
    ["", "x"],
    ["a", "bc"],
    ["😀", "😀"],
    ["\n", "\n"],
    ["42", "09"],
    ["", "abab"],
    ["c", "ccc"],
];

/// xorshift64: the choices of a sampled member.
fn next(r: &mut u64) -> u64 {
    *r ^= *r << 13;
    *r ^= *r >> 7;
    *r ^= *r << 17;
    *r
}

#[derive(Arbitrary, Debug)]
enum Re {
    Atom(u8),
    Cat(Box<Re>, Box<Re>),
    Alt(Box<Re>, Box<Re>),
    Star(Box<Re>),
    Opt(Box<Re>),
    Rep(Box<Re>, u8, u8),
}

impl Re {
    /// A string in the language of `self.render(depth)`.
    fn sample(&self, depth: usize, r: &mut u64) -> String {
        if depth > 6 {
            return "a".into();
        }
        match self {
            Re::Atom(i) => ATOM_MEMBERS[*i as usize % ATOMS.len()][(next(r) & 1) as usize].into(),
            Re::Cat(a, b) => format!("{}{}", a.sample(depth + 1, r), b.sample(depth + 1, r)),
            Re::Alt(a, b) => {
                if next(r) & 1 == 0 {
                    a.sample(depth + 1, r)
                } else {
                    b.sample(depth + 1, r)
                }
            }
            Re::Star(a) => (0..next(r) % 3).map(|_| a.sample(depth + 1, r)).collect(),
            Re::Opt(a) => {
                if next(r) & 1 == 0 {
                    String::new()
                } else {
                    a.sample(depth + 1, r)
                }
            }
            Re::Rep(a, m, n) => {
                let (m, n) = (*m % 4, *n % 4);
                let (lo, hi) = (m.min(n) as u64, m.max(n) as u64);
                let k = lo + next(r) % (hi - lo + 1);
                (0..k).map(|_| a.sample(depth + 1, r)).collect()
            }
        }
    }

    fn render(&self, depth: usize) -> String {
        if depth > 6 {
            return "a".into();
        }
        match self {
            Re::Atom(i) => ATOMS[*i as usize % ATOMS.len()].into(),
            Re::Cat(a, b) => format!("{}{}", a.render(depth + 1), b.render(depth + 1)),
            Re::Alt(a, b) => format!("(?:{}|{})", a.render(depth + 1), b.render(depth + 1)),
            Re::Star(a) => format!("(?:{})*", a.render(depth + 1)),
            Re::Opt(a) => format!("(?:{})?", a.render(depth + 1)),
            Re::Rep(a, m, n) => {
                let (m, n) = (*m % 4, *n % 4);
                format!("(?:{}){{{},{}}}", a.render(depth + 1), m.min(n), m.max(n))
            }
        }
    }
}

/// GBNF pieces, over up to 4 rules `root`, `r1`..`r3`.
#[derive(Arbitrary, Debug)]
enum G {
    Lit(u8),
    Class(u8),
    Any,
    Ref(u8),
    Seq(Vec<G>),
    Alt(Vec<G>),
    Star(Box<G>),
    Plus(Box<G>),
    Opt(Box<G>),
    Rep(Box<G>, u8, u8),
}

impl G {
    /// The largest product of `(max + 1)` over bounded repetitions nested in one another
    /// (references count 1): how much the whole-string judge expands.
    fn rep_product(&self) -> u64 {
        match self {
            G::Seq(xs) | G::Alt(xs) => xs.iter().map(G::rep_product).max().unwrap_or(1),
            G::Star(x) | G::Plus(x) | G::Opt(x) => x.rep_product(),
            G::Rep(x, _, n) => x.rep_product().saturating_mul(u64::from(*n) + 1),
            _ => 1,
        }
    }
}

const LITS: &[&str] =
    &["\"a\"", "\"b\"", "\"ab\"", "\"\"", "\"é\"", "\"\\n\"", "\"{\"", "\"}\"", "\"x y\""];
const CLASSES: &[&str] = &["[a-c]", "[^a]", "[0-9]", "[a-zA-Z_]", "[α-ω]", "[^\\n]", "[ \\t]"];

/// A member of each literal's and class's language.
const LIT_MEMBERS: &[&str] = &["a", "b", "ab", "", "é", "\n", "{", "}", "x y"];
const CLASS_MEMBERS: &[[&str; 2]] =
    &[["a", "c"], ["b", "é"], ["0", "9"], ["Z", "_"], ["α", "ω"], ["a", " "], [" ", "\t"]];

impl G {
    /// A string in the language of `self.render(..)` with `rules` as the grammar's rules, or
    /// `None` when the derivation gets too deep (recursive rules).
    fn sample(&self, rules: &[G], depth: usize, r: &mut u64, fuel: &mut u32) -> Option<String> {
        if depth > 5 {
            return Some("a".into());
        }
        let n = rules.len().clamp(1, 4);
        Some(match self {
            G::Lit(i) => LIT_MEMBERS[*i as usize % LITS.len()].into(),
            G::Class(i) => {
                CLASS_MEMBERS[*i as usize % CLASSES.len()][(next(r) & 1) as usize].into()
            }
            G::Any => "q".into(),
            G::Ref(i) => {
                // A rule's body renders from depth 0: follow it, with fuel against recursion.
                if *fuel == 0 {
                    return None;
                }
                *fuel -= 1;
                let k = *i as usize % n;
                match rules.get(k) {
                    Some(g) => g.sample(rules, 0, r, fuel)?,
                    // Only `root` exists when there are no rules: `root ::= "a"`.
                    None => "a".into(),
                }
            }
            G::Seq(xs) if !xs.is_empty() => {
                let mut out = String::new();
                for x in xs.iter().take(4) {
                    out.push_str(&x.sample(rules, depth + 1, r, fuel)?);
                }
                out
            }
            G::Alt(xs) if !xs.is_empty() => {
                let k = (next(r) as usize) % xs.len().min(4);
                xs[k].sample(rules, depth + 1, r, fuel)?
            }
            G::Seq(_) | G::Alt(_) => String::new(),
            G::Star(x) => {
                let mut out = String::new();
                for _ in 0..next(r) % 3 {
                    out.push_str(&x.sample(rules, depth + 1, r, fuel)?);
                }
                out
            }
            G::Plus(x) => {
                let mut out = String::new();
                for _ in 0..1 + next(r) % 2 {
                    out.push_str(&x.sample(rules, depth + 1, r, fuel)?);
                }
                out
            }
            G::Opt(x) => {
                if next(r) & 1 == 0 {
                    String::new()
                } else {
                    x.sample(rules, depth + 1, r, fuel)?
                }
            }
            G::Rep(x, m, nn) => {
                let (m, nn) = (*m % 3, *nn % 4);
                let (lo, hi) = (m.min(nn) as u64, m.max(nn) as u64);
                let mut out = String::new();
                for _ in 0..lo + next(r) % (hi - lo + 1) {
                    out.push_str(&x.sample(rules, depth + 1, r, fuel)?);
                }
                out
            }
        })
    }

    fn render(&self, rules: usize, depth: usize) -> String {
        if depth > 5 {
            return "\"a\"".into();
        }
        match self {
            G::Lit(i) => LITS[*i as usize % LITS.len()].into(),
            G::Class(i) => CLASSES[*i as usize % CLASSES.len()].into(),
            G::Any => ".".into(),
            G::Ref(i) => {
                let r = *i as usize % rules;
                if r == 0 {
                    "root".into()
                } else {
                    format!("r{r}")
                }
            }
            G::Seq(xs) if !xs.is_empty() => {
                let v: Vec<String> =
                    xs.iter().take(4).map(|x| x.render(rules, depth + 1)).collect();
                format!("({})", v.join(" "))
            }
            G::Alt(xs) if !xs.is_empty() => {
                let v: Vec<String> =
                    xs.iter().take(4).map(|x| x.render(rules, depth + 1)).collect();
                format!("({})", v.join(" | "))
            }
            G::Seq(_) | G::Alt(_) => "\"\"".into(),
            G::Star(x) => format!("({})*", x.render(rules, depth + 1)),
            G::Plus(x) => format!("({})+", x.render(rules, depth + 1)),
            G::Opt(x) => format!("({})?", x.render(rules, depth + 1)),
            G::Rep(x, m, n) => {
                let (m, n) = (*m % 3, *n % 4);
                format!("({}){{{},{}}}", x.render(rules, depth + 1), m.min(n), m.max(n))
            }
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Kind {
    Json { any_value: bool, compact: bool, max_run: u8, max_depth: u8 },
    Regex { re: Re, lazy: bool },
    RegexText(String),
    Gbnf { rules: Vec<G>, lexer: bool },
}

#[derive(Arbitrary, Debug)]
struct Setup {
    kind: Kind,
    history: u8,
    cache: u8,
    slices: bool,
    /// Choices of the sampled member (the reverse check).
    seed: u64,
    /// A JSON value for the free-form JSON engine's reverse check, and its layout.
    value: Inst,
    pretty: bool,
}

/// The reverse check: `doc` is in the language (the judge said so), so the engine accepts it
/// whole, token by token, and allows EOS after it.
fn must_accept(e: &mut dyn grammask::ConstraintEngine, doc: &[u8], what: &str) {
    let Ok((n, eos)) = feed(e, doc) else { return };
    assert!(
        n == doc.len() && eos,
        "{what}: refuses {:?} after {n} bytes (EOS allowed at the end: {eos})",
        String::from_utf8_lossy(doc)
    );
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(setup) = Setup::arbitrary(&mut u) else { return };
    if std::env::var_os("FUZZ_DEBUG").is_some() {
        eprintln!("{setup:?}");
    }
    let history = setup.history as usize % 8;
    let engine_opts =
        EngineOptions::default().with_history(history).with_mask_cache(setup.cache as usize % 4);
    let alphabet: &[u8] = match &setup.kind {
        Kind::Json { .. } => b"{}[]\":,0123456789.-+eEtrufalsn \\",
        _ => b"abcxy0123456789 \n",
    };
    let Ok(extra) = extra_tokens(&mut u, alphabet) else { return };
    let vocab = tiny_vocab(&extra);
    // Every slice path for tiny vocabularies (the default builds none below 1,000 tokens).
    let slice_min = if setup.slices { 1 } else { 1_000 };
    let Ok(doc) = Vec::<u8>::arbitrary(&mut u) else { return };
    match setup.kind {
        Kind::Json { any_value, compact, max_run, max_depth } => {
            let max_run = 1 + max_run % 40;
            let max_depth = 1 + max_depth as usize % 8;
            let config = JsonConfig::default()
                .with_top_level(if any_value { TopLevel::AnyValue } else { TopLevel::Object })
                .with_whitespace(if compact {
                    Whitespace::Compact
                } else {
                    Whitespace::Flexible { max_run }
                })
                .with_max_depth(max_depth)
                .with_engine(engine_opts);
            let Ok(engine) = JsonObjectConstraint::new(&vocab, &config) else { return };
            // Documents serde_json accepts, within the config's whitespace and depth: the
            // engine must accept them whole. The fuzzer's bytes, and a rendered value.
            let value = setup.value.to_json(0);
            let rendered = if setup.pretty {
                serde_json::to_vec_pretty(&value)
            } else {
                serde_json::to_vec(&value)
            }
            .expect("serialises");
            for doc in [&doc, &rendered] {
                let ws = longest_ws_run(doc);
                let trimmed = doc.first().is_some_and(|b| !b" \t\n\r".contains(b))
                    && doc.last().is_some_and(|b| !b" \t\n\r".contains(b));
                if serde_json_syntax_ok(doc)
                    && trimmed
                    && (if compact { ws == 0 } else { ws <= max_run as usize })
                    && json_depth(doc) <= max_depth
                    && (any_value || doc[0] == b'{')
                {
                    let Ok(mut e) = JsonObjectConstraint::new(&vocab, &config) else { return };
                    must_accept(&mut e, doc, "JSON engine");
                }
            }
            let mut s = JsonSubject { engine, object_only: !any_value };
            drive(&mut s, &mut u, history);
        }
        Kind::Regex { .. } | Kind::RegexText(_) => {
            let (pattern, lazy) = match &setup.kind {
                Kind::Regex { re, lazy } => (re.render(0), *lazy),
                Kind::RegexText(p) if p.len() <= 64 => (p.clone(), false),
                _ => return,
            };
            let mut config =
                RegexConfig::default().with_engine(engine_opts).with_slice_min_tokens(slice_min);
            if lazy {
                // The lazy DFA: the dense attempt gets no memory. (`dfa.max_memory` would
                // refuse the NFA too, so no lazy DFA was ever built here.)
                config.dense_max_memory = 1;
            }
            if std::env::var_os("FUZZ_DEBUG").is_some() {
                eprintln!("pattern {pattern:?}");
            }
            let Ok(engine) = budgeted("compile", COMPILE_BUDGET, || {
                RegexConstraint::new(&vocab, &pattern, &config)
            }) else {
                return;
            };
            let judge = full_matcher(&pattern);
            let mut seed = setup.seed | 1;
            let member = match &setup.kind {
                Kind::Regex { re, .. } => re.sample(0, &mut seed).into_bytes(),
                _ => Vec::new(),
            };
            if let Some(re) = &judge {
                for doc in [&doc, &member] {
                    let input =
                        regex_automata::Input::new(doc).anchored(regex_automata::Anchored::Yes);
                    // (A sampled member the judge refuses is the sampler's mistake: skipped.)
                    if re.search(&input).is_some_and(|m| m.end() == doc.len()) {
                        must_accept(&mut engine.fork(), doc, &format!("regex {pattern:?}"));
                    }
                }
            }
            let mut s = RegexSubject { engine, judge };
            drive(&mut s, &mut u, history);
        }
        Kind::Gbnf { rules, lexer } => {
            let n = rules.len().clamp(1, 4);
            let mut text = String::new();
            for (i, r) in rules.iter().take(n).enumerate() {
                let name = if i == 0 { "root".to_owned() } else { format!("r{i}") };
                text.push_str(&format!("{name} ::= {}\n", r.render(n, 0)));
            }
            if rules.is_empty() {
                text.push_str("root ::= \"a\"\n");
            }
            let config = CfgConfig::default()
                .with_engine(engine_opts)
                .with_lexer(lexer)
                .with_slice_min_tokens(slice_min);
            if std::env::var_os("FUZZ_DEBUG").is_some() {
                eprintln!("grammar {text:?}");
            }
            let Ok(engine) = budgeted("compile", COMPILE_BUDGET, || {
                CfgConstraint::from_gbnf(&vocab, &text, &config)
            }) else {
                return;
            };
            // The whole-string judge evaluates bounded repetitions by expansion: nested ones
            // multiply (`((("a"){0,3}){2,3}){2,3}…` took 33 s of CPU for one input, all of it in
            // the judge). Past a product of 512 the judge is left out; the engine's masks are
            // still checked against the byte oracle and `allows` on every step.
            if rules.iter().take(n).map(G::rep_product).max().unwrap_or(1) > 512 {
                let mut s = CfgSubject { engine, judge: None };
                drive(&mut s, &mut u, history);
                return;
            }
            let judge = Simple::new(&text);
            let mut seed = setup.seed | 1;
            let mut fuel = 6;
            if let Some(member) =
                rules.first().and_then(|g| g.sample(&rules, 0, &mut seed, &mut fuel))
            {
                // (A sampled member the judge refuses is the sampler's mistake: skipped.)
                if member.len() <= 24 && judge.accepts(member.as_bytes()) {
                    must_accept(&mut engine.fork(), member.as_bytes(), &format!("GBNF {text:?}"));
                }
            }
            if doc.len() <= 24 && judge.accepts(&doc) {
                let mut e = engine.fork();
                let Ok((k, eos)) = feed(&mut e, &doc) else { return };
                assert!(
                    k == doc.len() && eos,
                    "GBNF {text:?} refuses {:?} after {k} bytes",
                    String::from_utf8_lossy(&doc)
                );
            }
            let mut s = CfgSubject { engine, judge: Some(judge) };
            drive(&mut s, &mut u, history);
        }
    }
});
