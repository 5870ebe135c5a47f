//! The stored form of a keyword index segment's parts (`segments.rs`): pages of documents and
//! buckets of postings, each sealed with its own checksum so that a reader can use any one of
//! them alone (a per-request instance reads only the buckets of its query's terms).
//!
//! - A **document page** holds up to [`DOC_PAGE`] consecutive documents: the strings they name
//!   once each, then per document its id, kind, author, entities, time, the event it
//!   supersedes and its length in terms.
//! - A **bucket** holds, for the terms whose hash falls in it ([`bucket_of`], one of
//!   [`BUCKETS`]), each term's postings in the segment: document (relative to the segment's
//!   first), count and the document's length (so ranking needs no document page), with each
//!   term's byte length up front so a reader skips the terms it does not want.
//! - Every part is sealed: magic, then a checksum of its storage key and body (the low 32 bits
//!   of an XXH3-64 of the body seeded with the key's), then the body. A part moved to another
//!   key, cut, altered or of another layout fails to open. XXH3 rather than CRC-32: a Spin
//!   request checks every byte it reads (about half a megabyte at 10,000 memories), and in
//!   WebAssembly, without CRC instructions, CRC-32 was the request's costliest function.
//!
//! Hand-written rather than serde: a few varints per document and posting, read on every cold
//! start, and every read bounds-checked so that a corrupt part is an error, never a panic.

use std::collections::HashMap;

use super::keyword::{Doc, DocMeta, KeywordIndex};

/// The first bytes of every part; a new layout takes a new magic.
const MAGIC: &[u8; 4] = b"LKP4";
/// The magic and the checksum before every part's body.
pub const SEAL_HEAD: usize = 8;
/// How many buckets the terms are spread over (the same in every segment, so that one scan
/// of a bucket's prefix reads a term's lists in all of them).
pub const BUCKETS: u32 = 64;
/// Documents per page.
pub const DOC_PAGE: u32 = 128;
/// Documents per id page: a per-request search reads the ids of its few hundred best
/// candidates a page each, so the pages are small (about 1.7 KB).
pub const ID_PAGE: u32 = 64;

/// Event ids of this form are stored as their 26 ULID characters.
const EVENT_PREFIX: &str = "evt_";
const ULID_LEN: usize = 26;

/// The bucket of `term`: a CRC-32 of its bytes (stable on every platform and build).
pub fn bucket_of(term: &str) -> u32 {
    crc32fast::hash(term.as_bytes()) % BUCKETS
}

fn part_checksum(key: &str, body: &[u8]) -> u32 {
    let seed = xxhash_rust::xxh3::xxh3_64(key.as_bytes());
    xxhash_rust::xxh3::xxh3_64_with_seed(body, seed) as u32
}

/// A part as stored at `key`.
pub fn seal(key: &str, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(SEAL_HEAD + body.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&part_checksum(key, body).to_le_bytes());
    out.extend_from_slice(body);
    out
}

/// The body of the part stored at `key`, if it is one of this layout and intact.
pub fn unseal<'a>(key: &str, bytes: &'a [u8]) -> Result<&'a [u8], String> {
    if bytes.len() < SEAL_HEAD || &bytes[..4] != MAGIC {
        return Err("a keyword index part of another layout".into());
    }
    let stored = u32::from_le_bytes(bytes[4..8].try_into().expect("4 bytes"));
    let body = &bytes[SEAL_HEAD..];
    if part_checksum(key, body) != stored {
        return Err("a keyword index part does not match its checksum".into());
    }
    Ok(body)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// Signed to unsigned, small magnitudes small.
fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// The strings of a page, each stored once and named by its number.
#[derive(Default)]
struct Strings<'a> {
    list: Vec<&'a str>,
    ids: HashMap<&'a str, u64>,
}

impl<'a> Strings<'a> {
    fn id(&mut self, s: &'a str) -> u64 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.list.len() as u64;
        self.list.push(s);
        self.ids.insert(s, id);
        id
    }
}

