//! lore's integration tests, one binary: each module is one concern, and all share one harness
//! (`common`) and one build (ARCHITECTURE.md, "Tests and where they run"). The official MCP
//! conformance suite is the other test target (`tests/conformance`, with its fixtures' feature).

/// The sandbox's memory cap counts what scripts and SQL queries allocate through this wrapper,
/// as in the product's binaries.
#[global_allocator]
static ALLOCATOR: lore_meter::Metered<std::alloc::System> = lore_meter::Metered(std::alloc::System);

mod common;

mod app;
mod backup;
mod behaviors;
mod callers;
mod compact_do;
mod compact_read;
mod embed_queue;
mod embeddings_http;
mod faults;
mod group_commit;
mod hostile;
mod memory_time;
mod oauth;
mod operator;
mod processes;
mod protocol;
mod ratelimit;
mod request_log;
mod retrieval;
mod sandbox;
mod sandbox_hostile;
mod schedules;
mod sdk;
mod segments;
mod segments_kill;
mod semantic;
mod sql;
mod suites;
mod tidy;
mod transfer;
mod transformer;
