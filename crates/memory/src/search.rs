//! `search_memory`: rank the org's index, then read the hits' text from storage.

use std::collections::HashSet;
use std::rc::Rc;

use serde_json::{Value, json};

use super::event::Event;
use super::fusion::{Hit, depth_for, fuse, ranked_order, rounded};
use super::inputs::{SearchInput, input_time};
use super::keyword::{Filters, KeywordIndex, best_first};
use super::semantic;
use super::service::{
    KEPT_ANSWER_BYTES, KeptRanking, MemoryService, RECENT_RANKINGS, RankedUnder, Ranking, SearchKey,
};
use super::vector::{Exact, LOADED_RERANK_PER_RESULT, candidates};
use lore_base::error::Result;
use lore_base::ids::parse_record_id;
use lore_base::ports::Ports;
use lore_base::reply::{Reply, Text};
use lore_base::time::format_time;
use lore_directory::Caller;

/// A search's time arguments, in milliseconds.
#[derive(Clone, Copy)]
struct Times {
    since_ms: Option<i64>,
    until_ms: Option<i64>,
    as_of_ms: Option<i64>,
}

impl MemoryService {
    /// Chooses the rankings searches fuse (for evaluation; the default is `Hybrid`).
    #[doc(hidden)]
    pub fn set_ranking(&self, ranking: Ranking) {
        self.ranking.set(ranking);
    }

    /// Embeds the query when the org has vectors under the current embedder; `None` when
    /// there is nothing to compare with or the embedder fails (keyword ranking still answers).
    async fn query_vector(&self, ports: &Ports, caller: &Caller, query: &str) -> Option<Vec<f32>> {
        let embedder = ports.embedder.as_ref()?;
        if query.trim().is_empty() || self.ranking.get() == Ranking::Keyword {
            return None;
        }
        let has_vectors = self.indexes.borrow().get(caller.org()).is_some_and(|c| {
            c.semantic
                .as_ref()
                .is_some_and(|s| !s.is_empty() && s.model == embedder.model_id())
        });
        if !has_vectors {
            return None;
        }
        match semantic::embed_all(embedder.as_ref(), &[query.to_string()]).await {
            Ok(mut v) => v.pop(),
            Err(e) => {
                tracing::warn!(error = %e, "could not embed the query; keyword ranking only");
                None
            }
        }
    }

    /// The vector ranking of a loaded search: the documents allowed by `filters` whose sketches
    /// are nearest the query's, ranked exactly on their stored vectors (this instance's, the
    /// rest in one read), best first, `depth` of them.
    async fn rank_vectors(
        &self,
        ports: &Ports,
        caller: &Caller,
        query: &[f32],
        filters: &Filters<'_>,
        depth: usize,
    ) -> Result<Vec<(u32, f64)>> {
        let exact = Exact::new(query);
        let mut ranked: Vec<(u32, f64)> = Vec::new();
        let (wanted, generation) = {
            let indexes = self.indexes.borrow();
            let Some(cached) = indexes.get(caller.org()) else {
                return Ok(ranked);
            };
            let Some(sem) = cached.semantic.as_ref() else {
                return Ok(ranked);
            };
            let near = candidates(
                &sem.codes,
                query,
                depth * LOADED_RERANK_PER_RESULT,
                &|doc| cached.index.passes_doc(doc, filters),
            );
            let mut wanted: Vec<(u32, String)> = Vec::new();
            for doc in near {
                match sem.vector(doc) {
                    Some((stored, lengths)) => ranked.extend(
                        exact
                            .similarity_of_lengths(stored, lengths)
                            .map(|s| (doc, s)),
                    ),
                    None => {
                        let id = cached.index.doc_id(doc);
                        let ulid = id.strip_prefix("evt_").unwrap_or(id);
                        wanted.push((doc, caller.keys().vector(&sem.model_key, ulid)));
                    }
                }
            }
            (wanted, cached.generation)
        };
        if !wanted.is_empty() {
            let keys: Vec<String> = wanted.iter().map(|(_, k)| k.clone()).collect();
            // A failed read leaves the ranking to the vectors this instance holds.
            let read = match ports.storage.get_many(&keys).await {
                Ok(read) => read,
                Err(e) => {
                    tracing::warn!(error = %e, "could not read the candidates' vectors");
                    vec![None; keys.len()]
                }
            };
            let mut indexes = self.indexes.borrow_mut();
            let Some(cached) = indexes
                .get_mut(caller.org())
                .filter(|c| c.generation == generation)
            else {
                // The index was replaced meanwhile: its document numbers may not be these.
                return Ok(Vec::new());
            };
            let mut sem = cached.semantic.as_mut();
            for ((doc, _), stored) in wanted.iter().zip(read) {
                let Some(stored) = stored else { continue };
                if let Some(sim) = exact.similarity(&stored) {
                    ranked.push((*doc, sim));
                    if let Some(sem) = sem.as_mut() {
                        sem.keep_vector(*doc, stored);
                    }
                }
            }
        }
        if ranked.len() > depth {
            ranked.select_nth_unstable_by(depth - 1, best_first);
            ranked.truncate(depth);
        }
        ranked.sort_by(best_first);
        Ok(ranked)
    }

