//! Binary sketches of a segment's vectors: for each of its documents, the signs of its
//! vector's components (one bit each, 32 bytes for 256 dimensions) and its event's ULID. A
//! per-request instance (`probe.rs`) ranks every stored document by the Hamming distance of its
//! sketch to the query's, then reads the int8 vectors of the best few hundred and ranks those
//! exactly, so a query reads about 48 bytes per memory instead of the whole vector index; the
//! ULIDs name its candidates (and the keyword candidates) without another read.
//!
//! Stored beside its segment's other parts (`o/{org}/kidx/p/v/{model}/{segment}`, sealed like
//! them) when the segment is written by an instance that has the vectors; a document without a
//! vector then has none in the sketch.
//!
//! Body, integers little-endian: dimensions u16 · documents u32 · a bitmap of the documents
//! that have a sketch and one of those whose id is an event ULID (`⌈documents / 8⌉` bytes
//! each, bit `d % 8` of byte `d / 8`) · the sketches (`⌈dims / 8⌉` bytes each) · the ULIDs
//! (16 bytes each, big-endian), each column in document order. Columns rather than records,
//! so that a reader ranks the codes where they were read and decodes only the ids it names.

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

/// The event id `evt_{ulid}` (lower case, as lore writes them) as 16 bytes, if it is one.
fn ulid_bytes(id: &str) -> Option<[u8; 16]> {
    let ulid = id.strip_prefix("evt_")?;
    ulid::Ulid::from_string(ulid)
        .ok()
        .filter(|u| event_id(u.0) == id)
        .map(|u| u.0.to_be_bytes())
}

/// The event id of a ULID stored by [`ulid_bytes`].
fn event_id(ulid: u128) -> String {
    format!("evt_{}", ulid::Ulid(ulid).to_string().to_ascii_lowercase())
}

/// The body of a segment's sketch: each of its documents' id and sketch, if it has one.
pub fn encode<'a>(
    dims: usize,
    docs: impl ExactSizeIterator<Item = (&'a str, Option<Vec<u8>>)>,
) -> Vec<u8> {
    let code_len = dims.div_ceil(8);
    let n = docs.len();
    let map = n.div_ceil(8);
    let mut out = Vec::with_capacity(HEAD + 2 * map + n * (code_len + 16));
    out.extend_from_slice(&(dims as u16).to_le_bytes());
    out.extend_from_slice(&(n as u32).to_le_bytes());
    out.resize(HEAD + 2 * map, 0);
    let mut ulids = Vec::with_capacity(n * 16);
    for (d, (id, code)) in docs.enumerate() {
        if let Some(c) = code.filter(|c| c.len() == code_len) {
            out[HEAD + d / 8] |= 1 << (d % 8);
            out.extend_from_slice(&c);
        }
        if let Some(u) = ulid_bytes(id) {
            out[HEAD + map + d / 8] |= 1 << (d % 8);
            ulids.extend_from_slice(&u);
        }
    }
    out.extend_from_slice(&ulids);
    out
}

/// Bytes before the bitmaps: dimensions u16, documents u32.
const HEAD: usize = 6;

/// One column of a sketch: fixed-size values of the documents its bitmap marks.
struct Column {
    at: usize,
    len: usize,
    /// Per document, the number of its value (`u32::MAX`: none); `None` when every document
    /// has one, document `d`'s then being the `d`-th.
    rank: Option<Vec<u32>>,
}

impl Column {
    /// The column whose bitmap is `bitmap` and values start at `at`; and how many it holds.
    fn new(bitmap: &[u8], docs: u32, at: usize, len: usize) -> Result<(Self, usize), String> {
        if !docs.is_multiple_of(8) && bitmap.last().is_some_and(|&b| b >> (docs % 8) != 0) {
            return Err("a vector sketch marks documents past its end".into());
        }
        let present: usize = bitmap.iter().map(|b| b.count_ones() as usize).sum();
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
        Ok((Self { at, len, rank }, present))
    }

    fn get<'a>(&self, bytes: &'a [u8], doc: u32) -> Option<&'a [u8]> {
        let n = match &self.rank {
            None => doc,
            Some(rank) => Some(*rank.get(doc as usize)?).filter(|&n| n != u32::MAX)?,
        } as usize;
        let at = self.at + n * self.len;
        Some(&bytes[at..at + self.len])
    }
}

/// A decoded sketch: its codes ranked and its ids read where they were read.
pub struct Sketch {
    docs: u32,
    /// The part as read (its seal included).
    bytes: Vec<u8>,
    codes: Column,
    ulids: Column,
}

impl Sketch {
    pub fn len(&self) -> usize {
        self.docs as usize
    }

