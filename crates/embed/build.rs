//! With the `builtin` feature: a lookup index over the built-in table's WordPiece vocabulary,
//! made once at build time so that opening the table costs nothing at run time (a Spin request
//! opens it for every query it embeds; building a hash map of its 30,522 tokens cost ~2 ms of
//! every such request in wasm).
//!
//! Writes `$OUT_DIR/wordpiece-index.bin`, integers u32 little-endian: `n + 1` byte offsets
//! into the vocabulary text (token `i` is `vocab[offset[i]..offset[i + 1] - 1]`, the `- 1` being
//! its newline), then the ids of the distinct tokens ordered by their bytes (for equal tokens
//! the last id, as a map filled in id order would keep). `src/wordpiece.rs` reads it in place.

use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let asset = manifest.join("../../assets/embedder/minilm-l6-static-256.bin");
    println!("cargo::rerun-if-changed={}", asset.display());
    println!("cargo::rerun-if-changed=build.rs");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it"));
    let index = if std::env::var_os("CARGO_FEATURE_BUILTIN").is_some() {
        let bytes = std::fs::read(&asset).expect("the built-in embedding table is in the repo");
        index(vocabulary(&bytes))
    } else {
        Vec::new()
    };
    std::fs::write(out.join("wordpiece-index.bin"), index).expect("OUT_DIR is writable");
}

/// The vocabulary text of the table (`scripts/distill_embedder.py` writes its layout).
fn vocabulary(bytes: &[u8]) -> &[u8] {
    let field = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    assert_eq!(&bytes[..8], b"LORESTE1", "the embedding table's magic");
    let vocab_bytes = field(16);
    let vocab = &bytes[20..20 + vocab_bytes];
    std::str::from_utf8(vocab).expect("the vocabulary is UTF-8");
    vocab
}

fn index(vocab: &[u8]) -> Vec<u8> {
    let mut offsets = vec![0u32];
    let mut tokens: Vec<&[u8]> = Vec::new();
    let mut start = 0;
    for token in vocab.split(|&b| b == b'\n') {
        tokens.push(token);
        start += token.len() + 1;
        offsets.push(start as u32);
    }
    let mut ids: Vec<u32> = (0..tokens.len() as u32).collect();
    ids.sort_by(|&a, &b| tokens[a as usize].cmp(tokens[b as usize]).then(b.cmp(&a)));
    ids.dedup_by(|later, earlier| tokens[*later as usize] == tokens[*earlier as usize]);
    offsets
        .iter()
        .chain(&ids)
        .flat_map(|n| n.to_le_bytes())
        .collect()
}
