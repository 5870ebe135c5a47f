//! Where `lore serve` runs scripts' JavaScript: in processes of their own (the same binary,
//! `src/script_child.rs`), never in the server. A boundary the script engine cannot cross
//! holds each run to its caps whatever it calls:
//!
//! - **Memory.** The process counts every byte it holds and ends itself the moment it would
//!   hold more than the run's memory cap allows (`lore_meter::hard_limit`): one built-in that
//!   builds a gigabyte string, or a native loop, stops there. The server's own memory is not
//!   touched.
//! - **Wall clock.** The request thread kills the process once the run is past its wall clock
//!   (and a little grace for the run's own, more precise, check): a built-in that never
//!   returns cannot outlive it.
//! - **Slots.** A run's script slot is held until its JavaScript has stopped: given back when
//!   the run ends, or only once the killed process has been reaped. A request that goes away
//!   (its client disconnected) drops its run, which kills the process.
//! - **CPU.** The operating system shares the cores between the server's threads and the
//!   processes, which run at a lower priority than the server.
//!
//! A process serves one org: after a run that ended within its caps it makes the next run's
//! realm while it waits (`lore_sandbox::Spare`) and may take that org's next run; a run that
//! reached a hard bound, or was cancelled, ends its process. One fresh process is kept started
//! ahead for a run of an org that has none waiting, so a run never waits for a process to
//! start. Each realm still serves exactly one run.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::process::Stdio;
use std::rc::{Rc, Weak};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use lore_base::ratelimit::ScriptSlot;
use lore_sandbox::caps::{Cap, ScriptCaps};
use lore_sandbox::failure::{Failure, SdkError};
use lore_sandbox::remote::{CallReply, Ended, Event, Events, Job, ScriptThread, ScriptThreads};
use lore_sandbox::wire::{self, FromScript, ToScript};

use crate::script_child;

/// How long past a run's wall clock its process is killed: the run's own check ends it with
/// its position and logs first, when it can.
const GRACE_MS: u64 = 1_000;

/// Processes waiting for their org's next run, at most, per worker thread.
const IDLE_MAX: usize = 8;

/// How long a process waits for its org's next run before it ends.
const IDLE_FOR: Duration = Duration::from_secs(60);

/// Runs one process serves at most.
const RUNS_MAX: u32 = 1_000;

/// A process that holds more than this between runs ends instead of taking another.
const HELD_MAX: u64 = 96 << 20;

/// Why a process ended before its run did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// Killed at its run's wall clock.
    WallClock,
    /// Killed because its run was dropped (its request went away).
    Cancelled,
    /// It ended itself at the hard memory limit (abort).
    Memory,
    /// It stopped otherwise.
    Crashed,
}

/// The frames to a script process: written at once where the pipe takes them, the rest kept
/// and written as it drains (whoever polls the process's events flushes it). Shared with the
/// replies to the process's calls, which may be made on any thread.
struct Writer {
    pipe: tokio::net::unix::pipe::Sender,
    backlog: Mutex<Vec<u8>>,
}

impl Writer {
    fn send(&self, frame: &[u8]) {
        let mut backlog = self.backlog.lock().unwrap_or_else(|e| e.into_inner());
        if !backlog.is_empty() {
            backlog.extend_from_slice(frame);
            return;
        }
        match self.pipe.try_write(frame) {
            Ok(n) => backlog.extend_from_slice(&frame[n..]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                backlog.extend_from_slice(frame);
            }
            // The process is gone: reading says so.
            Err(_) => {}
        }
    }

    /// Writes what is kept, as far as the pipe takes it; wakes `cx` when it can take more.
    fn flush(&self, cx: &mut Context<'_>) {
        loop {
            let mut backlog = self.backlog.lock().unwrap_or_else(|e| e.into_inner());
            if backlog.is_empty() {
                return;
            }
            match self.pipe.try_write(&backlog) {
                Ok(n) => {
                    backlog.drain(..n);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    drop(backlog);
                    match self.pipe.poll_write_ready(cx) {
                        Poll::Ready(Ok(())) => continue,
                        Poll::Ready(Err(_)) => {}
                        Poll::Pending => return,
                    }
                    self.backlog
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .clear();
                    return;
                }
                Err(_) => {
                    backlog.clear();
                    return;
                }
            }
        }
    }
}

