//! The background embedder: vectors after the answer.
//!
//! A save whose embedder is not quick (a model, an endpoint: `Embedder::is_quick`) answers once
//! its events are durable and found by keywords, and puts one queue key per new memory
//! (`embq/{ulid}`) in the same batch. After the answer the engine drains the org's queue
//! ([`MemoryService::drain_embeddings`]): a round reads the oldest [`DRAIN_MEMORIES`] queued
//! memories, embeds them at background priority (`Embedder::embed_later`) and stores their
//! vectors and deletes their queue keys in one batch, then adds them to this instance's index.
//! A crash loses nothing: the queue is storage, and the next drain (the org's next save or
//! search, or the server's pass over the orgs at start) takes it up.
//!
//! One drain works an org's queue at a time, across threads, processes and instances: it holds a
//! lease (`meta/embed-lease`) that every round's batch renews under a precondition, so a drain
//! that lost it (it outlived [`LEASE_MS`]) stores nothing more. With the queue empty, a drain
//! also embeds what this instance's index lacks vectors for that no queue names (memories a feed
//! delivered, or saved under another model or while the embedder failed).

use std::collections::{HashMap, HashSet};

use super::semantic::{RETRY_AFTER_MS, embed_memories_later, model_key, stored_vectors_of};
use super::service::MemoryService;
use super::vector::encode;
use lore_base::error::{LoreError, Result};
use lore_base::ids::OrgId;
use lore_base::keys::OrgKeys;
use lore_base::ports::Ports;
use lore_base::storage::{Batch, StorageError};
use lore_directory::Caller;

/// Memories one round embeds and stores: a long memory's windows make several texts, and the
/// embedder serves waiting calls between rounds.
pub const DRAIN_MEMORIES: usize = 64;
/// Memories without a queue key a round (or a re-embedding) looks up in storage in one read;
/// a round then embeds the first [`DRAIN_MEMORIES`] of those not stored.
const LOOK_UP: usize = 256;
/// How long a drain's lease holds without a round renewing it.
const LEASE_MS: i64 = 60_000;
/// How often a drain says how far it got (at info level): a long one is an operation.
const PROGRESS_EVERY_MS: i64 = 10_000;
/// Queue keys a re-embedding writes per batch.
const QUEUE_BATCH: usize = 1_000;
/// Memories without vectors a search embeds itself before it ranks; past it the search ranks
/// them by keywords alone, says how many, and leaves them to the background embedder.
pub const INLINE_TAIL: usize = 16;

impl MemoryService {
    /// Marks `org`'s queue to be drained after this request's answer.
    pub fn mark_embed_due(&self, org: &OrgId) {
        self.embed_due.borrow_mut().insert(org.clone());
    }

    /// Whether a drain of `org`'s queue is due after this answer (taking the mark): not while
    /// this instance drains it already, nor while a failing embedder rests.
    pub fn take_embed_mark(&self, org: &OrgId, now_ms: i64) -> bool {
        self.embed_due.borrow_mut().remove(org)
            && self
                .embed_retry
                .borrow()
                .get(org)
                .is_none_or(|&at| at <= now_ms)
            && self.draining.borrow_mut().insert(org.clone())
    }

