//! Group commit for a SQLite file: every connection of a process to one database hands its
//! batches to one writer thread, which commits the batches waiting at once in one transaction and
//! one fsync, and answers each batch when that transaction is on disk.
//!
//! - Durability is unchanged: a batch is answered only after the `COMMIT` that holds it returned
//!   (`synchronous=FULL`, so after the WAL's fsync), and a batch that waits is never answered
//!   before its group is durable.
//! - Each batch keeps its own outcome: it runs in a savepoint of the group's transaction, after
//!   the batches before it, so its checks see their writes, and a batch whose check fails (or
//!   whose write fails) is rolled back alone and answered with its error while the rest commit.
//! - Nothing waits on purpose: a group is what queued while the previous one was being written,
//!   so a lone writer commits as before, and many concurrent writers share each fsync.
//! - A group of relaxed batches only ([`Batch::relaxed`]) commits without the fsync.
//!
//! - Around each group's transaction the writer bumps the file's change counters of every key the
//!   group writes (`lore_changes`: begun before, ended after), so that every process's kept reads
//!   of those keys (`kept`) are read again.
//!
//! Worker threads keep their own connections for reads; only commits cross to the writer.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender, TryRecvError, channel};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use lore_base::storage::{Batch, Check, StorageError, Write};
use lore_changes::Changes;

/// Most batches one transaction takes (a bound on how long the first of them waits).
const MAX_GROUP: usize = 256;

type Committed = tokio::sync::oneshot::Sender<Result<(), StorageError>>;

/// The writer of one database file, shared by every connection to it in this process; its
/// thread ends when the last connection is dropped.
pub struct Writer {
    jobs: Mutex<Option<Sender<(Batch, Committed)>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The file's change counters, which every commit bumps; `None` when the counters file could
    /// not be opened (then no connection keeps values: every read goes to the database).
    pub changes: Option<Arc<Changes>>,
}

impl Drop for Writer {
    /// Ends the thread and waits for it, so its connection is closed (and the WAL checkpointed
    /// into the file, as when the last connection closes) before the last handle is gone.
    fn drop(&mut self) {
        let jobs = self
            .jobs
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        drop(jobs.take());
        let thread = self
            .thread
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(thread) = thread.take() {
            let _ = thread.join();
        }
    }
}

fn backend(e: rusqlite::Error) -> StorageError {
    StorageError::Backend(e.to_string())
}

impl Writer {
    /// The writer of the database at `path` (canonical), started with the connection `open`
    /// makes unless this process has one already, with the file's change counters
    /// ([`changes_path`], opened with it; `None` on failure, said in the log). `full` is the
    /// `synchronous` level of a durable commit (the connection's own); a group of relaxed
    /// batches commits with `NORMAL`.
    pub fn for_path(
        path: &Path,
        full: &'static str,
        open: impl FnOnce() -> Result<Connection, StorageError>,
    ) -> Result<Arc<Writer>, StorageError> {
        static WRITERS: OnceLock<Mutex<HashMap<PathBuf, Weak<Writer>>>> = OnceLock::new();
        let mut writers = WRITERS
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        writers.retain(|_, w| w.strong_count() > 0);
        if let Some(writer) = writers.get(path).and_then(Weak::upgrade) {
            return Ok(writer);
        }
        let conn = open()?;
        let changes = match Changes::open(&changes_path(path)) {
            Ok(c) => Some(Arc::new(c)),
            Err(e) => {
                tracing::warn!(error = %e, "no change counters: every read goes to the database");
                None
            }
        };
        let (tx, rx) = channel();
        let counters = changes.clone();
        let thread = std::thread::Builder::new()
            .name("lore-writer".into())
            .spawn(move || write_loop(&conn, &rx, full, counters.as_deref()))
            .map_err(|e| StorageError::Backend(format!("cannot start the writer thread: {e}")))?;
        let writer = Arc::new(Writer {
            jobs: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
            changes,
        });
        writers.insert(path.to_path_buf(), Arc::downgrade(&writer));
        Ok(writer)
    }

    /// Commits `batch` with whatever else is waiting; answers when it is on disk.
    pub async fn commit(&self, batch: Batch) -> Result<(), StorageError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.jobs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .ok_or_else(|| StorageError::Backend("the writer has stopped".into()))?
            .send((batch, reply))
            .map_err(|_| StorageError::Backend("the writer thread has stopped".into()))?;
        answer
            .await
            .map_err(|_| StorageError::Backend("the writer thread dropped a commit".into()))?
    }
}

