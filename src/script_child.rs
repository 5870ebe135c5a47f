//! The script process (`lore` started with [`ARG`] by `src/scripts.rs`): it runs the jobs it
//! reads on its standard input, one top-level run at a time and the script operations nested
//! in it, and writes their SDK calls, progress and outcomes to its standard output, in frames
//! (`lore_sandbox::wire`). It reaches nothing else: its environment is empty, its SDK calls are
//! answered by the server, and no file or socket of the server is open in it.
//!
//! It holds its bounds itself where it can (the sandbox's caps, with their structured errors)
//! and by construction where it cannot: it counts every byte it holds and ends itself past the
//! run's memory cap and a margin (`lore_meter::hard_limit`); the server kills it at the wall
//! clock. Between runs it collects its garbage and makes the next run's realm, then says it is
//! ready.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use lore_sandbox::remote::{self, CallReply, Event, Outbox};
use lore_sandbox::wire::{self, FromScript, ToScript};

use crate::ports::SystemClock;

/// The first argument that makes `lore` a script process.
pub const ARG: &str = "__script-process";

/// Past a run's memory cap, what the process may hold besides (garbage the collector has not
/// taken yet, the host's side of its calls) before it ends itself.
const MARGIN: usize = 16 << 20;

/// Calls sent and not answered, by call number: the reader of standard input answers them
/// itself, so a run waiting for its answer (a few microseconds, spinning) sees it at once.
type Pending = Arc<Mutex<HashMap<u64, CallReply>>>;

/// The process's state, on its script thread.
#[derive(Default)]
struct State {
    pending: Pending,
    next_call: Cell<u64>,
    spare: RefCell<Option<lore_sandbox::Spare>>,
}

/// Writes one frame to standard output.
fn send(message: &FromScript) {
    let frame = wire::frame(message);
    let mut out = std::io::stdout().lock();
    // The server is gone if this fails; reading then ends the process too.
    let _ = out.write_all(&frame).and_then(|()| out.flush());
}

/// One job's outbox: its events as frames.
struct JobOutbox {
    job: u64,
    state: Rc<State>,
}

impl Outbox for JobOutbox {
    fn send(&self, event: Event) {
        match event {
            Event::Call { path, args, reply } => {
                let call = self.state.next_call.get() + 1;
                self.state.next_call.set(call);
                self.state
                    .pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(call, reply);
                send(&FromScript::Call {
                    job: self.job,
                    call,
                    path,
                    args,
                });
            }
            Event::Progress(what) => send(&FromScript::Progress {
                job: self.job,
                what,
            }),
            Event::Done(ended) => send(&FromScript::Done {
                job: self.job,
                ended,
            }),
        }
    }
}

/// Makes the next run's realm and says the process is ready for it.
fn ready(state: &State) {
    lore_sandbox::collect_garbage();
    *state.spare.borrow_mut() = lore_sandbox::Spare::prepare();
    send(&FromScript::Ready {
        held: lore_meter::held() as u64,
    });
}

/// The script process's `main`; its exit code.
pub fn run() -> i32 {
    lore_meter::count_process();
    // The server's threads come first when the cores are busy.
    let _ = rustix::process::nice(5);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    {
        Ok(rt) => rt,
        Err(_) => return 70,
    };
    let (inbox, mut jobs) = mpsc::unbounded_channel::<remote::Job>();
    let state = Rc::new(State::default());
    let pending = state.pending.clone();
    // Standard input, read on a thread of its own so that answers arrive while a run computes:
    // an answer goes straight to its call, a job to the script thread.
    let reader = std::thread::Builder::new()
        .name("lore-script-in".into())
        .spawn(move || {
            let mut input = std::io::stdin().lock();
            let mut buffer = Vec::new();
            let mut chunk = vec![0u8; 64 << 10];
            loop {
                match input.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                }
                loop {
                    match wire::next_frame::<ToScript>(&mut buffer) {
                        Ok(Some(ToScript::Job(job))) => {
                            if inbox.send(job).is_err() {
                                return;
                            }
                        }
                        Ok(Some(ToScript::Answer {
                            call,
                            result,
                            over_cap,
                        })) => {
                            let reply = pending
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .remove(&call);
                            if let Some(reply) = reply {
                                reply.send(result, over_cap);
                            }
                        }
                        Ok(None) => break,
                        Err(_) => return,
                    }
                }
            }
        });
    if reader.is_err() {
        return 71;
    }
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async move {
        ready(&state);
        // The server closing our input ends the process.
        while let Some(job) = jobs.recv().await {
            let top = job.parent.is_none();
            let spare = if top {
                lore_meter::hard_limit(Some(
                    lore_meter::held()
                        .saturating_add(job.spec.caps.memory_bytes.saturating_mul(5) / 4)
                        .saturating_add(MARGIN),
                ));
                state.spare.take()
            } else {
                None
            };
            let outbox = Rc::new(JobOutbox {
                job: job.key,
                state: state.clone(),
            });
            let state = state.clone();
            tokio::task::spawn_local(async move {
                remote::run_job(job, Rc::new(SystemClock), outbox, spare).await;
                if top {
                    lore_meter::hard_limit(None);
                    ready(&state);
                }
            });
        }
    });
    0
}
