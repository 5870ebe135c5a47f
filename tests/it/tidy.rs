//! Tidy checks for invariants a reviewer would otherwise repeat: every module says what it owns,
//! the core names no platform crate, the crates keep their layer order, and inside every crate
//! no file imports another that imports it back.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The sources of the product's own crates below the adapters, and lore-testing, which only
/// tests link. The adapters (this package's `src/`, `wasm/`) are checked apart.
const CORE_DIRS: &[&str] = &[
    "crates/base/src",
    "crates/embed/src",
    "crates/directory/src",
    "crates/sandbox/src",
    "crates/engine/src",
    "crates/front/src",
    "crates/testing/src",
];

fn sources() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in CORE_DIRS {
        rust_files(&root().join(dir), &mut files);
    }
    files.sort();
    files
}

#[test]
fn every_module_starts_with_a_doc_comment() {
    let undocumented: Vec<_> = sources()
        .into_iter()
        .filter(|p| {
            !fs::read_to_string(p)
                .unwrap()
                .trim_start()
                .starts_with("//!")
        })
        .collect();
    assert!(
        undocumented.is_empty(),
        "modules without a //! line: {undocumented:?}"
    );
}

#[test]
fn the_core_names_no_platform_crate() {
    const PLATFORM: &[&str] = &[
        "tokio::", "hyper", "rusqlite", "worker::", "spin_sdk", "wasmtime", "std::fs", "std::net",
    ];
    let mut offences = Vec::new();
    for path in sources() {
        let text = fs::read_to_string(&path).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for name in PLATFORM {
                if code.contains(name) {
                    offences.push(format!("{}:{}: {name}", path.display(), n + 1));
                }
            }
        }
    }
    assert!(
        offences.is_empty(),
        "platform code in the core: {offences:#?}"
    );
}

#[test]
fn no_file_grows_past_a_reviewable_size() {
    for path in sources() {
        let lines = fs::read_to_string(&path).unwrap().lines().count();
        assert!(
            lines <= 800,
            "{} has {lines} lines; split the concept into its own module",
            path.display()
        );
    }
}

/// Every crate of the workspace on its layer. A crate depends (normal or build dependency)
/// only on crates of lower layers, so the compiler keeps the order: the base under everything;
/// the embedders, the directory and the script machine over it; the org engine over those; the
/// front over the engine; test support over the front; and the adapters on top. A
/// dev-dependency may also name test support.
const LAYERS: &[(&str, u8)] = &[
    ("lore-meter", 0),
    ("lore-jsregex", 0),
    ("lore-changes", 0),
    ("lore-base", 1),
    ("lore-embed", 2),
    ("lore-directory", 2),
    ("lore-sandbox", 2),
    ("lore-engine", 3),
    ("lore-front", 4),
    ("lore-testing", 5),
    ("lore", ADAPTERS),
    ("lore-worker", ADAPTERS),
    ("lore-spin", ADAPTERS),
    ("lore-spin-host", ADAPTERS),
    ("lore-fuzz", ADAPTERS),
    ("lore-vector-bench", ADAPTERS),
];

/// The adapters' layer: the native server and CLI (this package), the Worker, the Spin
/// component and its dev host, and the fuzz targets and benches that drive the core.
const ADAPTERS: u8 = 6;

/// Crates that reach an operating system or a host: only the adapters depend on them.
const PLATFORM_CRATES: &[&str] = &[
    "tokio",
    "hyper",
    "hyper-util",
    "rusqlite",
    "worker",
    "spin-sdk",
    "wasmtime",
    "wasm-bindgen",
    "js-sys",
    "ureq",
    "getrandom",
    "mimalloc",
    "clap",
    "tracing-subscriber",
    "lore-changes",
];

fn metadata() -> serde_json::Value {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root())
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn layer(name: &str) -> Option<u8> {
    LAYERS.iter().find(|(n, _)| *n == name).map(|(_, l)| *l)
}

#[test]
fn every_crate_depends_only_on_the_layers_below_it() {
    let metadata = metadata();
    let mut offences = Vec::new();
    for package in metadata["packages"].as_array().unwrap() {
        let name = package["name"].as_str().unwrap();
        let Some(own) = layer(name) else {
            offences.push(format!(
                "{name} is a workspace crate with no layer in LAYERS"
            ));
            continue;
        };
        for dep in package["dependencies"].as_array().unwrap() {
            let dep_name = dep["name"].as_str().unwrap();
            let dev = dep["kind"].as_str() == Some("dev");
            if let Some(theirs) = layer(dep_name) {
                let allowed = theirs < own || (dev && dep_name == "lore-testing");
                if !allowed {
                    offences.push(format!(
                        "{name} (layer {own}) depends on {dep_name} (layer {theirs})"
                    ));
                }
            }
            let platform = PLATFORM_CRATES
                .iter()
                .any(|p| dep_name == *p || dep_name.starts_with(&format!("{p}-")));
            if platform && !dev && own < ADAPTERS {
                offences.push(format!(
                    "{name} (layer {own}) depends on the platform crate {dep_name}"
                ));
            }
        }
    }
    assert!(
        offences.is_empty(),
        "against the layer order: {offences:#?}"
    );
}

