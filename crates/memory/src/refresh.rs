//! Bringing an org's indexes up to date with storage: the keyword index reads the events past
//! the sequence number it has seen, and the vector half reads the sketches its segments store
//! and the vectors (or embeds the texts) of what it lacks.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use lore_directory::Caller;

use super::embed_queue::INLINE_TAIL;
use super::event::Event;
use super::keyword::KeywordIndex;
use super::segments::{self, Persisted};
use super::semantic::{
    MAX_EMBED_PER_REFRESH, RETRY_AFTER_MS, Semantic, embed_memories, stored_vectors,
    stored_vectors_of,
};
use super::service::{CachedIndex, MAX_CACHED_ORGS, MemoryService, RECENT_VECTORS};
use super::vector::{Codes, EXACT_BELOW, encode};
use lore_base::error::Result;
use lore_base::ids::OrgId;
use lore_base::keys::OrgKeys;
use lore_base::ports::Ports;
use lore_base::storage::Batch;

/// The keys a search reads first on a warm instance: the org's event sequence number, which
/// says whether the index is current. The front reads them ahead, with the caller's auth stamp.
pub fn first_reads(keys: &OrgKeys) -> Vec<String> {
    vec![keys.events_seq()]
}

/// The org's event sequence number as stored (0 before the first event).
pub(super) async fn stored_seq(ports: &Ports, keys: &OrgKeys) -> Result<(u64, Option<Vec<u8>>)> {
    let raw = ports.storage.get(&keys.events_seq()).await?;
    Ok((parse_seq(raw.as_deref())?, raw))
}

/// [`stored_seq`] as this request read it ahead (`Caller::read_ahead`), or from storage.
pub(super) async fn current_seq(ports: &Ports, caller: &Caller) -> Result<u64> {
    let raw = lore_directory::callers::read(ports, caller, &caller.keys().events_seq()).await?;
    parse_seq(raw.as_deref())
}

fn parse_seq(raw: Option<&[u8]>) -> Result<u64> {
    match raw {
        Some(bytes) => std::str::from_utf8(bytes)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| {
                lore_base::error::LoreError::Internal("the event sequence number is corrupt".into())
            }),
        None => Ok(0),
    }
}

/// The events past sequence number `known`, in commit order, and the last sequence number
/// read: one scan of the sequence entries, then one read of their events.
pub(super) async fn events_after(
    ports: &Ports,
    keys: &OrgKeys,
    known: u64,
) -> Result<(Vec<Event>, u64)> {
    events_after_at_most(ports, keys, known, usize::MAX).await
}

/// [`events_after`], stopping after `max` sequence entries.
pub(super) async fn events_after_at_most(
    ports: &Ports,
    keys: &OrgKeys,
    known: u64,
    max: usize,
) -> Result<(Vec<Event>, u64)> {
    let mut out = Vec::new();
    let mut after = Some(keys.event_seq(known));
    let mut last = known;
    let mut left = max;
    loop {
        let page = ports
            .storage
            .scan(&keys.event_seqs(), after.as_deref(), left.min(1000))
            .await?;
        left -= page.entries.len();
        let mut wanted = Vec::with_capacity(page.entries.len());
        for (key, ulid) in &page.entries {
            last = key
                .rsplit('/')
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or(last);
            wanted.push(keys.event(&String::from_utf8_lossy(ulid)));
        }
        for bytes in ports.storage.get_many(&wanted).await?.into_iter().flatten() {
            out.push(serde_json::from_slice(&bytes)?);
        }
        match page.cursor {
            Some(c) if left > 0 => after = Some(c),
            _ => return Ok((out, last)),
        }
    }
}

/// Documents without a vector (number, event ulid), the segments whose sketches are yet to be
/// read (a fresh index) with the manifest they were loaded from, the model's key, and whether
/// this is the index's first look for vectors.
type Missing = (
    Vec<(u32, String)>,
    Option<(Vec<segments::SegmentHead>, Option<Vec<u8>>)>,
    String,
    bool,
);

