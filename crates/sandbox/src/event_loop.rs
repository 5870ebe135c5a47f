//! The event loop of one run: strip, evaluate, then alternate synchronous slices of JavaScript
//! (the script, then its promise jobs) with awaiting the SDK calls and sleeps a slice started,
//! all at once, woken by their wakers; and the shaping of every way a run can fail.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::Poll;

use boa_engine::builtins::promise::PromiseState;
use boa_engine::job::JobExecutor;
use boa_engine::object::builtins::JsPromise;
use boa_engine::{Context, JsError, JsValue, Source, js_string};
use serde_json::Value;

use crate::caps::Cap;
use crate::failure::{Failure, OpFuture, PROGRESS_EVERY_MS, SdkError};
use crate::host::{Host, Op, OpKind};
use crate::prepared::{Prepared, Spare};
use crate::realm::{self, JobQueue};
use crate::strip::{self, Form, StripError, Stripped};
use lore_base::ports::Clock;
use lore_meter as meter;

/// What the run loop needs from the run it drives: its SDK calls made, its progress told, its
/// buffered writes watched, and a clock. The run itself implements it when the script runs on
/// the thread that serves the request; natively a script's JavaScript runs on a thread of its
/// own (`sandbox::remote`), whose implementation forwards each call to the run's thread.
pub trait Ops {
    fn call(&self, path: String, args: Value) -> OpFuture<'_>;
    /// Whether a progress sink listens (heartbeats are only kept for one).
    fn reports_progress(&self) -> bool;
    fn progress(&self, what: &str);
    /// Whether the run's buffered writes are past their cap (checked after every call).
    fn over_cap(&self) -> bool;
    fn clock(&self) -> Rc<dyn Clock>;
}

/// Strips, evaluates and drives the script to completion; `Ok` is its returned value. The run
/// takes `spare` as its realm if it fits, else makes a fresh one.
pub async fn execute(
    run: &dyn Ops,
    host: &Rc<Host>,
    code: &str,
    spare: Option<Spare>,
) -> Result<Value, Failure> {
    let caps = &host.caps;
    let stripped = strip::strip(code, caps).map_err(|e| match e {
        StripError::Cap(cap) => Failure::cap(cap, caps),
        StripError::Syntax { message, position } => Failure {
            code: "syntax_error",
            message: format!("the script does not parse: {message}"),
            js_position: None,
            ts_position: position,
            cap: None,
        },
    })?;
    // The memory cap counts what script code allocates on this thread (see `meter`): every
    // stretch that runs it is a section, and the realm is dropped inside one. What earlier runs
    // left for the collector, freed during this run, would lower this run's count: a run that
    // starts when none is going on first collects it once it is more than a sixteenth of the
    // cap (a collection marks the thread's whole heap, about a fifth of a `return 1` run), so the cap
    // holds within that.
    if meter::runs() == 0 && meter::left_for_collector() > caps.memory_bytes / 16 {
        boa_engine::gc::force_collect();
        meter::collected();
    }
    let _metered = meter::Run::begin();
    let section = meter::Section::enter();
    let prepared = match spare.and_then(|s| s.fits(caps.steps)) {
        Some((realm, bytes)) => {
            meter::charge(bytes);
            Ok(realm)
        }
        None => Prepared::new(caps.steps),
    }
    .map_err(|e| Failure::plain("internal", format!("the script engine did not start: {e}")))?;
    let (mut context, queue, runtime) = prepared.start(host.clone());
    let started = runtime
        .map_err(|e| Failure::plain("internal", format!("the script runtime did not start: {e}")))
        .and_then(|(ctx, sdk)| {
            start(&mut context, &stripped, &ctx, &sdk, &queue, host)
                .map_err(|e| js_failure(e, &mut context, host, &queue, &stripped))
        });
    drop(section);
    let outcome = match started {
        Ok(top) => drive(run, &mut context, host, &queue, &stripped, top).await,
        Err(f) => Err(f),
    };
    // Its objects are freed by a later collection (counted if inside a section) or, once no
    // run is active, the count restarts; collecting here would mark the thread's whole heap.
    host.finish(&context);
    let section = meter::Section::enter();
    drop(context);
    drop(section);
    outcome
}