/// One posting of a term in a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Posting {
    /// The document, counted from the segment's first.
    pub doc: u32,
    /// How often the term occurs in it.
    pub tf: u32,
    /// The document's length in terms.
    pub len: u32,
}

/// A term's postings in one segment.
pub type TermList = (String, Vec<Posting>);

impl KeywordIndex {
    /// The pages of documents `[start, end)`, bodies in order.
    pub fn encode_doc_pages(&self, start: u32, end: u32) -> Vec<Vec<u8>> {
        self.docs[start as usize..end as usize]
            .chunks(DOC_PAGE as usize)
            .map(encode_doc_page)
            .collect()
    }

    /// The id pages of documents `[start, end)`, bodies in order.
    pub fn encode_id_pages(&self, start: u32, end: u32) -> Vec<Vec<u8>> {
        self.docs[start as usize..end as usize]
            .chunks(ID_PAGE as usize)
            .map(|docs| {
                let mut body = Vec::with_capacity(docs.len() * (ULID_LEN + 1) + 2);
                put_varint(&mut body, docs.len() as u64);
                for doc in docs {
                    put_id(&mut body, &doc.meta.id, |body, id| {
                        put_bytes(body, id.as_bytes())
                    });
                }
                body
            })
            .collect()
    }

    /// The buckets of postings of documents `[start, end)`: (bucket, body) for each bucket
    /// that holds a term, in bucket order; terms in byte order inside, so equal ranges encode
    /// to equal bytes.
    pub fn encode_buckets(&self, start: u32, end: u32) -> Vec<(u32, Vec<u8>)> {
        type Lists<'a> = Vec<(&'a str, &'a [(u32, u32)])>;
        let mut buckets: Vec<Lists<'_>> = vec![Vec::new(); BUCKETS as usize];
        for (term, list) in &self.postings {
            let from = list.partition_point(|&(d, _)| d < start);
            let to = list.partition_point(|&(d, _)| d < end);
            if from < to {
                buckets[bucket_of(term) as usize].push((term.as_str(), &list[from..to]));
            }
        }
        let mut out = Vec::new();
        for (b, mut terms) in buckets.into_iter().enumerate() {
            if terms.is_empty() {
                continue;
            }
            terms.sort_unstable_by_key(|(term, _)| *term);
            let mut body = Vec::new();
            put_varint(&mut body, terms.len() as u64);
            let mut block = Vec::new();
            for (term, list) in terms {
                block.clear();
                let mut previous = None;
                for &(doc, tf) in list {
                    let local = doc - start;
                    put_varint(&mut block, u64::from(previous.map_or(local, |p| local - p)));
                    put_varint(&mut block, u64::from(tf));
                    put_varint(&mut block, u64::from(self.docs[doc as usize].len));
                    previous = Some(local);
                }
                put_bytes(&mut body, term.as_bytes());
                put_varint(&mut body, list.len() as u64);
                put_bytes(&mut body, &block);
            }
            out.push((b as u32, body));
        }
        out
    }

    /// Appends a decoded page of documents after this index's. An error (a document the index
    /// already holds) leaves the index as it was.
    pub(super) fn append_docs(&mut self, docs: Vec<Doc>) -> Result<(), String> {
        if docs.iter().any(|d| self.by_id.contains_key(&d.meta.id)) {
            return Err("a keyword index part holds a document the index already has".into());
        }
        let base = self.docs.len();
        for (i, doc) in docs.into_iter().enumerate() {
            if let Some(old) = &doc.meta.supersedes_event_id {
                self.superseded_by.insert(old.clone(), doc.meta.id.clone());
            }
            self.total_len += u64::from(doc.len);
            self.by_id.insert(doc.meta.id.clone(), base + i);
            self.docs.push(doc);
        }
        Ok(())
    }

    /// Appends a segment's postings, its documents starting at `base` (already appended, and
    /// segments appended in order, so every term's list stays ascending).
    pub fn append_postings(&mut self, base: u32, lists: Vec<TermList>) {
        for (term, list) in lists {
            self.postings
                .entry(term)
                .or_default()
                .extend(list.into_iter().map(|p| (base + p.doc, p.tf)));
        }
    }
}

