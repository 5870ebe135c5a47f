//! The semantic half of memory search: each event's embedding, stored once beside the event,
//! and a per-org vector index over them.
//!
//! - Each memory's vectors are stored once beside its event (`vec/{model}/{ulid}`, int8 with one
//!   scale), so no instance has to embed it again: by `save_memory` before it commits where the
//!   embedder is quick (or the caller waits), else by the background embedder after the answer
//!   (`embed_queue.rs`). An event without a vector for the current model (delivered by a feed,
//!   or saved under another model) is embedded by a search when few are missing, else by the
//!   background embedder: changing the model re-embeds without a migration.
//! - An instance that meets an org for the first time reads the sketches of its vectors from the
//!   stored segments (`sketch/`, one scan) and then only the vectors of events past them, so a
//!   cold start neither re-embeds nor builds anything; a search reads the stored vectors of its
//!   nearest candidates to rank them exactly (`vector.rs`).
//! - Failures of the embedder never fail a save or a search: the keyword ranking still answers
//!   and the missing vectors are retried after a pause.

use std::collections::HashMap;

use super::keyword::KeywordIndex;
use super::vector::{Codes, decode, encode, normalize, sketch_of, stored_lengths};
use lore_base::error::Result;
use lore_base::keys::{OrgKeys, sha256_hex};
use lore_base::ports::{Embedder, Ports};
use lore_base::storage::Batch;

/// Texts sent to the embedder in one call.
pub const EMBED_BATCH: usize = 64;
/// How long an instance waits before asking a failing embedder again for an org's backlog.
pub(super) const RETRY_AFTER_MS: i64 = 30_000;
/// Most texts one refresh embeds; a larger backlog (a model change in a big org) is worked off
/// over the following requests while the keyword ranking answers.
pub(super) const MAX_EMBED_PER_REFRESH: usize = 4_096;

/// The storage key segment of a model: a short hash of its id (ids hold `/` and `@`).
pub fn model_key(model_id: &str) -> String {
    sha256_hex(model_id)[..16].to_string()
}

/// Words in one window of a long memory, and the words between the starts of consecutive
/// windows (on the LongMemEval subset with all-MiniLM-L6-v2 alone, session recall@5: a turn's
/// best 60-word window 0.865, the turn's own vector 0.755; 100-word windows did less;
/// BENCHMARKS.md, "Memory ranking").
pub const WINDOW_WORDS: usize = 60;
pub const WINDOW_STRIDE: usize = 40;
/// The most windows of one memory; a longer text's windows start further apart, evenly, so
/// that they still reach its end.
pub const MAX_WINDOWS: usize = 24;

/// The texts a memory is embedded as: the text itself when it has at most [`WINDOW_WORDS`] +
/// [`WINDOW_STRIDE`] / 2 words (split at whitespace), else windows of [`WINDOW_WORDS`] words
/// starting [`WINDOW_STRIDE`] apart, the last ending at the text's end. A question usually asks
/// about one part of a long memory, and one vector of the whole (cut at the model's input
/// length) blurs that part with the rest; each window's vector keeps it (`vector::Exact` scores
/// the best of a memory's vectors). Offline, the text's own vector beside its windows changed
/// nothing (the best window scored the same with it) and is the dearest to compute.
pub fn pieces(text: &str) -> Vec<String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let n = words.len();
    if n <= WINDOW_WORDS + WINDOW_STRIDE / 2 {
        return vec![text.to_string()];
    }
    let span = n - WINDOW_WORDS;
    let stride = WINDOW_STRIDE.max(span.div_ceil(MAX_WINDOWS - 1));
    let mut out = Vec::new();
    let mut start = 0;
    loop {
        out.push(words[start..start + WINDOW_WORDS].join(" "));
        if start == span {
            return out;
        }
        start = (start + stride).min(span);
    }
}