/// Evaluates the script and calls its function; returns the promise of its result.
fn start(
    context: &mut Context,
    stripped: &Stripped,
    ctx: &JsValue,
    sdk: &JsValue,
    queue: &Rc<JobQueue>,
    host: &Rc<Host>,
) -> Result<JsPromise, JsError> {
    let binder = context.eval(Source::from_bytes(stripped.js.as_bytes()))?;
    let Some(binder) = binder.as_callable() else {
        return Err(boa_engine::JsNativeError::typ()
            .with_message("the script did not evaluate to a function")
            .into());
    };
    let global = context.global_object();
    let mut guards = Vec::with_capacity(crate::strip::GUARD_PARAMS.len());
    for name in crate::strip::GUARD_PARAMS {
        guards.push(global.get(boa_engine::JsString::from(name), context)?);
    }
    let mut function = binder.call(&JsValue::undefined(), &guards, context)?;
    if stripped.form == Form::Module {
        let Some(module) = function.as_callable() else {
            return Err(boa_engine::JsNativeError::typ()
                .with_message("the module did not evaluate to a function")
                .into());
        };
        function = module.call(&JsValue::undefined(), &[], context)?;
        queue.clone().run_jobs(context)?;
        if host.cap_hit.get().is_some() || context.instructions_remaining() == 0 {
            return Err(boa_engine::JsNativeError::range()
                .with_message("cap reached while loading the module")
                .into());
        }
    }
    let Some(function) = function.as_callable() else {
        return Err(boa_engine::JsNativeError::typ()
            .with_message("the module's default export must be a function: export default async (ctx, client) => ...")
            .into());
    };
    let value = function.call(
        &JsValue::undefined(),
        &[ctx.clone(), sdk.clone(), sdk.clone()],
        context,
    )?;
    match value
        .as_object()
        .and_then(|o| JsPromise::from_object(o.clone()).ok())
    {
        Some(p) => Ok(p),
        None => JsPromise::resolve(value, context),
    }
}

