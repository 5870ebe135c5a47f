//! Differential tests against `regress` (Boa's matcher): a hand-written table covering every
//! feature (`table`), and 20,000+ generated cases (`generated`). Where regress deviates from
//! the spec, the spec's answer is asserted instead (`table::DEVIATIONS`).

#[path = "../common/mod.rs"]
mod common;
mod generated;
mod table;
