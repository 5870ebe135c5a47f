//! The vector half of a loaded index: every document's binary sketch (one bit per dimension,
//! the sign of its embedding's component: `sketch::sign_bits`) held in memory and ranked by
//! Hamming distance to the query's, then the nearest [`RERANK_PER_RESULT`] × depth ranked
//! exactly on their stored int8 vectors ([`encode`]).
//!
//! The sketches are the ones the keyword index segments store (`sketch/`), so a fresh instance
//! reads them in the same scan as the rest of the segments, and nothing is built from the
//! vectors when it loads: what a load reads grows by 52 bytes per memory, and what it computes
//! does not grow at all. A per-request search (`probe.rs`) ranks the same sketches the same
//! way from storage, so the two agree wherever the probe reads every sketch. Why a scan of
//! sketches and not a graph: ARCHITECTURE.md, "Vector index".

pub use super::sketch::sign_bits;

/// Sketch candidates whose int8 vectors are read and ranked exactly, per ranked result wanted.
pub const RERANK_PER_RESULT: usize = 4;

/// The sketches of an index's documents under one model, by document number.
pub struct Codes {
    code_len: usize,
    /// `code_len` bytes per document (zeros where it has none).
    codes: Vec<u8>,
    /// Whether each document has a sketch.
    present: Vec<bool>,
    count: usize,
}

impl Codes {
    /// Sketches of `dims`-dimensional vectors.
    pub fn new(dims: usize) -> Self {
        Self {
            code_len: dims.div_ceil(8),
            codes: Vec::new(),
            present: Vec::new(),
            count: 0,
        }
    }

    /// The bytes of one sketch.
    pub fn code_len(&self) -> usize {
        self.code_len
    }

    /// How many documents have a sketch.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn has(&self, doc: u32) -> bool {
        self.present.get(doc as usize).copied().unwrap_or(false)
    }

    /// Document `doc`'s sketch, if it has one.
    pub fn get(&self, doc: u32) -> Option<&[u8]> {
        self.has(doc).then(|| {
            let at = doc as usize * self.code_len;
            &self.codes[at..at + self.code_len]
        })
    }

    /// Gives document `doc` the sketch `code`; `false` (and nothing changes) when it has one
    /// already or `code` is of another length.
    pub fn set(&mut self, doc: u32, code: &[u8]) -> bool {
        if code.len() != self.code_len || self.has(doc) {
            return false;
        }
        let slot = doc as usize;
        if self.present.len() <= slot {
            self.present.resize(slot + 1, false);
            self.codes.resize((slot + 1) * self.code_len, 0);
        }
        let at = slot * self.code_len;
        self.codes[at..at + self.code_len].copy_from_slice(code);
        self.present[slot] = true;
        self.count += 1;
        true
    }

    /// Every document with a sketch, with it, in document order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &[u8])> + '_ {
        self.codes
            .chunks_exact(self.code_len)
            .enumerate()
            .filter(|(d, _)| self.present[*d])
            .map(|(d, c)| (d as u32, c))
    }

    /// The `keep` documents allowed by `filter` whose sketches are nearest `bits`, nearest
    /// first; ties go to the newer document (the same order as a per-request search).
    pub fn nearest(&self, bits: &[u8], keep: usize, filter: &dyn Fn(u32) -> bool) -> Vec<u32> {
        if keep == 0 || bits.len() != self.code_len {
            return Vec::new();
        }
        let mut near: Vec<(u32, u32)> = Vec::with_capacity(self.count.min(keep * 8));
        let mut worst = u32::MAX;
        for (doc, code) in self.codes.chunks_exact(self.code_len).enumerate() {
            let doc = doc as u32;
            if !self.present[doc as usize] {
                continue;
            }
            let d = super::sketch::hamming(bits, code);
            // Once `keep` are held, a farther sketch cannot enter; the filter (which looks at
            // the document's metadata) runs only for those that could.
            if d > worst || !filter(doc) {
                continue;
            }
            near.push((d, doc));
            if near.len() >= keep * 8 {
                cut(&mut near, keep);
                worst = near.iter().map(|n| n.0).max().unwrap_or(u32::MAX);
            }
        }
        cut(&mut near, keep);
        near.sort_unstable_by(order);
        near.into_iter().map(|(_, doc)| doc).collect()
    }

    /// Bytes this holds.
    pub fn heap_bytes(&self) -> usize {
        self.codes.capacity() + self.present.capacity()
    }
}

