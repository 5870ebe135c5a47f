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

/// Compiles a schema, or says why it is not a usable JSON Schema.
pub fn compile(schema: &Value) -> Result<jsonschema::Validator, String> {
    jsonschema::validator_for(schema).map_err(|e| e.to_string())
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
