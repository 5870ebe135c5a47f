//! Throughput and sanity of the built-in embedder, on one thread.
//!
//! ```sh
//! cargo run --release --example embed_bench
//! ```
//!
//! Prints texts per second for 20-word memories (windows over the words of the evaluation
//! memories), then how each query of `scripts/embedder-*.tsv` ranks the memory that answers
//! it among all the file's memories, with the mean cosine of related and unrelated pairs.
#![allow(clippy::disallowed_methods)]

use std::time::Instant;

use lore_embed::builtin::{BuiltinEmbedder, MODEL_ID};

/// The query/memory pairs the distillation is scored on.
const EVAL: &str = include_str!("../scripts/embedder-eval.tsv");
const HELD_OUT: &str = include_str!("../scripts/embedder-heldout.tsv");

fn pairs(tsv: &str) -> Vec<(&str, &str)> {
    tsv.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split_once('\t'))
        .collect()
}

/// `n` twenty-word memories: windows over the words of the evaluation memories (names,
/// numbers, punctuation and words the vocabulary splits included), each a different window.
fn memories(n: usize) -> Vec<String> {
    let words: Vec<&str> = pairs(EVAL)
        .into_iter()
        .chain(pairs(HELD_OUT))
        .flat_map(|(_, memory)| memory.split_whitespace())
        .collect();
    (0..n)
        .map(|i| {
            (0..20)
                .map(|j| words[(i * 7 + j) % words.len()])
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn main() {
    let embedder = BuiltinEmbedder::new();
    let started = Instant::now();
    // The first embedding parses the table.
    embedder.embed_text("");
    println!(
        "{MODEL_ID}: table parsed in {:.1} ms",
        started.elapsed().as_secs_f64() * 1e3
    );

    let texts = memories(50_000);
    let mut checksum = 0.0f32;
    for text in &texts[..1000] {
        checksum += embedder.embed_text(text)[0];
    }
    let started = Instant::now();
    for text in &texts {
        checksum += embedder.embed_text(text)[0];
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "{} texts of 20 words in {seconds:.3} s: {:.0} texts/s on one thread ({:.1} µs each; checksum {checksum:.3})",
        texts.len(),
        texts.len() as f64 / seconds,
        seconds * 1e6 / texts.len() as f64,
    );

    for (name, tsv, table_rows) in [
        ("scripts/embedder-eval.tsv", EVAL, 12),
        ("scripts/embedder-heldout.tsv", HELD_OUT, 0),
    ] {
        report(&embedder, name, &pairs(tsv), table_rows);
    }
}

/// Each query against every memory of the file: the first `table_rows` pairs as a table, then
/// the mean reciprocal rank of each query's own memory and the mean cosines.
fn report(embedder: &BuiltinEmbedder, name: &str, pairs: &[(&str, &str)], table_rows: usize) {
    let queries: Vec<_> = pairs.iter().map(|(q, _)| embedder.embed_text(q)).collect();
    let stored: Vec<_> = pairs.iter().map(|(_, m)| embedder.embed_text(m)).collect();
    let n = pairs.len();
    println!("\n{name}: {n} pairs");
    if table_rows > 0 {
        println!("\n| query | memory | cosine | best other memory | rank of own memory |");
        println!("| --- | --- | --- | --- | --- |");
    }
    let mut unrelated = Vec::new();
    let mut reciprocal_ranks = 0.0;
    let mut first = 0;
    for i in 0..n {
        let own = cosine(&queries[i], &stored[i]);
        let others: Vec<f32> = (0..n)
            .filter(|&j| j != i)
            .map(|j| cosine(&queries[i], &stored[j]))
            .collect();
        let best = others.iter().cloned().fold(f32::MIN, f32::max);
        let rank = 1 + others.iter().filter(|&&s| s > own).count();
        reciprocal_ranks += 1.0 / rank as f32;
        first += usize::from(rank == 1);
        unrelated.extend(others);
        if i < table_rows {
            println!(
                "| {} | {} | {own:.3} | {best:.3} | {rank} of {n} |",
                pairs[i].0, pairs[i].1
            );
        }
    }
    let related: f32 = (0..n).map(|i| cosine(&queries[i], &stored[i])).sum::<f32>() / n as f32;
    let mean_unrelated = unrelated.iter().sum::<f32>() / unrelated.len() as f32;
    println!(
        "own memory first for {first} of {n} queries, MRR {:.3}; mean cosine: related {related:.3}, unrelated {mean_unrelated:.3}",
        reciprocal_ranks / n as f32
    );
}
