//! Guards the layering of the kelp crate's top-level modules (`src/<module>` and
//! `src/<module>.rs`), read from the sources: module `a` depends on `b` when code under `a`
//! names `crate::b` (also inside `use crate::{b, ..}` groups). Comments, doc comments and
//! string literals do not count, so prose may mention any module.
//!
//! Test code counts like the rest: a `#[cfg(test)]` file of a low module that reaches up into
//! a higher one ties that module's tests to the higher module's API, and it is that code a
//! future change has to move. (Inline test modules cannot be told apart without a parser
//! anyway.)
//!
//! The rules:
//! - the module graph is acyclic, so every module can be read, tested and changed with only
//!   what lies below it in mind;
//! - the data path only points down: server → api → shard → partition → storage →
//!   {log, forwarder}. No module of that chain imports one earlier in it, nor a sibling on
//!   its own level;
//! - the storage engines (log, forwarder) sit behind `storage`: api, shard and partition never
//!   name them (the design: "shard, partition and api code never ask which engine runs").
//!   server, which picks the engine at start-up, may.
//!
//! Side modules (protocol, record, error, config, cluster, group, metrics, deadline) only have
//! to keep the graph acyclic.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The data-path chain, top to bottom; modules on one level are siblings.
const CHAIN: &[&[&str]] = &[
    &["server"],
    &["api"],
    &["shard"],
    &["partition"],
    &["storage"],
    &["log", "forwarder"],
];

/// The storage engines, reached only through `storage`.
const ENGINES: &[&str] = &["log", "forwarder"];

/// Modules that must not name an engine directly.
const ENGINE_CLIENTS: &[&str] = &["server", "api", "shard", "partition"];

/// Edges that break the rules and are exempt from them, cycles included; the test fails once
/// an edge here no longer exists, so the list only shrinks. Adding to it needs a reason here.
/// Empty since the storage seam (issue 14) removed the last five.
const PENDING: &[(&str, &str)] = &[];

