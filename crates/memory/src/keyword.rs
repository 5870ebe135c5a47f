//! Keyword ranking: an in-memory BM25 index over an org's events, kept per org and refreshed
//! from storage on every search (only events newer than the last refresh are read).
//!
//! Written here rather than taken from a crate: the index must ingest events incrementally,
//! know which events are superseded, and filter by kind/entity/author/time before ranking;
//! the BM25 formula itself is a few lines.

use std::collections::{HashMap, HashSet};

use rust_stemmers::{Algorithm, Stemmer};

use super::event::Event;

/// What the index keeps of an event: enough to filter and rank. Text and payload stay in
/// storage and are read for the hits only, so an index costs postings, not copies of memories.
#[derive(Debug, Clone, PartialEq)]
pub struct DocMeta {
    pub id: String,
    pub kind: String,
    pub author: String,
    pub entity_ids: Vec<String>,
    pub created_at_ms: i64,
    /// The time the memory describes, when its writer gave one.
    pub occurred_at_ms: Option<i64>,
    pub supersedes_event_id: Option<String>,
}

impl DocMeta {
    /// The time the memory is about (the time filters' field).
    pub fn at_ms(&self) -> i64 {
        self.occurred_at_ms.unwrap_or(self.created_at_ms)
    }
}

const K1: f64 = 1.2;
const B: f64 = 0.75;

/// BM25's inverse document frequency of a term in `df` of `n` documents.
pub fn idf(n: f64, df: f64) -> f64 {
    ((n - df + 0.5) / (df + 0.5) + 1.0).ln()
}

/// BM25's score of one term occurring `tf` times in a document of `len` terms.
pub fn term_score(idf: f64, tf: f64, len: f64, avg_len: f64) -> f64 {
    idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / avg_len))
}

/// The average document length BM25 normalizes by.
pub fn average_len(total_len: u64, docs: usize) -> f64 {
    if docs == 0 {
        1.0
    } else {
        (total_len as f64 / docs as f64).max(1.0)
    }
}

/// Best first; ties to the newer (higher-numbered) document, so results are stable and fresh
/// facts win.
pub fn best_first(a: &(u32, f64), b: &(u32, f64)) -> std::cmp::Ordering {
    b.1.total_cmp(&a.1).then(b.0.cmp(&a.0))
}

const STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "do", "does", "for", "from", "has", "have",
    "how", "i", "in", "is", "it", "its", "of", "on", "or", "that", "the", "this", "to", "was",
    "we", "were", "what", "when", "where", "which", "who", "whom", "why", "will", "with", "you",
    "our", "us",
];

/// Lowercases, splits on anything not alphanumeric, drops stopwords, stems (Snowball English).
pub struct Tokenizer {
    stemmer: Stemmer,
}

impl Default for Tokenizer {
    fn default() -> Self {
        Self {
            stemmer: Stemmer::create(Algorithm::English),
        }
    }
}

impl Tokenizer {
    pub fn terms(&self, text: &str) -> Vec<String> {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .filter(|w| !STOPWORDS.contains(&w.as_str()))
            .map(|w| self.stemmer.stem(&w).into_owned())
            .collect()
    }
}

/// One indexed event.
pub(super) struct Doc {
    pub(super) meta: DocMeta,
    pub(super) len: u32,
}

/// The BM25 index of one org.
#[derive(Default)]
pub struct KeywordIndex {
    pub(super) docs: Vec<Doc>,
    pub(super) by_id: HashMap<String, usize>,
    /// Per term, its documents (in increasing order) and the term's count in each.
    pub(super) postings: HashMap<String, Vec<(u32, u32)>>,
    pub(super) total_len: u64,
    /// Events replaced by a later event's `supersedes_event_id`, mapped to their replacement.
    pub(super) superseded_by: HashMap<String, String>,
    /// The org's event sequence number this index has caught up with.
    pub seq: u64,
}

/// A query after the caller's filters were applied to the index.
pub struct Filters<'a> {
    pub kinds: Option<&'a HashSet<String>>,
    pub entity_ids: Option<&'a HashSet<String>>,
    pub author: Option<&'a str>,
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
    /// As lore knew it then: documents saved by this time, superseded only by documents saved
    /// by it.
    pub as_of_ms: Option<i64>,
    pub include_superseded: bool,
}

pub struct Hit<'a> {
    pub meta: &'a DocMeta,
    pub score: f64,
    pub superseded_by: Option<&'a str>,
}

impl KeywordIndex {
    pub fn contains(&self, id: &str) -> bool {
        self.by_id.contains_key(id)
    }

