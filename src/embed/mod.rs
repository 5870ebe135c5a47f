//! Embedders, the implementations of [`crate::ports::Embedder`] that need no platform: the
//! built-in offline model (feature `builtin-embedder`). Platform embedders (Workers AI) live in
//! their adapters.

#[cfg(feature = "builtin-embedder")]
pub mod builtin;
#[cfg(feature = "builtin-embedder")]
pub mod wordpiece;
