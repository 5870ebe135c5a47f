//! The threads `lore serve` computes on besides its workers, so that no tenant's computing
//! holds the requests of a worker thread:
//!
//! - each top-level script run gets an operating-system thread of its own (with the stack the
//!   sandbox is sized for and a single-threaded runtime for its timers), which runs its
//!   JavaScript and the script operations it calls; its SDK calls go back to the worker thread
//!   that serves the request (see `sandbox::remote`). The thread ends with the run. Each worker
//!   keeps one such thread started ahead, which makes its script realm while it waits
//!   (`lore_sandbox::Spare`), so a run does not wait for a thread or an engine context;
//! - each SQL query's computing (the `Offload` port) runs on a thread of its own too.
//!
//! A script or query that computes for seconds then takes a core's share from the scheduler,
//! as any thread does, instead of holding every request of its worker.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use tokio::sync::{mpsc, oneshot};

use crate::ports::SystemClock;
use lore_base::ports::{Clock, Offload};
use lore_sandbox::remote::{self, Event, Events, Job, Outbox, ScriptThread, ScriptThreads};

/// Starts a thread per top-level script run, one run ahead.
#[derive(Default)]
pub struct ThreadPerRun {
    /// The thread the next run takes, started (and making its realm) before it is asked for.
    ahead: RefCell<Option<Rc<Thread>>>,
}

impl ScriptThreads for ThreadPerRun {
    fn start(&self) -> Rc<dyn ScriptThread> {
        let thread = self
            .ahead
            .take()
            .unwrap_or_else(|| Rc::new(Thread::spawn()));
        // The next run's, started now: its realm is made while this run goes on (made after
        // this run's answer instead, it would not be ready for a run that follows at once;
        // BENCHMARKS.md, "Script start").
        *self.ahead.borrow_mut() = Some(Rc::new(Thread::spawn()));
        thread
    }
}

struct Thread {
    jobs: mpsc::UnboundedSender<(Job, mpsc::UnboundedSender<Event>)>,
}

impl Thread {
    fn spawn() -> Self {
        let (jobs, inbox) = mpsc::unbounded_channel::<(Job, mpsc::UnboundedSender<Event>)>();
        let spawned = std::thread::Builder::new()
            .name("lore-script".into())
            .stack_size(lore_sandbox::failure::STACK_BYTES)
            .spawn(move || serve_jobs(inbox));
        if let Err(e) = spawned {
            // Without a thread the jobs sent to it are dropped; each run then fails with
            // "the script's thread stopped", which says what happened.
            tracing::error!(error = %e, "could not start a script thread");
        }
        Self { jobs }
    }
}

impl ScriptThread for Thread {
    fn run(&self, job: Job) -> Box<dyn Events> {
        let (events, received) = mpsc::unbounded_channel();
        let _ = self.jobs.send((job, events));
        Box::new(Received(received))
    }
}

struct Received(mpsc::UnboundedReceiver<Event>);

impl Events for Received {
    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        self.0.poll_recv(cx)
    }
}

struct Sender(mpsc::UnboundedSender<Event>);

impl Outbox for Sender {
    fn send(&self, event: Event) {
        // The request's side is gone (the client left): the run's calls then fail, and it ends.
        let _ = self.0.send(event);
    }
}

/// The script thread: runs each job it is given (the top-level run, then the runs nested in
/// it, which start while their parent waits) until its handle is dropped and they are done.
fn serve_jobs(mut inbox: mpsc::UnboundedReceiver<(Job, mpsc::UnboundedSender<Event>)>) {
    // The first run's realm, made while the thread waits for it.
    let mut spare = lore_sandbox::Spare::prepare();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "could not start a script thread's runtime");
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async move {
        while let Some((job, events)) = inbox.recv().await {
            let outbox: Rc<dyn Outbox> = Rc::new(Sender(events));
            tokio::task::spawn_local(remote::run_job(
                job,
                Rc::new(SystemClock),
                outbox,
                spare.take(),
            ));
        }
    });
    // The jobs still running (none, once the handle is gone: the run that held it has ended).
    runtime.block_on(local);
}

/// Runs each offloaded job (an SQL query's computing) on a thread of its own.
pub struct ThreadPerJob;

impl Offload for ThreadPerJob {
    fn run(&self, job: Box<dyn FnOnce(Rc<dyn Clock>) + Send>) -> Pin<Box<dyn Future<Output = ()>>> {
        let (done, finished) = oneshot::channel::<()>();
        let spawned = std::thread::Builder::new()
            .name("lore-query".into())
            // The engine plans and evaluates nested expressions recursively.
            .stack_size(16 << 20)
            .spawn(move || {
                job(Rc::new(SystemClock));
                let _ = done.send(());
            });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "could not start a query thread");
        }
        // A job whose thread could not start (or panicked) ends the wait all the same; its
        // caller then finds no answer and says so.
        Box::pin(async move {
            let _ = finished.await;
        })
    }
}
