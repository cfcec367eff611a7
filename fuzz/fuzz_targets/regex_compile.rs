//! (4) The regex front end on arbitrary patterns: never a panic, within budget. A pattern that
//! compiles both to the dense DFA and to the lazy fallback gives the same verdicts on a
//! fuzzer-chosen string (every prefix live or not, the whole accepted or not), and the same as
//! regex-automata's meta regex on the whole string.
#![no_main]
use arbitrary::Arbitrary;
use grammask::engine::CopyGrammar;
use grammask::recognizer::run_bytes;
use grammask::regex::RegexGrammar;
use grammask::{DfaConfig, RegexConfig};
use grammask_fuzz::{budgeted, COMPILE_BUDGET};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input {
    pattern: String,
    probe: Vec<u8>,
}

fuzz_target!(|input: Input| {
    let Input { pattern, probe } = input;
    if pattern.len() > 200 {
        return;
    }
    let dense = budgeted("compile", COMPILE_BUDGET, || {
        RegexGrammar::with_config(&pattern, &RegexConfig::default())
    });
    // Force the lazy DFA: a dense budget no real pattern fits in (the NFA keeps its own
    // limit, `dfa.max_memory`, so the lazy DFA can still be built).
    let mut small = RegexConfig::default();
    small.dfa = DfaConfig::default().with_max_states(1);
    small.dense_max_memory = 1;
    let lazy =
        budgeted("compile lazy", COMPILE_BUDGET, || RegexGrammar::with_config(&pattern, &small));
    let judge = grammask_fuzz::full_matcher(&pattern);
    let mut grammars = Vec::new();
    if let Ok(g) = &dense {
        grammars.push(g);
    }
    if let Ok(g) = &lazy {
        grammars.push(g);
    }
    let mut verdicts = Vec::new();
    for g in &grammars {
        let start = g.initial();
        // Per prefix length: live (the bytes run) and accepting.
        let mut v = Vec::new();
        for i in 0..=probe.len() {
            let s = run_bytes(*g, &start, &probe[..i]);
            v.push((s.is_some(), s.as_ref().is_some_and(|s| g.is_accepting(s))));
            if s.is_none() {
                break;
            }
        }
        if let (Some(re), Some(&(_, acc))) = (&judge, v.get(probe.len())) {
            let input = regex_automata::Input::new(&probe).anchored(regex_automata::Anchored::Yes);
            let full = re.search(&input).is_some_and(|m| m.end() == probe.len());
            assert_eq!(
                acc,
                full,
                "{} DFA vs meta regex on {:?}",
                if g.is_lazy() { "lazy" } else { "dense" },
                probe
            );
        } else if let Some(re) = &judge {
            // The probe died on the way: the meta regex must not match it in full either.
            let input = regex_automata::Input::new(&probe).anchored(regex_automata::Anchored::Yes);
            let full = re.search(&input).is_some_and(|m| m.end() == probe.len());
            assert!(!full, "DFA refuses a prefix of {:?}, which matches in full", probe);
        }
        verdicts.push(v);
    }
    if verdicts.len() == 2 {
        assert_eq!(verdicts[0], verdicts[1], "dense and lazy DFAs disagree on {:?}", probe);
    }
});
