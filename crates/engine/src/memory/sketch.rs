//! Binary sketches of a segment's vectors: for each of its documents, the signs of its
//! vector's components (one bit each, 32 bytes for 256 dimensions). A per-request instance
//! (`probe.rs`) ranks every stored document by the Hamming distance of its sketch to the
//! query's, then reads the ids (`codec.rs`'s id pages) and int8 vectors of the best few hundred
//! and ranks those exactly, so a query reads about 33 bytes per memory instead of the whole
//! vector index.
//!
//! Stored beside its segment's other parts (`o/{org}/kidx/p/v/{model}/{segment}`, sealed like
//! them) when the segment is written by an instance that has the vectors; a document without a
//! vector then has none in the sketch.
//!
//! Body, integers little-endian: dimensions u16 · documents u32 · a bitmap of the documents
//! that have a sketch (`⌈documents / 8⌉` bytes, bit `d % 8` of byte `d / 8`) · their sketches
//! (`⌈dims / 8⌉` bytes each) in document order. Columns rather than records so that a reader
//! ranks the codes where they were read, without copying or decoding them one by one.

/// The signs of `v`'s components, as [`super::vector::VectorIndex::sign_bits`] stores them.
pub fn sign_bits(v: &[f32]) -> Vec<u8> {
    let mut out = vec![0u8; v.len().div_ceil(8)];
    for (i, &x) in v.iter().enumerate() {
        if x > 0.0 {
            out[i / 8] |= 1 << (i % 8);
        }
    }
    out
}

/// Differing bits of two sketches of one length.
pub fn hamming(a: &[u8], b: &[u8]) -> u32 {
    let mut d = 0;
    let mut ca = a.chunks_exact(8);
    let mut cb = b.chunks_exact(8);
    for (x, y) in (&mut ca).zip(&mut cb) {
        let x = u64::from_le_bytes(x.try_into().expect("8 bytes"));
        let y = u64::from_le_bytes(y.try_into().expect("8 bytes"));
        d += (x ^ y).count_ones();
    }
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        d += (x ^ y).count_ones();
    }
    d
}

/// The body of a segment's sketch: each of its documents' sketch, if it has one.
pub fn encode(dims: usize, docs: impl ExactSizeIterator<Item = Option<Vec<u8>>>) -> Vec<u8> {
    let code_len = dims.div_ceil(8);
    let n = docs.len();
    let bitmap_at = 6;
    let mut out = Vec::with_capacity(bitmap_at + n.div_ceil(8) + n * code_len);
    out.extend_from_slice(&(dims as u16).to_le_bytes());
    out.extend_from_slice(&(n as u32).to_le_bytes());
    out.resize(bitmap_at + n.div_ceil(8), 0);
    for (d, code) in docs.enumerate() {
        if let Some(c) = code.filter(|c| c.len() == code_len) {
            out[bitmap_at + d / 8] |= 1 << (d % 8);
            out.extend_from_slice(&c);
        }
    }
    out
}

/// A decoded sketch: its codes ranked where they were read.
pub struct Sketch {
    code_len: usize,
    docs: u32,
    /// The part as read (its seal included), and where the codes start in it.
    bytes: Vec<u8>,
    codes_at: usize,
    /// Per document, the number of its code (`u32::MAX`: none); `None` when every document
    /// has one, the code of document `d` then being the `d`-th.
    rank: Option<Vec<u32>>,
}

impl Sketch {
    pub fn len(&self) -> usize {
        self.docs as usize
    }

    pub fn code(&self, doc: u32) -> Option<&[u8]> {
        if doc >= self.docs {
            return None;
        }
        let n = match &self.rank {
            None => doc,
            Some(rank) => Some(rank[doc as usize]).filter(|&n| n != u32::MAX)?,
        } as usize;
        let at = self.codes_at + n * self.code_len;
        Some(&self.bytes[at..at + self.code_len])
    }

    /// Every document that has a code, with it, in document order.
    pub fn codes(&self) -> impl Iterator<Item = (u32, &[u8])> + '_ {
        (0..self.docs).filter_map(|d| self.code(d).map(|c| (d, c)))
    }
}

