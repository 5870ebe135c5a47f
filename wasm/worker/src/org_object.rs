//! Every org is a Durable Object (binding `LORE_ORG`, class [`OrgObject`], addressed by
//! `idFromName(org)`): it holds the org's keys (`o/{org}/…`) in its own SQLite
//! ([`ObjectStorage`]), keeps one warm instance of the core for the org (its indexes, caches
//! and rate-limit buckets live as long as the object), and serves every request the Worker
//! routes to it ([`lore_front::Lore::home_org`]). The directory (orgs, principals, tokens,
//! OAuth) stays in D1; [`lore_base::storage::split`] sends each key to its store, so a key of
//! another org (rare: an operator action, a token issued) is read and written through that
//! org's object ([`RemoteOrg`], the `/__kv` route below).
//!
//! The object learns its org from the `x-lore-org` header the Worker sets (and refuses a
//! request that names another); Durable Objects are not reachable from outside the Worker,
//! and the Worker sets the header itself, so a client cannot choose it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use async_trait::async_trait;
use base64::Engine as _;
use lore_base::ports::Ports;
use lore_base::ratelimit::MemoryLimiter;
use lore_base::storage::split::{OrgStores, SplitStorage};
use lore_base::storage::{Batch, Check, ScanPage, Storage, StorageError, Write};
use lore_front::Lore;
use serde::{Deserialize, Serialize};
use worker::{DurableObject, Env, Request, Response, State, durable_object};

use crate::alarms::{self, Later, WAKE_PATH, Wake};
use crate::object_store::ObjectStorage;
use crate::ports::{AfterAnswer, Subrequests, Task};
use crate::routing::{OBJECT_URL, ORG_HEADER, forward};
use crate::stream::Served;

/// The route of the storage port served to other instances.
const KV_PATH: &str = "/__kv";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn unb64(text: &str) -> Result<Vec<u8>, StorageError> {
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| StorageError::Backend(format!("org object: a value is not base64: {e}")))
}

/// One storage call, as sent to an org object.
#[derive(Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum KvCall {
    Get {
        key: String,
    },
    GetMany {
        keys: Vec<String>,
    },
    Scan {
        prefix: String,
        after: Option<String>,
        limit: usize,
    },
    Commit {
        /// `(key, None)`: must be absent; `(key, Some(value))`: must hold the value.
        checks: Vec<(String, Option<String>)>,
        /// `(key, None)`: delete; `(key, Some(value))`: put.
        writes: Vec<(String, Option<String>)>,
        relaxed: bool,
    },
}

/// Its answer.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum KvAnswer {
    Value(Option<String>),
    Values(Vec<Option<String>>),
    Page {
        entries: Vec<(String, String)>,
        cursor: Option<String>,
    },
    Done,
    Conflict(String),
    InvalidKey(String),
    Failed(String),
}

fn failure(e: StorageError) -> KvAnswer {
    match e {
        StorageError::Conflict { key } => KvAnswer::Conflict(key),
        StorageError::InvalidKey { key } => KvAnswer::InvalidKey(key),
        StorageError::Backend(message) => KvAnswer::Failed(message),
    }
}

/// Serves one storage call on the object's own store.
async fn serve_kv(store: &ObjectStorage, call: KvCall) -> KvAnswer {
    answer_kv(store, call).await.unwrap_or_else(failure)
}

async fn answer_kv(store: &ObjectStorage, call: KvCall) -> Result<KvAnswer, StorageError> {
    Ok(match call {
        KvCall::Get { key } => KvAnswer::Value(store.get(&key).await?.as_deref().map(b64)),
        KvCall::GetMany { keys } => {
            let values = store.get_many(&keys).await?;
            KvAnswer::Values(values.iter().map(|v| v.as_deref().map(b64)).collect())
        }
        KvCall::Scan {
            prefix,
            after,
            limit,
        } => {
            let page = store.scan(&prefix, after.as_deref(), limit).await?;
            KvAnswer::Page {
                entries: page
                    .entries
                    .iter()
                    .map(|(k, v)| (k.clone(), b64(v)))
                    .collect(),
                cursor: page.cursor,
            }
        }
        KvCall::Commit {
            checks,
            writes,
            relaxed,
        } => {
            let mut batch = Batch::new();
            for (key, value) in checks {
                batch.checks.push(match value {
                    None => Check::Absent(key),
                    Some(v) => Check::Equals(key, unb64(&v)?),
                });
            }
            for (key, value) in writes {
                batch.writes.push(match value {
                    None => Write::Delete(key),
                    Some(v) => Write::Put(key, unb64(&v)?),
                });
            }
            batch.relaxed = relaxed;
            store.commit(batch).await?;
            KvAnswer::Done
        }
    })
}

