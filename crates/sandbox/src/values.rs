//! Values leaving a script: converted to JSON with the value depth cap and the output cap,
//! and strings refused when they are not valid Unicode.

use boa_engine::object::builtins::JsArray;
use boa_engine::property::PropertyKey;
use boa_engine::{Context, JsNativeError, JsResult, JsString, JsValue, js_string};
use serde_json::{Map, Value};

use crate::caps::Cap;
use crate::host::Host;

/// A script value as JSON, with the value depth cap and the output cap (counted into `size`):
/// functions and `undefined` properties are left out, as `JSON.stringify` does.
pub fn to_json(
    value: &JsValue,
    host: &Host,
    context: &mut Context,
    size: &mut usize,
) -> JsResult<Value> {
    to_json_at(value, host, context, size, 0)
}

fn grow(host: &Host, size: &mut usize, n: usize) -> JsResult<()> {
    *size += n;
    if *size > host.caps.output_bytes {
        return Err(host.hit(Cap::Output));
    }
    Ok(())
}

fn to_json_at(
    value: &JsValue,
    host: &Host,
    context: &mut Context,
    size: &mut usize,
    depth: usize,
) -> JsResult<Value> {
    if depth > host.caps.value_depth {
        return Err(host.hit(Cap::ValueDepth));
    }
    grow(host, size, 1)?;
    if value.is_null_or_undefined() {
        return Ok(Value::Null);
    }
    if let Some(b) = value.as_boolean() {
        return Ok(Value::Bool(b));
    }
    if let Some(n) = value.as_number() {
        grow(host, size, 8)?;
        if n.fract() == 0.0 && n.abs() < 9_007_199_254_740_992.0 {
            return Ok(Value::from(n as i64));
        }
        return Ok(serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number));
    }
    if let Some(s) = value.as_string() {
        grow(host, size, s.len())?;
        return Ok(Value::String(well_formed(&s)?));
    }
    if value.is_bigint() {
        return Err(JsNativeError::typ()
            .with_message("a BigInt cannot cross into lore; convert it to a number or string")
            .into());
    }
    let Some(object) = value.as_object() else {
        return Ok(Value::Null); // symbols
    };
    if object.is_callable() {
        return Ok(Value::Null);
    }
    if let Ok(array) = JsArray::from_object(object.clone()) {
        let len = array.length(context)?;
        if len > host.caps.array_len as u64 {
            return Err(host.hit(Cap::ArrayLength));
        }
        let mut out = Vec::with_capacity((len as usize).min(1024));
        for i in 0..len {
            let item = array.get(i, context)?;
            out.push(to_json_at(&item, host, context, size, depth + 1)?);
        }
        return Ok(Value::Array(out));
    }
    if let Some(to_json) = object.get(js_string!("toJSON"), context)?.as_callable() {
        let v = to_json.call(value, &[], context)?;
        if !v.is_object() {
            return to_json_at(&v, host, context, size, depth + 1);
        }
    }
    let mut out = Map::new();
    let keys_fn = host
        .object_keys
        .borrow()
        .clone()
        .ok_or_else(|| JsNativeError::typ().with_message("Object.keys is not available"))?;
    let keys = keys_fn.call(&JsValue::undefined(), std::slice::from_ref(value), context)?;
    let keys = keys
        .as_object()
        .and_then(|o| JsArray::from_object(o.clone()).ok())
        .ok_or_else(|| JsNativeError::typ().with_message("Object.keys returned no array"))?;
    let count = keys.length(context)?;
    if count > host.caps.array_len as u64 {
        return Err(host.hit(Cap::ArrayLength));
    }
    for i in 0..count {
        let key = keys.get(i, context)?;
        let Some(name) = key.as_string() else {
            continue;
        };
        let v = object.get(PropertyKey::from(name.clone()), context)?;
        if v.is_undefined() || v.as_object().is_some_and(|o| o.is_callable()) {
            continue;
        }
        let name = well_formed(&name)?;
        grow(host, size, name.len() + 2)?;
        out.insert(name, to_json_at(&v, host, context, size, depth + 1)?);
    }
    Ok(Value::Object(out))
}

/// A string leaving the script as Unicode text. JavaScript strings may hold lone surrogates,
/// which no JSON text, storage value or client can carry; writing them as the six characters
/// `\uD800` (what an escaping conversion does) would store another string than the script
/// had, equal to one that really holds a backslash. So they are refused, with where they are.
pub fn well_formed(s: &JsString) -> JsResult<String> {
    s.to_std_string().map_err(|_| {
        let units = s.to_vec();
        let (index, unit) = lone_surrogate(&units).unwrap_or((0, 0));
        JsNativeError::typ()
            .with_message(format!(
                "a string with a lone surrogate (\\u{unit:04X} at index {index}) cannot leave the script: lore stores only valid Unicode; use s.toWellFormed() to replace lone surrogates with U+FFFD"
            ))
            .into()
    })
}

/// The first unpaired surrogate of UTF-16 text: its index and code unit.
fn lone_surrogate(units: &[u16]) -> Option<(usize, u16)> {
    let mut i = 0;
    while i < units.len() {
        let u = units[i];
        match u {
            0xD800..=0xDBFF
                if units
                    .get(i + 1)
                    .is_some_and(|n| (0xDC00..=0xDFFF).contains(n)) =>
            {
                i += 2;
                continue;
            }
            0xD800..=0xDFFF => return Some((i, u)),
            _ => {}
        }
        i += 1;
    }
    None
}