    /// The best `limit` documents for the query: BM25 and the vector ranking (`vector`, filtered
    /// before it was cut, as the keyword ranking is; `None` without a query vector), fused by
    /// weight (`fusion.rs`), the documents without vectors by their keywords. With only
    /// one ranking available its own order and score stand; a query with no words lists the
    /// newest memories. Equal scores are ordered by event id (`fusion::ranked_order`).
    fn rank(
        &self,
        index: &KeywordIndex,
        query: &str,
        vector: Option<Vec<(u32, f64)>>,
        filters: &Filters<'_>,
        limit: usize,
        unembedded: &dyn Fn(u32) -> bool,
    ) -> Vec<(u32, f64)> {
        let depth = depth_for(limit);
        let has_query_vector = vector.is_some();
        let vector = vector.unwrap_or_default();
        let keyword = if self.ranking.get() == Ranking::Vector {
            Vec::new()
        } else {
            index.rank(&self.tokenizer, query, filters, depth)
        };
        let mut ranked: Vec<(u32, f64)> = match (keyword.is_empty(), vector.is_empty()) {
            (true, true) => {
                return if self.tokenizer.terms(query).is_empty() && !has_query_vector {
                    index
                        .newest(filters, limit)
                        .into_iter()
                        .map(|d| (d, 0.0))
                        .collect()
                } else {
                    Vec::new()
                };
            }
            // One list: its first `limit` (as the per-request probe resolves them), then equal
            // scores by event id.
            (false, true) => keyword
                .into_iter()
                .take(limit)
                .map(|(d, s)| (d, rounded(s, 1e4)))
                .collect(),
            (true, false) => vector
                .into_iter()
                .take(limit)
                .map(|(d, s)| (d, rounded(s, 1e4)))
                .collect(),
            (false, false) => fuse(&keyword, &vector, depth, unembedded),
        };
        ranked.sort_by(|a, b| ranked_order((a.1, index.doc_id(a.0)), (b.1, index.doc_id(b.0))));
        ranked.truncate(limit);
        ranked
    }

    /// The hits of a search over the loaded index (loaded, or brought up to date, first).
    async fn search_loaded(
        &self,
        ports: &Ports,
        caller: &Caller,
        input: &SearchInput,
        times: Times,
        limit: usize,
    ) -> Result<Loaded> {
        self.refresh(ports, caller).await?;
        // The same search over the same index state ranks the same: answered from this
        // instance's recent rankings while no event, vector or reload has changed the index.
        let org = caller.org();
        let state = self.indexes.borrow().get(org).map(|c| RankedUnder {
            generation: c.generation,
            seq: c.index.seq,
            vectors: c.semantic.as_ref().map_or(0, |s| s.len()),
        });
        let key = SearchKey {
            org: org.clone(),
            input: input.clone(),
            limit,
            ranking: self.ranking.get(),
        };
        if let Some(state) = state
            && let Some(kept) = self.rankings.borrow().get(&key)
            && kept.under == state
        {
            return Ok(match &kept.answer {
                Some(answer) => Loaded::Answered(answer.clone()),
                None => Loaded::Ranked {
                    hits: kept.hits.clone(),
                    keep: Some(Box::new((key, state))),
                },
            });
        }
        let (hits, complete) = self.rank_loaded(ports, caller, input, times, limit).await?;
        let keep = match state {
            Some(state) if complete => {
                let mut rankings = self.rankings.borrow_mut();
                if rankings.len() >= RECENT_RANKINGS {
                    rankings.clear();
                    self.answer_bytes.set(0);
                }
                let kept = KeptRanking {
                    under: state,
                    hits: hits.clone(),
                    answer: None,
                };
                if let Some(old) = rankings.insert(key.clone(), kept) {
                    let cost = old.answer.map_or(0, |a| answer_cost(&a));
                    self.answer_bytes
                        .set(self.answer_bytes.get().saturating_sub(cost));
                }
                Some(Box::new((key, state)))
            }
            _ => None,
        };
        Ok(Loaded::Ranked { hits, keep })
    }