/// The event loop: run jobs, check caps and the result, await host operations, repeat.
async fn drive(
    run: &dyn Ops,
    context: &mut Context,
    host: &Rc<Host>,
    queue: &Rc<JobQueue>,
    stripped: &Stripped,
    top: JsPromise,
) -> Result<Value, Failure> {
    let caps = &host.caps;
    let clock = run.clock();
    let mut inflight: Vec<(Op, OpFuture<'_>)> = Vec::new();
    let mut deadline: Option<Pin<Box<dyn Future<Output = ()>>>> = None;
    let mut heartbeat: Option<Pin<Box<dyn Future<Output = ()>>>> = None;
    // SDK calls that were still running when the script's value settled (calls it started
    // but did not await) and failed: the run fails with their names rather than commit the
    // rest as if all had gone well.
    let mut unawaited_failures: Vec<String> = Vec::new();
    loop {
        let section = meter::Section::enter();
        if let Err(e) = queue.clone().run_jobs(context) {
            return Err(js_failure(e, context, host, queue, stripped));
        }
        if let Some(f) = limit_failure(context, host, queue) {
            return Err(f);
        }
        if let Some(f) = wall_clock_failure(host, clock.as_ref()) {
            return Err(f);
        }
        match top.state() {
            // The script returned, but calls it started and did not await are still pending:
            // they are settled first (on every platform), so their writes commit with the run
            // or the run fails; none is dropped silently.
            PromiseState::Fulfilled(_)
                if !inflight.is_empty() || !host.pending.borrow().is_empty() => {}
            PromiseState::Fulfilled(_) if !unawaited_failures.is_empty() => {
                return Err(Failure::plain(
                    "script_error",
                    format!(
                        "the script returned without awaiting {}, which then failed; await every SDK call (or Promise.all them) so a failure reaches the script",
                        unawaited_failures.join("; ")
                    ),
                ));
            }
            PromiseState::Fulfilled(v) => {
                let mut size = host.output_bytes.get();
                return crate::values::to_json(&v, host, context, &mut size).map_err(|e| {
                    limit_failure(context, host, queue)
                        .unwrap_or_else(|| js_failure(e, context, host, queue, stripped))
                });
            }
            PromiseState::Rejected(e) => {
                return Err(js_failure(
                    JsError::from_opaque(e),
                    context,
                    host,
                    queue,
                    stripped,
                ));
            }
            PromiseState::Pending => {}
        }
        while let Some(op) = host.pending.borrow_mut().pop_front() {
            if run.reports_progress() {
                match &op.kind {
                    OpKind::Call { path, .. } => run.progress(path),
                    OpKind::Sleep { ms } => run.progress(&format!("ctx.sleep({ms})")),
                }
            }
            let future: OpFuture<'_> = match &op.kind {
                OpKind::Call { path, args } => run.call(path.clone(), args.clone()),
                OpKind::Sleep { ms } => {
                    let sleep = clock.sleep(*ms);
                    Box::pin(async move {
                        sleep.await;
                        Ok(Value::Null)
                    })
                }
            };
            inflight.push((op, future));
        }
        if inflight.is_empty() {
            return Err(Failure::cap(Cap::NeverSettles, caps));
        }
        // Other work on this thread runs while the script waits: it is not the script's.
        drop(section);
        // Wait until at least one operation completes, or the wall clock runs out.
        let done: Vec<(Op, Result<Value, SdkError>)> = std::future::poll_fn(|cx| {
            let mut done = Vec::new();
            let mut i = 0;
            while i < inflight.len() {
                if let Poll::Ready(r) = inflight[i].1.as_mut().poll(cx) {
                    let (op, _) = inflight.swap_remove(i);
                    done.push((op, r));
                } else {
                    i += 1;
                }
            }
            if !done.is_empty() {
                return Poll::Ready(done);
            }
            // A run that waits long tells its progress sink it is alive (a client resets its
            // request timeout on progress).
            if run.reports_progress() {
                let beat = heartbeat.get_or_insert_with(|| clock.sleep(PROGRESS_EVERY_MS));
                if beat.as_mut().poll(cx).is_ready() {
                    heartbeat = None;
                    run.progress("running");
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
            }
            // Nothing is ready: only now arm the wall-clock timer (a host whose timers are
            // instant, as in tests, would otherwise jump to the deadline at once).
            let timer = deadline.get_or_insert_with(|| {
                let remaining = (host.deadline_ms() - clock.now_ms()).max(0) as u64;
                clock.sleep(remaining)
            });
            if timer.as_mut().poll(cx).is_ready() {
                return Poll::Ready(done);
            }
            Poll::Pending
        })
        .await;
        if done.is_empty() {
            deadline = None; // the timer fired: the next turn checks the clock
            if let Some(f) = wall_clock_failure(host, clock.as_ref()) {
                return Err(f);
            }
            continue;
        }
        // A host operation that returns past the deadline ends the run there.
        if let Some(f) = wall_clock_failure(host, clock.as_ref()) {
            return Err(f);
        }
        let _section = meter::Section::enter();
        let returned = matches!(top.state(), PromiseState::Fulfilled(_));
        for (op, result) in done {
            if run.over_cap() {
                return Err(Failure::cap(Cap::BufferedWrites, caps));
            }
            if returned && let (OpKind::Call { path, .. }, Err(e)) = (&op.kind, &result) {
                unawaited_failures.push(format!("client.{path} ({}: {e})", e.code));
            }
            let settled = match result {
                Ok(v) => JsValue::from_json(&v, context)
                    .and_then(|v| op.resolve.call(&JsValue::undefined(), &[v], context)),
                Err(e) => {
                    let error = sdk_error(&e, context);
                    op.reject.call(&JsValue::undefined(), &[error], context)
                }
            };
            if let Err(e) = settled {
                return Err(js_failure(e, context, host, queue, stripped));
            }
        }
    }
}

/// An SDK error as the script sees it: an `Error` with `code` (and `field`, or the upstream
/// `status`).
fn sdk_error(e: &SdkError, context: &mut Context) -> JsValue {
    let error: JsError = boa_engine::JsNativeError::error()
        .with_message(e.message.clone())
        .into();
    let value = error.into_opaque(context).unwrap_or_default();
    if let Some(o) = value.as_object() {
        let _ = o.set(js_string!("code"), js_string!(e.code), false, context);
        if let Some(field) = &e.field {
            let _ = o.set(
                js_string!("field"),
                boa_engine::JsString::from(field.as_str()),
                false,
                context,
            );
        }
        if let Some(status) = e.status {
            let _ = o.set(js_string!("status"), i32::from(status), false, context);
        }
    }
    value
}

/// The wall-clock cap, as a hard bound: the run ends once its deadline has passed, whatever it
/// was doing (host functions check it too, see `Host::check_deadline`).
fn wall_clock_failure(host: &Host, clock: &dyn Clock) -> Option<Failure> {
    (clock.now_ms() >= host.deadline_ms()).then(|| Failure::cap(Cap::WallClock, &host.caps))
}

/// The cap failure the engine or host recorded, if any.
fn limit_failure(context: &Context, host: &Host, queue: &JobQueue) -> Option<Failure> {
    // Records the memory cap in `cap_hit` if the thread's scripts are over it.
    let _ = host.check_memory();
    if let Some(cap) = host.cap_hit.get() {
        return Some(Failure::cap(cap, &host.caps));
    }
    if context.instructions_remaining() == 0 {
        return Some(Failure::cap(Cap::Steps, &host.caps));
    }
    if queue.refused.get() {
        return Some(Failure::cap(Cap::Jobs, &host.caps));
    }
    None
}

/// A JavaScript error as a failure: caps first, then engine limits, then what was thrown.
fn js_failure(
    e: JsError,
    context: &mut Context,
    host: &Host,
    queue: &JobQueue,
    stripped: &Stripped,
) -> Failure {
    if let Some(f) = limit_failure(context, host, queue) {
        return f;
    }
    if let Some(engine) = e.as_engine() {
        let text = engine.to_string();
        if text.contains("RuntimeLimit") {
            return Failure::cap(Cap::Recursion, &host.caps);
        }
        return Failure::plain("script_error", format!("the script engine stopped: {text}"));
    }
    let value = e.into_opaque(context).unwrap_or_default();
    let mut code = "script_error";
    let mut message = String::new();
    let mut position = None;
    if let Some(o) = value.as_object() {
        let text = |v: JsValue, _: &mut Context| {
            v.as_string()
                .map(|s| s.to_std_string_escaped())
                .or_else(|| (!v.is_undefined()).then(|| v.display().to_string()))
        };
        let name = o
            .get(js_string!("name"), context)
            .ok()
            .and_then(|v| text(v, context));
        let msg = o
            .get(js_string!("message"), context)
            .ok()
            .and_then(|v| text(v, context));
        if let Some(c) = o
            .get(js_string!("code"), context)
            .ok()
            .and_then(|v| text(v, context))
        {
            code = crate::failure::code::thrown(&c);
        }
        if msg.as_deref().is_some_and(|m| m.contains("RuntimeLimit")) {
            return Failure::cap(Cap::Recursion, &host.caps);
        }
        message = match (name, msg) {
            (Some(n), Some(m)) => format!("{n}: {m}"),
            (None, Some(m)) => m,
            (Some(n), None) => n,
            _ => value.display().to_string(),
        };
        if let Some(stack) = o
            .get(js_string!("stack"), context)
            .ok()
            .and_then(|v| text(v, context))
        {
            position = realm::stack_position(&stack);
        }
    } else if !value.is_undefined() {
        message = format!("the script threw {}", value.display());
    }
    if message.contains("Maximum call stack") || message.contains("exceeded the recursion") {
        return Failure::cap(Cap::Recursion, &host.caps);
    }
    if message.is_empty() {
        message = "the script threw undefined".into();
    }
    let ts_position = position.and_then(|(l, c)| stripped.original(l, c));
    Failure {
        code,
        message,
        js_position: None,
        ts_position,
        cap: None,
    }
}
