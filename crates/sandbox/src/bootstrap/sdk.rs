//! The SDK object scripts program against: `sdk.<namespace>.<method>(args)` is one host call
//! (`realm::call_sdk`) with the path `"<namespace>.<method>"`, whatever the names; the host
//! answers an unknown one with its structured error. `sdk.sql(query, params)` is
//! `sdk.sql.query({ sql: query, params })`.
//!
//! Each level is a proxy over a frozen, empty target whose `get` trap makes (once, then
//! returns the same function) what a name reaches, and whose other writing traps refuse:
//! nothing can be added, replaced or deleted. `then` and `toJSON` read as `undefined`, so an
//! awaited or serialized namespace is not mistaken for a promise or a value.

use boa_engine::object::FunctionObjectBuilder;
use boa_engine::{Context, JsObject, JsResult, JsString, JsValue, NativeFunction, js_string};

use super::make::{arg, function};
use crate::realm;

/// The SDK's root proxy.
pub(super) fn build(context: &mut Context) -> JsResult<JsObject> {
    let refuse = function(
        context,
        "refuse",
        0,
        NativeFunction::from_fn_ptr(|_, _, _| Ok(false.into())),
    )?;
    let sql_target = function(context, "sql", 2, NativeFunction::from_fn_ptr(sql))?;
    let sql = proxy(context, sql_target, js_string!("sql."), &refuse)?;
    let namespaces = JsObject::with_null_proto();
    namespaces.create_data_property_or_throw(js_string!("sql"), sql, context)?;

    let get = NativeFunction::from_copy_closure_with_captures(
        |_, args, (namespaces, refuse): &(JsObject, JsObject), context| {
            let Some(name) = member(&arg(args, 1)) else {
                return Ok(JsValue::undefined());
            };
            remembered(namespaces, name.clone(), context, |context| {
                let prefix = JsString::concat(name.as_str(), js_string!(".").as_str());
                let target = empty_target(context)?;
                proxy(context, target, prefix, refuse)
            })
        },
        (namespaces, refuse.clone()),
    );
    let target = empty_target(context)?;
    make_proxy(context, target, get, &refuse)
}

/// A namespace: `get` makes the method `<prefix><name>` once.
fn proxy(
    context: &mut Context,
    target: JsObject,
    prefix: JsString,
    refuse: &JsObject,
) -> JsResult<JsObject> {
    let get = NativeFunction::from_copy_closure_with_captures(
        |_, args, (prefix, methods): &(JsString, JsObject), context| {
            let Some(name) = member(&arg(args, 1)) else {
                return Ok(JsValue::undefined());
            };
            remembered(methods, name.clone(), context, |context| {
                let path = JsString::concat(prefix.as_str(), name.as_str());
                let method = NativeFunction::from_copy_closure_with_captures(
                    |_, args, path: &JsString, context| {
                        realm::call_sdk(path.to_std_string_escaped(), &arg(args, 0), context)
                    },
                    path,
                );
                function(context, "", 1, method)
            })
        },
        (prefix, JsObject::with_null_proto()),
    );
    make_proxy(context, target, get, refuse)
}

/// A proxy over `target` with the `get` trap given and every writing trap refusing.
fn make_proxy(
    context: &mut Context,
    target: JsObject,
    get: NativeFunction,
    refuse: &JsObject,
) -> JsResult<JsObject> {
    let get: JsObject = FunctionObjectBuilder::new(context.realm(), get)
        .name(js_string!("get"))
        .length(3)
        .build()
        .into();
    let handler = JsObject::with_null_proto();
    handler.create_data_property_or_throw(js_string!("get"), get, context)?;
    for trap in [
        js_string!("set"),
        js_string!("defineProperty"),
        js_string!("deleteProperty"),
        js_string!("setPrototypeOf"),
    ] {
        handler.create_data_property_or_throw(trap, refuse.clone(), context)?;
    }
    let constructor = context.intrinsics().constructors().proxy().constructor();
    constructor.construct(&[target.into(), handler.into()], None, context)
}

/// `cache[name]`, made by `make` the first time it is asked for, so a name always reaches the
/// same object.
fn remembered(
    cache: &JsObject,
    name: JsString,
    context: &mut Context,
    make: impl FnOnce(&mut Context) -> JsResult<JsObject>,
) -> JsResult<JsValue> {
    let known = cache.get(name.clone(), context)?;
    if !known.is_undefined() {
        return Ok(known);
    }
    let made = make(context)?;
    cache.create_data_property_or_throw(name, made.clone(), context)?;
    Ok(made.into())
}

/// A frozen object with no prototype and no properties: a proxy's target.
fn empty_target(context: &mut Context) -> JsResult<JsObject> {
    let target = JsObject::with_null_proto();
    target.set_integrity_level(boa_engine::object::IntegrityLevel::Frozen, context)?;
    Ok(target)
}

/// The member a `get` reaches, unless it is a symbol, `then` or `toJSON`.
fn member(key: &JsValue) -> Option<JsString> {
    let name = key.as_string()?;
    if name == js_string!("then") || name == js_string!("toJSON") {
        return None;
    }
    Some(name)
}

/// `sdk.sql(query, params)`.
fn sql(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let request = JsObject::with_object_proto(context.intrinsics());
    request.create_data_property_or_throw(js_string!("sql"), arg(args, 0), context)?;
    let params = arg(args, 1);
    if !params.is_undefined() {
        request.create_data_property_or_throw(js_string!("params"), params, context)?;
    }
    realm::call_sdk("sql.query".to_string(), &request.into(), context)
}
