//! One fresh Boa realm per run: the engine's hooks (no `eval` or `Function`, the host's clock,
//! UTC, small buffers), the promise job queue, the host functions scripts reach (`ctx`, the
//! SDK bridge) and the conversion of values across the bridge, with depth and size caps.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use boa_engine::context::time::JsInstant;
use boa_engine::context::{Clock as EngineClock, HostHooks};
use boa_engine::job::{Job, JobExecutor};
use boa_engine::object::builtins::JsPromise;
use boa_engine::realm::Realm;
use boa_engine::{Context, JsNativeError, JsResult, JsString, JsValue};
use serde_json::Value;

use crate::caps::Cap;
use crate::host::{Host, Op, OpKind, host};
use crate::values::to_json;
use lore_base::ports::Clock;

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

/// `Date` and Boa's own timing read the clock of the run the realm is given to (a realm made
/// before its run reads none, and no script runs in it until then).
#[derive(Default)]
pub(crate) struct RunClock(RefCell<Option<Rc<dyn Clock>>>);

impl RunClock {
    fn now_ms(&self) -> i64 {
        self.0.borrow().as_ref().map_or(0, |c| c.now_ms())
    }
}

impl EngineClock for RunClock {
    fn now(&self) -> JsInstant {
        let ms = self.now_ms().max(0) as u64;
        JsInstant::new(ms / 1000, ((ms % 1000) * 1_000_000) as u32)
    }

    fn system_time_millis(&self) -> i64 {
        self.now_ms()
    }
}

/// Promise jobs (microtasks), first in first out, counted against the jobs cap: an endless
/// promise chain holds every promise it made, so it must end long before the step budget
/// does. Other job kinds never arise: scripts have no timers but `ctx.sleep`, which the run
/// loop owns.
#[derive(Default)]
pub struct JobQueue {
    pub jobs: RefCell<VecDeque<Job>>,
    pub run: Cell<u64>,
    /// The jobs cap of the run the realm is given to.
    pub max: Cell<u64>,
    pub refused: Cell<bool>,
}

impl JobExecutor for JobQueue {
    fn enqueue_job(self: Rc<Self>, job: Job, _context: &mut Context) {
        if self.run.get() + self.jobs.borrow().len() as u64 >= self.max.get() {
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

/// A fresh context for a run of `steps` engine steps (the engine's own count, which only the
/// builder sets), its hooks, clock and job queue in place; [`admit`] gives it its run.
pub(crate) fn new_context(
    steps: u64,
    clock: Rc<RunClock>,
    queue: Rc<JobQueue>,
) -> JsResult<Context> {
    Context::builder()
        .host_hooks(Rc::new(Hooks))
        .clock(clock)
        .job_executor(queue)
        .instructions_remaining(usize::try_from(steps).unwrap_or(usize::MAX))
        .build()
}

/// Gives a context made by [`new_context`] its run: the run's host, clock and limits.
pub(crate) fn admit(context: &mut Context, clock: &RunClock, queue: &JobQueue, host: Rc<Host>) {
    *clock.0.borrow_mut() = Some(host.clock.clone());
    queue.max.set(host.caps.jobs);
    let limits = context.runtime_limits_mut();
    limits.set_recursion_limit(host.caps.recursion);
    limits.set_stack_size_limit(host.caps.value_stack);
    context.insert_data(host);
}

/// One SDK call, `path` with `args` (`{}` when the script gave none); returns a promise the
/// run loop settles.
pub(crate) fn call_sdk(path: String, args: &JsValue, context: &mut Context) -> JsResult<JsValue> {
    let h = host(context);
    if h.calls_started.get() >= h.caps.sdk_calls {
        return Err(h.hit(Cap::SdkCalls));
    }
    h.checkpoint(context)?;
    h.calls_started.set(h.calls_started.get() + 1);
    let value = if args.is_undefined() {
        Value::Object(serde_json::Map::new())
    } else {
        to_json(args, &h, context, &mut 0)?
    };
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
/// It answers the weight a pure loop may spend before its next tick
/// ([`crate::strip::PURE_LOOP_BUDGET`]).
pub(crate) fn tick(_: &JsValue, _: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    host(context).checkpoint(context)?;
    Ok(JsValue::from(crate::strip::PURE_LOOP_BUDGET))
}

/// `__lore_add(a, b)`: `a + b`, then the string cap on a string result.
/// Two numbers add without a look at the host: their sum allocates nothing.
pub(crate) fn add_guard(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let undefined = JsValue::undefined();
    let a = args.first().unwrap_or(&undefined);
    let b = args.get(1).unwrap_or(&undefined);
    if let (Some(x), Some(y)) = (a.as_number(), b.as_number()) {
        return Ok(JsValue::from(x + y));
    }
    // Adding objects calls their `valueOf` or `toString`, which may be this guard again.
    let h = host(context);
    let _nested = h.enter()?;
    let sum = a.add(b, context)?;
    check_string(&sum, context)?;
    h.checkpoint(context)?;
    Ok(sum)
}

/// `__lore_str(s)`: the string cap on a template literal's value.
pub(crate) fn string_guard(
    _: &JsValue,
    args: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
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
pub(crate) fn sleep(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
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
pub(crate) fn log(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
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
pub(crate) fn now(_: &JsValue, _: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let h = host(context);
    Ok(JsString::from(lore_base::time::format_time(h.clock.now_ms()).as_str()).into())
}

/// `Math.random()`: xorshift64* seeded from the host's randomness.
pub(crate) fn random(_: &JsValue, _: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let h = host(context);
    let mut x = h.rng.get();
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    h.rng.set(x);
    let bits = x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11;
    Ok(JsValue::from(bits as f64 / (1u64 << 53) as f64))
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
