//! `lore serve`: a hyper HTTP/1.1 server, one thread per core. Each worker thread runs its own
//! single-threaded tokio runtime, its own core instance ([`lore_front::Lore`]) and its own SQLite
//! connection. The main thread accepts connections and hands them to the workers in turn
//! (round robin: workers accepting from one shared socket left one worker with nearly every
//! keep-alive connection under load). Core futures are not `Send`, so nothing crosses threads
//! but accepted sockets, the shutdown signal and what the workers share (`Shared`: the
//! rate-limit buckets, the script slots, the SQL table cache).

use std::cell::Cell;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use http_body_util::{BodyExt, Either, Full, LengthLimitError, Limited};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::{mpsc, watch};

use lore_front::mcp::jsonrpc::{self, RpcError};
use lore_front::mcp::reply::{Forward, McpReply, Streamed};
use lore_front::{Config, Lore};

use crate::ports::{EmbedderChoice, native_ports_with};

pub struct ServeOptions {
    pub addr: SocketAddr,
    pub db: PathBuf,
    pub config: Config,
    pub workers: usize,
    pub limits: ConnectionLimits,
    /// Scripts running at once across the workers, and each org's and token's share.
    pub scripts: lore_base::ratelimit::ScriptSlots,
    pub embedder: EmbedderChoice,
    /// The `lore` binary whose script processes run scripts (`crate::scripts`).
    pub script_program: PathBuf,
}

/// What one client may hold of the server.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// How long a client may take to send its request headers (also the keep-alive idle time).
    pub header_timeout: Duration,
    /// How long a client may take to send a request body.
    pub body_timeout: Duration,
    /// How long in-flight requests may finish after SIGINT/SIGTERM.
    pub drain_timeout: Duration,
    /// Open connections at most; further ones are closed at once.
    pub max_connections: usize,
}

/// Binds, serves until SIGINT/SIGTERM, drains in-flight requests, returns.
pub fn serve(options: ServeOptions, on_ready: impl FnOnce(SocketAddr)) -> anyhow::Result<()> {
    let listener = std::net::TcpListener::bind(options.addr)
        .with_context(|| format!("cannot listen on {}", options.addr))?;
    listener.set_nonblocking(true)?;
    let local = listener.local_addr()?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut workers = Vec::new();
    let mut inboxes = Vec::new();
    // Connections open across all workers.
    let open = Arc::new(AtomicUsize::new(0));
    // One set of rate-limit buckets for the whole process, shared by every worker.
    let limiter = lore_base::ratelimit::MemoryLimiter::default();
    // One outbound client for the process: its exchanges' shares span every worker.
    let outbound = crate::outbound::UreqClient::new(&options.config.outbound, Arc::default());
    let slots = options.scripts.clone();
    // One SQL table cache for the whole process: a write through any worker keeps the copies
    // every worker reads, and `sql.cache_bytes` bounds the process, not each worker.
    let tables = Arc::new(lore_records::sql::TableCache::new(
        options.config.sql.cache_bytes,
    ));
    let (ready, readiness) = std::sync::mpsc::channel();
    let count = options.workers.max(1);
    for n in 0..count {
        let (inbox, connections) = mpsc::unbounded_channel();
        inboxes.push(inbox);
        let stop = stop_rx.clone();
        let db = options.db.clone();
        let config = options.config.clone();
        let embedder = options.embedder.clone();
        let script_program = options.script_program.clone();
        let limits = options.limits;
        let open = open.clone();
        let limiter = limiter.clone();
        let outbound = outbound.clone();
        let slots = slots.clone();
        let tables = tables.clone();
        let ready = ready.clone();
        let handle = std::thread::Builder::new()
            .name(format!("lore-worker-{n}"))
            // Scripts run on these threads: give them the stack the sandbox is sized for.
            .stack_size(lore_sandbox::failure::STACK_BYTES)
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                let local = tokio::task::LocalSet::new();
                local.block_on(
                    &rt,
                    worker(
                        connections,
                        db,
                        embedder,
                        config,
                        stop,
                        limits,
                        Shared {
                            open,
                            limiter,
                            outbound,
                            slots,
                            tables,
                            ready,
                            runs_schedules: n == 0,
                            script_program,
                        },
                    ),
                )
            })?;
        workers.push(handle);
    }
    // Ready means every worker has the database open: a `lore restore` started after the
    // listening line sees the server's connections and refuses.
    for _ in 0..count {
        match readiness.recv() {
            Ok(Ok(())) => {}
            Ok(Err(why)) => bail!(why),
            Err(_) => bail!("a worker stopped before it opened the database"),
        }
    }
    on_ready(local);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let mut next = 0usize;
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        if open.load(Ordering::Relaxed) >= options.limits.max_connections {
                            // Closing at once keeps the server answering the connections it has.
                            tracing::warn!(%peer, "connection limit reached; closing a new connection");
                            drop(stream);
                            continue;
                        }
                        open.fetch_add(1, Ordering::Relaxed);
                        let mut connection = (stream.into_std()?, peer);
                        // A worker that is gone (it failed) passes its turn on.
                        let mut sent = false;
                        for _ in 0..inboxes.len() {
                            let inbox = &inboxes[next % inboxes.len()];
                            next = next.wrapping_add(1);
                            match inbox.send(connection) {
                                Ok(()) => {
                                    sent = true;
                                    break;
                                }
                                Err(mpsc::error::SendError(back)) => connection = back,
                            }
                        }
                        if !sent {
                            tracing::error!("every worker thread has stopped; shutting down");
                            break;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                },
                _ = tokio::signal::ctrl_c() => {
                    tracing::info!("SIGINT received, draining");
                    break;
                }
                _ = term.recv() => {
                    tracing::info!("SIGTERM received, draining");
                    break;
                }
            }
        }
        anyhow::Ok(())
    })?;
    let _ = stop_tx.send(true);
    for w in workers {
        match w.join() {
            Ok(result) => result?,
            Err(_) => anyhow::bail!("a worker thread panicked"),
        }
    }
    tracing::info!("stopped");
    Ok(())
}

