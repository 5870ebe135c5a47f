//! The index as bytes: a versioned, checksummed snapshot that restores to an equal index, and
//! whose every length, count and link is checked before it is used.
//!
//! Format version 1, all integers little-endian:
//!
//! ```text
//! header  magic "LOREVIDX" · version u32 · dims u32 · m u32 · ef_construction u32 · count u32
//!         · entry u32 (u32::MAX when empty) · max_level u32 · rng u64          (44 bytes)
//! body    scales f32 × count · levels u8 × count · vectors i8 × count·dims
//!         · layer-0 records u32 × count·(2m+1) · upper-layer records u32 × Σlevels·(m+1)
//! footer  checksum u64 of everything before it
//! ```

use super::VectorError;
use super::arena::Arena;
use super::hnsw::MAX_LEVEL;
use super::index::{DEFAULT_EF_SEARCH, DEFAULT_EXACT_THRESHOLD, MAX_DIMS, MAX_M, VectorIndex};

const MAGIC: &[u8; 8] = b"LOREVIDX";
/// The snapshot format this build writes and reads.
pub const SNAPSHOT_VERSION: u32 = 1;
const HEADER: usize = 44;
const FOOTER: usize = 8;

impl VectorIndex {
    /// The index as bytes, for the storage port. [`restore`](Self::restore) reads them back
    /// into an equal index (query-time settings are not kept).
    pub fn snapshot(&self) -> Vec<u8> {
        let n = self.len();
        let mut out = Vec::with_capacity(self.snapshot_len());
        out.extend_from_slice(MAGIC);
        for word in [
            SNAPSHOT_VERSION,
            self.dims as u32,
            self.m as u32,
            self.ef_construction as u32,
            n as u32,
            self.entry.unwrap_or(u32::MAX),
            u32::from(self.max_level),
        ] {
            out.extend_from_slice(&word.to_le_bytes());
        }
        out.extend_from_slice(&self.rng.to_le_bytes());
        for s in &self.scales {
            out.extend_from_slice(&s.to_le_bytes());
        }
        out.extend_from_slice(&self.levels);
        for chunk in self.vectors.chunks() {
            out.extend(chunk.iter().map(|&x| x as u8));
        }
        for chunk in self.links0.chunks() {
            for word in chunk {
                out.extend_from_slice(&word.to_le_bytes());
            }
        }
        for word in &self.upper {
            out.extend_from_slice(&word.to_le_bytes());
        }
        let sum = checksum(&out);
        out.extend_from_slice(&sum.to_le_bytes());
        debug_assert_eq!(out.len(), self.snapshot_len());
        out
    }

    fn snapshot_len(&self) -> usize {
        let n = self.len();
        HEADER + n * (4 + 1 + self.dims + 4 * (2 * self.m + 1)) + 4 * self.upper.len() + FOOTER
    }

