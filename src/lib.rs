//! lore's core: every behaviour of the product, with no I/O of its own. It reaches storage,
//! time, randomness, embeddings and the network only through [`ports`]; the native binary
//! (`src/native/`, feature `native`) and the edge adapters implement them.
//!
//! [`Lore::handle`] takes an HTTP request and returns the response: that is the whole surface
//! an adapter has to connect.

pub use lore_base::{error, ids, keys, model, ports, ratelimit, schema, storage};
pub use lore_embed as embed;

pub mod admin;
pub mod api;
pub mod auth;
pub mod compact;
pub mod config;
pub mod hooks;
pub mod mcp;
pub mod memory;
pub mod oauth;
pub mod operator;
pub mod records;
pub mod request_log;
pub mod sandbox;
pub mod sdk;
pub mod sql;
pub mod tools;

#[cfg(feature = "native")]
#[allow(clippy::disallowed_methods)]
pub mod native;

use http::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};

use std::collections::HashMap;

use auth::Caller;
use error::LoreError;
use ids::OrgId;
use memory::MemoryService;
use ports::Ports;

pub use config::{Config, DEFAULT_MAX_BODY};

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// One core instance: ports, configuration and per-instance caches.
pub struct Lore {
    pub ports: Ports,
    pub config: Config,
    pub(crate) memory: std::rc::Rc<MemoryService>,
    pub(crate) schemas: records::types::SchemaCache,
    pub(crate) usage: records::metrics::UsageCounters,
    /// Set on the copy of the core a script run calls through: the run's shared budget and the
    /// events its writes saved (reactions wait until the run commits).
    pub(crate) script: Option<std::rc::Rc<sandbox::Scope>>,
    /// How many reactions deep this core's writes are: 0 for a request's own writes, n inside
    /// a reaction that n writes set off (see `sandbox::reactions`).
    pub(crate) reaction_depth: u8,
    /// Decoded SQL tables kept between queries (`config.sql.cache_bytes`).
    pub(crate) sql_cache: std::rc::Rc<sql::TableCache>,
    /// Where rate-limit buckets live; `None`: no limits.
    pub(crate) limiter: Option<std::rc::Rc<dyn ratelimit::RateLimiter>>,
    /// Scripts that may run at once in the process; `None`: no cap.
    pub(crate) script_slots: Option<ratelimit::ScriptSlots>,
    /// Where scripts' JavaScript runs when not here (natively: a thread per run, so a script's
    /// computing never holds the thread that serves requests); `None`: inline.
    pub(crate) script_threads: Option<std::rc::Rc<dyn sandbox::remote::ScriptThreads>>,
    /// Where SQL queries compute when not here (natively: a thread per query); `None`: inline.
    pub(crate) offload: Option<std::rc::Rc<dyn ports::Offload>>,
    /// Org records read recently (their rate limits), for [`ORG_TTL_MS`].
    pub(crate) orgs: OrgCache,
}

/// Org records an instance read, with when it read them.
pub(crate) type OrgCache =
    std::rc::Rc<std::cell::RefCell<HashMap<OrgId, (i64, Option<model::Org>)>>>;

/// How long an instance trusts an org record it read for rate limits: a change of an org's
/// limits made through another instance applies within this time.
pub const ORG_TTL_MS: i64 = 5_000;

impl Lore {
    /// Chooses the rankings `search_memory` fuses; only the retrieval evaluation changes it.
    #[doc(hidden)]
    pub fn set_ranking(&self, ranking: memory::Ranking) {
        self.memory.set_ranking(ranking);
    }

    pub fn new(ports: Ports, config: Config) -> Self {
        let instance = ports.random_hex(6);
        Self::with_usage_instance(ports, config, instance)
    }

    /// An instance whose usage counts go to the keys of `instance` (see
    /// [`records::metrics::UsageCounters`]). Hosts that start an instance per request (Spin)
    /// pass one of a few fixed names, so the counter keys stay bounded; instances sharing a
    /// name add to the same keys under preconditions.
    pub fn with_usage_instance(ports: Ports, config: Config, instance: String) -> Self {
        Self {
            sql_cache: std::rc::Rc::new(sql::TableCache::new(config.sql.cache_bytes)),
            ports,
            config,
            memory: std::rc::Rc::new(MemoryService::default()),
            schemas: records::types::SchemaCache::default(),
            usage: records::metrics::UsageCounters::new(instance),
            script: None,
            reaction_depth: 0,
            limiter: None,
            script_slots: None,
            script_threads: None,
            offload: None,
            orgs: std::rc::Rc::default(),
        }
    }

