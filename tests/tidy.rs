//! Tidy checks for invariants a reviewer would otherwise repeat: every module says what it owns,
//! and the core names no platform crate.

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

fn sources() -> Vec<PathBuf> {
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
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
        if path.components().any(|c| c.as_os_str() == "native") {
            continue;
        }
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