    pub fn len(&self) -> usize {
        self.docs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// Adds an event (no-op when already indexed).
    pub fn insert(&mut self, tokenizer: &Tokenizer, event: &Event) {
        if self.by_id.contains_key(&event.id) {
            return;
        }
        let doc_idx = u32::try_from(self.docs.len()).expect("fewer than 4 billion events per org");
        let terms = tokenizer.terms(&event.content);
        let mut tf: HashMap<String, u32> = HashMap::new();
        for t in &terms {
            *tf.entry(t.clone()).or_default() += 1;
        }
        for (term, count) in tf {
            self.postings
                .entry(term)
                .or_default()
                .push((doc_idx, count));
        }
        let len = u32::try_from(terms.len()).unwrap_or(u32::MAX);
        self.total_len += u64::from(len);
        if let Some(old) = &event.supersedes_event_id {
            self.superseded_by.insert(old.clone(), event.id.clone());
        }
        self.by_id.insert(event.id.clone(), doc_idx as usize);
        let meta = DocMeta {
            id: event.id.clone(),
            kind: event.kind.clone(),
            author: event.author.clone(),
            entity_ids: event.entity_ids.clone(),
            created_at_ms: event.created_at_ms,
            occurred_at_ms: event.occurred_at_ms,
            supersedes_event_id: event.supersedes_event_id.clone(),
        };
        self.docs.push(Doc { meta, len });
    }

    pub fn superseded_by(&self, id: &str) -> Option<&str> {
        self.superseded_by.get(id).map(String::as_str)
    }

    fn passes(&self, doc: &Doc, f: &Filters<'_>) -> bool {
        let e = &doc.meta;
        f.as_of_ms.is_none_or(|t| e.created_at_ms <= t)
            && (f.include_superseded || self.superseded_as_of(&e.id, f.as_of_ms).is_none())
            && f.kinds.is_none_or(|k| k.contains(&e.kind))
            && f.entity_ids
                .is_none_or(|ids| e.entity_ids.iter().any(|id| ids.contains(id)))
            && f.author.is_none_or(|a| a == e.author)
            && f.since_ms.is_none_or(|s| e.at_ms() >= s)
            && f.until_ms.is_none_or(|u| e.at_ms() <= u)
    }

    /// The event that replaced `id`, if one saved by `as_of` (any, without it) did.
    pub fn superseded_as_of(&self, id: &str, as_of_ms: Option<i64>) -> Option<&str> {
        let by = self.superseded_by(id)?;
        match as_of_ms {
            None => Some(by),
            Some(t) => self
                .by_id
                .get(by)
                .is_some_and(|&d| self.docs[d].meta.created_at_ms <= t)
                .then_some(by),
        }
    }

    /// The event id of document `doc`.
    pub fn doc_id(&self, doc: u32) -> &str {
        &self.docs[doc as usize].meta.id
    }

    /// What the index knows of event `id`, if indexed.
    pub fn meta_of(&self, id: &str) -> Option<&DocMeta> {
        self.by_id.get(id).map(|&i| &self.docs[i].meta)
    }

    /// The document number of event `id`, if indexed.
    pub fn doc_of(&self, id: &str) -> Option<u32> {
        self.by_id.get(id).map(|&i| i as u32)
    }

    /// Whether document `doc` passes the caller's filters.
    pub fn passes_doc(&self, doc: u32, filters: &Filters<'_>) -> bool {
        self.docs
            .get(doc as usize)
            .is_some_and(|d| self.passes(d, filters))
    }

    /// The hit for document `doc` with `score` (its replacement as of `as_of_ms`).
    pub fn hit(&self, doc: u32, score: f64, as_of_ms: Option<i64>) -> Hit<'_> {
        let meta = &self.docs[doc as usize].meta;
        Hit {
            meta,
            score,
            superseded_by: self.superseded_as_of(&meta.id, as_of_ms),
        }
    }

    /// The newest `limit` documents that pass the filters, newest first.
    pub fn newest(&self, filters: &Filters<'_>, limit: usize) -> Vec<u32> {
        (0..self.docs.len() as u32)
            .rev()
            .filter(|&i| self.passes_doc(i, filters))
            .take(limit)
            .collect()
    }