/// The change counters' file of the database at `db`: `<db>-changes`, beside SQLite's `-wal`.
pub fn changes_path(db: &Path) -> PathBuf {
    beside(db, "-changes")
}

/// `<db><suffix>`: a file SQLite or lore keeps beside the database at `db`.
pub fn beside(db: &Path, suffix: &str) -> PathBuf {
    let mut path = db.as_os_str().to_owned();
    path.push(suffix);
    path.into()
}

/// The writer thread: takes the batches waiting, commits them as one group, answers each.
fn write_loop(
    conn: &Connection,
    jobs: &Receiver<(Batch, Committed)>,
    full: &str,
    changes: Option<&Changes>,
) {
    let mut synchronous_full = true;
    while let Ok(first) = jobs.recv() {
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            match jobs.try_recv() {
                Ok(job) => group.push(job),
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
            }
        }
        let durable = group.iter().any(|(b, _)| !b.relaxed);
        if durable != synchronous_full {
            let level = if durable { full } else { "NORMAL" };
            if let Err(e) = conn.pragma_update(None, "synchronous", level) {
                let e = backend(e);
                for (_, reply) in group {
                    let _ = reply.send(Err(e.clone()));
                }
                continue;
            }
            synchronous_full = durable;
        }
        // Begun before the transaction, ended after it returns and before anyone is answered: a
        // reader that kept a value of these keys reads it again from now on, and a requester
        // sees its own write at its next read.
        let writing = changes.map(|c| {
            let keys = group.iter().flat_map(|(b, _)| b.writes.iter());
            c.begin(keys.map(|w| w.key().as_bytes()))
        });
        let outcomes = commit_group(conn, group.iter().map(|(b, _)| b));
        drop(writing);
        for ((_, reply), outcome) in group.into_iter().zip(outcomes) {
            // A requester that went away (its request was cancelled) still had its batch
            // committed, as a commit running when a request is dropped would have.
            let _ = reply.send(outcome);
        }
    }
}

/// One transaction for the group; each batch in a savepoint of its own. Returns each batch's
/// outcome, in order (all failed if the transaction could not commit).
pub fn commit_group<'a>(
    conn: &Connection,
    batches: impl ExactSizeIterator<Item = &'a Batch>,
) -> Vec<Result<(), StorageError>> {
    let n = batches.len();
    // IMMEDIATE takes the write lock up front, so checks and writes see one state.
    let tx = match rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate) {
        Ok(tx) => tx,
        Err(e) => return vec![Err(backend(e)); n],
    };
    let mut outcomes = Vec::with_capacity(n);
    for batch in batches {
        let outcome = match conn.execute_batch("SAVEPOINT batch") {
            Ok(()) => {
                let applied = apply(conn, batch);
                let end = if applied.is_ok() {
                    conn.execute_batch("RELEASE batch")
                } else {
                    conn.execute_batch("ROLLBACK TO batch; RELEASE batch")
                };
                applied.and(end.map_err(backend))
            }
            Err(e) => Err(backend(e)),
        };
        outcomes.push(outcome);
    }
    if let Err(e) = tx.commit() {
        let e = backend(e);
        return outcomes.into_iter().map(|_| Err(e.clone())).collect();
    }
    outcomes
}

/// A batch's checks, then its writes, inside the open transaction.
fn apply(conn: &Connection, batch: &Batch) -> Result<(), StorageError> {
    for check in &batch.checks {
        let (key, expected) = match check {
            Check::Absent(k) => (k, None),
            Check::Equals(k, v) => (k, Some(v)),
        };
        let current: Option<Vec<u8>> = conn
            .prepare_cached("SELECT v FROM lore_kv WHERE k = ?1")
            .and_then(|mut s| s.query_row(params![key], |r| r.get(0)).optional())
            .map_err(backend)?;
        if current.as_ref() != expected {
            return Err(StorageError::Conflict { key: key.clone() });
        }
    }
    for write in &batch.writes {
        match write {
            Write::Put(k, v) => conn
                .prepare_cached("INSERT INTO lore_kv (k, v) VALUES (?1, ?2) ON CONFLICT(k) DO UPDATE SET v = excluded.v")
                .and_then(|mut s| s.execute(params![k, v])),
            Write::Delete(k) => conn
                .prepare_cached("DELETE FROM lore_kv WHERE k = ?1")
                .and_then(|mut s| s.execute(params![k])),
        }
        .map_err(backend)?;
    }
    Ok(())
}
