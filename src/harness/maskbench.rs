//! The MaskBench harness behind `grammask maskbench DIR --tokenizer PATH [--jobs N] [--out F]`.
//!
//! For every MaskBench file in a folder (`{"description", "meta", "schema", "tests": [{"description",
//! "valid", "data"}]}`, see `../shared/README.md`):
//! 1. compile the schema, timed (a compile failure is counted under its kind and keyword, never
//!    a crash);
//! 2. for each test instance: serialise it as Python's `json.dumps(data, ensure_ascii=False)`
//!    ([`super::pyjson`]), tokenize it, and walk it token by token ([`super::walk`]), timing
//!    every mask (only the mask computation). A valid instance must walk through with EOS allowed
//!    at the end — otherwise it is a *false rejection*; an invalid one must be refused somewhere
//!    (a refused token, or EOS refused at the end) — otherwise it is a *false acceptance*;
//! 3. write one JSONL record per schema ([`write_jsonl_record`]) and fold it into the
//!    [`MaskbenchSummary`].
//!
//! A schema *passes* when it compiles and every one of its instances gets the right verdict.
//! Files are processed by `jobs` threads; per-step timings are only comparable with `jobs == 1`.
//!
//! # Example
//! ```no_run
//! use grammask::harness::maskbench::{run_maskbench, MaskbenchOptions};
//! use grammask::Vocabulary;
//! let vocab = Vocabulary::from_file("../shared/tokenizers/llama3.json").unwrap();
//! let opts = MaskbenchOptions { out: Some("results.jsonl".into()), ..MaskbenchOptions::default() };
//! let summary = run_maskbench("../shared/maskbench-dev".as_ref(), &vocab, &opts).unwrap();
//! println!("{summary}");
//! ```

use super::schema::SchemaCompiler;
use super::walk::{tokenize, truncate, walk, WalkEnd};
use super::{CompileFailure, ConstraintCompiler};
use crate::mask::TokenMask;
use crate::schema::SchemaOptions;
use crate::stats::Summary;
use crate::vocab::Vocabulary;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Options of a MaskBench run.
#[derive(Clone, Debug)]
pub struct MaskbenchOptions {
    /// Worker threads (default 1; 0 means 1). Use 1 for latency figures.
    pub jobs: usize,
    /// Write one JSONL record per schema here (default: none).
    pub out: Option<PathBuf>,
    /// Only files whose name contains this string (default: all).
    pub filter: Option<String>,
    /// Only the first `limit` files (by name, after `filter`; default: all).
    pub limit: Option<usize>,
    /// Only every `stride`-th file (by name, after `filter`, before `limit`; default 1: all) —
    /// an evenly spread sample of every subset when the whole folder takes too long.
    pub stride: usize,
    /// Stop starting new files after this much wall time (default: none); the summary then
    /// says how many files were left out ([`MaskbenchSummary::skipped`]).
    pub time_limit: Option<Duration>,
    /// Print a progress line to stderr every this many schemas (default 0: silent).
    pub progress_every: usize,
    /// The schema engine's options, for [`run_maskbench`] (default: flexible whitespace, which
    /// accepts Python's `", "`/`": "`, and any property order). Set `property_order` to
    /// [`crate::schema::PropertyOrder::Schema`] to score the schema-order mode.
    pub schema: SchemaOptions,
}

impl Default for MaskbenchOptions {
    fn default() -> Self {
        MaskbenchOptions {
            jobs: 1,
            out: None,
            filter: None,
            limit: None,
            stride: 1,
            time_limit: None,
            progress_every: 0,
            schema: SchemaOptions::default(),
        }
    }
}

/// A MaskBench run that could not run at all (per-file problems are recorded, not errors).
#[derive(Debug)]
pub struct MaskbenchError {
    kind: MaskbenchErrorKind,
}

/// What stopped a MaskBench run.
#[derive(Debug)]
#[non_exhaustive]
pub enum MaskbenchErrorKind {
    /// The folder could not be listed, or the JSONL output could not be written.
    Io {
        /// The folder or file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The folder holds no `.json` file (after the filter).
    NoFiles {
        /// The folder.
        path: PathBuf,
    },
}

impl MaskbenchError {
    /// What went wrong.
    pub fn kind(&self) -> &MaskbenchErrorKind {
        &self.kind
    }
    fn io(path: &Path, source: io::Error) -> Self {
        MaskbenchError { kind: MaskbenchErrorKind::Io { path: path.to_path_buf(), source } }
    }
}

impl fmt::Display for MaskbenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            MaskbenchErrorKind::Io { path, source } => write!(f, "{}: {source}", path.display()),
            MaskbenchErrorKind::NoFiles { path } => {
                write!(f, "{}: no MaskBench .json files found", path.display())
            }
        }
    }
}