/// Embeds each memory's text as its [`pieces`] (all of them in batches, [`embed_all`]): one
/// list of vectors per text.
pub async fn embed_memories(
    embedder: &dyn Embedder,
    texts: &[String],
) -> Result<Vec<Vec<Vec<f32>>>, String> {
    embed_memories_at(embedder, texts, false).await
}

/// [`embed_memories`] at background priority (`Embedder::embed_later`).
pub async fn embed_memories_later(
    embedder: &dyn Embedder,
    texts: &[String],
) -> Result<Vec<Vec<Vec<f32>>>, String> {
    embed_memories_at(embedder, texts, true).await
}

async fn embed_memories_at(
    embedder: &dyn Embedder,
    texts: &[String],
    later: bool,
) -> Result<Vec<Vec<Vec<f32>>>, String> {
    let pieces: Vec<Vec<String>> = texts.iter().map(|t| pieces(t)).collect();
    let flat: Vec<String> = pieces.iter().flatten().cloned().collect();
    let mut vectors = embed_all_at(embedder, &flat, later).await?.into_iter();
    Ok(pieces
        .iter()
        .map(|p| vectors.by_ref().take(p.len()).collect())
        .collect())
}

/// Embeds `texts` in batches; every vector is checked for the model's dimensions and
/// normalized.
pub async fn embed_all(embedder: &dyn Embedder, texts: &[String]) -> Result<Vec<Vec<f32>>, String> {
    embed_all_at(embedder, texts, false).await
}

async fn embed_all_at(
    embedder: &dyn Embedder,
    texts: &[String],
    later: bool,
) -> Result<Vec<Vec<f32>>, String> {
    let dims = embedder.dimensions();
    let mut out = Vec::with_capacity(texts.len());
    for chunk in texts.chunks(EMBED_BATCH) {
        let vectors = match later {
            true => embedder.embed_later(chunk).await,
            false => embedder.embed(chunk).await,
        }
        .map_err(|e| e.to_string())?;
        if vectors.len() != chunk.len() {
            return Err(format!(
                "the embedder returned {} vectors for {} texts",
                vectors.len(),
                chunk.len()
            ));
        }
        for mut v in vectors {
            if v.len() != dims || v.iter().any(|x| !x.is_finite()) {
                return Err(format!(
                    "the embedder returned a vector of {} dimensions (or not finite); {} expected",
                    v.len(),
                    dims
                ));
            }
            normalize(&mut v);
            out.push(v);
        }
    }
    Ok(out)
}

/// Stored vectors one instance keeps in memory for exact ranking, per org (counting each window
/// of a long memory: at most about 13 MB at 384 dimensions); past it the cache starts over (a
/// loaded search reads the vectors it lacks in one read).
const CACHED_VECTORS: usize = 32_768;

/// One org's vectors under one model: every document's sketch (`vector.rs`), and the stored
/// int8 vectors of those this instance has ranked exactly or embedded lately.
pub struct Semantic {
    pub model: String,
    pub model_key: String,
    pub dims: usize,
    pub codes: Codes,
    /// Stored vectors (`encode`) by keyword document number, each with its vectors' lengths
    /// (`stored_lengths`), so an exact ranking computes one product per vector.
    vectors: HashMap<u32, (Vec<u8>, Vec<f64>)>,
    /// How many vectors `vectors` holds (a long memory has one per window).
    cached: usize,
    /// When this instance may next try to embed the backlog (after a failure).
    pub retry_after_ms: i64,
    /// Whether the segments' sketches were read yet, and whether a request is reading them.
    pub sketches_read: bool,
    pub sketches_reading: bool,
    /// When a refresh next looks in storage for vectors other instances stored for the
    /// documents this one lacks (`refresh.rs`).
    pub recheck_after_ms: i64,
}

