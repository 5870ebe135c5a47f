//! One engine instance ([`Engine`]): the ports, the engine's configuration and the warm state
//! of the orgs it serves (memory indexes, compiled entity-type validators, decoded SQL tables,
//! usage counts, org records). Every module above it takes `&Engine`; the modules below it
//! (memory, records, SQL) take the ports and the one cache they use.
//!
//! The script runner (`runs`) sits above the SDK registry it dispatches into, so what the
//! layers below ask of it (a script operation's run, behaviors' reactions to new events) goes
//! through [`Scripts`], given to the instance when it is made.

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use lore_directory::Caller;
use lore_sandbox::remote::ScriptThreads;
use serde_json::Value;

use crate::scope::Scope;
use lore_base::error::LoreError;
use lore_base::ids::OrgId;
use lore_base::keys;
use lore_base::model::{self, Tier};
use lore_base::ports::{Offload, Ports};
use lore_base::ratelimit::{RateLimits, ScriptSlots};
use lore_memory::event::Event;
use lore_memory::{MemoryService, Ranking, SaveInput};
use lore_records::metrics::{Counts, UsageCounters};
use lore_records::operations::Operation;
use lore_records::sql;
use lore_records::types::SchemaCache;

/// How the engine behaves: the budgets of one SQL query, the rate limits an org may only lower
/// for itself, and the caps of a script run.
#[derive(Debug, Clone, Default)]
pub struct EngineConfig {
    pub sql: sql::Limits,
    pub rate_limits: RateLimits,
    /// The caps of every script run (SPEC 4.1's by default; an operator may set others).
    pub scripts: lore_sandbox::caps::ScriptCaps,
}

/// A future of the engine's, on one thread (`?Send`, as every port's).
pub type Local<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// What the script runner does for the layers below it.
pub trait Scripts {
    /// Runs a script operation's body for `caller` with `args` (already valid), calling
    /// methods up to `tier`; the value is the script's result.
    fn run_operation<'a>(
        &'a self,
        engine: &'a Engine,
        caller: &'a Caller,
        op: &'a Operation,
        code: &'a str,
        args: Value,
        tier: Tier,
    ) -> Local<'a, Result<Value, LoreError>>;

    /// Runs the reactions that `events`, just committed in `org`, set off.
    fn react<'a>(
        &'a self,
        engine: &'a Engine,
        org: &'a OrgId,
        events: &'a [Event],
    ) -> Local<'a, ()>;
}

/// Org records an instance read, with the org's auth stamp its request read before it.
type OrgCache = Rc<RefCell<HashMap<OrgId, (Option<Vec<u8>>, Option<model::Org>)>>>;

/// One engine instance: ports, configuration and per-instance caches.
pub struct Engine {
    pub ports: Ports,
    pub config: EngineConfig,
    pub memory: Rc<MemoryService>,
    pub schemas: SchemaCache,
    pub usage: UsageCounters,
    /// Set on the copy of the engine a script run calls through: the run's shared budget and
    /// the events its writes saved (reactions wait until the run commits).
    pub(crate) script: Option<Rc<Scope>>,
    /// How many reactions deep this instance's writes are: 0 for a request's own writes, n
    /// inside a reaction that n writes set off.
    pub(crate) reaction_depth: u8,
    /// Decoded SQL tables kept between queries (`config.sql.cache_bytes`).
    pub sql_cache: std::sync::Arc<sql::TableCache>,
    /// Scripts that may run at once in the process; `None`: no cap.
    pub script_slots: Option<ScriptSlots>,
    /// Where scripts' JavaScript runs when not here (natively: a thread per run, so a script's
    /// computing never holds the thread that serves requests); `None`: inline.
    pub script_threads: Option<Rc<dyn ScriptThreads>>,
    /// Where SQL queries compute when not here (natively: a thread per query); `None`: inline.
    pub offload: Option<Rc<dyn Offload>>,
    /// The script runner (see `Scripts`).
    pub scripts: &'static dyn Scripts,
    orgs: OrgCache,
}

impl Engine {
    /// An instance whose usage counts go to the keys of `instance` (see [`UsageCounters`]),
    /// running scripts with `scripts`.
    pub fn assemble(
        ports: Ports,
        config: EngineConfig,
        instance: String,
        scripts: &'static dyn Scripts,
    ) -> Self {
        Self {
            sql_cache: std::sync::Arc::new(sql::TableCache::new(config.sql.cache_bytes)),
            ports,
            config,
            memory: Rc::new(MemoryService::default()),
            schemas: SchemaCache::default(),
            usage: UsageCounters::new(instance),
            script: None,
            reaction_depth: 0,
            script_slots: None,
            script_threads: None,
            offload: None,
            scripts,
            orgs: Rc::default(),
        }
    }

