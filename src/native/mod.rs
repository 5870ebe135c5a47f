//! The native adapter: SQLite storage, OS clock and randomness, blocking outbound HTTP, the
//! hyper server and the remote MCP client the CLI uses. The only place with native I/O.

pub mod client;
pub mod ports;
pub mod server;
pub mod sqlite;
