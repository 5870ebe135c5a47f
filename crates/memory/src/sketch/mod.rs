//! Binary sketches of a segment's vectors: for each of its documents, the signs of its
//! vector's components after a fixed rotation ([`sign_bits`]: one bit each, 48 bytes for 384
//! dimensions) and its event's ULID. A
//! per-request instance (`probe.rs`) ranks stored documents by the Hamming distance of their
//! sketches to the query's, then reads the int8 vectors of the best few hundred and ranks those
//! exactly, so a query reads about 52 bytes per memory it ranks instead of the whole vector
//! index; the ULIDs name its candidates (and the keyword candidates) without another read.
//!
//! Stored beside its segment's other parts (`o/{org}/kidx/p/v/{model}/{segment}`, sealed like
//! them) when the segment is written by an instance that has the vectors; a document without a
//! vector then has none in the sketch. A segment with fewer than [`CLUSTER_MIN`] sketches keeps
//! them in that one part (*flat*). A larger one is *clustered*: its codes are grouped by
//! similarity ([`cluster`], k-modes under Hamming distance), the part holds only each
//! cluster's centroid and size, and each cluster is a part of its own
//! (`kidx/p/c/{model}/{segment}/{cluster}`, at most one stored chunk); a query reads the
//! clusters whose centroids are nearest its own sketch until it has its share of
//! [`PROBE_CODES`], so what it reads stays bounded as the org grows.
//!
//! Body, integers little-endian: dimensions u16 · documents u32 · clusters u32, then
//! - flat (no clusters): a bitmap of the documents that have a sketch and one of those whose id
//!   is an event ULID (`⌈documents / 8⌉` bytes each, bit `d % 8` of byte `d / 8`) · the
//!   sketches (`⌈dims / 8⌉` bytes each) · the ULIDs (16 bytes each, big-endian), each column in
//!   document order. Columns rather than records, so that a reader ranks the codes where they
//!   were read and decodes only the ids it names.
//! - clustered: the centroids (`⌈dims / 8⌉` bytes each) · each cluster's size (u32).
//!
//! A cluster's part: its size `m` u32 · its documents' numbers in the segment (u32 each,
//! ascending) · a flat body of its `m` members, in that order.

use super::codec::SEAL_HEAD;
use lore_base::storage::VALUE_CHUNK;

/// Segments with at least this many sketches store them in clusters.
pub const CLUSTER_MIN: usize = 4096;
/// Sketches a probe ranks in all its clustered segments, shared among them by size (flat
/// segments are ranked whole).
pub const PROBE_CODES: usize = 8192;
/// Rounds of k-modes when a segment's sketches are clustered.
const CLUSTER_ROUNDS: usize = 6;
/// The most sketches the clustering trains on (evenly spaced); the rest are only assigned.
const CLUSTER_SAMPLE: usize = 16_384;

/// Rounds of sign flips and Walsh–Hadamard transforms in [`sign_bits`]' rotation.
const ROTATIONS: usize = 3;

/// A document's sketch: one bit per dimension, the sign of each component of `v` after a fixed
/// pseudo-random rotation (random hyperplanes, so the share of differing bits estimates the
/// angle between two vectors whatever the embeddings' shape; the signs of the raw components
/// do not: sentence embeddings share a mean direction and a few strong ones, and on such data
/// raw signs ranked the true top 10 among their nearest 128 only 6 times in 10 at 10,000
/// vectors). The rotation is `ROTATIONS` rounds of fixed sign flips and a fast
/// Walsh–Hadamard transform over `v` padded to a power of two (O(d log d), about as random as
/// a dense rotation for this purpose), the same on every platform (integer hashing, IEEE adds).
pub fn sign_bits(v: &[f32]) -> Vec<u8> {
    bits_of(&rotated(v))
}

/// `v` rotated as [`sign_bits`] rotates it (its first `v.len()` components).
fn rotated(v: &[f32]) -> Vec<f32> {
    let n = v.len().next_power_of_two();
    let mut x = vec![0f32; n];
    x[..v.len()].copy_from_slice(v);
    for round in 0..ROTATIONS {
        for (i, xi) in x.iter_mut().enumerate() {
            if flip(round, i) {
                *xi = -*xi;
            }
        }
        hadamard(&mut x);
    }
    x.truncate(v.len());
    x
}

/// The signs of `x`'s components, one bit each.
fn bits_of(x: &[f32]) -> Vec<u8> {
    let mut out = vec![0u8; x.len().div_ceil(8)];
    for (i, &y) in x.iter().enumerate() {
        if y > 0.0 {
            out[i / 8] |= 1 << (i % 8);
        }
    }
    out
}

