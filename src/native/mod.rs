//! The native adapter: SQLite storage, OS clock and randomness, blocking outbound HTTP, the
//! hyper server and the threads scripts run on, the remote MCP client the CLI uses,
//! `lore login`, and `lore backup`/`restore`/`doctor`. The only place with native I/O.

pub mod backup;
pub mod client;
pub mod login;
pub mod ports;
pub mod server;
pub mod sqlite;
pub mod threads;
