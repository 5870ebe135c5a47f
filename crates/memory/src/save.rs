//! `save_memory`: validate, deduplicate (by idempotency key, and against a current memory
//! equivalent to the save: the same normalized text, entities, kind, payload and author),
//! append the events and bump the org's event sequence number in one conditional batch. A
//! deduplicated save is never silent: the answer says `deduplicated` and which ones. The
//! vectors go in the same batch where the embedder is quick or the caller waits for them; else
//! a queue key per new memory does, and the background embedder stores them after the answer
//! (`embed_queue.rs`).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::event::Event;
use super::inputs::{MemoryInput, SaveInput, input_time};
use super::refresh::stored_seq;
use super::semantic;
use super::service::MemoryService;
use lore_base::error::{LoreError, Result};
use lore_base::ids::{new_ulid, parse_record_id};
use lore_base::keys::{OrgKeys, sha256_hex};
use lore_base::ports::Ports;
use lore_base::storage::{Batch, StorageError};
use lore_directory::Caller;

/// Largest `payload`, serialized.
pub const MAX_PAYLOAD_BYTES: usize = 16 * 1024;
/// The vectors a save stores with its memories: the model's key, and each memory's vectors.
type Vectors<'a> = Option<(&'a str, &'a [Vec<Vec<f32>>])>;

/// Attempts at a save whose batch lost a race (another save in the same org committed first).
const ATTEMPTS: usize = 16;

/// Longest pause between two attempts.
const MAX_BACKOFF_MS: u64 = 250;

