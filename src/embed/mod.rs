//! Embedders, the implementations of [`crate::ports::Embedder`] that need no platform: the
//! built-in offline model (feature `builtin-embedder`) and any OpenAI-compatible embeddings
//! endpoint over the [`crate::ports::HttpClient`] port. Platform embedders (Workers AI) live in
//! their adapters.

#[cfg(feature = "builtin-embedder")]
pub mod builtin;
pub mod openai;
#[cfg(feature = "builtin-embedder")]
pub mod wordpiece;
