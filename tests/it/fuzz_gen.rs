//! `grammask::fuzz` judged by an independent validator: valid instances of the MaskBench sample
//! (`tests/data/maskbench/`) and of hand-written schemas are accepted by the `jsonschema` crate,
//! near misses are rejected by it and carry the label of the keyword they break, generation
//! always finishes where the random-logit walk does not, and regex strings match their regex.

use grammask::fuzz::{FuzzConfig, FuzzErrorKind, Fuzzer};
use grammask::{Constraint, Vocabulary};
use std::collections::HashSet;
use std::path::Path;

fn judge(
    schema: &serde_json::Value,
    vocab: &Vocabulary,
    n: usize,
    k: usize,
    seed: u64,
) -> (usize, usize) {
    let compiled = Constraint::json_schema(schema).compile(vocab).expect("compiles");
    let config = FuzzConfig::default().with_n(n).with_invalid(k).with_seed(seed);
    let report = Fuzzer::new(&compiled, config).unwrap().run().unwrap();
    // Every document the byte-level walk finishes, the token-level engine accepts too (texts
    // the tokenizer normalises on encoding are spelled greedily, as a model could emit them).
    assert_eq!(report.stats.disagreements, 0, "{report}");
    let validator = jsonschema::validator_for(schema).unwrap();
    let mut distinct = HashSet::new();
    for inst in &report.instances {
        let v: serde_json::Value = serde_json::from_str(&inst.text).expect("JSON");
        assert_eq!(inst.valid, inst.violates.is_none(), "{}", inst.text);
        if inst.valid {
            assert!(
                validator.is_valid(&v),
                "valid instance rejected by jsonschema: {}\nschema {schema}",
                inst.text
            );
            // Distinct as JSON values: key order and number spelling do not make another one.
            let key = grammask::fuzz::canonical_key(&inst.text).unwrap();
            assert!(distinct.insert(key), "duplicate {}", inst.text);
        } else {
            assert!(
                !validator.is_valid(&v),
                "near miss accepted by jsonschema ({:?}): {}",
                inst.violates,
                inst.text
            );
            let x = inst.violates.as_ref().unwrap();
            assert!(x.pointer.ends_with(&format!("/{}", x.keyword)), "{x:?}");
        }
    }
    (report.n_valid(), report.n_invalid())
}

#[test]
fn maskbench_sample_instances_are_judged_right_by_jsonschema() {
    let vocab = Vocabulary::embedded().unwrap();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/maskbench");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let (mut schemas, mut valid, mut invalid) = (0, 0, 0);
    for path in files {
        let file: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let schema = &file["schema"];
        if Constraint::json_schema(schema).compile(&vocab).is_err() {
            continue;
        }
        let (v, i) = judge(schema, &vocab, 20, 5, 3);
        if schema.get("const").is_some() {
            // A root `const`: the language has one instance, and the fuzzer must find it.
            assert_eq!(v, 1, "{}", path.display());
            continue;
        }
        assert!(v >= 10, "{}: only {v} valid instances", path.display());
        schemas += 1;
        valid += v;
        invalid += i;
    }
    assert!(schemas >= 10, "{schemas} schemas compiled");
    assert!(
        valid >= schemas * 15 && invalid >= schemas * 3,
        "{valid} valid, {invalid} near misses"
    );
}

#[test]
fn near_misses_name_the_keyword_they_break() {
    let vocab = Vocabulary::embedded().unwrap();
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "id": {"type": "integer", "minimum": 1, "maximum": 100},
            "tag": {"enum": ["a", "b", "c"]},
            "name": {"type": "string", "minLength": 2, "maxLength": 8},
            "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true, "maxItems": 3}
        },
        "required": ["id", "name", "code"],
        "additionalProperties": false
    });
    let compiled = Constraint::json_schema(&schema).compile(&vocab).unwrap();
    let config = FuzzConfig::default().with_n(60).with_invalid(60).with_seed(11);
    let report = Fuzzer::new(&compiled, config).unwrap().run().unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    for inst in report.instances.iter().filter(|i| !i.valid) {
        let v: serde_json::Value = serde_json::from_str(&inst.text).unwrap();
        assert!(!validator.is_valid(&v), "{}", inst.text);
    }
    for keyword in [
        "required",
        "additionalProperties",
        "type",
        "minimum",
        "maximum",
        "pattern",
        "maxLength",
        "minLength",
    ] {
        assert!(report.violations.contains_key(keyword), "no {keyword} near miss: {report}");
    }
    let labels: HashSet<(String, String)> = report
        .instances
        .iter()
        .filter_map(|i| i.violates.as_ref().map(|v| (v.keyword.clone(), v.pointer.clone())))
        .collect();
    assert!(labels.contains(&("maximum".into(), "/properties/id/maximum".into())), "{labels:?}");
    assert!(labels.contains(&("required".into(), "/required".into())), "{labels:?}");
    // Every location of this schema (root, 5 properties, 3 enum values, the items) is reached.
    assert_eq!(report.coverage.total(), 10, "{:?}", report.coverage);
    assert_eq!(report.coverage.exercised(), 10, "{report}");
}

