//! A local stand-in for `spin up`: serves lore's Spin component over HTTP on wasmtime, with
//! `spin:sqlite` and `spin:key-value` backed by SQLite files (rusqlite: `--db` and `--kv`),
//! `spin:variables` from `--var` and `fermyon:spin/llm`'s embeddings from `--state-dir`. One fresh component instance per request, as Spin does.
//!
//! It refuses a component that imports anything it does not provide (see [`imports`]).

mod imports;
mod llm;
mod spin;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::error::Context;
use wasmtime::{Config, Engine, Store};
use wasmtime::{Result, bail};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::p3::bindings::ServicePre;
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

#[derive(Parser)]
#[command(about = "Serve a Spin HTTP component (WASI 0.3) locally, with spin:sqlite on SQLite")]
struct Args {
    /// The component (.wasm), e.g. target/wasm32-wasip2/spin/lore_spin.wasm
    component: PathBuf,
    /// Print the component's imports, check them against what this host provides, and exit
    /// (status 1 when one is not provided).
    #[arg(long)]
    check_imports: bool,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:3000")]
    addr: SocketAddr,
    /// The SQLite file behind the "default" spin:sqlite database.
    #[arg(long, default_value = "lore-spin.db")]
    db: PathBuf,
    /// The SQLite file behind the "default" spin:key-value store (default: beside --db, its
    /// name with "-kv" added, e.g. lore-spin-kv.db).
    #[arg(long)]
    kv: Option<PathBuf>,
    /// Where compiled components are cached (wasmtime's cache; default: its own directory,
    /// ~/.cache/wasmtime on Linux). A cached component starts in well under a second instead
    /// of being compiled by Cranelift again.
    #[arg(long, conflicts_with = "no_compile_cache")]
    compile_cache: Option<PathBuf>,
    /// Compile the component afresh, without reading or writing the compile cache.
    #[arg(long)]
    no_compile_cache: bool,
    /// Log every SQL statement and key-value call with its duration to stderr.
    #[arg(long)]
    trace: bool,
    /// Spin's state directory: the embeddings model is read from its `ai-models/`, as `spin up`
    /// reads `<app dir>/.spin/ai-models/` (default: `.spin` beside the component; `lore model
    /// --spin-app <that folder>` puts the model there).
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// A Spin variable, NAME=VALUE (repeatable).
    #[arg(long = "var", value_parser = parse_var)]
    vars: Vec<(String, String)>,
}

fn parse_var(s: &str) -> Result<(String, String), String> {
    let (name, value) = s
        .split_once('=')
        .ok_or_else(|| format!("--var takes NAME=VALUE, got {s:?}"))?;
    Ok((name.to_ascii_lowercase(), value.to_string()))
}

/// Per-request state of one component instance.
pub struct State {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    table: ResourceTable,
    pub spin: spin::SpinState,
}

impl spin::WithSpin for State {
    fn spin(&mut self) -> &mut spin::SpinState {
        &mut self.spin
    }
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for State {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: wasmtime_wasi_http::default_hooks(),
        }
    }
}

struct Server {
    engine: Engine,
    pre: ServicePre<State>,
    shared: Arc<spin::Shared>,
}

impl Server {
    /// Serves one request on a fresh instance. The response carries how long instantiating the
    /// component and running it took, as `server-timing: instantiate;dur=…, component;dur=…`
    /// (milliseconds; the dev host's own header, which Spin does not send).
    #[expect(
        clippy::disallowed_methods,
        reason = "the host, not the core: it times the instance it runs"
    )]
    async fn serve(
        &self,
        request: hyper::Request<hyper::body::Incoming>,
    ) -> Result<hyper::Response<Full<Bytes>>> {
        let started = std::time::Instant::now();
        let mut store = Store::new(
            &self.engine,
            State {
                wasi: WasiCtx::builder().inherit_stderr().build(),
                http: WasiHttpCtx::default(),
                table: ResourceTable::new(),
                spin: spin::SpinState::new(self.shared.clone()),
            },
        );
        spin::traced(|_| format!("request {}", request.uri()), || ());
        let service = self.pre.instantiate_async(&mut store).await?;
        let instantiated = started.elapsed();
        spin::traced(|_| "instantiated".into(), || ());
        let (parts, body) = request.into_parts();
        let body = body.collect().await?.to_bytes();
        // The guest sees an absolute URI, as under Spin.
        let host = parts
            .headers
            .get(http::header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("localhost")
            .to_string();
        let uri = format!(
            "http://{host}{}",
            parts.uri.path_and_query().map_or("/", |p| p.as_str())
        );
        let mut request = http::Request::builder().method(parts.method).uri(uri);
        for (name, value) in &parts.headers {
            request = request.header(name, value);
        }
        let request = request.body(Full::new(body))?;
        let (request, _io) = wasmtime_wasi_http::p3::Request::from_http(
            wasmtime_wasi_http::default_hooks(),
            request,
        );
        let response = store
            .run_concurrent(async |accessor| -> Result<_> {
                let response = match service.handle(accessor, request).await? {
                    Ok(r) => r,
                    Err(code) => bail!("the component failed the request: {code:?}"),
                };
                let response =
                    accessor.with(|access| response.into_http(access, async { Ok(()) }))?;
                let (parts, body) = response.into_parts();
                let body = body
                    .collect()
                    .await
                    .map_err(|e| wasmtime::format_err!("response body: {e:?}"))?
                    .to_bytes();
                Ok(hyper::Response::from_parts(parts, Full::new(body)))
            })
            .await??;
        spin::traced(|_| "responded".into(), || ());
        let mut response = response;
        let timing = format!(
            "instantiate;dur={:.3}, component;dur={:.3}",
            instantiated.as_secs_f64() * 1000.0,
            (started.elapsed() - instantiated).as_secs_f64() * 1000.0
        );
        if let Ok(value) = http::HeaderValue::from_str(&timing) {
            response.headers_mut().append("server-timing", value);
        }
        Ok(response)
    }
}