/// One Rust file and the module path it defines (`src/records/mod.rs` -> `records`).
struct Module {
    path: Vec<String>,
    file: PathBuf,
}

fn modules(src: &Path) -> Vec<Module> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|file| {
            let rel = file.strip_prefix(src).unwrap().with_extension("");
            let mut path: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(
                path.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                path.pop();
            }
            Module { path, file }
        })
        .collect()
}

/// The code of a file without comments, string literals and its `#[cfg(test)]` tail.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '"' => {
                let mut escaped = false;
                for c in chars.by_ref() {
                    if !escaped && c == '"' {
                        break;
                    }
                    escaped = !escaped && c == '\\';
                }
                out.push_str("\"\"");
            }
            c => out.push(c),
        }
    }
    out
}

/// Every path the code names with `crate::`, `super::`, `self::`, or a child module's name
/// first, as a module path from the crate root; `use` trees with braces are expanded.
fn named_paths(code: &str, here: &[String], children: &BTreeSet<String>) -> Vec<Vec<String>> {
    let tokens: Vec<String> = {
        let mut tokens = Vec::new();
        let mut word = String::new();
        let mut chars = code.chars().peekable();
        while let Some(c) = chars.next() {
            if c.is_alphanumeric() || c == '_' {
                word.push(c);
                continue;
            }
            if !word.is_empty() {
                tokens.push(std::mem::take(&mut word));
            }
            if c == ':' && chars.peek() == Some(&':') {
                chars.next();
                tokens.push("::".into());
            } else if "{},;*".contains(c) {
                tokens.push(c.to_string());
            } else if !c.is_whitespace() {
                tokens.push(" ".into());
            }
        }
        tokens
    };
    let mut found = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let first = tokens[i].as_str();
        let starts =
            (first == "crate" || first == "super" || first == "self" || children.contains(first))
                && tokens.get(i + 1).map(String::as_str) == Some("::")
                && (i == 0 || tokens[i - 1] != "::");
        if !starts {
            i += 1;
            continue;
        }
        let base: Vec<String> = match first {
            "crate" => Vec::new(),
            "self" => here.to_vec(),
            "super" => here[..here.len().saturating_sub(1)].to_vec(),
            child => {
                let mut b = here.to_vec();
                b.push(child.to_string());
                b
            }
        };
        i = tree(&tokens, i + 2, base, &mut found);
    }
    found
}

/// Reads a `use` tree or a path from `tokens[i]` on, under `prefix`; returns where it ends.
fn tree(
    tokens: &[String],
    mut i: usize,
    mut prefix: Vec<String>,
    found: &mut Vec<Vec<String>>,
) -> usize {
    loop {
        match tokens.get(i).map(String::as_str) {
            Some("super") => {
                prefix.pop();
                i += 1;
            }
            Some("{") => {
                i += 1;
                loop {
                    i = tree(tokens, i, prefix.clone(), found);
                    match tokens.get(i).map(String::as_str) {
                        Some(",") => i += 1,
                        Some("}") => return i + 1,
                        _ => return i,
                    }
                }
            }
            Some("self") => {
                found.push(prefix.clone());
                return i + 1;
            }
            Some(word) if word.chars().all(|c| c.is_alphanumeric() || c == '_') => {
                prefix.push(word.to_string());
                i += 1;
            }
            _ => {
                found.push(prefix);
                return i;
            }
        }
        if tokens.get(i).map(String::as_str) == Some("::") {
            i += 1;
        } else {
            found.push(prefix);
            return i;
        }
    }
}

/// What a module file says of the names it holds: the items it defines, and the names it
/// passes on (`pub use`) with the path each comes from. A file that only passes a name on is
/// a face, not the name's room: an import of the name counts toward the file that defines it.
#[derive(Default)]
struct Names {
    defined: BTreeSet<String>,
    passed_on: BTreeMap<String, Vec<String>>,
}