/// Places whose only constraint is an `enum` (no `type`), a `not`, or a `required` on a value
/// that is never an object still give the near misses asked for. Before, an `enum` gave one
/// outsider (`"zz-not-in-enum"`) per place, a `not` none, and an untyped `required` on a
/// scalar none: MaskBench's `Github_trivial---o46358` (the first schema) had 1 of 20,
/// `o23153` (the second) 14, and `Github_medium---o48406` (like the third: its root object
/// can never be valid, so every valid document is a scalar) 0.
#[test]
fn enum_not_and_untyped_required_places_give_their_near_misses() {
    let vocab = Vocabulary::embedded().unwrap();
    let schemas = [
        serde_json::json!({"oneOf": [{"enum": ["001"]}, {"enum": ["002"]}, {"enum": ["003"]}]}),
        serde_json::json!({"required": ["foo"], "properties": {"foo": {"not": {"type": "number"}}}}),
        serde_json::json!({"required": ["a"], "properties": {"a": {"type": "string",
            "oneOf": [{"type": "string"}, {"minLength": 0}]}}}),
    ];
    for schema in &schemas {
        for seed in 1..=2 {
            let (valid, invalid) = judge(schema, &vocab, 20, 20, seed);
            assert!(valid >= 3, "seed {seed}: {valid} valid for {schema}");
            assert_eq!(invalid, 20, "seed {seed}: {invalid} near misses for {schema}");
        }
    }
}

/// A schema that constrains one rare key (`Github_trivial---o78129`: only a `checksums` key
/// of 32 hex digits, whose value must be `null`): the one or two documents that have it are
/// the only bases a mutation can break, and the near misses come from them, not from the
/// many documents without any constrained place (visiting those too, one in a hundred
/// attempts reached the key: 10 near misses of 20).
#[test]
fn a_rare_constrained_place_still_gives_all_near_misses() {
    let vocab = Vocabulary::embedded().unwrap();
    let schema = serde_json::json!({"properties": {"checksums": {
        "patternProperties": {"[0-9a-f]{32}": {"type": "null"}}}}});
    for seed in 1..=2 {
        let (valid, invalid) = judge(&schema, &vocab, 100, 20, seed);
        assert_eq!(valid, 100, "seed {seed}");
        assert_eq!(invalid, 20, "seed {seed}: {invalid} near misses");
    }
}

/// `Handwritten---oneof6`: a `oneOf` of `not: {required: [x]}` and `dependencies: {x: false}`
/// refuses every object (with `x` both branches fail, without it both pass), so its valid
/// documents are the scalars and arrays, and no `type` names the objects as wrong. The
/// near misses come from the `not`: an object with `x`, which the `required` inside it
/// accepts (it gave none before).
#[test]
fn a_not_of_required_gives_objects_with_the_names() {
    let vocab = Vocabulary::embedded().unwrap();
    let schema = serde_json::json!({"oneOf": [{"not": {"required": ["x"]}}, {"dependencies": {"x": false}}]});
    let (valid, invalid) = judge(&schema, &vocab, 40, 20, 1);
    assert_eq!(valid, 40);
    assert_eq!(invalid, 20, "{invalid} near misses");
}

/// A `oneOf` one of whose branches accepts everything (an unknown keyword, as in
/// `Github_easy---o2231`'s `{"#ref": …}`): a document is valid only where the other branch
/// refuses it, no keyword but `oneOf` names what a near miss breaks, and a member taken out
/// (or a value of another type) makes the other branch match too.
#[test]
fn a_one_of_with_an_accept_all_branch_has_near_misses() {
    let vocab = Vocabulary::embedded().unwrap();
    let schema = serde_json::json!({"oneOf": [
        {"properties": {"twos": {"type": "array", "items": {"type": "object"}}}},
        {"#ref": "#/definitions/x"}
    ]});
    let (valid, invalid) = judge(&schema, &vocab, 40, 20, 1);
    assert_eq!(valid, 40);
    assert_eq!(invalid, 20, "{invalid} near misses");
}

