//! The plain dense baseline of the retrieval benches: every document embedded with
//! all-MiniLM-L6-v2 (the transformer embedder lore runs, weights from `lore::model`), each query
//! ranked against all of them by exact cosine, nothing else. With `"windows": true` a document
//! is embedded as lore embeds a memory (`semantic::pieces`: a long text in windows) and scores
//! its best piece. Reads `{"docs": [text], "queries": [text], "k": n, "windows"?: bool}` on
//! stdin, writes
//! `{"rankings": [[doc index, best first]], "scores": [[cosine]], "docs_per_second": x}` on
//! stdout.
#![allow(clippy::disallowed_methods)]

use std::io::Read;
use std::time::Instant;

use lore_memory::semantic;
use serde_json::{Value, json};

fn main() -> anyhow::Result<()> {
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input)?;
    let input: Value = serde_json::from_str(&input)?;
    let texts = |field: &str| -> Vec<String> {
        input[field]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|t| t.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (docs, queries) = (texts("docs"), texts("queries"));
    let k = input["k"].as_u64().unwrap_or(10) as usize;
    let pieces: Vec<Vec<String>> = if input["windows"].as_bool() == Some(true) {
        docs.iter().map(|d| semantic::pieces(d)).collect()
    } else {
        docs.iter().map(|d| vec![d.clone()]).collect()
    };
    let model = lore::model::load(&lore::model::ensure(true)?)?;
    let started = Instant::now();
    let flat: Vec<String> = pieces.iter().flatten().cloned().collect();
    let mut flat_vectors = Vec::with_capacity(flat.len());
    for chunk in flat.chunks(64) {
        flat_vectors.extend(model.embed(chunk)?);
    }
    let mut flat_vectors = flat_vectors.into_iter();
    let vectors: Vec<Vec<Vec<f32>>> = pieces
        .iter()
        .map(|p| flat_vectors.by_ref().take(p.len()).collect())
        .collect();
    let docs_per_second = docs.len() as f64 / started.elapsed().as_secs_f64();
    let cosine = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
    let (mut rankings, mut scores) = (Vec::new(), Vec::new());
    for q in queries.chunks(64) {
        for qv in model.embed(q)? {
            let mut scored: Vec<(usize, f32)> = vectors
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    let best = v.iter().map(|p| cosine(p, &qv)).fold(f32::MIN, f32::max);
                    (i, best)
                })
                .collect();
            scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            rankings.push(scored.iter().take(k).map(|(i, _)| *i).collect::<Vec<_>>());
            scores.push(scored.iter().take(k).map(|(_, s)| *s).collect::<Vec<_>>());
        }
    }
    println!(
        "{}",
        json!({"rankings": rankings, "scores": scores, "docs_per_second": docs_per_second})
    );
    Ok(())
}
