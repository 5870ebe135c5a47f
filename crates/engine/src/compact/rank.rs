//! Ranking for `search`: BM25 over weighted fields (keyword), cosine similarity through the
//! embedder port with a per-process cache of the candidates' vectors (meaning), and reciprocal
//! rank fusion of the per-kind rankings.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use lore_base::ports::Ports;
use lore_memory::keyword::Tokenizer;
use lore_memory::semantic;

const K1: f64 = 1.2;
const B: f64 = 0.75;

/// Reciprocal rank fusion constant (as in `memory::search`).
pub const RRF_K: f64 = 60.0;

/// A candidate's text for keyword ranking: fields with weights (a name counts more than a
/// description).
pub type Fields = Vec<(f64, String)>;

/// BM25 with weighted term frequencies (BM25F, simplified: one length normalization over the
/// weighted document). One score per document; 0 when no query term occurs.
pub fn keyword_scores(tokenizer: &Tokenizer, query: &str, docs: &[&Fields]) -> Vec<f64> {
    let mut terms = tokenizer.terms(query);
    terms.sort();
    terms.dedup();
    if terms.is_empty() || docs.is_empty() {
        return vec![0.0; docs.len()];
    }
    // Weighted frequency of each query term per document, and the weighted length.
    let mut freqs: Vec<Vec<f64>> = Vec::with_capacity(docs.len());
    let mut lens: Vec<f64> = Vec::with_capacity(docs.len());
    for fields in docs.iter().copied() {
        let mut tf = vec![0.0; terms.len()];
        let mut len = 0.0;
        for (weight, text) in fields {
            for word in tokenizer.terms(text) {
                len += weight;
                if let Ok(i) = terms.binary_search(&word) {
                    tf[i] += weight;
                }
            }
        }
        freqs.push(tf);
        lens.push(len);
    }
    let n = docs.len() as f64;
    let avg = (lens.iter().sum::<f64>() / n).max(1.0);
    let idf: Vec<f64> = (0..terms.len())
        .map(|i| {
            let df = freqs.iter().filter(|tf| tf[i] > 0.0).count() as f64;
            ((n - df + 0.5) / (df + 0.5) + 1.0).ln()
        })
        .collect();
    freqs
        .iter()
        .zip(&lens)
        .map(|(tf, len)| {
            tf.iter()
                .zip(&idf)
                .filter(|(f, _)| **f > 0.0)
                .map(|(f, idf)| idf * f * (K1 + 1.0) / (f + K1 * (1.0 - B + B * len / avg)))
                .sum()
        })
        .collect()
}

/// Vectors of candidate texts by (model, text) hash, shared by the instances of a process.
/// Candidate texts (Noun, Verb and doc descriptions) change rarely, so a search embeds only
/// the query once they are known. Cleared when it grows past [`CACHE_ENTRIES`].
static VECTORS: Mutex<Option<HashMap<u64, Vec<f32>>>> = Mutex::new(None);
/// Per model: until when (clock-port ms) the embedder is not asked again after it failed.
static RETRY_AFTER_MS: Mutex<Option<HashMap<String, i64>>> = Mutex::new(None);

const CACHE_ENTRIES: usize = 4_096;
const RETRY_MS: i64 = 30_000;

fn text_key(model: &str, text: &str) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    model.hash(&mut h);
    text.hash(&mut h);
    h.finish()
}

/// Cosine similarity of `query` to each text, through the embedder port; `None` when there is
/// no embedder or it fails (the search then ranks by keyword only, and does not ask again for
/// 30 s).
pub async fn similarities(ports: &Ports, query: &str, texts: &[String]) -> Option<Vec<f32>> {
    let embedder = ports.embedder.as_ref()?;
    let cheaper = embedder.for_catalog();
    let embedder = cheaper.as_ref().unwrap_or(embedder);
    let now = ports.clock.now_ms();
    let model = embedder.model_id().to_string();
    let waiting = RETRY_AFTER_MS
        .lock()
        .ok()?
        .as_ref()
        .and_then(|m| m.get(&model).copied())
        .is_some_and(|until| until > now);
    if waiting || texts.is_empty() {
        return None;
    }
    let keys: Vec<u64> = texts.iter().map(|t| text_key(&model, t)).collect();
    let missing: Vec<String> = {
        let cache = VECTORS.lock().ok()?;
        texts
            .iter()
            .zip(&keys)
            .filter(|(_, k)| cache.as_ref().is_none_or(|c| !c.contains_key(k)))
            .map(|(t, _)| t.clone())
            .collect()
    };
    let mut wanted = missing.clone();
    wanted.push(query.to_string());
    let mut vectors = match semantic::embed_all(embedder.as_ref(), &wanted).await {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(error = %e, "could not embed for search; keyword ranking only");
            if let Ok(mut r) = RETRY_AFTER_MS.lock() {
                r.get_or_insert_with(HashMap::new)
                    .insert(model, now + RETRY_MS);
            }
            return None;
        }
    };
    let query_vector = vectors.pop()?;
    let mut cache = VECTORS.lock().ok()?;
    let map = cache.get_or_insert_with(HashMap::new);
    if map.len() + missing.len() > CACHE_ENTRIES {
        map.clear();
    }
    for (text, v) in missing.iter().zip(vectors) {
        map.insert(text_key(&model, text), v);
    }
    Some(
        keys.iter()
            .map(|k| {
                map.get(k).map_or(0.0, |v| {
                    v.iter().zip(&query_vector).map(|(a, b)| a * b).sum::<f32>()
                })
            })
            .collect(),
    )
}

/// The indexes of the best `depth` scores above zero, best first (ties to the earlier index).
pub fn top(scores: &[f64], depth: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len()).filter(|&i| scores[i] > 0.0).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    order.truncate(depth);
    order
}

/// Adds each ranking's reciprocal-rank contribution, times `weight(index)`, to `fused`.
pub fn fuse(fused: &mut [f64], ranking: &[usize], weight: impl Fn(usize) -> f64) {
    for (rank, &i) in ranking.iter().enumerate() {
        fused[i] += weight(i) / (RRF_K + rank as f64 + 1.0);
    }
}

/// A weight for rankings of different kinds fused together: between 0.5 and 1 by how close
/// `score` is to the best score of any kind, so a weak match of one kind does not tie with a
/// strong match of another only because each is first of its kind.
pub fn strength(score: f64, best: f64) -> f64 {
    if best > 0.0 {
        0.5 + 0.5 * (score / best).clamp(0.0, 1.0)
    } else {
        1.0
    }
}