/// Another org's store, reached through its object.
pub struct RemoteOrg {
    env: Env,
    org: String,
    subrequests: Subrequests,
}

impl RemoteOrg {
    async fn call(&self, call: &KvCall) -> Result<KvAnswer, StorageError> {
        let fail = |e: worker::Error| {
            StorageError::Backend(format!("org object {} unreachable: {e}", self.org))
        };
        let body = serde_json::to_vec(call).map_err(|e| StorageError::Backend(e.to_string()))?;
        let request = http::Request::post(format!("{OBJECT_URL}{KV_PATH}"))
            .body(body)
            .map_err(|e| StorageError::Backend(e.to_string()))?;
        let url = request.uri().to_string();
        let mut response = forward(&self.env, &self.org, &url, &request, &self.subrequests)
            .await
            .map_err(fail)?;
        let answer: KvAnswer = response.json().await.map_err(fail)?;
        match answer {
            KvAnswer::Conflict(key) => Err(StorageError::Conflict { key }),
            KvAnswer::InvalidKey(key) => Err(StorageError::InvalidKey { key }),
            KvAnswer::Failed(message) => Err(StorageError::Backend(message)),
            other => Ok(other),
        }
    }
}

fn unexpected() -> StorageError {
    StorageError::Backend("org object: an answer of the wrong kind".into())
}

