//! Test support for lore, linked only by tests, benches, fuzz targets and the platforms' test
//! builds, never by a release: the shared storage suite ([`storage`], run by every backend
//! through [`storage_suite!`]), the shared records suite ([`records`], [`records_suite!`]),
//! deterministic ports ([`ports`]), a store that fails on demand ([`faulty`]), and the routes a
//! test build serves the suites on ([`routes`]).

pub mod faulty;
pub mod ports;
pub mod records;
pub mod routes;
pub mod storage;

/// What the suites' macros run a case with, so a crate that invokes them needs no executor of
/// its own.
#[doc(hidden)]
pub use futures_executor::block_on;
/// The storage contract the suites' macros name.
#[doc(hidden)]
pub use lore_base::storage::Storage;