    /// An index from [`snapshot`](Self::snapshot) bytes. Bytes of another format version, cut
    /// short, altered, or describing an impossible graph give an error, never a panic.
    pub fn restore(bytes: &[u8]) -> Result<Self, VectorError> {
        let bad = |why: &str| VectorError::Snapshot(why.to_string());
        if bytes.len() < HEADER + FOOTER || &bytes[..8] != MAGIC {
            return Err(bad("not a vector index snapshot"));
        }
        let mut header = Reader {
            bytes: &bytes[8..HEADER],
        };
        let version = header.u32();
        if version != SNAPSHOT_VERSION {
            return Err(VectorError::Snapshot(format!(
                "format version {version}, this build reads version {SNAPSHOT_VERSION}"
            )));
        }
        let (dims, m, ef_construction) = (header.usize(), header.usize(), header.usize());
        let (n, entry, max_level) = (header.usize(), header.u32(), header.u32());
        let rng = header.u64();
        if !(1..=MAX_DIMS).contains(&dims) || !(2..=MAX_M).contains(&m) || ef_construction == 0 {
            return Err(bad("impossible parameters"));
        }
        if n >= u32::MAX as usize || max_level > u32::from(MAX_LEVEL) {
            return Err(bad("impossible header"));
        }
        // Checked in u64: on wasm32 a forged count times dims could overflow usize.
        let stride0 = 2 * m + 1;
        let fixed = (n as u64) * (4 + 1 + dims as u64 + 4 * stride0 as u64);
        let available = (bytes.len() - HEADER - FOOTER) as u64;
        if fixed > available {
            return Err(bad("truncated"));
        }
        let (body, footer) = bytes.split_at(bytes.len() - FOOTER);
        let stored = u64::from_le_bytes(footer.try_into().expect("8 bytes"));
        if checksum(body) != stored {
            return Err(bad("checksum mismatch"));
        }

        let mut body = Reader {
            bytes: &body[HEADER..],
        };
        let scales: Vec<f32> = body
            .take(4 * n)
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
            .collect();
        if scales.iter().any(|s| !s.is_finite() || *s < 0.0) {
            return Err(bad("invalid scale"));
        }
        let levels = body.take(n).to_vec();
        if levels.iter().any(|&l| u32::from(l) > max_level) {
            return Err(bad("node above the top level"));
        }
        let upper_words: u64 = levels.iter().map(|&l| u64::from(l)).sum::<u64>() * (m as u64 + 1);
        if fixed + 4 * upper_words != available || upper_words >= u64::from(u32::MAX) {
            return Err(bad("length does not match the header"));
        }
        match entry {
            u32::MAX if n == 0 && max_level == 0 => {}
            e if (e as usize) < n && u32::from(levels[e as usize]) == max_level => {}
            _ => return Err(bad("invalid entry point")),
        }

        let mut vectors = Arena::new(dims);
        for v in body.take(n * dims).chunks_exact(dims) {
            vectors
                .push_default()
                .iter_mut()
                .zip(v)
                .for_each(|(q, &b)| *q = b as i8);
        }
        let mut links0 = Arena::new(stride0);
        let mut record = vec![0u32; stride0];
        for r in body.take(4 * n * stride0).chunks_exact(4 * stride0) {
            read_words(r, &mut record);
            check_record(&record, 2 * m, n, &levels, 0)?;
            links0.push(&record);
        }
        let mut upper = vec![0u32; upper_words as usize];
        read_words(body.take(4 * upper.len()), &mut upper);
        let mut upper_start = Vec::with_capacity(n);
        let mut start = 0usize;
        for &level in &levels {
            if level == 0 {
                upper_start.push(u32::MAX);
                continue;
            }
            upper_start.push(start as u32);
            for layer in 1..=level {
                let record = &upper[start..start + m + 1];
                check_record(record, m, n, &levels, layer)?;
                start += m + 1;
            }
        }

        Ok(Self {
            dims,
            m,
            ef_construction,
            rng,
            vectors,
            scales,
            levels,
            links0,
            upper_start,
            upper,
            entry: (n > 0).then_some(entry),
            max_level: max_level as u8,
            ef_search: DEFAULT_EF_SEARCH,
            exact_threshold: DEFAULT_EXACT_THRESHOLD,
        })
    }
}

/// A links record `[count, links…]` holds at most `cap` links, each to another node that
/// exists on `layer`.
fn check_record(
    record: &[u32],
    cap: usize,
    n: usize,
    levels: &[u8],
    layer: u8,
) -> Result<(), VectorError> {
    let count = record[0] as usize;
    if count > cap {
        return Err(VectorError::Snapshot("too many links".into()));
    }
    if record[1..1 + count]
        .iter()
        .any(|&l| l as usize >= n || levels[l as usize] < layer)
    {
        return Err(VectorError::Snapshot("link to a missing node".into()));
    }
    Ok(())
}

fn read_words(bytes: &[u8], out: &mut [u32]) {
    for (w, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
        *w = u32::from_le_bytes(b.try_into().expect("4 bytes"));
    }
}

/// Consumes a byte slice whose length was checked up front.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> &'a [u8] {
        let (head, tail) = self.bytes.split_at(len);
        self.bytes = tail;
        head
    }

    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take(4).try_into().expect("4 bytes"))
    }

    fn usize(&mut self) -> usize {
        self.u32() as usize
    }

    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take(8).try_into().expect("8 bytes"))
    }
}

/// A 64-bit checksum against storage corruption (not against forgery): four lanes of
/// xor-multiply-rotate over 8-byte words, folded with the length. Any change to one word
/// changes its lane, and each step is a bijection of the lane.
pub(super) fn checksum(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut lanes = [K, K ^ 1, K ^ 2, K ^ 3];
    let mut blocks = bytes.chunks_exact(32);
    for block in &mut blocks {
        for (lane, word) in lanes.iter_mut().zip(block.chunks_exact(8)) {
            let w = u64::from_le_bytes(word.try_into().expect("8 bytes"));
            *lane = (*lane ^ w).wrapping_mul(K).rotate_left(29);
        }
    }
    let mut tail = [0u8; 32];
    let rest = blocks.remainder();
    tail[..rest.len()].copy_from_slice(rest);
    for (lane, word) in lanes.iter_mut().zip(tail.chunks_exact(8)) {
        let w = u64::from_le_bytes(word.try_into().expect("8 bytes"));
        *lane = (*lane ^ w).wrapping_mul(K).rotate_left(29);
    }
    let mut h = bytes.len() as u64;
    for lane in lanes {
        h = (h ^ lane).wrapping_mul(K);
        h ^= h >> 32;
    }
    h
}
