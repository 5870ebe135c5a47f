//! How a `do` program's calls are dispatched (SPEC 4.5), and its idempotency journal.
//!
//! Reads always run at once. A call that takes effect (tier write or admin) runs in the
//! program's mode, or its Verb's default when the program names none:
//! - `try`: one attempt; a failure throws into the script;
//! - `send`: checked (method, access, arguments) and queued; the script gets a receipt
//!   `{id, status: "queued"}`; queued calls are made after the run commits (natively after
//!   the answer, at the edge before it), each retried like a durable call, and their outcome
//!   is written into the run's Action (`sends`). A run that fails sends nothing;
//! - `do`: a transient failure (no answer from upstream, or its 408, 429 or 5xx) is retried
//!   with backoff ([`MAX_ATTEMPTS`], doubling from [`FIRST_BACKOFF_MS`]) while the run's wall
//!   clock allows.
//!
//! Within a `do` program, an HTTP call through a connection (an HTTP operation, or
//! `connections.call`) whose answer is not 2xx is a failure (`upstream_error` with `status`).
//!
//! With an idempotency key, each call that takes effect is a *step*, named by its method, its
//! arguments and how many identical calls the run made before it. A step's result is kept in
//! a journal (`o/{org}/do/{sha256(principal, key)}`): steps that reach outside lore are
//! written the moment they finish (no rollback undoes them); the others commit with the run's
//! batch, because a failed run's data writes never happened. A re-run with the same key
//! answers each finished step from the journal instead of making it again.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::instance::Engine;
use lore_base::error::LoreError;
use lore_base::model::{Mode, Tier};
use lore_base::storage::Batch;
use lore_directory::Caller;
use lore_records::actions::{Action, SendOutcome};

/// Attempts of one durable (or sent) call, the first included.
pub const MAX_ATTEMPTS: u32 = 5;
/// The wait before the second attempt; each later wait doubles it.
pub const FIRST_BACKOFF_MS: u64 = 250;

/// The wait before attempt `attempt + 1` (attempts count from 1).
pub fn backoff_ms(attempt: u32) -> u64 {
    FIRST_BACKOFF_MS << (attempt.saturating_sub(1)).min(8)
}

/// A `do` run's dispatch state.
pub(crate) struct Modes {
    /// The program's mode; `None`: each Verb's default.
    pub mode: Option<Mode>,
    pub journal: Option<Journal>,
    /// Calls queued in `send` mode, in call order.
    pub sends: RefCell<Vec<Queued>>,
    /// Steps answered from the journal.
    pub replayed: Cell<usize>,
    /// How many times each (method, arguments) was called, for step names.
    occurrences: RefCell<HashMap<String, u32>>,
}

impl Modes {
    pub fn new(mode: Option<Mode>, journal: Option<Journal>) -> Self {
        Self {
            mode,
            journal,
            sends: RefCell::default(),
            replayed: Cell::new(0),
            occurrences: RefCell::default(),
        }
    }

    /// The name of the next call of `method` with `args`.
    pub(crate) fn step_name(&self, method: &str, args: &Value) -> String {
        let call = lore_base::keys::sha256_hex(&format!("{method}\n{args}"));
        let mut seen = self.occurrences.borrow_mut();
        let n = seen.entry(call.clone()).or_default();
        *n += 1;
        format!("{call}.{n}")
    }

    /// The mode the run is in, for its Action.
    pub fn label(&self) -> &'static str {
        self.mode.map_or("default", Mode::as_str)
    }
}

/// A call queued in `send` mode.
#[derive(Debug, Clone)]
pub(crate) struct Queued {
    pub id: String,
    pub method: String,
    pub args: Value,
    pub external: bool,
}

/// What a call's dispatch did beyond its result, for the run's call log.
#[derive(Debug, Clone, Default)]
pub(crate) struct CallMeta {
    pub mode: Option<&'static str>,
    pub attempts: u32,
    pub replayed: bool,
}

/// A finished step, as the journal keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Recorded {
    step: String,
    method: String,
    /// Reached outside lore: kept even when the run fails.
    external: bool,
    result: Value,
}

/// The journal record of one idempotency key.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    code_hash: String,
    /// `running`, `ok` or `error`.
    status: String,
    started_ms: i64,
    #[serde(default)]
    actions: Vec<String>,
    #[serde(default)]
    steps: Vec<Recorded>,
}

/// The journal of a run with an idempotency key.
pub(crate) struct Journal {
    key: String,
    /// Results of the steps earlier runs finished, by step name.
    prior: HashMap<String, Value>,
    record: RefCell<Record>,
    /// How many of `record.steps` earlier runs finished (this run's come after them).
    earlier: usize,
    /// The bytes last stored under `key` (each write requires them).
    stored: RefCell<Vec<u8>>,
}