/// What every worker thread shares: the count of open connections, the rate-limit buckets,
/// the script slots, the SQL table cache and the outbound client (its shares).
struct Shared {
    open: Arc<AtomicUsize>,
    limiter: lore_base::ratelimit::MemoryLimiter,
    outbound: crate::outbound::UreqClient,
    slots: lore_base::ratelimit::ScriptSlots,
    tables: Arc<lore_records::sql::TableCache>,
    /// Told once the worker has its database open (or why it could not).
    ready: std::sync::mpsc::Sender<Result<(), String>>,
    /// Whether this worker runs the behaviors' schedules (one worker does).
    runs_schedules: bool,
    /// The binary of the worker's script processes.
    script_program: PathBuf,
}

async fn worker(
    mut connections: mpsc::UnboundedReceiver<(std::net::TcpStream, SocketAddr)>,
    db: PathBuf,
    embedder: EmbedderChoice,
    config: Config,
    mut stop: watch::Receiver<bool>,
    limits: ConnectionLimits,
    shared: Shared,
) -> anyhow::Result<()> {
    let Shared {
        open,
        limiter,
        outbound,
        slots,
        tables,
        ready,
        runs_schedules,
        script_program,
    } = shared;
    let ports = native_ports_with(&db, &embedder, outbound)
        .with_context(|| format!("cannot open database {}", db.display()));
    let _ = ready.send(ports.as_ref().map(|_| ()).map_err(|e| format!("{e:#}")));
    let mut ports = ports?;
    // Reactions run after the answer, as tasks of this worker; shutdown waits for them too.
    let background = Rc::new(LocalTasks::default());
    ports.background = Some(background.clone());
    let scripts = crate::scripts::ScriptProcesses::new(script_program);
    let lore = Rc::new(
        Lore::new(ports, config)
            .with_rate_limiter(Rc::new(limiter))
            .with_script_slots(slots)
            .with_sql_cache(tables)
            .with_script_threads(scripts)
            .with_offload(Rc::new(crate::threads::ThreadPerJob)),
    );
    let active = Rc::new(Cell::new(0usize));
    // An idle worker still writes the usage counts it holds.
    let flusher = {
        let lore = lore.clone();
        tokio::task::spawn_local(async move {
            let every = Duration::from_millis(lore_records::metrics::FLUSH_EVERY_MS as u64);
            loop {
                tokio::time::sleep(every).await;
                lore.engine.flush_usage_if_due().await;
            }
        })
    };
    // Behaviors' schedules: a pass over the orgs that have any, now and then; the first
    // also starts those saved before schedules ran.
    let schedules = runs_schedules.then(|| {
        let lore = lore.clone();
        tokio::task::spawn_local(async move {
            let every = Duration::from_millis(lore_engine::schedules::PASS_EVERY_MS);
            let mut adopt = true;
            loop {
                let now = lore.ports().clock.now_ms();
                let report = lore.schedule_pass(now, adopt).await;
                adopt = false;
                if report["fired"].as_u64().unwrap_or(0) > 0
                    || report["errors"] != serde_json::json!([])
                {
                    tracing::info!(report = %report, "schedules ran");
                }
                tokio::time::sleep(every).await;
            }
        })
    });
    // Memories a restart or a failing embedder left without vectors: at start, then on the
    // schedules' timer (each org's queue drained by one drain at a time).
    let embedding = runs_schedules.then(|| {
        let lore = lore.clone();
        tokio::task::spawn_local(async move {
            let every = Duration::from_millis(lore_engine::schedules::PASS_EVERY_MS);
            loop {
                lore.embedding_pass().await;
                tokio::time::sleep(every).await;
            }
        })
    });
    loop {
        let (stream, peer) = tokio::select! {
            received = connections.recv() => match received {
                Some(c) => c,
                None => break,
            },
            _ = stop.changed() => break,
        };
        let stream = match tokio::net::TcpStream::from_std(stream) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "could not adopt a connection");
                open.fetch_sub(1, Ordering::Relaxed);
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let lore = lore.clone();
        let active = active.clone();
        let open = open.clone();
        let mut stop = stop.clone();
        active.set(active.get() + 1);
        tokio::task::spawn_local(async move {
            let service = service_fn(move |req| {
                let lore = lore.clone();
                async move { Ok::<_, Infallible>(respond(lore, req, peer, limits.body_timeout).await) }
            });
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = stop.changed() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
            active.set(active.get() - 1);
            open.fetch_sub(1, Ordering::Relaxed);
        });
    }
    let deadline = Instant::now() + limits.drain_timeout;
    while (active.get() > 0 || background.running.get() > 0) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Usage counters are buffered per instance; write them before the thread ends.
    flusher.abort();
    if let Some(schedules) = schedules {
        schedules.abort();
    }
    if let Some(embedding) = embedding {
        embedding.abort();
    }
    lore.engine.flush_usage().await;
    Ok(())
}

