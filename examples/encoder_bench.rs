//! lore's all-MiniLM-L6-v2 encoder on a file of texts, for `bench/encoder.sh`, beside the same
//! model in PyTorch `sentence-transformers` (`bench/encoder.py`).
//!
//! ```sh
//! cargo run --release --example encoder_bench -- TEXTS.jsonl VECTORS.f32 [ROUNDS]
//! ```
//!
//! Loads the model from its cached folder (fetched once, as `lore serve` does), embeds every
//! text of TEXTS.jsonl (one JSON string per line) ROUNDS times (default 3) through
//! `TransformerModel::embed`, the call saves and the refresh make, and prints one JSON line:
//! texts, rounds, each round's texts per second. The last round's vectors go to VECTORS.f32
//! (little-endian f32, 384 a text, in the file's order) for the cosine check.
#![allow(clippy::disallowed_methods)]

use std::io::Write;
use std::time::Instant;

/// The allocator `lore serve` runs with, so the encoder's many large buffers cost what they
/// cost there.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [texts_path, out_path, rest @ ..] = args.as_slice() else {
        anyhow::bail!("usage: encoder_bench TEXTS.jsonl VECTORS.f32 [ROUNDS]");
    };
    let rounds: usize = rest.first().map_or(Ok(3), |r| r.parse())?;
    let texts: Vec<String> = std::fs::read_to_string(texts_path)?
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    let model = lore::model::load(&lore::model::ensure(false)?)?;
    let mut per_second = Vec::new();
    let mut vectors = Vec::new();
    for _ in 0..rounds {
        let started = Instant::now();
        vectors = model.embed(&texts)?;
        per_second.push(texts.len() as f64 / started.elapsed().as_secs_f64());
    }
    let mut out = std::io::BufWriter::new(std::fs::File::create(out_path)?);
    for v in &vectors {
        for x in v {
            out.write_all(&x.to_le_bytes())?;
        }
    }
    out.flush()?;
    println!(
        "{}",
        serde_json::json!({"texts": texts.len(), "rounds": rounds, "per_second": per_second})
    );
    Ok(())
}
