//! Vector search: a per-org approximate nearest-neighbour index of embeddings (cosine
//! similarity of L2-normalised vectors), as pure Rust that runs wherever the core does.
//!
//! [`VectorIndex`] is an HNSW graph over int8-quantized vectors ([`quantize`]): 384-d vectors
//! take 384 bytes each plus about 140 bytes of links, so 100,000 of them fit in about 53 MB.
//! Small indexes and selective filters are scanned exactly. The index persists as versioned,
//! checksummed bytes ([`VectorIndex::snapshot`], [`VectorIndex::restore`]) and is built
//! deterministically from a seed. Why this implementation and these parameters:
//! ARCHITECTURE.md, "Vector index"; the measurements: BENCHMARKS.md.

mod arena;
mod hnsw;
mod index;
mod quantize;
mod snapshot;
#[cfg(test)]
mod tests;

pub use index::{IndexParams, VectorIndex};
pub use quantize::{dot_i8, quantize};
pub use snapshot::SNAPSHOT_VERSION;

/// What can go wrong with a vector or a snapshot.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum VectorError {
    #[error(
        "the vector has {got} dimensions but the index holds {expected}-dimensional vectors; embed with the index's model"
    )]
    Dimensions { expected: usize, got: usize },
    #[error("vector component {index} is not a finite number; check the embedder's output")]
    NotFinite { index: usize },
    #[error("vector ids are dense and inserted in order: the next id is {expected}, not {got}")]
    IdOutOfOrder { expected: u32, got: u32 },
    #[error("invalid vector index parameters: {0}")]
    Params(String),
    #[error("unusable vector index snapshot ({0}); rebuild the index from the events")]
    Snapshot(String),
}
