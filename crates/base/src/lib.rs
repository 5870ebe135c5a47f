//! lore's base layer, below the front and the org engine: identifier types, the storage key
//! layout, the records of identity and membership, errors with their stable codes, the ports
//! (the only ways lore reaches the world), the storage contract with its in-memory backend,
//! rate-limit buckets, JSON Schema, and replies (a JSON tree, or text kept serialized). Nothing
//! here knows a request, a tool or a platform.

pub mod cache;
pub mod error;
pub mod ids;
pub mod keys;
pub mod model;
pub mod outbound;
pub mod ports;
pub mod ratelimit;
pub mod reply;
pub mod schema;
pub mod storage;
pub mod time;

/// The version of lore, as `/healthz`, `initialize` and outbound `User-Agent`s say it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