/// One dependency with where it was first seen, for the failure message.
type Edges = BTreeMap<(String, String), String>;

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `src` with comments and string and char literals blanked out. Newlines are kept so that
/// positions still give the right line.
fn code_only(src: &str) -> String {
    let s: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let blank = |out: &mut String, c: char| out.push(if c == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        let next = s.get(i + 1).copied();
        let prev = if i > 0 { s[i - 1] } else { ' ' };
        if c == '/' && next == Some('/') {
            while i < s.len() && s[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            // Block comments nest in Rust.
            let mut depth = 0;
            while i < s.len() {
                if s[i] == '/' && s.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if s[i] == '*' && s.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, s[i]);
                    i += 1;
                }
            }
        } else if c == 'r' && !is_ident(prev) && matches!(next, Some('"') | Some('#')) {
            // A raw string r"..", r#".."#, or an identifier starting with r.
            let mut j = i + 1;
            while s.get(j) == Some(&'#') {
                j += 1;
            }
            if s.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let hashes = j - i - 1;
            i = j + 1;
            while i < s.len() {
                if s[i] == '"' && (1..=hashes).all(|k| s.get(i + k) == Some(&'#')) {
                    i += 1 + hashes;
                    break;
                }
                blank(&mut out, s[i]);
                i += 1;
            }
        } else if c == '"' {
            i += 1;
            while i < s.len() && s[i] != '"' {
                if s[i] == '\\' {
                    i += 1;
                }
                if let Some(&x) = s.get(i) {
                    blank(&mut out, x);
                }
                i += 1;
            }
            i += 1;
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a), which has no closing quote.
            if next == Some('\\') {
                i += 2;
                while i < s.len() && s[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if s.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// The identifiers that follow each `crate::` in `code` (every first path segment inside a
/// `crate::{..}` group), with their line numbers.
fn crate_refs(code: &str) -> Vec<(String, usize)> {
    let s: Vec<char> = code.chars().collect();
    let pat: Vec<char> = "crate::".chars().collect();
    let line_at = |i: usize| 1 + s[..i].iter().filter(|&&c| c == '\n').count();
    let ident_at = |mut i: usize| {
        while s.get(i).is_some_and(|c| c.is_whitespace()) {
            i += 1;
        }
        let start = i;
        while s.get(i).is_some_and(|&c| is_ident(c)) {
            i += 1;
        }
        (s[start..i].iter().collect::<String>(), i)
    };
    let mut refs = Vec::new();
    let mut i = 0;
    while i + pat.len() <= s.len() {
        let starts = s[i..i + pat.len()] == pat[..] && (i == 0 || !is_ident(s[i - 1]));
        if !starts {
            i += 1;
            continue;
        }
        let line = line_at(i);
        let mut j = i + pat.len();
        while s.get(j).is_some_and(|c| c.is_whitespace()) {
            j += 1;
        }
        if s.get(j) == Some(&'{') {
            // Only the first segment of each item at the group's own depth names a module.
            let mut depth = 0;
            let mut item_start = true;
            while j < s.len() {
                match s[j] {
                    '{' => {
                        depth += 1;
                        item_start = depth == 1;
                        j += 1;
                    }
                    '}' => {
                        depth -= 1;
                        j += 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' => {
                        item_start = depth == 1;
                        j += 1;
                    }
                    c if c.is_whitespace() => j += 1,
                    _ if item_start => {
                        let (name, end) = ident_at(j);
                        refs.push((name, line_at(j)));
                        item_start = false;
                        j = end.max(j + 1);
                    }
                    _ => j += 1,
                }
            }
        } else {
            refs.push((ident_at(j).0, line));
        }
        i = j.max(i + 1);
    }
    refs
}

/// The crate's top-level modules, from the `mod` lines of src/lib.rs.
fn top_modules() -> BTreeSet<String> {
    let lib = fs::read_to_string(src_dir().join("lib.rs")).expect("read src/lib.rs");
    code_only(&lib)
        .split(';')
        .filter_map(|stmt| {
            let words: Vec<&str> = stmt.split_whitespace().collect();
            let at = words.iter().position(|w| *w == "mod")?;
            // `mod x { .. }` inline modules have no ';' right after the name.
            (at + 2 == words.len()).then(|| words[at + 1].to_string())
        })
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// Every dependency between distinct top-level modules, with the first place it shows.
fn module_graph(modules: &BTreeSet<String>) -> Edges {
    let src = src_dir();
    let mut edges = Edges::new();
    for module in modules {
        let mut files = Vec::new();
        let file = src.join(format!("{module}.rs"));
        if file.is_file() {
            files.push(file);
        }
        let dir = src.join(module);
        if dir.is_dir() {
            rust_files(&dir, &mut files);
        }
        assert!(!files.is_empty(), "no source for module {module}");
        files.sort();
        for f in files {
            let text = fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            for (to, line) in crate_refs(&code_only(&text)) {
                if &to != module && modules.contains(&to) {
                    let at = format!("{}:{line}", f.strip_prefix(&src).unwrap_or(&f).display());
                    edges.entry((module.clone(), to)).or_insert(at);
                }
            }
        }
    }
    edges
}

/// A cycle of `edges` as a path whose last node is its first, if there is one.
fn find_cycle(edges: &BTreeSet<(String, String)>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        out: &BTreeMap<&str, Vec<&str>>,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == n) {
            let mut cycle = path[at..].to_vec();
            cycle.push(n.to_string());
            return Some(cycle);
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.to_string());
        for next in out.get(n).into_iter().flatten() {
            if let Some(c) = visit(next, out, done, path) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.to_string());
        None
    }
    let mut out: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in edges {
        out.entry(a).or_default().push(b);
    }
    let mut done = BTreeSet::new();
    out.keys()
        .find_map(|n| visit(n, &out, &mut done, &mut Vec::new()))
}

/// Level of `m` in the data-path chain, if it is on it.
fn level(m: &str) -> Option<usize> {
    CHAIN.iter().position(|l| l.contains(&m))
}

/// Every rule broken by `edges` (PENDING edges excepted).
fn violations(edges: &Edges) -> Vec<String> {
    let pending = |a: &str, b: &str| PENDING.contains(&(a, b));
    let mut bad = Vec::new();
    for ((a, b), at) in edges {
        if pending(a, b) {
            continue;
        }
        if let (Some(la), Some(lb)) = (level(a), level(b)) {
            if lb <= la {
                bad.push(format!("{a} → {b} ({at}): the data path only points down"));
            }
        }
        if ENGINE_CLIENTS.contains(&a.as_str()) && ENGINES.contains(&b.as_str()) {
            bad.push(format!(
                "{a} → {b} ({at}): engines are reached through storage"
            ));
        }
    }
    let kept = edges
        .keys()
        .filter(|(a, b)| !pending(a, b))
        .cloned()
        .collect();
    if let Some(cycle) = find_cycle(&kept) {
        let steps: Vec<String> = cycle
            .windows(2)
            .map(|w| {
                let at = &edges[&(w[0].clone(), w[1].clone())];
                format!("{} → {} ({at})", w[0], w[1])
            })
            .collect();
        bad.push(format!("cycle: {}", steps.join(", ")));
    }
    bad
}

#[test]
fn modules_keep_their_layers() {
    let modules = top_modules();
    let edges = module_graph(&modules);
    // A scanner that silently found nothing would pass every rule.
    for known in [("server", "api"), ("api", "shard")] {
        let key = (known.0.to_string(), known.1.to_string());
        assert!(edges.contains_key(&key), "the scan misses {known:?}");
    }
    let mut bad = violations(&edges);
    for (a, b) in PENDING {
        if !edges.contains_key(&(a.to_string(), b.to_string())) {
            bad.push(format!("{a} → {b} is gone: remove it from PENDING"));
        }
    }
    let graph: Vec<String> = edges.keys().map(|(a, b)| format!("{a} → {b}")).collect();
    assert!(
        bad.is_empty(),
        "layering broken:\n  {}\nmodule graph:\n  {}",
        bad.join("\n  "),
        graph.join("\n  ")
    );
}

#[test]
fn scanner_reads_paths_groups_and_skips_prose() {
    let src = r##"
        // crate::server in a comment
        /* crate::api /* nested crate::shard */ still comment crate::group */
        /// crate::metrics in a doc comment
        use crate::{log::{A, b}, self, record::X as Y};
        let s = "crate::config";
        let r = r#"crate::deadline"#;
        let c = '"'; let l: &'static str = crate::error::NAME;
        fn f<'a>(x: &'a u8) -> crate::cluster::Cluster { todo() }
    "##;
    let names: Vec<String> = crate_refs(&code_only(src))
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names, ["log", "self", "record", "error", "cluster"]);
}

#[test]
fn a_cycle_is_found_and_printed_in_order() {
    let edges: BTreeSet<(String, String)> = [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(find_cycle(&edges).expect("a cycle"), ["a", "b", "c", "a"]);
    let acyclic: BTreeSet<(String, String)> = [("a", "b"), ("a", "c"), ("b", "c")]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(find_cycle(&acyclic), None);
}
