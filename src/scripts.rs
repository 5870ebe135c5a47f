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
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::rc::{Rc, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use lore_base::ratelimit::ScriptSlot;
use lore_sandbox::caps::{Cap, ScriptCaps};
use lore_sandbox::failure::{Failure, SdkError};
use lore_sandbox::remote::{Ended, Event, Events, Job, Reply, ScriptThread, ScriptThreads};
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

/// One script process and the jobs it runs.
struct Process {
    child: RefCell<Option<tokio::process::Child>>,
    frames: mpsc::UnboundedSender<Vec<u8>>,
    /// Where each running job's events go.
    jobs: RefCell<HashMap<u64, mpsc::UnboundedSender<Event>>>,
    /// The caps of its current top-level run (for the failures it ends with).
    caps: RefCell<ScriptCaps>,
    ended: Cell<Option<Ending>>,
    runs: Cell<u32>,
    held: Cell<u64>,
    idle_since: Cell<Option<tokio::time::Instant>>,
}

impl Process {
    /// Starts `program` as a script process, with its reader and writer tasks on this
    /// worker's runtime.
    fn spawn(program: &PathBuf) -> std::io::Result<Rc<Self>> {
        let mut child = tokio::process::Command::new(program)
            .arg(script_child::ARG)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        let (Some(mut stdin), Some(mut stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(std::io::Error::other("the script process has no pipes"));
        };
        let (frames, mut outgoing) = mpsc::unbounded_channel::<Vec<u8>>();
        let process = Rc::new(Self {
            child: RefCell::new(Some(child)),
            frames,
            jobs: RefCell::default(),
            caps: RefCell::new(ScriptCaps::default()),
            ended: Cell::new(None),
            runs: Cell::new(0),
            held: Cell::new(0),
            idle_since: Cell::new(None),
        });
        tokio::task::spawn_local(async move {
            while let Some(frame) = outgoing.recv().await {
                if stdin.write_all(&frame).await.is_err() {
                    break;
                }
            }
        });
        let weak = Rc::downgrade(&process);
        tokio::task::spawn_local(async move {
            let mut buffer = Vec::new();
            let mut chunk = vec![0u8; 64 << 10];
            let broken = loop {
                match stdout.read(&mut chunk).await {
                    Ok(0) | Err(_) => break None,
                    Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                }
                let Some(process) = weak.upgrade() else {
                    return;
                };
                loop {
                    match wire::next_frame::<FromScript>(&mut buffer) {
                        Ok(Some(message)) => process.receive(message),
                        Ok(None) => break,
                        Err(e) => {
                            tracing::error!(error = %e.0, "a script process sent an unusable frame");
                            break;
                        }
                    }
                }
                if buffer.len() > 4 + wire::MAX_FRAME {
                    break Some(());
                }
            };
            if let Some(process) = weak.upgrade() {
                if broken.is_some() {
                    process.kill(Ending::Crashed);
                }
                process.stopped().await;
            }
        });
        Ok(process)
    }

    /// One message of the process.
    fn receive(&self, message: FromScript) {
        match message {
            FromScript::Call {
                job,
                call,
                path,
                args,
            } => {
                let frames = self.frames.clone();
                let reply = Reply::new(move |answer| {
                    let (result, over_cap) = answer.unwrap_or_else(|| {
                        (
                            Err(SdkError::unavailable(
                                "the request this script runs for has ended",
                            )),
                            false,
                        )
                    });
                    let _ = frames.send(wire::frame(&ToScript::Answer {
                        call,
                        result,
                        over_cap,
                    }));
                });
                if let Some(events) = self.jobs.borrow().get(&job) {
                    let _ = events.send(Event::Call { path, args, reply });
                }
            }
            FromScript::Progress { job, what } => {
                if let Some(events) = self.jobs.borrow().get(&job) {
                    let _ = events.send(Event::Progress(what));
                }
            }
            FromScript::Done { job, ended } => {
                if let Some(events) = self.jobs.borrow_mut().remove(&job) {
                    let _ = events.send(Event::Done(ended));
                }
            }
            FromScript::Ready { held } => self.held.set(held),
        }
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
        for (_, events) in self.jobs.borrow_mut().drain() {
            let _ = events.send(Event::Done(Ended {
                outcome: Err(failure()),
                logs: Vec::new(),
                used: lore_sandbox::caps::Used::default(),
            }));
        }
    }

    fn alive(&self) -> bool {
        self.ended.get().is_none() && self.child.borrow().is_some()
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
        let (events, received) = mpsc::unbounded_channel();
        let Some(process) = self.process.as_ref().filter(|p| p.alive()) else {
            let _ = events.send(Event::Done(Ended {
                outcome: Err(Failure::plain(
                    "internal",
                    "no script process could be started; see the server's log",
                )),
                logs: Vec::new(),
                used: lore_sandbox::caps::Used::default(),
            }));
            return Box::new(Received(received));
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
        process.jobs.borrow_mut().insert(job.key, events);
        let _ = process.frames.send(wire::frame(&ToScript::Job(job)));
        Box::new(Received(received))
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

struct Received(mpsc::UnboundedReceiver<Event>);

impl Events for Received {
    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        self.0.poll_recv(cx)
    }
}