fn encode_doc_page(docs: &[Doc]) -> Vec<u8> {
    let mut strings = Strings::default();
    let mut body = Vec::with_capacity(docs.len() * 48);
    put_varint(&mut body, docs.len() as u64);
    for doc in docs {
        let m = &doc.meta;
        put_id(&mut body, &m.id, |body, id| {
            put_varint(body, strings.id(id))
        });
        put_varint(&mut body, strings.id(&m.kind));
        put_varint(&mut body, strings.id(&m.author));
        put_varint(&mut body, m.entity_ids.len() as u64);
        for e in &m.entity_ids {
            put_varint(&mut body, strings.id(e));
        }
        put_varint(&mut body, zigzag(m.created_at_ms));
        // The described time as an offset from the saved one, plus one; 0 for none.
        match m.occurred_at_ms {
            Some(at) => put_varint(&mut body, zigzag(at.wrapping_sub(m.created_at_ms)) + 1),
            None => put_varint(&mut body, 0),
        }
        match &m.supersedes_event_id {
            Some(s) => put_varint(&mut body, strings.id(s) + 1),
            None => put_varint(&mut body, 0),
        }
        put_varint(&mut body, u64::from(doc.len));
    }
    let mut out = Vec::with_capacity(body.len() + 64);
    put_varint(&mut out, strings.list.len() as u64);
    for s in &strings.list {
        put_bytes(&mut out, s.as_bytes());
    }
    out.extend_from_slice(&body);
    out
}

/// A document's id: an event id as its 26 ULID characters after a 0, another after a 1 as
/// `other` writes it.
fn put_id<'a>(body: &mut Vec<u8>, id: &'a str, other: impl FnOnce(&mut Vec<u8>, &'a str)) {
    match id.strip_prefix(EVENT_PREFIX) {
        Some(ulid) if ulid.len() == ULID_LEN && ulid.is_ascii() => {
            body.push(0);
            body.extend_from_slice(ulid.as_bytes());
        }
        _ => {
            body.push(1);
            other(body, id);
        }
    }
}

/// An id [`put_id`] wrote, the other form read by `other`.
fn read_id<'a>(
    r: &mut Reader<'a>,
    other: impl FnOnce(&mut Reader<'a>) -> Result<String, String>,
) -> Result<String, String> {
    match r.byte()? {
        0 => {
            let ulid = r.fixed(ULID_LEN)?;
            let ulid = std::str::from_utf8(ulid).map_err(|_| "a bad event id")?;
            Ok(format!("{EVENT_PREFIX}{ulid}"))
        }
        1 => other(r),
        _ => Err("a document id of an unknown form".into()),
    }
}

/// Id number `n` of an id page body, the others skipped, not decoded.
pub(super) fn id_in_page(bytes: &[u8], n: usize) -> Result<String, String> {
    let mut r = Reader { bytes, at: 0 };
    if n >= r.count("document")? {
        return Err("an id page holds fewer documents than its segment".into());
    }
    for _ in 0..n {
        match r.byte()? {
            0 => r.fixed(ULID_LEN).map(|_| ())?,
            1 => {
                let len = r.count("byte")?;
                r.fixed(len)?;
            }
            _ => return Err("a document id of an unknown form".into()),
        }
    }
    read_id(&mut r, Reader::text)
}