impl std::error::Error for MaskbenchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            MaskbenchErrorKind::Io { source, .. } => Some(source),
            MaskbenchErrorKind::NoFiles { .. } => None,
        }
    }
}

/// How a schema's compile went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CompileOutcome {
    /// The file is not a readable MaskBench file (not counted as a compile error).
    NotLoaded {
        /// Why.
        message: String,
    },
    /// Compiled in `ns` nanoseconds.
    Compiled {
        /// Compile time.
        ns: u64,
    },
    /// The compiler refused the schema.
    Failed {
        /// The failure.
        failure: CompileFailure,
        /// Time until the failure.
        ns: u64,
    },
}

/// How one instance went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InstanceOutcome {
    /// Walked; how it ended.
    Walked(WalkEnd),
    /// Refused as a whole because the schema is unsatisfiable.
    UnsatisfiableSchema,
    /// Not walked: the schema did not compile.
    NotCompiled,
    /// Not walked: tokenization or the harness failed.
    Error(String),
}

/// One instance of a schema.
#[derive(Clone, Debug)]
pub struct InstanceRun {
    /// Position in the file's `tests`.
    pub index: usize,
    /// The test's description.
    pub description: String,
    /// Whether the instance is valid under the schema.
    pub valid: bool,
    /// Number of tokens of the serialised instance.
    pub tokens: usize,
    /// The outcome.
    pub outcome: InstanceOutcome,
    /// Engine self-inconsistencies seen during the walk.
    pub inconsistencies: Vec<String>,
    /// Every mask computation of the walk, in nanoseconds.
    pub mask_ns: Vec<u64>,
    /// The serialised instance (for messages; truncated to 200 characters).
    pub text: String,
}

impl InstanceRun {
    /// Did the engine accept the instance? `None` when it was not walked.
    pub fn accepted(&self) -> Option<bool> {
        match &self.outcome {
            InstanceOutcome::Walked(end) => Some(*end == WalkEnd::Accepted),
            InstanceOutcome::UnsatisfiableSchema => Some(false),
            InstanceOutcome::NotCompiled | InstanceOutcome::Error(_) => None,
        }
    }

    /// Did the engine give the right verdict (and stay self-consistent)?
    pub fn correct(&self) -> bool {
        self.accepted() == Some(self.valid) && self.inconsistencies.is_empty()
    }

    /// A one-line description of where the walk stopped.
    pub fn detail(&self) -> String {
        match &self.outcome {
            InstanceOutcome::Walked(WalkEnd::Accepted) => "accepted to the end".into(),
            InstanceOutcome::Walked(WalkEnd::RefusedEos) => "EOS refused at the end".into(),
            InstanceOutcome::Walked(WalkEnd::RefusedToken { index, token }) => {
                format!("token {index} of {} ({token:?}) refused", self.tokens)
            }
            InstanceOutcome::UnsatisfiableSchema => "schema compiled as unsatisfiable".into(),
            InstanceOutcome::NotCompiled => "schema did not compile".into(),
            InstanceOutcome::Error(e) => e.clone(),
        }
    }
}

/// One MaskBench file.
#[derive(Clone, Debug)]
pub struct SchemaRun {
    /// The file name (not the path).
    pub file: String,
    /// The compile.
    pub compile: CompileOutcome,
    /// Its instances (empty when not loaded).
    pub instances: Vec<InstanceRun>,
}

impl SchemaRun {
    /// Compiled (or proved unsatisfiable) and every instance right.
    pub fn passed(&self) -> bool {
        let compiled = match &self.compile {
            CompileOutcome::Compiled { .. } => true,
            CompileOutcome::Failed { failure, .. } => failure.unsatisfiable,
            CompileOutcome::NotLoaded { .. } => false,
        };
        compiled && self.instances.iter().all(InstanceRun::correct)
    }
}

/// One false verdict or engine inconsistency, located.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The MaskBench file.
    pub file: String,
    /// The instance's index in the file's `tests`.
    pub instance: usize,
    /// What happened.
    pub detail: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} #{}: {}", self.file, self.instance, self.detail)
    }
}

