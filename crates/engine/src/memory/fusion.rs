//! What the two ways of answering `search_memory` share: the loaded index (`search.rs`) and the
//! per-request probe of the stored segments (`probe.rs`) fuse their keyword and vector rankings
//! the same way, to the same depth, and hand back the same hits.

/// A hit: event id, score, the event that superseded it.
pub(super) type Hit = (String, f64, Option<String>);

/// Reciprocal rank fusion constant: a document's fused score is the sum over the rankings of
/// 1 / (RRF_K + rank). 60 is the value from the original paper and works without tuning.
pub(super) const RRF_K: f64 = 60.0;

/// How deep each ranking's list goes before fusion: deeper than the page, so fusion can
/// promote a document that is good in both but best in neither.
pub(super) fn depth_for(limit: usize) -> usize {
    (limit * 3).clamp(30, 300)
}

/// `x` rounded to `1 / places`.
pub(super) fn rounded(x: f64, places: f64) -> f64 {
    (x * places).round() / places
}