#[async_trait(?Send)]
impl Storage for RemoteOrg {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        match self.call(&KvCall::Get { key: key.into() }).await? {
            KvAnswer::Value(v) => v.as_deref().map(unb64).transpose(),
            _ => Err(unexpected()),
        }
    }

    async fn get_many(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, StorageError> {
        match self
            .call(&KvCall::GetMany {
                keys: keys.to_vec(),
            })
            .await?
        {
            KvAnswer::Values(values) => values
                .iter()
                .map(|v| v.as_deref().map(unb64).transpose())
                .collect(),
            _ => Err(unexpected()),
        }
    }

    async fn scan(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<ScanPage, StorageError> {
        let call = KvCall::Scan {
            prefix: prefix.into(),
            after: after.map(str::to_string),
            limit,
        };
        match self.call(&call).await? {
            KvAnswer::Page { entries, cursor } => Ok(ScanPage {
                entries: entries
                    .into_iter()
                    .map(|(k, v)| Ok((k, unb64(&v)?)))
                    .collect::<Result<_, StorageError>>()?,
                cursor,
            }),
            _ => Err(unexpected()),
        }
    }

    async fn commit(&self, batch: Batch) -> Result<(), StorageError> {
        let call = KvCall::Commit {
            checks: batch
                .checks
                .iter()
                .map(|c| match c {
                    Check::Absent(k) => (k.clone(), None),
                    Check::Equals(k, v) => (k.clone(), Some(b64(v))),
                })
                .collect(),
            writes: batch
                .writes
                .iter()
                .map(|w| match w {
                    Write::Delete(k) => (k.clone(), None),
                    Write::Put(k, v) => (k.clone(), Some(b64(v))),
                })
                .collect(),
            relaxed: batch.relaxed,
        };
        match self.call(&call).await? {
            KvAnswer::Done => Ok(()),
            _ => Err(unexpected()),
        }
    }
}

/// Where each org's keys are, seen from one instance: its home org's in its own SQLite (an
/// org object's), every other org's through that org's object.
pub struct ObjectOrgs {
    env: Env,
    home: Option<(String, Rc<ObjectStorage>)>,
    remote: RefCell<HashMap<String, Rc<RemoteOrg>>>,
    subrequests: Subrequests,
}

impl OrgStores for ObjectOrgs {
    fn store(&self, org: &str) -> Result<Rc<dyn Storage>, StorageError> {
        if let Some((home, store)) = &self.home
            && home == org
        {
            return Ok(store.clone());
        }
        let mut remote = self.remote.borrow_mut();
        let store = remote.entry(org.to_string()).or_insert_with(|| {
            Rc::new(RemoteOrg {
                env: self.env.clone(),
                org: org.to_string(),
                subrequests: self.subrequests.clone(),
            })
        });
        Ok(store.clone())
    }
}

/// The storage of an instance: the directory on D1, each org in its object; every D1 query
/// and object call counted in `subrequests`.
pub fn split_storage(
    env: &Env,
    home: Option<(String, Rc<ObjectStorage>)>,
    subrequests: &Subrequests,
) -> worker::Result<Rc<dyn Storage>> {
    let directory = Rc::new(crate::d1::D1Storage::counted(
        env.d1(crate::platform::D1_BINDING)?,
        subrequests.clone(),
    ));
    let orgs = ObjectOrgs {
        env: env.clone(),
        home,
        remote: RefCell::default(),
        subrequests: subrequests.clone(),
    };
    Ok(Rc::new(SplitStorage::new(directory, Rc::new(orgs))))
}

/// One org's object.
#[durable_object]
pub struct OrgObject {
    state: Rc<State>,
    env: Env,
    store: Rc<ObjectStorage>,
    /// The org, from the first request's header.
    org: RefCell<Option<String>>,
    lore: RefCell<Option<Rc<Lore>>>,
    after: AfterAnswer,
    subrequests: Subrequests,
}

impl OrgObject {
    /// The object's instance of the core, built on its first request.
    fn instance(&self, org: &str) -> worker::Result<Rc<Lore>> {
        if let Some(lore) = self.lore.borrow().clone() {
            return Ok(lore);
        }
        let home = Some((org.to_string(), self.store.clone()));
        let later = Later::new(
            self.after.clone(),
            self.env.clone(),
            self.subrequests.clone(),
            Some((org.to_string(), self.state.clone())),
        );
        let ports = Ports {
            background: Some(Rc::new(later)),
            ..crate::platform::platform_ports(
                &self.env,
                split_storage(&self.env, home, &self.subrequests)?,
            )
        };
        let config = crate::platform::config(&self.env).map_err(worker::Error::RustError)?;
        // One object per org and never two at once, so the usage counters' keys can be fixed.
        let lore = Rc::new(
            Lore::with_usage_instance(ports, config, "object".into())
                .with_rate_limiter(Rc::new(MemoryLimiter::default())),
        );
        *self.lore.borrow_mut() = Some(lore.clone());
        Ok(lore)
    }
}

impl DurableObject for OrgObject {
    fn new(state: State, env: Env) -> Self {
        let store = Rc::new(ObjectStorage::new(&state.storage()));
        Self {
            state: Rc::new(state),
            subrequests: Subrequests::for_env(&env),
            env,
            store,
            org: RefCell::default(),
            lore: RefCell::default(),
            after: AfterAnswer::default(),
        }
    }

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        let Some(org) = req.headers().get(ORG_HEADER)? else {
            return Response::error("a request to an org object names its org", 400);
        };
        let known = self.org.borrow().clone();
        match known {
            Some(known) if known != org => {
                return Response::error(format!("this object serves org {known}, not {org}"), 500);
            }
            Some(_) => {}
            None => *self.org.borrow_mut() = Some(org.clone()),
        }
        let path = req.path();
        if path == KV_PATH {
            let call: KvCall = req.json().await?;
            return Response::from_json(&serve_kv(&self.store, call).await);
        }
        if path == WAKE_PATH {
            let wake: Wake = req.json().await?;
            alarms::arm(&self.state, &org, wake.at_ms).await?;
            return Response::empty();
        }
        #[cfg(feature = "test-build")]
        if path == "/__test/alarm" {
            return self.test_alarm(&org, req).await;
        }
        #[cfg(feature = "test-build")]
        if let Some(route) = path.strip_prefix(lore_testing::routes::PREFIX) {
            let store = self.store.clone();
            let response = lore_testing::routes::handle(route, || {
                let store = store.clone();
                async move {
                    store.clear().map_err(|e| e.to_string())?;
                    Ok(store as Rc<dyn Storage>)
                }
            })
            .await;
            return match response {
                Some(response) => crate::platform::from_http(response),
                None => Response::error(format!("no object test route {route}"), 404),
            };
        }
        let lore = self.instance(&org)?;
        let request = crate::platform::to_http(req).await?;
        let before = self.subrequests.get();
        let streams = lore_front::mcp::reply::may_stream(
            request.method(),
            request.uri().path(),
            request.body(),
        );
        let mut response = if streams {
            // What the core left for after the answer goes to `waitUntil` once it is done.
            let (state, after) = (self.state.clone(), self.after.clone());
            let done = move |response: &http::Response<Vec<u8>>| {
                hand_over(&state, &after);
                log(response);
            };
            match crate::stream::serve(lore, request, done).await? {
                Served::Whole(response) => response,
                Served::Streamed(response) => {
                    return crate::ports::report_forwarded_subrequests(
                        response,
                        crate::ports::OBJECT_SUBREQUESTS,
                        self.subrequests.get() - before,
                    );
                }
            }
        } else {
            let response = lore.handle(request).await;
            hand_over(&self.state, &self.after);
            log(&response);
            response
        };
        crate::ports::report_subrequests(
            response.headers_mut(),
            crate::ports::OBJECT_SUBREQUESTS,
            self.subrequests.get() - before,
        );
        crate::platform::from_http(response)
    }

    /// Runs the org's due schedules. A failure is an error, which the runtime retries.
    async fn alarm(&self) -> worker::Result<Response> {
        let known = self.org.borrow().clone();
        let org = match known {
            Some(org) => org,
            None => match alarms::armed_org(&self.state).await? {
                Some(org) => {
                    *self.org.borrow_mut() = Some(org.clone());
                    org
                }
                None => return Response::empty(),
            },
        };
        let now = lore_base::ports::Clock::now_ms(&crate::ports::WorkersClock);
        self.run_schedules(&org, now).await?;
        Response::empty()
    }
}