/// The summary of a MaskBench run.
#[derive(Clone, Debug, Default)]
pub struct MaskbenchSummary {
    /// Files run.
    pub schemas: usize,
    /// Schemas that compiled (unsatisfiable ones included: they are a decision).
    pub compiled: usize,
    /// Schemas that compiled and got every instance right.
    pub passed: usize,
    /// Files that are not readable MaskBench files: `(file, why)`.
    pub load_errors: Vec<(String, String)>,
    /// Compile failures by kind (`unsupported:<keyword>`, `invalid`…): the files.
    pub compile_errors: BTreeMap<String, Vec<String>>,
    /// Instances of schemas that compiled: valid ones.
    pub valid_instances: usize,
    /// Instances of schemas that compiled: invalid ones.
    pub invalid_instances: usize,
    /// Valid instances refused (among compiled schemas).
    pub false_rejections: Vec<Finding>,
    /// Invalid instances accepted to the end (among compiled schemas).
    pub false_acceptances: Vec<Finding>,
    /// Mask/`advance`/`is_accepting` disagreements (engine bugs).
    pub inconsistencies: Vec<Finding>,
    /// Instances that could not be walked (tokenizer, harness).
    pub instance_errors: Vec<Finding>,
    /// Every mask computation.
    pub masks: Summary,
    /// Successful compiles.
    pub compile: Summary,
    /// Tokens walked.
    pub tokens: usize,
    /// Files not run because [`MaskbenchOptions::time_limit`] passed (0 for a complete run).
    pub skipped: usize,
    /// Worker threads used.
    pub jobs: usize,
    /// Wall-clock time of the whole run.
    pub wall: Duration,
}

impl MaskbenchSummary {
    /// Compile failures in all.
    pub fn compile_error_count(&self) -> usize {
        self.compile_errors.values().map(Vec::len).sum()
    }

    /// Percentage of schemas passed.
    pub fn pass_rate(&self) -> f64 {
        pct(self.passed, self.schemas)
    }
}

fn pct(n: usize, d: usize) -> f64 {
    if d == 0 {
        0.0
    } else {
        100.0 * n as f64 / d as f64
    }
}

impl fmt::Display for MaskbenchSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOW: usize = 20;
        writeln!(
            f,
            "MaskBench: {} schemas ({} jobs, {:.1} s wall)",
            self.schemas,
            self.jobs,
            self.wall.as_secs_f64()
        )?;
        if self.skipped > 0 {
            writeln!(f, "  STOPPED by the time limit: {} files not run", self.skipped)?;
        }
        writeln!(
            f,
            "  passed:            {} / {} ({:.1}%)",
            self.passed,
            self.schemas,
            self.pass_rate()
        )?;
        writeln!(
            f,
            "  compiled:          {} ({:.1}%); compile errors: {}; unreadable files: {}",
            self.compiled,
            pct(self.compiled, self.schemas),
            self.compile_error_count(),
            self.load_errors.len()
        )?;
        writeln!(
            f,
            "  instances walked:  {} valid, {} invalid, {} tokens",
            self.valid_instances, self.invalid_instances, self.tokens
        )?;
        writeln!(f, "  false rejections:  {}", self.false_rejections.len())?;
        writeln!(f, "  false acceptances: {}", self.false_acceptances.len())?;
        writeln!(f, "  inconsistencies:   {}", self.inconsistencies.len())?;
        writeln!(f, "  instance errors:   {}", self.instance_errors.len())?;
        writeln!(f, "  masks:   {}", self.masks)?;
        writeln!(f, "  compile: {}", self.compile)?;
        if !self.compile_errors.is_empty() {
            writeln!(f, "compile errors by kind:")?;
            let mut kinds: Vec<_> = self.compile_errors.iter().collect();
            kinds.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(b.0)));
            for (kind, files) in kinds {
                writeln!(f, "  {:5}  {kind}", files.len())?;
            }
        }
        let lists: [(&str, &Vec<Finding>); 4] = [
            ("false rejections", &self.false_rejections),
            ("false acceptances", &self.false_acceptances),
            ("inconsistencies", &self.inconsistencies),
            ("instance errors", &self.instance_errors),
        ];
        for (title, list) in lists {
            if list.is_empty() {
                continue;
            }
            writeln!(f, "{title}:")?;
            for finding in list.iter().take(SHOW) {
                writeln!(f, "  {finding}")?;
            }
            if list.len() > SHOW {
                writeln!(f, "  … and {} more", list.len() - SHOW)?;
            }
        }
        for (file, why) in self.load_errors.iter().take(SHOW) {
            writeln!(f, "unreadable: {file}: {why}")?;
        }
        Ok(())
    }
}

