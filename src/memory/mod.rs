//! Memory: `save_memory` appends events; `search_memory` ranks them by keywords (BM25) with
//! filters. Superseded events stay stored and are hidden unless asked for.

pub mod event;
pub mod keyword;

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::auth::Caller;
use crate::error::{LoreError, Result};
use crate::ids::{OrgId, new_ulid, parse_record_id, ulid_floor};
use crate::ports::Ports;
use crate::storage::{Batch, StorageError};
use event::{Event, format_time, parse_time};
use keyword::{Filters, KeywordIndex, Tokenizer};

/// Events written within this window before the newest indexed one are re-read on refresh, so
/// a concurrent writer whose id sorts a little earlier is still picked up.
const REFRESH_OVERLAP_MS: i64 = 5_000;
/// Orgs whose index one core instance keeps in memory.
const MAX_CACHED_ORGS: usize = 256;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryInput {
    pub content: String,
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub entity_ids: Vec<String>,
    #[serde(default)]
    pub supersedes_event_id: Option<String>,
    #[serde(default)]
    pub idempotency_key: Option<String>,
    #[serde(default)]
    pub payload: Option<Value>,
}

/// `save_memory` arguments: one memory, or `{memories: [...]}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum SaveInput {
    Batch { memories: Vec<MemoryInput> },
    One(MemoryInput),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchInput {
    pub query: String,
    #[serde(default)]
    pub limit: Option<usize>,
    #[serde(default)]
    pub kinds: Option<Vec<String>>,
    #[serde(default)]
    pub entity_ids: Option<Vec<String>>,
    #[serde(default)]
    pub author: Option<String>,
    #[serde(default)]
    pub since: Option<String>,
    #[serde(default)]
    pub until: Option<String>,
    #[serde(default)]
    pub include_superseded: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct IdempotencyRecord {
    event_id: String,
    fingerprint: String,
}

fn fingerprint(m: &MemoryInput, kind: &str) -> String {
    let canonical = json!([
        m.content,
        kind,
        m.entity_ids,
        m.supersedes_event_id,
        m.payload
    ]);
    let digest = Sha256::digest(canonical.to_string().as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha_hex(s: &str) -> String {
    Sha256::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Per-instance memory state: the keyword indexes of the orgs it has served.
#[derive(Default)]
pub struct MemoryService {
    tokenizer: Tokenizer,
    indexes: RefCell<HashMap<OrgId, KeywordIndex>>,
}

impl MemoryService {
    /// Appends the memories; returns `{ids}` in input order.
    pub async fn save(&self, ports: &Ports, caller: &Caller, input: SaveInput) -> Result<Value> {
        caller.require_write("save_memory")?;
        let (memories, field_prefix) = match input {
            SaveInput::One(m) => (vec![m], String::new()),
            SaveInput::Batch { memories } => (memories, "memories/".to_string()),
        };
        if memories.is_empty() {
            return Err(LoreError::invalid("memories", "give at least one memory"));
        }
        // Two attempts: a conflicting concurrent save with the same idempotency key makes the
        // first fail; the second then finds that key's record.
        for _ in 0..2 {
            match self.try_save(ports, caller, &memories, &field_prefix).await {
                Err(LoreError::Storage(StorageError::Conflict { .. })) => continue,
                other => return other,
            }
        }
        Err(LoreError::Conflict(
            "concurrent saves with the same idempotency_key; retry".into(),
        ))
    }

    async fn try_save(
        &self,
        ports: &Ports,
        caller: &Caller,
        memories: &[MemoryInput],
        prefix: &str,
    ) -> Result<Value> {
        let keys = caller.keys();
        let now = ports.clock.now_ms();
        let mut batch = Batch::new();
        let mut ids = Vec::with_capacity(memories.len());
        let mut in_batch: HashMap<String, IdempotencyRecord> = HashMap::new();
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
            let kind = m.kind.clone().unwrap_or_else(|| "note".into());
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
            let idem_key = m
                .idempotency_key
                .as_deref()
                .map(|k| keys.idempotency(&sha_hex(k)));
            // The key may be stored already, or used earlier in this same batch.
            let earlier = match &idem_key {
                Some(k) => match in_batch.get(k) {
                    Some(record) => Some(record.clone()),
                    None => match ports.storage.get(k).await? {
                        Some(bytes) => Some(serde_json::from_slice::<IdempotencyRecord>(&bytes)?),
                        None => None,
                    },
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
            batch
                .require_absent(keys.event(&ulid))
                .put(keys.event(&ulid), serde_json::to_vec(&event)?);
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
            ids.push(event.id);
        }
        if !batch.writes.is_empty() {
            batch.put(keys.events_changed(), ports.random_hex(8).into_bytes());
            ports.storage.commit(batch).await?;
        }
        Ok(json!({ "ids": ids }))
    }

    /// Brings the caller's org index up to date with storage.
    ///
    /// The org's change marker is read first: when it equals the one seen at the last refresh,
    /// nothing was added and no scan is needed. Reading it before scanning means a write that
    /// lands during the scan changes the marker again and is picked up next time.
    async fn refresh(&self, ports: &Ports, caller: &Caller) -> Result<()> {
        let org = caller.org();
        let marker = ports.storage.get(&caller.keys().events_changed()).await?;
        let (newest, seen_marker) = match self.indexes.borrow().get(org) {
            Some(index) => (index.newest_ms, Some(index.marker.clone())),
            None => (None, None),
        };
        if seen_marker.as_ref() == Some(&marker) {
            return Ok(());
        }
        let prefix = caller.keys().events();
        let mut after = newest.map(|ms| caller.keys().event(&ulid_floor(ms - REFRESH_OVERLAP_MS)));
        let mut fresh = Vec::new();
        loop {
            let page = ports.storage.scan(&prefix, after.as_deref(), 1000).await?;
            for (_, value) in &page.entries {
                fresh.push(serde_json::from_slice::<Event>(value)?);
            }
            match page.cursor {
                Some(c) => after = Some(c),
                None => break,
            }
        }
        let mut indexes = self.indexes.borrow_mut();
        if !indexes.contains_key(org) && indexes.len() >= MAX_CACHED_ORGS {
            indexes.clear();
        }
        let index = indexes.entry(org.clone()).or_default();
        for event in fresh {
            index.insert(&self.tokenizer, event);
        }
        index.marker = marker;
        Ok(())
    }

    /// Ranked memories of the caller's org.
    pub async fn search(
        &self,
        ports: &Ports,
        caller: &Caller,
        input: SearchInput,
    ) -> Result<Value> {
        let time = |field: &str, v: &Option<String>| -> Result<Option<i64>> {
            v.as_deref()
                .map(|s| {
                    parse_time(s).ok_or_else(|| {
                        LoreError::invalid(field, format!("{s:?} is not a time; use RFC 3339 (2026-01-31T09:00:00Z) or YYYY-MM-DD"))
                    })
                })
                .transpose()
        };
        let since_ms = time("since", &input.since)?;
        let until_ms = time("until", &input.until)?;
        let limit = input.limit.unwrap_or(10).clamp(1, 100);
        self.refresh(ports, caller).await?;
        let kinds: Option<HashSet<String>> = input.kinds.map(|k| k.into_iter().collect());
        let entity_ids: Option<HashSet<String>> = input.entity_ids.map(|k| k.into_iter().collect());
        let filters = Filters {
            kinds: kinds.as_ref(),
            entity_ids: entity_ids.as_ref(),
            author: input.author.as_deref(),
            since_ms,
            until_ms,
            include_superseded: input.include_superseded,
        };
        let indexes = self.indexes.borrow();
        let results: Vec<Value> = match indexes.get(caller.org()) {
            Some(index) => index
                .search(&self.tokenizer, &input.query, &filters, limit)
                .into_iter()
                .map(|hit| {
                    let e = hit.event;
                    let mut v = json!({
                        "id": e.id,
                        "content": e.content,
                        "kind": e.kind,
                        "score": hit.score,
                        "entity_ids": e.entity_ids,
                        "author": e.author,
                        "created_at": format_time(e.created_at_ms),
                    });
                    if let Some(old) = &e.supersedes_event_id {
                        v["supersedes_event_id"] = json!(old);
                    }
                    if let Some(newer) = hit.superseded_by {
                        v["superseded_by"] = json!(newer);
                    }
                    if let Some(payload) = &e.payload {
                        v["payload"] = payload.clone();
                    }
                    v
                })
                .collect(),
            None => Vec::new(),
        };
        Ok(json!({ "results": results }))
    }
}
