//! The Spin interfaces this host provides: `spin:sqlite/sqlite@3.1.0` on a rusqlite file (one
//! SQLite connection per opened `connection` resource, so a guest's `BEGIN … COMMIT` is its
//! own), `spin:key-value/key-value@3.0.0` on a second SQLite file (one table, persistent across
//! requests and restarts, as Spin's default store is), and `spin:variables/variables@3.0.0`
//! from `--var`. The async functions run their SQLite work on tokio's blocking pool, so a
//! request waiting for the write lock never stalls another request's task.
//!
//! Writers take turns in the order they asked (a FIFO lock shared by the connections) before
//! SQLite's own write lock: a connection that starts a write (`BEGIN IMMEDIATE`, `BEGIN
//! EXCLUSIVE` or any statement that is not read-only) waits for its turn, and keeps it until
//! its transaction ends. SQLite alone makes waiting writers poll (its busy handler sleeps up
//! to 100 ms between tries), and under load a poller loses the race to newcomers for seconds on
//! end; `spin up` serves a database to many requests at once, and so must this host.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::OptionalExtension;
use rusqlite::types::ValueRef;
use wasmtime::Result;
use wasmtime::component::{
    ComponentType, FutureReader, Lift, Linker, Lower, Resource, ResourceType, StreamReader,
};
use wasmtime::error::Context;

/// What every request's instance shares: the database path, the key-value file's connection
/// and the variables.
pub struct Shared {
    sqlite: PathBuf,
    kv: Conn,
    variables: HashMap<String, String>,
    /// The writers' turns (see the module's note).
    turns: Arc<tokio::sync::Mutex<()>>,
}

/// The key-value stores a component may open (`key_value_stores` in `spin.toml`).
const KV_STORES: &[&str] = &["default"];

const KV_SCHEMA: &str = "CREATE TABLE IF NOT EXISTS spin_key_value (
    store TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL, PRIMARY KEY (store, key)
) WITHOUT ROWID";

impl Shared {
    pub fn open(sqlite: &Path, kv: &Path, vars: Vec<(String, String)>) -> Result<Self> {
        // WAL once for the file, so readers never wait for the writer.
        let conn = rusqlite::Connection::open(sqlite)
            .with_context(|| format!("opening {}", sqlite.display()))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        let kv_conn =
            rusqlite::Connection::open(kv).with_context(|| format!("opening {}", kv.display()))?;
        kv_conn.pragma_update(None, "journal_mode", "WAL")?;
        kv_conn.busy_timeout(Duration::from_secs(10))?;
        kv_conn.execute_batch(KV_SCHEMA)?;
        Ok(Self {
            sqlite: sqlite.to_path_buf(),
            kv: Arc::new(Mutex::new(kv_conn)),
            variables: vars.into_iter().collect(),
            turns: Arc::new(tokio::sync::Mutex::new(())),
        })
    }
}

/// The marker type of `spin:key-value` `store` resources.
pub struct KvStore;

/// The marker type of `spin:sqlite` `connection` resources.
pub struct SqliteConnection;

type Conn = Arc<Mutex<rusqlite::Connection>>;

/// An opened `spin:sqlite` connection: its SQLite connection, and its writer's turn while it
/// has one.
pub struct Database {
    conn: Mutex<rusqlite::Connection>,
    turn: Mutex<Option<tokio::sync::OwnedMutexGuard<()>>>,
    turns: Arc<tokio::sync::Mutex<()>>,
}

/// One instance's Spin state: its open SQLite connections and key-value stores.
pub struct SpinState {
    shared: Arc<Shared>,
    connections: HashMap<u32, Arc<Database>>,
    stores: HashMap<u32, String>,
    next: u32,
}