impl Semantic {
    /// `None` when the embedder's dimension count cannot be stored (0, or absurdly many).
    pub fn new(model: &str, dims: usize) -> Option<Self> {
        if dims == 0 || dims > usize::from(u16::MAX) {
            tracing::warn!(dims, model, "cannot index this embedder's vectors");
            return None;
        }
        Some(Self {
            model: model.to_string(),
            model_key: model_key(model),
            dims,
            codes: Codes::new(dims),
            vectors: HashMap::new(),
            cached: 0,
            retry_after_ms: 0,
            sketches_read: false,
            sketches_reading: false,
            recheck_after_ms: 0,
        })
    }

    /// How many documents have a vector.
    pub fn len(&self) -> usize {
        self.codes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.codes.is_empty()
    }

    pub fn has(&self, doc: u32) -> bool {
        self.codes.has(doc)
    }

    /// The binary sketch of document `doc`'s vector, if it has one (`sketch/`).
    pub fn sign_bits(&self, doc: u32) -> Option<Vec<u8>> {
        self.codes.get(doc).map(<[u8]>::to_vec)
    }

    /// Documents of `keyword` that have no vector yet, oldest first.
    pub fn missing(&self, keyword: &KeywordIndex) -> Vec<u32> {
        // Every search refreshes the index: when every document has its vectors, that is
        // known without looking at each.
        if self.len() >= keyword.len() {
            return Vec::new();
        }
        (0..keyword.len() as u32)
            .filter(|&d| !self.has(d))
            .collect()
    }

    /// Adds document `doc`'s vectors (its text's, or its windows': [`pieces`]); no-op when
    /// it has them or there are none or the dimensions differ.
    pub fn add(&mut self, doc: u32, vectors: &[Vec<f32>]) {
        if !vectors.is_empty()
            && vectors.len() <= usize::from(u16::MAX)
            && vectors.iter().all(|v| v.len() == self.dims)
            && self.codes.set(doc, &sketch_of(vectors))
        {
            self.keep_vector(doc, encode(vectors));
        }
    }

    /// The stored vectors of document `doc` and their lengths, if this instance holds them.
    pub fn vector(&self, doc: u32) -> Option<(&[u8], &[f64])> {
        self.vectors
            .get(&doc)
            .map(|(v, l)| (v.as_slice(), l.as_slice()))
    }

    /// Keeps document `doc`'s stored vector for the next exact ranking (not when the bytes are
    /// not a vector of this model's dimensions).
    pub fn keep_vector(&mut self, doc: u32, stored: Vec<u8>) {
        let Some(lengths) = stored_lengths(&stored, self.dims) else {
            return;
        };
        if self.cached + lengths.len() > CACHED_VECTORS {
            self.vectors.clear();
            self.cached = 0;
        }
        self.cached += lengths.len();
        if let Some((_, old)) = self.vectors.insert(doc, (stored, lengths)) {
            self.cached -= old.len();
        }
    }
}

/// Deletes the vector index snapshots earlier versions stored (`vsnap/`, for `lore reindex`):
/// the sketches in the segments took their place.
pub async fn clear_old_snapshots(ports: &Ports, keys: &OrgKeys) -> Result<()> {
    let mut batch = Batch::new();
    for (key, _) in ports.storage.scan_all(&keys.old_vector_snapshots()).await? {
        batch.delete(key);
    }
    if !batch.is_empty() {
        ports.storage.commit(batch).await?;
    }
    Ok(())
}

/// The stored vectors under `model` of the given event ulids, in one `get_many` (for a few
/// hundred at most, whichever of them are stored).
pub async fn stored_vectors_of(
    ports: &Ports,
    keys: &OrgKeys,
    model: &str,
    dims: usize,
    ulids: &[String],
) -> Result<HashMap<String, Vec<Vec<f32>>>> {
    let wanted: Vec<String> = ulids.iter().map(|u| keys.vector(model, u)).collect();
    let read = ports.storage.get_many(&wanted).await?;
    Ok(ulids
        .iter()
        .zip(read)
        .filter_map(|(u, bytes)| Some((u.clone(), decode(&bytes?, dims)?)))
        .collect())
}

