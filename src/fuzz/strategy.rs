//! A `proptest` strategy over a constraint's documents (feature `proptest`): property-test your
//! own consumer of a schema's JSON with [`instances`], and a failing case shrinks toward shorter
//! documents of the same language.
//!
//! A value is the document generated from a seed drawn by proptest ([`Fuzzer::generate`]);
//! shrinking regenerates from the same seed with the length target halved, so the completion
//! search closes the document earlier — every shrunk value is still a document of the language.

use super::{FuzzConfig, Fuzzer};
use crate::constraint::CompiledConstraint;
use proptest::prelude::Rng as _;
use proptest::strategy::{NewTree, Strategy, ValueTree};
use proptest::test_runner::TestRunner;

/// The strategy [`instances`] returns.
#[derive(Clone, Debug)]
pub struct Instances {
    compiled: CompiledConstraint,
    config: FuzzConfig,
}

/// Documents of `compiled`'s language (valid JSON Schema instances, strings of a regex or
/// grammar), shrinking toward shorter ones.
///
/// ```
/// use grammask::{Constraint, Vocabulary};
/// use proptest::prelude::*;
///
/// let vocab = Vocabulary::embedded().unwrap();
/// let schema = serde_json::json!({"type": "array", "items": {"type": "integer"}, "maxItems": 3});
/// let compiled = Constraint::json_schema(&schema).compile(&vocab).unwrap();
/// proptest!(ProptestConfig::with_cases(16), |(doc in grammask::fuzz::instances(&compiled))| {
///     let v: serde_json::Value = serde_json::from_str(&doc).unwrap();
///     prop_assert!(v.as_array().is_some_and(|a| a.len() <= 3));
/// });
/// ```
pub fn instances(compiled: &CompiledConstraint) -> Instances {
    Instances { compiled: compiled.clone(), config: FuzzConfig::default() }
}

impl Instances {
    /// The same strategy with `config`'s byte and work budgets.
    #[must_use]
    pub fn with_config(mut self, config: FuzzConfig) -> Instances {
        self.config = config;
        self
    }
}

/// One generated document and how to shrink it.
pub struct InstanceTree {
    compiled: CompiledConstraint,
    config: FuzzConfig,
    seed: u64,
    current: String,
    previous: Option<String>,
    /// Length target of the next shrink.
    cap: usize,
}

impl Strategy for Instances {
    type Tree = InstanceTree;
    type Value = String;

    fn new_tree(&self, runner: &mut TestRunner) -> NewTree<Self> {
        let fuzzer = Fuzzer::new(&self.compiled, self.config.clone()).map_err(|e| e.to_string())?;
        for _ in 0..16 {
            let seed = runner.rng().next_u64();
            if let Ok(doc) = fuzzer.generate(seed) {
                let cap = doc.len() / 2;
                return Ok(InstanceTree {
                    compiled: self.compiled.clone(),
                    config: self.config.clone(),
                    seed,
                    current: doc,
                    previous: None,
                    cap,
                });
            }
        }
        Err("no document could be finished within the fuzz budget".into())
    }
}

impl ValueTree for InstanceTree {
    type Value = String;

    fn current(&self) -> String {
        self.current.clone()
    }

    fn simplify(&mut self) -> bool {
        let Ok(fuzzer) = Fuzzer::new(&self.compiled, self.config.clone()) else { return false };
        while self.cap > 0 {
            let cap = self.cap;
            self.cap /= 2;
            if let Ok(doc) = fuzzer.generate_capped(self.seed, cap) {
                if doc.len() < self.current.len() {
                    self.previous = Some(std::mem::replace(&mut self.current, doc));
                    return true;
                }
            }
        }
        false
    }

    fn complicate(&mut self) -> bool {
        match self.previous.take() {
            Some(p) => {
                self.current = p;
                true
            }
            None => false,
        }
    }
}