impl SpinState {
    pub fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            connections: HashMap::new(),
            stores: HashMap::new(),
            next: 1,
        }
    }

    fn open_store(&mut self, label: &str) -> Result<Resource<KvStore>, KvError> {
        if !KV_STORES.contains(&label) {
            return Err(KvError::NoSuchStore);
        }
        let id = self.next;
        self.next += 1;
        self.stores.insert(id, label.to_string());
        Ok(Resource::new_own(id))
    }

    /// The label of an open store, and the shared key-value connection.
    fn store(&self, handle: &Resource<KvStore>) -> Result<(String, Conn), KvError> {
        let label = self
            .stores
            .get(&handle.rep())
            .cloned()
            .ok_or_else(|| KvError::Other("not an open store".into()))?;
        Ok((label, self.shared.kv.clone()))
    }

    fn open(&mut self, label: &str) -> Result<Resource<SqliteConnection>, SqlError> {
        if label != "default" {
            return Err(SqlError::NoSuchDatabase);
        }
        let conn = rusqlite::Connection::open(&self.shared.sqlite).map_err(io)?;
        conn.busy_timeout(Duration::from_secs(10)).map_err(io)?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(io)?;
        let id = self.next;
        self.next += 1;
        self.connections.insert(
            id,
            Arc::new(Database {
                conn: Mutex::new(conn),
                turn: Mutex::new(None),
                turns: self.shared.turns.clone(),
            }),
        );
        Ok(Resource::new_own(id))
    }

    fn connection(&self, handle: &Resource<SqliteConnection>) -> Result<Arc<Database>, SqlError> {
        self.connections
            .get(&handle.rep())
            .cloned()
            .ok_or(SqlError::InvalidConnection)
    }
}

#[derive(ComponentType, Lift, Lower, Clone, Debug)]
#[component(variant)]
pub enum SqlValue {
    #[component(name = "integer")]
    Integer(i64),
    #[component(name = "real")]
    Real(f64),
    #[component(name = "text")]
    Text(String),
    #[component(name = "blob")]
    Blob(Vec<u8>),
    #[component(name = "null")]
    Null,
}

#[derive(ComponentType, Lift, Lower, Clone, Debug)]
#[component(variant)]
pub enum SqlError {
    #[component(name = "no-such-database")]
    NoSuchDatabase,
    #[component(name = "access-denied")]
    AccessDenied,
    #[component(name = "invalid-connection")]
    InvalidConnection,
    #[component(name = "database-full")]
    DatabaseFull,
    #[component(name = "io")]
    Io(String),
}

fn io(e: impl std::fmt::Display) -> SqlError {
    SqlError::Io(e.to_string())
}

#[derive(ComponentType, Lift, Lower, Clone, Debug)]
#[component(record)]
pub struct RowResult {
    values: Vec<SqlValue>,
}

#[derive(ComponentType, Lift, Lower, Clone, Debug)]
#[component(record)]
pub struct QueryResult {
    columns: Vec<String>,
    rows: Vec<RowResult>,
}

#[derive(ComponentType, Lift, Lower, Clone, Debug)]
#[component(variant)]
pub enum VariablesError {
    #[component(name = "invalid-name")]
    InvalidName(String),
    #[component(name = "undefined")]
    Undefined(String),
    #[component(name = "provider")]
    Provider(String),
    #[component(name = "other")]
    Other(String),
}

#[derive(ComponentType, Lift, Lower, Clone, Debug)]
#[component(variant)]
pub enum KvError {
    #[component(name = "store-table-full")]
    StoreTableFull,
    #[component(name = "no-such-store")]
    NoSuchStore,
    #[component(name = "access-denied")]
    AccessDenied,
    #[component(name = "other")]
    Other(String),
}

fn kv_failed(e: impl std::fmt::Display) -> KvError {
    KvError::Other(e.to_string())
}

/// Runs `op` (named `what` in traces) on the key-value connection on the blocking pool.
async fn kv_blocking<T: Send + 'static>(
    what: String,
    conn: Conn,
    op: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<T> + Send + 'static,
) -> Result<T, KvError> {
    tokio::task::spawn_blocking(move || {
        let conn = conn
            .lock()
            .map_err(|_| kv_failed("the store lock is poisoned"))?;
        traced(|_| format!("key-value {what}"), || op(&conn)).map_err(kv_failed)
    })
    .await
    .map_err(kv_failed)?
}

type KvOp<T> = Result<T, KvError>;

