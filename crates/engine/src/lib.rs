//! lore's org engine: everything of one org, behind one entry point ([`Engine::call`]: one
//! org, one caller, one request). The front authenticates and decodes a
//! request and hands it here; natively and on Spin both run in one process, and on Cloudflare
//! the engine is meant to run in the org's Durable Object.
//!
//! Below it, in crates of their own: the org's memory (`lore-memory`: events, saves, the BM25
//! and vector indexes, hybrid search) and its records (`lore-records`: entity types, entities,
//! relationships, feeds and webhook deliveries, connections, operations, behaviors, actions,
//! metrics, people, and member-safe read-only SQL over them). Its modules, from the bottom up
//! (each imports only those below it):
//! - `instance`: the [`Engine`] (ports, configuration, the orgs' warm state), with the
//!   running script's `scope`;
//! - `sdk`: the method registry, its dispatcher and access checks, `search_sdk`, the `.d.ts`;
//! - `runs`: a script run as one Action (the sandbox machine of `lore-sandbox` as host,
//!   the run's overlay, `do` modes, behaviors' reactions);
//! - `compact`: the `search`/`fetch`/`do` profile;
//! - [`tools`]: the tool table of both profiles and the admin surface;
//! - `request`: the entry point.
//!
//! Only `tools` (the table) is public; the rest is private behind the face below: the
//! [`Engine`] and its configuration, an [`OrgRequest`] with its [`Reach`], one SDK method call
//! ([`call_method`]), behaviors' [`schedules`], [`scripts`] run outside a request, and the
//! compact profile's parts its tests read ([`compact_profile`]).
//!
//! The engine reads no request, header or token: it takes a [`Caller`] the front resolved.

mod compact;
mod instance;
mod request;
mod runs;
mod scope;
mod sdk;
pub mod tools;

pub use instance::{Engine, EngineConfig};
pub use lore_directory::Caller;
pub use lore_sandbox::caps::ScriptCaps;
pub use lore_sandbox::remote::{ScriptThread, ScriptThreads};
pub use request::{OrgRequest, Reach};
pub use sdk::call as call_method;

/// Behaviors' schedules: each due run claimed once, whichever host passes; when to pass is the
/// host's (`lore serve`'s timer, an org object's alarm, Spin's operator route).
pub mod schedules {
    pub use crate::runs::schedules::{OrgPass, PASS_EVERY_MS, run_due, run_every_org};
}

/// A script run outside a request (benches, fuzz targets and the hostile tests run scripts so).
pub mod scripts {
    pub use crate::runs::{Surface, run, run_with_caps};
}

/// The compact profile's catalog and `fetch`, which its tests read directly.
pub mod compact_profile {
    pub use crate::compact::catalog::newest_entities;
    pub use crate::compact::fetch::{FORMS, fetch};
}

impl Engine {
    /// An engine instance whose usage counts go to the keys of `instance` (see
    /// `lore_records::metrics::UsageCounters`), with the engine's script runner.
    pub fn new(ports: lore_base::ports::Ports, config: EngineConfig, instance: String) -> Self {
        Self::assemble(ports, config, instance, &runs::RUNNER)
    }
}
