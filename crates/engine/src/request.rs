//! The engine's entry point: one org, one caller, one request. The front authenticates a
//! request, rate-limits it and decodes its transport, then hands the engine an [`OrgRequest`]
//! (a tool call) or a webhook delivery; natively and on Spin that is a call in the same
//! process. Apart from its progress sink the request is data (the caller, the tool, its
//! arguments, where it came from), so on Cloudflare it can be the message to the org's Durable
//! Object, with progress streamed back.

use serde_json::Value;

use lore_directory::Caller;

use crate::instance::Engine;
use crate::sdk::{self, methods::METHODS, nouns, typescript};
use crate::tools::{self, Access, Surface, ToolCall, ToolSpec};
use lore_base::error::LoreError;
use lore_base::ids::OrgId;
use lore_base::model::{Profile, Tier};
use lore_base::reply::{Reply, Text};
use lore_records::actions::{self, Action, Step};
use lore_records::metrics::Counts;
use lore_records::webhooks::{self, Delivered, Delivery};

/// Where a request comes from, which decides the tools it reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// An MCP endpoint serving one profile: that profile's listed tools.
    Listed(Profile),
    /// The REST admin surface (`POST /api/{org}/{name}`): the admin tools and any SDK method
    /// path. Calls that write are recorded as Actions (`source: "api"`).
    Rest,
    /// The org's web app (`/app/{org}`): SDK method paths only. Calls that write are recorded
    /// as Actions (`source: "app"`), as the signed-in person; its calls are not counted in the
    /// org's usage counters, which meter agents and API clients.
    App,
    /// `lore memory run` on the machine that holds the database: every tool and method.
    Local,
}

/// One request to one org, its target resolved once for its reach ([`OrgRequest::new`]).
pub struct OrgRequest<'a> {
    pub caller: &'a Caller,
    /// A tool of the table, or (from [`Reach::Rest`], [`Reach::App`] and [`Reach::Local`]) an
    /// SDK method path such as `entities.list` or `Ticket.create`.
    pub tool: &'a str,
    target: Target,
    pub args: Value,
    pub reach: Reach,
    /// The call's `_meta` (`do` may find its idempotency key there).
    pub meta: Option<&'a Value>,
    /// The URL clients reach this server at, for links in compact results.
    pub base_url: Option<&'a str>,
    /// Told what a script is doing as it runs (each SDK call and sleep, and a heartbeat).
    pub progress: Option<&'a dyn Fn(&str)>,
    /// Called once the call has passed its scope check and its arguments' validation, just
    /// before it runs (the MCP front announces progress then).
    pub admitted: Option<&'a dyn Fn()>,
}

impl<'a> OrgRequest<'a> {
    /// A call of `tool` with `args` from `reach` and nothing from a transport; `Err` if `tool`
    /// is nothing `reach` may call (for [`Reach::Listed`], the error names the tools there).
    pub fn new(
        caller: &'a Caller,
        tool: &'a str,
        args: Value,
        reach: Reach,
    ) -> Result<Self, LoreError> {
        Ok(Self {
            caller,
            tool,
            target: resolve(tool, reach)?,
            args,
            reach,
            meta: None,
            base_url: None,
            progress: None,
            admitted: None,
        })
    }

    /// The tool of the table this request calls; `None` for an SDK method path.
    pub fn spec(&self) -> Option<&'static ToolSpec> {
        match self.target {
            Target::Tool(spec) => Some(spec),
            Target::Method => None,
        }
    }
}

/// What a request may call: a tool of the table, or an SDK method path.
#[derive(Clone, Copy)]
enum Target {
    Tool(&'static ToolSpec),
    Method,
}

impl Engine {
    /// Serves one request: checks the token's scope for the tool it was resolved to,
    /// validates the arguments against the tool's schema (each once), runs it, and counts it
    /// in the org's usage. A tool error is `Err`; the front decides how its transport shows it.
    pub async fn call(&self, request: OrgRequest<'_>) -> Result<Value, LoreError> {
        self.reply(request)
            .await?
            .into_value()
            .map_err(LoreError::from)
    }

