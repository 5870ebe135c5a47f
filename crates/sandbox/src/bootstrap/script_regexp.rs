//! The `RegExp` scripts see. Every match goes through `regexp::exec` (lore's matcher, whose
//! steps count against the steps cap), never through the engine's own matcher. The engine calls
//! a regexp's `exec` for match, matchAll, replace, search, split and test, and uses its own
//! matcher only for a regexp whose `exec` is not callable: so `exec` is fixed on a frozen
//! prototype, and every regexp a script can hold is born non-extensible (no own `exec`, no other
//! prototype): literals compile into `__lore_regexp(source, flags)`, and the `RegExp` the script
//! sees makes such regexps and refuses subclasses. Every pattern is compiled by lore's matcher
//! first (a SyntaxError for a bad one, a RangeError past its size and nesting limits), so the
//! engine's own compiler only sees patterns within those limits.

use std::rc::Rc;

use boa_engine::object::builtins::JsRegExp;
use boa_engine::object::{FunctionObjectBuilder, IntegrityLevel};
use boa_engine::property::PropertyDescriptor;
use boa_engine::{
    Context, JsNativeError, JsObject, JsResult, JsString, JsSymbol, JsValue, NativeFunction,
    js_string,
};

use super::make::{arg, callable, fix, function};
use crate::host::host;

/// The realm's regexp machinery the script's `RegExp` is made of (kept in the context's data).
struct RegExpParts {
    /// The engine's own constructor and prototype.
    native: JsObject,
    proto: JsObject,
    /// The `RegExp` scripts see.
    script: JsObject,
    /// The prototype's `source` and `flags` getters.
    source: JsObject,
    flags: JsObject,
    prevent_extensions: JsObject,
}

pub(super) fn install(context: &mut Context) -> JsResult<()> {
    let native = context.intrinsics().constructors().regexp().constructor();
    let proto = context.intrinsics().constructors().regexp().prototype();
    let getter = |name: JsString, context: &mut Context| -> JsResult<JsObject> {
        let object = context.intrinsics().constructors().object().constructor();
        let describe = callable(&object, js_string!("getOwnPropertyDescriptor"), context)?;
        let descriptor = describe.call(
            &JsValue::undefined(),
            &[proto.clone().into(), name.into()],
            context,
        )?;
        let descriptor = descriptor
            .as_object()
            .ok_or_else(|| JsNativeError::typ().with_message("RegExp getter missing"))?;
        callable(&descriptor, js_string!("get"), context)
    };
    let source = getter(js_string!("source"), context)?;
    let flags = getter(js_string!("flags"), context)?;
    let object = context.intrinsics().constructors().object().constructor();
    let prevent_extensions = callable(&object, js_string!("preventExtensions"), context)?;

    let script: JsObject =
        FunctionObjectBuilder::new(context.realm(), NativeFunction::from_fn_ptr(script_regexp))
            .name(js_string!("RegExp"))
            .length(2)
            .constructor(true)
            .build()
            .into();
    context.insert_data(Rc::new(RegExpParts {
        native: native.clone(),
        proto: proto.clone(),
        script: script.clone(),
        source,
        flags,
        prevent_extensions,
    }));

    fix(&script, js_string!("prototype"), proto.clone(), context)?;
    let species = function(
        context,
        "get [Symbol.species]",
        0,
        NativeFunction::from_fn_ptr(|this, _, _| Ok(this.clone())),
    )?;
    script.define_property_or_throw(
        JsSymbol::species(),
        PropertyDescriptor::builder()
            .get(species)
            .enumerable(false)
            .configurable(false),
        context,
    )?;
    let escape = native.get(js_string!("escape"), context)?;
    if escape.is_callable() {
        fix(&script, js_string!("escape"), escape, context)?;
    }
    fix(&proto, js_string!("constructor"), script.clone(), context)?;

    // Annex B `re.compile(pattern, flags)` recompiles in place: through lore's matcher first.
    if let Ok(compile) = callable(&proto, js_string!("compile"), context) {
        let f = NativeFunction::from_copy_closure_with_captures(
            |this, args, compile: &JsObject, context| {
                let made = make(&arg(args, 0), &arg(args, 1), context)?;
                let parts = parts(context);
                let made = JsValue::from(made);
                let source = parts.source.call(&made, &[], context)?;
                let flags = parts.flags.call(&made, &[], context)?;
                compile.call(this, &[source, flags], context)
            },
            compile,
        );
        let f = function(context, "compile", 2, f)?;
        fix(&proto, js_string!("compile"), f, context)?;
    }

    // A string given to match, matchAll or search becomes a regexp inside the built-in: made
    // here instead, so its pattern is checked the same way.
    let string = context.intrinsics().constructors().string().prototype();
    for (name, kind) in [("match", 0u8), ("matchAll", 1), ("search", 2)] {
        let original = callable(&string, JsString::from(name), context)?;
        let f = NativeFunction::from_copy_closure_with_captures(
            move |this, args, original: &JsObject, context| {
                host(context).checkpoint(context)?;
                let regexp = arg(args, 0);
                let symbol = match kind {
                    0 => JsSymbol::r#match(),
                    1 => JsSymbol::match_all(),
                    _ => JsSymbol::search(),
                };
                let uses_own = match regexp.as_object() {
                    Some(o) => !o.get(symbol, context)?.is_undefined(),
                    None => false,
                };
                let given = if uses_own || regexp.is_undefined() {
                    regexp
                } else {
                    let flags = if kind == 1 {
                        JsValue::from(js_string!("g"))
                    } else {
                        JsValue::undefined()
                    };
                    make(&regexp, &flags, context)?.into()
                };
                original.call(this, &[given], context)
            },
            original,
        );
        let f = function(context, name, 1, f)?;
        fix(&string, JsString::from(name), f, context)?;
    }

    let exec = function(
        context,
        "exec",
        1,
        NativeFunction::from_fn_ptr(|this, args, context| {
            crate::regexp::exec(
                &JsValue::undefined(),
                &[this.clone(), arg(args, 0)],
                context,
            )
        }),
    )?;
    fix(&proto, js_string!("exec"), exec, context)?;
    proto.set_integrity_level(IntegrityLevel::Frozen, context)?;
    script.set_integrity_level(IntegrityLevel::Frozen, context)?;

    let global = context.global_object();
    global.define_property_or_throw(
        js_string!("RegExp"),
        PropertyDescriptor::builder()
            .value(script)
            .writable(true)
            .enumerable(false)
            .configurable(true),
        context,
    )?;
    let literal = function(
        context,
        "__lore_regexp",
        2,
        NativeFunction::from_fn_ptr(|_, args, context| {
            Ok(make(&arg(args, 0), &arg(args, 1), context)?.into())
        }),
    )?;
    fix(&global, js_string!("__lore_regexp"), literal, context)?;
    Ok(())
}