impl Journal {
    /// Opens the key's journal for a new run of `code`: refused while another run with the
    /// key is going, or when the key was used for a different program.
    pub async fn open(
        engine: &Engine,
        caller: &Caller,
        idempotency_key: &str,
        code: &str,
        wall_ms: u64,
    ) -> Result<Self, LoreError> {
        let hash =
            lore_base::keys::sha256_hex(&format!("{}\n{idempotency_key}", caller.principal().id));
        let key = caller.keys().do_journal(&hash);
        let storage = &engine.ports.storage;
        let now = engine.ports.clock.now_ms();
        let code_hash = lore_base::keys::sha256_hex(code);
        let old_bytes = storage.get(&key).await?;
        let old: Option<Record> = match &old_bytes {
            Some(b) => Some(serde_json::from_slice(b)?),
            None => None,
        };
        let mut batch = Batch::new();
        let prior = match &old {
            None => {
                batch.require_absent(&key);
                HashMap::new()
            }
            Some(r) => {
                if r.code_hash != code_hash {
                    return Err(LoreError::Conflict(
                        "this idempotency_key was used for a different program; use a new key for new code".into(),
                    ));
                }
                // A run that died without finishing (its process stopped) frees the key once
                // its wall clock is over.
                let grace = i64::try_from(wall_ms).unwrap_or(i64::MAX / 2) + 30_000;
                if r.status == "running" && now - r.started_ms < grace {
                    return Err(LoreError::Conflict(
                        "a run with this idempotency_key is still going; wait for it, then run again".into(),
                    ));
                }
                batch.require_equals(&key, old_bytes.clone().unwrap_or_default());
                r.steps
                    .iter()
                    .map(|s| (s.step.clone(), s.result.clone()))
                    .collect()
            }
        };
        let record = Record {
            code_hash,
            status: "running".into(),
            started_ms: now,
            actions: old.as_ref().map(|r| r.actions.clone()).unwrap_or_default(),
            steps: old.map(|r| r.steps).unwrap_or_default(),
        };
        let bytes = serde_json::to_vec(&record)?;
        batch.put(&key, bytes.clone());
        storage.commit(batch).await.map_err(|e| match e {
            lore_base::storage::StorageError::Conflict { .. } => LoreError::Conflict(
                "another run with this idempotency_key started at the same moment; run again"
                    .into(),
            ),
            other => LoreError::Storage(other),
        })?;
        Ok(Self {
            key,
            prior,
            earlier: record.steps.len(),
            record: RefCell::new(record),
            stored: RefCell::new(bytes),
        })
    }

    pub(crate) fn replay(&self, step: &str) -> Option<Value> {
        self.prior.get(step).cloned()
    }

    /// Keeps a finished step; one that reached outside lore is written at once.
    pub(crate) async fn keep(
        &self,
        engine: &Engine,
        step: String,
        method: &str,
        external: bool,
        result: &Value,
    ) -> Result<(), LoreError> {
        self.record.borrow_mut().steps.push(Recorded {
            step,
            method: method.to_string(),
            external,
            result: result.clone(),
        });
        if external {
            self.write(engine, None).await?;
        }
        Ok(())
    }

    /// Writes the record (with `status`, if given) under the stored bytes' precondition.
    async fn write(&self, engine: &Engine, status: Option<&str>) -> Result<(), LoreError> {
        let bytes = {
            let mut record = self.record.borrow_mut();
            if let Some(s) = status {
                record.status = s.into();
            }
            serde_json::to_vec(&*record)?
        };
        let mut batch = Batch::new();
        batch
            .require_equals(&self.key, self.stored.borrow().clone())
            .put(&self.key, bytes.clone());
        engine.ports.storage.commit(batch).await?;
        *self.stored.borrow_mut() = bytes;
        Ok(())
    }

    /// Adds the finished journal to the run's final batch.
    pub fn finish_into(&self, batch: &mut Batch, action_id: &str) -> Result<(), LoreError> {
        let mut record = self.record.borrow_mut();
        record.status = "ok".into();
        record.actions.push(action_id.to_string());
        batch
            .require_equals(&self.key, self.stored.borrow().clone())
            .put(&self.key, serde_json::to_vec(&*record)?);
        Ok(())
    }

    /// Records a failed run: of this run's steps only those that reached outside lore stay
    /// finished (its data writes were rolled back); earlier runs' steps all stay.
    pub async fn fail(&self, engine: &Engine, action_id: Option<&str>) {
        {
            let mut record = self.record.borrow_mut();
            let mut i = 0;
            let earlier = self.earlier;
            record.steps.retain(|s| {
                i += 1;
                i <= earlier || s.external
            });
            if let Some(id) = action_id
                && !record.actions.iter().any(|a| a == id)
            {
                record.actions.push(id.to_string());
            }
        }
        if let Err(e) = self.write(engine, Some("error")).await {
            tracing::warn!(error = %e, "could not record the failed run in its journal");
        }
    }
}

