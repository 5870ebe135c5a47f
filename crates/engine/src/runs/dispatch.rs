//! A run's SDK calls: each one dispatched through the run's copy of the core (its storage the
//! run's overlay), recorded for the run's Action, previewed in a dry run, or made in the mode
//! of a `do` program (`modes`). [`Run`] is also the engine's `Ops` when the script runs here.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use serde_json::{Value, json};

use lore_sandbox::event_loop::Ops;
use lore_sandbox::failure::OpFuture;

use serde::Serialize;

use super::modes::{self, CallMeta, MAX_ATTEMPTS, Modes, Queued, backoff_ms, check_upstream};
use super::overlay;
use crate::instance::Engine;
use lore_base::error::LoreError;
use lore_base::model::{Mode, Tier};
use lore_directory::Caller;

/// State of one run shared by the loop and the call futures.
pub(super) struct Run<'a> {
    pub(super) engine: &'a Engine,
    pub(super) caller: &'a Caller,
    pub(super) tier: Tier,
    pub(super) dry_run: bool,
    pub(super) overlay: Rc<overlay::Overlay>,
    /// The core as the script sees it: the real caches, storage through the overlay.
    pub(super) shared: Engine,
    /// The same with a private memory index, once the run has buffered writes (the instance's
    /// index must never see events that may not commit).
    pub(super) private: RefCell<Option<Rc<Engine>>>,
    pub(super) calls: RefCell<Vec<CallRecord>>,
    pub(super) preview: RefCell<Vec<PreviewWrite>>,
    pub(super) previews: Cell<usize>,
    pub(super) progress: Option<&'a dyn Fn(&str)>,
    pub(super) modes: Option<&'a modes::Modes>,
}

impl Ops for Run<'_> {
    fn call(&self, path: String, args: Value) -> OpFuture<'_> {
        Box::pin(async move {
            self.dispatch(path, args)
                .await
                .map_err(lore_sandbox::failure::SdkError::from)
        })
    }
    fn reports_progress(&self) -> bool {
        self.progress.is_some()
    }
    fn progress(&self, what: &str) {
        if let Some(p) = self.progress {
            p(what);
        }
    }
    fn over_cap(&self) -> bool {
        self.overlay.over_cap()
    }
    fn clock(&self) -> Rc<dyn lore_base::ports::Clock> {
        self.engine.ports.clock.clone()
    }
}

impl<'a> Run<'a> {
    pub(super) async fn dispatch(&self, path: String, args: Value) -> Result<Value, LoreError> {
        let clock = self.engine.ports.clock.clone();
        let started = clock.now_ms();
        let meta = RefCell::new(modes::CallMeta::default());
        let result = match self.modes {
            Some(modes) if !self.dry_run => self.dispatch_mode(modes, &path, args, &meta).await,
            _ => self.dispatch_plain(&path, args).await,
        };
        let elapsed_ms = u64::try_from(clock.now_ms() - started).unwrap_or(0);
        let meta = meta.into_inner();
        self.calls.borrow_mut().push(CallRecord {
            method: path,
            ok: result.is_ok(),
            error_code: result.as_ref().err().map(|e| e.code().to_string()),
            elapsed_ms,
            mode: meta.mode,
            attempts: (meta.attempts > 1).then_some(meta.attempts),
            replayed: meta.replayed,
        });
        result
    }

    pub(super) async fn dispatch_plain(&self, path: &str, args: Value) -> Result<Value, LoreError> {
        let allowed = self.tier;
        if self.dry_run {
            let tier =
                crate::sdk::check_call(&self.shared, self.caller, path, &args, allowed).await?;
            if tier > Tier::Read {
                let n = self.previews.get() + 1;
                self.previews.set(n);
                let placeholder_id = format!("dry_run_{n}");
                self.preview.borrow_mut().push(PreviewWrite {
                    method: path.to_string(),
                    access: tier.as_str(),
                    args: args.clone(),
                    placeholder_id: placeholder_id.clone(),
                });
                return Ok(json!({ "dry_run": true, "id": placeholder_id, "method": path }));
            }
            let json = crate::sdk::call(&self.shared, self.caller, path, args, allowed).await?;
            return Ok(serde_json::from_str(json.get())?);
        }
        let engine: Rc<Engine>;
        let core = if self.overlay.write_count() > 0 || !crate::sdk::is_read(path) {
            let mut private = self.private.borrow_mut();
            engine = private
                .get_or_insert_with(|| {
                    Rc::new(self.shared.script_copy(self.shared.ports.clone(), true))
                })
                .clone();
            drop(private);
            &*engine
        } else {
            &self.shared
        };
        let json = crate::sdk::call(core, self.caller, path, args, allowed).await?;
        if self.overlay.over_cap() {
            return Err(LoreError::Internal("buffered_writes".into()));
        }
        Ok(serde_json::from_str(json.get())?)
    }
}