/// A random pause before attempt `attempt + 1`: up to 4 ms, doubling per attempt, capped.
fn backoff_ms(ports: &Ports, attempt: usize) -> u64 {
    let ceiling = (4u64 << attempt.min(6)).min(MAX_BACKOFF_MS);
    let mut byte = [0u8; 2];
    ports.random.fill(&mut byte);
    u64::from(u16::from_le_bytes(byte)) % (ceiling + 1)
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct IdempotencyRecord {
    event_id: String,
    fingerprint: String,
    /// Whether the first save was deduplicated: a retry answers as the first save did.
    #[serde(default)]
    deduplicated: bool,
}

fn fingerprint(m: &MemoryInput, kind: &str) -> String {
    let mut fields = json!([
        m.content,
        kind,
        m.entity_ids,
        m.supersedes_event_id,
        m.payload
    ]);
    // Only when given, so that the prints of memories without one stay as they were.
    if let Some(at) = &m.occurred_at {
        fields.as_array_mut().expect("an array").push(json!(at));
    }
    sha256_hex(&fields.to_string())
}

/// The duplicate key of a memory: its text lowercased with whitespace collapsed, its entity set
/// (order and repeats ignored), its kind, its payload and its author. Only a save equivalent
/// in all of these is folded into an earlier memory: another author's, kind's or payload's
/// save of the same sentence is a memory of its own.
fn duplicate_hash(
    content: &str,
    entity_ids: &[String],
    kind: &str,
    payload: Option<&Value>,
    author: &str,
    occurred_at_ms: Option<i64>,
) -> String {
    let text = content
        .split_whitespace()
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ");
    let mut entities: Vec<&str> = entity_ids.iter().map(String::as_str).collect();
    entities.sort_unstable();
    entities.dedup();
    // serde_json's maps are ordered by key, so equal payloads serialize equally.
    let payload = payload.map(Value::to_string).unwrap_or_default();
    let mut fields = json!([text, entities.join(","), kind, payload, author]);
    // The same sentence about another day is another memory; without a time, keys stay as
    // they were before memories had one.
    if let Some(at) = occurred_at_ms {
        fields.as_array_mut().expect("an array").push(json!(at));
    }
    sha256_hex(&fields.to_string())
}

impl MemoryService {
    /// Appends the memories; returns `{ids}` in input order, and the events it added (not the
    /// ones an idempotent retry or a duplicate found), for the behaviors they trigger.
    pub async fn save(
        &self,
        ports: &Ports,
        caller: &Caller,
        input: SaveInput,
    ) -> Result<(Value, Vec<Event>)> {
        caller.require_write("save_memory")?;
        // Vectors before the answer where embedding is quick, where the caller waits for them,
        // or where nothing runs after the answer; else the background embedder's queue.
        let embed_now = ports.embedder.as_ref().is_some_and(|e| e.is_quick())
            || input.waits_for_vectors()
            || ports.background.is_none();
        let (memories, field_prefix) = match input {
            SaveInput::One(m) => (vec![m], String::new()),
            SaveInput::Batch(b) => (b.memories, "memories/".to_string()),
        };
        if memories.is_empty() {
            return Err(LoreError::invalid("memories", "give at least one memory"));
        }
        // A conflict means another save in this org committed between our read of the sequence
        // number and our commit (or took the same idempotency key): read again and retry.
        // Where every storage call yields to other requests (Workers on D1), concurrent saves
        // all read the same sequence number and all but one lose each round; a random, growing
        // pause spreads them out so they do not collide round after round.
        // Embed once, before the attempts; a failing embedder leaves the vectors to a later
        // refresh rather than failing the save.
        let vectors = match &ports.embedder {
            Some(embedder) if embed_now => {
                let texts: Vec<String> = memories.iter().map(|m| m.content.clone()).collect();
                match semantic::embed_memories(embedder.as_ref(), &texts).await {
                    Ok(v) => Some((semantic::model_key(embedder.model_id()), v)),
                    Err(e) => {
                        tracing::warn!(error = %e, "the embedder failed; saving without vectors, queued for the background embedder");
                        None
                    }
                }
            }
            _ => None,
        };
        // Queued: the memories an embedder has no vectors for yet.
        let queue = ports.embedder.is_some() && vectors.is_none();
        let vectors = vectors.as_ref().map(|(k, v)| (k.as_str(), v.as_slice()));
        for attempt in 0..ATTEMPTS {
            match self
                .try_save(ports, caller, &memories, &field_prefix, (vectors, queue))
                .await
            {
                Err(LoreError::Storage(StorageError::Conflict { .. })) => {
                    ports.clock.sleep(backoff_ms(ports, attempt)).await;
                }
                other => return other,
            }
        }
        Err(LoreError::Conflict(
            "too many concurrent saves in this org; retry".into(),
        ))
    }

    async fn try_save(
        &self,
        ports: &Ports,
        caller: &Caller,
        memories: &[MemoryInput],
        prefix: &str,
        (vectors, queue): (Vectors<'_>, bool),
    ) -> Result<(Value, Vec<Event>)> {
        let mut embedded: Vec<(String, Vec<Vec<f32>>)> = Vec::new();
        let keys = caller.keys();
        let now = ports.clock.now_ms();
        let mut batch = Batch::new();
        let mut ids = Vec::with_capacity(memories.len());
        let mut added = Vec::new();
        let mut in_batch: HashMap<String, IdempotencyRecord> = HashMap::new();
        let mut dups_in_batch: HashMap<String, String> = HashMap::new();
        // Indexes (in input order) of the memories an equivalent current memory stood for.
        let mut deduplicated: Vec<usize> = Vec::new();
        let mut superseded_in_batch: std::collections::HashSet<String> = Default::default();
        let mut appended: Vec<String> = Vec::new();
        for (i, m) in memories.iter().enumerate() {
            let field = |name: &str| {
                if prefix.is_empty() {
                    name.to_string()
                } else {
                    format!("{prefix}{i}/{name}")
                }
            };
            if m.content.trim().is_empty() {
                return Err(LoreError::invalid(
                    field("content"),
                    "content is empty; say what to remember",
                ));
            }
            if let Some(payload) = &m.payload {
                lore_base::schema::check_stored_depth(payload, &field("payload"))?;
                let size = payload.to_string().len();
                if size > MAX_PAYLOAD_BYTES {
                    return Err(LoreError::invalid(
                        field("payload"),
                        format!(
                            "payload is {size} bytes serialized; the limit is {MAX_PAYLOAD_BYTES}"
                        ),
                    ));
                }
            }
            let occurred_at_ms = input_time(&m.occurred_at, &field("occurred_at"))?;
            let kind = m.kind.clone().unwrap_or_else(|| "note".into());
            for (j, id) in m.entity_ids.iter().enumerate() {
                let field = field(&format!("entity_ids/{j}"));
                let ulid = parse_record_id(id, "ent", &field)?;
                if ports.storage.get(&keys.entity(ulid)).await?.is_none() {
                    return Err(LoreError::invalid(
                        field,
                        format!(
                            "no entity {id} in org {}; pass ids of entities that exist (entities.list)",
                            caller.org()
                        ),
                    ));
                }
            }
            let mut supersedes = None;
            if let Some(old) = &m.supersedes_event_id {
                let ulid = parse_record_id(old, "evt", &field("supersedes_event_id"))?;
                if ports.storage.get(&keys.event(ulid)).await?.is_none() {
                    return Err(LoreError::invalid(
                        field("supersedes_event_id"),
                        format!(
                            "no memory {old} in org {}; pass an id that search_memory returned",
                            caller.org()
                        ),
                    ));
                }
                // Only the current version is replaced: a second correction of one memory
                // would fork it into two current versions, the later silently losing the other.
                let marker = keys.superseded(ulid);
                let newer = match superseded_in_batch.contains(&marker) {
                    true => Some("a memory earlier in this call".to_string()),
                    false => ports
                        .storage
                        .get(&marker)
                        .await?
                        .map(|b| String::from_utf8_lossy(&b).into_owned()),
                };
                if let Some(newer) = newer {
                    return Err(LoreError::Conflict(format!(
                        "memory {old} was already replaced by {newer}; supersede the current version instead (memory.versions lists them)"
                    )));
                }
                supersedes = Some(ulid.to_string());
            }
            let print = fingerprint(m, &kind);
            // Keys are per principal: one agent's key never returns or blocks another's save.
            let idem_key = m
                .idempotency_key
                .as_deref()
                .map(|k| keys.idempotency(&sha256_hex(&format!("{}\n{k}", caller.principal().id))));
            // The key may be stored already, or used earlier in this same batch.
            let earlier = match &idem_key {
                Some(k) => match in_batch.get(k) {
                    Some(record) => Some(record.clone()),
                    None => ports.record::<IdempotencyRecord>(k).await?,
                },
                None => None,
            };
            if let Some(record) = earlier {
                if record.fingerprint != print {
                    return Err(LoreError::invalid(
                        field("idempotency_key"),
                        "this idempotency_key was already used for a different memory; use a new key",
                    ));
                }
                if record.deduplicated {
                    deduplicated.push(ids.len());
                }
                ids.push(record.event_id);
                continue;
            }
            // A replacement is always new; otherwise an equivalent memory that is still
            // current returns that memory (its idempotency key, if any, now points there). One
            // that a later save superseded does not: saving its text again (reverting a
            // decision) is a new memory, which takes the key over.
            let author = &caller.principal().id;
            let dup_key = keys.duplicate(&duplicate_hash(
                &m.content,
                &m.entity_ids,
                &kind,
                m.payload.as_ref(),
                author,
                occurred_at_ms,
            ));
            let mut replaces_dup: Option<Vec<u8>> = None;
            if m.supersedes_event_id.is_none() {
                let existing = match dups_in_batch.get(&dup_key) {
                    Some(id) => Some((id.clone(), None)),
                    None => match ports.storage.get(&dup_key).await? {
                        Some(b) => {
                            let id = String::from_utf8_lossy(&b).into_owned();
                            let marker = id.strip_prefix("evt_").map(|ulid| keys.superseded(ulid));
                            let current = match &marker {
                                Some(k) => {
                                    !superseded_in_batch.contains(k)
                                        && ports.storage.get(k).await?.is_none()
                                }
                                None => false,
                            };
                            if current {
                                Some((id, marker))
                            } else {
                                replaces_dup = Some(b);
                                None
                            }
                        }
                        None => None,
                    },
                };
                if let Some((event_id, marker)) = existing {
                    // Still current when this commits: a supersede racing this save makes the
                    // batch fail and the save run again, and then it is new.
                    if let Some(marker) = marker {
                        batch.require_absent(marker);
                    }
                    if let Some(idem_key) = idem_key {
                        let record = IdempotencyRecord {
                            event_id: event_id.clone(),
                            fingerprint: print,
                            deduplicated: true,
                        };
                        batch
                            .require_absent(&idem_key)
                            .put(&idem_key, serde_json::to_vec(&record)?);
                        in_batch.insert(idem_key, record);
                    }
                    deduplicated.push(ids.len());
                    ids.push(event_id);
                    continue;
                }
            }
            let ulid = new_ulid(ports);
            let event = Event {
                id: format!("evt_{ulid}"),
                kind,
                content: m.content.clone(),
                payload: m.payload.clone(),
                entity_ids: m.entity_ids.clone(),
                author: caller.principal().id.clone(),
                supersedes_event_id: m.supersedes_event_id.clone(),
                origin_id: None,
                created_at_ms: now,
                occurred_at_ms,
            };
            batch
                .require_absent(keys.event(&ulid))
                .put(keys.event(&ulid), serde_json::to_vec(&event)?);
            appended.push(ulid.clone());
            if let Some(old) = &supersedes {
                let marker = keys.superseded(old);
                // Still current when this commits: a correction racing this one fails here.
                batch
                    .require_absent(&marker)
                    .put(&marker, event.id.clone().into_bytes());
                superseded_in_batch.insert(marker);
            }
            // The new memory is its key's current one: a replacement takes its text's key over,
            // and so does a save of a superseded memory's text.
            match (&m.supersedes_event_id, replaces_dup) {
                (Some(_), _) => {}
                (None, Some(old)) => {
                    batch.require_equals(&dup_key, old);
                }
                (None, None) => {
                    batch.require_absent(&dup_key);
                }
            }
            batch.put(&dup_key, event.id.clone().into_bytes());
            dups_in_batch.insert(dup_key, event.id.clone());
            if let Some((model, vectors)) = vectors
                && let Some(v) = vectors.get(i)
            {
                batch.put(keys.vector(model, &ulid), super::vector::encode(v));
                embedded.push((ulid.clone(), v.clone()));
            }
            if queue {
                batch.put(keys.embed_queued(&ulid), b"1".to_vec());
            }
            if let Some(idem_key) = idem_key {
                let record = IdempotencyRecord {
                    event_id: event.id.clone(),
                    fingerprint: print,
                    deduplicated: false,
                };
                batch
                    .require_absent(&idem_key)
                    .put(&idem_key, serde_json::to_vec(&record)?);
                in_batch.insert(idem_key, record);
            }
            ids.push(event.id.clone());
            added.push(event);
        }
        self.commit_events(ports, keys, batch, &appended).await?;
        self.remember_vectors(embedded);
        let mut out = json!({ "ids": ids, "deduplicated": !deduplicated.is_empty() });
        if !deduplicated.is_empty() {
            out["deduplicated_indexes"] = json!(deduplicated);
        }
        if queue && !appended.is_empty() {
            out["vectors"] = json!("pending");
            self.mark_embed_due(caller.org());
        }
        Ok((out, added))
    }
}

/// An event that a feed brought, with the key that deduplicates its delivery.
pub struct FeedItem {
    /// `OrgKeys::origin(feed, hash)` of the delivery id.
    pub origin_key: String,
    pub event: Event,
}

impl MemoryService {
    /// Appends feed items that were not delivered before; returns each item's event id and
    /// whether it is new, in input order. Dedupe and append commit in one batch.
    pub async fn append_feed_items(
        &self,
        ports: &Ports,
        keys: &OrgKeys,
        items: &[FeedItem],
    ) -> Result<Vec<(String, bool)>> {
        for attempt in 0..ATTEMPTS {
            match self.try_append(ports, keys, items).await {
                Err(LoreError::Storage(StorageError::Conflict { .. })) => {
                    ports.clock.sleep(backoff_ms(ports, attempt)).await;
                }
                other => return other,
            }
        }
        Err(LoreError::Conflict(
            "too many concurrent writes in this org; retry".into(),
        ))
    }

    async fn try_append(
        &self,
        ports: &Ports,
        keys: &OrgKeys,
        items: &[FeedItem],
    ) -> Result<Vec<(String, bool)>> {
        let mut batch = Batch::new();
        let mut out = Vec::with_capacity(items.len());
        let mut seen: HashMap<&str, String> = HashMap::new();
        let mut appended: Vec<String> = Vec::new();
        for item in items {
            if let Some(id) = seen.get(item.origin_key.as_str()) {
                out.push((id.clone(), false));
                continue;
            }
            if let Some(bytes) = ports.storage.get(&item.origin_key).await? {
                out.push((String::from_utf8_lossy(&bytes).into_owned(), false));
                continue;
            }
            let event = &item.event;
            let ulid = &event.id[4..];
            batch
                .require_absent(&item.origin_key)
                .put(&item.origin_key, event.id.clone().into_bytes())
                .require_absent(keys.event(ulid))
                .put(keys.event(ulid), serde_json::to_vec(event)?);
            appended.push(ulid.to_string());
            seen.insert(&item.origin_key, event.id.clone());
            out.push((event.id.clone(), true));
        }
        if !appended.is_empty() {
            self.commit_events(ports, keys, batch, &appended).await?;
        }
        Ok(out)
    }

    /// Commits `batch` with the events `appended` (ulids, in order) numbered after the org's
    /// last: their sequence entries, and the org's sequence number moved on under a check that
    /// it is the one they follow. A conflict means another writer numbered events first; the
    /// caller builds its batch again.
    ///
    /// The numbers follow this instance's own batches still on their way to storage, when there
    /// are any (`pending_seq`), instead of the stored number they will replace: concurrent saves
    /// in one org then reach storage one after the other in one group commit, each checked
    /// against the number the batch before it writes, rather than all but one failing their
    /// check. Nothing awaits between reading the pending number and handing the batch to
    /// storage, and a batch that fails makes the ones numbered after it fail their checks too, so
    /// the numbering stays gapless whatever the order storage applies them in.
    async fn commit_events(
        &self,
        ports: &Ports,
        keys: &OrgKeys,
        mut batch: Batch,
        appended: &[String],
    ) -> Result<()> {
        if appended.is_empty() {
            if !batch.is_empty() {
                ports.storage.commit(batch).await?;
            }
            return Ok(());
        }
        let (stored_number, stored) = stored_seq(ports, keys).await?;
        let pending = self.pending_seq.borrow().get(keys.root()).copied();
        let (seq, stored) = match pending {
            Some(p) if p > stored_number => (p, Some(p.to_string().into_bytes())),
            _ => (stored_number, stored),
        };
        let mut next = seq;
        for ulid in appended {
            next += 1;
            batch.put(keys.event_seq(next), ulid.clone().into_bytes());
        }
        match stored {
            Some(bytes) => batch.require_equals(keys.events_seq(), bytes),
            None => batch.require_absent(keys.events_seq()),
        };
        batch.put(keys.events_seq(), next.to_string().into_bytes());
        self.pending_seq
            .borrow_mut()
            .insert(keys.root().to_string(), next);
        let committed = ports.storage.commit(batch).await;
        {
            let mut pending = self.pending_seq.borrow_mut();
            if pending.get(keys.root()) == Some(&next) {
                pending.remove(keys.root());
            }
        }
        committed?;
        self.note_committed(keys, seq, next);
        Ok(())
    }

    /// Commits a script run's batch. The run's saves numbered their events in the run's overlay,
    /// after the org's sequence number as the run read it; another writer may have numbered
    /// events since. Appends do not conflict: the run's events are numbered again after the
    /// current last when the batch is committed (`commit_events`, retried while other
    /// saves keep numbering first). A conflict on any other key is the run's to report.
    pub async fn commit_run_batch(
        &self,
        ports: &Ports,
        keys: &OrgKeys,
        mut batch: Batch,
    ) -> Result<()> {
        let (seq_key, seq_prefix) = (keys.events_seq(), keys.event_seqs());
        if !batch
            .writes
            .iter()
            .any(|w| w.key().starts_with(&seq_prefix))
        {
            ports.storage.commit(batch).await?;
            return Ok(());
        }
        // The run's events in the order it numbered them (the keys sort numerically).
        let mut numbered: Vec<(String, Vec<u8>)> = Vec::new();
        batch.writes.retain(|w| match w {
            lore_base::storage::Write::Put(k, v) if k.starts_with(&seq_prefix) => {
                numbered.push((k.clone(), v.clone()));
                false
            }
            w => w.key() != seq_key,
        });
        batch.checks.retain(|c| c.key() != seq_key);
        numbered.sort();
        let appended: Vec<String> = numbered
            .into_iter()
            .map(|(_, ulid)| String::from_utf8_lossy(&ulid).into_owned())
            .collect();
        for attempt in 0..ATTEMPTS {
            match self
                .commit_events(ports, keys, batch.clone(), &appended)
                .await
            {
                Err(LoreError::Storage(StorageError::Conflict { key })) if key == seq_key => {
                    ports.clock.sleep(backoff_ms(ports, attempt)).await;
                }
                other => return other,
            }
        }
        Err(LoreError::Storage(StorageError::Conflict { key: seq_key }))
    }
}
