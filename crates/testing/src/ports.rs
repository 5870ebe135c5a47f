//! Deterministic ports for tests and the shared suites: a clock that ticks one millisecond per
//! read, a clock whose sleeps jump, a seeded pseudo-random source, a word-hash embedder and the
//! cache port's contract suite. Never used by a server.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use lore_base::ports::{Cache, Clock, Embedder, PortError, Randomness};

/// A clock that starts at `start` ms and advances one millisecond each time it is read.
pub struct StepClock(pub Cell<i64>);

impl StepClock {
    pub fn starting_at(ms: i64) -> Self {
        Self(Cell::new(ms))
    }
}

impl Clock for StepClock {
    fn now_ms(&self) -> i64 {
        let t = self.0.get() + 1;
        self.0.set(t);
        t
    }
}

/// Ports over `storage` with a clock that ticks a millisecond per read (from 2026-01-01) and a
/// random source seeded with `seed`; no HTTP, embedder, cache or background.
pub fn step_ports(
    storage: Rc<dyn lore_base::storage::Storage>,
    seed: u64,
) -> lore_base::ports::Ports {
    lore_base::ports::Ports {
        storage,
        clock: Rc::new(StepClock::starting_at(1_767_225_600_000)),
        random: Rc::new(SeqRandom::seeded(seed)),
        http: None,
        embedder: None,
        cache: None,
        background: None,
    }
}

/// A clock that ticks a millisecond per read and whose `sleep` moves it forward at once:
/// wall-clock and sleep limits can be tested without waiting. Clones of the `Rc` read the
/// same time.
pub struct JumpClock(pub Rc<Cell<i64>>);

impl JumpClock {
    pub fn starting_at(ms: i64) -> Self {
        Self(Rc::new(Cell::new(ms)))
    }
}

impl Clock for JumpClock {
    fn now_ms(&self) -> i64 {
        self.0.set(self.0.get() + 1);
        self.0.get()
    }
    fn sleep(&self, ms: u64) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>> {
        self.0.set(self.0.get() + ms as i64);
        Box::pin(std::future::ready(()))
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
impl Embedder for WordHashEmbedder {
    fn model_id(&self) -> &str {
        &self.model
    }
    fn dimensions(&self) -> usize {
        self.dims
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, PortError> {
        if self.fail.get() {
            return Err(PortError("test embedder told to fail".into()));
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

impl Randomness for SeqRandom {
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

pub use lore_base::cache::MemoryCache;

/// The cache port's contract, for every implementation (the in-memory one here, Spin
/// key-value through the Spin test build): misses, overwrites, deletes, expiry. `clock`
/// must be the cache's own clock; its `sleep` has to move time for the expiry case.
/// Panics with a message naming the broken rule.
pub async fn cache_suite(cache: &dyn Cache, clock: &dyn Clock) {
    assert_eq!(
        cache.get("suite/missing").await,
        None,
        "a missing key is a miss"
    );
    cache.put("suite/a", b"one".to_vec(), 60).await;
    assert_eq!(
        cache.get("suite/a").await.as_deref(),
        Some(&b"one"[..]),
        "put, then get"
    );
    cache.put("suite/a", b"two".to_vec(), 60).await;
    assert_eq!(
        cache.get("suite/a").await.as_deref(),
        Some(&b"two"[..]),
        "put overwrites"
    );
    cache.put("suite/empty", Vec::new(), 60).await;
    assert_eq!(
        cache.get("suite/empty").await,
        Some(Vec::new()),
        "an empty value is a hit"
    );
    cache.delete("suite/a").await.expect("delete");
    assert_eq!(cache.get("suite/a").await, None, "delete removes the entry");
    cache
        .delete("suite/a")
        .await
        .expect("deleting a missing key is not an error");
    cache.put("suite/short", b"x".to_vec(), 1).await;
    assert!(
        cache.get("suite/short").await.is_some(),
        "fresh within its TTL"
    );
    clock.sleep(1_100).await;
    assert_eq!(
        cache.get("suite/short").await,
        None,
        "expired after its TTL"
    );
    cache.delete("suite/empty").await.expect("delete");
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::future::Future;
    use std::pin::Pin;
    use std::rc::Rc;

    use super::{MemoryCache, cache_suite};
    use lore_base::ports::Clock;

    /// A fixed clock that a sleep moves forward.
    struct SleepClock(Cell<i64>);

    impl Clock for SleepClock {
        fn now_ms(&self) -> i64 {
            self.0.get()
        }
        fn sleep(&self, ms: u64) -> Pin<Box<dyn Future<Output = ()>>> {
            self.0.set(self.0.get() + ms as i64);
            Box::pin(std::future::ready(()))
        }
    }

    #[test]
    fn the_memory_cache_passes_the_cache_suite() {
        let clock = Rc::new(SleepClock(Cell::new(1_767_225_600_000)));
        let cache = MemoryCache::new(clock.clone());
        futures_executor::block_on(cache_suite(&cache, clock.as_ref()));
    }
}

/// A background port that keeps the tasks it is given until the test runs them
/// ([`Later::run_all`]), so a test sees what a request left for after its answer.
#[derive(Default)]
pub struct Later(pub RefCell<Vec<std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>>>);

impl Later {
    /// Runs every task kept so far (and those they leave in turn); how many ran.
    pub fn run_all(&self) -> usize {
        let mut ran = 0;
        loop {
            let tasks: Vec<_> = self.0.borrow_mut().drain(..).collect();
            if tasks.is_empty() {
                return ran;
            }
            for task in tasks {
                futures_executor::block_on(task);
                ran += 1;
            }
        }
    }
}

impl lore_base::ports::Background for Later {
    fn spawn(&self, task: std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>) {
        self.0.borrow_mut().push(task);
    }
}

/// Each org's store an in-memory one of its own, as on Cloudflare each org's keys live in its
/// Durable Object (see [`lore_base::storage::split`]).
#[derive(Default)]
pub struct MemoryOrgs(RefCell<HashMap<String, Rc<lore_base::storage::memory::MemoryStorage>>>);

impl lore_base::storage::split::OrgStores for MemoryOrgs {
    fn store(
        &self,
        org: &str,
    ) -> Result<Rc<dyn lore_base::storage::Storage>, lore_base::storage::StorageError> {
        Ok(self
            .0
            .borrow_mut()
            .entry(org.to_string())
            .or_default()
            .clone())
    }
}

/// The directory in memory and each org in a memory store of its own.
pub fn split_memory() -> lore_base::storage::split::SplitStorage {
    lore_base::storage::split::SplitStorage::new(
        Rc::new(lore_base::storage::memory::MemoryStorage::new()),
        Rc::new(MemoryOrgs::default()),
    )
}

/// A background port that keeps its tasks as [`Later`] does and records each wake it is asked
/// for, as `(org, at_ms)`; `wakes_orgs` says whether it stands for a host whose wakes reach
/// each org (Workers) or one that passes over them itself (`lore serve`).
#[derive(Default)]
pub struct Wakes {
    pub later: Later,
    pub wakes: RefCell<Vec<(String, i64)>>,
    pub wakes_orgs: bool,
}

impl lore_base::ports::Background for Wakes {
    fn spawn(&self, task: std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>) {
        self.later.spawn(task);
    }

    fn wake(&self, org: &str, at_ms: i64) {
        self.wakes.borrow_mut().push((org.to_string(), at_ms));
    }

    fn wakes_orgs(&self) -> bool {
        self.wakes_orgs
    }
}