/// The stored vectors (each memory's, [`pieces`]) under `model` for the given event ulids: one
/// read of them all when few are wanted, else a scan of the org's vectors from the oldest ulid
/// wanted on (ulids grow with time, so after the sketches the wanted ones are mostly the newest;
/// the scan stops once it has them all).
pub async fn stored_vectors(
    ports: &Ports,
    keys: &OrgKeys,
    model: &str,
    dims: usize,
    ulids: &[String],
) -> Result<HashMap<String, Vec<Vec<f32>>>> {
    if ulids.len() > 64 {
        let mut out = HashMap::new();
        let wanted: std::collections::HashSet<&str> = ulids.iter().map(String::as_str).collect();
        let oldest = ulids.iter().min().expect("more than 64");
        let prefix = keys.vectors(model);
        if let Some(bytes) = ports.storage.get(&keys.vector(model, oldest)).await?
            && let Some(v) = decode(&bytes, dims)
        {
            out.insert(oldest.clone(), v);
        }
        let mut after = Some(keys.vector(model, oldest));
        while out.len() < wanted.len() {
            let page = ports.storage.scan(&prefix, after.as_deref(), 512).await?;
            for (key, bytes) in &page.entries {
                let ulid = &key[prefix.len()..];
                if wanted.contains(ulid)
                    && let Some(v) = decode(bytes, dims)
                {
                    out.insert(ulid.to_string(), v);
                }
            }
            match page.cursor {
                Some(c) => after = Some(c),
                None => break,
            }
        }
        return Ok(out);
    }
    stored_vectors_of(ports, keys, model, dims, ulids).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(n: usize) -> String {
        (0..n)
            .map(|i| format!("w{i}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn a_short_text_is_embedded_whole_and_a_long_one_in_windows_that_reach_its_end() {
        assert_eq!(pieces("a short memory"), vec!["a short memory"]);
        let short = words(WINDOW_WORDS + WINDOW_STRIDE / 2);
        assert_eq!(pieces(&short), vec![short.clone()]);
        let p = pieces(&words(200));
        // Starts 0, 40, 80, 120, then 140 (the last window ends at the text's end).
        let firsts: Vec<&str> = p.iter().map(|w| w.split(' ').next().unwrap()).collect();
        assert_eq!(firsts, ["w0", "w40", "w80", "w120", "w140"]);
        assert!(p.iter().all(|w| w.split(' ').count() == WINDOW_WORDS));
        assert!(p.last().unwrap().ends_with(" w199"));
        // Whitespace of any kind separates words; the windows join them with one space.
        let spaced = pieces(&words(81).replace(' ', "\n\t "));
        assert_eq!(spaced.len(), 2);
        assert!(spaced[0].starts_with("w0 w1 ") && spaced[1].ends_with(" w80"));
        // A very long text: at most MAX_WINDOWS windows, spread evenly, still reaching its end.
        let long = pieces(&words(10_000));
        assert_eq!(long.len(), MAX_WINDOWS);
        assert!(long.last().unwrap().ends_with(" w9999"));
    }

    #[test]
    fn the_kept_vectors_are_bounded_by_vectors_not_memories() {
        let mut sem = Semantic::new("m", 4).unwrap();
        let windows = vec![vec![0.5, -0.5, 0.5, -0.5]; 8];
        let memories = (CACHED_VECTORS / 8) as u32 - 1;
        for doc in 0..memories {
            sem.add(doc, &windows);
        }
        assert_eq!(sem.cached, CACHED_VECTORS - 8);
        sem.keep_vector(0, encode(&windows[..2]));
        assert_eq!(
            sem.cached,
            CACHED_VECTORS - 14,
            "a memory kept again counts once"
        );
        sem.add(memories, &windows);
        assert_eq!(sem.vectors.len(), memories as usize + 1);
        sem.add(memories + 1, &windows);
        assert_eq!(
            (sem.cached, sem.vectors.len()),
            (8, 1),
            "past the bound it starts over"
        );
        assert!(sem.vector(memories + 1).is_some() && sem.has(memories));
    }
}