impl Run<'_> {
    /// Dispatches one call of a `do` program (see the module docs).
    pub(super) async fn dispatch_mode(
        &self,
        modes: &Modes,
        path: &str,
        args: Value,
        meta: &RefCell<CallMeta>,
    ) -> Result<Value, LoreError> {
        let resolved = crate::sdk::resolve(&self.shared, self.caller, path, &args).await?;
        if resolved.tier == Tier::Read {
            return self.dispatch_plain(path, args).await;
        }
        let mode = modes.mode.unwrap_or(resolved.mode);
        meta.borrow_mut().mode = Some(mode.as_str());
        let step = modes.step_name(path, &args);
        if let Some(result) = modes.journal.as_ref().and_then(|j| j.replay(&step)) {
            modes.replayed.set(modes.replayed.get() + 1);
            meta.borrow_mut().replayed = true;
            return Ok(result);
        }
        let result = match mode {
            Mode::Send => {
                crate::sdk::check_call(&self.shared, self.caller, path, &args, self.tier).await?;
                let id = format!("snd_{}", lore_base::ids::new_ulid(&self.engine.ports));
                modes.sends.borrow_mut().push(Queued {
                    id: id.clone(),
                    method: path.to_string(),
                    args,
                    external: resolved.external,
                });
                json!({ "id": id, "status": "queued", "method": path })
            }
            Mode::Try => {
                meta.borrow_mut().attempts = 1;
                self.attempt(path, args, resolved.external).await?
            }
            Mode::Do => {
                let deadline = self
                    .shared
                    .script
                    .as_ref()
                    .map_or(i64::MAX, |s| s.deadline_ms());
                let clock = self.engine.ports.clock.clone();
                let mut attempt = 0;
                loop {
                    attempt += 1;
                    meta.borrow_mut().attempts = attempt;
                    match self.attempt(path, args.clone(), resolved.external).await {
                        Err(e) if e.is_transient() && attempt < MAX_ATTEMPTS => {
                            let wait = backoff_ms(attempt);
                            if clock.now_ms() + i64::try_from(wait).unwrap_or(i64::MAX) >= deadline
                            {
                                return Err(e);
                            }
                            clock.sleep(wait).await;
                        }
                        other => break other?,
                    }
                }
            }
        };
        if let Some(journal) = &modes.journal {
            let external = resolved.external && mode != Mode::Send;
            journal
                .keep(self.engine, step, path, external, &result)
                .await?;
        }
        Ok(result)
    }

    async fn attempt(&self, path: &str, args: Value, external: bool) -> Result<Value, LoreError> {
        let result = self.dispatch_plain(path, args).await?;
        if external {
            check_upstream(path, result)
        } else {
            Ok(result)
        }
    }
}

/// One SDK call of a run, as the result and the Action show it.
#[derive(Debug, Clone, Serialize)]
pub struct CallRecord {
    pub method: String,
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    pub elapsed_ms: u64,
    /// `do` programs: the mode a call that takes effect was made in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<&'static str>,
    /// `do` programs: attempts, when more than one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
    /// `do` programs: answered from an earlier run with the same idempotency key.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub replayed: bool,
}

/// A write a dry run did not make.
#[derive(Debug, Clone, Serialize)]
pub struct PreviewWrite {
    pub method: String,
    pub access: &'static str,
    pub args: Value,
    pub placeholder_id: String,
}
