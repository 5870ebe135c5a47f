//! Native implementations of the clock and randomness ports, the choice of embedder, and the
//! ports of one worker or command (`native_ports`); outbound HTTP is `crate::outbound`'s.

use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use lore_base::cache::MemoryCache;
use lore_base::ports::{Clock, Embedder, HttpClient, Ports, Randomness};
use lore_base::storage::StorageError;
use lore_embed::builtin::BuiltinEmbedder;
use lore_embed::openai::{OpenAiConfig, OpenAiEmbedder};
use lore_embed::transformer::TransformerModel;

use crate::embed_worker::{EmbedWorker, WorkerEmbedder};
use crate::outbound::UreqClient;
use crate::sqlite::SqliteStorage;

pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        i64::try_from(now.as_millis()).unwrap_or(i64::MAX)
    }

    fn sleep(&self, ms: u64) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>> {
        Box::pin(tokio::time::sleep(std::time::Duration::from_millis(ms)))
    }
}

pub struct OsRandom;

impl Randomness for OsRandom {
    fn fill(&self, buf: &mut [u8]) {
        getrandom::fill(buf).expect("the operating system's random source is available");
    }
}

/// Which embedder a native core instance uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum EmbedderChoice {
    /// The built-in offline model (no network, deterministic).
    #[default]
    Builtin,
    /// all-MiniLM-L6-v2 run in process (`crate::model`), one copy shared by every thread.
    Transformer(SharedModel),
    /// An OpenAI-compatible embeddings endpoint (`LORE_EMBEDDINGS_URL`).
    OpenAi(OpenAiConfig),
}

/// A loaded transformer model with the process's background embedder; two are equal when they
/// are the same copy.
#[derive(Clone)]
pub struct SharedModel {
    pub model: Arc<TransformerModel>,
    later: Arc<EmbedWorker>,
}

impl SharedModel {
    /// `model`, and the thread that embeds its background calls (`crate::embed_worker`).
    pub fn start(model: Arc<TransformerModel>) -> std::io::Result<Self> {
        Ok(Self {
            later: EmbedWorker::start(model.clone())?,
            model,
        })
    }
}

impl std::fmt::Debug for SharedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(lore_embed::transformer::MODEL_ID)
    }
}

impl PartialEq for SharedModel {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.model, &other.model)
    }
}

impl Eq for SharedModel {}

/// The native ports over the SQLite file at `db`, embedding with `embedder`, with an outbound
/// client of their own that reaches public addresses only (the CLI's).
pub fn native_ports(db: &Path, embedder: &EmbedderChoice) -> Result<Ports, StorageError> {
    native_ports_with(db, embedder, UreqClient::default())
}

/// The native ports over the SQLite file at `db`, embedding with `embedder`, reaching the
/// world through `http` (`lore serve`'s, whose shares every worker's client counts in).
pub fn native_ports_with(
    db: &Path,
    embedder: &EmbedderChoice,
    http: UreqClient,
) -> Result<Ports, StorageError> {
    let http: Rc<dyn HttpClient> = Rc::new(http);
    let embedder: Rc<dyn Embedder> = match embedder {
        EmbedderChoice::Builtin => Rc::new(BuiltinEmbedder::new()),
        EmbedderChoice::Transformer(shared) => {
            WorkerEmbedder::new(shared.model.clone(), shared.later.clone())
        }
        EmbedderChoice::OpenAi(config) => {
            Rc::new(OpenAiEmbedder::new(config.clone(), http.clone()))
        }
    };
    let clock: Rc<dyn Clock> = Rc::new(SystemClock);
    Ok(Ports {
        storage: Rc::new(SqliteStorage::open(db)?),
        cache: Some(Rc::new(MemoryCache::new(clock.clone()))),
        clock,
        random: Rc::new(OsRandom),
        http: Some(http),
        embedder: Some(embedder),
        background: None,
    })
}
