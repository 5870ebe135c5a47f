//! One fresh Boa realm per run: the engine's hooks (no `eval` or `Function`, the host's clock,
//! UTC, small buffers), the promise job queue, the host functions scripts reach (`ctx`, the
//! SDK bridge) and the conversion of values across the bridge, with depth and size caps.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use boa_engine::context::time::JsInstant;
use boa_engine::context::{Clock as EngineClock, HostHooks};
use boa_engine::job::{Job, JobExecutor};
use boa_engine::object::FunctionObjectBuilder;
use boa_engine::object::builtins::JsPromise;
use boa_engine::realm::Realm;
use boa_engine::{
    Context, JsError, JsNativeError, JsObject, JsResult, JsString, JsValue, NativeFunction, Source,
    js_string,
};
use serde_json::Value;

use crate::caps::{Cap, ScriptCaps};
pub use crate::values::{to_json, well_formed};
use crate::ports::Clock;

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
}

/// Compiled regular expressions by source (UTF-16) and flags.
pub type RegexCache = std::collections::HashMap<(Vec<u16>, String), Rc<lore_jsregex::Regex>>;

/// What a run's host is made from, on whichever thread runs its JavaScript.
#[derive(Debug, Clone)]
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
        if lore_meter::live() > cap.max(self.collect_above.get()) {
            boa_engine::gc::force_collect();
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
        let engine_steps = self.caps.steps.saturating_sub(remaining as u64);
        let host_steps = self.host_steps.get();
        if engine_steps.saturating_add(host_steps) > self.caps.steps {
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

    fn add_output(&self, bytes: usize) -> JsResult<()> {
        let total = self.output_bytes.get().saturating_add(bytes);
        self.output_bytes.set(total);
        if total > self.caps.output_bytes {
            return Err(self.hit(Cap::Output));
        }
        Ok(())
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

/// The engine's hooks: string compilation refused, UTC, small buffers.
struct Hooks;

impl HostHooks for Hooks {
    fn ensure_can_compile_strings(
        &self,
        _realm: Realm,
        _parameters: &[JsString],
        _body: &JsString,
        _direct: bool,
        _context: &mut Context,
    ) -> JsResult<()> {
        Err(JsNativeError::eval()
            .with_message("eval, Function and other string compilers are disabled in lore scripts")
            .into())
    }

    fn local_timezone_offset_seconds(&self, _unix_time_seconds: i64) -> i32 {
        0
    }

    fn max_buffer_size(&self, _context: &mut Context) -> u64 {
        16 << 20
    }
}

/// `Date` and Boa's own timing read the host clock.
struct HostClock(Rc<dyn Clock>);

impl EngineClock for HostClock {
    fn now(&self) -> JsInstant {
        let ms = self.0.now_ms().max(0) as u64;
        JsInstant::new(ms / 1000, ((ms % 1000) * 1_000_000) as u32)
    }

    fn system_time_millis(&self) -> i64 {
        self.0.now_ms()
    }
}

/// Promise jobs (microtasks), first in first out, counted against the jobs cap: an endless
/// promise chain holds every promise it made, so it must end long before the step budget
/// does. Other job kinds never arise: scripts have no timers but `ctx.sleep`, which the run
/// loop owns.
pub struct JobQueue {
    pub jobs: RefCell<VecDeque<Job>>,
    pub run: Cell<u64>,
    pub max: u64,
    pub refused: Cell<bool>,
}

impl JobExecutor for JobQueue {
    fn enqueue_job(self: Rc<Self>, job: Job, _context: &mut Context) {
        if self.run.get() + self.jobs.borrow().len() as u64 >= self.max {
            self.refused.set(true);
            return;
        }
        self.jobs.borrow_mut().push_back(job);
    }

    fn run_jobs(self: Rc<Self>, context: &mut Context) -> JsResult<()> {
        loop {
            let job = self.jobs.borrow_mut().pop_front();
            let Some(job) = job else { return Ok(()) };
            self.run.set(self.run.get() + 1);
            match job {
                Job::PromiseJob(job) => {
                    job.call(context)?;
                }
                Job::GenericJob(job) => {
                    job.call(context)?;
                }
                _ => {
                    return Err(JsNativeError::typ()
                        .with_message("this kind of job is not available in lore scripts")
                        .into());
                }
            }
            // An engine limit raised inside a job (after an `await`) must end the run here, not
            // be swallowed by a rejected promise nobody looks at.
            let h = host(context);
            if h.check_memory().is_err() {
                return Ok(());
            }
            if context.instructions_remaining() == 0 || h.cap_hit.get().is_some() {
                return Ok(());
            }
        }
    }
}

/// A fresh context with the host installed.
pub fn new_context(host: Rc<Host>, queue: Rc<JobQueue>) -> JsResult<Context> {
    let clock = Rc::new(HostClock(host.clock.clone()));
    let mut context = Context::builder()
        .host_hooks(Rc::new(Hooks))
        .clock(clock)
        .job_executor(queue)
        .instructions_remaining(usize::try_from(host.caps.steps).unwrap_or(usize::MAX))
        .build()?;
    let limits = context.runtime_limits_mut();
    limits.set_recursion_limit(host.caps.recursion);
    limits.set_stack_size_limit(host.caps.value_stack);
    context.insert_data(host);
    Ok(context)
}

fn function(context: &mut Context, name: &str, length: usize, f: NativeFunction) -> JsValue {
    FunctionObjectBuilder::new(context.realm(), f)
        .name(JsString::from(name))
        .length(length)
        .build()
        .into()
}

/// Runs the bootstrap in `context` and returns `(ctx, sdk)`.
pub fn install(context: &mut Context) -> JsResult<(JsValue, JsValue)> {
    let h = host(context);
    let object = context.intrinsics().constructors().object().constructor();
    let keys = object.get(js_string!("keys"), context)?;
    *h.object_keys.borrow_mut() = keys.as_object();
    let bootstrap = context.eval(Source::from_bytes(include_str!("bootstrap.js")))?;
    let args = JsValue::from_json(&h.args, context)?;
    let o = JsObject::with_null_proto();
    let entries: [(&str, usize, NativeFunction); 11] = [
        ("countOf", 2, NativeFunction::from_fn_ptr(count_of)),
        (
            "regexExec",
            1,
            NativeFunction::from_fn_ptr(crate::regexp::exec),
        ),
        (
            "regexCompile",
            2,
            NativeFunction::from_fn_ptr(crate::regexp::compile),
        ),
        ("call", 2, NativeFunction::from_fn_ptr(sdk_call)),
        ("sleep", 1, NativeFunction::from_fn_ptr(sleep)),
        ("log", 0, NativeFunction::from_fn_ptr(log)),
        ("now", 0, NativeFunction::from_fn_ptr(now)),
        ("random", 0, NativeFunction::from_fn_ptr(random)),
        ("cap", 1, NativeFunction::from_fn_ptr(cap)),
        ("jsonDepth", 1, NativeFunction::from_fn_ptr(json_depth)),
        ("tick", 0, NativeFunction::from_fn_ptr(tick)),
    ];
    for (name, length, f) in entries {
        let value = function(context, name, length, f);
        o.set(JsString::from(name), value, false, context)?;
    }
    o.set(js_string!("args"), args, false, context)?;
    // The concatenation guards the TypeScript step compiles every `+` into.
    let guards: [(&str, usize, NativeFunction); 3] = [
        (crate::strip::TICK, 0, NativeFunction::from_fn_ptr(tick)),
        (
            crate::strip::ADD_GUARD,
            2,
            NativeFunction::from_fn_ptr(add_guard),
        ),
        (
            crate::strip::STRING_GUARD,
            1,
            NativeFunction::from_fn_ptr(string_guard),
        ),
    ];
    for (name, length, f) in guards {
        let value = function(context, name, length, f);
        context.global_object().define_property_or_throw(
            JsString::from(name),
            boa_engine::property::PropertyDescriptor::builder()
                .value(value)
                .writable(false)
                .enumerable(false)
                .configurable(false),
            context,
        )?;
    }
    o.set(
        js_string!("maxString"),
        h.caps.string_chars as f64,
        false,
        context,
    )?;
    o.set(
        js_string!("maxArray"),
        h.caps.array_len as f64,
        false,
        context,
    )?;
    o.set(
        js_string!("maxDepth"),
        h.caps.value_depth as f64,
        false,
        context,
    )?;
    o.set(
        js_string!("maxRecursion"),
        h.caps.recursion as f64,
        false,
        context,
    )?;
    let bootstrap = bootstrap
        .as_callable()
        .ok_or_else(|| JsNativeError::typ().with_message("bootstrap is not a function"))?
        .clone();
    let pair = bootstrap.call(&JsValue::undefined(), &[o.into()], context)?;
    let pair = pair
        .as_object()
        .ok_or_else(|| JsNativeError::typ().with_message("bootstrap returned no pair"))?;
    let ctx = pair.get(0, context)?;
    let sdk = pair.get(1, context)?;
    Ok((ctx, sdk))
}

/// `call(path, args)`: one SDK call; returns a promise the run loop settles.
fn sdk_call(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let h = host(context);
    let path = args
        .first()
        .and_then(JsValue::as_string)
        .map(|s| s.to_std_string_escaped())
        .ok_or_else(|| JsNativeError::typ().with_message("SDK method path must be a string"))?;
    if h.calls_started.get() >= h.caps.sdk_calls {
        return Err(h.hit(Cap::SdkCalls));
    }
    h.checkpoint(context)?;
    h.calls_started.set(h.calls_started.get() + 1);
    let value = to_json(
        args.get(1).unwrap_or(&JsValue::undefined()),
        &h,
        context,
        &mut 0,
    )?;
    let (promise, resolvers) = JsPromise::new_pending(context);
    h.pending.borrow_mut().push_back(Op {
        kind: OpKind::Call { path, args: value },
        resolve: resolvers.resolve,
        reject: resolvers.reject,
    });
    Ok(promise.into())
}

/// `__lore_tick()`, at the top of every loop body and function body: the checks no engine step
/// makes (memory, the host's share of the steps, the wall clock; see [`Host::checkpoint`]).
fn tick(_: &JsValue, _: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    host(context).checkpoint(context)?;
    Ok(JsValue::undefined())
}

/// `__lore_add(a, b)`: `a + b`, then the string cap on a string result.
fn add_guard(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let undefined = JsValue::undefined();
    let a = args.first().unwrap_or(&undefined);
    let b = args.get(1).unwrap_or(&undefined);
    let sum = a.add(b, context)?;
    check_string(&sum, context)?;
    host(context).checkpoint(context)?;
    Ok(sum)
}

/// `__lore_str(s)`: the string cap on a template literal's value.
fn string_guard(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let value = args.first().cloned().unwrap_or_default();
    check_string(&value, context)?;
    host(context).checkpoint(context)?;
    Ok(value)
}

fn check_string(value: &JsValue, context: &Context) -> JsResult<()> {
    if let Some(s) = value.as_string() {
        let h = host(context);
        if s.len() > h.caps.string_chars {
            return Err(h.hit(Cap::StringLength));
        }
    }
    Ok(())
}

/// `ctx.sleep(ms)`
fn sleep(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let h = host(context);
    let ms = args
        .first()
        .cloned()
        .unwrap_or_default()
        .to_number(context)?;
    if !ms.is_finite() || ms < 0.0 {
        return Err(JsNativeError::range()
            .with_message("ctx.sleep(ms) takes a number of milliseconds >= 0")
            .into());
    }
    let ms = ms as u64;
    h.checkpoint(context)?;
    if ms > h.caps.sleep_ms {
        return Err(h.hit(Cap::Sleep));
    }
    if h.clock.now_ms() + ms as i64 > h.deadline_ms() {
        return Err(h.hit(Cap::WallClock));
    }
    let (promise, resolvers) = JsPromise::new_pending(context);
    h.pending.borrow_mut().push_back(Op {
        kind: OpKind::Sleep { ms },
        resolve: resolvers.resolve,
        reject: resolvers.reject,
    });
    Ok(promise.into())
}

/// `ctx.log(...values)`: strings as they are, other values as JSON.
fn log(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let h = host(context);
    let mut parts = Vec::with_capacity(args.len());
    for v in args {
        // A log is text for people: a lone surrogate shows as U+FFFD.
        let text = match v.as_string() {
            Some(s) => s.to_std_string_lossy(),
            None if v.is_number() => v.display().to_string(),
            None => match to_json(v, &h, context, &mut 0)? {
                Value::Null if v.is_undefined() => "undefined".to_string(),
                other => other.to_string(),
            },
        };
        h.add_output(text.len() + 1)?;
        h.checkpoint(context)?;
        parts.push(text);
    }
    h.logs.borrow_mut().push(parts.join(" "));
    Ok(JsValue::undefined())
}

/// `ctx.now()`: the host's time, RFC 3339.
fn now(_: &JsValue, _: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let h = host(context);
    Ok(JsString::from(crate::time::format_time(h.clock.now_ms()).as_str()).into())
}

/// `Math.random()`: xorshift64* seeded from the host's randomness.
fn random(_: &JsValue, _: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let h = host(context);
    let mut x = h.rng.get();
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    h.rng.set(x);
    let bits = x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11;
    Ok(JsValue::from(bits as f64 / (1u64 << 53) as f64))
}

/// `cap(name)`: a guarded built-in reached its cap.
fn cap(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let h = host(context);
    let name = args
        .first()
        .and_then(JsValue::as_string)
        .map(|s| s.to_std_string_escaped())
        .unwrap_or_default();
    let cap = match name.as_str() {
        "string_length" => Cap::StringLength,
        "array_length" => Cap::ArrayLength,
        "recursion" => Cap::Recursion,
        _ => Cap::ValueDepth,
    };
    Err(h.hit(cap))
}

/// `countOf(text, search)`: non-overlapping occurrences of `search` in `text`.
fn count_of(_: &JsValue, args: &[JsValue], _: &mut Context) -> JsResult<JsValue> {
    let arg = |i: usize| {
        args.get(i)
            .and_then(JsValue::as_string)
            .map(|s| s.to_std_string_escaped())
            .unwrap_or_default()
    };
    let (text, search) = (arg(0), arg(1));
    let n = if search.is_empty() {
        text.chars().count() + 1
    } else {
        text.matches(search.as_str()).count()
    };
    Ok(JsValue::from(n as f64))
}

/// `jsonDepth(text)`: the bracket depth of JSON text (strings skipped), without recursion.
fn json_depth(_: &JsValue, args: &[JsValue], _: &mut Context) -> JsResult<JsValue> {
    let text = args
        .first()
        .and_then(JsValue::as_string)
        .map(|s| s.to_std_string_escaped())
        .unwrap_or_default();
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for b in text.bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(JsValue::from(max as f64))
}

/// `(line, column)` of the first position in an error's stack text (`…:line:col…`).
pub fn stack_position(stack: &str) -> Option<(u32, u32)> {
    for (i, _) in stack.match_indices(':') {
        let rest = &stack[i + 1..];
        let line: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if line.is_empty() {
            continue;
        }
        let rest = &rest[line.len()..];
        if let Some(rest) = rest.strip_prefix(':') {
            let col: String = rest.chars().take_while(char::is_ascii_digit).collect();
            if let (Ok(l), Ok(c)) = (line.parse(), col.parse()) {
                return Some((l, c));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stack_positions_are_found() {
        assert_eq!(
            stack_position("Error: x\n    at <anonymous> (script.js:6:12)"),
            Some((6, 12))
        );
        assert_eq!(stack_position("no position"), None);
    }
}