/// Costly walks are made two at a time (`FuzzConfig::threads`), the second on another
/// thread: a run gives the same instances on one thread or two (the pairing depends on the
/// work counted, never on timing), and they are valid by the `jsonschema` crate.
#[test]
fn a_run_gives_the_same_instances_on_one_thread_or_two() {
    let vocab = Vocabulary::embedded().unwrap();
    let names: Vec<String> = (0..120).map(|i| format!("field_{i}")).collect();
    let item = serde_json::json!({
        "type": "object", "required": ["a", "b"],
        "properties": {"a": {"type": "string", "minLength": 3}, "b": {"type": "integer"}}
    });
    let props: serde_json::Map<String, serde_json::Value> =
        names.iter().map(|n| (n.clone(), item.clone())).collect();
    let schema = serde_json::json!({"type": "object", "required": names, "properties": props});
    let compiled = Constraint::json_schema(&schema).compile(&vocab).unwrap();
    let run = |threads: usize| {
        let config =
            FuzzConfig::default().with_n(24).with_invalid(4).with_seed(9).with_threads(threads);
        Fuzzer::new(&compiled, config).unwrap().run().unwrap()
    };
    let (one, two) = (run(1), run(2));
    assert!(two.stats.paired > 0, "no walk was paired: {two}");
    assert_eq!(one.stats.paired, two.stats.paired);
    let texts = |r: &grammask::fuzz::FuzzReport| {
        r.instances.iter().map(|i| (i.text.clone(), i.valid)).collect::<Vec<_>>()
    };
    assert_eq!(texts(&one), texts(&two));
    assert_eq!(one.n_valid(), 24, "{one}");
    let validator = jsonschema::validator_for(&schema).unwrap();
    for inst in &two.instances {
        let v: serde_json::Value = serde_json::from_str(&inst.text).unwrap();
        assert_eq!(validator.is_valid(&v), inst.valid, "{}", inst.text);
    }
}

/// Locations the walks rarely reach — a property four optional levels down, keys that must
/// match a 32-hex-digit pattern, an enum of 40 members — get documents aimed at them: with
/// the default aimed share, coverage is higher than with walks alone (same seed), every
/// aimed document is judged valid by the `jsonschema` crate, and the report counts them.
#[test]
fn documents_are_aimed_at_the_locations_the_walks_missed() {
    let vocab = Vocabulary::embedded().unwrap();
    let members: Vec<String> = (0..40).map(|i| format!("member-{i}")).collect();
    let schema = serde_json::json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "a": {"type": "object", "properties": {"b": {"type": "object", "properties": {
                "c": {"type": "object", "properties": {"d": {"type": "integer"}}}}}}},
            "h": {"type": "object", "additionalProperties": false,
                  "patternProperties": {"^[0-9a-f]{32}$": {"type": "null"}}},
            "e": {"enum": members}
        }
    });
    let compiled = Constraint::json_schema(&schema).compile(&vocab).unwrap();
    let run = |share: f64| {
        let config = FuzzConfig::default().with_n(40).with_seed(5).with_aim_share(share);
        Fuzzer::new(&compiled, config).unwrap().run().unwrap()
    };
    let (walks, aimed) = (run(0.0), run(0.2));
    assert_eq!(walks.stats.aimed, 0);
    assert!(aimed.stats.aimed > 0, "{aimed}");
    assert!(
        aimed.coverage.exercised() > walks.coverage.exercised(),
        "aimed {} vs walks {} of {}",
        aimed.coverage.exercised(),
        walks.coverage.exercised(),
        walks.coverage.total()
    );
    assert_eq!(aimed.n_valid(), 40);
    let validator = jsonschema::validator_for(&schema).unwrap();
    for inst in aimed.instances.iter().filter(|i| i.valid) {
        let v: serde_json::Value = serde_json::from_str(&inst.text).unwrap();
        assert!(validator.is_valid(&v), "{}", inst.text);
    }
}

/// A recursive schema whose random walk keeps opening children: every instance still finishes
/// within the byte budget, by the completion search.
#[test]
fn recursive_schemas_always_finish() {
    let vocab = Vocabulary::embedded().unwrap();
    let schema = serde_json::json!({
        "$defs": {"node": {"type": "object", "properties": {
            "name": {"type": "string", "minLength": 3},
            "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "minItems": 1}
        }, "required": ["name"]}},
        "$ref": "#/$defs/node"
    });
    let compiled = Constraint::json_schema(&schema).compile(&vocab).unwrap();
    let config = FuzzConfig::default().with_n(50).with_seed(5).with_max_bytes(512);
    let report = Fuzzer::new(&compiled, config).unwrap().run().unwrap();
    assert_eq!(report.n_valid(), 50, "{report}");
    assert_eq!(report.stats.unfinished, 0, "{report}");
    let validator = jsonschema::validator_for(&schema).unwrap();
    let mut nested = 0;
    for inst in &report.instances {
        assert!(inst.text.len() <= 512, "{}", inst.text.len());
        let v: serde_json::Value = serde_json::from_str(&inst.text).unwrap();
        assert!(validator.is_valid(&v), "{}", inst.text);
        nested += usize::from(v.get("children").is_some());
    }
    assert!(nested > 0, "no instance has children");
}