    /// The best `limit` documents by BM25 that pass the filters, best first (ties to the newer
    /// document). Empty when the query has no indexable words.
    pub fn rank(
        &self,
        tokenizer: &Tokenizer,
        query: &str,
        filters: &Filters<'_>,
        limit: usize,
    ) -> Vec<(u32, f64)> {
        let mut terms = tokenizer.terms(query);
        terms.sort();
        terms.dedup();
        if terms.is_empty() || limit == 0 {
            return Vec::new();
        }
        let n = self.docs.len() as f64;
        let avg_len = average_len(self.total_len, self.docs.len());
        let mut scores: HashMap<u32, f64> = HashMap::new();
        for term in &terms {
            let Some(postings) = self.postings.get(term) else {
                continue;
            };
            let df = postings.len() as f64;
            let idf = idf(n, df);
            for &(doc, tf) in postings {
                let len = f64::from(self.docs[doc as usize].len);
                let tf = f64::from(tf);
                let s = term_score(idf, tf, len, avg_len);
                *scores.entry(doc).or_default() += s;
            }
        }
        let mut ranked: Vec<(u32, f64)> = scores
            .into_iter()
            .filter(|&(doc, _)| self.passes_doc(doc, filters))
            .collect();
        let order = best_first;
        // Only the top `limit` need ordering: select them, then sort just those.
        if ranked.len() > limit {
            ranked.select_nth_unstable_by(limit - 1, order);
            ranked.truncate(limit);
        }
        ranked.sort_by(order);
        ranked
    }

    /// BM25-ranked hits for `query`; a query with no indexable words lists the newest events.
    pub fn search(
        &self,
        tokenizer: &Tokenizer,
        query: &str,
        filters: &Filters<'_>,
        limit: usize,
    ) -> Vec<Hit<'_>> {
        let ranked = self.rank(tokenizer, query, filters, limit);
        if ranked.is_empty() && tokenizer.terms(query).is_empty() {
            return self
                .newest(filters, limit)
                .into_iter()
                .map(|doc| self.hit(doc, 0.0, filters.as_of_ms))
                .collect();
        }
        ranked
            .into_iter()
            .map(|(doc, score)| self.hit(doc, (score * 1e4).round() / 1e4, filters.as_of_ms))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(id: &str, content: &str, ms: i64) -> Event {
        Event {
            id: id.into(),
            kind: "note".into(),
            content: content.into(),
            payload: None,
            entity_ids: vec![],
            author: "usr_a".into(),
            supersedes_event_id: None,
            origin_id: None,
            occurred_at_ms: None,
            created_at_ms: ms,
        }
    }

    fn no_filters() -> Filters<'static> {
        Filters {
            kinds: None,
            entity_ids: None,
            author: None,
            since_ms: None,
            until_ms: None,
            as_of_ms: None,
            include_superseded: false,
        }
    }

    #[test]
    fn stems_and_drops_stopwords() {
        let t = Tokenizer::default();
        assert_eq!(
            t.terms("The Invoices are PAID, by Dana!"),
            ["invoic", "paid", "dana"]
        );
    }

    #[test]
    fn ranks_rarer_and_repeated_terms_higher_and_hides_superseded() {
        let t = Tokenizer::default();
        let mut idx = KeywordIndex::default();
        idx.insert(&t, &event("e1", "Dana owns invoices and payments", 1));
        idx.insert(&t, &event("e2", "the deploy runs on fridays", 2));
        idx.insert(
            &t,
            &event("e3", "invoices invoices invoices are sent monthly", 3),
        );
        let none = no_filters();
        let hits: Vec<_> = idx
            .search(&t, "invoice", &none, 10)
            .iter()
            .map(|h| h.meta.id.clone())
            .collect();
        assert_eq!(hits, ["e3", "e1"]);
        let mut newer = event("e4", "Sam owns invoices now", 4);
        newer.supersedes_event_id = Some("e1".into());
        idx.insert(&t, &newer);
        let hits: Vec<_> = idx
            .search(&t, "who owns invoices", &none, 10)
            .iter()
            .map(|h| h.meta.id.clone())
            .collect();
        assert!(!hits.contains(&"e1".to_string()));
        let all = Filters {
            include_superseded: true,
            ..none
        };
        let hits = idx.search(&t, "who owns invoices", &all, 10);
        let e1 = hits
            .iter()
            .find(|h| h.meta.id == "e1")
            .expect("superseded shown on request");
        assert_eq!(e1.superseded_by, Some("e4"));
    }

    #[test]
    fn top_k_matches_a_full_sort() {
        let t = Tokenizer::default();
        let mut idx = KeywordIndex::default();
        for i in 0..200 {
            let words = "invoice ".repeat(1 + i % 7) + &"filler ".repeat(i % 13);
            idx.insert(&t, &event(&format!("e{i:03}"), &words, i as i64));
        }
        let none = no_filters();
        let all: Vec<String> = idx
            .search(&t, "invoice", &none, 200)
            .iter()
            .map(|h| h.meta.id.clone())
            .collect();
        for k in [1, 5, 10, 37, 100] {
            let top: Vec<String> = idx
                .search(&t, "invoice", &none, k)
                .iter()
                .map(|h| h.meta.id.clone())
                .collect();
            assert_eq!(top, all[..k], "k = {k}");
        }
    }
}
