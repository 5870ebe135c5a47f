//! Work later on Workers: the background port ([`Later`]) of the Worker's and each org
//! object's instance of the core. What runs after the answer goes to the request's
//! `waitUntil` ([`AfterAnswer`]); a wake (`Background::wake`: an org's behaviors' schedules
//! are next due then) sets that org's object's alarm ([`arm`]), directly from inside the
//! object and through its `/__wake` route from elsewhere. The object's `alarm` handler runs
//! the due schedules and arms itself for the next (`org_object`).
//!
//! An object keeps one alarm, so it is moved only earlier: a wake for a later time than the one
//! set is already covered, since each alarm run re-arms for the earliest schedule left.

use std::rc::Rc;

use lore_base::ports::Background;
use serde::{Deserialize, Serialize};
use worker::{Env, ScheduledTime, State};

use crate::ports::{AfterAnswer, Subrequests, Task};
use crate::routing::{self, OBJECT_URL};

/// The route on which an object is woken (not reachable from outside the Worker).
pub const WAKE_PATH: &str = "/__wake";
/// Where an object keeps its org's name, for alarms (which come without a request).
const ORG_KEY: &str = "lore:org";

/// A wake, as sent to an org's object.
#[derive(Serialize, Deserialize)]
pub struct Wake {
    pub at_ms: i64,
}

/// The background port on Workers (see the module's documentation).
#[derive(Clone)]
pub struct Later {
    pub after: AfterAnswer,
    env: Env,
    subrequests: Subrequests,
    /// The org object this instance runs in, if any: its org and its state.
    home: Option<(String, Rc<State>)>,
}

impl Later {
    pub fn new(
        after: AfterAnswer,
        env: Env,
        subrequests: Subrequests,
        home: Option<(String, Rc<State>)>,
    ) -> Self {
        Self {
            after,
            env,
            subrequests,
            home,
        }
    }
}

impl Background for Later {
    fn spawn(&self, task: Task) {
        self.after.spawn(task);
    }

    fn wake(&self, org: &str, at_ms: i64) {
        let org = org.to_string();
        let task: Task = match &self.home {
            Some((home, state)) if *home == org => {
                let state = state.clone();
                Box::pin(async move {
                    if let Err(e) = arm(&state, &org, at_ms).await {
                        worker::console_error!("could not set org {org}'s alarm: {e}");
                    }
                })
            }
            _ => {
                let (env, subrequests) = (self.env.clone(), self.subrequests.clone());
                Box::pin(async move {
                    if let Err(e) = wake_remote(&env, &org, at_ms, &subrequests).await {
                        worker::console_error!("could not wake org {org}'s object: {e}");
                    }
                })
            }
        };
        self.after.spawn(task);
    }

    fn wakes_orgs(&self) -> bool {
        true
    }
}

/// Asks `org`'s object to arm its alarm for `at_ms`.
async fn wake_remote(
    env: &Env,
    org: &str,
    at_ms: i64,
    subrequests: &Subrequests,
) -> worker::Result<()> {
    let body = serde_json::to_vec(&Wake { at_ms })?;
    let request = http::Request::post(format!("{OBJECT_URL}{WAKE_PATH}"))
        .body(body)
        .map_err(|e| worker::Error::RustError(e.to_string()))?;
    let url = request.uri().to_string();
    let response = routing::forward(env, org, &url, &request, subrequests).await?;
    match response.status_code() {
        200..=299 => Ok(()),
        status => Err(worker::Error::RustError(format!(
            "the object answered {status}"
        ))),
    }
}

/// Sets the object's alarm to `at_ms` unless it is already set as early, and keeps the org's
/// name for the alarm to find.
pub async fn arm(state: &State, org: &str, at_ms: i64) -> worker::Result<()> {
    let storage = state.storage();
    if storage.get::<String>(ORG_KEY).await?.as_deref() != Some(org) {
        storage.put(ORG_KEY, org).await?;
    }
    match storage.get_alarm().await? {
        Some(set) if set <= at_ms => Ok(()),
        _ => storage.set_alarm(at(at_ms)).await,
    }
}

/// The org an alarm is for, as [`arm`] kept it.
pub async fn armed_org(state: &State) -> worker::Result<Option<String>> {
    state.storage().get::<String>(ORG_KEY).await
}

/// The alarm's time, if one is set (the test build reports it).
#[cfg(feature = "test-build")]
pub async fn alarm_at(state: &State) -> worker::Result<Option<i64>> {
    state.storage().get_alarm().await
}

/// `ms` since the epoch as an alarm's time (an `i64` alone would be an offset from now).
fn at(ms: i64) -> ScheduledTime {
    ScheduledTime::new(js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(
        ms as f64,
    )))
}