/// The `pub use` statements of `code` (any visibility but private), cut out of it, and what
/// each passes on: (exported name, path), with `as` honoured and `self` resolved.
fn cut_reexports(code: &str, here: &[String]) -> (String, Vec<(String, Vec<String>)>) {
    let mut rest = String::new();
    let mut found = Vec::new();
    let mut text = code;
    while let Some(start) = find_pub_use(text) {
        rest.push_str(&text[..start]);
        let end = text[start..]
            .find(';')
            .map_or(text.len(), |e| start + e + 1);
        let stmt = &text[start..end];
        let tree = stmt[stmt.find(" use ").map_or(0, |u| u + 5)..]
            .trim_end_matches(';')
            .trim();
        flatten_use(tree, &[], &mut found);
        text = &text[end..];
    }
    rest.push_str(text);
    let found = found
        .into_iter()
        .filter_map(|(name, path)| {
            let mut resolved: Vec<String> = match path.first().map(String::as_str) {
                Some("crate") => Vec::new(),
                Some("self") => here.to_vec(),
                Some("super") => here[..here.len().saturating_sub(1)].to_vec(),
                // A child module of this file.
                Some(_) => here.to_vec(),
                None => return None,
            };
            let skip = usize::from(matches!(
                path.first().map(String::as_str),
                Some("crate" | "self" | "super")
            ));
            for seg in &path[skip..] {
                if seg == "super" {
                    resolved.pop();
                } else {
                    resolved.push(seg.clone());
                }
            }
            Some((name, resolved))
        })
        .collect();
    (rest, found)
}

/// Where the next `pub use` / `pub(crate) use` / `pub(super) use` statement starts.
fn find_pub_use(text: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = text[from..].find("pub") {
        let at = from + i;
        let before_ok = at == 0
            || !text[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_');
        let after = &text[at + 3..];
        let after = match after.strip_prefix('(') {
            Some(a) => a.split_once(')').map_or("", |(_, r)| r),
            None => after,
        };
        if before_ok && after.trim_start().starts_with("use ") {
            return Some(at);
        }
        from = at + 3;
    }
    None
}

/// Flattens a use tree (`a::{b, c::d as e}`) into (exported name, path) pairs.
fn flatten_use(tree: &str, prefix: &[String], out: &mut Vec<(String, Vec<String>)>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let head: Vec<String> = tree[..open]
            .split("::")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        let mut base = prefix.to_vec();
        base.extend(head);
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let mut depth = 0;
        let mut start = 0;
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    flatten_use(&inner[start..i], &base, out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        flatten_use(&inner[start..], &base, out);
        return;
    }
    if tree.is_empty() || tree == "*" || tree.ends_with("::*") {
        return;
    }
    let (path, alias) = match tree.split_once(" as ") {
        Some((p, a)) => (p.trim(), Some(a.trim())),
        None => (tree, None),
    };
    let mut full = prefix.to_vec();
    full.extend(path.split("::").map(|s| s.trim().to_string()));
    if full.last().is_some_and(|l| l == "self") {
        full.pop();
    }
    let name = alias
        .map(str::to_string)
        .or_else(|| full.last().cloned())
        .unwrap_or_default();
    if name != "_" {
        out.push((name, full));
    }
}

/// The items `code` defines by name.
fn defined_names(code: &str) -> BTreeSet<String> {
    let words: Vec<&str> = code
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '!'))
        .filter(|w| !w.is_empty())
        .collect();
    let mut out = BTreeSet::new();
    for pair in words.windows(2) {
        if matches!(
            pair[0],
            "fn" | "struct"
                | "enum"
                | "trait"
                | "type"
                | "const"
                | "static"
                | "union"
                | "mod"
                | "macro_rules!"
        ) {
            out.insert(pair[1].to_string());
        }
    }
    out
}

