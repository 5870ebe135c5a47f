//! The memory cap's meter lives in its own crate, `lore-meter` (`crates/meter`): it is a
//! global-allocator wrapper, the one piece of lore that needs `unsafe`, which this crate
//! forbids. See that crate for how a run's memory is counted.

pub use lore_meter::{Metered, Run, Section, installed, live, runs};