    /// Runs SQL queries' computing through `offload` (natively: on a thread of its own).
    pub fn with_offload(mut self, offload: std::rc::Rc<dyn ports::Offload>) -> Self {
        self.offload = Some(offload);
        self
    }

    /// Runs scripts' JavaScript on the threads `threads` makes (see [`sandbox::remote`]).
    pub fn with_script_threads(
        mut self,
        threads: std::rc::Rc<dyn sandbox::remote::ScriptThreads>,
    ) -> Self {
        self.script_threads = Some(threads);
        self
    }

    /// Caps the scripts running at once (shared by every clone of `slots`).
    pub fn with_script_slots(mut self, slots: ratelimit::ScriptSlots) -> Self {
        self.script_slots = Some(slots);
        self
    }

    /// Enforces `config.rate_limits` with buckets in `limiter` (the rate-limiter port).
    pub fn with_rate_limiter(mut self, limiter: std::rc::Rc<dyn ratelimit::RateLimiter>) -> Self {
        self.limiter = Some(limiter);
        self
    }

    /// The org's record, read at most every [`ORG_TTL_MS`] by this instance.
    pub(crate) async fn org_record(&self, org: &OrgId) -> Result<Option<model::Org>, LoreError> {
        let now = self.ports.clock.now_ms();
        if let Some((at, org)) = self.orgs.borrow().get(org)
            && now - at < ORG_TTL_MS
        {
            return Ok(org.clone());
        }
        let record: Option<model::Org> = self.ports.record(&keys::org(org)).await?;
        let mut orgs = self.orgs.borrow_mut();
        if orgs.len() >= 4_096 {
            orgs.clear();
        }
        orgs.insert(org.clone(), (now, record.clone()));
        Ok(record)
    }

    /// Forgets a cached org record (after this instance changed it).
    pub(crate) fn forget_org(&self, org: &OrgId) {
        self.orgs.borrow_mut().remove(org);
    }

    /// Takes one request from the caller's token and org buckets; over a limit, the error
    /// names it.
    async fn rate_check(&self, caller: &Caller) -> Result<(), LoreError> {
        let Some(limiter) = &self.limiter else {
            return Ok(());
        };
        let own = self
            .org_record(caller.org())
            .await?
            .and_then(|o| o.rate_limits);
        let limits = self.config.rate_limits.for_org(own);
        let now = self.ports.clock.now_ms();
        let token = caller
            .token_id()
            .map_or_else(|| caller.principal().id.clone(), str::to_string);
        let named = [
            ("token", format!("tok/{token}"), limits.token_per_minute),
            (
                "org",
                format!("org/{}", caller.org()),
                limits.org_per_minute,
            ),
        ];
        let named: Vec<_> = named.into_iter().filter(|(_, _, r)| *r > 0).collect();
        if named.is_empty() {
            return Ok(());
        }
        let buckets: Vec<(String, u32)> = named.iter().map(|(_, k, r)| (k.clone(), *r)).collect();
        let decision = limiter.take(caller.org().as_str(), &buckets, now).await;
        if let Some((i, retry_after_ms)) = decision.refused {
            return Err(LoreError::RateLimited {
                limit: named[i].0,
                per_minute: named[i].2,
                retry_after_ms,
            });
        }
        Ok(())
    }

    /// The core as a script run sees it (`sandbox`): the same configuration, `ports` (whose
    /// storage buffers the run's writes), fresh schema and usage caches (a run's uncommitted
    /// types must not be cached), no SQL table cache (its uncommitted rows must not be kept
    /// either), and this instance's memory index unless `private_memory` (once a run has
    /// buffered writes, its searches must not feed the shared index).
    pub(crate) fn script_copy(&self, ports: Ports, private_memory: bool) -> Lore {
        let instance = ports.random_hex(6);
        Lore {
            ports,
            config: self.config.clone(),
            memory: if private_memory {
                std::rc::Rc::new(MemoryService::default())
            } else {
                self.memory.clone()
            },
            schemas: records::types::SchemaCache::default(),
            usage: records::metrics::UsageCounters::new(instance),
            script: self.script.clone(),
            reaction_depth: self.reaction_depth,
            sql_cache: std::rc::Rc::new(sql::TableCache::new(0)),
            limiter: self.limiter.clone(),
            script_slots: self.script_slots.clone(),
            script_threads: self.script_threads.clone(),
            offload: self.offload.clone(),
            orgs: self.orgs.clone(),
        }
    }

    /// The decoded SQL tables this instance keeps between queries.
    pub fn sql_cache(&self) -> &sql::TableCache {
        &self.sql_cache
    }