/// The import graph among one crate's files: file -> the files whose names it takes. A path
/// counts toward the file that defines what it names, seen through files that only pass the
/// name on (`pub use`); a name the crate root only aliases (`use lore_base::error;`) is another
/// crate's, and no edge.
fn file_graph(src: &Path) -> BTreeMap<PathBuf, BTreeMap<PathBuf, BTreeSet<String>>> {
    let modules = modules(src);
    let by_path: BTreeMap<&[String], &PathBuf> = modules
        .iter()
        .map(|m| (m.path.as_slice(), &m.file))
        .collect();
    let mut codes: BTreeMap<&PathBuf, String> = BTreeMap::new();
    let mut names: BTreeMap<&PathBuf, Names> = BTreeMap::new();
    for module in &modules {
        let code = code_of(&fs::read_to_string(&module.file).unwrap());
        let (rest, passed_on) = cut_reexports(&code, &module.path);
        names.insert(
            &module.file,
            Names {
                defined: defined_names(&rest),
                passed_on: passed_on.into_iter().collect(),
            },
        );
        codes.insert(&module.file, rest);
    }
    // The file a path from the crate root names, if it is one of this crate's.
    let resolve = |path: &[String]| -> Option<PathBuf> {
        let mut path = path.to_vec();
        for _ in 0..8 {
            let (n, file) = (0..=path.len())
                .rev()
                .find_map(|n| by_path.get(&path[..n]).map(|f| (n, *f)))?;
            let Some(next) = path.get(n) else {
                return Some(file.clone());
            };
            let held = &names[file];
            if held.defined.contains(next) {
                return Some(file.clone());
            }
            match held.passed_on.get(next) {
                Some(from) => {
                    let mut again = from.clone();
                    again.extend(path[n + 1..].iter().cloned());
                    path = again;
                }
                None if n == 0 => return None,
                None => return Some(file.clone()),
            }
        }
        None
    };
    let mut graph = BTreeMap::new();
    for module in &modules {
        let children: BTreeSet<String> = modules
            .iter()
            .filter(|m| m.path.len() == module.path.len() + 1 && m.path.starts_with(&module.path))
            .map(|m| m.path.last().unwrap().clone())
            .collect();
        let mut targets: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
        for path in named_paths(&codes[&module.file], &module.path, &children) {
            if let Some(target) = resolve(&path)
                && target != module.file
            {
                let name = path.last().cloned().unwrap_or_default();
                targets.entry(target).or_default().insert(name);
            }
        }
        graph.insert(module.file.clone(), targets);
    }
    graph
}

/// The files that lie on a circle of imports (strongly connected components of two or more).
fn circles(
    graph: &BTreeMap<PathBuf, BTreeMap<PathBuf, BTreeSet<String>>>,
) -> Vec<BTreeSet<PathBuf>> {
    let reach = |from: &PathBuf| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(f) = stack.pop() {
            for t in graph.get(&f).into_iter().flat_map(BTreeMap::keys) {
                if seen.insert(t.clone()) {
                    stack.push(t.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&PathBuf, BTreeSet<PathBuf>> =
        graph.keys().map(|f| (f, reach(f))).collect();
    let mut out: Vec<BTreeSet<PathBuf>> = Vec::new();
    for (f, from_f) in &reaches {
        if !from_f.contains(*f) || out.iter().any(|c| c.contains(*f)) {
            continue;
        }
        let circle: BTreeSet<PathBuf> = from_f
            .iter()
            .filter(|g| reaches.get(g).is_some_and(|r| r.contains(*f)))
            .cloned()
            .collect();
        out.push(circle);
    }
    out
}

/// Every crate's sources: the product's crates, test support, the layer-0 crates and the
/// native adapter (this package).
const CRATE_DIRS: &[&str] = &[
    "crates/meter/src",
    "crates/jsregex/src",
    "crates/changes/src",
    "crates/base/src",
    "crates/embed/src",
    "crates/directory/src",
    "crates/sandbox/src",
    "crates/engine/src",
    "crates/front/src",
    "crates/testing/src",
    "src",
];

#[test]
fn no_file_imports_a_file_that_imports_it_back() {
    let mut found = Vec::new();
    let rel = |f: &PathBuf| f.strip_prefix(root()).unwrap().display().to_string();
    for dir in CRATE_DIRS {
        let graph = file_graph(&root().join(dir));
        for circle in circles(&graph) {
            // Each import inside the circle, with the names it takes.
            let mut ties = Vec::new();
            for from in &circle {
                for (to, names) in &graph[from] {
                    if circle.contains(to) {
                        let names: Vec<&str> = names.iter().map(String::as_str).collect();
                        ties.push(format!(
                            "{} -> {}: {}",
                            rel(from),
                            rel(to),
                            names.join(", ")
                        ));
                    }
                }
            }
            found.push(ties);
        }
    }
    assert!(found.is_empty(), "import circles: {found:#?}");
}

/// The import graph sees through a file that only passes names on, and not through one that
/// defines them.
#[test]
fn the_import_graph_counts_a_name_toward_its_definition() {
    let (rest, passed) = cut_reexports(
        "pub use a::{B, c::D as E};\npub(crate) use self::f::G;\nuse h::I;\nfn j() {}",
        &["m".to_string()],
    );
    assert_eq!(
        passed,
        vec![
            ("B".to_string(), vec!["m".into(), "a".into(), "B".into()]),
            (
                "E".to_string(),
                vec!["m".into(), "a".into(), "c".into(), "D".into()]
            ),
            ("G".to_string(), vec!["m".into(), "f".into(), "G".into()]),
        ]
    );
    assert!(rest.contains("use h::I;") && !rest.contains("pub use"));
    assert_eq!(defined_names(&rest), BTreeSet::from(["j".to_string()]));
}