    /// Embeds `org`'s queued memories (and what its loaded index lacks), round by round, until
    /// none is left; after [`Self::take_embed_mark`]. Never fails a request: a failing embedder
    /// rests 30 s and the queue waits.
    pub async fn drain_embeddings(&self, ports: &Ports, org: &OrgId, keys: &OrgKeys) {
        let started = ports.clock.now_ms();
        let outcome = self.drain(ports, org, keys).await;
        self.draining.borrow_mut().remove(org);
        match outcome {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                org = %org,
                memories = n,
                ms = ports.clock.now_ms() - started,
                "memories embedded after their answer"
            ),
            Err(e) => {
                self.embed_retry
                    .borrow_mut()
                    .insert(org.clone(), ports.clock.now_ms() + RETRY_AFTER_MS);
                tracing::warn!(error = %e, org = %org, "the background embedder stopped; the queue waits");
            }
        }
    }

    async fn drain(&self, ports: &Ports, org: &OrgId, keys: &OrgKeys) -> Result<usize> {
        let Some(embedder) = ports.embedder.clone() else {
            return Ok(0);
        };
        let holder = ports.random_hex(8);
        let Some(lease) = take_lease(ports, keys, &holder).await? else {
            return Ok(0);
        };
        let mut drain = Drain {
            embedder: embedder.as_ref(),
            model: embedder.model_id().to_string(),
            holder,
            lease,
            // Memories a round looked up or embedded without a queue key: not picked again.
            tried: HashSet::new(),
        };
        let mut done = 0;
        let mut told_at = ports.clock.now_ms();
        let outcome = loop {
            match self.round(ports, org, keys, &mut drain).await {
                Ok(Round::Stored(n)) => {
                    done += n;
                    let now = ports.clock.now_ms();
                    if now - told_at >= PROGRESS_EVERY_MS {
                        told_at = now;
                        let left = queued(ports, keys).await.unwrap_or(0);
                        tracing::info!(org = %org, model = %drain.model, stored = done, queued = left, "embedding the org's memories");
                    }
                }
                Ok(Round::Done) => break Ok(done),
                // Another drain took the lease over (this one outlived it): it goes on.
                Ok(Round::LostLease) => return Ok(done),
                Err(e) => break Err(e),
            }
        };
        let mut release = Batch::new();
        release
            .require_equals(keys.embed_lease(), drain.lease.into_bytes())
            .delete(keys.embed_lease());
        if let Err(e) = ports.storage.commit(release).await {
            tracing::debug!(error = %e, "the embedding lease was not released; it expires");
        }
        outcome
    }

    /// Queues every memory of the caller's org that has no vector under the current embedder
    /// (`lore reindex --embeddings`, the operator route `reindex` with `embeddings`): after a
    /// change of model, or an org moved from a platform whose model differs. The background
    /// embedder then stores them round by round, crash-safe like any queue, its progress in the
    /// log and in `lore doctor`'s `vectors.queued`. Until a memory has its new vector, searches
    /// rank it by keywords (`pending_vectors`). How many it queued.
    pub async fn queue_embeddings(&self, ports: &Ports, caller: &Caller) -> Result<usize> {
        let Some(embedder) = ports.embedder.clone() else {
            return Ok(0);
        };
        // The loaded index knows every memory and, on its first look, every stored vector.
        self.refresh(ports, caller).await?;
        let (org, keys) = (caller.org(), caller.keys());
        let model = embedder.model_id().to_string();
        let (mkey, dims) = (model_key(&model), embedder.dimensions());
        let missing = self.unqueued_missing(org, &model, &HashSet::new(), usize::MAX);
        let mut unstored: Vec<String> = Vec::new();
        for missing in missing.chunks(LOOK_UP) {
            // Vectors another process stored since this one looked are not queued again.
            let stored = stored_vectors_of(ports, keys, &mkey, dims, missing).await?;
            unstored.extend(missing.iter().filter(|u| !stored.contains_key(*u)).cloned());
            self.index_vectors(org, &model, stored);
        }
        for chunk in unstored.chunks(QUEUE_BATCH) {
            let mut batch = Batch::new();
            for ulid in chunk {
                batch.put(keys.embed_queued(ulid), b"1".to_vec());
            }
            ports.storage.commit(batch).await?;
        }
        if !unstored.is_empty() {
            self.mark_embed_due(org);
            tracing::info!(org = %org, model = %model, queued = unstored.len(), "memories queued to be embedded again");
        }
        Ok(unstored.len())
    }

    /// One round of a drain: the oldest queued memories (or, with none queued, those the
    /// loaded index lacks), embedded and stored in one batch that renews the lease.
    async fn round(
        &self,
        ports: &Ports,
        org: &OrgId,
        keys: &OrgKeys,
        drain: &mut Drain<'_>,
    ) -> Result<Round> {
        let (mkey, dims) = (model_key(&drain.model), drain.embedder.dimensions());
        let prefix = keys.embed_queue();
        let page = ports.storage.scan(&prefix, None, DRAIN_MEMORIES).await?;
        let mut batch = Batch::new();
        let texts = if page.entries.is_empty() {
            let missing = self.unqueued_missing(org, &drain.model, &drain.tried, LOOK_UP);
            if missing.is_empty() {
                return Ok(Round::Done);
            }
            // Another thread or instance may have stored them already.
            let stored = stored_vectors_of(ports, keys, &mkey, dims, &missing).await?;
            let wanted: Vec<&String> = missing
                .iter()
                .filter(|u| !stored.contains_key(*u))
                .take(DRAIN_MEMORIES)
                .collect();
            drain.tried.extend(stored.keys().cloned());
            drain.tried.extend(wanted.iter().map(|u| (*u).clone()));
            self.index_vectors(org, &drain.model, stored);
            self.texts_of(ports, org, keys, &wanted).await?
        } else {
            let ulids: Vec<String> = page
                .entries
                .iter()
                .map(|(k, _)| k[prefix.len()..].to_string())
                .collect();
            for ulid in &ulids {
                batch.delete(keys.embed_queued(ulid));
            }
            let wanted: Vec<&String> = ulids.iter().collect();
            self.texts_of(ports, org, keys, &wanted).await?
        };
        if batch.is_empty() && texts.is_empty() {
            return Ok(Round::Stored(0));
        }
        let contents: Vec<String> = texts.iter().map(|(_, t)| t.clone()).collect();
        let vectors = embed_memories_later(drain.embedder, &contents)
            .await
            .map_err(|e| LoreError::Internal(format!("the embedder failed: {e}")))?;
        for ((ulid, _), v) in texts.iter().zip(&vectors) {
            batch.put(keys.vector(&mkey, ulid), encode(v));
        }
        let renewed = lease_value(&drain.holder, ports.clock.now_ms() + LEASE_MS);
        batch
            .require_equals(keys.embed_lease(), drain.lease.clone().into_bytes())
            .put(keys.embed_lease(), renewed.clone().into_bytes());
        match ports.storage.commit(batch).await {
            Ok(()) => drain.lease = renewed,
            Err(StorageError::Conflict { .. }) => return Ok(Round::LostLease),
            Err(e) => return Err(e.into()),
        }
        let n = texts.len();
        self.index_vectors(
            org,
            &drain.model,
            texts.into_iter().map(|(u, _)| u).zip(vectors).collect(),
        );
        Ok(Round::Stored(n))
    }

    /// The oldest documents of `org`'s loaded index without a vector under `model` that
    /// `tried` does not hold, by event ulid: at most `limit`.
    fn unqueued_missing(
        &self,
        org: &OrgId,
        model: &str,
        tried: &HashSet<String>,
        limit: usize,
    ) -> Vec<String> {
        let indexes = self.indexes.borrow();
        let Some(cached) = indexes.get(org) else {
            return Vec::new();
        };
        let Some(sem) = cached.semantic.as_ref().filter(|s| s.model == model) else {
            return Vec::new();
        };
        sem.missing(&cached.index)
            .into_iter()
            .map(|d| {
                let id = cached.index.doc_id(d);
                id.strip_prefix("evt_").unwrap_or(id).to_string()
            })
            .filter(|u| !tried.contains(u))
            .take(limit)
            .collect()
    }

    /// The texts of the memories `ulids` (this instance's cached events, the rest in one read);
    /// a memory no longer stored has none.
    pub(super) async fn texts_of(
        &self,
        ports: &Ports,
        org: &OrgId,
        keys: &OrgKeys,
        ulids: &[&String],
    ) -> Result<Vec<(String, String)>> {
        let mut out = Vec::with_capacity(ulids.len());
        let mut unread = Vec::new();
        {
            let mut events = self.events.borrow_mut();
            for ulid in ulids {
                match events.get(org.as_str(), &format!("evt_{ulid}")) {
                    Some(e) => out.push(((*ulid).clone(), e.content.clone())),
                    None => unread.push((*ulid).clone()),
                }
            }
        }
        let wanted: Vec<String> = unread.iter().map(|u| keys.event(u)).collect();
        for (ulid, bytes) in unread
            .into_iter()
            .zip(ports.storage.get_many(&wanted).await?)
        {
            if let Some(bytes) = bytes {
                let event: super::event::Event = serde_json::from_slice(&bytes)?;
                out.push((ulid, event.content));
            }
        }
        Ok(out)
    }

    /// Adds vectors to `org`'s loaded index (by event ulid), or keeps them for its next
    /// refresh when the index does not hold their memories yet.
    pub(super) fn index_vectors(
        &self,
        org: &OrgId,
        model: &str,
        vectors: HashMap<String, Vec<Vec<f32>>>,
    ) {
        let mut later = Vec::new();
        {
            let mut indexes = self.indexes.borrow_mut();
            let cached = indexes.get_mut(org);
            match cached {
                Some(cached) if cached.semantic.as_ref().is_some_and(|s| s.model == model) => {
                    let sem = cached.semantic.as_mut().expect("checked");
                    for (ulid, v) in vectors {
                        match cached.index.doc_of(&format!("evt_{ulid}")) {
                            Some(doc) => sem.add(doc, &v),
                            None => later.push((ulid, v)),
                        }
                    }
                }
                _ => later.extend(vectors),
            }
        }
        if !later.is_empty() {
            self.remember_vectors(later);
        }
    }
}