/// Whether each SQL statement and key-value call is logged with its duration (`--trace`).
pub static TRACE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Runs `op`, logging `what` and its duration to stderr when tracing.
#[expect(
    clippy::disallowed_methods,
    reason = "the host, not the core: it times the calls it serves"
)]
pub fn traced<T>(what: impl FnOnce(&T) -> String, op: impl FnOnce() -> T) -> T {
    if !TRACE.load(std::sync::atomic::Ordering::Relaxed) {
        return op();
    }
    static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let epoch = *EPOCH.get_or_init(std::time::Instant::now);
    let started = std::time::Instant::now();
    let out = op();
    eprintln!(
        "lore-spin-host: trace at {:>12.3} ms, {:>8.3} ms: {}",
        (started - epoch).as_secs_f64() * 1000.0,
        started.elapsed().as_secs_f64() * 1000.0,
        what(&out)
    );
    out
}

/// A traced statement: its text, and the rows and bytes it answered.
fn described(sql: &str, out: &Result<QueryResult, SqlError>) -> String {
    let Ok(result) = out else {
        return format!("sqlite {sql} -> error");
    };
    let bytes: usize = result
        .rows
        .iter()
        .flat_map(|row| &row.values)
        .map(|value| match value {
            SqlValue::Text(text) => text.len(),
            SqlValue::Blob(blob) => blob.len(),
            SqlValue::Integer(_) | SqlValue::Real(_) => 8,
            SqlValue::Null => 0,
        })
        .sum();
    format!("sqlite {sql} -> {} rows, {bytes} bytes", result.rows.len())
}

/// Runs one statement and reads every row.
fn execute(
    conn: &rusqlite::Connection,
    sql: &str,
    params: Vec<SqlValue>,
) -> Result<QueryResult, SqlError> {
    let mut statement = conn.prepare_cached(sql).map_err(io)?;
    let columns: Vec<String> = statement
        .column_names()
        .into_iter()
        .map(String::from)
        .collect();
    let params: Vec<rusqlite::types::Value> = params
        .into_iter()
        .map(|v| match v {
            SqlValue::Integer(i) => rusqlite::types::Value::Integer(i),
            SqlValue::Real(f) => rusqlite::types::Value::Real(f),
            SqlValue::Text(s) => rusqlite::types::Value::Text(s),
            SqlValue::Blob(b) => rusqlite::types::Value::Blob(b),
            SqlValue::Null => rusqlite::types::Value::Null,
        })
        .collect();
    let mut rows = statement
        .query(rusqlite::params_from_iter(params))
        .map_err(io)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(io)? {
        let values = (0..columns.len())
            .map(|i| {
                Ok(match row.get_ref(i).map_err(io)? {
                    ValueRef::Null => SqlValue::Null,
                    ValueRef::Integer(i) => SqlValue::Integer(i),
                    ValueRef::Real(f) => SqlValue::Real(f),
                    ValueRef::Text(t) => SqlValue::Text(String::from_utf8_lossy(t).into_owned()),
                    ValueRef::Blob(b) => SqlValue::Blob(b.to_vec()),
                })
            })
            .collect::<Result<Vec<_>, SqlError>>()?;
        out.push(RowResult { values });
    }
    Ok(QueryResult { columns, rows: out })
}

/// Whether running `sql` on `conn` needs a writer's turn first: it starts a write transaction,
/// or it writes.
fn needs_turn(conn: &rusqlite::Connection, sql: &str) -> Result<bool, SqlError> {
    let words: Vec<String> = sql
        .split_whitespace()
        .take(2)
        .map(|w| w.to_ascii_uppercase())
        .collect();
    if words.first().map(String::as_str) == Some("BEGIN") {
        return Ok(matches!(
            words.get(1).map(String::as_str),
            Some("IMMEDIATE" | "EXCLUSIVE")
        ));
    }
    let statement = conn.prepare_cached(sql).map_err(io)?;
    Ok(!statement.readonly())
}