/// A connection's answer as a call's outcome: inside a `do` program, a status that is not
/// 2xx is a failure.
pub(crate) fn check_upstream(method: &str, result: Value) -> Result<Value, LoreError> {
    let Some(status) = result.get("status").and_then(Value::as_u64) else {
        return Ok(result);
    };
    if (200..300).contains(&status) {
        return Ok(result);
    }
    let body = match &result["body"] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let excerpt: String = body.chars().take(200).collect();
    Err(LoreError::Upstream {
        status: u16::try_from(status).ok(),
        message: format!("{method} answered HTTP {status}: {excerpt}"),
    })
}

/// Makes the calls a committed `do` run queued in `send` mode: after the answer where the
/// host has a background port (natively, Workers), elsewhere (Spin) before it.
pub(crate) async fn dispatch_sends_after(
    engine: &Engine,
    caller: &Caller,
    action_key: String,
    sends: Vec<Queued>,
) {
    match &engine.ports.background {
        Some(background) => {
            let engine = engine.script_copy(engine.ports.clone(), false);
            let caller = caller.clone();
            background.spawn(Box::pin(async move {
                dispatch_sends(&engine, &caller, &action_key, sends).await;
            }));
        }
        None => dispatch_sends(engine, caller, &action_key, sends).await,
    }
}

/// Makes the calls a committed run queued in `send` mode, one after another, and writes each
/// outcome into the run's Action.
pub(crate) async fn dispatch_sends(
    engine: &Engine,
    caller: &Caller,
    action_key: &str,
    sends: Vec<Queued>,
) {
    let clock = engine.ports.clock.clone();
    for (i, queued) in sends.into_iter().enumerate() {
        let mut attempts = 0;
        let outcome = loop {
            attempts += 1;
            let result = match crate::sdk::call(
                engine,
                caller,
                &queued.method,
                queued.args.clone(),
                Tier::Admin,
            )
            .await
            {
                Ok(json) => serde_json::from_str::<Value>(json.get())
                    .map_err(LoreError::from)
                    .and_then(|v| {
                        if queued.external {
                            check_upstream(&queued.method, v)
                        } else {
                            Ok(v)
                        }
                    }),
                Err(e) => Err(e),
            };
            match result {
                Err(e) if e.is_transient() && attempts < MAX_ATTEMPTS => {
                    clock.sleep(backoff_ms(attempts)).await;
                }
                other => break other,
            }
        };
        let update = |action: &mut Action| {
            if let Some(s) = action.sends.get_mut(i) {
                s.attempts = attempts;
                s.finished_at = Some(lore_records::now_text(&engine.ports));
                match &outcome {
                    Ok(v) => {
                        s.status = "ok".into();
                        s.result = Some(cap_value(v.clone()));
                    }
                    Err(e) => {
                        s.status = "error".into();
                        s.error = Some(e.to_json());
                    }
                }
            }
        };
        if let Err(e) = update_action(engine, action_key, update).await {
            tracing::warn!(error = %e, "could not record a sent call's outcome");
        }
    }
}

/// A result kept in an Action: past 64 KiB only a note that it was cut.
fn cap_value(v: Value) -> Value {
    if v.to_string().len() > 64 * 1024 {
        json!({ "truncated": true })
    } else {
        v
    }
}

async fn update_action(
    engine: &Engine,
    key: &str,
    update: impl Fn(&mut Action),
) -> Result<(), LoreError> {
    for _ in 0..3 {
        let Some(bytes) = engine.ports.storage.get(key).await? else {
            return Err(LoreError::not_found("the run's action"));
        };
        let mut action: Action = serde_json::from_slice(&bytes)?;
        update(&mut action);
        let mut batch = Batch::new();
        batch
            .require_equals(key, bytes)
            .put(key, lore_records::to_bytes(&action));
        match engine.ports.storage.commit(batch).await {
            Ok(()) => return Ok(()),
            Err(lore_base::storage::StorageError::Conflict { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(LoreError::Conflict("the run's action kept changing".into()))
}

/// The Action's list of sends as queued.
pub(crate) fn queued_outcomes(sends: &[Queued]) -> Vec<SendOutcome> {
    sends
        .iter()
        .map(|q| SendOutcome {
            id: q.id.clone(),
            method: q.method.clone(),
            status: "queued".into(),
            attempts: 0,
            result: None,
            error: None,
            finished_at: None,
        })
        .collect()
}