    /// What follows a commit of new events: inside a script run they wait for the run's own
    /// commit; otherwise the behaviors they trigger react, after the answer where the host
    /// has a background port (natively), else now, before it (the edge). A reaction never
    /// fails the write that set it off.
    pub(crate) async fn after_commit(&self, org: &OrgId, events: Vec<memory::event::Event>) {
        if events.is_empty() {
            return;
        }
        if let Some(scope) = &self.script {
            scope.events.borrow_mut().extend(events);
            return;
        }
        match &self.ports.background {
            Some(background) => {
                // The task owns a copy of the core: the same ports and memory index.
                let core = self.script_copy(self.ports.clone(), false);
                let org = org.clone();
                background.spawn(Box::pin(async move {
                    sandbox::reactions::react(&core, &org, &events).await;
                }));
            }
            None => sandbox::reactions::react(self, org, &events).await,
        }
    }

    /// Makes the calls a committed `do` run queued in `send` mode: natively after the answer
    /// (the background port), elsewhere before it.
    pub(crate) async fn dispatch_sends(
        &self,
        caller: &Caller,
        action_key: String,
        sends: Vec<sandbox::modes::Queued>,
    ) {
        match &self.ports.background {
            Some(background) => {
                let core = self.script_copy(self.ports.clone(), false);
                let caller = caller.clone();
                background.spawn(Box::pin(async move {
                    sandbox::modes::dispatch_sends(&core, &caller, &action_key, sends).await;
                }));
            }
            None => sandbox::modes::dispatch_sends(self, caller, &action_key, sends).await,
        }
    }

    /// `save_memory` and `memory.save`: saves, then reacts to the new events.
    pub(crate) async fn save_memory(
        &self,
        caller: &Caller,
        input: memory::SaveInput,
    ) -> Result<Value, LoreError> {
        let (out, events) = self.memory.save(&self.ports, caller, input).await?;
        self.after_commit(caller.org(), events).await;
        Ok(out)
    }

    /// The caller of a request: a verified bearer token, or the local owner when the server
    /// runs without auth. On failure, also says whether a token was sent (for the challenge).
    pub async fn authenticate(
        &self,
        headers: &http::HeaderMap,
        path_org: Option<&str>,
    ) -> Result<Caller, (LoreError, bool)> {
        let credential = match mcp::headers::get(headers, "authorization") {
            Some(value) => {
                // The scheme name is case-insensitive (RFC 7235).
                let token = value
                    .split_once(' ')
                    .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
                    .map(|(_, token)| token.trim())
                    .ok_or_else(|| {
                        (
                            LoreError::Unauthorized(
                                "use the Authorization: Bearer <token> scheme".into(),
                            ),
                            true,
                        )
                    })?;
                auth::verify_token(&self.ports, token)
                    .await
                    .map_err(|e| (e, true))?
            }
            None if self.config.no_auth => auth::local_owner(&self.ports)
                .await
                .map_err(|e| (e, false))?,
            None => {
                return Err((
                    LoreError::Unauthorized(
                        "this server needs Authorization: Bearer <token>; create one with `lore token create`".into(),
                    ),
                    false,
                ));
            }
        };
        if let Some(audience) = credential.token.as_ref().and_then(|t| t.audience.as_ref()) {
            let base = oauth::base_url(&self.config, headers);
            if !oauth::audience_allows(audience, base.as_deref(), path_org) {
                return Err((
                    LoreError::Unauthorized(format!(
                        "the token was issued for {audience}, not for this resource; sign in again for this URL"
                    )),
                    true,
                ));
            }
        }
        let caller =
            auth::resolve_caller(&self.ports, credential, path_org, &self.config.default_org)
                .await
                .map_err(|e| (e, true))?;
        self.rate_check(&caller).await.map_err(|e| (e, true))?;
        Ok(caller)
    }

