//! The JSON Schema Test Suite runner (draft 2020-12), scored against a committed
//! expected-results file.
//!
//! Each suite file is an array of groups `{"description", "schema", "tests": [{"description",
//! "data", "valid"}]}`. For every group the schema is compiled once; each test's instance is
//! serialised compactly (`serde_json::to_string`), tokenized, and walked token by token
//! ([`super::walk`]). The engine's verdict — every token allowed and EOS allowed at the end —
//! must equal `valid`. A schema the compiler proves unsatisfiable refuses every instance; any
//! other compile failure (an unsupported keyword…) makes its cases `compile-error: <kind>`,
//! which is not a wrong verdict but not a correct one either.
//!
//! Outcomes are labelled with stable strings ([`CaseOutcome::label`]) and keyed by
//! `file › group › test` ([`SuiteCase::key`]), so the expected-results file is a plain JSON map
//! whose diff shows every change: a case that got better or worse.

use super::walk::{tokenize, walk, WalkEnd};
use super::{CompileFailure, ConstraintCompiler};
use crate::mask::TokenMask;
use crate::vocab::Vocabulary;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// The outcome of one suite test case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CaseOutcome {
    /// The verdict equals `valid`.
    Pass,
    /// A valid instance was refused (`detail` says where).
    FalseRejection {
        /// Where the walk stopped.
        detail: String,
    },
    /// An invalid instance was accepted to the end.
    FalseAcceptance,
    /// The schema did not compile (and was not proved unsatisfiable).
    CompileError(CompileFailure),
    /// The instance could not be walked (tokenizer or harness problem), or the engine
    /// contradicted itself (mask vs `advance` vs `is_accepting`).
    Error(String),
}

impl CaseOutcome {
    /// The stable label written in the expected-results file: `pass`, `false-rejection`,
    /// `false-acceptance`, `compile-error: <kind>`, `error`.
    pub fn label(&self) -> String {
        match self {
            CaseOutcome::Pass => "pass".into(),
            CaseOutcome::FalseRejection { .. } => "false-rejection".into(),
            CaseOutcome::FalseAcceptance => "false-acceptance".into(),
            CaseOutcome::CompileError(f) => format!("compile-error: {}", f.kind),
            CaseOutcome::Error(_) => "error".into(),
        }
    }

    /// A wrong verdict from a schema that compiled.
    pub fn is_wrong(&self) -> bool {
        matches!(self, CaseOutcome::FalseRejection { .. } | CaseOutcome::FalseAcceptance)
    }
}

/// One test case of the suite and its outcome.
#[derive(Clone, Debug)]
pub struct SuiteCase {
    /// The suite file name (`allOf.json`).
    pub file: String,
    /// The group's description.
    pub group: String,
    /// The test's description.
    pub test: String,
    /// The expected verdict.
    pub valid: bool,
    /// The compact serialisation walked.
    pub instance: String,
    /// What happened.
    pub outcome: CaseOutcome,
    /// The unique key of the case in the expected-results file.
    pub key: String,
}

/// All cases of a suite run.
#[derive(Clone, Debug, Default)]
pub struct SuiteReport {
    /// The cases, in file, group and test order.
    pub cases: Vec<SuiteCase>,
}

/// A suite run that could not run (unreadable or malformed suite files).
#[derive(Debug)]
pub struct SuiteError {
    path: PathBuf,
    kind: SuiteErrorKind,
}

/// What stopped a suite run.
#[derive(Debug)]
#[non_exhaustive]
pub enum SuiteErrorKind {
    /// Reading failed.
    Io(io::Error),
    /// The file is not in the suite's format.
    Format(String),
}

impl SuiteError {
    /// The file or folder concerned.
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// What went wrong.
    pub fn kind(&self) -> &SuiteErrorKind {
        &self.kind
    }
}

