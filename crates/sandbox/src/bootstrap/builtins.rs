//! Caps on the built-ins whose output can be far larger than their input: each is replaced by
//! a frozen native function that makes the run's checkpoint, checks what the call would
//! allocate against the string and array caps, then calls the original. `JSON.stringify`
//! measures a value's depth first (iteratively: a deep value would overflow the native stack
//! of the engine's own serializer), `JSON.parse` its text's, and a function bound again and
//! again counts its chain as recursion (calling it nests one native call per bind).

use boa_engine::object::builtins::{JsArray, JsWeakMap};
use boa_engine::{
    Context, JsObject, JsResult, JsString, JsSymbol, JsValue, NativeFunction, js_string,
};

use super::make::{arg, callable, fix, function};
use crate::caps::Cap;
use crate::host::{Host, host};

/// What a guard checks before its original runs.
type Check = fn(&Host, &JsValue, &[JsValue], &mut Context) -> JsResult<()>;

pub(super) fn install(context: &mut Context) -> JsResult<()> {
    let string = context.intrinsics().constructors().string().prototype();
    let array = context.intrinsics().constructors().array().prototype();
    let guards: [(&JsObject, &str, Check); 9] = [
        (&string, "repeat", repeat),
        (&string, "padStart", pad),
        (&string, "padEnd", pad),
        (&string, "concat", concat),
        (&string, "split", split),
        (&string, "replace", replace),
        (&string, "replaceAll", replace),
        (&array, "join", join),
        (&array, "fill", fill),
    ];
    for (proto, name, check) in guards {
        guard(context, proto, name, check)?;
    }
    let array_constructor = context.intrinsics().constructors().array().constructor();
    guard(context, &array_constructor, "from", array_from)?;
    install_bind(context)?;
    install_json(context)
}

/// Replaces `proto[name]` with a function that checks, then calls the original.
fn guard(context: &mut Context, proto: &JsObject, name: &str, check: Check) -> JsResult<()> {
    let key = JsString::from(name);
    let original = callable(proto, key.clone(), context)?;
    let length = original
        .get(js_string!("length"), context)?
        .as_number()
        .unwrap_or(0.0) as usize;
    let f = NativeFunction::from_copy_closure_with_captures(
        move |this, args, original: &JsObject, context| {
            let h = host(context);
            h.checkpoint(context)?;
            check(&h, this, args, context)?;
            original.call(this, args, context)
        },
        original,
    );
    let f = function(context, name, length, f)?;
    fix(proto, key, f, context)
}

/// `Number(v) || 0`.
fn number(v: &JsValue, context: &mut Context) -> JsResult<f64> {
    let n = v.to_number(context)?;
    Ok(if n.is_nan() { 0.0 } else { n })
}

/// `String(v).length`, in UTF-16 code units.
fn length_of(v: &JsValue, context: &mut Context) -> JsResult<f64> {
    Ok(v.to_string(context)?.len() as f64)
}

/// `v.length` of any value (a string's, an array's, an array-like's).
fn length_property(v: &JsValue, context: &mut Context) -> JsResult<f64> {
    let object = v.to_object(context)?;
    length_of_object(&object, context)
}

/// `o.length`, `Number(..) || 0`.
fn length_of_object(object: &JsObject, context: &mut Context) -> JsResult<f64> {
    let length = object.get(js_string!("length"), context)?;
    number(&length, context)
}

fn strings(h: &Host, n: f64) -> JsResult<()> {
    if n > h.caps.string_chars as f64 {
        return Err(h.hit(Cap::StringLength));
    }
    Ok(())
}

fn arrays(h: &Host, n: f64) -> JsResult<()> {
    if n > h.caps.array_len as f64 {
        return Err(h.hit(Cap::ArrayLength));
    }
    Ok(())
}

