//! `search_memory`: rank the org's index, then read the hits' text from storage.

use std::collections::HashSet;
use std::rc::Rc;

use serde_json::{Value, json};

use super::event::{Event, format_time, parse_time};
use super::keyword::Filters;
use super::{MemoryService, SearchInput};
use crate::auth::Caller;
use crate::error::{LoreError, Result};
use crate::ids::parse_record_id;
use crate::ports::Ports;

fn time(field: &str, value: &Option<String>) -> Result<Option<i64>> {
    value
        .as_deref()
        .map(|s| {
            parse_time(s).ok_or_else(|| {
                LoreError::invalid(
                    field,
                    format!(
                        "{s:?} is not a time; use RFC 3339 (2026-01-31T09:00:00Z) or YYYY-MM-DD"
                    ),
                )
            })
        })
        .transpose()
}

impl MemoryService {
    /// Ranked memories of the caller's org.
    pub async fn search(
        &self,
        ports: &Ports,
        caller: &Caller,
        input: SearchInput,
    ) -> Result<Value> {
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
        // Rank under a short borrow; the reads below await.
        let hits: Vec<(String, f64, Option<String>)> = match self.indexes.borrow().get(caller.org())
        {
            Some(cached) => cached
                .index
                .search(&self.tokenizer, &input.query, &filters, limit)
                .into_iter()
                .map(|h| {
                    (
                        h.meta.id.clone(),
                        h.score,
                        h.superseded_by.map(str::to_string),
                    )
                })
                .collect(),
            None => Vec::new(),
        };
        let mut results = Vec::with_capacity(hits.len());
        for (id, score, superseded_by) in hits {
            let cached = self.events.borrow_mut().get(&id);
            let e = match cached {
                Some(e) => e,
                None => {
                    let ulid = parse_record_id(&id, "evt", "id")?;
                    let Some(e) = ports.record::<Event>(&caller.keys().event(ulid)).await? else {
                        continue;
                    };
                    let e = Rc::new(e);
                    self.events.borrow_mut().insert(e.clone());
                    e
                }
            };
            let mut v = json!({
                "id": e.id,
                "content": e.content,
                "kind": e.kind,
                "score": score,
                "entity_ids": e.entity_ids,
                "author": e.author,
                "created_at": format_time(e.created_at_ms),
            });
            if let Some(old) = &e.supersedes_event_id {
                v["supersedes_event_id"] = json!(old);
            }
            if let Some(newer) = superseded_by {
                v["superseded_by"] = json!(newer);
            }
            if let Some(payload) = &e.payload {
                v["payload"] = payload.clone();
            }
            results.push(v);
        }
        Ok(json!({ "results": results }))
    }
}