/// One script process and the jobs it runs. Its output is read by whoever polls a job's
/// events (`Received`), without a task in between, so an answer that comes within a wait's
/// first microseconds is taken at once (`remote::serve` looks again before it sleeps).
struct Process {
    child: RefCell<Option<tokio::process::Child>>,
    writer: Arc<Writer>,
    output: tokio::net::unix::pipe::Receiver,
    buffer: RefCell<Vec<u8>>,
    /// Each running job's events not yet taken.
    jobs: RefCell<HashMap<u64, VecDeque<Event>>>,
    /// Who waits for the process's next events.
    waker: RefCell<Option<Waker>>,
    /// Its output ended (the process is ending).
    closed: Cell<bool>,
    /// The caps of its current top-level run (for the failures it ends with).
    caps: RefCell<ScriptCaps>,
    ended: Cell<Option<Ending>>,
    runs: Cell<u32>,
    held: Cell<u64>,
    idle_since: Cell<Option<tokio::time::Instant>>,
}

impl Process {
    /// Starts `program` as a script process; its pipes are registered with this worker's
    /// runtime.
    fn spawn(program: &PathBuf) -> std::io::Result<Rc<Self>> {
        let mut child = tokio::process::Command::new(program)
            .arg(script_child::ARG)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(std::io::Error::other("the script process has no pipes"));
        };
        let pipe = tokio::net::unix::pipe::Sender::from_owned_fd(stdin.into_owned_fd()?)?;
        let output = tokio::net::unix::pipe::Receiver::from_owned_fd(stdout.into_owned_fd()?)?;
        Ok(Rc::new(Self {
            child: RefCell::new(Some(child)),
            writer: Arc::new(Writer {
                pipe,
                backlog: Mutex::default(),
            }),
            output,
            buffer: RefCell::default(),
            jobs: RefCell::default(),
            waker: RefCell::default(),
            closed: Cell::new(false),
            caps: RefCell::new(ScriptCaps::default()),
            ended: Cell::new(None),
            runs: Cell::new(0),
            held: Cell::new(0),
            idle_since: Cell::new(None),
        }))
    }

    /// Reads what the process has written and sorts it into its jobs' events; `Pending` once
    /// nothing more is there (`cx` is woken when there is).
    fn pump(self: &Rc<Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.writer.flush(cx);
        let mut chunk = [0u8; 16 << 10];
        loop {
            if self.closed.get() {
                return Poll::Ready(());
            }
            match self.output.try_read(&mut chunk) {
                Ok(0) => {
                    self.close(cx);
                    return Poll::Ready(());
                }
                Ok(n) => {
                    let mut buffer = self.buffer.borrow_mut();
                    buffer.extend_from_slice(&chunk[..n]);
                    loop {
                        match wire::next_frame::<FromScript>(&mut buffer) {
                            Ok(Some(message)) => self.receive(message),
                            Ok(None) => break,
                            Err(e) => {
                                tracing::error!(error = %e.0, "a script process sent an unusable frame");
                                drop(buffer);
                                self.kill(Ending::Crashed);
                                self.close(cx);
                                return Poll::Ready(());
                            }
                        }
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    match self.output.poll_read_ready(cx) {
                        Poll::Ready(Ok(())) => continue,
                        Poll::Ready(Err(_)) => {
                            self.close(cx);
                            return Poll::Ready(());
                        }
                        Poll::Pending => return Poll::Pending,
                    }
                }
                Err(_) => {
                    self.close(cx);
                    return Poll::Ready(());
                }
            }
        }
    }

    /// One message of the process.
    fn receive(&self, message: FromScript) {
        let push = |job: u64, event: Event| {
            if let Some(events) = self.jobs.borrow_mut().get_mut(&job) {
                events.push_back(event);
            }
        };
        match message {
            FromScript::Call {
                job,
                call,
                path,
                args,
            } => {
                let writer = self.writer.clone();
                let reply = CallReply::new(move |answer| {
                    let (result, over_cap) = answer.unwrap_or_else(|| {
                        (
                            Err(SdkError::unavailable(
                                "the request this script runs for has ended",
                            )),
                            false,
                        )
                    });
                    writer.send(&wire::frame(&ToScript::Answer {
                        call,
                        result,
                        over_cap,
                    }));
                });
                push(job, Event::Call { path, args, reply });
            }
            FromScript::Progress { job, what } => push(job, Event::Progress(what)),
            FromScript::Done { job, ended } => push(job, Event::Done(ended)),
            FromScript::Ready { held } => self.held.set(held),
        }
    }

    /// The process's output ended: once it has exited, every job it still runs ends, saying
    /// why (a task of this worker waits for the exit; `cx` is woken then).
    fn close(self: &Rc<Self>, cx: &mut Context<'_>) {
        if self.closed.replace(true) {
            return;
        }
        *self.waker.borrow_mut() = Some(cx.waker().clone());
        let process = self.clone();
        tokio::task::spawn_local(async move {
            process.stopped().await;
            if let Some(waker) = process.waker.take() {
                waker.wake();
            }
        });
    }

    /// Kills the process (once), saying why.
    fn kill(&self, why: Ending) {
        if self.ended.get().is_none() {
            self.ended.set(Some(why));
        }
        if let Some(child) = self.child.borrow_mut().as_mut() {
            let _ = child.start_kill();
        }
    }

    /// Waits for the process to end, then ends every job it still had with why.
    async fn stopped(&self) {
        let child = self.child.borrow_mut().take();
        let status = match child {
            Some(mut child) => child.wait().await.ok(),
            None => None,
        };
        let why = self.ended.get().unwrap_or_else(|| {
            use std::os::unix::process::ExitStatusExt;
            // The hard memory limit aborts (SIGABRT); anything else is a crash.
            if status.and_then(|s| s.signal()) == Some(6) {
                Ending::Memory
            } else {
                Ending::Crashed
            }
        });
        self.ended.set(Some(why));
        let caps = self.caps.borrow().clone();
        let failure = || match why {
            Ending::WallClock => Failure::cap(Cap::WallClock, &caps),
            Ending::Memory => Failure::cap(Cap::Memory, &caps),
            Ending::Cancelled => Failure::plain("internal", "the run was cancelled"),
            Ending::Crashed => Failure::plain(
                "internal",
                format!("the script's process stopped ({status:?}) before the script ended"),
            ),
        };
        for events in self.jobs.borrow_mut().values_mut() {
            let done = events.iter().any(|e| matches!(e, Event::Done(_)));
            if !done {
                events.push_back(Event::Done(Ended {
                    outcome: Err(failure()),
                    logs: Vec::new(),
                    used: lore_sandbox::caps::Used::default(),
                }));
            }
        }
    }

    /// Whether it may take a run: not ended, and still running (it may have exited while it
    /// waited, unseen).
    fn alive(&self) -> bool {
        if self.ended.get().is_some() || self.closed.get() {
            return false;
        }
        match self.child.borrow_mut().as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }
}

