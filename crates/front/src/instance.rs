//! One front instance ([`Lore`]): the org engine it hands requests to, the ports, the
//! configuration, and where rate-limit buckets live. [`Lore::handle`] (in `routes`) is the
//! whole surface an adapter connects.

use std::rc::Rc;

use serde_json::{Value, json};

use lore_directory::Caller;
use lore_engine::{Engine, EngineConfig};
use lore_engine::{OrgRequest, Reach};

use crate::config::Config;
use lore_base::error::LoreError;
use lore_base::ports::Ports;
use lore_base::ratelimit::{self, RateLimiter, ScriptSlots};

/// What a `tools/list` result depends on: the endpoint's profile and the protocol era
/// (`true`: 2026-07-28).
pub(crate) type ListKey = (lore_base::model::Profile, bool);

/// One instance of lore: the front and the engine it serves.
pub struct Lore {
    pub config: Config,
    pub engine: Engine,
    /// Where rate-limit buckets live; `None`: no limits.
    pub(crate) limiter: Option<Rc<dyn RateLimiter>>,
    /// A store orgs lived in before (a Workers deployment's D1 rows from before org objects),
    /// which the operator route `org-move-in` copies an org's keys from.
    pub(crate) former_store: Option<Rc<dyn lore_base::storage::Storage>>,
    /// Callers resolved lately, by token (`lore_directory::callers`).
    pub(crate) callers: lore_directory::callers::CallerCache,
    /// The serialized `tools/list` result per profile and era (`mcp::methods`).
    pub(crate) listed: std::cell::RefCell<Vec<(ListKey, Rc<[u8]>)>>,
    /// Ids for requests that bring none.
    pub(crate) request_ids: crate::request_log::RequestIds,
}

impl Lore {
    pub fn new(ports: Ports, config: Config) -> Self {
        let instance = ports.random_hex(6);
        Self::with_usage_instance(ports, config, instance)
    }

    /// An instance whose usage counts go to the keys of `instance` (see
    /// [`lore_records::metrics::UsageCounters`]). Hosts that start an instance per
    /// request (Spin) pass one of a few fixed names, so the counter keys stay bounded;
    /// instances sharing a name add to the same keys under preconditions.
    pub fn with_usage_instance(mut ports: Ports, config: Config, instance: String) -> Self {
        // Every outbound request of this instance passes the guard (`crate::outbound`).
        ports.http = ports.http.take().map(|inner| {
            Rc::new(crate::outbound::Guarded::new(
                inner,
                config.outbound.clone(),
            )) as Rc<dyn lore_base::ports::HttpClient>
        });
        let engine_config = EngineConfig {
            sql: config.sql.clone(),
            rate_limits: config.rate_limits,
            scripts: config.scripts.clone(),
        };
        Self {
            request_ids: crate::request_log::RequestIds::new(&ports),
            engine: Engine::new(ports, engine_config, instance),
            config,
            limiter: None,
            former_store: None,
            callers: lore_directory::callers::CallerCache::new(),
            listed: std::cell::RefCell::new(Vec::new()),
        }
    }

    /// Keeps decoded SQL tables in `cache`, shared with every instance given the same one.
    pub fn with_sql_cache(mut self, cache: std::sync::Arc<lore_records::sql::TableCache>) -> Self {
        self.engine = self.engine.with_sql_cache(cache);
        self
    }

    /// Runs SQL queries' computing through `offload` (natively: on a thread of its own).
    pub fn with_offload(mut self, offload: Rc<dyn lore_base::ports::Offload>) -> Self {
        self.engine = self.engine.with_offload(offload);
        self
    }

    /// Runs scripts' JavaScript on the threads `threads` makes.
    pub fn with_script_threads(mut self, threads: Rc<dyn lore_engine::ScriptThreads>) -> Self {
        self.engine = self.engine.with_script_threads(threads);
        self
    }

    /// Caps the scripts running at once (shared by every clone of `slots`).
    pub fn with_script_slots(mut self, slots: ScriptSlots) -> Self {
        self.engine = self.engine.with_script_slots(slots);
        self
    }

    /// Names the store orgs lived in before (see `former_store`).
    pub fn with_former_store(mut self, store: Rc<dyn lore_base::storage::Storage>) -> Self {
        self.former_store = Some(store);
        self
    }

    /// Enforces `config.rate_limits` with buckets in `limiter` (the rate-limiter port).
    pub fn with_rate_limiter(mut self, limiter: Rc<dyn ratelimit::RateLimiter>) -> Self {
        self.limiter = Some(limiter);
        self
    }

