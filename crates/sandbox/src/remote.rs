//! Scripts whose JavaScript runs apart from the request that asked for it, while their SDK
//! calls run where the request is served. A script's interpreter slices cannot be interrupted
//! (the engine returns only at an `await` or at the end), and one native built-in can compute
//! or allocate without a checkpoint, so the bounds of a run must hold outside the engine.
//! Natively each top-level run goes to a process of its own (`src/scripts.rs`, over
//! [`crate::wire`]): a boundary with a hard memory limit that is killed at the wall clock, its
//! CPU shared by the operating system, its slot held until it has stopped. At the edge (one
//! isolate or instance per request) the run stays inline, bounded by the platform's limits.
//!
//! The split is the engine's `Ops`: where the script runs, [`RemoteOps`] sends each SDK call,
//! progress note and the outcome as an [`Event`]; on the request's thread, `serve` makes the
//! calls through the run (its overlay, its caches, its budget) and answers them. A script
//! operation called from the script runs its JavaScript in the same place, inside the budget of
//! the run that called it, as it would inline.

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use serde_json::Value;

use crate::event_loop::{self as engine, Ops};
use crate::failure::{Failure, OpFuture, SdkError};
use crate::host::{Host, HostSpec};
use lore_base::ports::Clock;
use lore_base::ratelimit::ScriptSlot;

/// A host that runs scripts' JavaScript apart from the requests that ask for them.
pub trait ScriptThreads {
    /// A place for one top-level run of `org` and the script operations it calls; it holds
    /// `slot` (the run's share of the server's scripts) until the JavaScript has stopped, and
    /// stops it when the last handle is dropped (the run ended, or its request went away).
    fn start(&self, org: &str, slot: Option<ScriptSlot>) -> Rc<dyn ScriptThread>;
}

/// Where one top-level run's JavaScript runs (a process, natively).
pub trait ScriptThread {
    /// Starts `job` on the thread; its events arrive through the returned stream, the last
    /// one [`Event::Done`].
    fn run(&self, job: Job) -> Box<dyn Events>;
}

/// The events of one job, as the request's thread receives them.
pub trait Events {
    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Event>>;
}

/// One script run, as its thread starts it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Job {
    /// The run's host on the thread, for the runs nested in it.
    pub key: u64,
    /// The run this one nests in (a script operation called from a script), on the same
    /// thread: its budget is this run's.
    pub parent: Option<u64>,
    pub spec: HostSpec,
    pub code: String,
    pub reports_progress: bool,
}

/// What a script thread asks of the request's thread.
pub enum Event {
    /// Make an SDK call and answer through `reply`.
    Call {
        path: String,
        args: Value,
        reply: CallReply,
    },
    Progress(String),
    /// The run is over.
    Done(Ended),
}

/// How a run ended: its value or failure, its logs and what it used of its caps.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Ended {
    pub outcome: Result<Value, Failure>,
    pub logs: Vec<String>,
    pub used: crate::caps::Used,
}

/// The answer to one call: its result, and whether the run's buffered writes are past their cap.
pub type Answer = (Result<Value, SdkError>, bool);

/// A one-shot slot shared by the two threads.
#[derive(Default)]
struct Slot {
    answer: Option<Answer>,
    /// The replying side went away without answering.
    closed: bool,
    waker: Option<Waker>,
}

/// The request thread's side of a call's answer: where it goes (the script's slot in this
/// process, or a frame to the script's process). Dropped unanswered, the call fails.
pub struct CallReply(Option<Box<dyn FnOnce(Option<Answer>) + Send>>);

impl CallReply {
    /// A reply that hands its answer (`None`: none will come) to `sink`.
    pub fn new(sink: impl FnOnce(Option<Answer>) + Send + 'static) -> Self {
        Self(Some(Box::new(sink)))
    }

    pub fn send(mut self, result: Result<Value, SdkError>, over_cap: bool) {
        if let Some(sink) = self.0.take() {
            sink(Some((result, over_cap)));
        }
    }
}

impl Drop for CallReply {
    fn drop(&mut self) {
        if let Some(sink) = self.0.take() {
            sink(None);
        }
    }
}

/// A reply into `slot`, waking whoever waits on it.
fn into_slot(slot: Arc<Mutex<Slot>>) -> CallReply {
    CallReply::new(move |answer| {
        let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
        match answer {
            Some(answer) => slot.answer = Some(answer),
            None => slot.closed = true,
        }
        if let Some(w) = slot.waker.take() {
            w.wake();
        }
    })
}

/// The script thread's side of a call's answer.
struct Answered {
    slot: Arc<Mutex<Slot>>,
    /// Whether it was polled before (it spins on its first poll only).
    polled: bool,
}

/// How long a script thread spins for a call's answer before it sleeps until woken. An SDK
/// read is answered in tens of microseconds, and waking a sleeping thread costs about as much
/// again on a virtual machine (twice per call: there and back); the script's thread has nothing
/// else to do meanwhile. Past this, it sleeps as any waiting task does.
#[cfg(not(target_family = "wasm"))]
const SPIN: std::time::Duration = std::time::Duration::from_micros(50);

