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
    Context, JsNativeError, JsObject, JsResult, JsString, JsValue, NativeFunction, Source,
    js_string,
};
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
/// Two numbers add without a look at the host: their sum allocates nothing.
fn add_guard(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let undefined = JsValue::undefined();
    let a = args.first().unwrap_or(&undefined);
    let b = args.get(1).unwrap_or(&undefined);
    if let (Some(x), Some(y)) = (a.as_number(), b.as_number()) {
        return Ok(JsValue::from(x + y));
    }
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
    Ok(JsString::from(lore_base::time::format_time(h.clock.now_ms()).as_str()).into())
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