    /// Keeps `answer` with the ranking it was made from, while that ranking is still kept under
    /// the same index state; past [`KEPT_ANSWER_BYTES`] the rankings start over.
    fn keep_answer(&self, (key, under): RankingKey, answer: &Rc<Text>) {
        let cost = answer_cost(answer);
        if cost > KEPT_ANSWER_BYTES / 64 {
            return;
        }
        let mut rankings = self.rankings.borrow_mut();
        if self.answer_bytes.get() + cost > KEPT_ANSWER_BYTES {
            rankings.clear();
            self.answer_bytes.set(0);
            return;
        }
        if let Some(kept) = rankings
            .get_mut(&key)
            .filter(|k| k.under == under && k.answer.is_none())
        {
            kept.answer = Some(answer.clone());
            self.answer_bytes.set(self.answer_bytes.get() + cost);
        }
    }

    /// The ranking of [`Self::search_loaded`], and whether it is complete (the query's vector
    /// was had when the org's memories have vectors: a ranking made while the embedder failed
    /// is not kept).
    async fn rank_loaded(
        &self,
        ports: &Ports,
        caller: &Caller,
        input: &SearchInput,
        times: Times,
        limit: usize,
    ) -> Result<(Vec<Hit>, bool)> {
        let kinds: Option<HashSet<String>> = input.kinds.clone().map(|k| k.into_iter().collect());
        let entity_ids: Option<HashSet<String>> =
            input.entity_ids.clone().map(|k| k.into_iter().collect());
        let filters = Filters {
            kinds: kinds.as_ref(),
            entity_ids: entity_ids.as_ref(),
            author: input.author.as_deref(),
            since_ms: times.since_ms,
            until_ms: times.until_ms,
            as_of_ms: times.as_of_ms,
            include_superseded: input.include_superseded,
        };
        // The query's vector, when the org's memories have vectors to compare it with.
        let query_vector = self.query_vector(ports, caller, &input.query).await;
        let vector = match &query_vector {
            Some(q) if self.ranking.get() != Ranking::Keyword => {
                self.rank_vectors(ports, caller, q, &filters, depth_for(limit))
                    .await?
            }
            _ => Vec::new(),
        };
        let indexes = self.indexes.borrow();
        let Some(cached) = indexes.get(caller.org()) else {
            return Ok((Vec::new(), false));
        };
        let complete =
            query_vector.is_some() || cached.semantic.as_ref().is_none_or(|s| s.is_empty());
        let hits = self
            .rank(
                &cached.index,
                &input.query,
                query_vector.as_ref().map(|_| vector),
                &filters,
                limit,
                &|doc| cached.semantic.as_ref().is_some_and(|s| !s.has(doc)),
            )
            .into_iter()
            .map(|(doc, score)| {
                let h = cached.index.hit(doc, score, times.as_of_ms);
                (
                    h.meta.id.clone(),
                    h.score,
                    h.superseded_by.map(str::to_string),
                )
            })
            .collect();
        Ok((hits, complete))
    }

