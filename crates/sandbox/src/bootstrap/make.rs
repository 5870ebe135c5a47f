//! The pieces the realm's runtime is built of: frozen native functions (counted against the
//! recursion cap when they nest), fixed properties, arguments.

use boa_engine::object::{FunctionObjectBuilder, IntegrityLevel};
use boa_engine::property::{PropertyDescriptor, PropertyKey};
use boa_engine::{Context, JsObject, JsResult, JsString, JsValue, NativeFunction};

use crate::host::host;

/// A frozen native function named `name`, its calls nested in one another counted against the
/// recursion cap (`Host::enter`).
pub(super) fn function(
    context: &mut Context,
    name: &str,
    length: usize,
    f: NativeFunction,
) -> JsResult<JsObject> {
    let counted = NativeFunction::from_copy_closure_with_captures(
        |this, args, f: &NativeFunction, context| {
            let h = host(context);
            let _nested = h.enter()?;
            f.call(this, args, context)
        },
        f,
    );
    frozen(context, name, length, counted)
}

/// A frozen native function named `name`, not counted: for the guards the script's own code
/// calls on every `+` and loop turn, which nest nothing.
pub(super) fn frozen(
    context: &mut Context,
    name: &str,
    length: usize,
    f: NativeFunction,
) -> JsResult<JsObject> {
    let f: JsObject = FunctionObjectBuilder::new(context.realm(), f)
        .name(JsString::from(name))
        .length(length)
        .build()
        .into();
    f.set_integrity_level(IntegrityLevel::Frozen, context)?;
    Ok(f)
}

/// `object[key] = value`, fixed: not writable, not configurable (enumerable as it was, or not
/// enumerable for a new property).
pub(super) fn fix(
    object: &JsObject,
    key: impl Into<PropertyKey>,
    value: impl Into<JsValue>,
    context: &mut Context,
) -> JsResult<()> {
    object.define_property_or_throw(
        key,
        PropertyDescriptor::builder()
            .value(value)
            .writable(false)
            .configurable(false),
        context,
    )?;
    Ok(())
}

/// The argument at `i`, `undefined` past the end.
pub(super) fn arg(args: &[JsValue], i: usize) -> JsValue {
    args.get(i).cloned().unwrap_or_default()
}

/// `object[key]`, which must be a function.
pub(super) fn callable(
    object: &JsObject,
    key: JsString,
    context: &mut Context,
) -> JsResult<JsObject> {
    object.get(key, context)?.as_callable().ok_or_else(|| {
        boa_engine::JsNativeError::typ()
            .with_message("a built-in the sandbox wraps is missing")
            .into()
    })
}
