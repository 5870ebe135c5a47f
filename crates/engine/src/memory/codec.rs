//! A range of a keyword index's documents in stored form, the body of one segment
//! (`segments.rs`): the strings the documents name once each, every document's metadata and
//! length, and the postings of the range with document numbers relative to its first document.
//! Decoding appends the range to an index, so segments loaded in order rebuild it exactly.
//!
//! Hand-written rather than serde: the form is a few varints per document and posting, read
//! once per cold start, and every read is bounds-checked so a corrupt segment is an error,
//! never a panic.

use std::collections::HashMap;

use super::keyword::{Doc, DocMeta, KeywordIndex};

/// The first bytes of every encoded range; a new layout takes a new magic.
const MAGIC: &[u8; 4] = b"LKS1";

/// Event ids of this form are stored as their 26 ULID characters.
const EVENT_PREFIX: &str = "evt_";
const ULID_LEN: usize = 26;

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

/// The strings of a range, each stored once and named by its number.
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

impl KeywordIndex {
    /// Documents `[start, end)` in stored form.
    pub fn encode_range(&self, start: u32, end: u32) -> Vec<u8> {
        let docs = &self.docs[start as usize..end as usize];
        let mut strings = Strings::default();
        let mut body = Vec::with_capacity(docs.len() * 48);
        put_varint(&mut body, docs.len() as u64);
        for doc in docs {
            let m = &doc.meta;
            match m.id.strip_prefix(EVENT_PREFIX) {
                Some(ulid) if ulid.len() == ULID_LEN && ulid.is_ascii() => {
                    body.push(0);
                    body.extend_from_slice(ulid.as_bytes());
                }
                _ => {
                    body.push(1);
                    put_varint(&mut body, strings.id(&m.id));
                }
            }
            put_varint(&mut body, strings.id(&m.kind));
            put_varint(&mut body, strings.id(&m.author));
            put_varint(&mut body, m.entity_ids.len() as u64);
            for e in &m.entity_ids {
                put_varint(&mut body, strings.id(e));
            }
            put_varint(&mut body, zigzag(m.created_at_ms));
            match &m.supersedes_event_id {
                Some(s) => put_varint(&mut body, strings.id(s) + 1),
                None => put_varint(&mut body, 0),
            }
            put_varint(&mut body, u64::from(doc.len));
        }
        let mut terms: Vec<(&str, &[(u32, u32)])> = self
            .postings
            .iter()
            .filter_map(|(term, list)| {
                let from = list.partition_point(|&(d, _)| d < start);
                let to = list.partition_point(|&(d, _)| d < end);
                (from < to).then(|| (term.as_str(), &list[from..to]))
            })
            .collect();
        // One order for the same range, so equal ranges encode to equal bytes.
        terms.sort_unstable_by_key(|(term, _)| *term);
        put_varint(&mut body, terms.len() as u64);
        for (term, list) in terms {
            put_bytes(&mut body, term.as_bytes());
            put_varint(&mut body, list.len() as u64);
            let mut previous = start;
            for &(doc, tf) in list {
                put_varint(&mut body, u64::from(doc - previous));
                put_varint(&mut body, u64::from(tf));
                previous = doc;
            }
        }
        let mut out = Vec::with_capacity(body.len() + 64);
        out.extend_from_slice(MAGIC);
        put_varint(&mut out, strings.list.len() as u64);
        for s in &strings.list {
            put_bytes(&mut out, s.as_bytes());
        }
        out.extend_from_slice(&body);
        out
    }