    /// Keeps decoded SQL tables in `cache`, shared with the other instances given the same one
    /// (natively, every worker of the process: a write through one keeps the copies every
    /// worker reads), instead of a cache of its own.
    pub fn with_sql_cache(mut self, cache: std::sync::Arc<sql::TableCache>) -> Self {
        self.sql_cache = cache;
        self
    }

    /// Runs SQL queries' computing through `offload` (natively: on a thread of its own).
    pub fn with_offload(mut self, offload: Rc<dyn Offload>) -> Self {
        self.offload = Some(offload);
        self
    }

    /// Runs scripts' JavaScript on the threads `threads` makes.
    pub fn with_script_threads(mut self, threads: Rc<dyn ScriptThreads>) -> Self {
        self.script_threads = Some(threads);
        self
    }

    /// Caps the scripts running at once (shared by every clone of `slots`).
    pub fn with_script_slots(mut self, slots: ScriptSlots) -> Self {
        self.script_slots = Some(slots);
        self
    }

    /// Chooses the rankings `search_memory` fuses; only the retrieval evaluation changes it.
    #[doc(hidden)]
    pub fn set_ranking(&self, ranking: Ranking) {
        self.memory.set_ranking(ranking);
    }

    /// Sets how many sketches a per-request search ranks in clustered segments
    /// (`PROBE_CODES`); only tests change it, to read a share of a small org's.
    #[doc(hidden)]
    pub fn set_probe_codes(&self, codes: usize) {
        self.memory.set_probe_codes(codes);
    }

    /// The record of the caller's org. An instance keeps the copy it read while the org's
    /// auth stamp is the one it was read under (`lore_directory::stamp`); the caller carries
    /// the stamp its request read, so a change made through any instance or process holds at
    /// the next request, and a warm request reads nothing for it.
    pub async fn org_record(&self, caller: &Caller) -> Result<Option<model::Org>, LoreError> {
        let org = caller.org();
        let stamp = caller.auth_stamp();
        if let Some((seen, record)) = self.orgs.borrow().get(org)
            && seen.as_deref() == stamp
        {
            return Ok(record.clone());
        }
        let record: Option<model::Org> = self.ports.record(&keys::org(org)).await?;
        let mut orgs = self.orgs.borrow_mut();
        if orgs.len() >= 4_096 {
            orgs.clear();
        }
        orgs.insert(org.clone(), (stamp.map(<[u8]>::to_vec), record.clone()));
        Ok(record)
    }

    /// The engine as a script run sees it: the same configuration, `ports` (whose storage
    /// buffers the run's writes), fresh schema and usage caches (a run's uncommitted types
    /// must not be cached), no SQL table cache (its uncommitted rows must not be kept either),
    /// and this instance's memory index unless `private_memory` (once a run has buffered
    /// writes, its searches must not feed the shared index).
    pub fn script_copy(&self, ports: Ports, private_memory: bool) -> Engine {
        let instance = ports.random_hex(6);
        Engine {
            ports,
            config: self.config.clone(),
            memory: if private_memory {
                Rc::new(MemoryService::default())
            } else {
                self.memory.clone()
            },
            schemas: SchemaCache::default(),
            usage: UsageCounters::new(instance),
            script: self.script.clone(),
            reaction_depth: self.reaction_depth,
            sql_cache: std::sync::Arc::new(sql::TableCache::new(0)),
            script_slots: self.script_slots.clone(),
            script_threads: self.script_threads.clone(),
            offload: self.offload.clone(),
            scripts: self.scripts,
            orgs: self.orgs.clone(),
        }
    }

    /// What follows a commit of new events: inside a script run they wait for the run's own
    /// commit; otherwise the behaviors they trigger react, after the answer where the host
    /// has a background port (natively, Workers), else now, before it (Spin). A reaction never
    /// fails the write that set it off.
    pub async fn after_commit(&self, org: &OrgId, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        if let Some(scope) = &self.script {
            scope.events.borrow_mut().extend(events);
            return;
        }
        match &self.ports.background {
            Some(background) => {
                // The task owns a copy of the engine: the same ports and memory index.
                let engine = self.script_copy(self.ports.clone(), false);
                let org = org.clone();
                background.spawn(Box::pin(async move {
                    engine.scripts.react(&engine, &org, &events).await;
                }));
            }
            None => self.scripts.react(self, org, &events).await,
        }
    }

    /// The caller's org's stored memory index as a fresh instance finds it (`lore doctor`).
    pub async fn memory_health(&self, caller: &Caller) -> Result<Value, LoreError> {
        self.memory.health(&self.ports, caller).await
    }

    /// Rebuilds the caller's org's stored memory index from its events (`lore reindex`).
    pub async fn reindex_memory(&self, caller: &Caller) -> Result<Value, LoreError> {
        self.memory.reindex(&self.ports, caller).await
    }

