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
mod platform;
mod ports;
mod routing;
mod stream;
#[cfg(feature = "test-build")]
mod test_routes;

use std::cell::RefCell;
use std::rc::Rc;

use lore_base::ports::Ports;
use lore_base::storage::Storage;
use lore_front::Lore;
use worker::{Context, Env, Request, Response, event};

use platform::{config, from_http, platform_ports, to_http};

pub use d1::D1Storage;
pub use object_store::ObjectStorage;
pub use org_object::OrgObject;
pub use platform::{AI_BINDING, D1_BINDING};
pub use ports::{EMBEDDING_MODEL, WebCryptoRandom, WorkersAiEmbedder, WorkersClock, WorkersFetch};

thread_local! {
    /// The isolate's core instance, built on its first request, and what it left for after
    /// the answer.
    static INSTANCE: RefCell<Option<Instance>> = const { RefCell::new(None) };
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
        // Its rate-limit buckets (what outsiders may make: `web::anonymous`) are the
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