/// The processes of one worker thread: those waiting for their org's next run, and one fresh.
pub struct ScriptProcesses {
    program: PathBuf,
    idle: RefCell<Vec<(String, Rc<Process>)>>,
    fresh: RefCell<Option<Rc<Process>>>,
    me: RefCell<Weak<ScriptProcesses>>,
}

impl ScriptProcesses {
    /// Script processes of `program` (the `lore` binary).
    pub fn new(program: PathBuf) -> Rc<Self> {
        let pool = Rc::new(Self {
            program,
            idle: RefCell::default(),
            fresh: RefCell::default(),
            me: RefCell::default(),
        });
        *pool.me.borrow_mut() = Rc::downgrade(&pool);
        pool
    }

    /// The `lore` binary this process was started from.
    pub fn current() -> std::io::Result<Rc<Self>> {
        Ok(Self::new(std::env::current_exe()?))
    }

    fn spawn(&self) -> Option<Rc<Process>> {
        match Process::spawn(&self.program) {
            Ok(p) => Some(p),
            Err(e) => {
                tracing::error!(error = %e, program = %self.program.display(), "could not start a script process");
                None
            }
        }
    }

    /// A process for a run of `org`: one of its own waiting, else the fresh one (and another
    /// fresh one started for the next).
    fn take(&self, org: &str) -> Option<Rc<Process>> {
        let mut idle = self.idle.borrow_mut();
        idle.retain(|(_, p)| {
            let keep = p.alive()
                && p.idle_since
                    .get()
                    .is_none_or(|since| since.elapsed() < IDLE_FOR);
            if !keep {
                p.kill(Ending::Cancelled);
            }
            keep
        });
        if let Some(at) = idle.iter().rposition(|(o, _)| o == org) {
            return Some(idle.remove(at).1);
        }
        drop(idle);
        let fresh = self.fresh.take().filter(|p| p.alive());
        *self.fresh.borrow_mut() = self.spawn();
        fresh.or_else(|| self.spawn())
    }

    /// Takes `process` back after a run of `org` that ended within its caps.
    fn give_back(&self, org: String, process: Rc<Process>) {
        if process.runs.get() >= RUNS_MAX || process.held.get() > HELD_MAX {
            process.kill(Ending::Cancelled);
            return;
        }
        process.idle_since.set(Some(tokio::time::Instant::now()));
        let mut idle = self.idle.borrow_mut();
        idle.push((org, process));
        if idle.len() > IDLE_MAX {
            let (_, oldest) = idle.remove(0);
            oldest.kill(Ending::Cancelled);
        }
    }
}

