//! Embedders, the implementations of [`lore_base::ports::Embedder`] that need no platform: the
//! built-in offline model (feature `builtin`) and any OpenAI-compatible embeddings
//! endpoint over the [`lore_base::ports::HttpClient`] port. Platform embedders (Workers AI) live in
//! their adapters.

#[cfg(feature = "transformer")]
mod bert;
#[cfg(feature = "builtin")]
pub mod builtin;
pub mod openai;
#[cfg(feature = "transformer")]
pub mod transformer;
#[cfg(feature = "builtin")]
pub mod wordpiece;

/// all-MiniLM-L6-v2 as lore runs it, wherever it runs (natively in candle, `transformer`; on
/// Spin through the platform's embeddings): the name its vectors are stored under (the model,
/// its pooling and its token limit), so that vectors made on either are one model's.
pub const MINILM_MODEL_ID: &str = "all-minilm-l6-v2-mean-256";
/// Its vectors' length.
pub const MINILM_DIMENSIONS: usize = 384;
/// Word pieces it reads of a text, `[CLS]` and `[SEP]` included (the model's training length).
pub const MINILM_MAX_TOKENS: usize = 256;