/// Nearest first; ties to the newer (higher-numbered) document.
fn order(a: &(u32, u32), b: &(u32, u32)) -> std::cmp::Ordering {
    a.0.cmp(&b.0).then(b.1.cmp(&a.1))
}

/// Keeps the first `keep` of `near` in [`order`] (unordered).
fn cut(near: &mut Vec<(u32, u32)>, keep: usize) {
    if near.len() > keep {
        near.select_nth_unstable_by(keep - 1, order);
        near.truncate(keep);
    }
}

const VECTOR_VERSION: u8 = 1;

/// A vector as stored: version, dimension count, scale, then one signed byte per dimension.
/// Embeddings are unit length, so int8 with one scale per vector keeps cosine ranking intact
/// to well under a percent while taking a quarter of the bytes.
pub fn encode(v: &[f32]) -> Vec<u8> {
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
    let mut out = Vec::with_capacity(7 + v.len());
    out.push(VECTOR_VERSION);
    out.extend_from_slice(&(v.len() as u16).to_le_bytes());
    out.extend_from_slice(&scale.to_le_bytes());
    out.extend(
        v.iter()
            .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8 as u8),
    );
    out
}

/// The vector stored by [`encode`], renormalized; `None` when the bytes are not one.
pub fn decode(bytes: &[u8], dims: usize) -> Option<Vec<f32>> {
    if bytes.len() != 7 + dims || bytes[0] != VECTOR_VERSION {
        return None;
    }
    if usize::from(u16::from_le_bytes([bytes[1], bytes[2]])) != dims {
        return None;
    }
    let scale = f32::from_le_bytes(bytes[3..7].try_into().ok()?);
    let mut v: Vec<f32> = bytes[7..]
        .iter()
        .map(|&b| f32::from(b as i8) * scale)
        .collect();
    normalize(&mut v);
    Some(v)
}

/// Scales `v` to unit length (a zero vector stays zero).
pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// The cosine similarity of the unit query `query` and a stored vector ([`encode`]),
/// `None` when the bytes are not a vector of the query's dimensions.
pub fn similarity(query: &[f32], stored: &[u8]) -> Option<f64> {
    let v = decode(stored, query.len())?;
    Some(f64::from(
        v.iter().zip(query).map(|(a, b)| a * b).sum::<f32>(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_ranks_by_hamming_with_ties_to_the_newer_and_filters_first() {
        let mut codes = Codes::new(16);
        assert!(codes.set(0, &[0b0000_0000, 0]));
        assert!(codes.set(2, &[0b0000_0001, 0]));
        assert!(codes.set(3, &[0b0000_0001, 0]));
        assert!(codes.set(5, &[0b1111_1111, 0xff]));
        assert!(!codes.set(5, &[0, 0]), "a document keeps its sketch");
        assert!(!codes.set(6, &[0]), "a sketch of another length is refused");
        assert_eq!(codes.len(), 4);
        assert!(!codes.has(1) && codes.get(1).is_none());
        assert_eq!(codes.nearest(&[1, 0], 3, &|_| true), vec![3, 2, 0]);
        assert_eq!(codes.nearest(&[1, 0], 10, &|d| d != 3), vec![2, 0, 5]);
        assert_eq!(codes.nearest(&[0xff, 0xff], 1, &|_| true), vec![5]);
        assert!(codes.nearest(&[1], 3, &|_| true).is_empty());
    }

    #[test]
    fn nearest_holds_the_true_top_when_it_cuts_along_the_way() {
        let mut codes = Codes::new(64);
        for doc in 0..5_000u32 {
            let x = u64::from(doc).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            codes.set(doc, &x.to_le_bytes());
        }
        let q = 0x0123_4567_89ab_cdefu64.to_le_bytes();
        let mut all: Vec<(u32, u32)> = (0..5_000u32)
            .map(|d| (super::super::sketch::hamming(&q, codes.get(d).unwrap()), d))
            .collect();
        all.sort_unstable_by(order);
        let want: Vec<u32> = all.iter().take(20).map(|n| n.1).collect();
        assert_eq!(codes.nearest(&q, 20, &|_| true), want);
    }

    #[test]
    fn vectors_survive_encoding_within_a_percent() {
        let mut v: Vec<f32> = (0..384)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0)
            .collect();
        normalize(&mut v);
        let back = decode(&encode(&v), 384).unwrap();
        let cos: f32 = v.iter().zip(&back).map(|(a, b)| a * b).sum();
        assert!(cos > 0.999, "{cos}");
        assert!(decode(&encode(&v), 256).is_none());
        assert!(decode(&[9, 0, 0], 0).is_none());
    }
}
