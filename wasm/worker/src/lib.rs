//! lore on Cloudflare Workers. A thin adapter: it turns a Worker `fetch` into the core's
//! `http::Request<Vec<u8>>`, hands it to [`lore_front::Lore::handle`], and turns the answer back; and
//! it implements the core's ports on the platform (D1 storage, `Date.now()`, Web Crypto,
//! `fetch`, Workers AI). Every behaviour lives in the core.
//!
//! Every org is a Durable Object ([`org_object::OrgObject`]) holding the org's data in its own
//! SQLite and one warm instance of the core: the Worker is the front, and hands each
//! org-scoped request (`/mcp`, `/api/{org}/…`, `/hooks/{org}/…`) to its org's object
//! ([`lore_front::Lore::home_org`] says which), unchanged. What belongs to no org (OAuth,
//! metadata, operator routes) the Worker serves itself, with one [`lore_front::Lore`] per
//! isolate over the directory in D1 and the orgs' objects.

/// The sandbox's memory cap counts what scripts allocate through this wrapper.
#[global_allocator]
static ALLOCATOR: lore_meter::Metered<std::alloc::System> = lore_meter::Metered(std::alloc::System);

mod alarms;
mod d1;
mod object_store;
mod org_object;
mod ports;
mod routing;
mod stream;
#[cfg(feature = "test-build")]
mod test_routes;

use std::cell::RefCell;
use std::rc::Rc;

use lore_base::cache::MemoryCache;
use lore_base::ports::{Embedder, Ports};
use lore_base::storage::Storage;
use lore_front::config::Spelling;
use lore_front::{Config, Lore};
use wasm_bindgen::JsCast;
use worker::{Ai, Context, Env, Headers, Request, Response, ResponseBuilder, event};

pub use d1::D1Storage;
pub use object_store::ObjectStorage;
pub use org_object::OrgObject;
pub use ports::{EMBEDDING_MODEL, WebCryptoRandom, WorkersAiEmbedder, WorkersClock, WorkersFetch};

/// The D1 database binding (`[[d1_databases]] binding` in `wrangler.toml`).
pub const D1_BINDING: &str = "DB";
/// The Workers AI binding (`[ai] binding`).
pub const AI_BINDING: &str = "AI";

thread_local! {
    /// The isolate's core instance, built on its first request, and what it left for after
    /// the answer.
    static INSTANCE: RefCell<Option<Instance>> = const { RefCell::new(None) };
}

/// The Workers AI binding, if configured. Checked by shape rather than by constructor name, so
/// a binding that wraps Workers AI (as local tests do) is accepted too.
fn ai_binding(env: &Env) -> Option<Ai> {
    let value = js_sys::Reflect::get(env, &AI_BINDING.into()).ok()?;
    let run = js_sys::Reflect::get(&value, &"run".into()).ok()?;
    run.is_function().then(|| value.unchecked_into())
}

/// The ports of an instance of the core on Workers over `storage` (the directory on D1 and
/// each org's object, [`org_object::split_storage`]); the caller adds its background port.
fn platform_ports(env: &Env, storage: Rc<dyn Storage>) -> Ports {
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

/// The Worker's own instance of the core, with what it left for after the answer and its
/// count of subrequests.
#[derive(Clone)]
struct Instance {
    lore: Rc<Lore>,
    after: ports::AfterAnswer,
    subrequests: ports::Subrequests,
}

/// Test builds with `LORE_TEST_ORGS_IN_D1=1`: the Worker serves every org itself over D1, as
/// before org objects (the design `bench/cold.sh` compares with). Never in the product.
fn orgs_in_d1(env: &Env) -> bool {
    cfg!(feature = "test-build")
        && env
            .var("LORE_TEST_ORGS_IN_D1")
            .is_ok_and(|v| v.to_string() == "1")
}

/// The isolate's instance, built from `env` on first use.
fn instance(env: &Env) -> worker::Result<Instance> {
    if let Some(found) = INSTANCE.with(|i| i.borrow().clone()) {
        return Ok(found);
    }
    let config = config(env).map_err(worker::Error::RustError)?;
    let after = ports::AfterAnswer::default();
    let subrequests = ports::Subrequests::for_env(env);
    let later = alarms::Later::new(after.clone(), env.clone(), subrequests.clone(), None);
    let storage: Rc<dyn Storage> = if orgs_in_d1(env) {
        Rc::new(D1Storage::counted(env.d1(D1_BINDING)?, subrequests.clone()))
    } else {
        org_object::split_storage(env, None, &subrequests)?
    };
    let ports = Ports {
        background: Some(Rc::new(later)),
        ..platform_ports(env, storage)
    };
    // Before org objects every org's keys were rows of D1; `org-move-in` copies them over.
    let former = Rc::new(D1Storage::counted(env.d1(D1_BINDING)?, subrequests.clone()));
    let found = Instance {
        // Its rate-limit buckets (what outsiders may make: `oauth::anonymous`) are the
        // isolate's; an org's requests are limited in the org's object.
        lore: Rc::new(
            Lore::new(ports, config)
                .with_former_store(former)
                .with_rate_limiter(Rc::new(lore_base::ratelimit::MemoryLimiter::default())),
        ),
        after,
        subrequests,
    };
    INSTANCE.with(|i| *i.borrow_mut() = Some(found.clone()));
    Ok(found)
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

#[event(fetch)]
async fn fetch(request: Request, env: Env, ctx: Context) -> worker::Result<Response> {
    let ctx = Rc::new(ctx);
    let Instance {
        lore,
        after,
        subrequests,
    } = instance(&env)?;
    let before = subrequests.get();
    let url = request.url()?.to_string();
    let request = to_http(request).await?;
    #[cfg(feature = "test-build")]
    if let Some(response) = test_routes::handle(&lore, &env, &url, &request).await {
        return response;
    }
    // The design before org objects (a test build's): no hop.
    if !orgs_in_d1(&env)
        && let Some(org) = lore.home_org(&request).await
    {
        let response =
            match routing::forward(&env, org.as_str(), &url, &request, &subrequests).await {
                Ok(r) => r,
                // The org's object ended before it answered (its isolate's memory or CPU limit,
                // the hard bound of a script run here): the answer says so as a cap.
                Err(e) => {
                    let answer = lore.stopped_by_platform(&request, &e.to_string());
                    worker::console_log!("org {org}: its object stopped: {e}");
                    return from_http(answer);
                }
            };
        return ports::report_forwarded_subrequests(
            response,
            ports::WORKER_SUBREQUESTS,
            subrequests.get() - before,
        );
    }
    let mut response = lore.handle(request).await;
    // What the core left for after the answer runs under this request's `waitUntil`.
    let wait_until: Rc<dyn Fn(ports::Task)> = Rc::new(move |task| ctx.wait_until(task));
    after.hand_over(&wait_until);
    ports::report_subrequests(
        response.headers_mut(),
        ports::WORKER_SUBREQUESTS,
        subrequests.get() - before,
    );
    org_object::log(&response);
    from_http(response)
}
