//! The Worker's platform, shared by the Worker's `fetch` and the org objects: its bindings, the
//! core's ports and configuration over them, and requests and responses translated between
//! Workers and the core's `http` types.

use std::rc::Rc;

use lore_base::cache::MemoryCache;
use lore_base::ports::{Embedder, Ports};
use lore_base::storage::Storage;
use lore_front::Config;
use lore_front::config::Spelling;
use wasm_bindgen::JsCast;
use worker::{Ai, Env, Headers, Request, Response, ResponseBuilder};

use crate::ports::{WebCryptoRandom, WorkersAiEmbedder, WorkersClock, WorkersFetch};

/// The D1 database binding (`[[d1_databases]] binding` in `wrangler.toml`).
pub const D1_BINDING: &str = "DB";
/// The Workers AI binding (`[ai] binding`).
pub const AI_BINDING: &str = "AI";

/// The Workers AI binding, if configured. Checked by shape rather than by constructor name, so
/// a binding that wraps Workers AI (as local tests do) is accepted too.
fn ai_binding(env: &Env) -> Option<Ai> {
    let value = js_sys::Reflect::get(env, &AI_BINDING.into()).ok()?;
    let run = js_sys::Reflect::get(&value, &"run".into()).ok()?;
    run.is_function().then(|| value.unchecked_into())
}

/// The ports of an instance of the core on Workers over `storage` (the directory on D1 and
/// each org's object, [`crate::org_object::split_storage`]); the caller adds its background port.
pub(crate) fn platform_ports(env: &Env, storage: Rc<dyn Storage>) -> Ports {
    let embedder =
        ai_binding(env).map(|ai| Rc::new(WorkersAiEmbedder::new(ai)) as Rc<dyn Embedder>);
    let clock: Rc<dyn lore_base::ports::Clock> = Rc::new(WorkersClock);
    Ports {
        storage,
        // The instance's memory: verified credentials (checked against the org's auth stamp
        // in the org's object) and the org each token routes to. Workers KV is not needed,
        // and being eventually consistent it could not hold a revocation at once.
        cache: Some(Rc::new(MemoryCache::new(clock.clone()))),
        clock,
        random: Rc::new(WebCryptoRandom),
        http: Some(Rc::new(WorkersFetch)),
        embedder,
        background: None,
    }
}

/// The core's configuration (`lore_front::config`) from the Worker's `[vars]` and secrets (client
/// secrets and `LORE_OPERATOR_SECRET` are put with `wrangler secret put`).
pub(crate) fn config(env: &Env) -> Result<Config, String> {
    let lookup = |name: &str| {
        env.var(name)
            .or_else(|_| env.secret(name))
            .ok()
            .map(|v| v.to_string())
    };
    Config::from_vars(Spelling::Upper, lookup, cfg!(feature = "test-build"))
}

/// The Worker request as the core's request: method, path and query, headers, whole body.
pub(crate) async fn to_http(mut request: Request) -> worker::Result<http::Request<Vec<u8>>> {
    let url = request.url()?;
    let path_and_query = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_string(),
    };
    let mut builder = http::Request::builder()
        .method(request.method().as_ref())
        .uri(path_and_query);
    // Cloudflare says who is asking in `CF-Connecting-IP`, which it sets itself.
    if let Some(ip) = request
        .headers()
        .get("cf-connecting-ip")?
        .and_then(|v| v.parse::<std::net::IpAddr>().ok())
    {
        builder = builder.extension(lore_base::ports::ClientAddr(ip));
    }
    for (name, value) in request.headers() {
        builder = builder.header(name, value);
    }
    let body = request.bytes().await?;
    builder
        .body(body)
        .map_err(|e| worker::Error::RustError(format!("unusable request: {e}")))
}

/// `http` headers as Worker headers (values that are not visible ASCII are left out).
pub(crate) fn worker_headers(map: &http::HeaderMap) -> worker::Result<Headers> {
    let headers = Headers::new();
    for (name, value) in map {
        if let Ok(value) = value.to_str() {
            headers.append(name.as_str(), value)?;
        }
    }
    Ok(headers)
}

/// The core's response as a Worker response.
pub(crate) fn from_http(response: http::Response<Vec<u8>>) -> worker::Result<Response> {
    let (parts, body) = response.into_parts();
    let headers = worker_headers(&parts.headers)?;
    let builder = ResponseBuilder::new()
        .with_status(parts.status.as_u16())
        .with_headers(headers);
    // 204 and 304 must not carry a body, not even an empty one.
    Ok(if body.is_empty() {
        builder.empty()
    } else {
        builder.fixed(body)
    })
}
