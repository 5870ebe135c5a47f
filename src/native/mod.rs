//! The native adapter: SQLite storage, OS clock and randomness, blocking outbound HTTP, the
//! hyper server, the remote MCP client the CLI uses, and `lore login`. The only place with native I/O.

pub mod client;
pub mod login;
pub mod ports;
pub mod server;
pub mod sqlite;