fn repeat(h: &Host, this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<()> {
    let length = length_of(this, context)?;
    let count = number(&arg(args, 0), context)?.max(0.0);
    strings(h, length * count)
}

fn pad(h: &Host, _: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<()> {
    let n = number(&arg(args, 0), context)?;
    strings(h, n)
}

fn concat(h: &Host, this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<()> {
    let mut n = length_of(this, context)?;
    for a in args {
        n += length_of(a, context)?;
    }
    strings(h, n)
}

/// `s.split(sep)` makes one string per piece: a long string split by '' is an array as long.
fn split(h: &Host, this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<()> {
    let Some(sep) = arg(args, 0).as_string() else {
        return Ok(());
    };
    let text = this.to_string(context)?;
    let pieces = if sep.is_empty() {
        text.len()
    } else {
        count_of(&text, &sep) + 1
    } as f64;
    let limit = arg(args, 1);
    let n = if limit.is_undefined() {
        pieces
    } else {
        pieces.min(f64::from(limit.to_u32(context)?))
    };
    arrays(h, n)
}

/// `replace` and `replaceAll` with a string replacement: the worst case first, then (only if
/// it could pass the cap) the real count of what is replaced.
fn replace(h: &Host, this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<()> {
    let Some(replacement) = arg(args, 1).as_string() else {
        return Ok(());
    };
    let pattern = arg(args, 0).as_string();
    let text = this.to_string(context)?;
    let len = text.len() as f64;
    let search = pattern.as_ref().map_or(1.0, |p| p.len() as f64);
    let worst = (len / search.max(1.0) + 1.0) * (replacement.len() as f64 + 2.0);
    if len + worst > h.caps.string_chars as f64 {
        let hits = match &pattern {
            Some(p) if !p.is_empty() => count_of(&text, p) as f64,
            _ => len + 1.0,
        };
        strings(h, len + hits * (replacement.len() as f64 * 2.0 + 1.0))?;
    }
    Ok(())
}

fn join(h: &Host, this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<()> {
    let object = this.to_object(context)?;
    let len = length_of_object(&object, context)?;
    arrays(h, len)?;
    let sep = arg(args, 0);
    let s = if sep.is_undefined() {
        1.0
    } else {
        length_of(&sep, context)?
    };
    let mut n = len * s;
    strings(h, n)?;
    let count = len.max(0.0) as u64;
    for i in 0..count {
        if i % 1024 == 1023 {
            h.spend_steps(context, 1024)?;
        }
        let x = object.get(i, context)?;
        if let Some(x) = x.as_string() {
            n += x.len() as f64;
        } else if x.as_object().is_some_and(|o| o.is_array()) {
            n += length_property(&x, context)?;
        }
        strings(h, n)?;
    }
    Ok(())
}

fn fill(h: &Host, this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<()> {
    let len = length_property(this, context)?;
    let (start, end) = (arg(args, 1), arg(args, 2));
    let from = if start.is_undefined() {
        0.0
    } else {
        number(&start, context)?
    };
    let to = if end.is_undefined() {
        len
    } else {
        number(&end, context)?
    };
    arrays(h, to.max(len) - from.min(0.0))
}

/// `Array.from(arrayLike)`: an object without an iterator is read up to its `length`.
fn array_from(h: &Host, _: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<()> {
    let items = arg(args, 0);
    if let Some(o) = items.as_object()
        && !o.is_callable()
        && !o.has_property(JsSymbol::iterator(), context)?
    {
        arrays(h, length_property(&items, context)?)?;
    }
    Ok(())
}

/// `Function.prototype.bind`: a bound function's depth is its target's plus one.
fn install_bind(context: &mut Context) -> JsResult<()> {
    let proto = context.intrinsics().constructors().function().prototype();
    let original = callable(&proto, js_string!("bind"), context)?;
    let depths = JsWeakMap::new(context);
    let f = NativeFunction::from_copy_closure_with_captures(
        |this, args, (original, depths): &(JsObject, JsWeakMap), context| {
            let h = host(context);
            h.checkpoint(context)?;
            let below = match this.as_object() {
                Some(o) => depths.get(&o, context)?.as_number().unwrap_or(0.0),
                None => 0.0,
            };
            let depth = below + 1.0;
            if depth > h.caps.recursion as f64 {
                return Err(h.hit(Cap::Recursion));
            }
            let bound = original.call(this, args, context)?;
            if let Some(b) = bound.as_object() {
                depths.set(&b, depth.into(), context)?;
            }
            Ok(bound)
        },
        (original, depths),
    );
    let f = function(context, "bind", 1, f)?;
    fix(&proto, js_string!("bind"), f, context)
}

fn install_json(context: &mut Context) -> JsResult<()> {
    let json = context.intrinsics().objects().json();
    let stringify = callable(&json, js_string!("stringify"), context)?;
    let f = NativeFunction::from_copy_closure_with_captures(
        |_, args, (json, stringify): &(JsObject, JsObject), context| {
            let h = host(context);
            h.checkpoint(context)?;
            let value = arg(args, 0);
            depth_of(&h, &value, context)?;
            let out = stringify.call(
                &json.clone().into(),
                &[value, arg(args, 1), arg(args, 2)],
                context,
            )?;
            if let Some(s) = out.as_string() {
                strings(&h, s.len() as f64)?;
            }
            Ok(out)
        },
        (json.clone(), stringify),
    );
    let f = function(context, "stringify", 3, f)?;
    fix(&json, js_string!("stringify"), f, context)?;

    let parse = callable(&json, js_string!("parse"), context)?;
    let f = NativeFunction::from_copy_closure_with_captures(
        |_, args, (json, parse): &(JsObject, JsObject), context| {
            let h = host(context);
            h.checkpoint(context)?;
            let text = arg(args, 0).to_string(context)?;
            strings(&h, text.len() as f64)?;
            if json_depth(&text) > h.caps.value_depth {
                return Err(h.hit(Cap::ValueDepth));
            }
            parse.call(&json.clone().into(), &[text.into(), arg(args, 1)], context)
        },
        (json.clone(), parse),
    );
    let f = function(context, "parse", 2, f)?;
    fix(&json, js_string!("parse"), f, context)
}

/// Ends the run if `value` nests deeper than the depth cap or holds more objects than the
/// array cap, walking its enumerable own properties without recursion.
fn depth_of(h: &Host, value: &JsValue, context: &mut Context) -> JsResult<()> {
    let keys_of = h.object_keys.borrow().clone();
    let Some(keys_of) = keys_of else {
        return Ok(());
    };
    let mut stack = vec![(value.clone(), 1usize)];
    let mut seen = std::collections::HashSet::new();
    while let Some((x, depth)) = stack.pop() {
        let Some(o) = x.as_object() else { continue };
        if o.is_callable() || seen.contains(&o) {
            continue;
        }
        if depth > h.caps.value_depth {
            return Err(h.hit(Cap::ValueDepth));
        }
        seen.insert(o.clone());
        if seen.len() > h.caps.array_len {
            return Err(h.hit(Cap::ArrayLength));
        }
        let keys = keys_of.call(&JsValue::undefined(), std::slice::from_ref(&x), context)?;
        let keys = keys
            .as_object()
            .and_then(|k| JsArray::from_object(k).ok())
            .ok_or_else(|| {
                boa_engine::JsNativeError::typ().with_message("Object.keys returned no array")
            })?;
        let n = keys.length(context)?;
        h.spend_steps(context, n + 1)?;
        for i in 0..n {
            let k = keys.get(i, context)?;
            let v = o.get(k.to_property_key(context)?, context)?;
            stack.push((v, depth + 1));
        }
    }
    Ok(())
}

/// Non-overlapping occurrences of `search` in `text` (for an empty `search`, one more than
/// the characters).
fn count_of(text: &JsString, search: &JsString) -> usize {
    let (text, search) = (text.to_std_string_escaped(), search.to_std_string_escaped());
    if search.is_empty() {
        return text.chars().count() + 1;
    }
    text.matches(search.as_str()).count()
}

/// The bracket depth of JSON text (strings skipped), without recursion.
fn json_depth(text: &JsString) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for unit in text.iter() {
        if in_string {
            match (escaped, unit) {
                (true, _) => escaped = false,
                (false, 0x5C) => escaped = true,
                (false, 0x22) => in_string = false,
                _ => {}
            }
            continue;
        }
        match unit {
            0x22 => in_string = true,
            0x5B | 0x7B => {
                depth += 1;
                max = max.max(depth);
            }
            0x5D | 0x7D => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}