/// A language of one value (spelled many ways: `1` is also `0.0010e3`): every walk finishes,
/// by completions that end the number with the digit it needs rather than more zeros, and the
/// run stops once walks only repeat it, saying so.
#[test]
fn an_exhausted_language_stops_the_run_and_says_so() {
    let vocab = Vocabulary::embedded().unwrap();
    let schema = serde_json::json!({"allOf": [{"enum": [[1, 2, 3]]}, {"type": "array"}]});
    let compiled = Constraint::json_schema(&schema).compile(&vocab).unwrap();
    let config = FuzzConfig::default().with_n(100).with_seed(1).with_max_duplicate_run(16);
    let report = Fuzzer::new(&compiled, config).unwrap().run().unwrap();
    assert_eq!(report.n_valid(), 1, "{report}");
    assert!(report.stats.saturated && !report.stats.out_of_work, "{report}");
    assert_eq!(report.stats.unfinished, 0, "{report}");
    assert!(report.to_string().contains("the language looks exhausted"), "{report}");
    let v: serde_json::Value = serde_json::from_str(&report.instances[0].text).unwrap();
    let judge = jsonschema::validator_for(&serde_json::json!({"const": [1, 2, 3]})).unwrap();
    assert!(judge.is_valid(&v), "{v}");
}

/// One optional integer: a language without end whose walks favour `{}` and one-digit
/// integers. Before the novelty pressure (duplicates press the next walks toward more members
/// and digits) a run spent its 400 attempts on repeats and ended with about half its 100.
#[test]
fn a_large_language_of_short_values_is_not_spent_on_repeats() {
    let vocab = Vocabulary::embedded().unwrap();
    let schema = serde_json::json!({"type": "object", "additionalProperties": false,
        "properties": {"count": {"type": "integer", "minimum": 0, "maximum": 2147483647}}});
    for seed in 1..=3 {
        let (valid, _) = judge(&schema, &vocab, 100, 0, seed);
        assert!(valid >= 95, "seed {seed}: {valid} valid of 100");
    }
}

/// `Handwritten---string2` of MaskBench: a thousand characters under three patterns, whose
/// end the closing-first search could only find byte by byte (120–250k pushes a document:
/// 9–12 of 100 within the run's budget). The search now tries the string automaton's
/// shortest rest as one move, and every one of the 100 documents is judged right.
#[test]
fn a_long_patterned_string_is_finished_by_its_shortest_rest() {
    let vocab = Vocabulary::embedded().unwrap();
    let schema = serde_json::json!({"type": "string", "allOf": [
        {"pattern": "^([a-z][0-9])+$"}, {"pattern": "^((c1d3g3).{4,8}){6,6}"},
        {"pattern": "(t|8){10,10}$"}], "minLength": 1000});
    let (valid, invalid) = judge(&schema, &vocab, 100, 20, 1);
    assert_eq!((valid, invalid), (100, 20));
}

#[test]
fn a_schema_without_a_short_document_fails_honestly() {
    let vocab = Vocabulary::embedded().unwrap();
    let schema = serde_json::json!({"type": "string", "minLength": 300});
    let compiled = Constraint::json_schema(&schema).compile(&vocab).unwrap();
    let config = FuzzConfig::default().with_n(3).with_max_bytes(100).with_fit_max_bytes(false);
    let err = Fuzzer::new(&compiled, config).unwrap().run().unwrap_err();
    assert!(matches!(err.kind(), FuzzErrorKind::Unfinished { max_bytes: 100, .. }), "{err}");
}

