//! What the two ways of answering `search_memory` share: the loaded index (`search.rs`) and the
//! per-request probe of the stored segments (`probe.rs`) fuse their keyword and vector rankings
//! the same way, to the same depth, and order the same hits the same way on every server.
//!
//! **Fusion.** Each list's scores are standardised (mean 0, deviation 1: BM25 has no fixed
//! scale, and a model's cosines sit in a band of their own), with the documents a list does not
//! hold counted as one more sample at what they score at most, and the two are added with
//! weights: the
//! vector 0.6, the keywords 0.4. Unlike reciprocal rank fusion, a document far ahead in one
//! list stays ahead, and how far apart two documents are counts, not only their places; the
//! weights say what each signal knows: the model the meaning, BM25 the exact words (names,
//! numbers, identifiers), which also mislead when a memory shares words and not sense. Measured
//! against RRF and each list alone in BENCHMARKS.md ("Memory ranking").
//!
//! **Memories without vectors yet** (saved moments ago, the background embedder on them) are
//! not judged unrelated by the model: one that is n-th by keywords takes the vector score of
//! the n-th by vectors, so it ranks by its keywords alone, as the result says
//! (`pending_vectors`), on the scale of the memories that have vectors.
//!
//! **Ties** go to the newer event (the greater `evt_` id), so a page's order depends on the
//! events and not on internal document numbers. Which of many equal candidates a list keeps
//! where it is cut (deeper than the page) follows the org's event sequence, the same on every
//! copy of the org.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;

/// A hit: event id, score, the event that superseded it.
pub(super) type Hit = (String, f64, Option<String>);

/// The vector ranking's weight in the fused score.
pub(super) const VECTOR_WEIGHT: f64 = 0.6;
/// The keyword ranking's weight in the fused score.
pub(super) const KEYWORD_WEIGHT: f64 = 0.4;

/// How deep each ranking's list goes before fusion: deeper than the page, so fusion can
/// promote a document that is good in both but best in neither.
pub(super) fn depth_for(limit: usize) -> usize {
    (limit * 3).clamp(30, 300)
}

/// `x` rounded to `1 / places`.
pub(super) fn rounded(x: f64, places: f64) -> f64 {
    (x * places).round() / places
}

/// Each document's score in `list` standardised, and the standardised score of a document
/// the list does not hold: `missing` (what such a document scores at most: 0 for BM25 when
/// the list holds every match, else the list's last) counts as one more sample, so that a
/// list of one document still lifts it above the rest.
fn standardised<K: Copy + Eq + Hash>(list: &[(K, f64)], missing: f64) -> (HashMap<K, f64>, f64) {
    let n = list.len() as f64 + 1.0;
    let mean = (list.iter().map(|(_, s)| s).sum::<f64>() + missing) / n;
    let var =
        (list.iter().map(|(_, s)| (s - mean).powi(2)).sum::<f64>() + (missing - mean).powi(2)) / n;
    let sd = if var > 0.0 { var.sqrt() } else { 1.0 };
    let z: HashMap<K, f64> = list.iter().map(|(k, s)| (*k, (s - mean) / sd)).collect();
    (z, (missing - mean) / sd)
}