/// Decodes the sketch body `bytes[at..]` of a segment of `docs` documents under a model of
/// `dims` dimensions, keeping `bytes` (no copy).
pub fn decode(bytes: Vec<u8>, at: usize, docs: u32, dims: usize) -> Result<Sketch, String> {
    let bad = |why: &str| format!("a vector sketch {why}");
    let body = bytes.get(at..).unwrap_or_default();
    if body.len() < 6 {
        return Err(bad("is cut short"));
    }
    if usize::from(u16::from_le_bytes([body[0], body[1]])) != dims {
        return Err(bad("is of another dimension count"));
    }
    if u32::from_le_bytes(body[2..6].try_into().expect("4 bytes")) != docs {
        return Err(bad("holds another number of documents than its segment"));
    }
    let code_len = dims.div_ceil(8);
    let bitmap = body
        .get(6..6 + (docs as usize).div_ceil(8))
        .ok_or_else(|| bad("is cut short"))?;
    if !docs.is_multiple_of(8) && bitmap.last().is_some_and(|&b| b >> (docs % 8) != 0) {
        return Err(bad("marks documents past its end"));
    }
    let present: usize = bitmap.iter().map(|b| b.count_ones() as usize).sum();
    let codes_at = at + 6 + bitmap.len();
    if bytes.len() - codes_at != present * code_len {
        return Err(bad("does not hold one code per marked document"));
    }
    let rank = (present != docs as usize).then(|| {
        let mut n = 0u32;
        (0..docs as usize)
            .map(|d| {
                if bitmap[d / 8] & (1 << (d % 8)) != 0 {
                    n += 1;
                    n - 1
                } else {
                    u32::MAX
                }
            })
            .collect()
    });
    Ok(Sketch {
        code_len,
        docs,
        bytes,
        codes_at,
        rank,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sketches_round_trip_and_rank_by_sign_agreement() {
        let a = sign_bits(&[0.5, -0.1, 0.2, -0.3, 0.0, 0.9, -0.2, 0.1, 0.4]);
        let b = sign_bits(&[-0.5, -0.1, 0.2, -0.3, 0.0, 0.9, -0.2, 0.1, -0.4]);
        assert_eq!(a.len(), 2);
        assert_eq!(hamming(&a, &a), 0);
        assert_eq!(hamming(&a, &b), 2);
        let body = encode(9, [Some(a.clone()), None, Some(b.clone())].into_iter());
        let s = decode(body.clone(), 0, 3, 9).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s.code(0), Some(&a[..]));
        assert_eq!(s.code(1), None);
        assert_eq!(s.code(2), Some(&b[..]));
        assert_eq!(s.code(3), None);
        let codes: Vec<(u32, &[u8])> = s.codes().collect();
        assert_eq!(codes, vec![(0, &a[..]), (2, &b[..])]);
        // Read in place behind a prefix (a part's seal).
        let mut sealed = vec![9u8; 8];
        sealed.extend_from_slice(&body);
        assert_eq!(decode(sealed, 8, 3, 9).unwrap().code(2), Some(&b[..]));
        // Every document with a code: no rank table, the same answers.
        let dense = decode(
            encode(9, [Some(b.clone()), Some(a.clone())].into_iter()),
            0,
            2,
            9,
        );
        let dense = dense.unwrap();
        assert!(dense.rank.is_none());
        assert_eq!(dense.code(1), Some(&a[..]));
        assert!(decode(body.clone(), 0, 4, 9).is_err());
        assert!(decode(body.clone(), 0, 3, 16).is_err());
        for cut in 0..body.len() {
            assert!(
                decode(body[..cut].to_vec(), 0, 3, 9).is_err(),
                "cut at {cut}"
            );
        }
        let mut longer = body.clone();
        longer.push(0);
        assert!(decode(longer, 0, 3, 9).is_err());
        let mut marked = body;
        marked[6] |= 1 << 5;
        assert!(decode(marked, 0, 3, 9).is_err(), "a mark past the end");
    }
}
