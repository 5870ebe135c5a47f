//! One script run, as one Action: the caps it shares when it nests in a running script, a
//! script slot for a top-level run, the overlay that buffers its writes, where its JavaScript
//! runs (here, or on its script thread), the commit of its writes with its Action, or the
//! Action of its failure; and runs that lost their commit to another writer, made again.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use serde_json::{Value, json};

use lore_directory::Caller;
use lore_sandbox::caps::{Cap, ScriptCaps, Used};
use lore_sandbox::event_loop;
use lore_sandbox::failure::Failure;
use lore_sandbox::host::{Host, HostSpec};
use lore_sandbox::remote;

use super::dispatch::Run;
use super::{modes, overlay};
use crate::instance::Engine;
use crate::scope::{HostRef, Scope};
use lore_base::error::{LoreError, ScriptFailure};
use lore_base::model::Tier;
use lore_records::actions::{Action, CapUse, Step};

/// How deep script operations nest: a script may call a script operation, whose body may call
/// one more; a deeper call is refused.
pub const MAX_NESTING: u8 = 2;

/// Where a run comes from, for its Action.
#[derive(Debug, Default, Clone)]
pub(crate) struct Origin {
    pub behavior: Option<String>,
    pub trigger_event: Option<String>,
    pub depth: Option<u8>,
    pub operation: Option<String>,
}

/// One run to make.
pub(crate) struct Spec<'c> {
    /// The Action's source: `query_sdk`, `run_sdk`, `behavior`, `operation`.
    pub source: &'static str,
    /// The highest tier the script may call (narrowed by the caller's role in `authorize`).
    pub tier: Tier,
    pub code: &'c str,
    pub args: Option<Value>,
    pub dry_run: bool,
    pub caps: ScriptCaps,
    pub origin: Origin,
    /// Told each SDK call and sleep the script starts, and every [`PROGRESS_EVERY_MS`].
    pub progress: Option<&'c dyn Fn(&str)>,
    /// `do` programs: how calls that take effect are dispatched.
    pub modes: Option<modes::Modes>,
}

impl Spec<'_> {
    /// The same run once more, if it can be made again from scratch: a `do` run with an
    /// idempotency journal cannot (its journal already holds this attempt).
    fn again(&self) -> Option<Self> {
        let modes = match &self.modes {
            Some(m) if m.journal.is_some() => return None,
            Some(m) => Some(modes::Modes::new(m.mode, None)),
            None => None,
        };
        Some(Self {
            source: self.source,
            tier: self.tier,
            code: self.code,
            args: self.args.clone(),
            dry_run: self.dry_run,
            caps: self.caps.clone(),
            origin: self.origin.clone(),
            progress: self.progress,
            modes,
        })
    }
}

/// Names the hosts of runs on script threads (unique in the process).
fn next_host_key() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Attempts of a run whose commit lost a race with another writer (optimistic concurrency):
/// its writes were discarded and, when nothing outside lore saw it, it runs again.
pub const COMMIT_ATTEMPTS: u32 = 6;

/// Runs one script and records its Action; `Ok` is the tool's structured result. A run that
/// lost its commit to a concurrent writer, and made no request outside lore that may have
/// changed something, runs again from the start after a random wait (up to
/// [`COMMIT_ATTEMPTS`] in all); each attempt is an Action.
pub(crate) async fn run_script(
    engine: &Engine,
    caller: &Caller,
    spec: Spec<'_>,
) -> Result<Value, LoreError> {
    let mut spec = spec;
    let mut attempt = 1;
    loop {
        let again = if engine.script.is_none() && attempt < COMMIT_ATTEMPTS {
            spec.again()
        } else {
            None
        };
        match run_once(engine, caller, spec).await {
            Err(LoreError::Script(f)) if f.retryable && again.is_some() => {
                // A random wait, doubling its range each time, so racing runs spread out.
                let mut r = [0u8; 2];
                engine.ports.random.fill(&mut r);
                let range = 10u64 << attempt.min(6);
                engine
                    .ports
                    .clock
                    .sleep(1 + u64::from(u16::from_le_bytes(r)) % range)
                    .await;
                spec = again.expect("checked");
                attempt += 1;
            }
            other => return other,
        }
    }
}