/// The default key-value file: `lore-spin.db` → `lore-spin-kv.db`, in the same directory.
fn kv_beside(db: &std::path::Path) -> PathBuf {
    let stem = db
        .file_stem()
        .map_or("lore-spin".into(), |s| s.to_string_lossy());
    let name = match db.extension() {
        Some(ext) => format!("{stem}-kv.{}", ext.to_string_lossy()),
        None => format!("{stem}-kv"),
    };
    db.with_file_name(name)
}

#[cfg(test)]
fn engine() -> Result<Engine> {
    engine_with(None)
}

/// The engine, with wasmtime's compile cache when `cache` is given (`Some(None)`: its default
/// directory).
fn engine_with(cache: Option<Option<PathBuf>>) -> Result<Engine> {
    let mut config = Config::new();
    config.wasm_component_model_async(true);
    config.concurrency_support(true);
    if std::env::var_os("LORE_HOST_PERFMAP").is_some() {
        // `perf record` then names the component's functions (/tmp/perf-{pid}.map).
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    if let Some(directory) = cache {
        let mut cache_config = wasmtime::CacheConfig::new();
        if let Some(directory) = directory {
            cache_config.with_directory(directory);
        }
        config.cache(Some(wasmtime::Cache::new(cache_config)?));
    }
    Engine::new(&config)
}

#[tokio::main]
#[expect(
    clippy::disallowed_methods,
    reason = "the host, not the core: it times loading the component for its startup line"
)]
async fn main() -> Result<()> {
    let args = Args::parse();
    spin::TRACE.store(args.trace, std::sync::atomic::Ordering::Relaxed);
    let engine = engine_with((!args.no_compile_cache).then(|| args.compile_cache.clone()))?;
    let loading = std::time::Instant::now();
    let component = Component::from_file(&engine, &args.component)
        .with_context(|| format!("loading {}", args.component.display()))?;
    let loaded_ms = loading.elapsed().as_millis();
    if args.check_imports {
        for (name, _) in component.component_type().imports(&engine) {
            println!("{name}");
        }
    }
    imports::check(&engine, &component)?;
    if args.check_imports {
        return Ok(());
    }
    let mut linker = Linker::<State>::new(&engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    wasmtime_wasi::p3::add_to_linker(&mut linker)?;
    wasmtime_wasi_http::p3::add_to_linker(&mut linker)?;
    spin::add_to_linker(&mut linker)?;
    let state_dir = args.state_dir.clone().unwrap_or_else(|| {
        args.component
            .parent()
            .unwrap_or(std::path::Path::new("."))
            .join(".spin")
    });
    llm::add_to_linker(&mut linker, llm::Models::under(state_dir))?;
    let pre = ServicePre::new(linker.instantiate_pre(&component)?)?;
    let kv = args.kv.clone().unwrap_or_else(|| kv_beside(&args.db));
    let shared = Arc::new(spin::Shared::open(&args.db, &kv, args.vars)?);
    let server = Arc::new(Server {
        engine,
        pre,
        shared,
    });
    let listener = tokio::net::TcpListener::bind(args.addr).await?;
    eprintln!(
        "lore-spin-host: serving {} on http://{} (sqlite {}, key-value {}; component loaded in {loaded_ms} ms)",
        args.component.display(),
        listener.local_addr()?,
        args.db.display(),
        kv.display()
    );
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => accepted?,
            _ = tokio::signal::ctrl_c() => return Ok(()),
        };
        let server = server.clone();
        tokio::spawn(async move {
            let service = service_fn(move |mut request: hyper::Request<hyper::body::Incoming>| {
                let server = server.clone();
                // As Spin does: the client's address, for the component.
                request.headers_mut().remove("spin-client-addr");
                if let Ok(value) = http::HeaderValue::from_str(&peer.to_string()) {
                    request.headers_mut().insert("spin-client-addr", value);
                }
                async move {
                    Ok::<_, std::convert::Infallible>(match server.serve(request).await {
                        Ok(response) => response,
                        Err(e) => {
                            eprintln!("lore-spin-host: request failed: {e:?}");
                            let mut response = hyper::Response::new(Full::new(Bytes::from(
                                format!("component error: {e}"),
                            )));
                            *response.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
                            response
                        }
                    })
                }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
