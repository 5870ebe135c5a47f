//! The native adapter, lore's embedded default: SQLite storage, the OS clock and randomness,
//! outbound HTTP on threads of its own, the hyper server and the threads scripts and SQL queries run on,
//! the remote MCP client the CLI uses, `lore login`, and `lore backup`/`restore`/`doctor`. The
//! `lore` binary (`main.rs`, the CLI) is built on it. The only place with native I/O; what a
//! request means is `lore-front`'s and `lore-engine`'s.

// The OS clock and threads are this adapter's to use (clippy.toml forbids them below it).
#![allow(clippy::disallowed_methods)]

pub mod backup;
pub mod client;
pub mod embed_worker;
pub mod group_commit;
pub mod kept;
pub mod login;
pub mod model;
pub mod outbound;
pub mod ports;
pub mod script_child;
pub mod scripts;
pub mod server;
pub mod sqlite;
pub mod threads;
pub mod transfer;

/// Runs `f` to its end on a fresh current-thread runtime: the CLI's one-shot commands.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(f)
}
