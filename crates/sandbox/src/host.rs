//! The host side of one run ([`Host`]): the caps and what the run has used of them, its
//! clock, logs and pending host calls ([`Op`]), reachable from every native function through
//! the Boa context (`host`).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use boa_engine::{Context, JsError, JsObject, JsResult, JsString};
use serde_json::Value;

use crate::caps::{Cap, ScriptCaps, Used};
use lore_base::ports::Clock;

/// What a script asked the host to do; the run loop performs it and settles the promise.
pub enum OpKind {
    Call { path: String, args: Value },
    Sleep { ms: u64 },
}

pub struct Op {
    pub kind: OpKind,
    pub resolve: boa_engine::object::builtins::JsFunction,
    pub reject: boa_engine::object::builtins::JsFunction,
}

/// The host side of one run, reachable from the native functions through the context.
pub struct Host {
    pub caps: ScriptCaps,
    pub clock: Rc<dyn Clock>,
    pub started_ms: i64,
    pub pending: RefCell<VecDeque<Op>>,
    pub logs: RefCell<Vec<String>>,
    pub output_bytes: Cell<usize>,
    pub calls_started: Cell<usize>,
    pub cap_hit: Cell<Option<Cap>>,
    /// The memory level above which the next check collects garbage first.
    pub collect_above: Cell<usize>,
    pub rng: Cell<u64>,
    pub args: Value,
    /// The realm's own `Object.keys`, taken before the script could replace it.
    pub object_keys: RefCell<Option<JsObject>>,
    /// Steps spent inside host functions on the script's behalf (regular expressions), which
    /// count against the steps cap together with the engine's own instructions.
    pub host_steps: Cell<u64>,
    /// The engine's remaining instructions, the host's steps and the checkpoints made when the
    /// clock was last read, for [`Host::checkpoint`].
    pub clock_checked_at: Cell<(usize, u64, u32)>,
    /// The last Latin-1 text a regular expression was run on, widened to UTF-16 (a global
    /// regexp's loop runs on the same text once per match).
    pub last_text: RefCell<Option<(JsString, Rc<Vec<u16>>)>>,
    /// The run's compiled regular expressions (see `sandbox::regexp`).
    pub regexes: RefCell<RegexCache>,
    /// How deep the host's own functions are nested in one another (see [`Host::enter`]).
    native_depth: Cell<usize>,
    /// The most memory the thread's scripts held at a checkpoint of this run.
    memory_peak: Cell<usize>,
    /// The steps the run took, set when it ends ([`Host::finish`]).
    steps_used: Cell<u64>,
}

/// Compiled regular expressions by source (UTF-16) and flags.
pub type RegexCache = std::collections::HashMap<(Vec<u16>, String), Rc<lore_jsregex::Regex>>;

/// What a run's host is made from, on whichever thread (or process) runs its JavaScript.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct HostSpec {
    pub caps: ScriptCaps,
    pub started_ms: i64,
    pub args: Value,
    /// Seeds `Math.random`.
    pub seed: u64,
}

impl Host {
    /// A run's host; a run nested in `parent` (a script operation called from a script) goes
    /// on from where the parent's SDK calls and output stand.
    pub fn new(spec: HostSpec, clock: Rc<dyn Clock>, parent: Option<&Host>) -> Self {
        let steps = usize::try_from(spec.caps.steps).unwrap_or(usize::MAX);
        Self {
            caps: spec.caps,
            clock,
            started_ms: spec.started_ms,
            pending: RefCell::new(VecDeque::new()),
            logs: RefCell::default(),
            output_bytes: Cell::new(parent.map_or(0, |p| p.output_bytes.get())),
            calls_started: Cell::new(parent.map_or(0, |p| p.calls_started.get())),
            cap_hit: Cell::new(None),
            collect_above: Cell::new(0),
            rng: Cell::new(spec.seed | 1),
            args: spec.args,
            object_keys: RefCell::new(None),
            host_steps: Cell::new(0),
            clock_checked_at: Cell::new((steps, 0, 0)),
            last_text: RefCell::new(None),
            regexes: RefCell::default(),
            native_depth: Cell::new(0),
            memory_peak: Cell::new(0),
            steps_used: Cell::new(0),
        }
    }