/// The sorted `.json` files of `dir` after the options' filter and limit.
///
/// # Errors
/// An unreadable folder, or no file left.
pub fn list_files(dir: &Path, opts: &MaskbenchOptions) -> Result<Vec<PathBuf>, MaskbenchError> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| MaskbenchError::io(dir, e))? {
        let path = entry.map_err(|e| MaskbenchError::io(dir, e))?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !name.ends_with(".json") || !path.is_file() {
            continue;
        }
        if opts.filter.as_deref().is_some_and(|f| !name.contains(f)) {
            continue;
        }
        files.push(path);
    }
    files.sort();
    if opts.stride > 1 {
        files = files.into_iter().step_by(opts.stride).collect();
    }
    if let Some(limit) = opts.limit {
        files.truncate(limit);
    }
    if files.is_empty() {
        return Err(MaskbenchError { kind: MaskbenchErrorKind::NoFiles { path: dir.into() } });
    }
    Ok(files)
}

/// Run MaskBench over the files of `dir` with the schema engine ([`SchemaCompiler`] with
/// `opts.schema`), writing JSONL to `opts.out` if set: what `grammask maskbench` calls.
///
/// # Errors
/// An unreadable folder, no files, an unwritable output file. Problems with single files
/// (unreadable, compile errors, false verdicts) are recorded in the summary instead.
pub fn run_maskbench(
    dir: &Path,
    vocab: &Vocabulary,
    opts: &MaskbenchOptions,
) -> Result<MaskbenchSummary, MaskbenchError> {
    run_maskbench_with(dir, vocab, opts, &SchemaCompiler { options: opts.schema.clone() })
}