/// The background port: local tasks of a worker thread, counted so shutdown can wait.
#[derive(Default)]
struct LocalTasks {
    running: Rc<Cell<usize>>,
}

impl lore_base::ports::Background for LocalTasks {
    fn spawn(&self, task: Pin<Box<dyn std::future::Future<Output = ()>>>) {
        let running = self.running.clone();
        running.set(running.get() + 1);
        tokio::task::spawn_local(async move {
            task.await;
            running.set(running.get() - 1);
        });
    }
}

/// A response body fed by a channel: a streamed reply (SSE progress, then the result). It
/// holds the task that produces it: when hyper drops it (the client went away), the task is
/// aborted, and with it what the request was doing (a script's process is killed).
struct ChannelBody(
    mpsc::UnboundedReceiver<Bytes>,
    #[allow(dead_code)] // held for its drop
    AbortOnDrop,
);

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl hyper::body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0
            .poll_recv(cx)
            .map(|chunk| chunk.map(|b| Ok(Frame::data(b))))
    }
}

type ResponseBody = Either<Full<Bytes>, ChannelBody>;

/// Runs the core on a task of its own, so a streamed reply's head can be answered while the
/// core goes on producing its body.
async fn handle_streaming(
    lore: Rc<Lore>,
    request: http::Request<Vec<u8>>,
) -> hyper::Response<ResponseBody> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let out = Rc::new(Forward({
        let tx = tx.clone();
        move |part| {
            let _ = tx.send(part);
        }
    }));
    let core = tokio::task::spawn_local(async move {
        let response = lore.handle_streaming(request, out.clone()).await;
        // Once the head went out, the response is the rest of the body.
        let _ = tx.send(Streamed::Whole(response));
        drop(out);
    });
    // Dropped with this future (the client left before the head) or with the body.
    let core = AbortOnDrop(core.abort_handle());
    match rx.recv().await {
        Some(Streamed::Whole(response)) => {
            response.map(|b| Either::Left(Full::new(Bytes::from(b))))
        }
        Some(Streamed::Head(status, headers)) => {
            let (body_tx, body_rx) = mpsc::unbounded_channel();
            tokio::task::spawn_local(async move {
                while let Some(message) = rx.recv().await {
                    let bytes = match message {
                        Streamed::Chunk(b) => b,
                        Streamed::Whole(rest) => rest.into_body(),
                        Streamed::Head(..) => continue,
                    };
                    if body_tx.send(Bytes::from(bytes)).is_err() {
                        break; // the client went away
                    }
                }
            });
            let mut response = hyper::Response::new(Either::Right(ChannelBody(body_rx, core)));
            *response.status_mut() =
                http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::OK);
            for (name, value) in headers {
                if let (Ok(name), Ok(value)) = (
                    http::HeaderName::try_from(name.as_str()),
                    http::HeaderValue::try_from(value.as_str()),
                ) {
                    response.headers_mut().append(name, value);
                }
            }
            response
        }
        Some(Streamed::Chunk(_)) | None => {
            let e = RpcError::internal("the reply ended before it started");
            McpReply::error(&e, None)
                .into_http()
                .map(|b| Either::Left(Full::new(Bytes::from(b))))
        }
    }
}

