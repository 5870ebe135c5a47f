//! The clock, randomness, outbound HTTP, embedding and background ports on Workers:
//! `Date.now()`, `crypto.getRandomValues`, `fetch`, the Workers AI binding, and `waitUntil`.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::time::Duration;

use async_trait::async_trait;
use js_sys::Uint8Array;
use lore_base::ports::{
    Background, Clock, Embedder, HttpClient, OutboundRequest, OutboundResponse, PortError,
    Randomness,
};
use serde::{Deserialize, Serialize};
use wasm_bindgen::prelude::wasm_bindgen;
use worker::{Ai, Delay, Fetch, Headers, Method, Request, RequestInit};

/// `Date.now()` and `setTimeout`. Inside a request it is the time the request's I/O last completed (Workers
/// freeze the clock during pure computation), which is all the core needs.
pub struct WorkersClock;

impl Clock for WorkersClock {
    fn now_ms(&self) -> i64 {
        js_sys::Date::now() as i64
    }

    /// `setTimeout` in the calling request's own context.
    fn sleep(&self, ms: u64) -> Pin<Box<dyn Future<Output = ()>>> {
        Box::pin(Delay::from(Duration::from_millis(ms)))
    }
}

#[wasm_bindgen]
extern "C" {
    /// Web Crypto's CSPRNG; the slice is filled in place (wasm-bindgen copies it back).
    #[wasm_bindgen(js_namespace = crypto, js_name = getRandomValues)]
    fn get_random_values(buf: &mut [u8]);
}

/// Web Crypto's `crypto.getRandomValues`, the platform's CSPRNG.
pub struct WebCryptoRandom;

impl Randomness for WebCryptoRandom {
    fn fill(&self, buf: &mut [u8]) {
        // getRandomValues fills at most 65,536 bytes per call.
        for chunk in buf.chunks_mut(65_536) {
            get_random_values(chunk);
        }
    }
}

/// Outbound HTTP through the Workers `fetch`.
pub struct WorkersFetch;

#[async_trait(?Send)]
impl HttpClient for WorkersFetch {
    async fn send(&self, request: OutboundRequest) -> Result<OutboundResponse, PortError> {
        let fail = |e: worker::Error| {
            PortError(format!(
                "HTTP {} {} failed: {e}",
                request.method, request.url
            ))
        };
        let headers = Headers::new();
        for (name, value) in &request.headers {
            headers.append(name, value).map_err(fail)?;
        }
        let mut init = RequestInit::new();
        init.with_method(Method::from(request.method.clone()))
            .with_headers(headers);
        if !request.body.is_empty() {
            init.with_body(Some(Uint8Array::from(request.body.as_slice()).into()));
        }
        let outbound = Request::new_with_init(&request.url, &init).map_err(fail)?;
        let exchange = async {
            let mut response = Fetch::Request(outbound).send().await.map_err(fail)?;
            let headers = response.headers().entries().collect();
            let body = response.bytes().await.map_err(fail)?;
            Ok(OutboundResponse {
                status: response.status_code(),
                headers,
                body,
            })
        };
        // The exchange's deadline: past it the request answers, whatever the peer does.
        let deadline =
            worker::Delay::from(std::time::Duration::from_millis(request.timeout_ms.max(1)));
        futures_util::pin_mut!(exchange);
        match futures_util::future::select(exchange, deadline).await {
            futures_util::future::Either::Left((answer, _)) => answer,
            futures_util::future::Either::Right(_) => Err(PortError(format!(
                "HTTP {} {} did not answer within {} ms",
                request.method, request.url, request.timeout_ms
            ))),
        }
    }
}

/// The Workers AI embedding model lore uses at the edge.
pub const EMBEDDING_MODEL: &str = "@cf/baai/bge-small-en-v1.5";
const EMBEDDING_DIMENSIONS: usize = 384;

/// The model's input. A struct, not `json!`: serde-wasm-bindgen turns a `serde_json` map into
/// a JS `Map`, which Workers AI does not read as an object.
#[derive(Serialize)]
struct EmbeddingInput<'a> {
    text: &'a [String],
}

#[derive(Deserialize)]
struct EmbeddingOutput {
    data: Vec<Vec<f32>>,
}

/// Embeddings from the Workers AI binding.
pub struct WorkersAiEmbedder {
    ai: Ai,
}

impl WorkersAiEmbedder {
    pub fn new(ai: Ai) -> Self {
        Self { ai }
    }
}

#[async_trait(?Send)]
impl Embedder for WorkersAiEmbedder {
    fn model_id(&self) -> &str {
        EMBEDDING_MODEL
    }

