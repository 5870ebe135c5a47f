//! lore on Cloudflare Workers. A thin adapter: it turns a Worker `fetch` into the core's
//! `http::Request<Vec<u8>>`, hands it to [`lore_front::Lore::handle`], and turns the answer back; and
//! it implements the core's ports on the platform (D1 storage, `Date.now()`, Web Crypto,
//! `fetch`, Workers AI). Every behaviour lives in the core.
//!
//! One [`lore_front::Lore`] is kept per isolate, so its caches (each org's memory index) serve every
//! later request the isolate gets; a new isolate builds them again from D1.

/// The sandbox's memory cap counts what scripts allocate through this wrapper.
#[global_allocator]
static ALLOCATOR: lore_meter::Metered<std::alloc::System> = lore_meter::Metered(std::alloc::System);

mod d1;
mod limiter;
mod ports;
#[cfg(feature = "test-build")]
mod test_routes;

use std::cell::RefCell;
use std::rc::Rc;

use lore_base::ports::{Embedder, Ports};
use lore_front::config::Spelling;
use lore_front::{Config, Lore};
use wasm_bindgen::JsCast;
use worker::{Ai, Context, Env, Headers, Request, Response, ResponseBuilder, event};

pub use d1::D1Storage;
pub use ports::{EMBEDDING_MODEL, WebCryptoRandom, WorkersAiEmbedder, WorkersClock, WorkersFetch};

/// The D1 database binding (`[[d1_databases]] binding` in `wrangler.toml`).
pub const D1_BINDING: &str = "DB";
/// The Workers AI binding (`[ai] binding`).
pub const AI_BINDING: &str = "AI";

thread_local! {
    /// The isolate's core instance, built on its first request.
    static INSTANCE: RefCell<Option<Rc<Lore>>> = const { RefCell::new(None) };
}

/// The Workers AI binding, if configured. Checked by shape rather than by constructor name, so
/// a binding that wraps Workers AI (as local tests do) is accepted too.
fn ai_binding(env: &Env) -> Option<Ai> {
    let value = js_sys::Reflect::get(env, &AI_BINDING.into()).ok()?;
    let run = js_sys::Reflect::get(&value, &"run".into()).ok()?;
    run.is_function().then(|| value.unchecked_into())
}

fn ports(env: &Env) -> worker::Result<Ports> {
    let embedder =
        ai_binding(env).map(|ai| Rc::new(WorkersAiEmbedder::new(ai)) as Rc<dyn Embedder>);
    Ok(Ports {
        storage: Rc::new(D1Storage::new(env.d1(D1_BINDING)?)),
        clock: Rc::new(WorkersClock),
        random: Rc::new(WebCryptoRandom),
        http: Some(Rc::new(WorkersFetch)),
        embedder,
        // Workers KV is eventually consistent: a deleted entry may be served elsewhere for up
        // to 60 s, so revoked tokens would not stop at once. The isolate's memory is the cache.
        cache: None,
        background: Some(Rc::new(ports::AfterAnswer)),
    })
}

/// The core's configuration (`lore_front::config`) from the Worker's `[vars]` and secrets (client
/// secrets and `LORE_OPERATOR_SECRET` are put with `wrangler secret put`).
fn config(env: &Env) -> Result<Config, String> {
    let lookup = |name: &str| {
        env.var(name)
            .or_else(|_| env.secret(name))
            .ok()
            .map(|v| v.to_string())
    };
    Config::from_vars(Spelling::Upper, lookup, cfg!(feature = "test-build"))
}

/// The isolate's instance, built from `env` on first use.
fn instance(env: &Env) -> worker::Result<Rc<Lore>> {
    if let Some(lore) = INSTANCE.with(|i| i.borrow().clone()) {
        return Ok(lore);
    }
    let config = config(env).map_err(worker::Error::RustError)?;
    let mut lore = Lore::new(ports(env)?, config);
    if let Some(limiter) = limiter::DurableLimiter::from_env(env) {
        lore = lore.with_rate_limiter(Rc::new(limiter));
    }
    let lore = Rc::new(lore);
    INSTANCE.with(|i| *i.borrow_mut() = Some(lore.clone()));
    Ok(lore)
}

/// The Worker request as the core's request: method, path and query, headers, whole body.
async fn to_http(mut request: Request) -> worker::Result<http::Request<Vec<u8>>> {
    let url = request.url()?;
    let path_and_query = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_string(),
    };
    let mut builder = http::Request::builder()
        .method(request.method().as_ref())
        .uri(path_and_query);
    for (name, value) in request.headers() {
        builder = builder.header(name, value);
    }
    let body = request.bytes().await?;
    builder
        .body(body)
        .map_err(|e| worker::Error::RustError(format!("unusable request: {e}")))
}

/// The core's response as a Worker response.
fn from_http(response: http::Response<Vec<u8>>) -> worker::Result<Response> {
    let (parts, body) = response.into_parts();
    let headers = Headers::new();
    for (name, value) in &parts.headers {
        if let Ok(value) = value.to_str() {
            headers.append(name.as_str(), value)?;
        }
    }
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

#[event(fetch)]
async fn fetch(request: Request, env: Env, ctx: Context) -> worker::Result<Response> {
    let ctx = Rc::new(ctx);
    let lore = instance(&env)?;
    let request = to_http(request).await?;
    #[cfg(feature = "test-build")]
    if let Some(response) = test_routes::handle(&lore, &env, &request).await {
        ports::hand_over(&ctx);
        return from_http(response);
    }
    let response = lore.handle(request).await;
    // What the core left for after the answer runs under this request's `waitUntil`.
    ports::hand_over(&ctx);
    // The request's structured log line, for `wrangler tail` and Workers Logs.
    if let Some(line) = lore_front::request_log::Line::of(&response) {
        worker::console_log!("{}", line.0);
    }
    from_http(response)
}
