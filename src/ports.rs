//! Ports: the only ways the core reaches the world. Adapters (native, Workers, Spin) implement
//! these traits; the core never names a platform crate.
//!
//! Futures are `?Send`: Workers and Spin are single-threaded and the script engine that comes
//! later is not `Send`. The native adapter runs one core instance per worker thread.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use async_trait::async_trait;

pub use crate::storage::Storage;

/// Milliseconds since the Unix epoch, read from the host. The core never reads a clock itself
/// (`std::time` traps on wasm32-unknown-unknown).
pub trait Clock {
    fn now_ms(&self) -> i64;

    /// Waits `ms` milliseconds without blocking the host (backoff between retries). The
    /// default returns at once: hosts without timers, and tests with a fixed clock.
    fn sleep(&self, ms: u64) -> Pin<Box<dyn Future<Output = ()>>> {
        let _ = ms;
        Box::pin(std::future::ready(()))
    }
}

/// Cryptographically secure random bytes from the host.
pub trait Randomness {
    fn fill(&self, buf: &mut [u8]);
}

/// Turns texts into vectors. Implementations arrive with semantic memory; the foundation only
/// fixes the shape so adapters can provide one.
#[async_trait(?Send)]
pub trait Embedder {
    /// Identifies the model; stored beside each vector so a model change re-embeds lazily.
    fn model_id(&self) -> &str;
    fn dimensions(&self) -> usize;
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, PortError>;
}

/// One outbound HTTP exchange.
#[derive(Debug, Clone, Default)]
pub struct OutboundRequest {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

#[derive(Debug, Clone)]
pub struct OutboundResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// Outbound HTTP through the host (native: a blocking client; Workers: `fetch`; Spin: its
/// outbound HTTP). Connections and OAuth client metadata documents go through here.
#[async_trait(?Send)]
pub trait HttpClient {
    async fn send(&self, request: OutboundRequest) -> Result<OutboundResponse, PortError>;
}

/// A failure reported by a port implementation.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct PortError(pub String);

/// The set of ports one core instance runs on.
#[derive(Clone)]
pub struct Ports {
    pub storage: Rc<dyn Storage>,
    pub clock: Rc<dyn Clock>,
    pub random: Rc<dyn Randomness>,
    pub http: Option<Rc<dyn HttpClient>>,
    pub embedder: Option<Rc<dyn Embedder>>,
}

impl Ports {
    /// The JSON record stored at `key`, if any.
    pub async fn record<T: serde::de::DeserializeOwned>(
        &self,
        key: &str,
    ) -> crate::error::Result<Option<T>> {
        match self.storage.get(key).await? {
            Some(bytes) => Ok(Some(serde_json::from_slice(&bytes)?)),
            None => Ok(None),
        }
    }

    /// Random bytes as lowercase hex.
    pub fn random_hex(&self, bytes: usize) -> String {
        let mut buf = vec![0u8; bytes];
        self.random.fill(&mut buf);
        buf.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// Deterministic ports for tests and the shared suites: a clock that ticks one millisecond per
/// read and a seeded pseudo-random source. Never used by a server.
#[doc(hidden)]
pub mod testing {
    use std::cell::Cell;

    /// A clock that starts at `start` ms and advances one millisecond each time it is read.
    pub struct StepClock(pub Cell<i64>);

    impl StepClock {
        pub fn starting_at(ms: i64) -> Self {
            Self(Cell::new(ms))
        }
    }

    impl super::Clock for StepClock {
        fn now_ms(&self) -> i64 {
            let t = self.0.get() + 1;
            self.0.set(t);
            t
        }
    }

    /// A test double of the embedder port for plumbing tests (storage of vectors, snapshots,
    /// failures, model changes): each lowercase word adds a fixed pseudo-random direction, so
    /// texts sharing words are close. It knows nothing of meaning; the built-in embedder is
    /// the one that does. Counts the texts it embedded and can be told to fail.
    pub struct WordHashEmbedder {
        pub model: String,
        pub dims: usize,
        pub texts: Cell<usize>,
        pub fail: Cell<bool>,
    }

    impl WordHashEmbedder {
        pub fn new(model: &str, dims: usize) -> Self {
            Self {
                model: model.into(),
                dims,
                texts: Cell::new(0),
                fail: Cell::new(false),
            }
        }

        pub fn vector(&self, text: &str) -> Vec<f32> {
            let mut v = vec![0f32; self.dims];
            for word in text
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
            {
                let mut h: u64 = 0xcbf29ce484222325;
                for b in word.to_lowercase().bytes() {
                    h = (h ^ u64::from(b)).wrapping_mul(0x100000001b3);
                }
                for x in v.iter_mut() {
                    h = h
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    *x += ((h >> 40) as f32 / (1u64 << 24) as f32) - 0.5;
                }
            }
            v
        }
    }

    #[async_trait::async_trait(?Send)]
    impl super::Embedder for WordHashEmbedder {
        fn model_id(&self) -> &str {
            &self.model
        }
        fn dimensions(&self) -> usize {
            self.dims
        }
        async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, super::PortError> {
            if self.fail.get() {
                return Err(super::PortError("test embedder told to fail".into()));
            }
            self.texts.set(self.texts.get() + texts.len());
            Ok(texts.iter().map(|t| self.vector(t)).collect())
        }
    }

    /// A seeded linear congruential generator: repeatable "random" bytes.
    pub struct SeqRandom(pub Cell<u64>);

    impl SeqRandom {
        pub fn seeded(seed: u64) -> Self {
            Self(Cell::new(seed))
        }
    }

    impl super::Randomness for SeqRandom {
        fn fill(&self, buf: &mut [u8]) {
            for b in buf.iter_mut() {
                let n = self
                    .0
                    .get()
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                self.0.set(n);
                *b = (n >> 33) as u8;
            }
        }
    }
}