/// Runs one statement on the blocking pool, after waiting for a writer's turn when it writes;
/// the turn passes on once the connection is out of its transaction.
async fn execute_blocking(
    db: Arc<Database>,
    sql: String,
    params: Vec<SqlValue>,
) -> Result<QueryResult, SqlError> {
    let sql = Arc::new(sql);
    let mut params = Some(params);
    loop {
        let (db2, sql2) = (db.clone(), sql.clone());
        let mut args = params.take();
        let ran = tokio::task::spawn_blocking(move || {
            let conn = db2.conn.lock().map_err(|_| SqlError::InvalidConnection)?;
            let has_turn = db2.turn.lock().map(|t| t.is_some()).unwrap_or(false);
            if !has_turn && needs_turn(&conn, &sql2)? {
                return Ok((None, args));
            }
            let out = traced(
                |out| described(&sql2, out),
                || execute(&conn, &sql2, args.take().unwrap_or_default()),
            );
            if conn.is_autocommit()
                && let Ok(mut turn) = db2.turn.lock()
            {
                turn.take();
            }
            Ok((Some(out), None))
        })
        .await
        .map_err(io)?;
        match ran {
            Ok((Some(out), _)) => return out,
            Ok((None, back)) => {
                params = back;
                let turn = db.turns.clone().lock_owned().await;
                if let Ok(mut held) = db.turn.lock() {
                    *held = Some(turn);
                }
            }
            Err(e) => return Err(e),
        }
    }
}

type ExecuteAsync = Result<
    (
        Vec<String>,
        StreamReader<RowResult>,
        FutureReader<Result<(), SqlError>>,
    ),
    SqlError,
>;

/// What a host's per-request state lends the Spin imports: its [`SpinState`].
pub trait WithSpin: Send + 'static {
    fn spin(&mut self) -> &mut SpinState;
}

pub fn add_to_linker<T: WithSpin>(linker: &mut Linker<T>) -> Result<()> {
    let mut sqlite = linker.instance("spin:sqlite/sqlite@3.1.0")?;
    sqlite.resource(
        "connection",
        ResourceType::host::<SqliteConnection>(),
        |mut store, rep| {
            store.data_mut().spin().connections.remove(&rep);
            Ok(())
        },
    )?;
    sqlite.func_wrap(
        "[static]connection.open",
        |mut store, (label,): (String,)| Ok((store.data_mut().spin().open(&label),)),
    )?;
    sqlite.func_wrap_concurrent(
        "[static]connection.open-async",
        |accessor, (label,): (String,)| {
            Box::pin(
                async move { Ok((accessor.with(|mut access| access.get().spin().open(&label)),)) },
            )
        },
    )?;
    sqlite.func_wrap(
        "[method]connection.execute",
        |mut store, (handle, sql, params): (Resource<SqliteConnection>, String, Vec<SqlValue>)| {
            let result = store.data_mut().spin().connection(&handle).and_then(|db| {
                let conn = db.conn.lock().map_err(|_| SqlError::InvalidConnection)?;
                traced(|out| described(&sql, out), || execute(&conn, &sql, params))
            });
            Ok((result,))
        },
    )?;
    sqlite.func_wrap_concurrent(
        "[method]connection.execute-async",
        |accessor, (handle, sql, params): (Resource<SqliteConnection>, String, Vec<SqlValue>)| {
            Box::pin(async move {
                let conn = accessor.with(|mut access| access.get().spin().connection(&handle));
                let result = match conn {
                    Ok(conn) => execute_blocking(conn, sql, params).await,
                    Err(e) => Err(e),
                };
                let reply: ExecuteAsync = match result {
                    Ok(QueryResult { columns, rows }) => accessor.with(|mut access| {
                        let rows = StreamReader::new(&mut access, rows)?;
                        let done = FutureReader::new(&mut access, async {
                            Ok::<_, wasmtime::Error>(Ok::<(), SqlError>(()))
                        })?;
                        Ok::<_, wasmtime::Error>(Ok((columns, rows, done)))
                    })?,
                    Err(e) => Err(e),
                };
                Ok((reply,))
            })
        },
    )?;
    sqlite.func_wrap(
        "[method]connection.last-insert-rowid",
        |mut store, (handle,): (Resource<SqliteConnection>,)| {
            let id = match store.data_mut().spin().connection(&handle) {
                Ok(db) => db.conn.lock().map(|c| c.last_insert_rowid()).unwrap_or(0),
                Err(_) => 0,
            };
            Ok((id,))
        },
    )?;
    sqlite.func_wrap(
        "[method]connection.changes",
        |mut store, (handle,): (Resource<SqliteConnection>,)| {
            let n = match store.data_mut().spin().connection(&handle) {
                Ok(db) => db.conn.lock().map(|c| c.changes()).unwrap_or(0),
                Err(_) => 0,
            };
            Ok((n,))
        },
    )?;

    add_key_value(linker)?;

    let mut variables = linker.instance("spin:variables/variables@3.0.0")?;
    variables.func_wrap_concurrent("get", |accessor, (name,): (String,)| {
        Box::pin(async move {
            let value = traced(
                |_| format!("variables get {name}"),
                || {
                    accessor.with(|mut access| {
                        access
                            .get()
                            .spin()
                            .shared
                            .variables
                            .get(&name.to_ascii_lowercase())
                            .cloned()
                    })
                },
            );
            Ok((value.ok_or(VariablesError::Undefined(format!(
                "no variable {name:?}; pass --var {name}=VALUE"
            ))),))
        })
    })?;
    Ok(())
}