/// The documents of a page body.
pub(super) fn decode_doc_page(bytes: &[u8]) -> Result<Vec<Doc>, String> {
    let mut r = Reader { bytes, at: 0 };
    let n_strings = r.count("string")?;
    let mut strings = Vec::with_capacity(n_strings);
    for _ in 0..n_strings {
        strings.push(r.text()?);
    }
    let string = |id: u64| -> Result<String, String> {
        strings
            .get(usize::try_from(id).unwrap_or(usize::MAX))
            .cloned()
            .ok_or_else(|| "a page names a string it does not hold".to_string())
    };
    let n_docs = r.count("document")?;
    let mut docs = Vec::with_capacity(n_docs);
    for _ in 0..n_docs {
        let id = read_id(&mut r, |r| string(r.varint()?))?;
        let kind = string(r.varint()?)?;
        let author = string(r.varint()?)?;
        let n_entities = r.count("entity")?;
        let mut entity_ids = Vec::with_capacity(n_entities);
        for _ in 0..n_entities {
            entity_ids.push(string(r.varint()?)?);
        }
        let created_at_ms = unzigzag(r.varint()?);
        let occurred_at_ms = match r.varint()? {
            0 => None,
            d => Some(created_at_ms.wrapping_add(unzigzag(d - 1))),
        };
        let supersedes_event_id = match r.varint()? {
            0 => None,
            s => Some(string(s - 1)?),
        };
        let len = r.u32()?;
        docs.push(Doc {
            meta: DocMeta {
                id,
                kind,
                author,
                entity_ids,
                created_at_ms,
                occurred_at_ms,
                supersedes_event_id,
            },
            len,
        });
    }
    if r.at != bytes.len() {
        return Err("a document page has bytes after its end".into());
    }
    Ok(docs)
}

/// The term lists of a bucket body of a segment of `docs` documents: all of them, or only
/// those of `only` (the others are skipped undecoded). Every term must belong in `bucket`.
pub fn decode_bucket(
    bytes: &[u8],
    bucket: u32,
    docs: u32,
    only: Option<&[String]>,
) -> Result<Vec<TermList>, String> {
    let mut r = Reader { bytes, at: 0 };
    let n_terms = r.count("term")?;
    let mut out = Vec::with_capacity(only.map_or(n_terms, <[String]>::len));
    for _ in 0..n_terms {
        let len = r.count("byte")?;
        let raw = r.fixed(len)?;
        let n = r.count("posting")?;
        let block_len = r.count("byte")?;
        let block = r.fixed(block_len)?;
        // A reader of a few terms skips the others undecoded (the part's checksum already
        // vouches for them).
        if only.is_some_and(|wanted| !wanted.iter().any(|w| w.as_bytes() == raw)) {
            continue;
        }
        let term = String::from_utf8(raw.to_vec()).map_err(|_| "a term is not UTF-8")?;
        if bucket_of(&term) != bucket {
            return Err("a bucket holds a term of another bucket".into());
        }
        let mut b = Reader {
            bytes: block,
            at: 0,
        };
        let mut list = Vec::with_capacity(n);
        let mut previous: Option<u32> = None;
        for _ in 0..n {
            let delta = b.u32()?;
            let doc = match previous {
                None => Some(delta),
                Some(p) if delta > 0 => p.checked_add(delta),
                Some(_) => None,
            }
            .filter(|&d| d < docs)
            .ok_or("a posting names a document outside its segment")?;
            list.push(Posting {
                doc,
                tf: b.u32()?,
                len: b.u32()?,
            });
            previous = Some(doc);
        }
        if b.at != block.len() {
            return Err("a term's postings have bytes after their end".into());
        }
        out.push((term, list));
    }
    if r.at != bytes.len() {
        return Err("a bucket has bytes after its end".into());
    }
    Ok(out)
}

/// Reads an encoded range; every read is bounds-checked.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn byte(&mut self) -> Result<u8, String> {
        let b = *self.bytes.get(self.at).ok_or("the segment ends early")?;
        self.at += 1;
        Ok(b)
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err("a number in the segment is too long".into())
    }

    /// A count of items that each take at least one byte, so it cannot exceed what is left.
    fn count(&mut self, what: &str) -> Result<usize, String> {
        let n = self.varint()?;
        if n > (self.bytes.len() - self.at) as u64 {
            return Err(format!(
                "the segment's {what} count is larger than the segment"
            ));
        }
        Ok(n as usize)
    }

    fn fixed(&mut self, n: usize) -> Result<&'a [u8], String> {
        let out = self
            .bytes
            .get(self.at..self.at + n)
            .ok_or("the segment ends early")?;
        self.at += n;
        Ok(out)
    }

    fn text(&mut self) -> Result<String, String> {
        let n = self.count("byte")?;
        let b = self.fixed(n)?;
        String::from_utf8(b.to_vec()).map_err(|_| "a segment string is not UTF-8".into())
    }

    fn u32(&mut self) -> Result<u32, String> {
        u32::try_from(self.varint()?).map_err(|_| "a segment number is out of range".into())
    }
}

