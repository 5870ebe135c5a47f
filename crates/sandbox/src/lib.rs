//! lore's script machine (SPEC 4): a TypeScript program stripped to JavaScript by oxc
//! ([`strip`]), run in a fresh Boa realm (`realm`) by an event loop ([`event_loop`]) under
//! caps ([`caps`]): steps, wall clock, memory, output, SDK calls, recursion. Every regular
//! expression runs on `lore-jsregex`, its steps charged to the run. The script reaches nothing
//! but its host: each SDK call and sleep goes out through [`event_loop::Ops`], which the org
//! engine implements (access checks, the run's overlay, its Action). [`remote`] runs a
//! script's JavaScript on a thread of its own where the host has threads (natively).
//!
//! It knows no org, no record and no request: what a call means is the host's.

mod bootstrap;
pub mod caps;
pub mod event_loop;
pub mod failure;
pub mod host;
mod numeric;
mod prepared;
mod realm;
mod regexp;
pub mod remote;
pub mod strip;
mod values;
pub mod wire;

pub use prepared::Spare;

/// Frees what ended runs on this thread left for the engine's garbage collector (a script
/// process does it between runs, off any run's path).
pub fn collect_garbage() {
    boa_engine::gc::force_collect();
    lore_meter::collected();
}