async fn run_once(engine: &Engine, caller: &Caller, spec: Spec<'_>) -> Result<Value, LoreError> {
    let Spec {
        source,
        tier,
        code,
        args,
        dry_run,
        mut caps,
        origin,
        progress,
        modes,
    } = spec;
    let clock = engine.ports.clock.clone();
    let started = clock.now_ms();
    // A script operation called from a running script shares that run's budget: the same
    // call count and output (its host starts where the caller's is), and the same deadline.
    let outer = engine.script.clone();
    let nesting = outer.as_ref().map_or(0, |o| o.nesting + 1);
    if nesting > MAX_NESTING {
        return Err(LoreError::Forbidden(format!(
            "script operations nest at most {MAX_NESTING} deep; {} was called from a script operation {MAX_NESTING} deep",
            origin.operation.as_deref().unwrap_or("this operation")
        )));
    }
    // A tool's own script holds one of the process's script slots while it runs (where its
    // JavaScript runs apart, until that has stopped); a nested operation runs inside its
    // caller's.
    let mut slot = match (&engine.script_slots, nesting) {
        (Some(slots), 0) => {
            let token = caller
                .token_id()
                .map_or_else(|| caller.principal().id.clone(), str::to_string);
            match slots.try_take(caller.org().as_str(), &token) {
                Ok(slot) => Some(slot),
                Err(full) => {
                    // A journal opened for this run must not stay "running".
                    if let Some(journal) = modes.as_ref().and_then(|m| m.journal.as_ref()) {
                        journal.fail(engine, None).await;
                    }
                    return Err(LoreError::Overloaded(full.message(caller.org().as_str())));
                }
            }
        }
        _ => None,
    };
    let mut started_ms = started;
    if let Some(o) = &outer {
        caps.sdk_calls = o.caps.sdk_calls;
        caps.wall_ms = o.caps.wall_ms;
        caps.output_bytes = o.caps.output_bytes;
        started_ms = o.started_ms;
    }
    let overlay = Rc::new(overlay::Overlay::new(
        engine.ports.storage.clone(),
        caps.buffered_writes,
    ));
    let mut ports = engine.ports.clone();
    ports.storage = overlay.clone();
    // A nested run's HTTP already goes through its caller's `Outbound`.
    let outbound = match (&ports.http, &outer) {
        (Some(inner), None) => Some(Rc::new(overlay::Outbound::new(inner.clone()))),
        _ => None,
    };
    if let Some(o) = &outbound {
        ports.http = Some(o.clone());
    }
    let mut retryable = false;
    let mut seed = [0u8; 8];
    engine.ports.random.fill(&mut seed);
    let spec = HostSpec {
        caps: caps.clone(),
        started_ms,
        args: args.unwrap_or_else(|| json!({})),
        seed: u64::from_le_bytes(seed),
    };
    // Where the script's JavaScript runs: a nested run where its caller's runs; a top-level
    // run on a thread of its own where the host has them (natively), else here.
    let host_ref = match (outer.as_ref().map(|o| &o.host), &engine.script_threads) {
        (Some(HostRef::Inline(parent)), _) => HostRef::Inline(Rc::new(Host::new(
            spec.clone(),
            clock.clone(),
            Some(parent),
        ))),
        (Some(HostRef::Remote { thread, .. }), _) => HostRef::Remote {
            thread: thread.clone(),
            key: next_host_key(),
        },
        (None, Some(threads)) => HostRef::Remote {
            thread: threads.start(caller.org().as_str(), slot.take()),
            key: next_host_key(),
        },
        (None, None) => HostRef::Inline(Rc::new(Host::new(spec.clone(), clock.clone(), None))),
    };
    let read_only = (tier == Tier::Read).then(|| match &origin.operation {
        // Inside an operation run, only the operation's own access can make it read-only:
        // a read surface could not have called an operation that writes.
        Some(op) => format!(
            "operation {op} has access read, so its script may only read; make it a write operation (operations.update) for its script to write"
        ),
        None => format!("{source} may only read; use run_sdk for writes"),
    });
    let scope = Rc::new(Scope {
        host: host_ref.clone(),
        caps: caps.clone(),
        started_ms,
        events: RefCell::default(),
        nesting,
        read_only,
    });
    let mut shared = engine.script_copy(ports, false);
    shared.script = Some(scope.clone());
    let run = Run {
        engine,
        caller,
        tier,
        dry_run,
        overlay: overlay.clone(),
        shared,
        private: RefCell::new(None),
        calls: RefCell::default(),
        preview: RefCell::default(),
        previews: Cell::new(0),
        progress,
        modes: modes.as_ref(),
    };
    let remote::Ended {
        outcome,
        logs,
        used,
    } = match &host_ref {
        HostRef::Inline(host) => {
            let outcome = event_loop::execute(&run, host, code, None).await;
            if let Some(HostRef::Inline(parent)) = outer.as_ref().map(|o| &o.host) {
                // The caller's run goes on from where this one left its budget.
                parent.absorb(host);
            }
            remote::Ended {
                outcome,
                logs: host.logs.borrow().clone(),
                used: host.used(),
            }
        }
        HostRef::Remote { thread, key } => {
            let parent = match outer.as_ref().map(|o| &o.host) {
                Some(HostRef::Remote { key, .. }) => Some(*key),
                _ => None,
            };
            let job = remote::Job {
                key: *key,
                parent,
                spec,
                code: code.to_string(),
                reports_progress: run.progress.is_some(),
            };
            remote::serve(&run, thread.run(job)).await
        }
    };
    let elapsed_ms = u64::try_from(clock.now_ms() - started).unwrap_or(0);
    let calls = run.calls.borrow().clone();
    let mut action = Action {
        id: String::new(),
        principal: caller.principal().id.clone(),
        source: source.into(),
        mode: modes.as_ref().map_or("try", modes::Modes::label).into(),
        dry_run,
        status: "ok".into(),
        code_hash: Some(lore_base::keys::sha256_hex(code)),
        steps: calls
            .iter()
            .map(|c| Step {
                method: c.method.clone(),
                ok: c.ok,
                error_code: c.error_code.clone(),
                elapsed_ms: c.elapsed_ms,
                mode: c.mode.map(str::to_string),
                attempts: c.attempts,
                replayed: c.replayed,
            })
            .collect(),
        error: None,
        behavior: origin.behavior,
        trigger_event: origin.trigger_event,
        depth: origin.depth,
        operation: origin.operation,
        sends: Vec::new(),
        caps_used: caps_used(&caps, used, elapsed_ms, overlay.write_count()),
        created_at: lore_records::now_text(&engine.ports),
    };
    let ulid = lore_base::ids::new_ulid(&engine.ports);
    action.id = format!("act_{ulid}");
    let action_key = caller.keys().action(&ulid);
    let failure = match outcome {
        Ok(result) => {
            let mut batch = if dry_run {
                lore_base::storage::Batch::new()
            } else {
                overlay.to_batch()
            };
            let writes = batch.writes.len();
            let sends = modes.as_ref().map(|m| m.sends.take()).unwrap_or_default();
            action.sends = modes::queued_outcomes(&sends);
            let journal = modes.as_ref().and_then(|m| m.journal.as_ref());
            if writes == 0 && sends.is_empty() && journal.is_none() {
                // A run that changed nothing commits its Action without waiting for the disk:
                // it survives the process (kill -9), a power cut may lose it (`Batch::relaxed`).
                batch.relaxed();
            }
            batch.put(&action_key, lore_records::to_bytes(&action));
            if let Some(journal) = journal {
                journal.finish_into(&mut batch, &action.id)?;
            }
            // A dry run's batch holds the Action alone: committed as it is.
            let committed = engine
                .memory
                .commit_run_batch(&engine.ports, caller.keys(), batch)
                .await;
            match committed {
                Ok(()) => {
                    if !dry_run {
                        let events = scope.events.take();
                        if !events.is_empty() {
                            // The run's saves counted the sequence in its overlay.
                            engine.memory.mark_tail(caller.keys());
                        }
                        engine.after_commit(caller.org(), events).await;
                    }
                    let receipts: Vec<Value> = sends
                        .iter()
                        .map(|q| json!({ "id": q.id, "method": q.method, "status": "queued" }))
                        .collect();
                    if !sends.is_empty() {
                        modes::dispatch_sends_after(engine, caller, action_key.clone(), sends)
                            .await;
                    }
                    let mut out = json!({
                        "result": result,
                        "logs": logs,
                        "calls": calls,
                        "elapsed_ms": elapsed_ms,
                        "action_id": action.id,
                    });
                    if dry_run {
                        out["side_effect_preview"] = serde_json::to_value(&*run.preview.borrow())?;
                    } else {
                        out["writes"] = json!(writes);
                    }
                    if let Some(m) = &modes {
                        out["mode"] = json!(m.label());
                        out["replayed"] = json!(m.replayed.get());
                        out["sends"] = Value::Array(receipts);
                    }
                    return Ok(out);
                }
                Err(LoreError::Storage(lore_base::storage::StorageError::Conflict { key })) => {
                    retryable = outbound.as_ref().is_none_or(|o| !o.reached_outside());
                    Failure::plain(
                        "conflict",
                        format!(
                            "another writer changed data this script read ({key}) before its writes could commit; nothing was written, run it again"
                        ),
                    )
                }
                Err(e) => Failure::plain(
                    "internal",
                    format!("the script's writes could not commit: {e}"),
                ),
            }
        }
        Err(f) => f,
    };
    let (line, column) = match (failure.ts_position, failure.js_position) {
        (Some(p), _) => (Some(p.line), Some(p.column)),
        (None, Some((l, c))) => (Some(l), Some(c)),
        _ => (None, None),
    };
    let mut failure = ScriptFailure {
        code: failure.code,
        message: failure.message,
        line,
        column,
        cap: failure.cap.map(Cap::as_str),
        limit: failure.cap.map(|c| c.limit(&caps)),
        calls_made: calls.len(),
        elapsed_ms,
        logs,
        action_id: None,
        retryable,
    };
    action.status = "error".into();
    action.error = Some(json!({
        "code": failure.code,
        "message": failure.message,
        "cap": failure.cap,
    }));
    match engine
        .ports
        .storage
        .put(&action_key, lore_records::to_bytes(&action))
        .await
    {
        Ok(()) => failure.action_id = Some(action.id),
        Err(e) => tracing::warn!(error = %e, "could not record the script's action"),
    }
    if let Some(journal) = modes.as_ref().and_then(|m| m.journal.as_ref()) {
        journal.fail(engine, failure.action_id.as_deref()).await;
    }
    Err(LoreError::Script(Box::new(failure)))
}

/// What a run used of its main caps, for its Action.
fn caps_used(caps: &ScriptCaps, used: Used, elapsed_ms: u64, writes: usize) -> Vec<CapUse> {
    [
        (Cap::Steps, used.steps),
        (Cap::Memory, used.memory_bytes),
        (Cap::SdkCalls, used.sdk_calls),
        (Cap::Output, used.output_bytes),
        (Cap::WallClock, elapsed_ms),
        (Cap::BufferedWrites, writes as u64),
    ]
    .into_iter()
    .map(|(cap, used)| CapUse {
        cap: cap.as_str().into(),
        used,
        limit: cap.limit(caps),
    })
    .collect()
}