    /// The engine's instructions and the host's steps this run has taken so far.
    fn steps_taken(&self, context: &Context) -> u64 {
        let remaining = context.instructions_remaining() as u64;
        self.caps
            .steps
            .saturating_sub(remaining)
            .saturating_add(self.host_steps.get())
    }

    /// Notes what the run used of its steps, before its realm is dropped.
    pub fn finish(&self, context: &Context) {
        self.steps_used
            .set(self.steps_taken(context).min(self.caps.steps));
        self.note_memory(lore_meter::live());
    }

    /// Keeps `live` as the run's memory peak if it is higher (counted up to the cap).
    fn note_memory(&self, live: usize) {
        let live = live.min(self.caps.memory_bytes);
        self.memory_peak.set(self.memory_peak.get().max(live));
    }

    /// What the run used of its caps (steps as of [`Host::finish`]).
    pub fn used(&self) -> Used {
        Used {
            steps: self.steps_used.get(),
            memory_bytes: self.memory_peak.get() as u64,
            sdk_calls: self.calls_started.get() as u64,
            output_bytes: self.output_bytes.get() as u64,
        }
    }

    /// The parent's run goes on from where a nested run (`child`) left the budget they share.
    pub fn absorb(&self, child: &Host) {
        self.calls_started
            .set(self.calls_started.get().max(child.calls_started.get()));
        self.output_bytes
            .set(self.output_bytes.get().max(child.output_bytes.get()));
        self.logs
            .borrow_mut()
            .extend(child.logs.borrow().iter().cloned());
    }

    pub fn deadline_ms(&self) -> i64 {
        self.started_ms + self.caps.wall_ms as i64
    }

    /// Records that a cap was reached and returns the error that unwinds the script: an engine
    /// error, which no `catch` and no promise handler can stop, so the run ends there (the
    /// failure names the cap recorded here). A catchable error would let `for (;;) try { .. }
    /// catch {}` run on past the cap until the steps ran out.
    pub fn hit(&self, cap: Cap) -> JsError {
        if self.cap_hit.get().is_none() {
            self.cap_hit.set(Some(cap));
        }
        boa_engine::error::EngineError::from(boa_engine::error::RuntimeLimitError::LoopIteration)
            .into()
    }

    /// Ends the run if the thread's scripts hold more than the memory cap.
    /// The engine's collector counts its object headers, not the buffers they own, so garbage
    /// can pile up far past the cap before it runs: over the cap, collect first, then decide.
    /// A collection that frees little must not repeat at every check (each one marks every
    /// live object): the next is forced only after a quarter of the cap more is allocated.
    pub fn check_memory(&self) -> JsResult<()> {
        let cap = self.caps.memory_bytes;
        let live = lore_meter::live();
        self.note_memory(live);
        if live > cap.max(self.collect_above.get()) {
            boa_engine::gc::force_collect();
            lore_meter::collected();
            let after = lore_meter::live();
            if after > cap {
                return Err(self.hit(Cap::Memory));
            }
            self.collect_above.set(after + cap / 4);
        }
        Ok(())
    }

    /// The checks every host function makes on entry (and the run loop at every return of a
    /// host operation): the memory cap, the steps cap over the engine's instructions and the
    /// host's own steps together, and the wall clock, a hard bound on the run. The clock is
    /// read once [`CLOCK_EVERY_STEPS`] engine instructions or host steps, or
    /// [`CLOCK_EVERY_CALLS`] checkpoints, have gone by since it was last read: a tight loop of
    /// host calls does not read it every time, and a built-in that calls the host again and
    /// again without running script code (a global `replace`) still reads it.
    pub fn checkpoint(&self, context: &Context) -> JsResult<()> {
        if let Some(cap) = self.cap_hit.get() {
            return Err(self.hit(cap));
        }
        self.check_memory()?;
        let remaining = context.instructions_remaining();
        let host_steps = self.host_steps.get();
        if self.steps_taken(context) > self.caps.steps {
            return Err(self.hit(Cap::Steps));
        }
        let (at, host_at, calls) = self.clock_checked_at.get();
        let due = at.saturating_sub(remaining) >= CLOCK_EVERY_STEPS
            || host_steps.saturating_sub(host_at) >= CLOCK_EVERY_STEPS as u64
            || calls + 1 >= CLOCK_EVERY_CALLS;
        if due {
            self.clock_checked_at.set((remaining, host_steps, 0));
            self.check_deadline()?;
        } else {
            self.clock_checked_at.set((at, host_at, calls + 1));
        }
        Ok(())
    }

