//! lore's org engine: everything of one org, behind one entry point ([`Engine::call`]: one
//! org, one caller, one request; see [`request`]). The front authenticates and decodes a
//! request and hands it here; natively and on Spin both run in one process, and on Cloudflare
//! the engine is meant to run in the org's Durable Object.
//!
//! Below it, in crates of their own: the org's memory (`lore-memory`: events, saves, the BM25
//! and vector indexes, hybrid search) and its records (`lore-records`: entity types, entities,
//! relationships, feeds and webhook deliveries, connections, operations, behaviors, actions,
//! metrics, people, and member-safe read-only SQL over them). Its modules, from the bottom up
//! (each imports only those below it):
//! - [`instance`]: the [`Engine`] (ports, configuration, the orgs' warm state), with the
//!   running script's `scope`;
//! - [`sdk`]: the method registry, its dispatcher and access checks, `search_sdk`, the `.d.ts`;
//! - [`runs`]: a script run as one Action (the sandbox machine of `lore-sandbox` as host,
//!   the run's overlay, `do` modes, behaviors' reactions);
//! - [`compact`]: the `search`/`fetch`/`do` profile;
//! - [`tools`]: the tool table of both profiles and the admin surface;
//! - [`request`]: the entry point.
//!
//! The engine reads no request, header or token: it takes a [`Caller`] the front resolved.

pub mod compact;
pub mod instance;
pub mod request;
pub mod runs;
mod scope;
pub mod sdk;
pub mod tools;

pub use instance::{Engine, EngineConfig};
pub use lore_directory::Caller;
pub use lore_sandbox::caps::ScriptCaps;
pub use lore_sandbox::remote::{ScriptThread, ScriptThreads};
pub use request::{OrgRequest, Reach};

impl Engine {
    /// An engine instance whose usage counts go to the keys of `instance` (see
    /// [`records::metrics::UsageCounters`]), with [`runs::RUNNER`] as its script runner.
    pub fn new(ports: lore_base::ports::Ports, config: EngineConfig, instance: String) -> Self {
        Self::assemble(ports, config, instance, &runs::RUNNER)
    }
}
