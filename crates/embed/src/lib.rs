//! Embedders, the implementations of [`lore_base::ports::Embedder`] that need no platform: the
//! built-in offline model (feature `builtin`) and any OpenAI-compatible embeddings
//! endpoint over the [`lore_base::ports::HttpClient`] port. Platform embedders (Workers AI) live in
//! their adapters.

#[cfg(feature = "builtin")]
pub mod builtin;
pub mod openai;
#[cfg(feature = "transformer")]
pub mod transformer;
#[cfg(feature = "builtin")]
pub mod wordpiece;
