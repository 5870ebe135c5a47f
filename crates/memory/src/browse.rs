//! Browsing memory rather than searching it: the timeline (`memory.list`, newest first under
//! the search's filters, a page at a time) and one memory's versions (`memory.versions`: what
//! it replaced and what replaced it). Both come from the org's keyword index, which knows every
//! event's kind, author, entities, times and supersession; the events themselves are read as a
//! search's hits are.

use std::collections::HashSet;

use serde_json::{Value, json};

use super::inputs::{ListInput, input_time};
use super::keyword::Filters;
use super::search::event_json;
use super::service::MemoryService;
use lore_base::error::{LoreError, Result};
use lore_base::ids::parse_record_id;
use lore_base::ports::Ports;
use lore_directory::Caller;

/// A chain of versions longer than this is shown up to here on each side.
const MAX_VERSIONS: usize = 1_000;

impl MemoryService {
    /// `memory.list`: the caller's org's memories newest first.
    pub async fn list(&self, ports: &Ports, caller: &Caller, input: ListInput) -> Result<Value> {
        let since_ms = input_time(&input.since, "since")?;
        let until_ms = input_time(&input.until, "until")?;
        let limit = input.limit.unwrap_or(50).clamp(1, 100);
        self.refresh(ports, caller).await?;
        let (page, next_cursor) = {
            let indexes = self.indexes.borrow();
            let Some(cached) = indexes.get(caller.org()) else {
                return Ok(json!({ "items": [] }));
            };
            let index = &cached.index;
            let start = match &input.cursor {
                Some(c) => index.doc_of(c).ok_or_else(|| {
                    LoreError::invalid(
                        "cursor",
                        "not a cursor of this list; pass next_cursor from the previous page",
                    )
                })?,
                None => index.len() as u32,
            };
            let kinds: Option<HashSet<String>> = input.kinds.map(|k| k.into_iter().collect());
            let entity_ids: Option<HashSet<String>> =
                input.entity_ids.map(|k| k.into_iter().collect());
            let filters = Filters {
                kinds: kinds.as_ref(),
                entity_ids: entity_ids.as_ref(),
                author: input.author.as_deref(),
                since_ms,
                until_ms,
                as_of_ms: None,
                include_superseded: input.include_superseded,
            };
            let mut docs = (0..start).rev().filter(|&d| index.passes_doc(d, &filters));
            let page: Vec<(String, Option<String>)> = docs
                .by_ref()
                .take(limit)
                .map(|d| {
                    let h = index.hit(d, 0.0, None);
                    (h.meta.id.clone(), h.superseded_by.map(str::to_string))
                })
                .collect();
            let next = match docs.next() {
                Some(_) => page.last().map(|(id, _)| id.clone()),
                None => None,
            };
            (page, next)
        };
        let mut out = json!({ "items": self.shown(ports, caller, page).await? });
        if let Some(c) = next_cursor {
            out["next_cursor"] = json!(c);
        }
        Ok(out)
    }

    /// `memory.versions`: every version of the memory `id` belongs to, oldest first: what it
    /// replaced (and what that replaced), itself, and what replaced it since.
    pub async fn versions(&self, ports: &Ports, caller: &Caller, id: &str) -> Result<Value> {
        parse_record_id(id, "evt", "id")?;
        self.refresh(ports, caller).await?;
        let chain = {
            let indexes = self.indexes.borrow();
            let index = indexes
                .get(caller.org())
                .map(|c| &c.index)
                .filter(|i| i.contains(id))
                .ok_or_else(|| {
                    LoreError::not_found(format!("memory {id} in org {}", caller.org()))
                })?;
            let mut older = Vec::new();
            let mut at = id;
            while older.len() < MAX_VERSIONS
                && let Some(prev) = index
                    .meta_of(at)
                    .and_then(|m| m.supersedes_event_id.as_deref())
                    .filter(|p| index.contains(p))
            {
                older.push(prev);
                at = prev;
            }
            let mut chain: Vec<(String, Option<String>)> = older
                .into_iter()
                .rev()
                .chain(std::iter::once(id))
                .map(|v| (v.to_string(), index.superseded_by(v).map(str::to_string)))
                .collect();
            let mut at = id;
            let mut newer = 0;
            while newer < MAX_VERSIONS
                && let Some(next) = index.superseded_by(at)
            {
                chain.push((
                    next.to_string(),
                    index.superseded_by(next).map(str::to_string),
                ));
                at = next;
                newer += 1;
            }
            chain
        };
        Ok(json!({ "versions": self.shown(ports, caller, chain).await? }))
    }

    /// The events of `page` as the search shows them, each with its replacement if any.
    async fn shown(
        &self,
        ports: &Ports,
        caller: &Caller,
        page: Vec<(String, Option<String>)>,
    ) -> Result<Vec<Value>> {
        let ids: Vec<&str> = page.iter().map(|(id, _)| id.as_str()).collect();
        let events = self.read_events(ports, caller, &ids).await?;
        Ok(page
            .iter()
            .zip(events)
            .filter_map(|((_, newer), e)| {
                let mut v = event_json(e?.as_ref());
                if let Some(n) = newer {
                    v["superseded_by"] = json!(n);
                }
                Some(v)
            })
            .collect())
    }
}
