//! Every regular expression a script runs goes through `RegExp.prototype.exec`, and that is
//! this host function: the spec's RegExpBuiltinExec over `lore-jsregex`, a matcher whose every
//! step counts against the run's steps cap and whose search stops when the cap or the wall
//! clock does. The engine's own matcher (a backtracker with no step limit) is never reached:
//!
//! - the bootstrap replaces `RegExp.prototype.exec` with this function (non-writable,
//!   non-configurable) and freezes `RegExp.prototype`, so `match`, `matchAll`, `replace`,
//!   `search`, `split` and `test` (which all call `exec` by the spec) come here;
//! - the engine would fall back to its own matcher for a regular expression whose `exec` is
//!   not callable (an own `exec`, or another prototype): every RegExp a script can hold is
//!   made non-extensible at birth (literals are compiled into `__lore_regexp(source, flags)`
//!   calls by the TypeScript step, and the global `RegExp` is a wrapper that refuses
//!   subclasses), so neither can be given to one. The regexps built-ins make for themselves
//!   (`"s".match("a+")`) never reach script code.

use std::rc::Rc;

use boa_engine::object::builtins::{JsArray, JsRegExp};
use boa_engine::{Context, JsNativeError, JsObject, JsResult, JsString, JsValue, js_string};

use crate::caps::Cap;
use crate::host::Host;

/// Compiled patterns kept per run (a run's loops compile the same few again and again).
const CACHE: usize = 256;

/// Steps one `exec` costs besides its search: the result array it builds.
const EXEC_STEPS: u64 = 16;

/// Spends a search's steps on the run: the steps cap and the wall clock can stop it.
struct RunBudget<'a> {
    host: &'a Host,
    context: &'a Context,
    /// Which cap stopped the search, if one did.
    stopped_by: Option<Cap>,
}

impl lore_jsregex::Budget for RunBudget<'_> {
    fn spend(&mut self, steps: u64) -> Result<(), lore_jsregex::Stopped> {
        if self.host.spend_steps(self.context, steps).is_err() {
            self.stopped_by = Some(Cap::Steps);
            return Err(lore_jsregex::Stopped);
        }
        if self.host.check_deadline().is_err() {
            self.stopped_by = Some(Cap::WallClock);
            return Err(lore_jsregex::Stopped);
        }
        Ok(())
    }
}

/// Steps a compilation costs per code unit of its pattern (compiling is about as costly per
/// character as a hundred interpreter steps).
const COMPILE_STEPS_PER_UNIT: u64 = 100;

/// The compiled matcher of `source` with `flags`, from the run's cache; a compilation is
/// charged to the steps cap.
fn compiled(
    host: &Host,
    context: &Context,
    source: Vec<u16>,
    flags: String,
) -> JsResult<Rc<lore_jsregex::Regex>> {
    let key = (source, flags);
    if let Some(re) = host.regexes.borrow().get(&key) {
        return Ok(re.clone());
    }
    let compiled = lore_jsregex::Regex::new(&key.0, &key.1);
    // Charged for the work done: a pattern refused for its size is refused before any.
    let units = match &compiled {
        Err(lore_jsregex::Error::TooLarge(_)) => 0,
        _ => key.0.len() as u64,
    };
    host.spend_steps(context, 1_000 + COMPILE_STEPS_PER_UNIT * units)?;
    let re = compiled.map_err(|e| match e {
        lore_jsregex::Error::Syntax(m) => JsNativeError::syntax().with_message(m),
        lore_jsregex::Error::TooLarge(m) | lore_jsregex::Error::Unsupported(m) => {
            JsNativeError::range().with_message(m)
        }
    })?;
    let re = Rc::new(re);
    let mut cache = host.regexes.borrow_mut();
    if cache.len() >= CACHE {
        cache.clear();
    }
    cache.insert(key, re.clone());
    Ok(re)
}