/// Reads a request body to its end without keeping it.
async fn discard(mut body: Incoming) {
    while let Some(Ok(_)) = body.frame().await {}
}

async fn respond(
    lore: Rc<Lore>,
    req: hyper::Request<Incoming>,
    peer: SocketAddr,
    body_timeout: Duration,
) -> hyper::Response<ResponseBody> {
    let started = Instant::now();
    let (mut parts, body) = req.into_parts();
    // Who is asking, for what a request without credentials may do (`ClientAddr`).
    parts
        .extensions
        .insert(lore_base::ports::ClientAddr(peer.ip()));
    let method = parts.method.clone();
    let path = parts.uri.path().to_string();
    let limit = lore.config.max_body_bytes;
    let declared = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let full = |r: http::Response<Vec<u8>>| r.map(|b| Either::Left(Full::new(Bytes::from(b))));
    let too_large = || full(McpReply::error(&lore_front::mcp::too_large(limit), None).into_http());
    let response = if let Some(n) = declared.filter(|&n| n > limit as u64) {
        // Refused without buffering it. A body up to a few times the limit is read and thrown
        // away first, so the client, still sending, reads the 413 instead of a reset; a larger
        // one is cut off.
        if n <= 4 * limit as u64 {
            let _ = tokio::time::timeout(body_timeout, discard(body)).await;
        }
        too_large()
    } else {
        match tokio::time::timeout(body_timeout, Limited::new(body, limit).collect()).await {
            Ok(Ok(collected)) => {
                let body = collected.to_bytes().to_vec();
                let may_stream = lore_front::mcp::reply::may_stream(&method, &path, &body);
                let request = http::Request::from_parts(parts, body);
                if may_stream {
                    handle_streaming(lore.clone(), request).await
                } else {
                    full(lore.handle(request).await)
                }
            }
            Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => too_large(),
            Ok(Err(_)) => {
                let e = RpcError::invalid_request("the request body could not be read to its end");
                full(McpReply::error(&e, None).into_http())
            }
            Err(_) => {
                let e = RpcError::new(
                    jsonrpc::INVALID_REQUEST,
                    format!(
                        "the request body took longer than {} s to arrive",
                        body_timeout.as_secs()
                    ),
                    408,
                );
                full(
                    McpReply::error(&e, None)
                        .header("connection", "close")
                        .into_http(),
                )
            }
        }
    };
    // The core wrote the request's line (`lore::request`); this one adds the connection.
    tracing::debug!(
        target: "lore::connection",
        %peer,
        request_id = response
            .headers()
            .get(lore_front::request_log::REQUEST_ID_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("-"),
        method = %method,
        status = response.status().as_u16(),
        duration_us = started.elapsed().as_micros() as u64,
    );
    response
}