#[cfg(test)]
mod tests {
    use super::super::event::Event;
    use super::super::keyword::{Filters, Tokenizer};
    use super::*;

    fn event(n: usize, content: &str) -> Event {
        Event {
            id: format!("evt_01J{n:023}"),
            kind: if n.is_multiple_of(3) { "fact" } else { "note" }.into(),
            content: content.into(),
            payload: None,
            entity_ids: if n.is_multiple_of(4) {
                vec![format!("ent_{}", n % 7)]
            } else {
                vec![]
            },
            author: format!("usr_{}", n % 5),
            supersedes_event_id: (n % 11 == 10).then(|| format!("evt_01J{:023}", n - 1)),
            origin_id: None,
            occurred_at_ms: n.is_multiple_of(5).then(|| 1_600_000_000_000 - n as i64),
            created_at_ms: 1_700_000_000_000 + n as i64,
        }
    }

    /// An index of `events(n)`.
    fn indexed(n: usize) -> KeywordIndex {
        let t = Tokenizer::default();
        let mut index = KeywordIndex::default();
        for e in events(n) {
            index.insert(&t, &e);
        }
        index
    }

    fn events(n: usize) -> Vec<Event> {
        let words = [
            "invoice", "deploy", "kafka", "runbook", "postgres", "backup", "dana",
        ];
        (0..n)
            .map(|i| {
                let text: Vec<&str> = (0..1 + i % 9).map(|k| words[(i * 7 + k * 3) % 7]).collect();
                event(i, &text.join(" "))
            })
            .collect()
    }

    fn results(idx: &KeywordIndex, t: &Tokenizer, q: &str) -> Vec<(String, f64)> {
        let none = Filters {
            kinds: None,
            entity_ids: None,
            author: None,
            since_ms: None,
            until_ms: None,
            as_of_ms: None,
            include_superseded: false,
        };
        idx.search(t, q, &none, 50)
            .iter()
            .map(|h| (h.meta.id.clone(), h.score))
            .collect()
    }

    /// Documents `[a, b)` of `whole` as stored parts, appended to `into` as a loader does.
    fn append_range(into: &mut KeywordIndex, whole: &KeywordIndex, a: u32, b: u32) {
        let base = into.len() as u32;
        for page in whole.encode_doc_pages(a, b) {
            into.append_docs(decode_doc_page(&page).unwrap()).unwrap();
        }
        for (bucket, body) in whole.encode_buckets(a, b) {
            let lists = decode_bucket(&body, bucket, b - a, None).unwrap();
            into.append_postings(base, lists);
        }
    }

    #[test]
    fn ranges_appended_in_order_rebuild_the_index() {
        let t = Tokenizer::default();
        let whole = indexed(700);
        let mut rebuilt = KeywordIndex::default();
        for (a, b) in [(0, 1), (1, 128), (128, 129), (129, 700)] {
            append_range(&mut rebuilt, &whole, a, b);
        }
        assert_eq!(rebuilt.len(), whole.len());
        assert_eq!(rebuilt.total_len, whole.total_len);
        assert_eq!(rebuilt.superseded_by, whole.superseded_by);
        for q in ["invoice", "kafka runbook", "dana postgres backup", "deploy"] {
            assert_eq!(results(&rebuilt, &t, q), results(&whole, &t, q), "{q}");
        }
        // Equal ranges encode to equal bytes.
        assert_eq!(whole.encode_buckets(0, 700), rebuilt.encode_buckets(0, 700));
        assert_eq!(
            whole.encode_doc_pages(0, 700),
            rebuilt.encode_doc_pages(0, 700)
        );
        // A reader that wants one term gets exactly its list.
        let term = "kafka".to_string();
        let bucket = bucket_of(&term);
        let (_, body) = whole
            .encode_buckets(0, 700)
            .into_iter()
            .find(|(b, _)| *b == bucket)
            .unwrap();
        let only = decode_bucket(&body, bucket, 700, Some(std::slice::from_ref(&term))).unwrap();
        assert_eq!(only.len(), 1);
        let expected: Vec<(u32, u32)> = only[0].1.iter().map(|p| (p.doc, p.tf)).collect();
        assert_eq!(&expected, &whole.postings[&term]);
    }