fn parts(context: &Context) -> Rc<RegExpParts> {
    context
        .get_data::<Rc<RegExpParts>>()
        .cloned()
        .expect("the script's RegExp is installed before any script runs")
}

/// Whether `o` has a regexp's `source` (a regexp, or the prototype itself, whose source is
/// `(?:)`).
fn is_regexp(o: &JsObject, parts: &RegExpParts) -> bool {
    JsRegExp::from_object(o.clone()).is_ok() || o == &parts.proto
}

/// `RegExp(pattern, flags)` and `new RegExp(pattern, flags)`.
fn script_regexp(
    new_target: &JsValue,
    args: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    let h = host(context);
    let _nested = h.enter()?;
    let parts = parts(context);
    if let Some(target) = new_target.as_object()
        && target != parts.script
    {
        return Err(JsNativeError::typ()
            .with_message("RegExp cannot be subclassed in lore scripts")
            .into());
    }
    let (pattern, flags) = (arg(args, 0), arg(args, 1));
    // RegExp(re) without `new` and without flags is `re` itself (ECMA-262 22.2.4.1).
    if new_target.is_undefined()
        && flags.is_undefined()
        && let Some(o) = pattern.as_object()
        && !o.is_callable()
        && o.get(js_string!("constructor"), context)?.as_object() == Some(parts.script.clone())
        && is_regexp(&o, &parts)
    {
        return Ok(pattern);
    }
    Ok(make(&pattern, &flags, context)?.into())
}

/// A regexp of `pattern` and `flags` as the script's `RegExp` makes it: compiled by lore's
/// matcher first, then by the engine, with the script's prototype, not extensible.
fn make(pattern: &JsValue, flags: &JsValue, context: &mut Context) -> JsResult<JsObject> {
    let parts = parts(context);
    let (mut p, mut f) = (pattern.clone(), flags.clone());
    if let Some(o) = p.as_object()
        && !o.is_callable()
        && is_regexp(&o, &parts)
    {
        if f.is_undefined() {
            f = parts.flags.call(&p, &[], context)?;
        }
        p = parts.source.call(&p, &[], context)?;
    }
    let p = if p.is_undefined() {
        js_string!()
    } else {
        p.to_string(context)?
    };
    let f = if f.is_undefined() {
        js_string!()
    } else {
        f.to_string(context)?
    };
    crate::regexp::compile(
        &JsValue::undefined(),
        &[p.clone().into(), f.clone().into()],
        context,
    )?;
    let made = parts
        .native
        .construct(&[p.into(), f.into()], Some(&parts.script), context)?;
    parts
        .prevent_extensions
        .call(&JsValue::undefined(), &[made.clone().into()], context)?;
    Ok(made)
}
