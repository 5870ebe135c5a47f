//! lore on Fermyon Spin. A thin adapter: it turns a `wasi:http` request into the core's
//! `http::Request<Vec<u8>>`, hands it to [`lore_front::Lore::handle`], and turns the answer back; and
//! it implements the core's ports on Spin (Spin SQLite storage, Spin key-value as the cache,
//! the WASI clock and random, outbound `wasi:http`, Spin variables for configuration). Every
//! behaviour lives in the core.
//!
//! Spin instantiates a fresh component per request, so nothing survives in memory between
//! requests: every request builds its [`Lore`] and reads what it needs from SQLite, or from
//! key-value where the core caches it (verified tokens).

/// The sandbox's memory cap counts what scripts allocate through this wrapper.
#[global_allocator]
static ALLOCATOR: lore_meter::Metered<std::alloc::System> = lore_meter::Metered(std::alloc::System);

mod kv;
mod llm;
mod ports;
mod sqlite;
#[cfg(feature = "test-build")]
mod test_routes;

use std::collections::HashMap;
use std::rc::Rc;

use bytes::Bytes;
use http_body_util::Full;
use lore_base::ports::{Embedder, HttpClient, Ports};
use lore_embed::builtin::BuiltinEmbedder;
use lore_embed::openai::OpenAiEmbedder;
use lore_front::config::Spelling;
use lore_front::{Config, Lore};
use spin_sdk::http::body::IncomingBodyExt;
use spin_sdk::http::{Request, StatusCode};
use spin_sdk::http_service;

pub use kv::{KV_STORE, SpinKvCache};
pub use ports::{SpinClock, SpinHttp, WasiRandom};
pub use sqlite::{DATABASE, SpinSqliteStorage};
/// How many usage-counter names Spin instances share (see `instance`).
const USAGE_SLOTS: u8 = 16;

type Answer = http::Response<Full<Bytes>>;

fn plain(status: StatusCode, message: String) -> Answer {
    let mut response = http::Response::new(Full::new(Bytes::from(message)));
    *response.status_mut() = status;
    response
}

/// The core's response as a Spin response.
fn from_core(response: http::Response<Vec<u8>>) -> Answer {
    response.map(|body| Full::new(Bytes::from(body)))
}

/// The Spin request as the core's request: method, path and query, headers, whole body.
async fn to_core(request: Request) -> Result<http::Request<Vec<u8>>, String> {
    let (parts, body) = request.into_parts();
    let body = body
        .bytes()
        .await
        .map_err(|e| format!("reading the request body failed: {e:?}"))?;
    let path_and_query = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let mut builder = http::Request::builder()
        .method(parts.method)
        .uri(path_and_query);
    for (name, value) in &parts.headers {
        builder = builder.header(name, value);
    }
    // Spin says who is asking in `spin-client-addr` (`ip:port`), which it sets itself.
    let client = parts
        .headers
        .get("spin-client-addr")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<std::net::SocketAddr>().ok())
        .map(|a| lore_base::ports::ClientAddr(a.ip()));
    if let Some(client) = client {
        builder = builder.extension(client);
    }
    // `wasi:http` carries the authority beside the headers, not as a `Host` header; the core's
    // Host and Origin checks read `Host`.
    if !parts.headers.contains_key(http::header::HOST)
        && let Some(authority) = parts.uri.authority()
    {
        builder = builder.header(http::header::HOST, authority.as_str());
    }
    builder
        .body(body.to_vec())
        .map_err(|e| format!("unusable request: {e}"))
}

/// Every variable the core's configuration reads (`lore_front::config::VARIABLES`, lower-case as
/// Spin spells them: `[variables]` in `spin.toml`, set with `SPIN_VARIABLE_*` or
/// `spin up --variable`; the dev host takes `--var NAME=VALUE`). Unset and undeclared
/// variables are absent.
async fn variables() -> HashMap<String, String> {
    let mut values = HashMap::new();
    for name in lore_front::config::VARIABLES {
        let name = Spelling::Lower.spell(name);
        if let Ok(value) = spin_sdk::variables::get(&name).await {
            values.insert(name, value);
        }
    }
    values
}

async fn instance() -> Result<Lore, String> {
    let variables = variables().await;
    let lookup = |name: &str| variables.get(name).cloned();
    let config = Config::from_vars(Spelling::Lower, lookup, cfg!(feature = "test-build"))?;
    let storage = SpinSqliteStorage::open(DATABASE)
        .await
        .map_err(|e| e.to_string())?;
    let clock = Rc::new(SpinClock);
    let http: Rc<dyn HttpClient> = Rc::new(SpinHttp);
    let cache = Rc::new(SpinKvCache::new(KV_STORE, clock.clone()));
    // all-MiniLM-L6-v2 from the platform (`llm.rs`), else the built-in table compiled in.
    let embedder: Rc<dyn Embedder> =
        match lore_front::config::embeddings_from_vars(Spelling::Lower, lookup)? {
            Some(endpoint) => Rc::new(OpenAiEmbedder::new(endpoint, http.clone())),
            None if lookup("lore_embedder").as_deref() == Some("builtin") => {
                Rc::new(BuiltinEmbedder::new())
            }
            None if llm::platform_embeds(cache.as_ref()).await => Rc::new(llm::SpinLlmEmbedder),
            None => Rc::new(BuiltinEmbedder::new()),
        };
    let ports = Ports {
        storage: Rc::new(storage),
        clock: clock.clone(),
        random: Rc::new(WasiRandom),
        http: Some(http.clone()),
        embedder: Some(embedder),
        cache: Some(cache),
        background: None,
    };
    // Usage counts: a fresh instance per request flushes its one count before it ends, into
    // the keys of its instance name. A random name per instance would add a key per tool call
    // for good; one of USAGE_SLOTS names keeps them bounded (concurrent requests that share one
    // add under preconditions and retry).
    let mut slot = [0u8; 1];
    ports.random.fill(&mut slot);
    let instance = format!("spin{}", slot[0] % USAGE_SLOTS);
    let limiter = Rc::new(kv::SpinKvLimiter::new(KV_STORE, clock));
    Ok(Lore::with_usage_instance(ports, config, instance)
        .with_rate_limiter(limiter)
        .serving_one_request())
}

#[http_service]
async fn handle(request: Request) -> Answer {
    let request = match to_core(request).await {
        Ok(r) => r,
        Err(e) => return plain(StatusCode::BAD_REQUEST, e),
    };
    let lore = match instance().await {
        Ok(l) => l,
        Err(e) => return plain(StatusCode::INTERNAL_SERVER_ERROR, e),
    };
    #[cfg(feature = "test-build")]
    if let Some(response) = test_routes::handle(&request).await {
        return from_core(response);
    }
    let response = lore.handle(request).await;
    // The request's structured log line: Spin keeps a component's standard output as its log.
    if let Some(line) = lore_front::request_log::Line::of(&response) {
        println!("{line}");
    }
    // The instance ends with this request and its memory with it: taking the instance's caches
    // apart first would only delay the answer.
    std::mem::forget(lore);
    from_core(response)
}
