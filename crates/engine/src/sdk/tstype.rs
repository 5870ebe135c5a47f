//! JSON Schemas and Rust result types as TypeScript types, for the SDK's declarations and
//! signatures.

use std::fmt::Write as _;

use serde_json::Value;

/// The TypeScript of a result type written in Rust: `Vec<Feed>` → `Feed[]`, `Value` → `unknown`.
pub fn rust_to_ts(rust: &str) -> String {
    let t: String = rust.chars().filter(|c| !c.is_whitespace()).collect();
    if let Some(inner) = t.strip_prefix("Vec<").and_then(|r| r.strip_suffix('>')) {
        return format!("{}[]", rust_to_ts(inner));
    }
    if let Some(inner) = t.strip_prefix("Page<").and_then(|r| r.strip_suffix('>')) {
        return format!("Page<{}>", rust_to_ts(inner));
    }
    if let Some(inner) = t.strip_prefix("Stored<").and_then(|r| r.strip_suffix('>')) {
        return rust_to_ts(inner);
    }
    match t.as_str() {
        "Value" => "unknown".into(),
        other => other.into(),
    }
}

fn is_ident(key: &str) -> bool {
    key.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

fn literal(v: &Value) -> String {
    match v {
        Value::String(_) | Value::Number(_) | Value::Bool(_) | Value::Null => v.to_string(),
        _ => "unknown".into(),
    }
}

fn union(parts: Vec<String>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for p in parts {
        if !seen.contains(&p) {
            seen.push(p);
        }
    }
    if seen.iter().any(|p| p == "unknown") {
        return "unknown".into();
    }
    seen.join(" | ")
}

/// A `oneOf`/`anyOf` branch with its parent's keywords: the branch's `properties` add to the
/// parent's, its `required` adds to the parent's, and its other keywords win.
fn merge_branch(base: &serde_json::Map<String, Value>, branch: &Value) -> Value {
    let mut merged = base.clone();
    let Value::Object(branch) = branch else {
        return branch.clone();
    };
    for (k, v) in branch {
        match (k.as_str(), merged.get_mut(k), v) {
            ("properties", Some(Value::Object(props)), Value::Object(more)) => {
                for (name, schema) in more {
                    props.insert(name.clone(), schema.clone());
                }
            }
            ("required", Some(Value::Array(req)), Value::Array(more)) => {
                for r in more {
                    if !req.contains(r) {
                        req.push(r.clone());
                    }
                }
            }
            _ => {
                merged.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(merged)
}

fn array_of(item: String) -> String {
    if item.contains(' ') {
        format!("({item})[]")
    } else {
        format!("{item}[]")
    }
}

pub(super) fn doc_comment(text: &str, pad: &str) -> String {
    let clean = text.replace("*/", "* /");
    format!(
        "{pad}/** {} */\n",
        clean.split_whitespace().collect::<Vec<_>>().join(" ")
    )
}

/// The TypeScript type of a JSON Schema. `depth` sets the indentation of object members.
pub fn ts_type(schema: &Value, depth: usize) -> String {
    Render { names: &[] }.ts(schema, depth)
}

/// Renders schemas, naming the sub-schemas that equal a declared record type.
pub(super) struct Render<'a> {
    pub(super) names: &'a [(&'static str, Value)],
}

impl Render<'_> {
    fn named(&self, schema: &Value, depth: usize) -> String {
        match self.names.iter().find(|(_, s)| s == schema) {
            Some((name, _)) => (*name).to_string(),
            None => self.ts(schema, depth),
        }
    }

    pub(super) fn ts(&self, schema: &Value, depth: usize) -> String {
        let Value::Object(s) = schema else {
            return if schema == &Value::Bool(false) {
                "never".into()
            } else {
                "unknown".into()
            };
        };
        if let Some(c) = s.get("const") {
            return literal(c);
        }
        if let Some(Value::Array(options)) = s.get("enum") {
            return union(options.iter().map(literal).collect());
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(options)) = s.get(key) {
                let mut base = s.clone();
                base.remove(key);
                let parts: Vec<String> = options
                    .iter()
                    .map(|o| self.named(&merge_branch(&base, o), depth))
                    .collect();
                return union(parts);
            }
        }
        if let Some(Value::Array(all)) = s.get("allOf") {
            return all
                .iter()
                .map(|a| ts_type(a, depth))
                .collect::<Vec<_>>()
                .join(" & ");
        }
        let types: Vec<&str> = match s.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ if s.contains_key("properties") => vec!["object"],
            _ => return "unknown".into(),
        };
        let parts = types
            .iter()
            .map(|t| match *t {
                "string" => "string".to_string(),
                "integer" | "number" => "number".to_string(),
                "boolean" => "boolean".to_string(),
                "null" => "null".to_string(),
                "array" => match s.get("items") {
                    Some(item) => array_of(self.named(item, depth)),
                    None => "unknown[]".to_string(),
                },
                _ => self.object_type(s, depth),
            })
            .collect();
        union(parts)
    }

    fn object_type(&self, s: &serde_json::Map<String, Value>, depth: usize) -> String {
        let extra = match s.get("additionalProperties") {
            None | Some(Value::Bool(true)) => Some("unknown".to_string()),
            Some(Value::Bool(false)) => None,
            Some(schema) => Some(self.named(schema, depth + 1)),
        };
        let Some(Value::Object(props)) = s
            .get("properties")
            .filter(|p| p.as_object().is_some_and(|p| !p.is_empty()))
        else {
            return format!(
                "Record<string, {}>",
                extra.unwrap_or_else(|| "never".into())
            );
        };
        let required: Vec<&str> = s
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let pad = "  ".repeat(depth + 1);
        let mut out = String::from("{\n");
        for (key, prop) in props {
            if let Some(d) = prop.get("description").and_then(Value::as_str) {
                out.push_str(&doc_comment(d, &pad));
            }
            let name = if is_ident(key) {
                key.clone()
            } else {
                Value::String(key.clone()).to_string()
            };
            let optional = if required.contains(&key.as_str()) {
                ""
            } else {
                "?"
            };
            let _ = writeln!(
                out,
                "{pad}{name}{optional}: {};",
                self.named(prop, depth + 1)
            );
        }
        if let Some(extra) =
            extra.filter(|e| e != "unknown" || s.get("additionalProperties").is_some())
        {
            let _ = writeln!(out, "{pad}[key: string]: {extra};");
        }
        out.push_str(&"  ".repeat(depth));
        out.push('}');
        out
    }
}

/// The parameter list of a static method: `args?: {...}` when nothing is required.
pub fn args_ts(schema: &Value, depth: usize) -> String {
    let required = schema
        .get("required")
        .and_then(Value::as_array)
        .is_some_and(|r| !r.is_empty())
        || schema.get("oneOf").is_some()
        || schema.get("anyOf").is_some();
    let has_props = schema
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| !p.is_empty());
    if !has_props && !required {
        return "args?: Record<string, never>".into();
    }
    format!(
        "args{}: {}",
        if required { "" } else { "?" },
        ts_type(schema, depth)
    )
}