    #[test]
    fn id_pages_hold_every_id_in_order() {
        let mut whole = indexed(150);
        whole.docs[3].meta.id = "custom-id".into();
        let pages = whole.encode_id_pages(1, 150);
        assert_eq!(pages.len(), 149usize.div_ceil(ID_PAGE as usize));
        let page = ID_PAGE as usize;
        let ids: Vec<String> = (0..149)
            .map(|n| id_in_page(&pages[n / page], n % page).unwrap())
            .collect();
        let expected: Vec<String> = whole.docs[1..].iter().map(|d| d.meta.id.clone()).collect();
        assert_eq!(ids, expected);
        assert_eq!(ids[2], "custom-id");
        assert!(id_in_page(&pages[2], 149 % page).is_err(), "past the last");
        for cut in 0..pages[0].len() {
            assert!(
                id_in_page(&pages[0][..cut], page - 1).is_err(),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn a_corrupt_part_is_an_error_and_changes_nothing() {
        let whole = indexed(40);
        let page = whole.encode_doc_pages(0, 40).remove(0);
        let sealed = seal("o/acme/kidx/p/d/x/00000", &page);
        assert_eq!(
            unseal("o/acme/kidx/p/d/x/00000", &sealed).unwrap(),
            &page[..]
        );
        // Moved to another key, cut, or one byte changed: refused.
        assert!(unseal("o/other/kidx/p/d/x/00000", &sealed).is_err());
        // The previous layout (a CRC-32 under the magic `LKP2`) is another layout: refused,
        // so its segments are rebuilt rather than read with the wrong checksum.
        let mut crc = crc32fast::Hasher::new();
        crc.update(b"o/acme/kidx/p/d/x/00000\0");
        crc.update(&page);
        let mut previous = b"LKP2".to_vec();
        previous.extend_from_slice(&crc.finalize().to_le_bytes());
        previous.extend_from_slice(&page);
        assert!(unseal("o/acme/kidx/p/d/x/00000", &previous).is_err());
        for cut in [0, 3, 7, 8, sealed.len() / 2, sealed.len() - 1] {
            assert!(
                unseal("o/acme/kidx/p/d/x/00000", &sealed[..cut]).is_err(),
                "cut {cut}"
            );
        }
        for i in (0..sealed.len()).step_by(5) {
            let mut flipped = sealed.clone();
            flipped[i] ^= 0x10;
            assert!(
                unseal("o/acme/kidx/p/d/x/00000", &flipped).is_err(),
                "byte {i}"
            );
        }
        // Bodies that pass a checksum but do not decode are errors, never panics.
        for cut in [0, 1, 4, page.len() / 2, page.len() - 1] {
            assert!(decode_doc_page(&page[..cut]).is_err(), "cut at {cut}");
        }
        for (bucket, body) in whole.encode_buckets(0, 40) {
            for cut in [0, 1, body.len() / 2, body.len() - 1] {
                assert!(decode_bucket(&body[..cut], bucket, 40, None).is_err());
            }
            assert!(decode_bucket(&body, (bucket + 1) % BUCKETS, 40, None).is_err());
            assert!(
                decode_bucket(&body, bucket, 0, None).is_err(),
                "no documents"
            );
        }
        let mut twice = KeywordIndex::default();
        twice.append_docs(decode_doc_page(&page).unwrap()).unwrap();
        assert!(
            twice.append_docs(decode_doc_page(&page).unwrap()).is_err(),
            "the same documents twice"
        );
        assert_eq!(twice.len(), 40);
    }
}
