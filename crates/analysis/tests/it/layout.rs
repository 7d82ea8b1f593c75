//! The house rules of CONTRIBUTING.md, "Where the analysis lives": no
//! import circle between the analysis' folders nor between the modules
//! of one folder, and no source file of the workspace over 900 lines
//! before its tests.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Lines a source file may hold before its tests.
const MAX_LINES: usize = 900;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The lines before a file's first top-level `#[cfg(test)]`.
fn lines_before_tests(text: &str) -> usize {
    text.lines().take_while(|l| *l != "#[cfg(test)]").count()
}

#[test]
fn no_source_file_is_over_900_lines_before_its_tests() {
    let mut files = Vec::new();
    for krate in std::fs::read_dir(workspace().join("crates")).unwrap() {
        let src = krate.unwrap().path().join("src");
        if src.is_dir() {
            rust_files(&src, &mut files);
        }
    }
    assert!(files.len() > 50, "{} files", files.len());
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let n = lines_before_tests(&std::fs::read_to_string(f).unwrap());
            (n > MAX_LINES).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "over {MAX_LINES} lines before the tests: {long:?}"
    );
}

#[test]
fn lines_before_tests_stop_at_the_test_module() {
    assert_eq!(lines_before_tests("a\nb\n#[cfg(test)]\nmod tests {}\n"), 2);
    assert_eq!(lines_before_tests("a\n    #[cfg(test)]\nb\n"), 3);
}

/// The module paths a line of code names: `crate::a::b…` gives `[a, b]`,
/// and `super::…` (also `super::{x, y::z}`) gives its first names with
/// `super` kept in front, for the caller to resolve.
fn named_paths(line: &str) -> Vec<Vec<String>> {
    // `a::b::C` and no further: a name not followed by `::` ends it.
    let ident = |mut s: &str| -> Vec<String> {
        let mut names = Vec::new();
        loop {
            let n = s
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(s.len());
            if n == 0 {
                break;
            }
            names.push(s[..n].to_string());
            match s[n..].strip_prefix("::") {
                Some(rest) => s = rest,
                None => break,
            }
        }
        names
    };
    let mut out = Vec::new();
    for (at, _) in line.match_indices("crate::") {
        let rest = &line[at + "crate::".len()..];
        out.push(ident(rest));
    }
    for (at, _) in line.match_indices("super::") {
        // `super::super::x` is read from its first `super`.
        if line[..at].ends_with("super::") {
            continue;
        }
        let mut rest = &line[at..];
        let mut prefix = Vec::new();
        while let Some(r) = rest.strip_prefix("super::") {
            prefix.push("super".to_string());
            rest = r;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut entry = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.push([prefix.clone(), ident(entry.trim())].concat());
                        entry.clear();
                        continue;
                    }
                    _ => {}
                }
                if depth == 0 {
                    entry.push(c);
                }
            }
            out.push([prefix.clone(), ident(entry.trim())].concat());
        } else {
            out.push([prefix, ident(rest)].concat());
        }
    }
    out
}

#[test]
fn named_paths_read_crate_and_super_groups() {
    assert_eq!(
        named_paths("use crate::gate::queue::Obs; x(super::super::hit::f)"),
        vec![
            vec!["gate", "queue", "Obs"],
            vec!["super", "super", "hit", "f"]
        ]
    );
    assert_eq!(
        named_paths("use super::{Dep, kept::{A, B}, other};"),
        vec![
            vec!["super", "Dep"],
            vec!["super", "kept"],
            vec!["super", "other"]
        ]
    );
}

/// A cycle in `edges`, if any, as its nodes in order.
fn cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(n) {
            Some(2) => return None,
            Some(1) => {
                let from = stack.iter().position(|s| s == n).unwrap();
                return Some(stack[from..].to_vec());
            }
            _ => {}
        }
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for m in edges.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, edges, state, stack) {
                return Some(c);
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in edges.keys() {
        if let Some(c) = visit(n, edges, &mut state, &mut Vec::new()) {
            return Some(c);
        }
    }
    None
}

#[test]
fn a_cycle_is_found_and_a_chain_is_not() {
    let mut e: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    e.entry("a".into()).or_default().insert("b".into());
    e.entry("b".into()).or_default().insert("c".into());
    assert_eq!(cycle(&e), None);
    e.entry("c".into()).or_default().insert("a".into());
    assert_eq!(cycle(&e).map(|c| c.len()), Some(3));
}

#[test]
fn the_analysis_has_no_import_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    // Each file's module path from `src`: `gate/queue.rs` is `[gate,
    // queue]`, `peak/throughput/hit.rs` `[peak, throughput, hit]`,
    // `predict/mod.rs` `[predict]`.
    // Test code (a `tests.rs` file, a file's lines after its
    // `#[cfg(test)]`) may use any module.
    let modules: Vec<(Vec<String>, String)> = files
        .iter()
        .filter(|f| f.file_stem().is_some_and(|s| s != "tests"))
        .map(|f| {
            let rel = f.strip_prefix(&src).unwrap().with_extension("");
            let mut path: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if path.last().is_some_and(|l| l == "mod" || l == "lib") {
                path.pop();
            }
            (path, std::fs::read_to_string(f).unwrap())
        })
        .collect();
    let known: BTreeSet<Vec<String>> = modules.iter().map(|(p, _)| p.clone()).collect();
    let mut folders: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut inside: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, text) in &modules {
        let Some(top) = path.first() else { continue };
        for line in text.lines().take_while(|l| *l != "#[cfg(test)]") {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            for named in named_paths(code) {
                // Resolve `super` against the file's own module path.
                let ups = named.iter().take_while(|s| *s == "super").count();
                let target: Vec<String> = if ups > 0 {
                    if ups > path.len() {
                        continue;
                    }
                    [&path[..path.len() - ups], &named[ups..]].concat()
                } else {
                    named
                };
                let Some(ttop) = target.first() else { continue };
                if !known.contains(&vec![ttop.clone()]) {
                    continue;
                }
                if ttop != top {
                    folders.entry(top.clone()).or_default().insert(ttop.clone());
                } else if path.len() >= 2 && target.len() >= 2 {
                    // Two modules of one folder: `gate::queue` and
                    // `gate::reconstruct` (a file's children belong to it).
                    let (a, b) = (&path[1], &target[1]);
                    if a != b && known.contains(&vec![top.clone(), b.clone()]) {
                        inside
                            .entry(format!("{top}::{a}"))
                            .or_default()
                            .insert(format!("{top}::{b}"));
                    }
                }
            }
        }
    }
    // The walk finds the folders' known dependencies.
    assert!(
        folders.get("report").is_some_and(|d| d.contains("gate")),
        "{folders:?}"
    );
    assert!(!inside.is_empty(), "{inside:?}");
    assert_eq!(cycle(&folders), None, "a circle between folders");
    assert_eq!(cycle(&inside), None, "a circle inside a folder");
}