impl fmt::Display for SuiteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            SuiteErrorKind::Io(e) => write!(f, "{}: {e}", self.path.display()),
            SuiteErrorKind::Format(m) => write!(f, "{}: {m}", self.path.display()),
        }
    }
}

impl std::error::Error for SuiteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            SuiteErrorKind::Io(e) => Some(e),
            SuiteErrorKind::Format(_) => None,
        }
    }
}

/// Run every `*.json` file directly in `dir` (sub-folders such as `optional/` are not entered).
///
/// # Errors
/// An unreadable folder or file, a file not in the suite's format.
pub fn run_suite<C: ConstraintCompiler>(
    dir: &Path,
    vocab: &Vocabulary,
    compiler: &C,
) -> Result<SuiteReport, SuiteError> {
    let err = |path: &Path, kind| SuiteError { path: path.to_path_buf(), kind };
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| err(dir, SuiteErrorKind::Io(e)))? {
        let path = entry.map_err(|e| err(dir, SuiteErrorKind::Io(e)))?.path();
        if path.is_file() && path.extension().is_some_and(|x| x == "json") {
            files.push(path);
        }
    }
    files.sort();
    let mut report = SuiteReport::default();
    let mut mask = TokenMask::new(vocab.n_vocab());
    for path in &files {
        let text = read(path)?;
        let doc: Value = serde_json::from_str(&text)
            .map_err(|e| err(path, SuiteErrorKind::Format(e.to_string())))?;
        let file = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
        run_file(&file, &doc, vocab, compiler, &mut mask, &mut report.cases)
            .map_err(|m| err(path, SuiteErrorKind::Format(m)))?;
    }
    Ok(report)
}

/// A suite file's text, through the bounded read every file of grammask goes through.
fn read(path: &Path) -> Result<String, SuiteError> {
    use crate::io::ReadErrorKind;
    crate::io::read_text_limited(path, crate::io::DEFAULT_MAX_FILE_BYTES).map_err(|e| {
        let message = e.to_string();
        let kind = match e.into_parts().1 {
            ReadErrorKind::Io(io) => SuiteErrorKind::Io(io),
            _ => SuiteErrorKind::Format(message),
        };
        SuiteError { path: path.to_path_buf(), kind }
    })
}

/// The suite's remote documents (`remotes/` of the suite), keyed by the URI the tests name
/// them by: `http://localhost:1234/` plus the path under `dir`. For
/// [`crate::schema::SchemaOptions::documents`]: no test ever needs the network.
///
/// # Errors
/// An unreadable folder or file, a file that is not JSON.
pub fn load_remotes(dir: &Path) -> Result<BTreeMap<String, Value>, SuiteError> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Value>) -> Result<(), SuiteError> {
        let err = |path: &Path, kind| SuiteError { path: path.to_path_buf(), kind };
        let mut entries = Vec::new();
        for entry in fs::read_dir(dir).map_err(|e| err(dir, SuiteErrorKind::Io(e)))? {
            entries.push(entry.map_err(|e| err(dir, SuiteErrorKind::Io(e)))?.path());
        }
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(root, &path, out)?;
            } else if path.extension().is_some_and(|x| x == "json") {
                let text = read(&path)?;
                let doc: Value = serde_json::from_str(&text)
                    .map_err(|e| err(&path, SuiteErrorKind::Format(e.to_string())))?;
                let rel = path.strip_prefix(root).unwrap_or(&path);
                let rel: Vec<String> = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                out.insert(format!("http://localhost:1234/{}", rel.join("/")), doc);
            }
        }
        Ok(())
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out)?;
    Ok(out)
}