/// Every document of this schema is over 4 kB (40 required properties of 120-character
/// strings): the default `max_bytes` is raised to fit (twice the engine's bound on a whole
/// document), where a kept limit has no document at all.
#[test]
fn the_default_byte_limit_grows_to_fit_the_shortest_documents() {
    let vocab = Vocabulary::embedded().unwrap();
    let names: Vec<String> = (0..40).map(|i| format!("property_{i:02}")).collect();
    let props: serde_json::Map<String, serde_json::Value> = names
        .iter()
        .map(|n| (n.clone(), serde_json::json!({"type": "string", "minLength": 120})))
        .collect();
    let schema = serde_json::json!({"type": "object", "properties": props, "required": names});
    let compiled = Constraint::json_schema(&schema).compile(&vocab).unwrap();
    let fuzzer = Fuzzer::new(&compiled, FuzzConfig::default().with_n(3).with_seed(2)).unwrap();
    // 40 × (13-byte name, quotes, colon, 120 characters and quotes, comma) + braces.
    assert!(fuzzer.max_bytes() >= 2 * 5400, "{}", fuzzer.max_bytes());
    let report = fuzzer.run().unwrap();
    assert_eq!(report.n_valid(), 3, "{report}");
    let judge = jsonschema::validator_for(&schema).unwrap();
    for inst in &report.instances {
        assert!(inst.text.len() > 4096 && inst.text.len() <= fuzzer.max_bytes());
        assert!(judge.is_valid(&serde_json::from_str(&inst.text).unwrap()), "{}", inst.text);
    }
    let kept = FuzzConfig::default().with_n(3).with_fit_max_bytes(false);
    let err = Fuzzer::new(&compiled, kept).unwrap().run().unwrap_err();
    assert!(matches!(err.kind(), FuzzErrorKind::Unfinished { max_bytes: 4096, .. }), "{err}");
    // The run's budget rises with the limit (4 pushes per byte of it for each instance
    // wanted) where that is more than it was, and stays as given where fitting is off.
    let low = FuzzConfig::default().with_n(3).with_invalid(1).with_max_total_work(1_000);
    let fitted = Fuzzer::new(&compiled, low.clone()).unwrap();
    assert_eq!(fitted.max_total_work(), 4 * 4 * fitted.max_bytes() as u64);
    let given = Fuzzer::new(&compiled, low.with_fit_max_total_work(false)).unwrap();
    assert_eq!(given.max_total_work(), 1_000);
    assert_eq!(given.max_bytes(), fitted.max_bytes());
}

/// The fitted limit counts bytes: 1,500 CJK characters are 4,502 bytes with their quotes,
/// over the default 4,096, though only 1,502 code points. (The work budget is raised: the walk
/// probes each byte of a CJK string, ~1M pushes a document, over the default 200,000.)
#[test]
fn the_fitted_byte_limit_counts_multi_byte_characters_as_bytes() {
    let vocab = Vocabulary::embedded().unwrap();
    let schema = serde_json::json!({"type": "string", "pattern": "^[\u{4e00}-\u{9fff}]{1500}$"});
    let compiled = Constraint::json_schema(&schema).compile(&vocab).unwrap();
    let config = FuzzConfig::default().with_n(2).with_seed(3).with_max_work(4_000_000);
    let fuzzer = Fuzzer::new(&compiled, config).unwrap();
    assert!(fuzzer.max_bytes() >= 2 * 4502, "{}", fuzzer.max_bytes());
    let report = fuzzer.run().unwrap();
    assert_eq!(report.n_valid(), 2, "{report}");
    let judge = jsonschema::validator_for(&schema).unwrap();
    for inst in &report.instances {
        assert!(inst.text.len() >= 4502, "{}", inst.text.len());
        assert!(judge.is_valid(&serde_json::from_str(&inst.text).unwrap()), "{}", inst.text);
    }
}

#[test]
fn regex_strings_match_and_near_misses_do_not() {
    let vocab = Vocabulary::embedded().unwrap();
    let pattern = r"(ab|cd)[0-9]{2,4}-[a-z]+";
    let compiled = Constraint::regex(pattern).compile(&vocab).unwrap();
    let config = FuzzConfig::default().with_n(30).with_invalid(10).with_seed(2).with_max_bytes(64);
    let report = Fuzzer::new(&compiled, config).unwrap().run().unwrap();
    let re = regex_automata::meta::Regex::new(&format!("^(?:{pattern})$")).unwrap();
    assert!(report.n_valid() >= 20 && report.n_invalid() >= 5, "{report}");
    for inst in &report.instances {
        assert_eq!(re.is_match(&inst.text), inst.valid, "{:?}", inst);
    }
}