    /// Queues every memory of the caller's org without a vector under the current embedder
    /// (`lore reindex --embeddings`); how many.
    pub async fn queue_embeddings(&self, caller: &Caller) -> Result<usize, LoreError> {
        self.memory.queue_embeddings(&self.ports, caller).await
    }

    /// Stores the caller's org memory index as segments when a write is due (so a fresh
    /// instance loads it in a few reads): from this instance's loaded index, or from the
    /// events past the stored segments when a commit marked the org (`memory/tail.rs`); and
    /// loads the org's index when a search answered without it; and drains the org's embedding
    /// queue when a save or search left memories without vectors (`lore_memory`'s
    /// `embed_queue`). After the answer where the host has a background port (natively,
    /// Workers), else now. Not from inside a script run, whose storage is its overlay.
    pub async fn persist_memory(&self, caller: &Caller) {
        self.persist_memory_of(caller.org(), caller.keys(), Some(caller))
            .await;
    }

    /// [`Self::persist_memory`] for an org without a caller (a webhook delivery): only the
    /// tail write, which needs none.
    pub async fn persist_memory_of(
        &self,
        org: &OrgId,
        keys: &keys::OrgKeys,
        caller: Option<&Caller>,
    ) {
        if self.script.is_some() {
            return;
        }
        let load = caller.filter(|_| self.memory.take_load_mark(org)).cloned();
        let loaded = caller.filter(|_| self.memory.segments_due(org)).cloned();
        let tail = loaded.is_none() && self.memory.take_tail_mark(keys);
        let embed = self.memory.take_embed_mark(org, self.ports.clock.now_ms());
        if load.is_none() && loaded.is_none() && !tail && !embed {
            return;
        }
        let engine = self.script_copy(self.ports.clone(), false);
        let (org, keys) = (org.clone(), keys.clone());
        let work = async move {
            match loaded {
                Some(caller) => engine.memory.persist_segments(&engine.ports, &caller).await,
                None if tail => engine.memory.persist_tail(&engine.ports, &org, &keys).await,
                None => {}
            }
            if let Some(caller) = load {
                engine
                    .memory
                    .load_after_answer(&engine.ports, &caller)
                    .await;
            }
            if embed {
                engine
                    .memory
                    .drain_embeddings(&engine.ports, &org, &keys)
                    .await;
            }
        };
        match &self.ports.background {
            Some(background) => background.spawn(Box::pin(work)),
            None => work.await,
        }
    }

    /// Drains the embedding queue of every org that has one (`lore serve` at start and on its
    /// schedules' timer): what a crash, a restart or a failing embedder left without vectors.
    /// How many orgs it drained.
    pub async fn drain_every_queue(&self) -> usize {
        let orgs = match lore_directory::admin::list_orgs(&self.ports).await {
            Ok(orgs) => orgs,
            Err(e) => {
                tracing::warn!(error = %e, "could not list the orgs for their embedding queues");
                return 0;
            }
        };
        let mut drained = 0;
        for org in orgs {
            let keys = keys::OrgKeys::new(&org.id);
            let queued = self.ports.storage.scan(&keys.embed_queue(), None, 1).await;
            if !queued.is_ok_and(|page| !page.entries.is_empty()) {
                continue;
            }
            self.memory.mark_embed_due(&org.id);
            if self
                .memory
                .take_embed_mark(&org.id, self.ports.clock.now_ms())
            {
                self.memory
                    .drain_embeddings(&self.ports, &org.id, &keys)
                    .await;
                drained += 1;
            }
        }
        drained
    }

    /// `save_memory` and `memory.save`: saves, then reacts to the new events.
    pub async fn save_memory(&self, caller: &Caller, input: SaveInput) -> Result<Value, LoreError> {
        let (out, events) = self.memory.save(&self.ports, caller, input).await?;
        self.after_commit(caller.org(), events).await;
        Ok(out)
    }

    /// Counts a tool or method call in the built-in usage metrics, and writes the buffered
    /// counts when they are due. Counting never fails a request.
    pub async fn count_usage(&self, caller: &Caller, tool: &str, counts: Counts) {
        self.usage
            .count(caller.org(), tool, counts, self.ports.clock.now_ms());
        self.flush_usage_if_due().await;
    }

    /// Writes buffered usage counts if the last write is older than the flush interval.
    pub async fn flush_usage_if_due(&self) {
        if let Err(e) = self.usage.flush_if_due(&self.ports).await {
            tracing::warn!(error = %e, "could not write usage counters");
        }
    }

    /// Writes buffered usage counts now (at shutdown).
    pub async fn flush_usage(&self) {
        if let Err(e) = self.usage.flush(&self.ports).await {
            tracing::warn!(error = %e, "could not write usage counters");
        }
    }
}