impl MemoryService {
    /// Brings the caller's org index up to date with storage.
    ///
    /// A new index loads the org's stored segments (one read and one scan, `segments.rs`) and
    /// then reads the events past them; without usable segments it reads every event, in
    /// sequence order (a scan of the sequence entries, a `get_many` of their events per page).
    /// A known index reads the sequence entries past its own and loads those events.
    pub(super) async fn refresh(&self, ports: &Ports, caller: &Caller) -> Result<()> {
        let org = caller.org();
        let keys = caller.keys();
        let seq = current_seq(ports, caller).await?;
        let known = self.indexes.borrow().get(org).map(|c| c.index.seq);
        let mut loaded: Option<segments::Loaded> = None;
        let mut persisted = Persisted::default();
        let from = match known {
            Some(known) => Some(known),
            None => match segments::load(ports, keys, seq).await? {
                Ok(l) if self.broken_parts.borrow_mut().remove(keys.root()) => {
                    // A search found a sketch or an id page of these segments unusable: the
                    // index is built from the events and its first write replaces them all.
                    persisted = Persisted {
                        raw: l.persisted.raw,
                        ..Persisted::default()
                    };
                    None
                }
                Ok(l) => {
                    let from = l.index.seq;
                    loaded = Some(l);
                    Some(from)
                }
                Err(stored) => {
                    persisted = stored;
                    None
                }
            },
        };
        let mut fresh: Vec<Event> = Vec::new();
        // Without segments, every event from the first sequence number on: the index then
        // numbers its documents in commit order, as segments do, so that equal scores rank
        // alike however the index was built.
        let caught_up = match from.unwrap_or(0) {
            from if from == seq => seq,
            from => {
                let (events, last) = events_after(ports, keys, from).await?;
                fresh = events;
                last
            }
        };
        let tick = self.clock.get() + 1;
        self.clock.set(tick);
        let (generation, fresh) = {
            let mut indexes = self.indexes.borrow_mut();
            if !indexes.contains_key(org) && indexes.len() >= MAX_CACHED_ORGS {
                let oldest = indexes
                    .iter()
                    .min_by_key(|(_, c)| c.last_used)
                    .map(|(o, _)| o.clone());
                if let Some(oldest) = oldest {
                    indexes.remove(&oldest);
                }
            }
            let cached = indexes.entry(org.clone()).or_insert_with(|| {
                let (index, persisted) = match loaded {
                    Some(l) => (l.index, l.persisted),
                    None => (KeywordIndex::default(), persisted),
                };
                CachedIndex {
                    index,
                    persisted,
                    semantic: None,
                    last_used: tick,
                    generation: tick,
                }
            });
            cached.last_used = tick;
            let generation = cached.generation;
            let mut events = self.events.borrow_mut();
            let fresh: Vec<Rc<Event>> = fresh.into_iter().map(Rc::new).collect();
            for event in &fresh {
                cached.index.insert(&self.tokenizer, event);
                events.insert(caller.org().as_str(), event.clone());
            }
            cached.index.seq = cached.index.seq.max(caught_up);
            (generation, fresh)
        };
        self.refresh_vectors(ports, caller, generation, &fresh)
            .await;
        Ok(())
    }

    /// Whether a write of the org's index segments is due (a look at this instance's state).
    pub fn segments_due(&self, org: &OrgId) -> bool {
        self.indexes
            .borrow()
            .get(org)
            .is_some_and(|c| segments::due(&c.index, &c.persisted))
    }

    /// Stores the caller's org index as segments where a write is due (`segments.rs`): the
    /// documents past the stored segments once there are enough of them, or the whole index
    /// over segments it could not use. Never fails a request: a problem is logged, and a
    /// manifest another instance changed first leaves its segments standing.
    pub async fn persist_segments(&self, ports: &Ports, caller: &Caller) {
        let (org, keys) = (caller.org(), caller.keys());
        let id = ports.random_hex(8);
        let planned = {
            let indexes = self.indexes.borrow();
            let Some(cached) = indexes.get(org) else {
                return;
            };
            let bits = |doc: u32| cached.semantic.as_ref().and_then(|s| s.sign_bits(doc));
            let vectors = cached.semantic.as_ref().map(|s| segments::Vectors {
                model_key: &s.model_key,
                dims: s.dims,
                bits: &bits,
            });
            segments::plan(
                &cached.index,
                &cached.persisted,
                keys,
                &id,
                vectors.as_ref(),
            )
            .map(|plan| (plan, cached.generation))
        };
        let Some((plan, generation)) = planned else {
            return;
        };
        match segments::write(ports, keys, plan).await {
            Ok(Some(persisted)) => {
                if let Some(cached) = self
                    .indexes
                    .borrow_mut()
                    .get_mut(org)
                    .filter(|c| c.generation == generation)
                {
                    cached.persisted = persisted;
                }
            }
            Ok(None) => {
                if let Some(cached) = self
                    .indexes
                    .borrow_mut()
                    .get_mut(org)
                    .filter(|c| c.generation == generation)
                {
                    cached.persisted.gave_way = true;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, org = %org, "could not store keyword index segments")
            }
        }
    }