    /// Validates and runs a tool or an SDK method for `caller`, from the machine that holds
    /// the database: what `lore memory run` does locally. It takes every tool of the table
    /// (both profiles and the admin tools) and any SDK method path (`entities.create`,
    /// `Ticket.list`).
    pub async fn call_tool(
        &self,
        caller: &Caller,
        name: &str,
        args: Value,
    ) -> Result<Value, LoreError> {
        self.engine
            .call(OrgRequest::new(caller, name, args, Reach::Local)?)
            .await
    }

    /// Marks this instance as serving one request and ending (Spin): memory searches answer
    /// from the org's stored index segments instead of loading its index.
    pub fn serving_one_request(self) -> Self {
        self.engine.memory.set_per_request(true);
        self
    }

    /// Each org's stored memory index as a fresh instance finds it (`lore doctor`, the
    /// operator route `doctor`), or one org's, after `work` (`lore reindex`, with or without
    /// `--embeddings`). An org whose owner is gone is reported, not skipped silently.
    pub async fn memory_index(
        &self,
        org: Option<&str>,
        work: IndexWork,
    ) -> Result<Value, LoreError> {
        let orgs = match org {
            Some(name) => {
                let id = lore_base::ids::OrgId::parse(name)?;
                let org: lore_base::model::Org = self
                    .ports()
                    .record(&lore_base::keys::org(&id))
                    .await?
                    .ok_or_else(|| LoreError::not_found(format!("org {id}")))?;
                vec![org]
            }
            None => lore_directory::admin::list_orgs(self.ports()).await?,
        };
        let mut out = Vec::with_capacity(orgs.len());
        for org in orgs {
            let caller =
                lore_directory::caller::member_now(self.ports(), &org.id, &org.owner).await;
            let report = match (caller, work) {
                (Ok(caller), IndexWork::Check) => self.engine.memory_health(&caller).await,
                (Ok(caller), IndexWork::Rebuild) => self.engine.reindex_memory(&caller).await,
                (Ok(caller), IndexWork::Embeddings) => {
                    match self.engine.queue_embeddings(&caller).await {
                        Ok(queued) => self.engine.memory_health(&caller).await.map(|mut r| {
                            r["vectors"]["queued_now"] = json!(queued);
                            r
                        }),
                        Err(e) => Err(e),
                    }
                }
                (Err(e), _) => Err(e),
            };
            out.push(report.unwrap_or_else(
                |e| json!({ "org": org.id, "healthy": false, "error": e.to_string() }),
            ));
        }
        let healthy = out.iter().all(|r| r["healthy"] == true);
        Ok(json!({ "healthy": healthy, "orgs": out }))
    }

    /// Runs `org`'s behaviors' schedules due at `now_ms` and says when the next is due (an
    /// org object's alarm; see `lore_engine::schedules`).
    pub async fn run_schedules(
        &self,
        org: &lore_base::ids::OrgId,
        now_ms: i64,
    ) -> Result<lore_engine::schedules::OrgPass, LoreError> {
        lore_engine::schedules::run_due(&self.engine, org, now_ms).await
    }

    /// A pass over every org with schedules (`lore serve`'s timer, the operator route
    /// `schedules`), at `now_ms`; with `adopt`, every org's schedules saved before schedules
    /// ran are given their first run. Its report: orgs visited, runs made, orgs woken, errors.
    pub async fn schedule_pass(&self, now_ms: i64, adopt: bool) -> Value {
        lore_engine::schedules::run_every_org(&self.engine, now_ms, adopt).await
    }

    /// Drains every org's embedding queue (`lore serve` at start and on its schedules' timer);
    /// how many orgs had one.
    pub async fn embedding_pass(&self) -> usize {
        self.engine.drain_every_queue().await
    }

    /// The ports this instance reaches the world through (the engine's).
    pub fn ports(&self) -> &Ports {
        &self.engine.ports
    }

    pub fn server_info(&self) -> Value {
        server_info()
    }

    /// [`Lore::server_info`], serialized once per process.
    pub fn server_info_bytes(&self) -> &'static [u8] {
        static BYTES: std::sync::LazyLock<Vec<u8>> = std::sync::LazyLock::new(|| {
            serde_json::to_vec(&server_info()).expect("the server's info serializes")
        });
        &BYTES
    }
}

/// The server's name and version, as MCP's `serverInfo`.
fn server_info() -> Value {
    json!({ "name": "lore", "title": "lore", "version": lore_base::VERSION })
}

/// What [`Lore::memory_index`] does to each org's memory index before it reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexWork {
    /// Nothing (`lore doctor`).
    Check,
    /// Rebuilds the stored segments from the events (`lore reindex`).
    Rebuild,
    /// Queues every memory without a vector under the current embedder, for the background
    /// embedder (`lore reindex --embeddings`).
    Embeddings,
}
