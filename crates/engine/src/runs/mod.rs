//! Script runs (SPEC 4): `query_sdk`, `run_sdk`, `do`, script operations and behaviors'
//! reactions each run a short TypeScript script on the machine of `lore-sandbox` (a fresh Boa
//! realm with no host access but the SDK bridge), as one Action.
//!
//! - `dispatch` is the run's host: each SDK call the script makes, recorded for its Action;
//! - [`overlay`] buffers a run's writes and commits them as one batch;
//! - [`modes`] dispatches a `do` program's calls in `try`, `send` or `do` mode;
//! - [`reactions`] runs behaviors' reactions once the events that trigger them commit;
//! - [`schedules`] runs behaviors' schedule triggers when they are due;
//! - this module is the tools' surface, the run's bookkeeping and its Action.
//!
//! Every SDK call goes through [`crate::sdk::call`] with the surface's tier (`query_sdk`:
//! read; `run_sdk`: admin, which `authorize` narrows to the caller's role), against a copy of
//! the core whose storage is the run's [`overlay::Overlay`]. A run that succeeds commits its
//! writes and its Action in one batch; a run that throws or reaches a cap writes only its
//! Action. A dry run dispatches reads and answers writes with a placeholder, listing them in
//! `side_effect_preview`.
//!
//! The same runner runs script operations (`run_operation`; called from a running script
//! they nest in its overlay and budget, see `Scope`) and reactions. A run given a progress
//! sink reports each SDK call and sleep it starts and a heartbeat while it waits.

mod dispatch;
pub mod modes;
pub mod overlay;
pub mod reactions;
mod run;
pub mod schedules;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use lore_directory::Caller;
use lore_sandbox::caps::ScriptCaps;

use crate::instance::{Engine, Local, Scripts};
use lore_base::error::LoreError;
use lore_base::ids::OrgId;
use lore_base::model::{Mode, Tier};
use lore_memory::event::Event;
use lore_records::operations::Operation;
use run::{Origin, Spec, run_script};

/// `query_sdk` arguments.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QuerySdk {
    /// TypeScript: the body of an async function with `ctx`, `client` and `$` in scope
    /// (`return await client.entities.list({})`), or a module with
    /// `export default async (ctx, client) => ...`. Only read methods may be called.
    #[schemars(length(min = 1, max = 262144))]
    pub code: String,
    /// Available to the script as `ctx.args`.
    pub args: Option<Value>,
}

/// `run_sdk` arguments.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunSdk {
    /// TypeScript, as for query_sdk; read, write and (for admins) admin methods may be called.
    /// Writes are committed together when the script succeeds; a throw or a cap writes nothing.
    #[schemars(length(min = 1, max = 262144))]
    pub code: String,
    /// Available to the script as `ctx.args`.
    pub args: Option<Value>,
    /// Run reads, answer writes with a placeholder, write nothing, and return the writes in
    /// side_effect_preview.
    #[serde(default)]
    pub dry_run: bool,
}

/// Which tool runs the script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    Query,
    Run,
}

impl Surface {
    fn tier(self) -> Tier {
        match self {
            Self::Query => Tier::Read,
            Self::Run => Tier::Admin,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Self::Query => "query_sdk",
            Self::Run => "run_sdk",
        }
    }
}

impl<'c> Spec<'c> {
    /// A script called through a tool surface (`query_sdk` or `run_sdk`), with the engine's
    /// caps.
    fn of(
        engine: &Engine,
        surface: Surface,
        code: &'c str,
        args: Option<Value>,
        dry_run: bool,
    ) -> Self {
        Self {
            source: surface.name(),
            tier: surface.tier(),
            code,
            args,
            dry_run,
            caps: engine.config.scripts.clone(),
            origin: Origin::default(),
            progress: None,
            modes: None,
        }
    }
}

/// Runs a script for `caller` through `surface`; `Ok` is the tool's structured result.
pub async fn run(
    engine: &Engine,
    caller: &Caller,
    surface: Surface,
    code: &str,
    args: Option<Value>,
    dry_run: bool,
) -> Result<Value, LoreError> {
    run_with_caps(
        engine,
        caller,
        surface,
        code,
        args,
        dry_run,
        engine.config.scripts.clone(),
    )
    .await
}

/// [`run`], telling `progress` what the script is doing as it runs (MCP progress
/// notifications).
pub async fn run_with_progress(
    engine: &Engine,
    caller: &Caller,
    surface: Surface,
    code: &str,
    args: Option<Value>,
    dry_run: bool,
    progress: Option<&dyn Fn(&str)>,
) -> Result<Value, LoreError> {
    let spec = Spec {
        progress,
        ..Spec::of(engine, surface, code, args, dry_run)
    };
    run_script(engine, caller, spec).await
}

/// Runs a compact-profile `do` program: the body of an async function with `$` in scope,
/// one Action, each call that takes effect dispatched in `mode` (each Verb's default when
/// `None`; see [`modes`]). `idempotency_key` makes a durable run replayable.
pub async fn run_do(
    engine: &Engine,
    caller: &Caller,
    code: &str,
    mode: Option<Mode>,
    idempotency_key: Option<&str>,
    progress: Option<&dyn Fn(&str)>,
) -> Result<Value, LoreError> {
    let caps = engine.config.scripts.clone();
    let journal = match idempotency_key {
        Some(key) => Some(modes::Journal::open(engine, caller, key, code, caps.wall_ms).await?),
        None => None,
    };
    let spec = Spec {
        source: "do",
        progress,
        modes: Some(modes::Modes::new(mode, journal)),
        ..Spec::of(engine, Surface::Run, code, None, false)
    };
    run_script(engine, caller, spec).await
}

/// [`run`] with explicit caps (tests use small ones).
pub async fn run_with_caps(
    engine: &Engine,
    caller: &Caller,
    surface: Surface,
    code: &str,
    args: Option<Value>,
    dry_run: bool,
    caps: ScriptCaps,
) -> Result<Value, LoreError> {
    let spec = Spec {
        caps,
        ..Spec::of(engine, surface, code, args, dry_run)
    };
    run_script(engine, caller, spec).await
}

/// The script runner the engine's lower layers reach through [`Scripts`].
pub struct Runner;

/// The one runner every [`Engine`] is made with.
pub static RUNNER: Runner = Runner;

impl Scripts for Runner {
    /// Runs a script operation's body for `caller` (issue 4 item 10): `args` (already valid
    /// against its `args_schema`) are `ctx.args`, the script's value is the result, the run is an
    /// Action (`source: "operation"`). Called from a running script, it nests: it writes to that
    /// run's overlay (so it commits or fails with it) and draws on its SDK calls, output and
    /// deadline; past [`MAX_NESTING`] it is refused.
    fn run_operation<'a>(
        &'a self,
        engine: &'a Engine,
        caller: &'a Caller,
        op: &'a Operation,
        code: &'a str,
        args: Value,
        tier: Tier,
    ) -> Local<'a, Result<Value, LoreError>> {
        Box::pin(async move {
            let spec = Spec {
                source: "operation",
                tier,
                code,
                args: Some(args),
                dry_run: false,
                caps: engine.config.scripts.clone(),
                origin: Origin {
                    operation: Some(op.name.clone()),
                    ..Origin::default()
                },
                progress: None,
                modes: None,
            };
            let mut out = run_script(engine, caller, spec).await?;
            Ok(out["result"].take())
        })
    }

    fn react<'a>(
        &'a self,
        engine: &'a Engine,
        org: &'a OrgId,
        events: &'a [Event],
    ) -> Local<'a, ()> {
        reactions::react(engine, org, events)
    }
}
