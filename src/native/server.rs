//! `lore serve`: a hyper HTTP/1.1 server, one thread per core. Each worker thread runs its own
//! single-threaded tokio runtime, its own core instance ([`crate::Lore`]) and its own SQLite
//! connection. The main thread accepts connections and hands them to the workers in turn
//! (round robin: workers accepting from one shared socket left one worker with nearly every
//! keep-alive connection under load). Core futures are not `Send`, so nothing crosses threads
//! but accepted sockets and the shutdown signal.

use std::cell::Cell;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::Context;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::{mpsc, watch};

use crate::{Config, Lore};

use super::ports::native_ports;

pub struct ServeOptions {
    pub addr: SocketAddr,
    pub db: PathBuf,
    pub config: Config,
    pub workers: usize,
    /// How long a client may take to send its request headers.
    pub header_timeout: Duration,
    /// How long in-flight requests may finish after SIGINT/SIGTERM.
    pub drain_timeout: Duration,
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
    for n in 0..options.workers.max(1) {
        let (inbox, connections) = mpsc::unbounded_channel();
        inboxes.push(inbox);
        let stop = stop_rx.clone();
        let db = options.db.clone();
        let config = options.config.clone();
        let header_timeout = options.header_timeout;
        let drain = options.drain_timeout;
        let handle = std::thread::Builder::new()
            .name(format!("lore-worker-{n}"))
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                let local = tokio::task::LocalSet::new();
                local.block_on(
                    &rt,
                    worker(connections, db, config, stop, header_timeout, drain),
                )
            })?;
        workers.push(handle);
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

async fn worker(
    mut connections: mpsc::UnboundedReceiver<(std::net::TcpStream, SocketAddr)>,
    db: PathBuf,
    config: Config,
    mut stop: watch::Receiver<bool>,
    header_timeout: Duration,
    drain_timeout: Duration,
) -> anyhow::Result<()> {
    let ports =
        native_ports(&db).with_context(|| format!("cannot open database {}", db.display()))?;
    let lore = Rc::new(Lore::new(ports, config));
    let active = Rc::new(Cell::new(0usize));
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
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let lore = lore.clone();
        let active = active.clone();
        let mut stop = stop.clone();
        active.set(active.get() + 1);
        tokio::task::spawn_local(async move {
            let service = service_fn(move |req| {
                let lore = lore.clone();
                async move { Ok::<_, Infallible>(respond(&lore, req, peer).await) }
            });
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
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
        });
    }
    let deadline = Instant::now() + drain_timeout;
    while active.get() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

async fn respond(
    lore: &Lore,
    req: hyper::Request<Incoming>,
    peer: SocketAddr,
) -> hyper::Response<Full<Bytes>> {
    let started = Instant::now();
    let (parts, body) = req.into_parts();
    let method = parts.method.clone();
    let path = parts.uri.path().to_string();
    let limit = lore.config.max_body_bytes;
    let response = match Limited::new(body, limit).collect().await {
        Ok(collected) => {
            lore.handle(http::Request::from_parts(
                parts,
                collected.to_bytes().to_vec(),
            ))
            .await
        }
        Err(_) => crate::mcp::reply::Reply::error(&crate::mcp::too_large(limit), None).into_http(),
    };
    tracing::info!(
        target: "lore::request",
        %peer,
        method = %method,
        path = %path,
        status = response.status().as_u16(),
        duration_us = started.elapsed().as_micros() as u64,
    );
    response.map(|b| Full::new(Bytes::from(b)))
}