/// The weighted fusion of a keyword and a vector ranking (each best first, raw scores, cut at
/// `depth`): every document of either, with its fused score rounded to six places, in no
/// particular order (callers order by [`ranked_order`] once they know the documents' ids).
/// `unembedded` says which documents have no vector the vector ranking could have scored.
pub(super) fn fuse<K: Copy + Eq + Hash>(
    keyword: &[(K, f64)],
    vector: &[(K, f64)],
    depth: usize,
    unembedded: &dyn Fn(K) -> bool,
) -> Vec<(K, f64)> {
    let last = |list: &[(K, f64)]| list.last().map_or(0.0, |(_, s)| *s);
    // A keyword list shorter than its depth holds every document that shares a word: the rest
    // score 0. A vector list ranks every document: the rest score at most its last.
    let keyword_missing = if keyword.len() < depth {
        0.0
    } else {
        last(keyword)
    };
    let (k, k_low) = standardised(keyword, keyword_missing);
    let (v, v_low) = standardised(vector, last(vector));
    let mut out: Vec<(K, f64)> = Vec::with_capacity(k.len() + v.len());
    let mut seen: HashSet<K> = HashSet::with_capacity(k.len() + v.len());
    // The keyword list comes first: a document's first place in the chain below its length is
    // its place by keywords.
    for (place, doc) in keyword.iter().chain(vector).map(|(d, _)| *d).enumerate() {
        if !seen.insert(doc) {
            continue;
        }
        let kz = k.get(&doc).copied().unwrap_or(k_low);
        let vz = match v.get(&doc) {
            Some(vz) => *vz,
            None if place < keyword.len() && unembedded(doc) => vector
                .get(place)
                .and_then(|(d, _)| v.get(d))
                .copied()
                .unwrap_or(v_low),
            None => v_low,
        };
        let z = KEYWORD_WEIGHT * kz + VECTOR_WEIGHT * vz;
        // Shown as a relevance in (0, 1), above zero like the single lists' scores: the
        // logistic of the weighted sum keeps its order.
        out.push((doc, rounded(1.0 / (1.0 + (-z).exp()), 1e6)));
    }
    out
}

/// Best first by score; equal scores by event id, the newer first.
pub(super) fn ranked_order(a: (f64, &str), b: (f64, &str)) -> std::cmp::Ordering {
    b.0.total_cmp(&a.0).then_with(|| b.1.cmp(a.1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_in_both_lists_beats_one_in_either() {
        let keyword = [(1u32, 9.0), (2, 5.0), (3, 1.0)];
        let vector = [(4u32, 0.8), (2, 0.7), (5, 0.2)];
        let mut fused = fuse(&keyword, &vector, 30, &|_| false);
        fused.sort_by(|a, b| b.1.total_cmp(&a.1));
        assert_eq!(fused[0].0, 2, "{fused:?}");
        assert_eq!(fused.len(), 5);
    }

    #[test]
    fn the_only_keyword_match_is_lifted_above_the_documents_without_one() {
        let keyword = [(7u32, 3.2)];
        let vector = [(1u32, 0.61), (2, 0.60), (7, 0.59), (3, 0.2)];
        let fused: HashMap<u32, f64> = fuse(&keyword, &vector, 30, &|_| false)
            .into_iter()
            .collect();
        assert!(fused[&7] > fused[&1], "{fused:?}");
    }

    #[test]
    fn a_memory_without_vectors_ranks_by_its_keywords_not_as_unrelated() {
        // 9 has no vector yet and is the only keyword match; the vector list's best shares no
        // word with the query.
        let keyword = [(9u32, 2.5)];
        let vector = [(1u32, 0.9), (2, 0.3), (3, 0.25), (4, 0.2)];
        let pending = fuse(&keyword, &vector, 30, &|d| d == 9);
        let pending: HashMap<u32, f64> = pending.into_iter().collect();
        assert!(pending[&9] > pending[&1], "{pending:?}");
        // With a vector the list did not rank near, 9 is judged by it.
        let judged: HashMap<u32, f64> = fuse(&keyword, &vector, 30, &|_| false)
            .into_iter()
            .collect();
        assert!(judged[&9] < pending[&9], "{judged:?}");
    }

    #[test]
    fn ties_go_to_the_newer_event_whatever_the_input_order() {
        let mut a = [(0.5, "evt_01A"), (0.5, "evt_01C"), (0.7, "evt_01B")];
        let mut b = [(0.5, "evt_01C"), (0.7, "evt_01B"), (0.5, "evt_01A")];
        a.sort_by(|x, y| ranked_order(*x, *y));
        b.sort_by(|x, y| ranked_order(*x, *y));
        assert_eq!(a, b);
        assert_eq!(a.map(|x| x.1), ["evt_01B", "evt_01C", "evt_01A"]);
    }
}
