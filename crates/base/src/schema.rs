//! JSON Schema in one place: schemas generated from Rust types (`schemars`, inlined, draft
//! 2020-12) and validation (`jsonschema`) whose errors name the failing field as a JSON pointer.

use schemars::JsonSchema;
use serde_json::Value;

use crate::error::LoreError;

/// The JSON Schema of `T`, self-contained (no `$ref`s), without `$schema` or `title`.
pub fn schema_of<T: JsonSchema>() -> Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    let mut value = generator.into_root_schema_for::<T>().to_value();
    if let Value::Object(map) = &mut value {
        map.remove("title");
        map.remove("$schema");
    }
    strip_formats(&mut value);
    drop_optional_nulls(&mut value);
    value
}

/// An optional field is left out, never sent as null: schemars allows `null` for every
/// `Option`, which only adds noise for clients, so optional properties lose it.
fn drop_optional_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            let required: Vec<String> = map
                .get("required")
                .and_then(Value::as_array)
                .map(|r| {
                    r.iter()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            if let Some(Value::Object(props)) = map.get_mut("properties") {
                for (key, prop) in props.iter_mut() {
                    if !required.contains(key) {
                        strip_null(prop);
                    }
                }
            }
            map.values_mut().for_each(drop_optional_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_optional_nulls),
        _ => {}
    }
}

fn strip_null(prop: &mut Value) {
    let Value::Object(p) = prop else { return };
    if let Some(Value::Array(options)) = p.get_mut("enum") {
        options.retain(|o| !o.is_null());
    }
    if let Some(Value::Array(types)) = p.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            p.insert("type".into(), only);
        }
        return;
    }
    if let Some(Value::Array(branches)) = p.get_mut("anyOf") {
        branches.retain(|b| b.get("type").is_none_or(|t| t != "null"));
        if branches.len() == 1 {
            let Value::Object(only) = branches.remove(0) else {
                return;
            };
            p.remove("anyOf");
            for (k, v) in only {
                p.entry(k).or_insert(v);
            }
        }
    }
}

/// Drops schemars' numeric `format` annotations (`uint32`, `int64`, ...): they are not JSON
/// Schema vocabulary clients know, and the ranges already say what is allowed.
fn strip_formats(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if map
                .get("format")
                .and_then(Value::as_str)
                .is_some_and(|f| f.starts_with("int") || f.starts_with("uint") || f == "double")
            {
                map.remove("format");
            }
            map.values_mut().for_each(strip_formats);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_formats),
        _ => {}
    }
}

/// How big a compiled `pattern` may be, and the lazy DFA's cache: bounds on the work one
/// tenant's schema can make compiling and matching cost.
const PATTERN_SIZE_LIMIT: usize = 1 << 20;
const PATTERN_DFA_LIMIT: usize = 2 << 20;

/// Compiles a schema, or says why it is not a usable JSON Schema. Tenants write schemas, so
/// `pattern` (and `patternProperties`, and `format: regex`) compile with the linear-time
/// `regex` engine: matching costs at most time proportional to the pattern's size times the
/// text's, whatever the pattern; back-references and look-around, which need backtracking,
/// are refused when the schema is defined, with the engine's message.
pub fn compile(schema: &Value) -> Result<jsonschema::Validator, String> {
    jsonschema::options()
        .with_pattern_options(
            jsonschema::PatternOptions::regex()
                .size_limit(PATTERN_SIZE_LIMIT)
                .dfa_size_limit(PATTERN_DFA_LIMIT),
        )
        .build(schema)
        .map_err(|e| e.to_string())
}

/// How deep a value lore stores may nest (objects and arrays): memory payloads, webhook
/// bodies, entity and relationship properties, schemas, script arguments and results. One
/// limit for everything stored, checked when it is written, and well inside what a script may
/// pass across its bridge (`ScriptCaps::value_depth`), so reading any stored value back into a
/// script, inside the records that wrap it, never reaches a script's cap.
pub const MAX_STORED_DEPTH: usize = 32;

/// The nesting depth of `value`: 0 for a scalar, 1 for `[]` or `{}` of scalars. Iterative.
pub fn depth(value: &Value) -> usize {
    let mut max = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((v, d)) = stack.pop() {
        match v {
            Value::Array(items) => {
                max = max.max(d + 1);
                stack.extend(items.iter().map(|i| (i, d + 1)));
            }
            Value::Object(map) => {
                max = max.max(d + 1);
                stack.extend(map.values().map(|i| (i, d + 1)));
            }
            _ => {}
        }
    }
    max
}

/// Refuses a value to be stored that nests deeper than [`MAX_STORED_DEPTH`].
pub fn check_stored_depth(value: &Value, field: &str) -> Result<(), LoreError> {
    refuse_deeper(depth(value), field)
}

/// [`check_stored_depth`] for an object's properties.
pub fn check_stored_properties(
    map: &serde_json::Map<String, Value>,
    field: &str,
) -> Result<(), LoreError> {
    refuse_deeper(1 + map.values().map(depth).max().unwrap_or(0), field)
}

fn refuse_deeper(d: usize, field: &str) -> Result<(), LoreError> {
    if d > MAX_STORED_DEPTH {
        return Err(LoreError::invalid(
            field,
            format!(
                "this value nests {d} levels deep; lore stores values at most {MAX_STORED_DEPTH} levels deep (objects and arrays): flatten it"
            ),
        ));
    }
    Ok(())
}

/// The first validation error of `instance`, as `invalid_argument`. `base` prefixes the field:
/// with base `properties`, a bad `/priority` is reported as field `properties/priority`.
pub fn check(
    validator: &jsonschema::Validator,
    instance: &Value,
    base: &str,
) -> Result<(), LoreError> {
    let Some(error) = validator.iter_errors(instance).next() else {
        return Ok(());
    };
    let mut pointer = error.instance_path().to_string();
    // A missing property is named by its own pointer, not its parent's.
    if let jsonschema::error::ValidationErrorKind::Required { property } = error.kind()
        && let Some(name) = property.as_str()
    {
        pointer = format!("{pointer}/{}", name.replace('~', "~0").replace('/', "~1"));
    }
    let field = match (base.is_empty(), pointer.is_empty()) {
        (true, true) => "arguments".to_string(),
        (true, false) => pointer.trim_start_matches('/').to_string(),
        (false, _) => format!("{base}{pointer}"),
    };
    let at = if pointer.is_empty() {
        "/".to_string()
    } else {
        pointer
    };
    let message = if base.is_empty() {
        describe(&error)
    } else {
        format!("at JSON pointer {at}: {}", describe(&error))
    };
    Err(LoreError::invalid(field, message))
}

/// A short rendering of a value for error messages.
fn preview(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= 80 {
        return text;
    }
    match value {
        Value::String(s) => format!("a string of {} characters", s.chars().count()),
        Value::Array(a) => format!("an array of {} items", a.len()),
        Value::Object(o) => format!("an object with {} fields", o.len()),
        _ => "the value".to_string(),
    }
}

fn describe(error: &jsonschema::ValidationError<'_>) -> String {
    let shown = preview(error.instance());
    match error.kind() {
        jsonschema::error::ValidationErrorKind::Enum { options } => {
            let allowed: Vec<String> = options
                .as_array()
                .map_or_else(Vec::new, |o| o.iter().map(Value::to_string).collect());
            format!("{shown} is not allowed; use one of {}", allowed.join(", "))
        }
        _ => error.masked_with(shown).to_string(),
    }
}