    /// Whether a search marked `org`'s index to be loaded after its answer (taking the mark):
    /// not when it is loaded, or being loaded, already.
    pub fn take_load_mark(&self, org: &OrgId) -> bool {
        self.load_due.borrow_mut().remove(org)
            && !self.indexes.borrow().contains_key(org)
            && self.loading.borrow_mut().insert(org.clone())
    }

    /// Loads the caller's org index (its segments and their sketches, the events past them)
    /// after a search answered without it. Never fails a request: a problem is logged, and the
    /// next search loads it.
    pub async fn load_after_answer(&self, ports: &Ports, caller: &Caller) {
        let started = ports.clock.now_ms();
        match self.refresh(ports, caller).await {
            // What one index load cost, for operators reading the log.
            Ok(()) => tracing::info!(
                org = %caller.org(),
                ms = ports.clock.now_ms() - started,
                "memory index loaded after an answer"
            ),
            Err(e) => {
                tracing::warn!(error = %e, org = %caller.org(), "could not load the memory index")
            }
        }
        self.loading.borrow_mut().remove(caller.org());
    }

    /// Keeps vectors embedded at save time for this instance's next refresh.
    pub(super) fn remember_vectors(
        &self,
        vectors: impl IntoIterator<Item = (String, Vec<Vec<f32>>)>,
    ) {
        let mut recent = self.recent_vectors.borrow_mut();
        for (ulid, v) in vectors {
            if self.recent_count.get() + v.len() > RECENT_VECTORS {
                recent.clear();
                self.recent_count.set(0);
            }
            self.recent_count.set(self.recent_count.get() + v.len());
            if let Some(old) = recent.insert(ulid, v) {
                self.recent_count.set(self.recent_count.get() - old.len());
            }
        }
    }
}

