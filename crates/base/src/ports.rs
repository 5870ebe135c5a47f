//! Ports: the only ways the core reaches the world. Adapters (native, Workers, Spin) implement
//! these traits; the core never names a platform crate.
//!
//! Futures are `?Send`: Workers and Spin are single-threaded and the script engine (Boa) is not
//! `Send`. The native adapter runs one core instance per worker thread.

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
    /// [`Self::embed`] for work nobody waits on (the background embedder's queue): a host
    /// that embeds on a worker of its own serves every waiting call first.
    async fn embed_later(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, PortError> {
        self.embed(texts).await
    }
    /// Whether embedding costs so little (microseconds a text: the built-in table) that a save
    /// stores its vectors before it answers. A model or an endpoint is not: a save answers once
    /// its memories are durable and found by keywords, and their vectors follow.
    fn is_quick(&self) -> bool {
        false
    }
    /// The embedder the compact `search` ranks the SDK catalog's short texts with on every
    /// call (`None`: this one). One that loads a large model for each request of a platform
    /// without a process to keep it in (a Spin request) offers a cheaper one.
    fn for_catalog(&self) -> Option<Rc<dyn Embedder>> {
        None
    }
}

/// One outbound HTTP exchange. Every request says where it may go and whose share it counts
/// against (no default: each place that sends one decides).
#[derive(Debug, Clone)]
pub struct OutboundRequest {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Which addresses it may connect to (`crate::outbound`).
    pub reach: crate::outbound::Reach,
    /// Whose share of the requests in flight it takes.
    pub share: crate::outbound::Share,
    /// The longest the whole exchange may take, connection to last byte.
    pub timeout_ms: u64,
}

/// The address of the client that sent a request, as its adapter knows it (the socket's
/// peer natively, `CF-Connecting-IP` on Workers, `spin-client-addr` on Spin): put in the
/// request's extensions. What a request without credentials may do is counted by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub core::net::IpAddr);

impl ClientAddr {
    /// The share key of this client: its address, or for IPv6 its /64 (one subscriber's
    /// network; an attacker has many addresses in it).
    pub fn share_key(self) -> String {
        match crate::outbound::canonical(self.0) {
            core::net::IpAddr::V6(v6) => {
                let s = v6.segments();
                format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
            }
            v4 => v4.to_string(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct OutboundResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// Outbound HTTP through the host (native: a client on threads of its own, never the serving
/// ones, that connects only to addresses the request's `reach` permits; Workers: `fetch`;
/// Spin: its outbound HTTP). Connections, OAuth client metadata documents, identity providers
/// and embeddings endpoints go through here. An implementation ends the exchange by its
/// `timeout_ms`, and may refuse a request whose `share` has too many in flight.
#[async_trait(?Send)]
pub trait HttpClient {
    async fn send(&self, request: OutboundRequest) -> Result<OutboundResponse, PortError>;
}

/// A cache shared by every instance of one deployment (Spin key-value). It saves a fresh
/// instance loads from storage; it is never the source of truth. Rules for the core:
/// only a value that storage holds is cached; a miss or a failed read falls back to storage;
/// every entry expires within its TTL; and the code path that changes the stored value deletes
/// the entry, so a change is seen at once by every instance sharing the cache (the TTL bounds
/// a reader that raced the change).
#[async_trait(?Send)]
pub trait Cache {
    /// The bytes under `key`, unless absent or expired. A failure reads as a miss.
    async fn get(&self, key: &str) -> Option<Vec<u8>>;
    /// Stores `bytes` under `key` for at most `ttl_secs` seconds. Best effort: failures are
    /// ignored (the next reader misses and reads storage).
    async fn put(&self, key: &str, bytes: Vec<u8>, ttl_secs: u32);
    /// Removes `key`. An error means the entry may still be served until it expires.
    async fn delete(&self, key: &str) -> Result<(), PortError>;
}

/// Work the core hands the host to run later, on the same thread: after the current request
/// is answered (`spawn`; natively a local task of the worker, on Workers the request's
/// `waitUntil`), or at a time (`wake`). The core uses it only for work whose outcome the
/// request does not report (behaviors' reactions, index segments). A host without one
/// (`None`: Spin, the tests) gets that work run inline, before the answer.
pub trait Background {
    fn spawn(&self, task: Pin<Box<dyn Future<Output = ()>>>);

    /// Asks the host to run `org`'s due schedules (`lore_engine::runs::schedules`) at
    /// `at_ms` or soon after, unless it will already run them sooner. A host whose timer
    /// passes over every org with schedules by itself (`lore serve`) ignores it; on Workers it
    /// sets the org object's alarm. Best effort: a wake that is lost is made up by the next
    /// pass (an org's alarm, `lore serve`'s timer, the operator route `schedules`).
    fn wake(&self, org: &str, at_ms: i64) {
        let _ = (org, at_ms);
    }

    /// Whether [`Self::wake`] reaches the org (Workers: its object's alarm), so that a pass
    /// over every org wakes each rather than running its schedules itself.
    fn wakes_orgs(&self) -> bool {
        false
    }
}

/// Runs a piece of synchronous computing somewhere else (natively: a thread of its own), so
/// that it does not hold the thread serving requests. The job gets a clock that works where
/// it runs; the future completes when the job has. A host without one (`None`: Workers,
/// Spin, the tests) runs such work inline.
pub trait Offload {
    fn run(&self, job: Box<dyn FnOnce(Rc<dyn Clock>) + Send>) -> Pin<Box<dyn Future<Output = ()>>>;
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
    /// A cache of copies (verified credentials): shared across instances where the host has
    /// one (Spin key-value), else the instance's own ([`crate::cache::MemoryCache`], natively
    /// and in an org object). Its entries are checked against the org's auth stamp, so a
    /// change made by another instance or process holds at once.
    pub cache: Option<Rc<dyn Cache>>,
    /// Where work runs after the answer (natively); `None` runs it inline.
    pub background: Option<Rc<dyn Background>>,
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
        hex::encode(&buf)
    }
}
