//! A realm made before the run that takes it: the engine's context and the runtime every run
//! gets ([`bootstrap::prepare`]), then, at the run's start, the run's own part (its host,
//! clock, limits and `ctx`). A thread that will run a script can make one while it waits
//! ([`Spare::prepare`]), which takes the context's making (a third of a `return 1` run) off the
//! request's path ([`Spare`]). Each realm still serves exactly one run.
//!
//! What making it allocated is counted for the run that takes it ([`lore_meter::charge`]), as
//! if the run had made it itself, so the memory cap means the same either way.

use std::rc::Rc;

use boa_engine::{Context, JsResult, JsValue};

use crate::bootstrap::{self, Runtime};
use crate::caps::ScriptCaps;
use crate::host::Host;
use crate::realm::{self, JobQueue, RunClock};

pub(crate) struct Prepared {
    context: Context,
    clock: Rc<RunClock>,
    queue: Rc<JobQueue>,
    runtime: Runtime,
    /// The engine steps the context was made with (only its builder sets them).
    steps: u64,
}

/// A realm made ahead of its run, with the bytes making it left allocated. Drop it on the
/// thread that made it, before the thread ends (the engine's collector is that thread's).
pub struct Spare {
    realm: Prepared,
    bytes: usize,
}

impl Spare {
    /// Makes a realm for a run with the default steps cap (the one the engine's own count is
    /// made with; a run with another takes a fresh realm). Call it where the thread would
    /// otherwise wait for its run. `None` if it could not be made: the run then makes one,
    /// and says why that failed.
    pub fn prepare() -> Option<Self> {
        let (made, bytes) = lore_meter::measured(|| Prepared::new(ScriptCaps::default().steps));
        made.ok().map(|realm| Self { realm, bytes })
    }

    /// The realm if it fits a run of `steps`, with the bytes to charge that run.
    pub(crate) fn fits(self, steps: u64) -> Option<(Prepared, usize)> {
        (self.realm.steps == steps).then_some((self.realm, self.bytes))
    }
}

impl Prepared {
    pub(crate) fn new(steps: u64) -> JsResult<Self> {
        let clock = Rc::new(RunClock::default());
        let queue = Rc::new(JobQueue::default());
        let mut context = realm::new_context(steps, clock.clone(), queue.clone())?;
        let runtime = bootstrap::prepare(&mut context)?;
        Ok(Self {
            context,
            clock,
            queue,
            runtime,
            steps,
        })
    }

    /// Gives the realm its run: its context and job queue, and the run's `(ctx, sdk)`.
    #[allow(clippy::type_complexity)]
    pub(crate) fn start(
        self,
        host: Rc<Host>,
    ) -> (Context, Rc<JobQueue>, JsResult<(JsValue, JsValue)>) {
        let Self {
            mut context,
            clock,
            queue,
            runtime,
            steps: _,
        } = self;
        realm::admit(&mut context, &clock, &queue, host);
        let runtime = runtime.finish(&mut context);
        (context, queue, runtime)
    }
}
