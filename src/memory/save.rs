//! `save_memory`: validate, deduplicate (by idempotency key, and by the same normalized text
//! with the same entities), append the events and bump the org's event sequence number in one
//! conditional batch.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::event::Event;
use super::semantic;
use super::{MemoryInput, MemoryService, SaveInput, stored_seq};
use crate::auth::Caller;
use crate::error::{LoreError, Result};
use crate::ids::{new_ulid, parse_record_id};
use crate::keys::{OrgKeys, sha256_hex};
use crate::ports::Ports;
use crate::storage::{Batch, StorageError};

/// Largest `payload`, serialized.
pub const MAX_PAYLOAD_BYTES: usize = 16 * 1024;
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
}

fn fingerprint(m: &MemoryInput, kind: &str) -> String {
    sha256_hex(
        &json!([
            m.content,
            kind,
            m.entity_ids,
            m.supersedes_event_id,
            m.payload
        ])
        .to_string(),
    )
}

/// The duplicate key of a memory: its text lowercased with whitespace collapsed, and its
/// entity set (order and repeats ignored). Kind and payload do not count: the same sentence
/// about the same entities is the same memory.
fn duplicate_hash(content: &str, entity_ids: &[String]) -> String {
    let text = content
        .split_whitespace()
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ");
    let mut entities: Vec<&str> = entity_ids.iter().map(String::as_str).collect();
    entities.sort_unstable();
    entities.dedup();
    sha256_hex(&format!("{text}\n{}", entities.join(",")))
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
            Some(embedder) => {
                let texts: Vec<String> = memories.iter().map(|m| m.content.clone()).collect();
                match semantic::embed_all(embedder.as_ref(), &texts).await {
                    Ok(v) => Some((semantic::model_key(embedder.model_id()), v)),
                    Err(e) => {
                        tracing::warn!(error = %e, "the embedder failed; saving without vectors");
                        None
                    }
                }
            }
            None => None,
        };
        let vectors = vectors.as_ref().map(|(k, v)| (k.as_str(), v.as_slice()));
        for attempt in 0..ATTEMPTS {
            match self
                .try_save(ports, caller, &memories, &field_prefix, vectors)
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
        vectors: Option<(&str, &[Vec<f32>])>,
    ) -> Result<(Value, Vec<Event>)> {
        let mut embedded: Vec<(String, Vec<f32>)> = Vec::new();
        let keys = caller.keys();
        let (seq, stored) = stored_seq(ports, keys).await?;
        let now = ports.clock.now_ms();
        let mut batch = Batch::new();
        let mut ids = Vec::with_capacity(memories.len());
        let mut added = Vec::new();
        let mut in_batch: HashMap<String, IdempotencyRecord> = HashMap::new();
        let mut dups_in_batch: HashMap<String, String> = HashMap::new();
        let mut next = seq;
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
                ids.push(record.event_id);
                continue;
            }
            // A replacement is always new; otherwise the same text about the same entities
            // returns the memory saved before (its idempotency key, if any, now points there).
            let dup_key = m
                .supersedes_event_id
                .is_none()
                .then(|| keys.duplicate(&duplicate_hash(&m.content, &m.entity_ids)));
            let existing = match &dup_key {
                Some(k) => match dups_in_batch.get(k) {
                    Some(id) => Some(id.clone()),
                    None => ports
                        .storage
                        .get(k)
                        .await?
                        .map(|b| String::from_utf8_lossy(&b).into_owned()),
                },
                None => None,
            };
            if let Some(event_id) = existing {
                if let Some(idem_key) = idem_key {
                    let record = IdempotencyRecord {
                        event_id: event_id.clone(),
                        fingerprint: print,
                    };
                    batch
                        .require_absent(&idem_key)
                        .put(&idem_key, serde_json::to_vec(&record)?);
                    in_batch.insert(idem_key, record);
                }
                ids.push(event_id);
                continue;
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
            };
            next += 1;
            batch
                .require_absent(keys.event(&ulid))
                .put(keys.event(&ulid), serde_json::to_vec(&event)?);
            batch.put(keys.event_seq(next), ulid.clone().into_bytes());
            let dup_key = dup_key.unwrap_or_else(|| {
                keys.duplicate(&duplicate_hash(&event.content, &event.entity_ids))
            });
            // A replacement takes over its text's key, so saving that text again finds it.
            if m.supersedes_event_id.is_none() {
                batch.require_absent(&dup_key);
            }
            batch.put(&dup_key, event.id.clone().into_bytes());
            dups_in_batch.insert(dup_key, event.id.clone());
            if let Some((model, vectors)) = vectors
                && let Some(v) = vectors.get(i)
            {
                batch.put(keys.vector(model, &ulid), semantic::encode(v));
                embedded.push((ulid.clone(), v.clone()));
            }
            if let Some(idem_key) = idem_key {
                let record = IdempotencyRecord {
                    event_id: event.id.clone(),
                    fingerprint: print,
                };
                batch
                    .require_absent(&idem_key)
                    .put(&idem_key, serde_json::to_vec(&record)?);
                in_batch.insert(idem_key, record);
            }
            ids.push(event.id.clone());
            added.push(event);
        }
        if next > seq {
            match stored {
                Some(bytes) => batch.require_equals(keys.events_seq(), bytes),
                None => batch.require_absent(keys.events_seq()),
            };
            batch.put(keys.events_seq(), next.to_string().into_bytes());
        }
        if !batch.is_empty() {
            ports.storage.commit(batch).await?;
        }
        self.remember_vectors(embedded);
        Ok((json!({ "ids": ids }), added))
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
        let (seq, stored) = stored_seq(ports, keys).await?;
        let mut batch = Batch::new();
        let mut out = Vec::with_capacity(items.len());
        let mut seen: HashMap<&str, String> = HashMap::new();
        let mut next = seq;
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
            next += 1;
            batch
                .require_absent(&item.origin_key)
                .put(&item.origin_key, event.id.clone().into_bytes())
                .require_absent(keys.event(ulid))
                .put(keys.event(ulid), serde_json::to_vec(event)?)
                .put(keys.event_seq(next), ulid.as_bytes().to_vec());
            seen.insert(&item.origin_key, event.id.clone());
            out.push((event.id.clone(), true));
        }
        if next > seq {
            match stored {
                Some(bytes) => batch.require_equals(keys.events_seq(), bytes),
                None => batch.require_absent(keys.events_seq()),
            };
            batch.put(keys.events_seq(), next.to_string().into_bytes());
            ports.storage.commit(batch).await?;
        }
        Ok(out)
    }
}
