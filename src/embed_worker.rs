//! The transformer's background work on threads of their own, at the lowest priority.
//!
//! A call somebody waits on (a query, a save with `wait_for_vectors`, a search's small tail)
//! runs on the worker thread that serves it, as it always did. The background embedder's calls
//! (`Embedder::embed_later`) go to one thread per process, which runs them one at a time, oldest
//! first, on a pool of its own whose threads have the lowest priority (nice 19): while requests
//! keep the cores busy they get nearly all of them, and the queue is embedded with what is
//! left. A worker thread only awaits the answer, so no request waits on the model behind it.

use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::{Arc, Condvar, Mutex};

use async_trait::async_trait;
use lore_base::ports::{Embedder, PortError};
use lore_embed::transformer::{TransformerEmbedder, TransformerModel};
use tokio::sync::oneshot;

type Reply = oneshot::Sender<Result<Vec<Vec<f32>>, PortError>>;

/// The background embedder's queue of calls, shared by every worker thread.
pub struct EmbedWorker {
    jobs: Mutex<VecDeque<(Vec<String>, Reply)>>,
    ready: Condvar,
}

impl EmbedWorker {
    /// Starts the thread that embeds `model`'s background calls.
    pub fn start(model: Arc<TransformerModel>) -> std::io::Result<Arc<Self>> {
        let worker = Arc::new(Self {
            jobs: Mutex::new(VecDeque::new()),
            ready: Condvar::new(),
        });
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("lore-embed-{i}"))
            .start_handler(|_| lower_priority())
            .build()
            .map_err(std::io::Error::other)?;
        let shared = worker.clone();
        std::thread::Builder::new()
            .name("lore-embed".into())
            .spawn(move || {
                lower_priority();
                loop {
                    let (texts, reply) = {
                        let mut jobs = shared.jobs.lock().expect("not poisoned");
                        loop {
                            match jobs.pop_front() {
                                Some(job) => break job,
                                None => jobs = shared.ready.wait(jobs).expect("not poisoned"),
                            }
                        }
                    };
                    let vectors = pool
                        .install(|| model.embed(&texts))
                        .map_err(|e| PortError(e.to_string()));
                    // The caller may have gone (its request ended): nothing to tell.
                    let _ = reply.send(vectors);
                }
            })?;
        Ok(worker)
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, PortError> {
        let (reply, answer) = oneshot::channel();
        self.jobs
            .lock()
            .expect("not poisoned")
            .push_back((texts.to_vec(), reply));
        self.ready.notify_one();
        answer
            .await
            .map_err(|_| PortError("the background embedder stopped".into()))?
    }
}

/// The nice value of the calling thread raised to 19 (Linux keeps one per thread). Failing
/// leaves it as it was: only slower for the requests beside it.
fn lower_priority() {
    let _ = rustix::process::nice(19);
}

/// The transformer of one worker thread: its waiting calls run here, its background calls on
/// the [`EmbedWorker`].
pub struct WorkerEmbedder {
    here: TransformerEmbedder,
    later: Arc<EmbedWorker>,
}

impl WorkerEmbedder {
    pub fn new(model: Arc<TransformerModel>, later: Arc<EmbedWorker>) -> Rc<Self> {
        Rc::new(Self {
            here: TransformerEmbedder::new(model),
            later,
        })
    }
}

#[async_trait(?Send)]
impl Embedder for WorkerEmbedder {
    fn model_id(&self) -> &str {
        self.here.model_id()
    }

    fn dimensions(&self) -> usize {
        self.here.dimensions()
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, PortError> {
        self.here.embed(texts).await
    }

    async fn embed_later(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, PortError> {
        self.later.embed(texts).await
    }
}