fn run_file<C: ConstraintCompiler>(
    file: &str,
    doc: &Value,
    vocab: &Vocabulary,
    compiler: &C,
    mask: &mut TokenMask,
    cases: &mut Vec<SuiteCase>,
) -> Result<(), String> {
    let groups = doc.as_array().ok_or("not an array of groups")?;
    for (gi, group) in groups.iter().enumerate() {
        let gdesc = group.get("description").and_then(Value::as_str).unwrap_or_default();
        let schema = group.get("schema").ok_or(format!("group {gi} has no schema"))?;
        let tests = group
            .get("tests")
            .and_then(Value::as_array)
            .ok_or(format!("group {gi} has no tests array"))?;
        let compiled = compiler.compile(schema, vocab);
        for (ti, test) in tests.iter().enumerate() {
            let tdesc = test.get("description").and_then(Value::as_str).unwrap_or_default();
            let valid = test
                .get("valid")
                .and_then(Value::as_bool)
                .ok_or(format!("group {gi} test {ti} has no boolean valid"))?;
            let data = test.get("data").ok_or(format!("group {gi} test {ti} has no data"))?;
            let instance = serde_json::to_string(data).map_err(|e| e.to_string())?;
            let outcome = match &compiled {
                Err(f) if f.unsatisfiable => verdict(valid, false, "schema is unsatisfiable"),
                Err(f) => CaseOutcome::CompileError(f.clone()),
                Ok(c) => run_instance(compiler, c, vocab, &instance, valid, mask),
            };
            let mut key = format!("{file} › {gdesc} › {tdesc}");
            // A few groups repeat a test description; the position keeps keys unique.
            if cases.iter().rev().take(64).any(|c: &SuiteCase| c.key == key) {
                key = format!("{key} #{ti}");
            }
            cases.push(SuiteCase {
                file: file.to_string(),
                group: gdesc.to_string(),
                test: tdesc.to_string(),
                valid,
                instance,
                outcome,
                key,
            });
        }
    }
    Ok(())
}

fn verdict(valid: bool, accepted: bool, detail: &str) -> CaseOutcome {
    match (valid, accepted) {
        (true, true) | (false, false) => CaseOutcome::Pass,
        (true, false) => CaseOutcome::FalseRejection { detail: detail.to_string() },
        (false, true) => CaseOutcome::FalseAcceptance,
    }
}

fn run_instance<C: ConstraintCompiler>(
    compiler: &C,
    compiled: &C::Compiled,
    vocab: &Vocabulary,
    instance: &str,
    valid: bool,
    mask: &mut TokenMask,
) -> CaseOutcome {
    let tokens = match tokenize(vocab, instance) {
        Ok(t) => t,
        Err(e) => return CaseOutcome::Error(e),
    };
    let mut engine = compiler.instantiate(compiled, vocab);
    let mut times = Vec::new();
    match walk(engine.as_mut(), &tokens, mask, &mut times) {
        Err(e) => CaseOutcome::Error(format!("harness: {e}")),
        Ok(w) if !w.inconsistencies.is_empty() => CaseOutcome::Error(w.inconsistencies.join("; ")),
        Ok(w) => {
            let detail = match w.end {
                WalkEnd::Accepted => String::new(),
                WalkEnd::RefusedEos => "EOS refused at the end".into(),
                WalkEnd::RefusedToken { index, token } => {
                    format!("token {index} of {} {} refused", tokens.len(), vocab.describe(token))
                }
            };
            verdict(valid, w.accepted(), &detail)
        }
    }
}

/// Tallies of a [`SuiteReport`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SuiteTally {
    /// All cases.
    pub total: usize,
    /// Right verdicts.
    pub pass: usize,
    /// Valid instances refused by compiled schemas.
    pub false_rejections: usize,
    /// Invalid instances accepted by compiled schemas.
    pub false_acceptances: usize,
    /// Cases whose schema did not compile.
    pub compile_errors: usize,
    /// Cases not walked, or with engine self-inconsistencies.
    pub errors: usize,
}