/// A query as sketches are compared with it: its own sketch, for the Hamming distance, and its
/// rotated components, for a closer score of the sketches that distance keeps (one side
/// quantized instead of both): the sum of the components whose sign a sketch shares minus the
/// others, read from a table per byte of the sketch (256 sums per byte, made once per query).
pub struct QuerySketch {
    pub bits: Vec<u8>,
    table: Vec<f32>,
}

impl QuerySketch {
    pub fn new(v: &[f32]) -> Self {
        let x = rotated(v);
        let bits = bits_of(&x);
        let mut table = vec![0f32; bits.len() * 256];
        for (j, sums) in table.chunks_exact_mut(256).enumerate() {
            let part = &x[j * 8..(j * 8 + 8).min(x.len())];
            // Every sign negative, then each pattern from the one without its lowest bit.
            sums[0] = -part.iter().sum::<f32>();
            for pattern in 1..256usize {
                let low = pattern.trailing_zeros() as usize;
                let flip = part.get(low).map_or(0.0, |y| 2.0 * y);
                sums[pattern] = sums[pattern & (pattern - 1)] + flip;
            }
        }
        Self { bits, table }
    }

    /// How well `code` agrees with the query (higher is nearer).
    pub fn score(&self, code: &[u8]) -> f32 {
        code.iter()
            .enumerate()
            .map(|(j, &b)| self.table[j * 256 + usize::from(b)])
            .sum()
    }
}

/// Whether round `round` of the rotation flips component `i` (SplitMix64 of both).
fn flip(round: usize, i: usize) -> bool {
    let mut z = ((round as u64) << 32 | i as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) & 1 == 1
}

