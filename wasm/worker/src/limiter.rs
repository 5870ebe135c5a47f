//! The rate-limiter port on a Durable Object (binding `LORE_LIMITER`, class
//! `RateLimiterObject`): one object per org holds the buckets of the org and of its tokens, so
//! one request costs one call, and an object runs one request at a time, so a bucket's
//! read-and-take is atomic across every isolate in the world. Why not the rate-limiting
//! binding: its limit and period are fixed in `wrangler.toml`, while lore's limits change per
//! org at run time. Buckets live in the object's memory; an object evicted after a quiet
//! while starts with full buckets, which is what a quiet while would have given them.
//!
//! Without the binding, or when the object cannot be reached, requests are let through (and
//! the failure is logged): a limiter outage must not become an outage of lore.

use std::cell::RefCell;
use std::collections::HashMap;

use lore_base::ratelimit::{Bucket, Decision, DecisionFuture, RateLimiter};
use serde::{Deserialize, Serialize};
use worker::{
    DurableObject, Env, Method, Request, RequestInit, Response, State, durable_object,
    wasm_bindgen::JsValue,
};

/// The binding the Worker reaches the objects through.
pub const BINDING: &str = "LORE_LIMITER";

#[derive(Serialize, Deserialize)]
struct Take {
    buckets: Vec<(String, u32)>,
}

#[derive(Serialize, Deserialize)]
struct Answer {
    refused: Option<(usize, u64)>,
}

/// One org's buckets.
#[durable_object]
pub struct RateLimiterObject {
    buckets: RefCell<HashMap<String, Bucket>>,
}

impl DurableObject for RateLimiterObject {
    fn new(_state: State, _env: Env) -> Self {
        Self {
            buckets: RefCell::default(),
        }
    }

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        let take: Take = req.json().await?;
        // The object's own clock: every isolate's requests are measured on one time line.
        let now = worker::Date::now().as_millis() as i64;
        let mut buckets = self.buckets.borrow_mut();
        let old: Vec<Option<Bucket>> = take
            .buckets
            .iter()
            .map(|(k, _)| buckets.get(k).copied())
            .collect();
        let rates: Vec<u32> = take.buckets.iter().map(|(_, r)| *r).collect();
        let (states, decision) = lore_base::ratelimit::take(&old, &rates, now);
        for ((key, _), state) in take.buckets.into_iter().zip(states) {
            buckets.insert(key, state);
        }
        Response::from_json(&Answer {
            refused: decision.refused,
        })
    }
}

/// The Worker's side of the port.
pub struct DurableLimiter {
    env: Env,
}

impl DurableLimiter {
    /// The limiter, if the Worker has the binding.
    pub fn from_env(env: &Env) -> Option<Self> {
        env.durable_object(BINDING).ok()?;
        Some(Self { env: env.clone() })
    }

    async fn call(&self, scope: &str, buckets: &[(String, u32)]) -> worker::Result<Decision> {
        let stub = self
            .env
            .durable_object(BINDING)?
            .id_from_name(scope)?
            .get_stub()?;
        let body = serde_json::to_string(&Take {
            buckets: buckets.to_vec(),
        })?;
        let mut init = RequestInit::new();
        init.with_method(Method::Post)
            .with_body(Some(JsValue::from_str(&body)));
        let request = Request::new_with_init("https://limiter.internal/take", &init)?;
        let answer: Answer = stub.fetch_with_request(request).await?.json().await?;
        Ok(Decision {
            refused: answer.refused,
        })
    }
}

impl RateLimiter for DurableLimiter {
    fn take(&self, scope: &str, buckets: &[(String, u32)], _now_ms: i64) -> DecisionFuture<'_> {
        let scope = scope.to_string();
        let buckets = buckets.to_vec();
        Box::pin(async move {
            match self.call(&scope, &buckets).await {
                Ok(decision) => decision,
                Err(e) => {
                    worker::console_error!("rate limiter unreachable, request let through: {e}");
                    Decision::ALLOWED
                }
            }
        })
    }
}