fn add_key_value<T: WithSpin>(linker: &mut Linker<T>) -> Result<()> {
    let mut kv = linker.instance("spin:key-value/key-value@3.0.0")?;
    kv.resource(
        "store",
        ResourceType::host::<KvStore>(),
        |mut store, rep| {
            store.data_mut().spin().stores.remove(&rep);
            Ok(())
        },
    )?;
    kv.func_wrap_concurrent("[static]store.open", |accessor, (label,): (String,)| {
        Box::pin(async move {
            Ok((accessor.with(|mut access| access.get().spin().open_store(&label)),))
        })
    })?;
    kv.func_wrap_concurrent(
        "[method]store.get",
        |accessor, (handle, key): (Resource<KvStore>, String)| {
            Box::pin(async move {
                let result: KvOp<Option<Vec<u8>>> =
                    match accessor.with(|mut a| a.get().spin().store(&handle)) {
                        Ok((label, conn)) => {
                            kv_blocking(format!("get {key}"), conn, move |c| {
                                c.prepare_cached(
                                "SELECT value FROM spin_key_value WHERE store = ?1 AND key = ?2",
                            )?
                            .query_row(rusqlite::params![label, key], |r| r.get(0))
                            .optional()
                            })
                            .await
                        }
                        Err(e) => Err(e),
                    };
                Ok((result,))
            })
        },
    )?;
    kv.func_wrap_concurrent(
        "[method]store.set",
        |accessor, (handle, key, value): (Resource<KvStore>, String, Vec<u8>)| {
            Box::pin(async move {
                let result: KvOp<()> = match accessor.with(|mut a| a.get().spin().store(&handle)) {
                    Ok((label, conn)) => {
                        kv_blocking(format!("set {key}"), conn, move |c| {
                            c.prepare_cached(
                            "INSERT INTO spin_key_value (store, key, value) VALUES (?1, ?2, ?3) \
                                 ON CONFLICT (store, key) DO UPDATE SET value = excluded.value",
                        )?
                        .execute(rusqlite::params![label, key, value])
                        .map(drop)
                        })
                        .await
                    }
                    Err(e) => Err(e),
                };
                Ok((result,))
            })
        },
    )?;
    kv.func_wrap_concurrent(
        "[method]store.delete",
        |accessor, (handle, key): (Resource<KvStore>, String)| {
            Box::pin(async move {
                let result: KvOp<()> = match accessor.with(|mut a| a.get().spin().store(&handle)) {
                    Ok((label, conn)) => {
                        kv_blocking(format!("delete {key}"), conn, move |c| {
                            c.prepare_cached(
                                "DELETE FROM spin_key_value WHERE store = ?1 AND key = ?2",
                            )?
                            .execute(rusqlite::params![label, key])
                            .map(drop)
                        })
                        .await
                    }
                    Err(e) => Err(e),
                };
                Ok((result,))
            })
        },
    )?;
    kv.func_wrap_concurrent(
        "[method]store.exists",
        |accessor, (handle, key): (Resource<KvStore>, String)| {
            Box::pin(async move {
                let result: KvOp<bool> = match accessor.with(|mut a| a.get().spin().store(&handle))
                {
                    Ok((label, conn)) => {
                        kv_blocking(format!("exists {key}"), conn, move |c| {
                            c.prepare_cached(
                                "SELECT 1 FROM spin_key_value WHERE store = ?1 AND key = ?2",
                            )?
                            .exists(rusqlite::params![label, key])
                        })
                        .await
                    }
                    Err(e) => Err(e),
                };
                Ok((result,))
            })
        },
    )?;
    kv.func_wrap_concurrent(
        "[method]store.get-keys",
        |accessor, (handle,): (Resource<KvStore>,)| {
            Box::pin(async move {
                let keys: KvOp<Vec<String>> =
                    match accessor.with(|mut a| a.get().spin().store(&handle)) {
                        Ok((label, conn)) => {
                            kv_blocking("get-keys".into(), conn, move |c| {
                                c.prepare_cached(
                                    "SELECT key FROM spin_key_value WHERE store = ?1 ORDER BY key",
                                )?
                                .query_map(rusqlite::params![label], |r| r.get(0))?
                                .collect()
                            })
                            .await
                        }
                        Err(e) => Err(e),
                    };
                // The keys stream, and the future that reports how listing them ended.
                let (keys, done) = match keys {
                    Ok(keys) => (keys, Ok(())),
                    Err(e) => (Vec::new(), Err(e)),
                };
                let reply =
                    accessor.with(|mut access| {
                        let keys = StreamReader::new(&mut access, keys)?;
                        let done = FutureReader::new(&mut access, async move {
                            Ok::<_, wasmtime::Error>(done)
                        })?;
                        Ok::<_, wasmtime::Error>((keys, done))
                    })?;
                Ok((reply,))
            })
        },
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn database(shared: &Arc<Shared>) -> Arc<Database> {
        let mut state = SpinState::new(shared.clone());
        let handle = state.open("default").expect("the default database opens");
        state.connection(&handle).expect("an open connection")
    }

    async fn run(db: &Arc<Database>, sql: &str) -> Vec<RowResult> {
        execute_blocking(db.clone(), sql.to_string(), Vec::new())
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e:?}"))
            .rows
    }

    async fn pause(ms: u64) {
        tokio::task::spawn_blocking(move || std::thread::sleep(Duration::from_millis(ms)))
            .await
            .expect("the pause ends");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writers_wait_for_their_turn_and_write_in_the_order_they_asked() {
        let dir = std::env::temp_dir().join(format!("lore-spin-host-turns-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let shared = Arc::new(
            Shared::open(&dir.join("turns.db"), &dir.join("turns-kv.db"), Vec::new())
                .expect("the files open"),
        );
        let first = database(&shared);
        run(&first, "CREATE TABLE t (n INTEGER)").await;
        run(&first, "BEGIN IMMEDIATE").await;
        run(&first, "INSERT INTO t VALUES (1)").await;
        // Three writers ask, one after another, while the first holds its transaction: they
        // wait (no "database is locked"), reads do not, and the writes land in asking order.
        let mut waiting = Vec::new();
        for n in 2..=4 {
            let db = database(&shared);
            let sql = format!("INSERT INTO t VALUES ({n})");
            waiting.push(tokio::spawn(execute_blocking(db, sql, Vec::new())));
            pause(30).await;
        }
        let reader = database(&shared);
        assert!(run(&reader, "SELECT n FROM t").await.is_empty());
        assert!(waiting.iter().all(|w| !w.is_finished()));
        run(&first, "COMMIT").await;
        for w in waiting {
            w.await.expect("the writer ends").expect("the write lands");
        }
        let rows = run(&reader, "SELECT n FROM t ORDER BY rowid").await;
        let ns: Vec<i64> = rows
            .iter()
            .map(|r| match r.values.first() {
                Some(SqlValue::Integer(n)) => *n,
                other => panic!("not an integer: {other:?}"),
            })
            .collect();
        assert_eq!(ns, [1, 2, 3, 4]);
        // A transaction's end passes the turn on: the next writer does not wait.
        assert!(first.turn.lock().expect("the turn's lock").is_none());
        drop((first, reader, shared));
        std::fs::remove_dir_all(&dir).expect("the directory is removed");
    }
}
