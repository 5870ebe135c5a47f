//! What every fresh realm gets before its script runs, built natively: no JavaScript is parsed
//! or run for it, so a run's fixed cost is the engine's own context and the script.
//!
//! - `ctx` (`sleep`, `log`, `now`, `args`) and the SDK object ([`sdk`]), proxies whose traps
//!   are native functions;
//! - caps on the built-ins that can allocate without bound from a small input
//!   ([`builtins`]), and `Math.random` from the host;
//! - the script's `RegExp` ([`script_regexp`]): every pattern compiled by lore's matcher first
//!   and every match run on it;
//! - the guards the TypeScript step compiles `+`, template literals and loop turns into.
//!
//! Every function installed here is frozen and every property it replaces is fixed (not
//! writable, not configurable), so a script cannot undo a cap. Nothing but `RegExp` and the
//! guards is left global.

mod builtins;
mod make;
mod script_regexp;
mod sdk;

use boa_engine::object::IntegrityLevel;
use boa_engine::property::PropertyDescriptor;
use boa_engine::{Context, JsObject, JsResult, JsString, JsValue, NativeFunction, js_string};

use crate::host::host;
use crate::realm;
use make::{fix, frozen, function};

/// The runtime built in a realm before its run is known; [`Runtime::finish`] adds the run's
/// own part.
pub(crate) struct Runtime {
    sdk: JsValue,
    object_keys: Option<JsObject>,
}

/// Builds the part of the realm's runtime that is the same for every run: the SDK object, the
/// capped built-ins, the script's `RegExp` and the guards. Nothing here reads the run's host
/// (its functions find it when called), so a realm can be made before its run.
pub(crate) fn prepare(context: &mut Context) -> JsResult<Runtime> {
    let object = context.intrinsics().constructors().object().constructor();
    let keys = object.get(js_string!("keys"), context)?;

    let sdk = sdk::build(context)?;

    let random = function(
        context,
        "random",
        0,
        NativeFunction::from_fn_ptr(realm::random),
    )?;
    let math = context.intrinsics().objects().math();
    fix(&math, js_string!("random"), random, context)?;
    builtins::install(context)?;
    script_regexp::install(context)?;

    // The guards the TypeScript step compiles every `+`, template literal and loop turn into.
    let guards: [(&str, usize, NativeFunction); 3] = [
        (
            crate::strip::TICK,
            0,
            NativeFunction::from_fn_ptr(realm::tick),
        ),
        (
            crate::strip::ADD_GUARD,
            2,
            NativeFunction::from_fn_ptr(realm::add_guard),
        ),
        (
            crate::strip::STRING_GUARD,
            1,
            NativeFunction::from_fn_ptr(realm::string_guard),
        ),
    ];
    let global = context.global_object();
    for (name, length, f) in guards {
        let f = frozen(context, name, length, f)?;
        global.define_property_or_throw(
            JsString::from(name),
            PropertyDescriptor::builder()
                .value(f)
                .writable(false)
                .enumerable(false)
                .configurable(false),
            context,
        )?;
    }
    Ok(Runtime {
        sdk: sdk.into(),
        object_keys: keys.as_object(),
    })
}

impl Runtime {
    /// The run's part, once the context has its host: `ctx` (with the run's `args`). Returns
    /// `(ctx, sdk)`.
    pub(crate) fn finish(self, context: &mut Context) -> JsResult<(JsValue, JsValue)> {
        let h = host(context);
        *h.object_keys.borrow_mut() = self.object_keys;
        let args = JsValue::from_json(&h.args, context)?;
        let ctx = JsObject::with_object_proto(context.intrinsics());
        let entries: [(&str, usize, NativeFunction); 3] = [
            ("sleep", 1, NativeFunction::from_fn_ptr(realm::sleep)),
            ("log", 0, NativeFunction::from_fn_ptr(realm::log)),
            ("now", 0, NativeFunction::from_fn_ptr(realm::now)),
        ];
        for (name, length, f) in entries {
            let f = function(context, name, length, f)?;
            ctx.create_data_property_or_throw(JsString::from(name), f, context)?;
        }
        ctx.create_data_property_or_throw(js_string!("args"), args, context)?;
        ctx.set_integrity_level(IntegrityLevel::Frozen, context)?;
        Ok((ctx.into(), self.sdk))
    }
}
