//! The bench peer of `bench/sdk.sh`: the reads behind lore's `entities.get` and
//! `entities.list`, done directly with rusqlite and nothing else. It is not part of lore.
//!
//! ```sh
//! cargo run --release --example rusqlite_peer -- --db bench.db --addr 127.0.0.1:8788 --org bench
//! ```
//!
//! - `POST /get {"id":"ent_…"}` answers the stored entity JSON of `o/{org}/ent/{ulid}`, read by
//!   `SELECT v FROM lore_kv WHERE k = ?`;
//! - `POST /list {"type"?:"ticket","limit"?:100,"cursor"?:"…"}` answers
//!   `{"items":[…],"next_cursor":"…"}`, read by one range query over `o/{org}/ent-t/{type}/`
//!   (fetching `limit + 1` rows to know whether there is a next page, as lore does); the cursor
//!   is the last item's ULID, as in lore, so both take the same cursors.
//!
//! Those are exactly the storage reads lore does for the two methods (`src/sqlite.rs`),
//! on the same database file, with the same serving model as `lore serve`
//! (`src/server.rs`): hyper HTTP/1.1, the main thread accepting connections and handing
//! them round-robin to one worker thread per core, each worker a current-thread tokio runtime
//! with its own SQLite connection (WAL, `synchronous=FULL`, prepared statements cached), and
//! mimalloc as the allocator. What it leaves out is everything else lore does per request:
//! authentication (token, principal and membership reads), routing, the SDK registry and its
//! access checks, argument JSON Schema validation, the entity type read of a typed list,
//! decoding the stored JSON into records and serializing them again, usage counters, audit and
//! the request log. Stored values are sent as they are.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use rusqlite::{Connection, OptionalExtension, params};
use serde::Deserialize;
use tokio::sync::mpsc;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Largest request body read (lore's default limit).
const MAX_BODY: usize = 4 << 20;

#[derive(Deserialize)]
struct Get {
    id: String,
}

#[derive(Deserialize)]
struct List {
    #[serde(rename = "type")]
    type_name: Option<String>,
    limit: Option<usize>,
    cursor: Option<String>,
}

struct Options {
    db: PathBuf,
    addr: SocketAddr,
    org: String,
    workers: usize,
}

fn options() -> Result<Options, String> {
    let mut db = None;
    let mut addr = "127.0.0.1:8788".to_string();
    let mut org = "bench".to_string();
    let mut workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--db" => db = Some(PathBuf::from(value)),
            "--addr" => addr = value,
            "--org" => org = value,
            "--workers" => workers = value.parse().map_err(|e| format!("--workers: {e}"))?,
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(Options {
        db: db
            .ok_or("usage: rusqlite_peer --db PATH [--addr HOST:PORT] [--org ORG] [--workers N]")?,
        addr: addr.parse().map_err(|e| format!("--addr: {e}"))?,
        org,
        workers: workers.max(1),
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let options = options()?;
    let listener = std::net::TcpListener::bind(options.addr)?;
    listener.set_nonblocking(true)?;
    let mut inboxes = Vec::new();
    for n in 0..options.workers {
        let (inbox, connections) = mpsc::unbounded_channel::<std::net::TcpStream>();
        inboxes.push(inbox);
        let db = options.db.clone();
        let org = options.org.clone();
        std::thread::Builder::new()
            .name(format!("peer-worker-{n}"))
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("tokio runtime");
                let local = tokio::task::LocalSet::new();
                local.block_on(&rt, worker(connections, db, org));
            })?;
    }
    eprintln!(
        "rusqlite_peer listening on http://{} ({} workers)",
        listener.local_addr()?,
        options.workers
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let mut next = 0usize;
        loop {
            let (stream, _) = listener.accept().await?;
            inboxes[next % inboxes.len()].send(stream.into_std()?)?;
            next = next.wrapping_add(1);
        }
    })
}

/// One SQLite connection per worker thread, opened as lore opens its own.
fn open(db: &PathBuf) -> rusqlite::Result<Connection> {
    let conn = Connection::open(db)?;
    conn.busy_timeout(Duration::from_secs(10))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    Ok(conn)
}