impl OrgObject {
    /// Runs the org's schedules due at `now_ms`, hands on what they left for after, and arms
    /// the alarm for the earliest schedule left (a wake made meanwhile may set it earlier:
    /// arming only moves it earlier). Returns the runs made and that time.
    async fn run_schedules(&self, org: &str, now_ms: i64) -> worker::Result<(u32, Option<i64>)> {
        let lore = self.instance(org)?;
        let id = lore_base::ids::OrgId::parse(org)
            .map_err(|e| worker::Error::RustError(e.to_string()))?;
        let pass = lore
            .run_schedules(&id, now_ms)
            .await
            .map_err(|e| worker::Error::RustError(e.to_string()))?;
        hand_over(&self.state, &self.after);
        if let Some(next) = pass.next_at_ms {
            alarms::arm(&self.state, org, next).await?;
        }
        Ok((pass.fired, pass.next_at_ms))
    }

    /// `/__test/alarm` (test builds): the alarm's time, and with `{"at_ms"}` the alarm's run
    /// as at that time (a schedule is at least a minute away; a test does not wait for it).
    #[cfg(feature = "test-build")]
    async fn test_alarm(&self, org: &str, mut req: Request) -> worker::Result<Response> {
        let body: serde_json::Value = req.json().await.unwrap_or_default();
        let mut out = serde_json::json!({});
        if let Some(at) = body["at_ms"].as_i64() {
            // As when the alarm fires: it is no longer set while its handler runs.
            self.state.storage().delete_alarm().await?;
            let (fired, next_at_ms) = self.run_schedules(org, at).await?;
            out["fired"] = fired.into();
            out["next_at_ms"] = next_at_ms.into();
        }
        out["alarm"] = alarms::alarm_at(&self.state).await?.into();
        out["org"] = alarms::armed_org(&self.state).await?.into();
        Response::from_json(&out)
    }
}

/// Hands what the core left for after the answer to the object's `waitUntil`.
fn hand_over(state: &Rc<State>, after: &AfterAnswer) {
    let state = state.clone();
    let wait_until: Rc<dyn Fn(Task)> = Rc::new(move |task| state.wait_until(task));
    after.hand_over(&wait_until);
}

/// The request's structured log line, for `wrangler tail` and Workers Logs.
pub(crate) fn log(response: &http::Response<Vec<u8>>) {
    if let Some(line) = lore_front::request_log::Line::of(response) {
        worker::console_log!("{line}");
    }
}