    /// Counts a tool or method call in the built-in usage metrics, and writes the buffered
    /// counts when they are due. Counting never fails a request.
    pub async fn count_usage(&self, caller: &Caller, tool: &str, ok: bool) {
        self.usage
            .count(caller.org(), tool, ok, self.ports.clock.now_ms());
        if let Err(e) = self.usage.flush_if_due(&self.ports).await {
            tracing::warn!(error = %e, "could not write usage counters");
        }
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

    pub fn server_info(&self) -> Value {
        json!({ "name": "lore", "title": "lore", "version": VERSION })
    }

    /// Serves one HTTP request.
    pub async fn handle(&self, request: Request<Vec<u8>>) -> Response<Vec<u8>> {
        self.serve(request, None).await
    }

    /// Serves one HTTP request, streaming the reply through `out` where the reply is long
    /// (a script's `tools/call` with a progress token, to a client that reads SSE: its
    /// progress goes out as it happens). If `out` was started, the response returned is only
    /// the rest of the body; otherwise it is the whole reply and `out` was not used.
    pub async fn handle_streaming(
        &self,
        request: Request<Vec<u8>>,
        out: std::rc::Rc<dyn mcp::reply::ReplyStream>,
    ) -> Response<Vec<u8>> {
        self.serve(request, Some(out)).await
    }

    async fn serve(
        &self,
        mut request: Request<Vec<u8>>,
        out: Option<std::rc::Rc<dyn mcp::reply::ReplyStream>>,
    ) -> Response<Vec<u8>> {
        let started = self.ports.clock.now_ms();
        let log = request_log::RequestLog::start(&request, || self.ports.random_hex(8));
        request.extensions_mut().insert(log.clone());
        let method = request.method().to_string();
        let path: String = request.uri().path().chars().take(200).collect();
        let mut response = self.route(request, out).await;
        if let Ok(value) = http::HeaderValue::from_str(&log.id) {
            response
                .headers_mut()
                .insert(request_log::REQUEST_ID_HEADER, value);
        }
        let duration_ms = self.ports.clock.now_ms() - started;
        let line = log.emit(&method, &path, response.status().as_u16(), duration_ms);
        response.extensions_mut().insert(line);
        response
    }

    async fn route(
        &self,
        request: Request<Vec<u8>>,
        out: Option<std::rc::Rc<dyn mcp::reply::ReplyStream>>,
    ) -> Response<Vec<u8>> {
        let path = request.uri().path().to_string();
        if let Some(name) = mcp::headers::repeated_singleton(request.headers()) {
            return json_response(
                StatusCode::BAD_REQUEST,
                json!({ "error": { "code": "invalid_request", "message": format!("the request has more than one {name} header; send it once") } }),
            );
        }
        let secret = self.config.operator_secret.as_deref();
        if let Some(response) = operator::handle(&self.ports, secret, &request).await {
            return response;
        }
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        if let Some(response) = oauth::handle(self, &request).await {
            return response;
        }
        match segments.as_slice() {
            ["mcp"] => mcp::handle(self, request, None, out).await,
            ["mcp", org] => mcp::handle(self, request, Some(org), out).await,
            ["api", org, name] => api::handle(self, &request, org, name).await,
            ["hooks", org, feed] => hooks::handle(self, &request, org, feed).await,
            ["healthz"] if request.method() == Method::GET => json_response(
                StatusCode::OK,
                json!({ "status": "ok", "version": VERSION }),
            ),
            _ => json_response(
                StatusCode::NOT_FOUND,
                json!({ "error": { "code": "not_found", "message": format!("no route for {} {path}; MCP is served at /mcp", request.method()) } }),
            ),
        }
    }

    /// The caller for local, tokenless use: the local owner in `org`.
    /// Without `org`: the org `lore init` created, else the configured default org.
    pub async fn local_caller(&self, org: Option<&str>) -> Result<Caller, LoreError> {
        let credential = auth::local_owner(&self.ports).await?;
        let mut default = self.config.default_org.clone();
        if org.is_none()
            && let Some(bytes) = self.ports.storage.get(keys::LOCAL_ORG).await?
            && let Ok(first) = OrgId::parse(&String::from_utf8_lossy(&bytes))
        {
            default = first;
        }
        auth::resolve_caller(&self.ports, credential, org, &default).await
    }

    /// Validates and runs a tool or an SDK method: what `lore memory run` does locally. It
    /// takes every tool of the table (both profiles and the admin tools) and any SDK method
    /// path (`entities.create`, `Ticket.list`).
    pub async fn call_tool(
        &self,
        caller: &Caller,
        name: &str,
        args: Value,
    ) -> Result<Value, LoreError> {
        if let Some(tool) = tools::find(name) {
            return tool.call(tools::ToolCall::new(self, caller, args)).await;
        }
        if name.contains('.') {
            let json = sdk::call(self, caller, name, args, sdk::Tier::Admin).await?;
            return Ok(serde_json::from_str(json.get())?);
        }
        let known: Vec<&str> = tools::TOOLS.iter().map(|t| t.name).collect();
        Err(LoreError::invalid(
            "tool",
            format!(
                "unknown tool {name:?}; available: {}, or an SDK method path such as entities.list",
                known.join(", ")
            ),
        ))
    }
}

/// A JSON response with its status and `Content-Type: application/json`.
pub fn json_response(status: StatusCode, body: Value) -> Response<Vec<u8>> {
    let mut response = Response::new(serde_json::to_vec(&body).unwrap_or_default());
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}