    /// Appends an encoded range after this index's documents. On an error (a corrupt or
    /// foreign range) the index is left as it was.
    pub fn append_encoded(&mut self, bytes: &[u8]) -> Result<(), String> {
        let mut r = Reader { bytes, at: 0 };
        if bytes.get(..MAGIC.len()) != Some(MAGIC.as_slice()) {
            return Err("not a keyword index segment of this version".into());
        }
        r.at = MAGIC.len();
        let n_strings = r.count("string")?;
        let mut strings = Vec::with_capacity(n_strings);
        for _ in 0..n_strings {
            strings.push(r.text()?);
        }
        let string = |id: u64| -> Result<String, String> {
            strings
                .get(usize::try_from(id).unwrap_or(usize::MAX))
                .cloned()
                .ok_or_else(|| "a segment names a string it does not hold".to_string())
        };
        let base = u32::try_from(self.docs.len()).map_err(|_| "too many documents".to_string())?;
        let n_docs = r.count("document")?;
        let mut docs = Vec::with_capacity(n_docs);
        for _ in 0..n_docs {
            let id = match r.byte()? {
                0 => {
                    let ulid = r.fixed(ULID_LEN)?;
                    let ulid = std::str::from_utf8(ulid).map_err(|_| "a bad event id")?;
                    format!("{EVENT_PREFIX}{ulid}")
                }
                1 => string(r.varint()?)?,
                _ => return Err("a document id of an unknown form".into()),
            };
            let kind = string(r.varint()?)?;
            let author = string(r.varint()?)?;
            let n_entities = r.count("entity")?;
            let mut entity_ids = Vec::with_capacity(n_entities);
            for _ in 0..n_entities {
                entity_ids.push(string(r.varint()?)?);
            }
            let created_at_ms = unzigzag(r.varint()?);
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
                    supersedes_event_id,
                },
                len,
            });
        }
        let n_terms = r.count("term")?;
        let mut postings: Vec<(String, Vec<(u32, u32)>)> = Vec::with_capacity(n_terms);
        let end = base
            .checked_add(u32::try_from(n_docs).map_err(|_| "too many documents".to_string())?)
            .ok_or("too many documents")?;
        for _ in 0..n_terms {
            let term = r.text()?;
            let n = r.count("posting")?;
            let mut list = Vec::with_capacity(n);
            let mut doc = base;
            for _ in 0..n {
                doc = doc
                    .checked_add(r.u32()?)
                    .filter(|&d| d < end)
                    .ok_or("a posting names a document outside its segment")?;
                let tf = r.u32()?;
                list.push((doc, tf));
            }
            postings.push((term, list));
        }
        if r.at != bytes.len() {
            return Err("the segment has bytes after its end".into());
        }
        if docs.iter().any(|d| self.by_id.contains_key(&d.meta.id)) {
            return Err("the segment holds a document the index already has".into());
        }
        // Everything decoded: now change the index.
        for (i, doc) in docs.into_iter().enumerate() {
            if let Some(old) = &doc.meta.supersedes_event_id {
                self.superseded_by.insert(old.clone(), doc.meta.id.clone());
            }
            self.total_len += u64::from(doc.len);
            self.by_id.insert(doc.meta.id.clone(), base as usize + i);
            self.docs.push(doc);
        }
        for (term, list) in postings {
            self.postings.entry(term).or_default().extend(list);
        }
        Ok(())
    }
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
            created_at_ms: 1_700_000_000_000 + n as i64,
        }
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
            include_superseded: false,
        };
        idx.search(t, q, &none, 50)
            .iter()
            .map(|h| (h.meta.id.clone(), h.score))
            .collect()
    }

    #[test]
    fn ranges_appended_in_order_rebuild_the_index() {
        let t = Tokenizer::default();
        let mut whole = KeywordIndex::default();
        for e in events(300) {
            whole.insert(&t, &e);
        }
        let mut rebuilt = KeywordIndex::default();
        for (a, b) in [(0, 1), (1, 128), (128, 129), (129, 300)] {
            rebuilt.append_encoded(&whole.encode_range(a, b)).unwrap();
        }
        assert_eq!(rebuilt.len(), whole.len());
        assert_eq!(rebuilt.total_len, whole.total_len);
        assert_eq!(rebuilt.superseded_by, whole.superseded_by);
        for q in ["invoice", "kafka runbook", "dana postgres backup", "deploy"] {
            assert_eq!(results(&rebuilt, &t, q), results(&whole, &t, q), "{q}");
        }
        // Equal ranges encode to equal bytes.
        assert_eq!(whole.encode_range(0, 300), rebuilt.encode_range(0, 300));
    }

    #[test]
    fn a_corrupt_range_is_an_error_and_changes_nothing() {
        let t = Tokenizer::default();
        let mut whole = KeywordIndex::default();
        for e in events(40) {
            whole.insert(&t, &e);
        }
        let bytes = whole.encode_range(0, 40);
        for cut in [0, 3, 4, 10, bytes.len() / 2, bytes.len() - 1] {
            let mut idx = KeywordIndex::default();
            assert!(idx.append_encoded(&bytes[..cut]).is_err(), "cut at {cut}");
            assert!(idx.is_empty());
        }
        let mut flipped = bytes.clone();
        for i in (4..flipped.len()).step_by(7) {
            flipped[i] ^= 0xff;
        }
        let mut idx = KeywordIndex::default();
        let _ = idx.append_encoded(&flipped);
        let mut twice = KeywordIndex::default();
        twice.append_encoded(&bytes).unwrap();
        assert!(
            twice.append_encoded(&bytes).is_err(),
            "the same documents twice"
        );
        assert_eq!(twice.len(), 40);
    }
}