/// The same seed gives the same instances; another seed gives others.
#[test]
fn runs_are_reproducible_by_seed() {
    let vocab = Vocabulary::embedded().unwrap();
    let schema = serde_json::json!({"type": "array", "items": {"type": "string"}});
    let compiled = Constraint::json_schema(&schema).compile(&vocab).unwrap();
    let run = |seed| {
        let config = FuzzConfig::default().with_n(10).with_seed(seed);
        let r = Fuzzer::new(&compiled, config).unwrap().run().unwrap();
        r.instances.into_iter().map(|i| i.text).collect::<Vec<_>>()
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
}

/// `Finisher` (what `grammask generate --finish-after` uses): the random-logit model past a
/// token budget is steered to the nearest end, so every generation on the MaskBench sample
/// stops with a document the `jsonschema` crate accepts, through the decode loop's own mask.
#[test]
fn generation_past_its_budget_is_steered_to_an_accepted_end() {
    use grammask::decode::models::RandomLogits;
    use grammask::decode::{decode, DecodeConfig};
    use grammask::fuzz::Finisher;
    let vocab = Vocabulary::embedded().unwrap();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/maskbench");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let after = 24;
    let (mut runs, mut steered) = (0, 0);
    for path in files {
        let file: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let schema = &file["schema"];
        let Ok(compiled) = Constraint::json_schema(schema).compile(&vocab) else { continue };
        let fuzzer = Fuzzer::new(&compiled, FuzzConfig::default()).unwrap();
        let validator = jsonschema::validator_for(schema).unwrap();
        for seed in 0..3 {
            let mut model = Finisher::new(RandomLogits::new(&vocab, seed), &fuzzer, after);
            let mut engine = compiled.engine();
            let config = DecodeConfig::builder().max_tokens(4000).seed(seed).build().unwrap();
            let out = decode(&mut model, &vocab, Some(engine.as_mut()), &config).unwrap();
            let name = path.display();
            assert_eq!(out.finish_reason.as_str(), "stop", "{name} seed {seed}");
            let doc: serde_json::Value = serde_json::from_str(&out.content())
                .unwrap_or_else(|e| panic!("{name} seed {seed}: {e}: {}", out.content()));
            assert!(validator.is_valid(&doc), "{name} seed {seed}: {}", out.content());
            runs += 1;
            steered += usize::from(out.tokens.len() > after);
        }
    }
    assert!(runs >= 30, "{runs} runs");
    assert!(steered > 0, "no run reached the budget, so none was steered");
}

/// The completion search cuts engine states it has searched already (regex and free-form
/// JSON have hashable states): strings of `[a-z]{3,}` no longer spell every letter string up
/// to the limit before the `@`.
#[test]
fn regex_completions_do_not_enumerate_loops() {
    let vocab = Vocabulary::embedded().unwrap();
    let pattern = r"[a-z]{3,}@[a-z]+\.(com|org)";
    let compiled = Constraint::regex(pattern).compile(&vocab).unwrap();
    let config = FuzzConfig::default().with_n(40).with_seed(9).with_max_work(20_000);
    let report = Fuzzer::new(&compiled, config).unwrap().run().unwrap();
    assert_eq!(report.stats.unfinished, 0, "{report}");
    assert_eq!(report.n_valid(), 40, "{report}");
    let fuzzer = Fuzzer::new(&compiled, FuzzConfig::default()).unwrap();
    let done = fuzzer.finish(b"abcdefgh").unwrap();
    let re = regex_automata::meta::Regex::new(&format!("^(?:{pattern})$")).unwrap();
    assert!(
        done.starts_with(b"abcdefgh") && re.is_match(&done),
        "{:?}",
        String::from_utf8_lossy(&done)
    );
    assert!(matches!(fuzzer.finish(b"ab@").unwrap_err().kind(), FuzzErrorKind::Refused { at: 2 }));
}

/// Times are generated without the leap second `:60`, which RFC 3339's grammar (and so the
/// engine) allows but the validators users judge with refuse: every `date-time` and `time`
/// instance passes the `jsonschema` crate's format check.
#[test]
fn date_times_pass_the_validators_format_check() {
    let vocab = Vocabulary::embedded().unwrap();
    for format in ["date-time", "time"] {
        let schema = serde_json::json!({"type": "string", "format": format});
        let compiled = Constraint::json_schema(&schema).compile(&vocab).unwrap();
        let config = FuzzConfig::default().with_n(150).with_seed(4);
        let report = Fuzzer::new(&compiled, config).unwrap().run().unwrap();
        assert!(report.n_valid() >= 140, "{format}: {report}");
        let validator = jsonschema::options().should_validate_formats(true).build(&schema).unwrap();
        for inst in &report.instances {
            let v: serde_json::Value = serde_json::from_str(&inst.text).unwrap();
            assert!(validator.is_valid(&v), "{format}: {}", inst.text);
        }
    }
}

/// An `integer` at `0.63020502137` can only end through an exponent (`e11` makes it whole):
/// the completion search tries `e` before stringing on more digits, so it finishes within a
/// small work budget (before, it spelled every longer digit string first and ran out).
#[test]
fn a_fraction_under_integer_finishes_through_its_exponent() {
    let vocab = Vocabulary::embedded().unwrap();
    let schema = serde_json::json!({"type": "object", "properties": {"w": {"type": "integer"}},
        "required": ["w"], "additionalProperties": false});
    let compiled = Constraint::json_schema(&schema).compile(&vocab).unwrap();
    let fuzzer = Fuzzer::new(&compiled, FuzzConfig::default().with_max_work(5_000)).unwrap();
    let done = fuzzer.finish(br#"{"w":0.63020502137"#).unwrap();
    let text = String::from_utf8(done).unwrap();
    assert!(text.starts_with(r#"{"w":0.63020502137"#) && text.contains('e'), "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(jsonschema::validator_for(&schema).unwrap().is_valid(&v), "{text}");
}

/// A run is bounded by its total work budget: it stops with what it has and says so, and a
/// run that finished nothing within it is an error naming the budget.
#[test]
fn a_run_stops_at_its_work_budget_and_says_so() {
    let vocab = Vocabulary::embedded().unwrap();
    let schema = serde_json::json!({"type": "array", "items": {"type": "string"}});
    let compiled = Constraint::json_schema(&schema).compile(&vocab).unwrap();
    let config = FuzzConfig::default().with_n(1000).with_seed(3).with_max_total_work(3_000);
    let report = Fuzzer::new(&compiled, config).unwrap().run().unwrap();
    assert!(report.stats.out_of_work, "{report}");
    assert!(report.n_valid() > 0 && report.n_valid() < 1000, "{report}");
    assert!(report.stats.work >= 3_000 && report.stats.work < 3_000 + 200_000, "{report}");
    let full = Fuzzer::new(&compiled, FuzzConfig::default().with_n(20)).unwrap().run().unwrap();
    assert!(!full.stats.out_of_work && full.n_valid() == 20, "{full}");
    // Nothing finishes: a string of at least 300 characters within 100 bytes.
    let long = serde_json::json!({"type": "string", "minLength": 300});
    let compiled = Constraint::json_schema(&long).compile(&vocab).unwrap();
    let config = FuzzConfig::default()
        .with_n(3)
        .with_max_bytes(100)
        .with_fit_max_bytes(false)
        .with_max_total_work(500);
    let err = Fuzzer::new(&compiled, config).unwrap().run().unwrap_err();
    assert!(matches!(err.kind(), FuzzErrorKind::RunBudget { max_total_work: 500, .. }), "{err}");
}

/// Numbers an `f64` reader misjudges are set aside (used only when a run would end short).
#[test]
fn numbers_past_f64_are_told_apart() {
    use grammask::fuzz::f64_exact_enough;
    for ok in ["[1, 2.5, -0.0, 0, 1.5e-300, 9007199254740991, 0.1]", r#"{"a": 12e3}"#, "\"1e999\""]
    {
        assert!(f64_exact_enough(ok), "{ok}");
    }
    for bad in
        ["1e999", "1e300", "[1, 2e-400]", r#"{"n": 9007199254740993}"#, "4847645948449.15E+12"]
    {
        assert!(!f64_exact_enough(bad), "{bad}");
    }
}

/// Keys a schema names only inside `propertyNames` or through `dependentRequired` are spelled
/// by the completion search (without them no document finished).
#[test]
fn keys_named_only_by_property_names_or_dependencies_are_reached() {
    let vocab = Vocabulary::embedded().unwrap();
    for schema in [
        serde_json::json!({"type": "object", "not": {"propertyNames": {"not": {"const": "k0"}}}}),
        serde_json::json!({"type": "object", "required": ["a"],
                           "dependentRequired": {"a": ["circle"]},
                           "properties": {"a": {"type": "integer"}}}),
    ] {
        let compiled = Constraint::json_schema(&schema).compile(&vocab).unwrap();
        let config = FuzzConfig::default().with_n(20).with_seed(3);
        let report = Fuzzer::new(&compiled, config).unwrap().run().unwrap();
        assert_eq!(report.n_valid(), 20, "{schema}: {report}");
        let validator = jsonschema::validator_for(&schema).unwrap();
        for inst in &report.instances {
            let v: serde_json::Value = serde_json::from_str(&inst.text).unwrap();
            assert!(validator.is_valid(&v), "{schema}: {}", inst.text);
        }
    }
}

#[test]
fn large_objects_with_open_additional_properties_get_their_own_required_keys() {
    // Twelve objects of twelve required keys each, additional properties allowed (as in the
    // `Github_hard` configuration schemas): the shortest document is ~2.5 kB. With one list of
    // every name in the schema, each object took the other objects' keys as additional
    // properties first and filled the 4 kB budget before writing its own; no document finished.
    let vocab = Vocabulary::embedded().unwrap();
    let mut props = serde_json::Map::new();
    let mut outer_required = Vec::new();
    for i in 0..12 {
        let mut inner = serde_json::Map::new();
        let mut req = Vec::new();
        for j in 0..12 {
            let k = format!("setting{i}x{j}Enabled");
            inner.insert(k.clone(), serde_json::json!({"type": "string", "minLength": 1}));
            req.push(serde_json::Value::String(k));
        }
        let name = format!("panel{i}");
        props.insert(
            name.clone(),
            serde_json::json!({"type": "object", "properties": inner, "required": req}),
        );
        outer_required.push(serde_json::Value::String(name));
    }
    let schema =
        serde_json::json!({"type": "object", "properties": props, "required": outer_required});
    let (valid, invalid) = judge(&schema, &vocab, 20, 5, 1);
    assert_eq!((valid, invalid), (20, 5));
}

#[test]
fn objects_that_may_be_empty_are_closed_before_their_first_key() {
    // Sixty required objects whose only (optional) property is a 100-character enum: closed
    // at once the document is ~700 bytes; the completion search, which tries `"` before `}`
    // (it closes strings), opened a key in each and wrote the enum value, 6.6 kB, over the
    // 4 kB budget (`Github_ultra---o62059`, `Github_hard---o48425`).
    let vocab = Vocabulary::embedded().unwrap();
    let long = "Independent validation of assertion by a qualified third party ".repeat(2);
    let mut props = serde_json::Map::new();
    let mut required = Vec::new();
    for i in 0..60 {
        let name = format!("p{i}");
        props.insert(
            name.clone(),
            serde_json::json!({"type": "object", "additionalProperties": false,
                               "properties": {"assurance": {"enum": [long]}}}),
        );
        required.push(serde_json::Value::String(name));
    }
    let schema = serde_json::json!({"type": "object", "additionalProperties": false,
                                    "properties": props, "required": required});
    let (valid, _) = judge(&schema, &vocab, 10, 0, 2);
    assert_eq!(valid, 10);
}

#[test]
fn multiples_reached_through_any_of_and_not_are_written_as_plain_literals() {
    // `Handwritten---allany1`: a multiple of 5, then of 7, then of 11, through `anyOf` and
    // `not`. A byte walk ends such a number with probability 1/385; the completion search then
    // added digits and an exponent (`4847645948449.15E+12`): valid, but past what an `f64`
    // reader (the judge here) holds exactly, and so costly that the run's budget ended after
    // 8 documents in 17 s. With the schema's multiples as literals every document is plain.
    let vocab = Vocabulary::embedded().unwrap();
    let schema = serde_json::json!({
        "type": "number",
        "allOf": [
            {"minimum": 1},
            {"anyOf": [{"multipleOf": 5}, {"multipleOf": 10}]},
            {"anyOf": [{"not": {"multipleOf": 5}}, {"multipleOf": 7}]},
            {"anyOf": [{"not": {"multipleOf": 7}}, {"multipleOf": 11}]}
        ]
    });
    let compiled = Constraint::json_schema(&schema).compile(&vocab).expect("compiles");
    let config = FuzzConfig::default().with_n(30).with_invalid(5).with_seed(3);
    let report = Fuzzer::new(&compiled, config).unwrap().run().unwrap();
    let valid: Vec<&str> =
        report.instances.iter().filter(|i| i.valid).map(|i| i.text.as_str()).collect();
    assert_eq!(valid.len(), 30, "{report}");
    for t in valid {
        assert!(grammask::fuzz::f64_exact_enough(t), "{t}");
        let x: f64 = t.parse().expect("a number");
        assert!(x >= 1.0 && x.fract() == 0.0 && (x as u64).is_multiple_of(385), "{t}");
    }
    let (valid, invalid) = judge(&schema, &vocab, 30, 5, 3);
    assert_eq!((valid, invalid), (30, 5));
}

#[test]
fn near_misses_keep_their_share_of_the_run_budget() {
    // Documents that cost many pushes (a 71-character hash pattern) and a run budget too small
    // for every valid instance asked for: the valid ones used to spend all of it and leave no
    // near miss (`Github_medium---o76440`: 100 valid, 0 near misses). Now they get
    // n / (n + invalid) of it first, the near misses are made, and the rest goes to valid ones.
    let vocab = Vocabulary::embedded().unwrap();
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"h": {"type": "string", "pattern": "^sha256:[a-f0-9]{64}$"},
                       "n": {"type": "integer"}},
        "required": ["h", "n"],
        "additionalProperties": false
    });
    let compiled = Constraint::json_schema(&schema).compile(&vocab).expect("compiles");
    let config = FuzzConfig::default()
        .with_n(200)
        .with_invalid(40)
        .with_seed(5)
        .with_max_total_work(400_000);
    let report = Fuzzer::new(&compiled, config).unwrap().run().unwrap();
    let valid = report.instances.iter().filter(|i| i.valid).count();
    assert!(report.stats.out_of_work, "{report}");
    assert!(valid > 0 && valid < 200, "{report}");
    assert_eq!(report.instances.len() - valid, 40, "{report}");
}