/// One drain's state between its rounds.
struct Drain<'a> {
    embedder: &'a dyn lore_base::ports::Embedder,
    model: String,
    holder: String,
    /// The lease as this drain last stored it.
    lease: String,
    tried: HashSet<String>,
}

/// What a round did.
enum Round {
    /// Stored this many memories' vectors (0: none were left to embed in its page).
    Stored(usize),
    /// Nothing is left.
    Done,
    /// Another drain holds the lease now.
    LostLease,
}

/// How many memories wait in `keys`' org's queue (`lore doctor`).
pub async fn queued(ports: &Ports, keys: &OrgKeys) -> Result<usize> {
    Ok(ports.storage.scan_all(&keys.embed_queue()).await?.len())
}

fn lease_value(holder: &str, until_ms: i64) -> String {
    format!("{holder} {until_ms}")
}

/// Takes the org's embedding lease for `holder` unless another holds it unexpired: the value
/// now stored, or `None` when another drain is on.
async fn take_lease(ports: &Ports, keys: &OrgKeys, holder: &str) -> Result<Option<String>> {
    let now = ports.clock.now_ms();
    let key = keys.embed_lease();
    let old = ports.storage.get(&key).await?;
    let held = old
        .as_deref()
        .and_then(|b| std::str::from_utf8(b).ok())
        .and_then(|s| s.split_once(' '))
        .and_then(|(_, until)| until.parse::<i64>().ok())
        .is_some_and(|until| until > now);
    if held {
        return Ok(None);
    }
    let value = lease_value(holder, now + LEASE_MS);
    let mut batch = Batch::new();
    match old {
        Some(old) => batch.require_equals(&key, old),
        None => batch.require_absent(&key),
    };
    batch.put(&key, value.clone().into_bytes());
    match ports.storage.commit(batch).await {
        Ok(()) => Ok(Some(value)),
        Err(StorageError::Conflict { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}
