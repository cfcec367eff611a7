//! The layering rule of `docs/architecture.md`, checked on the source: every `crate::` (or
//! `super::` reaching the crate root) path in a top-level module points to a module of a lower
//! layer, so there is no cycle between top-level modules. A new top-level module must be given
//! its layer here (and in the architecture document) before it compiles into a green run.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level modules by layer, bottom up: a module may use only modules of lower layers.
const LAYERS: &[&[&str]] = &[
    // Tokens, masks, byte sets, measurement and the builder macro: no grammar, no vocabulary.
    &["builder", "bytes", "io", "token", "stats"],
    &["mask"],
    // The byte-level interface a trie walk drives; the sampler needs only logits and masks.
    &["recognizer", "sampler"],
    // The vocabulary and its trie (knows nothing of any grammar); regex → DFA compilation;
    // the GPU argmax.
    &["vocab", "automaton", "gpu"],
    // The engine contract and what every engine shares.
    &["engine"],
    // Engines.
    &["json", "regex"],
    &["cfg", "schema"],
    // The one way to build any constraint; its structural-tag combinator (`constraint/tagged.rs`)
    // is a child module, since `Tagged` contents are `Constraint`s and vice versa.
    &["constraint"],
    // The decode loop.
    &["decode"],
    // Model backends; conformance fuzzing (documents through a compiled constraint's byte
    // probe, and `Finisher`, a `LogitsSource` over another that ends the document).
    &["model", "fuzz"],
    // Harnesses, front ends.
    &["harness", "server"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src is readable") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level modules a source file's code (comments left out) names.
fn uses(text: &str, file_at_root_level: bool) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        for (prefix, applies) in [("crate::", true), ("super::", file_at_root_level)] {
            if !applies {
                continue;
            }
            let mut rest = code;
            while let Some(i) = rest.find(prefix) {
                let before = rest[..i].chars().last();
                rest = &rest[i + prefix.len()..];
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
                    continue; // `$crate::`, `mycrate::`
                }
                let name: String =
                    rest.chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
                if !name.is_empty() && rest[name.len()..].starts_with("::") {
                    found.insert(name);
                }
            }
        }
    }
    found
}

#[test]
fn top_level_modules_only_use_lower_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let rel = file.strip_prefix(&src).expect("under src");
        let parts: Vec<&str> = rel.iter().map(|p| p.to_str().expect("utf-8 path")).collect();
        let top = parts[0].trim_end_matches(".rs");
        if parts.len() == 1 && (top == "lib" || top == "main") {
            continue; // the crate root re-exports everything; the binary sits above all
        }
        // `super::` from `src/x.rs` or `src/x/mod.rs` is the crate root.
        let at_root = parts.len() == 1 || (parts.len() == 2 && parts[1] == "mod.rs");
        let text = std::fs::read_to_string(file).expect("readable source");
        for used in uses(&text, at_root) {
            if used != top {
                edges.entry(top.to_string()).or_default().insert(used);
            }
        }
    }
    let mut wrong = Vec::new();
    for (from, tos) in &edges {
        let Some(lf) = layer_of(from) else {
            wrong.push(format!("`{from}` has no layer in tests/it/architecture.rs"));
            continue;
        };
        for to in tos {
            match layer_of(to) {
                None => wrong.push(format!("`{to}` (used by `{from}`) has no layer")),
                Some(lt) if lt >= lf => {
                    wrong.push(format!("`{from}` (layer {lf}) uses `{to}` (layer {lt})"))
                }
                Some(_) => {}
            }
        }
    }
    assert!(wrong.is_empty(), "layering broken:\n  {}", wrong.join("\n  "));
    // The check itself sees the edges it is meant to (so it cannot pass by reading nothing).
    assert!(edges.get("schema").is_some_and(|t| t.contains("engine") && t.contains("vocab")));
}

#[test]
fn the_scanner_sees_paths_and_skips_comments() {
    let text = "use crate::vocab::X;\n// crate::decode::Y\nlet a = super::json::Z; $crate::mask::W";
    let found = uses(text, true);
    assert_eq!(found.into_iter().collect::<Vec<_>>(), ["json", "vocab"]);
    assert!(uses("use super::json::Z;", false).is_empty());
}

/// The downstream crate in `tests/downstream/` (built and run by `.ci/run` with grammask's
/// default features off) runs exactly the README's library example.
#[test]
fn the_downstream_crate_runs_the_readme_example() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README");
    let main = std::fs::read_to_string(root.join("tests/downstream/src/main.rs")).expect("main");
    let start = readme.find("## Library example").expect("a library example section");
    let block = readme[start..].split("```rust\n").nth(1).expect("a rust block");
    let block = block.split("```").next().expect("closed block");
    let body: Vec<&str> = block.lines().filter(|l| !l.starts_with('#')).collect();
    let main_lines: Vec<&str> = main.lines().map(str::trim).collect();
    let mut at = 0;
    for line in body.iter().map(|l| l.trim()).filter(|l| !l.is_empty()) {
        let found = main_lines[at..].iter().position(|m| *m == line);
        assert!(found.is_some(), "README line not in tests/downstream/src/main.rs: {line}");
        at += found.unwrap_or(0) + 1;
    }
    assert!(body.len() > 5, "the README example is the real one");
}