impl MemoryService {
    /// Gives every event of the caller's org a vector under the current embedder, as far as
    /// this request allows: the segments' sketches first (cold instance), then stored vectors,
    /// then the embedder for the rest. `fresh` are the events the refresh just indexed (their text
    /// is at hand). Never fails the request: problems are logged and retried later.
    pub(super) async fn refresh_vectors(
        &self,
        ports: &Ports,
        caller: &Caller,
        generation: u64,
        fresh: &[Rc<Event>],
    ) {
        let Some(embedder) = ports.embedder.clone() else {
            return;
        };
        let (org, keys) = (caller.org(), caller.keys());
        let model = embedder.model_id().to_string();
        let dims = embedder.dimensions();
        let now = ports.clock.now_ms();
        // What is missing, under a short borrow (everything below awaits).
        let missing = |this: &Self| -> Option<Missing> {
            let mut indexes = this.indexes.borrow_mut();
            let cached = indexes
                .get_mut(org)
                .filter(|c| c.generation == generation)?;
            if cached
                .semantic
                .as_ref()
                .is_none_or(|s| s.model != model || s.dims != dims)
            {
                cached.semantic = Semantic::new(&model, dims);
            }
            let sem = cached.semantic.as_mut()?;
            // Another request of this instance is reading the sketches: it indexes the vectors.
            if sem.retry_after_ms > now || sem.sketches_reading {
                return None;
            }
            let first = !sem.sketches_read;
            sem.sketches_read = true;
            let docs = sem
                .missing(&cached.index)
                .into_iter()
                .map(|d| {
                    let id = cached.index.doc_id(d);
                    (d, id.strip_prefix("evt_").unwrap_or(id).to_string())
                })
                .collect();
            // A small org's vectors are all read (one scan) and kept, so the sketches are not.
            let segments = (first
                && cached.index.len() > EXACT_BELOW
                && !cached.persisted.segments.is_empty())
            .then(|| {
                sem.sketches_reading = true;
                (
                    cached.persisted.segments.clone(),
                    cached.persisted.raw.clone(),
                )
            });
            Some((docs, segments, sem.model_key.clone(), first))
        };
        let Some((mut docs, segments, mkey, first)) = missing(self) else {
            return;
        };
        if docs.is_empty() {
            return;
        }
        // A fresh instance: the sketches its segments store (one scan), so that only the
        // documents past them need their vectors read.
        if let Some((segments, manifest)) = segments {
            let mut read = Codes::new(dims);
            let mut groups: Vec<(Vec<u8>, Vec<u32>)> = Vec::new();
            let mut found = |doc: u32, code: &[u8]| {
                read.set(doc, code);
            };
            let mut group = |centroid: &[u8], docs: &[u32]| {
                groups.push((centroid.to_vec(), docs.to_vec()));
            };
            let read_all = segments::read_sketches(
                ports,
                keys,
                &segments,
                (&mkey, dims),
                &mut found,
                &mut group,
            );
            match read_all.await {
                Ok(Ok(())) => {}
                Ok(Err(why)) => {
                    // A part another instance merged away since this one loaded is not broken:
                    // only parts of the manifest still stored are.
                    let current = ports.storage.get(&keys.keyword_manifest()).await;
                    if matches!(current, Ok(ref m) if *m == manifest) {
                        tracing::warn!(why, org = %org, "a vector sketch is unusable; reading the stored vectors instead, and rebuilding the segments at the next load");
                        self.broken_parts
                            .borrow_mut()
                            .insert(keys.root().to_string());
                    }
                }
                Err(e) => tracing::warn!(error = %e, "could not read the vector sketches"),
            }
            {
                let mut indexes = self.indexes.borrow_mut();
                if let Some(cached) = indexes.get_mut(org).filter(|c| c.generation == generation)
                    && let Some(sem) = cached.semantic.as_mut().filter(|s| s.model == model)
                {
                    sem.sketches_reading = false;
                    let len = cached.index.len() as u32;
                    for (doc, code) in read.iter().filter(|(d, _)| *d < len) {
                        sem.codes.set(doc, code);
                    }
                    for (centroid, docs) in &groups {
                        sem.codes.add_group(centroid, docs);
                    }
                    sem.codes.settle();
                }
            }
            match missing(self) {
                Some((left, _, _, _)) => docs = left,
                None => return,
            }
            if docs.is_empty() {
                return;
            }
        }
        // Vectors this instance computed (saving, or draining the queue), then the stored ones:
        // all of them when the index is new here, else those of the events this refresh read,
        // and now and then the oldest others (another thread, process or instance may have
        // stored them since).
        let mut found: HashMap<String, Vec<Vec<f32>>> = HashMap::new();
        {
            let mut recent = self.recent_vectors.borrow_mut();
            for (_, ulid) in &docs {
                if let Some(v) = recent.remove(ulid) {
                    self.recent_count
                        .set(self.recent_count.get().saturating_sub(v.len()));
                    found.insert(ulid.clone(), v);
                }
            }
        }
        let fresh_ulids: HashSet<&str> = fresh
            .iter()
            .map(|e| e.id.strip_prefix("evt_").unwrap_or(&e.id))
            .collect();
        let (wanted, others): (Vec<String>, Vec<String>) = docs
            .iter()
            .filter(|(_, u)| !found.contains_key(u))
            .map(|(_, u)| u.clone())
            .partition(|u| first || fresh_ulids.contains(u.as_str()));
        if !wanted.is_empty() {
            match stored_vectors(ports, keys, &mkey, dims, &wanted).await {
                Ok(stored) => found.extend(stored),
                Err(e) => tracing::warn!(error = %e, "could not read stored vectors"),
            }
        }
        if !others.is_empty() && self.recheck_due(org, generation, now) {
            let oldest: Vec<String> = others.into_iter().take(RECHECK_DOCS).collect();
            match stored_vectors_of(ports, keys, &mkey, dims, &oldest).await {
                Ok(stored) => {
                    // All found: more may be stored past them, so the next refresh looks again.
                    if stored.len() < oldest.len() {
                        self.recheck_later(org, generation, now + RECHECK_MS);
                    }
                    found.extend(stored);
                }
                Err(e) => tracing::warn!(error = %e, "could not read stored vectors"),
            }
        }
        // What still has no vector: a few are embedded here, oldest first (all of them where
        // the embedder is quick); past that the background embedder stores them, and searches
        // meanwhile rank them by keywords alone.
        let left: Vec<&(u32, String)> = docs
            .iter()
            .filter(|(_, u)| !found.contains_key(u))
            .collect();
        let inline = match embedder.is_quick() {
            true => MAX_EMBED_PER_REFRESH,
            false if left.len() <= INLINE_TAIL => INLINE_TAIL,
            false => {
                self.mark_embed_due(org);
                0
            }
        };
        let texts_of: HashMap<&str, &Rc<Event>> = fresh
            .iter()
            .map(|e| (e.id.strip_prefix("evt_").unwrap_or(&e.id), e))
            .collect();
        // The fresh events' texts are at hand; the rest come from the event cache, else one read.
        let mut to_embed: Vec<(String, String)> = Vec::new();
        let mut elsewhere: Vec<String> = Vec::new();
        for (_, ulid) in left.into_iter().take(inline) {
            match texts_of.get(ulid.as_str()) {
                Some(e) => to_embed.push((ulid.clone(), e.content.clone())),
                None => elsewhere.push(ulid.clone()),
            }
        }
        if !elsewhere.is_empty() {
            let wanted: Vec<&String> = elsewhere.iter().collect();
            match self.texts_of(ports, org, keys, &wanted).await {
                Ok(texts) => to_embed.extend(texts),
                Err(e) => tracing::warn!(error = %e, "could not read the texts to embed"),
            }
        }
        if !to_embed.is_empty() {
            let texts: Vec<String> = to_embed.iter().map(|(_, t)| t.clone()).collect();
            match embed_memories(embedder.as_ref(), &texts).await {
                Ok(vectors) => {
                    let mut batch = Batch::new();
                    for ((ulid, _), v) in to_embed.iter().zip(vectors) {
                        batch.put(keys.vector(&mkey, ulid), encode(&v));
                        batch.delete(keys.embed_queued(ulid));
                        found.insert(ulid.clone(), v);
                    }
                    if let Err(e) = ports.storage.commit(batch).await {
                        tracing::warn!(error = %e, "could not store embeddings");
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, org = %org, "the embedder failed; keyword ranking only until it recovers");
                    let mut indexes = self.indexes.borrow_mut();
                    if let Some(sem) = indexes.get_mut(org).and_then(|c| c.semantic.as_mut()) {
                        sem.retry_after_ms = now + RETRY_AFTER_MS;
                    }
                }
            }
        }
        // Index them in document order.
        let mut indexes = self.indexes.borrow_mut();
        let Some(cached) = indexes.get_mut(org).filter(|c| c.generation == generation) else {
            return;
        };
        let Some(sem) = cached.semantic.as_mut().filter(|s| s.model == model) else {
            return;
        };
        for (doc, ulid) in &docs {
            if let Some(v) = found.get(ulid) {
                sem.add(*doc, v);
            }
        }
    }
}

/// Documents without a vector a refresh looks up in storage, past those it read events of.
const RECHECK_DOCS: usize = 256;
/// How often a refresh looks, while the last look did not find all it sought.
const RECHECK_MS: i64 = 1_000;

impl MemoryService {
    /// Whether this refresh looks in storage for the vectors of documents it did not read.
    fn recheck_due(&self, org: &OrgId, generation: u64, now: i64) -> bool {
        self.indexes
            .borrow()
            .get(org)
            .filter(|c| c.generation == generation)
            .and_then(|c| c.semantic.as_ref())
            .is_some_and(|s| s.recheck_after_ms <= now)
    }

    fn recheck_later(&self, org: &OrgId, generation: u64, at_ms: i64) {
        if let Some(sem) = self
            .indexes
            .borrow_mut()
            .get_mut(org)
            .filter(|c| c.generation == generation)
            .and_then(|c| c.semantic.as_mut())
        {
            sem.recheck_after_ms = at_ms;
        }
    }
}