    /// `text`'s Latin-1 `bytes` as UTF-16, widened once for as long as the same string comes
    /// back.
    pub fn widened(&self, text: &JsString, bytes: &[u8]) -> Rc<Vec<u16>> {
        let mut last = self.last_text.borrow_mut();
        if let Some((s, units)) = last.as_ref()
            && let boa_engine::string::JsStrVariant::Latin1(b) = s.as_str().variant()
            && std::ptr::eq(b.as_ptr(), bytes.as_ptr())
            && b.len() == bytes.len()
        {
            return units.clone();
        }
        let units = Rc::new(bytes.iter().map(|&b| u16::from(b)).collect::<Vec<u16>>());
        *last = Some((text.clone(), units.clone()));
        units
    }

    /// Ends the run if its wall clock has run out.
    pub fn check_deadline(&self) -> JsResult<()> {
        if self.clock.now_ms() >= self.deadline_ms() {
            return Err(self.hit(Cap::WallClock));
        }
        Ok(())
    }

    /// Charges `steps` of host work to the steps cap (see [`Host::host_steps`]).
    pub fn spend_steps(&self, context: &Context, steps: u64) -> JsResult<()> {
        self.host_steps
            .set(self.host_steps.get().saturating_add(steps));
        let engine_steps = self
            .caps
            .steps
            .saturating_sub(context.instructions_remaining() as u64);
        if engine_steps.saturating_add(self.host_steps.get()) > self.caps.steps {
            return Err(self.hit(Cap::Steps));
        }
        Ok(())
    }

    /// Enters a host function that may call back into the engine (a wrapped built-in, the
    /// script's `RegExp`). The engine counts the script's frames and its own re-entries against
    /// the recursion cap, but not native functions calling native functions: a getter that is
    /// a bound host function, or arrays nested 200,000 deep turned into a string, would nest
    /// host calls until the thread's stack overflowed. They count here, against the same cap,
    /// each level as [`NATIVE_LEVEL_CALLS`] calls: a level is the wrapper, the built-in it
    /// wraps, a conversion and the next built-in, and its stack must fit the WebAssembly
    /// hosts' (the Spin component overflowed with a level counted as one call).
    pub(crate) fn enter(&self) -> JsResult<Nested<'_>> {
        let depth = self.native_depth.get() + 1;
        if depth * NATIVE_LEVEL_CALLS > self.caps.recursion {
            return Err(self.hit(Cap::Recursion));
        }
        self.native_depth.set(depth);
        Ok(Nested(self))
    }

    pub(crate) fn add_output(&self, bytes: usize) -> JsResult<()> {
        let total = self.output_bytes.get().saturating_add(bytes);
        self.output_bytes.set(total);
        if total > self.caps.output_bytes {
            return Err(self.hit(Cap::Output));
        }
        Ok(())
    }
}

/// What one level of host functions nested in one another counts against the recursion cap
/// (see [`Host::enter`]).
pub(crate) const NATIVE_LEVEL_CALLS: usize = 4;

/// One level of host functions nested in one another, left when dropped.
pub(crate) struct Nested<'a>(&'a Host);

impl Drop for Nested<'_> {
    fn drop(&mut self) {
        self.0.native_depth.set(self.0.native_depth.get() - 1);
    }
}

/// How many engine instructions may run between two readings of the clock by host functions
/// (about a millisecond of script).
pub const CLOCK_EVERY_STEPS: usize = 20_000;
/// How many checkpoints may pass between two readings of the clock.
pub const CLOCK_EVERY_CALLS: u32 = 256;

pub(crate) fn host(context: &Context) -> Rc<Host> {
    context
        .get_data::<Rc<Host>>()
        .cloned()
        .expect("the sandbox host is installed before any script runs")
}