async fn worker(
    mut connections: mpsc::UnboundedReceiver<std::net::TcpStream>,
    db: PathBuf,
    org: String,
) {
    let conn = Rc::new(open(&db).expect("open the database"));
    let org: Rc<str> = org.into();
    while let Some(stream) = connections.recv().await {
        let Ok(stream) = tokio::net::TcpStream::from_std(stream) else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (conn, org) = (conn.clone(), org.clone());
        tokio::task::spawn_local(async move {
            let service = service_fn(move |req| {
                let (conn, org) = (conn.clone(), org.clone());
                async move { Ok::<_, Infallible>(respond(&conn, &org, req).await) }
            });
            let _ = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn reply(status: StatusCode, body: Vec<u8>) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .expect("a valid response")
}

fn error(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    let body = serde_json::json!({ "error": { "message": message } });
    reply(status, body.to_string().into_bytes())
}

async fn respond(conn: &Connection, org: &str, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let body = match Limited::new(body, MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return error(StatusCode::BAD_REQUEST, "unreadable body"),
    };
    let result = match (parts.method.as_str(), parts.uri.path()) {
        ("POST", "/get") => match serde_json::from_slice::<Get>(&body) {
            Ok(args) => get(conn, org, &args.id),
            Err(e) => return error(StatusCode::BAD_REQUEST, &e.to_string()),
        },
        ("POST", "/list") => match serde_json::from_slice::<List>(&body) {
            Ok(args) => list(conn, org, args),
            Err(e) => return error(StatusCode::BAD_REQUEST, &e.to_string()),
        },
        _ => return error(StatusCode::NOT_FOUND, "POST /get or /list"),
    };
    match result {
        Ok(Some(body)) => reply(StatusCode::OK, body),
        Ok(None) => error(StatusCode::NOT_FOUND, "no such entity"),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

/// The stored entity, as stored.
fn get(conn: &Connection, org: &str, id: &str) -> rusqlite::Result<Option<Vec<u8>>> {
    let Some(ulid) = id.strip_prefix("ent_") else {
        return Ok(None);
    };
    conn.prepare_cached("SELECT v FROM lore_kv WHERE k = ?1")?
        .query_row(params![format!("o/{org}/ent/{ulid}")], |r| r.get(0))
        .optional()
}

/// One page of entities of a type, after the cursor, in key (creation) order.
fn list(conn: &Connection, org: &str, args: List) -> rusqlite::Result<Option<Vec<u8>>> {
    let prefix = format!(
        "o/{org}/ent-t/{}/",
        args.type_name.as_deref().unwrap_or("ticket")
    );
    let limit = args.limit.unwrap_or(100).clamp(1, 500);
    let after = format!("{prefix}{}", args.cursor.as_deref().unwrap_or(""));
    // Every key under the prefix sorts below the prefix with its trailing '/' bumped to '0'.
    let end = format!("{}0", &prefix[..prefix.len() - 1]);
    // `+?3`, as lore's scans: a bare `LIMIT ?3` makes SQLite plan the statement again at
    // every run (lore_base::storage::scan_sql).
    let mut stmt = conn
        .prepare_cached("SELECT k, v FROM lore_kv WHERE k > ?1 AND k < ?2 ORDER BY k LIMIT +?3")?;
    let mut rows = stmt.query(params![after, end, limit as i64 + 1])?;
    let mut out = Vec::with_capacity(64 * 1024);
    out.extend_from_slice(b"{\"items\":[");
    let (mut n, mut last) = (0, String::new());
    while let Some(row) = rows.next()? {
        if n == limit {
            // A row past the page: there is a next page, after the last item sent.
            out.extend_from_slice(b"],\"next_cursor\":");
            out.extend_from_slice(
                serde_json::to_string(&last[prefix.len()..])
                    .unwrap_or_default()
                    .as_bytes(),
            );
            out.push(b'}');
            return Ok(Some(out));
        }
        if n > 0 {
            out.push(b',');
        }
        last = row.get(0)?;
        out.extend_from_slice(row.get_ref(1)?.as_bytes().map_err(rusqlite::Error::from)?);
        n += 1;
    }
    out.extend_from_slice(b"]}");
    Ok(Some(out))
}