/// `regexExec(regexp, string)`, what `RegExp.prototype.exec` calls: RegExpBuiltinExec
/// (ECMA-262 22.2.7.2).
pub fn exec(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let host = crate::host::host(context);
    host.checkpoint(context)?;
    let r = args
        .first()
        .and_then(JsValue::as_object)
        .filter(|o| JsRegExp::from_object(o.clone()).is_ok())
        .ok_or_else(|| {
            JsNativeError::typ()
                .with_message("RegExp.prototype.exec called on a value that is not a RegExp")
        })?;
    let s = args
        .get(1)
        .cloned()
        .unwrap_or_default()
        .to_string(context)?;
    let source = r.get(js_string!("source"), context)?;
    let source = source
        .as_string()
        .ok_or_else(|| JsNativeError::typ().with_message("RegExp source is not a string"))?
        .to_vec();
    let flags = r.get(js_string!("flags"), context)?.to_string(context)?;
    let re = compiled(&host, context, source, flags.to_std_string_lossy())?;
    let f = re.flags();
    let (global, sticky) = (f.global, f.sticky);
    let mut last_index = r
        .get(js_string!("lastIndex"), context)?
        .to_length(context)?;
    if !global && !sticky {
        last_index = 0;
    }
    // The text as UTF-16 without copying it (a global regexp's loop calls this once per match);
    // Latin-1 text is widened once and kept while the same string comes back.
    let widened;
    let input: &[u16] = match s.as_str().variant() {
        boa_engine::string::JsStrVariant::Utf16(units) => units,
        boa_engine::string::JsStrVariant::Latin1(bytes) => {
            widened = host.widened(&s, bytes);
            &widened
        }
    };
    let reset = |r: &JsObject, context: &mut Context| -> JsResult<JsValue> {
        if global || sticky {
            r.set(js_string!("lastIndex"), 0, true, context)?;
        }
        Ok(JsValue::null())
    };
    if last_index > input.len() as u64 {
        return reset(&r, context);
    }
    // Every search costs something, whatever it finds: a loop over matches is counted too.
    host.spend_steps(context, EXEC_STEPS)?;
    let mut budget = RunBudget {
        host: &host,
        context,
        stopped_by: None,
    };
    let found = re.exec(input, last_index as usize, &mut budget);
    let stopped_by = budget.stopped_by;
    let captures = match found {
        Ok(Some(c)) => c,
        Ok(None) => return reset(&r, context),
        Err(lore_jsregex::Stopped) => {
            return Err(host.hit(stopped_by.unwrap_or(Cap::Steps)));
        }
    };
    let (start, end) = captures.slots[0].unwrap_or((0, 0));
    if global || sticky {
        r.set(js_string!("lastIndex"), end, true, context)?;
    }
    let slice = |range: Option<(usize, usize)>| -> JsValue {
        match range {
            Some((a, b)) => JsString::from(&input[a..b]).into(),
            None => JsValue::undefined(),
        }
    };
    let values: Vec<JsValue> = captures.slots.iter().map(|c| slice(*c)).collect();
    let a = JsArray::from_iter(values.iter().cloned(), context);
    a.create_data_property_or_throw(js_string!("index"), start, context)?;
    a.create_data_property_or_throw(js_string!("input"), s.clone(), context)?;
    let names = re.group_names();
    let groups = if names.is_empty() {
        JsValue::undefined()
    } else {
        let groups = JsObject::with_null_proto();
        for (name, index) in names {
            let key = JsString::from(name.as_str());
            // Duplicate names (in different alternatives): the one that took part wins.
            let value = values.get(*index).cloned().unwrap_or_default();
            if !value.is_undefined() || !groups.has_own_property(key.clone(), context)? {
                groups.create_data_property_or_throw(key, value, context)?;
            }
        }
        groups.into()
    };
    a.create_data_property_or_throw(js_string!("groups"), groups.clone(), context)?;
    if f.has_indices {
        let pairs: Vec<JsValue> = captures
            .slots
            .iter()
            .map(|c| match c {
                Some((a, b)) => {
                    JsArray::from_iter([JsValue::from(*a), JsValue::from(*b)], context).into()
                }
                None => JsValue::undefined(),
            })
            .collect();
        let indices = JsArray::from_iter(pairs.iter().cloned(), context);
        let index_groups = if names.is_empty() {
            JsValue::undefined()
        } else {
            let g = JsObject::with_null_proto();
            for (name, index) in names {
                let key = JsString::from(name.as_str());
                let value = pairs.get(*index).cloned().unwrap_or_default();
                if !value.is_undefined() || !g.has_own_property(key.clone(), context)? {
                    g.create_data_property_or_throw(key, value, context)?;
                }
            }
            g.into()
        };
        indices.create_data_property_or_throw(js_string!("groups"), index_groups, context)?;
        a.create_data_property_or_throw(js_string!("indices"), indices, context)?;
    }
    host.checkpoint(context)?;
    Ok(a.into())
}

/// `regexCompile(source, flags)`: compiles a pattern before the engine's RegExp sees it (and
/// keeps it for the run's `exec`); throws the SyntaxError or RangeError of a bad one.
pub fn compile(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let host = crate::host::host(context);
    host.checkpoint(context)?;
    let text = |i: usize, context: &mut Context| -> JsResult<JsString> {
        args.get(i).cloned().unwrap_or_default().to_string(context)
    };
    let source = text(0, context)?.to_vec();
    let flags = text(1, context)?.to_std_string_lossy();
    compiled(&host, context, source, flags)?;
    Ok(JsValue::undefined())
}