/// The unnormalised fast Walsh–Hadamard transform of `x` (its length a power of two), in place.
fn hadamard(x: &mut [f32]) {
    let mut h = 1;
    while h < x.len() {
        for block in x.chunks_exact_mut(2 * h) {
            let (a, b) = block.split_at_mut(h);
            for (p, q) in a.iter_mut().zip(b.iter_mut()) {
                let (u, w) = (*p, *q);
                *p = u + w;
                *q = u - w;
            }
        }
        h *= 2;
    }
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

/// The bytes of a flat body of `docs` documents with codes of `code_len` bytes, `ulids` of
/// them with a ULID.
fn flat_len(docs: usize, code_len: usize, with_code: usize, ulids: usize) -> usize {
    HEAD + 2 * docs.div_ceil(8) + with_code * code_len + ulids * 16
}

/// The flat body of documents' ids and sketches.
fn encode_flat<'a>(
    dims: usize,
    docs: impl ExactSizeIterator<Item = (&'a str, Option<&'a [u8]>)>,
) -> Vec<u8> {
    let code_len = dims.div_ceil(8);
    let n = docs.len();
    let map = n.div_ceil(8);
    let mut out = Vec::with_capacity(flat_len(n, code_len, n, n));
    out.extend_from_slice(&(dims as u16).to_le_bytes());
    out.extend_from_slice(&(n as u32).to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.resize(HEAD + 2 * map, 0);
    let mut ulids = Vec::with_capacity(n * 16);
    for (d, (id, code)) in docs.enumerate() {
        if let Some(c) = code.filter(|c| c.len() == code_len) {
            out[HEAD + d / 8] |= 1 << (d % 8);
            out.extend_from_slice(c);
        }
        if let Some(u) = ulid_bytes(id) {
            out[HEAD + map + d / 8] |= 1 << (d % 8);
            ulids.extend_from_slice(&u);
        }
    }
    out.extend_from_slice(&ulids);
    out
}

/// The most members of one cluster, so that its part (sealed) fits one stored chunk.
pub fn cluster_cap(code_len: usize) -> usize {
    // A member: its number (4), its code, its ULID (16) and two bitmap bits; plus the heads.
    let room = VALUE_CHUNK - SEAL_HEAD - 4 - HEAD - 2;
    room * 4 / (4 * (4 + code_len + 16) + 1)
}

/// Groups `codes` (all of one length) by similarity: k-modes under Hamming distance, seeded
/// with evenly spaced codes and trained on an evenly spaced sample, then every code assigned
/// to its nearest centroid (ties to the lower). Deterministic. Clusters are split into pieces
/// of at most `cap` (each piece keeps the centroid) and empty ones dropped: each centroid with
/// its members' indexes, ascending.
pub fn cluster(codes: &[&[u8]], cap: usize) -> Vec<(Vec<u8>, Vec<u32>)> {
    let n = codes.len();
    if n == 0 {
        return Vec::new();
    }
    let code_len = codes[0].len();
    let k = n.div_ceil((cap * 3 / 5).max(1)).max(1);
    let stride = n.div_ceil(CLUSTER_SAMPLE).max(1);
    let sample: Vec<&[u8]> = codes.iter().step_by(stride).copied().collect();
    let mut centroids: Vec<Vec<u8>> = (0..k)
        .map(|c| sample[c * sample.len() / k].to_vec())
        .collect();
    let nearest = |centroids: &[Vec<u8>], code: &[u8]| {
        let mut best = (u32::MAX, 0);
        for (c, centroid) in centroids.iter().enumerate() {
            let d = hamming(code, centroid);
            if d < best.0 {
                best = (d, c);
            }
        }
        best.1
    };
    let bits = code_len * 8;
    for _ in 0..CLUSTER_ROUNDS {
        let mut counts = vec![0u32; k * bits];
        let mut sizes = vec![0u32; k];
        for code in &sample {
            let c = nearest(&centroids, code);
            sizes[c] += 1;
            let row = &mut counts[c * bits..(c + 1) * bits];
            for (b, slot) in row.iter_mut().enumerate() {
                *slot += u32::from(code[b / 8] >> (b % 8) & 1);
            }
        }
        let mut moved = false;
        for (c, centroid) in centroids.iter_mut().enumerate() {
            if sizes[c] == 0 {
                continue;
            }
            let mut next = vec![0u8; code_len];
            for b in 0..bits {
                if counts[c * bits + b] * 2 > sizes[c] {
                    next[b / 8] |= 1 << (b % 8);
                }
            }
            moved |= next != *centroid;
            *centroid = next;
        }
        if !moved {
            break;
        }
    }
    let mut members: Vec<Vec<u32>> = vec![Vec::new(); k];
    for (i, code) in codes.iter().enumerate() {
        members[nearest(&centroids, code)].push(i as u32);
    }
    let mut out = Vec::with_capacity(k);
    for (centroid, m) in centroids.into_iter().zip(members) {
        for piece in m.chunks(cap.max(1)) {
            out.push((centroid.clone(), piece.to_vec()));
        }
    }
    out
}

/// A segment's sketch encoded: its part's body and, when it is clustered, each cluster's.
pub struct Encoded {
    pub body: Vec<u8>,
    pub clusters: Vec<Vec<u8>>,
}

/// The sketch of a segment's documents, each with its id and sketch if it has one: flat below
/// [`CLUSTER_MIN`] sketches, else clustered.
pub fn encode<'a>(
    dims: usize,
    docs: impl ExactSizeIterator<Item = (&'a str, Option<Vec<u8>>)>,
) -> Encoded {
    let code_len = dims.div_ceil(8);
    let docs: Vec<(&str, Option<Vec<u8>>)> = docs
        .map(|(id, code)| (id, code.filter(|c| c.len() == code_len)))
        .collect();
    let with_code: Vec<u32> = (0..docs.len() as u32)
        .filter(|&d| docs[d as usize].1.is_some())
        .collect();
    if with_code.len() < CLUSTER_MIN {
        let body = encode_flat(dims, docs.iter().map(|(id, c)| (*id, c.as_deref())));
        return Encoded {
            body,
            clusters: Vec::new(),
        };
    }
    let codes: Vec<&[u8]> = with_code
        .iter()
        .map(|&d| docs[d as usize].1.as_deref().expect("has a code"))
        .collect();
    let groups = cluster(&codes, cluster_cap(code_len));
    let mut body = Vec::with_capacity(HEAD + groups.len() * (code_len + 4));
    body.extend_from_slice(&(dims as u16).to_le_bytes());
    body.extend_from_slice(&(docs.len() as u32).to_le_bytes());
    body.extend_from_slice(&(groups.len() as u32).to_le_bytes());
    for (centroid, _) in &groups {
        body.extend_from_slice(centroid);
    }
    let mut clusters = Vec::with_capacity(groups.len());
    for (_, members) in &groups {
        body.extend_from_slice(&(members.len() as u32).to_le_bytes());
        let numbers: Vec<u32> = members.iter().map(|&i| with_code[i as usize]).collect();
        let mut part = Vec::with_capacity(4 + 4 * numbers.len());
        part.extend_from_slice(&(numbers.len() as u32).to_le_bytes());
        for d in &numbers {
            part.extend_from_slice(&d.to_le_bytes());
        }
        part.extend(encode_flat(
            dims,
            numbers
                .iter()
                .map(|&d| (docs[d as usize].0, docs[d as usize].1.as_deref())),
        ));
        clusters.push(part);
    }
    Encoded { body, clusters }
}

/// Bytes before the bitmaps or centroids: dimensions u16, documents u32, clusters u32.
const HEAD: usize = 10;
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

/// A segment's stored sketch: its documents' sketches, or the directory of its clusters.
pub enum Stored {
    Flat(Sketch),
    Clustered(Directory),
}

/// A clustered segment's centroids and cluster sizes.
pub struct Directory {
    code_len: usize,
    centroids: Vec<u8>,
    sizes: Vec<u32>,
}

impl Directory {
    pub fn clusters(&self) -> u32 {
        self.sizes.len() as u32
    }

    /// Cluster `c`'s centroid.
    pub fn centroid(&self, c: u32) -> &[u8] {
        let at = c as usize * self.code_len;
        &self.centroids[at..at + self.code_len]
    }

    /// How many sketches cluster `c` holds.
    pub fn size(&self, c: u32) -> u32 {
        self.sizes[c as usize]
    }

    /// The clusters whose centroids are nearest `bits`, nearest first (ties to the lower
    /// number), as many as hold `want` sketches (at least one).
    pub fn nearest(&self, bits: &[u8], want: usize) -> Vec<u32> {
        let mut order: Vec<(u32, u32)> = self
            .centroids
            .chunks_exact(self.code_len)
            .enumerate()
            .map(|(c, centroid)| (hamming(bits, centroid), c as u32))
            .collect();
        order.sort_unstable();
        let mut out = Vec::new();
        let mut held = 0usize;
        for (_, c) in order {
            if held >= want && !out.is_empty() {
                break;
            }
            held += self.sizes[c as usize] as usize;
            out.push(c);
        }
        out
    }
}

/// One cluster of a segment's sketches: member `i` is the segment's document `docs[i]`.
pub struct Cluster {
    pub docs: Vec<u32>,
    pub sketch: Sketch,
}

/// The dimension and document counts at the start of a body; the clusters it names.
fn read_head(body: &[u8], docs: u32, dims: usize) -> Result<u32, String> {
    let bad = |why: &str| format!("a vector sketch {why}");
    if body.len() < HEAD {
        return Err(bad("is cut short"));
    }
    if usize::from(u16::from_le_bytes([body[0], body[1]])) != dims {
        return Err(bad("is of another dimension count"));
    }
    if u32::from_le_bytes(body[2..6].try_into().expect("4 bytes")) != docs {
        return Err(bad("holds another number of documents than its segment"));
    }
    Ok(u32::from_le_bytes(body[6..10].try_into().expect("4 bytes")))
}

/// Decodes the sketch body `bytes[at..]` of a segment of `docs` documents under a model of
/// `dims` dimensions, keeping `bytes` (no copy) when it is flat.
pub fn decode(bytes: Vec<u8>, at: usize, docs: u32, dims: usize) -> Result<Stored, String> {
    let body = bytes.get(at..).unwrap_or_default();
    let clusters = read_head(body, docs, dims)? as usize;
    if clusters == 0 {
        return decode_flat(bytes, at, docs, dims).map(Stored::Flat);
    }
    let code_len = dims.div_ceil(8);
    if Some(body.len()) != clusters.checked_mul(code_len + 4).map(|n| n + HEAD) {
        return Err("a vector sketch's cluster directory is of another length".into());
    }
    let sizes_at = HEAD + clusters * code_len;
    let sizes: Vec<u32> = body[sizes_at..]
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
        .collect();
    if sizes.iter().map(|&s| u64::from(s)).sum::<u64>() > u64::from(docs) || sizes.contains(&0) {
        return Err("a vector sketch's clusters hold more documents than its segment".into());
    }
    Ok(Stored::Clustered(Directory {
        code_len,
        centroids: body[HEAD..sizes_at].to_vec(),
        sizes,
    }))
}

/// Decodes cluster `bytes[at..]` of `size` sketches of a segment of `docs` documents.
pub fn decode_cluster(
    bytes: Vec<u8>,
    at: usize,
    size: u32,
    docs: u32,
    dims: usize,
) -> Result<Cluster, String> {
    let bad = |why: &str| format!("a vector sketch cluster {why}");
    let body = bytes.get(at..).unwrap_or_default();
    let m = size as usize;
    if body.len() < 4 + 4 * m || u32::from_le_bytes(body[..4].try_into().expect("4")) != size {
        return Err(bad("is cut short or of another size"));
    }
    let numbers: Vec<u32> = body[4..4 + 4 * m]
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
        .collect();
    if numbers.windows(2).any(|w| w[0] >= w[1]) || numbers.last().is_some_and(|&d| d >= docs) {
        return Err(bad("names its documents out of order or past its segment"));
    }
    let sketch = decode_flat(bytes, at + 4 + 4 * m, size, dims)?;
    if sketch.codes.rank.is_some() {
        return Err(bad("has a member without a sketch"));
    }
    Ok(Cluster {
        docs: numbers,
        sketch,
    })
}

/// Decodes the flat body `bytes[at..]` of `docs` documents, keeping `bytes` (no copy).
fn decode_flat(bytes: Vec<u8>, at: usize, docs: u32, dims: usize) -> Result<Sketch, String> {
    let bad = |why: &str| format!("a vector sketch {why}");
    let body = bytes.get(at..).unwrap_or_default();
    if read_head(body, docs, dims)? != 0 {
        return Err(bad("is clustered where a flat one was expected"));
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
mod tests;
