//! Binary sketches of a segment's vectors: for each of its documents, the event's ULID and the
//! signs of its vector's components (one bit each, 32 bytes for 256 dimensions). A per-request
//! instance (`probe.rs`) ranks every stored document by the Hamming distance of its sketch to
//! the query's, then reads the int8 vectors of the best few hundred and ranks those exactly, so
//! a query reads about 50 bytes per memory instead of the whole vector index.
//!
//! Stored beside its segment's other parts (`o/{org}/kidx/p/v/{model}/{segment}`, sealed like
//! them) when the segment is written by an instance that has the vectors; a document without a
//! vector then has none in the sketch.
//!
//! Body, integers little-endian: dimensions u16 · documents u32 · per document a flags byte
//! (1: has a sketch, 2: its id is an event ULID), the ULID's 16 bytes when flagged, the sketch's
//! `⌈dims / 8⌉` bytes when flagged.

/// Flag: the document has a sketch.
const HAS_CODE: u8 = 1;
/// Flag: the document's id is an event ULID (stored in 16 bytes).
const HAS_ULID: u8 = 2;

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

/// The body of a segment's sketch: `docs` are its documents' ids with their sketches.
pub fn encode<'a>(
    dims: usize,
    docs: impl ExactSizeIterator<Item = (&'a str, Option<Vec<u8>>)>,
) -> Vec<u8> {
    let code_len = dims.div_ceil(8);
    let mut out = Vec::with_capacity(6 + docs.len() * (17 + code_len));
    out.extend_from_slice(&(dims as u16).to_le_bytes());
    out.extend_from_slice(&(docs.len() as u32).to_le_bytes());
    for (id, code) in docs {
        let ulid = ulid_bytes(id);
        let code = code.filter(|c| c.len() == code_len);
        let flags =
            if code.is_some() { HAS_CODE } else { 0 } | if ulid.is_some() { HAS_ULID } else { 0 };
        out.push(flags);
        if let Some(u) = ulid {
            out.extend_from_slice(&u);
        }
        if let Some(c) = code {
            out.extend_from_slice(&c);
        }
    }
    out
}

/// A decoded sketch.
pub struct Sketch {
    pub code_len: usize,
    /// Per document, its event's ULID (`None`: its id is not an event ULID).
    pub ulids: Vec<Option<u128>>,
    /// Per document, where its sketch starts in `codes` (`u32::MAX`: none).
    pub code_at: Vec<u32>,
    pub codes: Vec<u8>,
}

impl Sketch {
    /// Document `doc`'s event id, if it is an event ULID.
    pub fn id(&self, doc: u32) -> Option<String> {
        self.ulids
            .get(doc as usize)
            .copied()
            .flatten()
            .map(event_id)
    }

    pub fn len(&self) -> usize {
        self.ulids.len()
    }

    pub fn code(&self, doc: u32) -> Option<&[u8]> {
        let at = *self.code_at.get(doc as usize)?;
        (at != u32::MAX).then(|| &self.codes[at as usize..at as usize + self.code_len])
    }
}

/// Decodes a sketch body of a segment of `docs` documents under a model of `dims` dimensions.
pub fn decode(body: &[u8], docs: u32, dims: usize) -> Result<Sketch, String> {
    let bad = |why: &str| format!("a vector sketch {why}");
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
    let mut at = 6;
    let mut sketch = Sketch {
        code_len,
        ulids: Vec::with_capacity(docs as usize),
        code_at: Vec::with_capacity(docs as usize),
        codes: Vec::with_capacity(docs as usize * code_len),
    };
    for _ in 0..docs {
        let flags = *body.get(at).ok_or_else(|| bad("is cut short"))?;
        at += 1;
        if flags & !(HAS_CODE | HAS_ULID) != 0 {
            return Err(bad("has unknown flags"));
        }
        let id = if flags & HAS_ULID != 0 {
            let raw = body.get(at..at + 16).ok_or_else(|| bad("is cut short"))?;
            at += 16;
            Some(u128::from_be_bytes(raw.try_into().expect("16 bytes")))
        } else {
            None
        };
        sketch.ulids.push(id);
        if flags & HAS_CODE != 0 {
            let code = body
                .get(at..at + code_len)
                .ok_or_else(|| bad("is cut short"))?;
            at += code_len;
            sketch.code_at.push(sketch.codes.len() as u32);
            sketch.codes.extend_from_slice(code);
        } else {
            sketch.code_at.push(u32::MAX);
        }
    }
    if at != body.len() {
        return Err(bad("has bytes after its end"));
    }
    Ok(sketch)
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
        let body = encode(
            9,
            [
                (ids[0], Some(a.clone())),
                (ids[1], Some(b.clone())),
                (ids[2], None),
            ]
            .into_iter(),
        );
        let s = decode(&body, 3, 9).unwrap();
        assert_eq!(s.id(0).as_deref(), Some(ids[0]));
        assert_eq!(s.id(1), None);
        assert_eq!(s.id(2).as_deref(), Some(ids[2]));
        assert_eq!(s.code(0), Some(&a[..]));
        assert_eq!(s.code(1), Some(&b[..]));
        assert_eq!(s.code(2), None);
        assert!(decode(&body, 4, 9).is_err());
        assert!(decode(&body, 3, 16).is_err());
        for cut in 0..body.len() {
            assert!(decode(&body[..cut], 3, 9).is_err(), "cut at {cut}");
        }
    }
}