impl SuiteReport {
    /// Count the outcomes.
    pub fn tally(&self) -> SuiteTally {
        let mut t = SuiteTally { total: self.cases.len(), ..SuiteTally::default() };
        for c in &self.cases {
            match c.outcome {
                CaseOutcome::Pass => t.pass += 1,
                CaseOutcome::FalseRejection { .. } => t.false_rejections += 1,
                CaseOutcome::FalseAcceptance => t.false_acceptances += 1,
                CaseOutcome::CompileError(_) => t.compile_errors += 1,
                CaseOutcome::Error(_) => t.errors += 1,
            }
        }
        t
    }

    /// Wrong verdicts among compiled schemas (the target is none).
    pub fn wrong(&self) -> impl Iterator<Item = &SuiteCase> {
        self.cases.iter().filter(|c| c.outcome.is_wrong())
    }

    /// The expected-results document: `{"about": …, "summary": {…}, "cases": {key: label}}`.
    pub fn to_expected(&self) -> Value {
        let t = self.tally();
        let mut cases = Map::new();
        for c in &self.cases {
            cases.insert(c.key.clone(), Value::String(c.outcome.label()));
        }
        serde_json::json!({
            "about": "Expected outcomes of the JSON Schema Test Suite (draft 2020-12) with the \
                      schema engine; regenerate with GRAMMASK_BLESS=1 cargo test --release \
                      --test json_schema_suite. A change here is a behaviour change: review it.",
            "summary": {
                "total": t.total,
                "pass": t.pass,
                "false_rejections": t.false_rejections,
                "false_acceptances": t.false_acceptances,
                "compile_errors": t.compile_errors,
                "errors": t.errors,
            },
            "cases": cases,
        })
    }

    /// Differences from an expected-results document: `(key, expected, actual)`, with `None`
    /// for a case missing on that side.
    pub fn diff(&self, expected: &Value) -> Vec<(String, Option<String>, Option<String>)> {
        let want: BTreeMap<&str, &str> = expected
            .get("cases")
            .and_then(Value::as_object)
            .map(|m| m.iter().filter_map(|(k, v)| Some((k.as_str(), v.as_str()?))).collect())
            .unwrap_or_default();
        let mut out = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for c in &self.cases {
            seen.insert(c.key.as_str());
            let label = c.outcome.label();
            match want.get(c.key.as_str()) {
                Some(&w) if w == label => {}
                w => out.push((c.key.clone(), w.map(|s| s.to_string()), Some(label))),
            }
        }
        for (k, w) in want {
            if !seen.contains(k) {
                out.push((k.to_string(), Some(w.to_string()), None));
            }
        }
        out
    }
}

impl fmt::Display for SuiteReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self.tally();
        let pct = |n: usize| if t.total == 0 { 0.0 } else { 100.0 * n as f64 / t.total as f64 };
        writeln!(f, "JSON Schema Test Suite: {} cases", t.total)?;
        writeln!(f, "  correct:           {} ({:.1}%)", t.pass, pct(t.pass))?;
        writeln!(f, "  false rejections:  {}", t.false_rejections)?;
        writeln!(f, "  false acceptances: {}", t.false_acceptances)?;
        writeln!(f, "  compile errors:    {}", t.compile_errors)?;
        writeln!(f, "  errors:            {}", t.errors)?;
        let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
        for c in &self.cases {
            if let CaseOutcome::CompileError(e) = &c.outcome {
                *kinds.entry(e.kind.as_str()).or_default() += 1;
            }
        }
        for (k, n) in kinds {
            writeln!(f, "    {n:4}  {k}")?;
        }
        for c in &self.cases {
            let why = match &c.outcome {
                CaseOutcome::FalseRejection { detail } => format!("false rejection ({detail})"),
                CaseOutcome::FalseAcceptance => "false acceptance".into(),
                CaseOutcome::Error(e) => format!("error: {e}"),
                _ => continue,
            };
            writeln!(
                f,
                "  {}: {why}; instance {}",
                c.key,
                super::walk::truncate(&c.instance, 120)
            )?;
        }
        Ok(())
    }
}