    /// Ranked memories of the caller's org. A search repeated over the same index state is
    /// answered with the text its first answer was serialized to.
    pub async fn search(
        &self,
        ports: &Ports,
        caller: &Caller,
        input: SearchInput,
    ) -> Result<Reply> {
        let times = Times {
            since_ms: input_time(&input.since, "since")?,
            until_ms: input_time(&input.until, "until")?,
            as_of_ms: input_time(&input.as_of, "as_of")?,
        };
        let limit = input.limit.unwrap_or(10).clamp(1, 100);
        // An instance that serves one request answers from the stored segments when it can;
        // so does a fresh instance that keeps its state (natively), whose index then loads
        // after the answer (`Engine::persist_memory`): its first search costs what a Spin
        // request's does, whatever the org's size, and not a load of the whole index.
        let org = caller.org();
        let cold = ports.background.is_some()
            && (!self.indexes.borrow().contains_key(org) || self.loading.borrow().contains(org));
        if cold {
            self.load_due.borrow_mut().insert(org.clone());
        }
        let probed = if self.per_request.get() || cold {
            self.search_probe(ports, caller, &input, limit).await?
        } else {
            None
        };
        let loaded = probed.is_none();
        let (hits, keep) = match probed {
            Some(hits) => (hits, None),
            None => {
                match self
                    .search_loaded(ports, caller, &input, times, limit)
                    .await?
                {
                    Loaded::Answered(answer) => return Ok(Reply::Text(answer)),
                    Loaded::Ranked { hits, keep } => (hits, keep),
                }
            }
        };
        let ids: Vec<&str> = hits.iter().map(|(id, _, _)| id.as_str()).collect();
        let events = self.read_events(ports, caller, &ids).await?;
        let every_event = events.iter().all(Option::is_some);
        let mut results = Vec::with_capacity(hits.len());
        for ((_, score, superseded_by), e) in hits.into_iter().zip(events) {
            let Some(e) = e else {
                continue;
            };
            let mut v = event_json(&e);
            v["score"] = json!(score);
            if let Some(newer) = superseded_by {
                v["superseded_by"] = json!(newer);
            }
            results.push(v);
        }
        let mut value = json!({ "results": results });
        let pending = match loaded {
            true => self.pending_vectors(ports, org),
            false => 0,
        };
        if pending > 0 {
            value["pending_vectors"] = json!(pending);
        }
        Ok(match keep {
            Some(keep) if every_event => {
                let answer = Text::of(&value);
                self.keep_answer(*keep, &answer);
                Reply::Text(answer)
            }
            _ => Reply::Tree(value),
        })
    }
}

impl MemoryService {
    /// How many documents of `org`'s loaded index have no vector under the current embedder
    /// (ranked by keywords alone until the background embedder stores them).
    fn pending_vectors(&self, ports: &Ports, org: &lore_base::ids::OrgId) -> usize {
        let Some(embedder) = &ports.embedder else {
            return 0;
        };
        let indexes = self.indexes.borrow();
        indexes.get(org).map_or(0, |c| match &c.semantic {
            Some(s) if s.model == embedder.model_id() => c.index.len().saturating_sub(s.len()),
            _ => 0,
        })
    }
}

/// Where a ranking is kept: its key, and the index state it was made under.
type RankingKey = (SearchKey, RankedUnder);

/// What a loaded search found: the answer kept with its ranking (its hits are not needed
/// then), or the hits and where to keep the answer made from them.
enum Loaded {
    Answered(Rc<Text>),
    Ranked {
        hits: Vec<Hit>,
        keep: Option<Box<RankingKey>>,
    },
}

/// What a kept answer holds: its text and the same quoted.
fn answer_cost(answer: &Text) -> usize {
    2 * answer.json().len()
}

impl MemoryService {
    /// The events `ids` of the caller's org: from this instance's cache, the rest in one read
    /// (`None` for one that is not stored).
    pub(super) async fn read_events(
        &self,
        ports: &Ports,
        caller: &Caller,
        ids: &[&str],
    ) -> Result<Vec<Option<Rc<Event>>>> {
        let mut events: Vec<Option<Rc<Event>>> = ids
            .iter()
            .map(|id| self.events.borrow_mut().get(caller.org().as_str(), id))
            .collect();
        let mut wanted = Vec::new();
        for (id, e) in ids.iter().zip(&events) {
            if e.is_none() {
                let ulid = parse_record_id(id, "evt", "id")?;
                wanted.push(caller.keys().event(ulid));
            }
        }
        let mut read = ports.storage.get_many(&wanted).await?.into_iter();
        for slot in events.iter_mut().filter(|e| e.is_none()) {
            if let Some(bytes) = read.next().flatten() {
                let e = Rc::new(serde_json::from_slice::<Event>(&bytes)?);
                self.events
                    .borrow_mut()
                    .insert(caller.org().as_str(), e.clone());
                *slot = Some(e);
            }
        }
        Ok(events)
    }
}

/// An event as the memory search and the compact `fetch` show it (without score or
/// supersession by a later event, which only the index knows).
pub fn event_json(e: &Event) -> Value {
    let mut v = json!({
        "id": e.id,
        "content": e.content,
        "kind": e.kind,
        "entity_ids": e.entity_ids,
        "author": e.author,
        "created_at": format_time(e.created_at_ms),
    });
    if let Some(at) = e.occurred_at_ms {
        v["occurred_at"] = json!(format_time(at));
    }
    if let Some(old) = &e.supersedes_event_id {
        v["supersedes_event_id"] = json!(old);
    }
    if let Some(payload) = &e.payload {
        v["payload"] = payload.clone();
    }
    v
}