    /// [`Engine::call`], answered as the tool made it: a JSON tree, or text a cache kept
    /// serialized (which a transport writes out as it is).
    pub async fn reply(&self, request: OrgRequest<'_>) -> Result<Reply, LoreError> {
        let OrgRequest {
            caller,
            tool: name,
            target,
            args,
            reach,
            meta,
            base_url,
            progress,
            admitted,
        } = request;
        let admit = || {
            if let Some(admitted) = admitted {
                admitted();
            }
        };
        let started = self.ports.clock.now_ms();
        let method = match reach {
            Reach::Rest => Some((method_of(name, &args), "api")),
            Reach::App => Some((name.to_string(), "app")),
            _ => None,
        };
        let outcome = match target {
            Target::Tool(spec) => {
                if spec.access == Access::Write && !caller.scopes().write {
                    Err(LoreError::InsufficientScope(format!(
                        "{name} writes, and this token lacks the mcp:write scope"
                    )))
                } else if let Err(e) = spec.validate(&args) {
                    Err(e)
                } else {
                    admit();
                    spec.run(ToolCall {
                        engine: self,
                        caller,
                        args,
                        meta,
                        base_url,
                        progress,
                    })
                    .await
                }
            }
            Target::Method => {
                admit();
                sdk::call(self, caller, name, args, Tier::Admin)
                    .await
                    .map(|json| Reply::Text(Text::raw(json)))
            }
        };
        // The usage counters meter agents and API clients; the web app's own page reads are
        // not theirs (its writes are audited as actions with source `app`).
        if reach != Reach::App {
            self.count_usage(caller, name, Counts::of(&outcome)).await;
        }
        if let Some((method, source)) = method {
            self.audit(caller, method, source, started, &outcome).await;
        }
        self.persist_memory(caller).await;
        outcome
    }

    /// The TypeScript declarations of `$` for `caller`: only what they may call through
    /// `allowed` (`GET /api/{org}/sdk.d.ts`, `/$.d.ts`).
    pub async fn declarations(&self, caller: &Caller, allowed: Tier) -> Result<String, LoreError> {
        let cx = sdk::spec::Cx {
            engine: self,
            caller,
            allowed,
        };
        let (types, verbs) = nouns::catalog(&cx).await?;
        Ok(typescript::declarations(caller, allowed, &types, &verbs))
    }

    /// A webhook delivery to `feed` of `org`: the one way into an org without a [`Caller`].
    /// The feed's secret is the credential, and it opens only that feed; the body lands as one
    /// event, and reactions follow as they do for any write.
    pub async fn deliver(
        &self,
        org: &str,
        feed: &str,
        delivery: Delivery<'_>,
    ) -> Result<Delivered, LoreError> {
        let org = OrgId::parse(org)
            .map_err(|_| LoreError::not_found(format!("webhook feed {feed:?} in org {org:?}")))?;
        let (delivered, events) =
            webhooks::deliver(&self.ports, &self.memory, &org, feed, delivery).await?;
        self.after_commit(&org, events).await;
        self.persist_memory_of(&org, &lore_base::keys::OrgKeys::new(&org), None)
            .await;
        Ok(delivered)
    }