impl ScriptThreads for ScriptProcesses {
    fn start(&self, org: &str, slot: Option<ScriptSlot>) -> Rc<dyn ScriptThread> {
        Rc::new(Run {
            process: self.take(org),
            org: org.to_string(),
            slot: RefCell::new(slot),
            pool: self.me.borrow().clone(),
            top: Cell::new(None),
        })
    }
}

/// One top-level run's hold on its process (and the jobs nested in it).
struct Run {
    process: Option<Rc<Process>>,
    org: String,
    slot: RefCell<Option<ScriptSlot>>,
    pool: Weak<ScriptProcesses>,
    /// The key of its top-level job, once started.
    top: Cell<Option<u64>>,
}

impl ScriptThread for Run {
    fn run(&self, job: Job) -> Box<dyn Events> {
        let Some(process) = self.process.as_ref().filter(|p| p.ended.get().is_none()) else {
            return Box::new(Unstarted(Some(Event::Done(Ended {
                outcome: Err(Failure::plain(
                    "internal",
                    "no script process could be started; see the server's log",
                )),
                logs: Vec::new(),
                used: lore_sandbox::caps::Used::default(),
            }))));
        };
        if job.parent.is_none() {
            self.top.set(Some(job.key));
            *process.caps.borrow_mut() = job.spec.caps.clone();
            process.runs.set(process.runs.get() + 1);
            process.idle_since.set(None);
            // The hard bound on the wall clock: past it, the process is killed.
            let now = lore_base::ports::Clock::now_ms(&crate::ports::SystemClock);
            let deadline = job.spec.started_ms + job.spec.caps.wall_ms as i64 + GRACE_MS as i64;
            let wait = Duration::from_millis(u64::try_from(deadline - now).unwrap_or(0));
            let watched = Rc::downgrade(process);
            let key = job.key;
            tokio::task::spawn_local(async move {
                tokio::time::sleep(wait).await;
                if let Some(p) = watched.upgrade()
                    && p.jobs.borrow().contains_key(&key)
                {
                    p.kill(Ending::WallClock);
                }
            });
        }
        let key = job.key;
        process.jobs.borrow_mut().insert(key, VecDeque::new());
        process.writer.send(&wire::frame(&ToScript::Job(job)));
        Box::new(Received {
            process: process.clone(),
            job: key,
        })
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let Some(process) = self.process.take() else {
            return;
        };
        let slot = self.slot.take();
        let finished = self.top.get().is_some() && process.jobs.borrow().is_empty();
        if finished && process.alive() {
            // The JavaScript has stopped: the slot goes back now, the process to its org.
            drop(slot);
            if let Some(pool) = self.pool.upgrade() {
                pool.give_back(std::mem::take(&mut self.org), process);
            }
            return;
        }
        // Still running (the request went away) or ended badly: the process is killed, and
        // the slot held until it has stopped.
        process.kill(Ending::Cancelled);
        // Already reaped (it ended before its run did): the slot is free at once.
        let Some(mut child) = process.child.borrow_mut().take() else {
            return;
        };
        tokio::task::spawn_local(async move {
            let _ = child.wait().await;
            drop(slot);
            drop(process);
        });
    }
}

/// One job's events, read from its process as they are asked for.
struct Received {
    process: Rc<Process>,
    job: u64,
}

impl Events for Received {
    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        loop {
            let next = self
                .process
                .jobs
                .borrow_mut()
                .get_mut(&self.job)
                .and_then(VecDeque::pop_front);
            if let Some(event) = next {
                if matches!(event, Event::Done(_)) {
                    self.process.jobs.borrow_mut().remove(&self.job);
                }
                return Poll::Ready(Some(event));
            }
            if !self.process.jobs.borrow().contains_key(&self.job) {
                return Poll::Ready(None);
            }
            if self.process.closed.get() {
                // Its end is on its way (`Process::close`).
                *self.process.waker.borrow_mut() = Some(cx.waker().clone());
                return Poll::Pending;
            }
            if self.process.pump(cx).is_pending() {
                // Nothing yet: a last look at what the pump sorted in, then wait.
                let queued = self
                    .process
                    .jobs
                    .borrow()
                    .get(&self.job)
                    .is_some_and(|q| !q.is_empty());
                if !queued {
                    return Poll::Pending;
                }
            }
        }
    }
}

/// The events of a job that could not start: its one failure.
struct Unstarted(Option<Event>);

impl Events for Unstarted {
    fn poll_next(&mut self, _cx: &mut Context<'_>) -> Poll<Option<Event>> {
        Poll::Ready(self.0.take())
    }
}