    pub fn code(&self, doc: u32) -> Option<&[u8]> {
        (doc < self.docs).then(|| self.codes.get(&self.bytes, doc))?
    }

    /// Every document that has a code, with it, in document order.
    pub fn codes(&self) -> impl Iterator<Item = (u32, &[u8])> + '_ {
        (0..self.docs).filter_map(|d| self.code(d).map(|c| (d, c)))
    }

    /// Document `doc`'s event id, if it is an event ULID.
    pub fn id(&self, doc: u32) -> Option<String> {
        let raw = (doc < self.docs).then(|| self.ulids.get(&self.bytes, doc))??;
        Some(event_id(u128::from_be_bytes(raw.try_into().ok()?)))
    }
}

/// Decodes the sketch body `bytes[at..]` of a segment of `docs` documents under a model of
/// `dims` dimensions, keeping `bytes` (no copy).
pub fn decode(bytes: Vec<u8>, at: usize, docs: u32, dims: usize) -> Result<Sketch, String> {
    let bad = |why: &str| format!("a vector sketch {why}");
    let body = bytes.get(at..).unwrap_or_default();
    if body.len() < HEAD {
        return Err(bad("is cut short"));
    }
    if usize::from(u16::from_le_bytes([body[0], body[1]])) != dims {
        return Err(bad("is of another dimension count"));
    }
    if u32::from_le_bytes(body[2..6].try_into().expect("4 bytes")) != docs {
        return Err(bad("holds another number of documents than its segment"));
    }
    let map = (docs as usize).div_ceil(8);
    let bitmaps = body
        .get(HEAD..HEAD + 2 * map)
        .ok_or_else(|| bad("is cut short"))?;
    let code_len = dims.div_ceil(8);
    let codes_at = at + HEAD + 2 * map;
    let (codes, with_code) = Column::new(&bitmaps[..map], docs, codes_at, code_len)?;
    let ulids_at = codes_at + with_code * code_len;
    let (ulids, with_ulid) = Column::new(&bitmaps[map..], docs, ulids_at, 16)?;
    if bytes.len() != ulids_at + with_ulid * 16 {
        return Err(bad("does not hold one value per marked document"));
    }
    Ok(Sketch {
        docs,
        bytes,
        codes,
        ulids,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sketches_round_trip_and_rank_by_sign_agreement() {
        let ids = [
            "evt_01jabcdefghjkmnpqrstvwxyz0",
            "custom-id",
            "evt_01jabcdefghjkmnpqrstvwxyz1",
        ];
        let a = sign_bits(&[0.5, -0.1, 0.2, -0.3, 0.0, 0.9, -0.2, 0.1, 0.4]);
        let b = sign_bits(&[-0.5, -0.1, 0.2, -0.3, 0.0, 0.9, -0.2, 0.1, -0.4]);
        assert_eq!(a.len(), 2);
        assert_eq!(hamming(&a, &a), 0);
        assert_eq!(hamming(&a, &b), 2);
        let docs = [
            (ids[0], Some(a.clone())),
            (ids[1], None),
            (ids[2], Some(b.clone())),
        ];
        let body = encode(9, docs.clone().into_iter());
        let s = decode(body.clone(), 0, 3, 9).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s.code(0), Some(&a[..]));
        assert_eq!(s.code(1), None);
        assert_eq!(s.code(2), Some(&b[..]));
        assert_eq!(s.code(3), None);
        assert_eq!(s.id(0).as_deref(), Some(ids[0]));
        assert_eq!(s.id(1), None);
        assert_eq!(s.id(2).as_deref(), Some(ids[2]));
        assert_eq!(s.id(3), None);
        let codes: Vec<(u32, &[u8])> = s.codes().collect();
        assert_eq!(codes, vec![(0, &a[..]), (2, &b[..])]);
        // Read in place behind a prefix (a part's seal).
        let mut sealed = vec![9u8; 8];
        sealed.extend_from_slice(&body);
        let behind = decode(sealed, 8, 3, 9).unwrap();
        assert_eq!(behind.code(2), Some(&b[..]));
        assert_eq!(behind.id(2).as_deref(), Some(ids[2]));
        // Every document with a code and an id: no rank tables, the same answers.
        let dense = [(ids[2], Some(b.clone())), (ids[0], Some(a.clone()))];
        let dense = decode(encode(9, dense.into_iter()), 0, 2, 9).unwrap();
        assert!(dense.codes.rank.is_none() && dense.ulids.rank.is_none());
        assert_eq!(dense.code(1), Some(&a[..]));
        assert_eq!(dense.id(1).as_deref(), Some(ids[0]));
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
        marked[HEAD] |= 1 << 5;
        assert!(decode(marked, 0, 3, 9).is_err(), "a mark past the end");
    }
}
