//! Tidy checks for invariants a reviewer would otherwise repeat: every module says what it owns,
//! the core names no platform crate, the crates keep their layer order, and inside every crate
//! of the workspace (every target: libraries, binaries, examples, tests, benches, fuzz targets,
//! build scripts) no file imports another that imports it back, and HTML is built only by
//! templates that escape. Rust is read with a Rust parser (`syn`: `imports.rs`, `html.rs`).

mod html;
mod imports;

use std::collections::BTreeSet;
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
    "crates/memory/src",
    "crates/records/src",
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
/// the embedders, the directory and the script machine over it; an org's memory, then its
/// records, then the org engine over those; the front over the engine; test support over the front; and the adapters on top. A
/// dev-dependency may also name test support.
const LAYERS: &[(&str, u8)] = &[
    ("lore-meter", 0),
    ("lore-jsregex", 0),
    ("lore-changes", 0),
    ("lore-base", 1),
    ("lore-embed", 2),
    ("lore-directory", 2),
    ("lore-sandbox", 2),
    ("lore-memory", 3),
    ("lore-records", 4),
    ("lore-engine", 5),
    ("lore-front", 6),
    ("lore-testing", 7),
    ("lore", ADAPTERS),
    ("lore-worker", ADAPTERS),
    ("lore-spin", ADAPTERS),
    ("lore-spin-host", ADAPTERS),
    ("lore-fuzz", ADAPTERS),
    ("lore-vector-bench", ADAPTERS),
];

/// The adapters' layer: the native server and CLI (this package), the Worker, the Spin
/// component and its dev host, and the fuzz targets and benches that drive the core.
const ADAPTERS: u8 = 8;

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

/// Every target of every workspace crate: (its name, its root file).
fn targets() -> Vec<(String, PathBuf)> {
    let metadata = metadata();
    let mut out = Vec::new();
    for package in metadata["packages"].as_array().unwrap() {
        for target in package["targets"].as_array().unwrap() {
            let name = format!(
                "{} ({})",
                package["name"].as_str().unwrap(),
                target["name"].as_str().unwrap()
            );
            out.push((name, PathBuf::from(target["src_path"].as_str().unwrap())));
        }
    }
    out
}

/// The circles of one crate, each import inside one with the names it takes.
fn circles_of(root_file: &Path) -> Vec<Vec<String>> {
    let krate = imports::Crate::read(root_file).unwrap_or_else(|e| panic!("{e:#?}"));
    let graph = krate.graph();
    let rel = |f: &PathBuf| f.strip_prefix(root()).unwrap_or(f).display().to_string();
    let mut found = Vec::new();
    for circle in imports::circles(&graph) {
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
    found
}

#[test]
fn no_file_imports_a_file_that_imports_it_back() {
    let mut found = Vec::new();
    let mut files = BTreeSet::new();
    for (name, root_file) in targets() {
        let krate = imports::Crate::read(&root_file).unwrap_or_else(|e| panic!("{name}: {e:#?}"));
        files.extend(krate.files());
        files.extend(krate.test_files().iter().cloned());
        for circle in circles_of(&root_file) {
            found.push((name.clone(), circle));
        }
    }
    assert!(found.is_empty(), "import circles: {found:#?}");
    // Every Rust file of the product's crates and adapters is read as part of some crate.
    let mut unread = Vec::new();
    for dir in [
        "crates",
        "src",
        "wasm",
        "fuzz/fuzz_targets",
        "bench/vector/src",
        "examples",
    ] {
        let mut all = Vec::new();
        rust_files(&root().join(dir), &mut all);
        unread.extend(
            all.into_iter().filter(|f| {
                !files.contains(f) && !f.components().any(|c| c.as_os_str() == "target")
            }),
        );
    }
    assert!(unread.is_empty(), "files no crate reads: {unread:#?}");
}

/// The graph sees a circle through a `use` in a function body, a path in a macro call and a
/// name passed on by a face, and none through a `#[cfg(test)]` module or another crate's path.
#[test]
fn the_import_graph_sees_every_kind_of_import() {
    let dir = std::env::temp_dir().join(format!("lore-tidy-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("src/face")).unwrap();
    let write = |name: &str, text: &str| fs::write(dir.join(name), text).unwrap();
    write(
        "src/lib.rs",
        "//! root\nmod face;\nmod room;\n#[path = \"elsewhere.rs\"]\nmod moved;\n\
         pub struct Root;\n#[cfg(test)]\nmod tests { use crate::room::Room; }\n",
    );
    write(
        "src/face/mod.rs",
        "pub use crate::room::Room;\npub use crate::moved::*;\n",
    );
    // `room` names the root inside a macro; the root names nothing of `room` but in tests.
    write(
        "src/room.rs",
        "pub struct Room;\nfn f() { let _ = format!(\"{:?}\", std::mem::size_of::<crate::Root>()); }\n",
    );
    write(
        "src/elsewhere.rs",
        "pub fn g() { use crate::face::Room; let _ = Room; }\n",
    );
    let read = || imports::Crate::read(&dir.join("src/lib.rs")).unwrap();
    let graph = read().graph();
    let room = dir.join("src/room.rs");
    let moved = dir.join("src/elsewhere.rs");
    assert!(
        graph[&room].contains_key(&dir.join("src/lib.rs")),
        "{graph:#?}"
    );
    // Through the face, toward the definition.
    assert!(graph[&moved].contains_key(&room), "{graph:#?}");
    assert!(!graph[&moved].contains_key(&dir.join("src/face/mod.rs")));
    assert!(imports::circles(&graph).is_empty(), "{graph:#?}");
    // A planted circle: the root takes `g` from the moved file, which takes `Room` back.
    write(
        "src/lib.rs",
        "//! root\nmod face;\nmod room;\n#[path = \"elsewhere.rs\"]\nmod moved;\n\
         pub struct Root;\npub fn h() { crate::face::g() }\n",
    );
    write(
        "src/room.rs",
        "pub struct Room;\nfn f() { let _ = serde_json::json!({ \"a\": crate::h() }); }\n",
    );
    let circles = imports::circles(&read().graph());
    assert_eq!(circles.len(), 1, "{circles:#?}");
    assert!(circles[0].contains(&room) && circles[0].contains(&dir.join("src/lib.rs")));
    fs::remove_dir_all(&dir).unwrap();
}