    /// Records a REST or web app call that writes as an Action (`source`: `api` or `app`);
    /// refusals are not.
    async fn audit(
        &self,
        caller: &Caller,
        method: String,
        source: &str,
        started: i64,
        outcome: &Result<Reply, LoreError>,
    ) {
        let refused = matches!(
            outcome,
            Err(LoreError::Forbidden(_)
                | LoreError::NeedsWrite(_)
                | LoreError::NeedsAdmin(_)
                | LoreError::InsufficientScope(_)
                | LoreError::NotFound { .. }
                | LoreError::InvalidArgument { .. })
        );
        if !writes(&method) || refused {
            return;
        }
        let elapsed = u64::try_from(self.ports.clock.now_ms() - started).unwrap_or(0);
        let action = Action {
            id: String::new(),
            principal: String::new(),
            source: source.into(),
            mode: "try".into(),
            dry_run: false,
            status: if outcome.is_ok() { "ok" } else { "error" }.into(),
            code_hash: None,
            steps: vec![Step {
                method,
                ok: outcome.is_ok(),
                error_code: outcome.as_ref().err().map(|e| e.code().to_string()),
                elapsed_ms: elapsed,
                mode: None,
                attempts: None,
                replayed: false,
            }],
            error: outcome.as_ref().err().map(LoreError::to_json),
            behavior: None,
            trigger_event: None,
            depth: None,
            operation: None,
            sends: Vec::new(),
            caps_used: Vec::new(),
            created_at: lore_records::now_text(&self.ports),
        };
        if let Err(e) = actions::record(&self.ports, caller, action).await {
            tracing::warn!(error = %e, "could not record the action");
        }
    }
}

/// The tool `name` of `profile`'s `tools/list`; the error names the tools there, and the
/// other profile if the tool is one of its.
fn listed_tool(name: &str, profile: Profile) -> Result<&'static ToolSpec, LoreError> {
    let spec = tools::find(name);
    if let Some(spec) = spec.filter(|t| t.profile() == Some(profile)) {
        return Ok(spec);
    }
    let known: Vec<&str> = tools::listed(profile).map(|t| t.name).collect();
    let elsewhere = spec
        .and_then(|t| t.profile())
        .map(|other| {
            format!(
                " ({name} is a tool of the other profile: connect with ?profile={})",
                other.as_str()
            )
        })
        .unwrap_or_default();
    Err(LoreError::invalid(
        "name",
        format!(
            "Unknown tool: {name}. Available tools: {}{elsewhere}",
            known.join(", ")
        ),
    ))
}

/// What `name` calls from `reach`, or why it calls nothing: the one place a request's
/// target is found.
fn resolve(name: &str, reach: Reach) -> Result<Target, LoreError> {
    let spec = tools::find(name);
    match (reach, spec) {
        (Reach::Listed(profile), _) => listed_tool(name, profile).map(Target::Tool),
        (Reach::Rest, Some(spec)) if matches!(spec.surface, Surface::Admin(_)) => {
            Ok(Target::Tool(spec))
        }
        (Reach::Local, Some(spec)) => Ok(Target::Tool(spec)),
        (Reach::Rest | Reach::Local | Reach::App, _) if name.contains('.') => Ok(Target::Method),
        (Reach::App, _) => Err(LoreError::not_found(format!(
            "SDK method {name:?} (the web app calls SDK method paths such as memory.list)"
        ))),
        (Reach::Rest, _) => {
            let tools: Vec<&str> = tools::admin_tools().map(|t| t.name).collect();
            Err(LoreError::not_found(format!(
                "admin tool {name:?} (tools: {}; or an SDK method path such as entities.list)",
                tools.join(", ")
            )))
        }
        (Reach::Local, None) => {
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
}

/// The SDK method a REST call runs: the path itself, or what an admin tool maps it to.
fn method_of(name: &str, args: &Value) -> String {
    match tools::find(name).map(|t| t.surface) {
        Some(Surface::Admin(tools::Target::Method(path))) => path.to_string(),
        Some(Surface::Admin(tools::Target::Namespace(ns))) => {
            match args.get("action").and_then(Value::as_str) {
                Some(action) => format!("{ns}.{action}"),
                None => name.to_string(),
            }
        }
        _ => name.to_string(),
    }
}

/// Whether a method changes something (and so is audited as an Action).
fn writes(path: &str) -> bool {
    if let Some(m) = METHODS.iter().find(|m| m.is(path)) {
        return m.tier >= Tier::Write || m.is("operations.run");
    }
    // Noun verbs other than get and list write; custom verbs may.
    path.contains('.') && !matches!(path.rsplit('.').next(), Some("get" | "list"))
}