impl Answered {
    fn take(&self) -> Option<Option<Answer>> {
        taken(&mut self.slot.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// The answer in `slot`, `Some(None)` if its replying side went away, `None` while it waits.
fn taken(slot: &mut Slot) -> Option<Option<Answer>> {
    match slot.answer.take() {
        Some(answer) => Some(Some(answer)),
        None if slot.closed => Some(None),
        None => None,
    }
}

/// Calls `ready` until it has an answer, for up to [`SPIN`], without sleeping.
fn spin_for<T>(mut ready: impl FnMut() -> Option<T>) -> Option<T> {
    // Native only (script threads exist only there), where `Instant` does not trap; the
    // clock port counts milliseconds, too coarse for this.
    #[cfg(not(target_family = "wasm"))]
    #[allow(clippy::disallowed_methods)]
    {
        let started = std::time::Instant::now();
        while started.elapsed() < SPIN {
            if let Some(done) = ready() {
                return Some(done);
            }
            // Lets another thread that is ready run on this core (the other side of the
            // call, or a realm being made ahead) rather than spin against it.
            std::thread::yield_now();
        }
    }
    #[cfg(target_family = "wasm")]
    let _ = &mut ready;
    None
}

impl Future for Answered {
    type Output = Option<Answer>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if !self.polled {
            self.polled = true;
            if let Some(done) = spin_for(|| self.take()) {
                return Poll::Ready(done);
            }
        }
        // Looked at under the lock the replying side takes: no wake is missed.
        let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        match taken(&mut slot) {
            Some(done) => Poll::Ready(done),
            None => {
                slot.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// Where a script thread sends its events (the native thread's channel to the request's).
pub trait Outbox {
    fn send(&self, event: Event);
}

/// The engine's `Ops` on a script thread: every call goes to the request's thread.
pub struct RemoteOps {
    outbox: Rc<dyn Outbox>,
    clock: Rc<dyn Clock>,
    reports_progress: bool,
    over_cap: std::cell::Cell<bool>,
}

impl Ops for RemoteOps {
    fn call(&self, path: String, args: Value) -> OpFuture<'_> {
        let slot = Arc::new(Mutex::new(Slot::default()));
        self.outbox.send(Event::Call {
            path,
            args,
            reply: into_slot(slot.clone()),
        });
        Box::pin(async move {
            match (Answered {
                slot,
                polled: false,
            })
            .await
            {
                Some((result, over_cap)) => {
                    self.over_cap.set(over_cap);
                    result
                }
                None => Err(SdkError::unavailable(
                    "the request this script runs for has ended",
                )),
            }
        })
    }
    fn reports_progress(&self) -> bool {
        self.reports_progress
    }
    fn progress(&self, what: &str) {
        self.outbox.send(Event::Progress(what.to_string()));
    }
    fn over_cap(&self) -> bool {
        self.over_cap.get()
    }
    fn clock(&self) -> Rc<dyn Clock> {
        self.clock.clone()
    }
}

thread_local! {
    /// The hosts of the runs going on on this script thread, for the runs nested in them.
    static HOSTS: RefCell<HashMap<u64, Rc<Host>>> = RefCell::default();
}

/// Runs `job` on the calling (script) thread: the same host, engine and budget rules as an
/// inline run, in `spare` if it fits. Ends with [`Event::Done`] in `outbox`.
pub async fn run_job(
    job: Job,
    clock: Rc<dyn Clock>,
    outbox: Rc<dyn Outbox>,
    spare: Option<crate::Spare>,
) {
    let parent = job
        .parent
        .and_then(|k| HOSTS.with(|h| h.borrow().get(&k).cloned()));
    let host = Rc::new(Host::new(job.spec, clock.clone(), parent.as_deref()));
    HOSTS.with(|h| h.borrow_mut().insert(job.key, host.clone()));
    let ops = RemoteOps {
        outbox: outbox.clone(),
        clock,
        reports_progress: job.reports_progress,
        over_cap: std::cell::Cell::new(false),
    };
    let outcome = engine::execute(&ops, &host, &job.code, spare).await;
    HOSTS.with(|h| h.borrow_mut().remove(&job.key));
    if let Some(p) = &parent {
        p.absorb(&host);
    }
    outbox.send(Event::Done(Ended {
        outcome,
        logs: host.logs.borrow().clone(),
        used: host.used(),
    }));
}

/// Serves a remote run from the request's thread: makes its calls through `run` (several at
/// once, as the script started them), passes on its progress, and returns how it ended.
pub async fn serve(run: &dyn Ops, mut events: Box<dyn Events>) -> Ended {
    let mut inflight: Vec<(CallReply, OpFuture<'_>)> = Vec::new();
    loop {
        let next = std::future::poll_fn(|cx| {
            let mut replied = false;
            let mut i = 0;
            while i < inflight.len() {
                if let Poll::Ready(result) = inflight[i].1.as_mut().poll(cx) {
                    let (reply, _) = inflight.swap_remove(i);
                    reply.send(result, run.over_cap());
                    replied = true;
                } else {
                    i += 1;
                }
            }
            match events.poll_next(cx) {
                // The script's next call usually follows its answer within microseconds:
                // wait for it here rather than sleep and be woken.
                Poll::Pending if replied && inflight.is_empty() => {
                    spin_for(|| match events.poll_next(cx) {
                        Poll::Ready(e) => Some(e),
                        Poll::Pending => None,
                    })
                    .map_or(Poll::Pending, Poll::Ready)
                }
                other => other,
            }
        })
        .await;
        match next {
            Some(Event::Call { path, args, reply }) => {
                inflight.push((reply, run.call(path, args)));
            }
            Some(Event::Progress(what)) => run.progress(&what),
            Some(Event::Done(ended)) => return ended,
            None => {
                return Ended {
                    outcome: Err(Failure::plain(
                        "internal",
                        "the script's thread stopped before the script ended",
                    )),
                    logs: Vec::new(),
                    used: crate::caps::Used::default(),
                };
            }
        }
    }
}