/// Run MaskBench over the files of `dir` with `compiler`, writing JSONL to `opts.out` if set.
///
/// # Errors
/// An unreadable folder, no files, an unwritable output file. Problems with single files are
/// recorded in the summary instead.
pub fn run_maskbench_with<C: ConstraintCompiler>(
    dir: &Path,
    vocab: &Vocabulary,
    opts: &MaskbenchOptions,
    compiler: &C,
) -> Result<MaskbenchSummary, MaskbenchError> {
    let started = Instant::now();
    let files = list_files(dir, opts)?;
    let mut out = match &opts.out {
        Some(p) => Some((
            p.as_path(),
            BufWriter::new(fs::File::create(p).map_err(|e| MaskbenchError::io(p, e))?),
        )),
        None => None,
    };
    let jobs = opts.jobs.clamp(1, files.len());
    let mut acc = Accumulator::default();
    let next = AtomicUsize::new(0);
    let (tx, rx) = mpsc::channel::<(usize, SchemaRun)>();
    let mut write_error = None;
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            let tx = tx.clone();
            let (files, next) = (&files, &next);
            scope.spawn(move || {
                let mut mask = TokenMask::new(vocab.n_vocab());
                loop {
                    if opts.time_limit.is_some_and(|l| started.elapsed() >= l) {
                        break;
                    }
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(path) = files.get(i) else { break };
                    let run = run_file(path, vocab, compiler, &mut mask);
                    if tx.send((i, run)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        // Records arrive in completion order; each names its file.
        for (done, (_, run)) in rx.iter().enumerate() {
            if let (Some((path, w)), None) = (out.as_mut(), &write_error) {
                if let Err(e) = write_jsonl_record(&run, w) {
                    write_error = Some(MaskbenchError::io(path, e));
                }
            }
            acc.add(run);
            if opts.progress_every > 0 && (done + 1) % opts.progress_every == 0 {
                eprintln!(
                    "maskbench: {}/{} schemas, {} passed",
                    done + 1,
                    files.len(),
                    acc.summary.passed
                );
            }
        }
    });
    if let Some(e) = write_error {
        return Err(e);
    }
    if let Some((path, mut w)) = out {
        w.flush().map_err(|e| MaskbenchError::io(path, e))?;
    }
    let mut summary = acc.finish();
    summary.skipped = files.len() - summary.schemas;
    summary.jobs = jobs;
    summary.wall = started.elapsed();
    Ok(summary)
}

#[derive(Default)]
struct Accumulator {
    summary: MaskbenchSummary,
    mask_ns: Vec<u64>,
    compile_ns: Vec<u64>,
}

impl Accumulator {
    fn add(&mut self, mut run: SchemaRun) {
        let s = &mut self.summary;
        s.schemas += 1;
        if run.passed() {
            s.passed += 1;
        }
        match &run.compile {
            CompileOutcome::NotLoaded { message } => {
                s.load_errors.push((run.file.clone(), message.clone()));
                return;
            }
            CompileOutcome::Compiled { ns } => {
                s.compiled += 1;
                self.compile_ns.push(*ns);
            }
            CompileOutcome::Failed { failure, .. } => {
                if failure.unsatisfiable {
                    s.compiled += 1;
                }
                s.compile_errors.entry(failure.kind.clone()).or_default().push(run.file.clone());
            }
        }
        for inst in &mut run.instances {
            self.mask_ns.append(&mut inst.mask_ns);
            s.tokens += inst.tokens;
            let finding =
                |detail: String| Finding { file: run.file.clone(), instance: inst.index, detail };
            for msg in &inst.inconsistencies {
                s.inconsistencies.push(finding(msg.clone()));
            }
            let Some(accepted) = inst.accepted() else {
                if let InstanceOutcome::Error(e) = &inst.outcome {
                    s.instance_errors.push(finding(e.clone()));
                }
                continue;
            };
            if inst.valid {
                s.valid_instances += 1;
            } else {
                s.invalid_instances += 1;
            }
            let what = format!("{}; {:?}: {}", inst.detail(), inst.description, inst.text);
            match (inst.valid, accepted) {
                (true, false) => s.false_rejections.push(finding(what)),
                (false, true) => s.false_acceptances.push(finding(what)),
                _ => {}
            }
        }
    }

    fn finish(mut self) -> MaskbenchSummary {
        let s = &mut self.summary;
        s.masks = Summary::from_nanos(&mut self.mask_ns);
        s.compile = Summary::from_nanos(&mut self.compile_ns);
        for list in [&mut s.false_rejections, &mut s.false_acceptances, &mut s.inconsistencies] {
            list.sort_by(|a, b| (&a.file, a.instance).cmp(&(&b.file, b.instance)));
        }
        s.instance_errors.sort_by(|a, b| (&a.file, a.instance).cmp(&(&b.file, b.instance)));
        s.load_errors.sort();
        for files in s.compile_errors.values_mut() {
            files.sort();
        }
        self.summary
    }
}

/// Load one MaskBench file: its schema and its tests `(description, valid, data)`.
///
/// # Errors
/// A message when the file is unreadable or not in the MaskBench format.
#[allow(clippy::type_complexity)]
pub fn load_file(path: &Path) -> Result<(Value, Vec<(String, bool, Value)>), String> {
    let text = crate::io::read_text_limited(path, crate::io::DEFAULT_MAX_FILE_BYTES)
        .map_err(|e| e.to_string())?;
    let mut doc: Value = serde_json::from_str(&text).map_err(|e| format!("not JSON: {e}"))?;
    let schema = doc.get_mut("schema").map(Value::take).ok_or("no \"schema\" field")?;
    let Some(Value::Array(tests)) = doc.get_mut("tests").map(Value::take) else {
        return Err("no \"tests\" array".into());
    };
    let mut out = Vec::with_capacity(tests.len());
    for (i, mut t) in tests.into_iter().enumerate() {
        let valid = t
            .get("valid")
            .and_then(Value::as_bool)
            .ok_or_else(|| format!("test {i} has no boolean \"valid\""))?;
        let description =
            t.get("description").and_then(Value::as_str).unwrap_or_default().to_string();
        let data =
            t.get_mut("data").map(Value::take).ok_or_else(|| format!("test {i}: no data"))?;
        out.push((description, valid, data));
    }
    Ok((schema, out))
}

/// Run one MaskBench file: compile, then walk every instance. `mask` is a reusable buffer of
/// the vocabulary's logits width.
pub fn run_file<C: ConstraintCompiler>(
    path: &Path,
    vocab: &Vocabulary,
    compiler: &C,
    mask: &mut TokenMask,
) -> SchemaRun {
    let file = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let (schema, tests) = match load_file(path) {
        Ok(x) => x,
        Err(message) => {
            return SchemaRun {
                file,
                compile: CompileOutcome::NotLoaded { message },
                instances: vec![],
            }
        }
    };
    let t0 = Instant::now();
    let compiled = compiler.compile(&schema, vocab);
    let ns = t0.elapsed().as_nanos() as u64;
    let (compile, compiled) = match compiled {
        Ok(c) => (CompileOutcome::Compiled { ns }, Some(c)),
        Err(failure) => (CompileOutcome::Failed { failure, ns }, None),
    };
    let unsatisfiable =
        matches!(&compile, CompileOutcome::Failed { failure, .. } if failure.unsatisfiable);
    let mut instances = Vec::with_capacity(tests.len());
    for (index, (description, valid, data)) in tests.into_iter().enumerate() {
        let text = super::pyjson::dumps(&data);
        let mut run = InstanceRun {
            index,
            description,
            valid,
            tokens: 0,
            outcome: InstanceOutcome::NotCompiled,
            inconsistencies: Vec::new(),
            mask_ns: Vec::new(),
            text: truncate(&text, 200),
        };
        if unsatisfiable {
            run.outcome = InstanceOutcome::UnsatisfiableSchema;
        } else if let Some(compiled) = &compiled {
            match tokenize(vocab, &text) {
                Err(e) => run.outcome = InstanceOutcome::Error(e),
                Ok(tokens) => {
                    run.tokens = tokens.len();
                    let mut engine = compiler.instantiate(compiled, vocab);
                    match walk(engine.as_mut(), &tokens, mask, &mut run.mask_ns) {
                        Ok(w) => {
                            run.outcome = InstanceOutcome::Walked(w.end);
                            run.inconsistencies = w.inconsistencies;
                        }
                        Err(e) => run.outcome = InstanceOutcome::Error(format!("harness: {e}")),
                    }
                }
            }
        }
        instances.push(run);
    }
    SchemaRun { file, compile, instances }
}

/// Write one schema's JSONL record (one line):
/// `{"file", "passed", "compile": {"ok", "us", "kind"?, "message"?}, "instances": [{"index",
/// "valid", "verdict" ("accepted" | "refused" | "not-compiled" | "error"), "correct", "tokens",
/// "refused_at"? (token index; equal to "tokens" when EOS was refused), "error"?,
/// "inconsistencies"?, "mask_ns": [...]}]}`.
///
/// # Errors
/// The writer's I/O errors.
pub fn write_jsonl_record(run: &SchemaRun, w: &mut dyn Write) -> io::Result<()> {
    let compile = match &run.compile {
        CompileOutcome::NotLoaded { message } => {
            json!({"ok": false, "kind": "unreadable", "message": message})
        }
        CompileOutcome::Compiled { ns } => json!({"ok": true, "us": *ns as f64 / 1e3}),
        CompileOutcome::Failed { failure, ns } => json!({
            "ok": false,
            "us": *ns as f64 / 1e3,
            "kind": failure.kind,
            "message": failure.message,
            "unsatisfiable": failure.unsatisfiable,
        }),
    };
    let instances: Vec<Value> = run
        .instances
        .iter()
        .map(|inst| {
            let verdict = match (&inst.outcome, inst.accepted()) {
                (_, Some(true)) => "accepted",
                (_, Some(false)) => "refused",
                (InstanceOutcome::Error(_), None) => "error",
                _ => "not-compiled",
            };
            let mut v = json!({
                "index": inst.index,
                "valid": inst.valid,
                "verdict": verdict,
                "correct": inst.correct(),
                "tokens": inst.tokens,
            });
            let obj = v.as_object_mut().expect("built as an object");
            match &inst.outcome {
                InstanceOutcome::Walked(WalkEnd::RefusedToken { index, token }) => {
                    obj.insert("refused_at".into(), json!(index));
                    obj.insert("refused_token".into(), json!(token.0));
                }
                InstanceOutcome::Walked(WalkEnd::RefusedEos) => {
                    obj.insert("refused_at".into(), json!(inst.tokens));
                }
                InstanceOutcome::Error(e) => {
                    obj.insert("error".into(), json!(e));
                }
                _ => {}
            }
            if !inst.inconsistencies.is_empty() {
                obj.insert("inconsistencies".into(), json!(inst.inconsistencies));
            }
            obj.insert("mask_ns".into(), json!(inst.mask_ns));
            v
        })
        .collect();
    let record = json!({
        "file": run.file,
        "passed": run.passed(),
        "compile": compile,
        "instances": instances,
    });
    serde_json::to_writer(&mut *w, &record)?;
    w.write_all(b"\n")
}