    fn dimensions(&self) -> usize {
        EMBEDDING_DIMENSIONS
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, PortError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let output: EmbeddingOutput = self
            .ai
            .run(EMBEDDING_MODEL, EmbeddingInput { text: texts })
            .await
            .map_err(|e| PortError(format!("Workers AI {EMBEDDING_MODEL} failed: {e}")))?;
        if output.data.len() != texts.len() {
            return Err(PortError(format!(
                "Workers AI returned {} vectors for {} texts",
                output.data.len(),
                texts.len()
            )));
        }
        if let Some(bad) = output.data.iter().find(|v| v.len() != EMBEDDING_DIMENSIONS) {
            return Err(PortError(format!(
                "Workers AI returned a {}-d vector; {EMBEDDING_MODEL} has {EMBEDDING_DIMENSIONS}",
                bad.len()
            )));
        }
        Ok(output.data)
    }
}

pub type Task = Pin<Box<dyn Future<Output = ()>>>;

/// The background port: what the core spawns (a memory index loaded after a search answered
/// from the stored segments, segments written, behaviors' reactions) waits until the request
/// being answered hands it on ([`AfterAnswer::hand_over`]) to its context's `waitUntil` (the
/// Worker's `ctx`, an org object's `state`), so it runs after the response and the isolate
/// or object is kept until it ends. Each instance of the core has its own queue: a Worker's
/// and an org object's may share an isolate.
#[derive(Clone, Default)]
pub struct AfterAnswer(Rc<RefCell<Vec<Task>>>);

impl Background for AfterAnswer {
    fn spawn(&self, task: Task) {
        self.0.borrow_mut().push(task);
    }
}

impl AfterAnswer {
    /// Hands the waiting tasks to `wait_until`; each hands on, when it ends, what it left in
    /// turn (a reaction that saves leaves a segment write).
    pub fn hand_over(&self, wait_until: &Rc<dyn Fn(Task)>) {
        let tasks = std::mem::take(&mut *self.0.borrow_mut());
        for task in tasks {
            let queue = self.clone();
            let next = wait_until.clone();
            wait_until(Box::pin(async move {
                task.await;
                queue.hand_over(&next);
            }));
        }
    }
}

/// Counts the subrequests an instance makes (D1 queries, calls to org objects): the test
/// build reports each request's count in a header, which the Worker tests assert.
#[derive(Clone, Default)]
pub struct Subrequests {
    made: Rc<Cell<u64>>,
    /// Test builds (`LORE_TEST_DELAY_MS`): each subrequest waits this long first, a stand-in
    /// for the distance to a database primary or an object in another place (`bench/cold.sh`).
    delay_ms: u64,
}

impl Subrequests {
    /// A counter for an instance in `env`: in test builds with the delay of
    /// `LORE_TEST_DELAY_MS`, if set.
    pub fn for_env(env: &worker::Env) -> Self {
        let delay_ms = if cfg!(feature = "test-build") {
            env.var("LORE_TEST_DELAY_MS")
                .ok()
                .and_then(|v| v.to_string().parse().ok())
                .unwrap_or(0)
        } else {
            0
        };
        Self {
            made: Rc::default(),
            delay_ms,
        }
    }

    /// Counts one subrequest about to be made (and waits the test build's delay).
    pub async fn made(&self) {
        self.made.set(self.made.get() + 1);
        if self.delay_ms > 0 {
            Delay::from(Duration::from_millis(self.delay_ms)).await;
        }
    }

    pub fn get(&self) -> u64 {
        self.made.get()
    }
}

/// The header in which the test build reports the subrequests the Worker made for a request.
pub const WORKER_SUBREQUESTS: &str = "x-lore-test-worker-subrequests";
/// The header in which the test build reports the subrequests an org object made for it.
pub const OBJECT_SUBREQUESTS: &str = "x-lore-test-object-subrequests";

/// In the test build, puts `count` (the subrequests one request made) in header `name` of a
/// reply; in the product, nothing.
pub fn report_subrequests(headers: &mut http::HeaderMap, name: &'static str, count: u64) {
    if cfg!(feature = "test-build") {
        headers.insert(name, http::HeaderValue::from(count));
    }
}

/// [`report_subrequests`] on a Worker response (the reply an org object sent, whose headers
/// are immutable, or a streamed one).
pub fn report_forwarded_subrequests(
    response: worker::Response,
    name: &'static str,
    count: u64,
) -> worker::Result<worker::Response> {
    if !cfg!(feature = "test-build") {
        return Ok(response);
    }
    let headers = response.headers().clone();
    headers.set(name, &count.to_string())?;
    Ok(response.with_headers(headers))
}
