//! TypeScript declarations generated from the registry: JSON Schema → TypeScript types, and the
//! whole `.d.ts` of `$` for one caller (only what that caller may call), including one Noun
//! per entity type of the org. Nothing here is written per method by hand.

use std::fmt::Write as _;

use serde_json::Value;

use super::methods::{HELPERS, METHODS, MemoryHit, MemoryResults, SavedIds, SdkMethod};
use super::nouns::NounMethod;
use super::{MethodSpec, Tier, may_call};
use lore_directory::admin::{IssuedToken, TokenSummary};
use lore_directory::Caller;
use lore_directory::invites::{Invite, InviteOutcome};
use crate::records::Done;
use crate::records::actions::Action;
use crate::records::behaviors::Behavior;
use crate::records::connections::{CallResult, Connection};
use crate::records::entities::Entity;
use crate::records::feeds::{Feed, FeedCreated, FeedItems, FeedWithSecret, PullResult};
use crate::records::metrics::{Metric, MetricInfo, MetricValue};
use crate::records::operations::Operation;
use crate::records::people::{Member, OrgInfo};
use crate::records::relationships::Relationship;
use crate::records::types::EntityType;
use crate::schema::schema_of;

/// A declared record type: its TypeScript name and its JSON Schema.
pub type RecordType = (&'static str, fn() -> Value);

/// The record types results refer to, declared once at the top of every `.d.ts`.
pub static RECORD_TYPES: &[RecordType] = &[
    ("Entity", schema_of::<Entity>),
    ("Relationship", schema_of::<Relationship>),
    ("EntityType", schema_of::<EntityType>),
    ("MemoryHit", schema_of::<MemoryHit>),
    ("MemoryResults", schema_of::<MemoryResults>),
    ("SavedIds", schema_of::<SavedIds>),
    ("Feed", schema_of::<Feed>),
    ("FeedWithSecret", schema_of::<FeedWithSecret>),
    ("FeedCreated", schema_of::<FeedCreated>),
    ("FeedItems", schema_of::<FeedItems>),
    ("PullResult", schema_of::<PullResult>),
    ("Connection", schema_of::<Connection>),
    ("CallResult", schema_of::<CallResult>),
    ("Operation", schema_of::<Operation>),
    ("Behavior", schema_of::<Behavior>),
    ("Action", schema_of::<Action>),
    ("Metric", schema_of::<Metric>),
    ("MetricInfo", schema_of::<MetricInfo>),
    ("MetricValue", schema_of::<MetricValue>),
    ("Member", schema_of::<Member>),
    ("IssuedToken", schema_of::<IssuedToken>),
    ("TokenSummary", schema_of::<TokenSummary>),
    ("OrgInfo", schema_of::<OrgInfo>),
    ("Invite", schema_of::<Invite>),
    ("InviteOutcome", schema_of::<InviteOutcome>),
    ("Done", schema_of::<Done>),
    ("SdkMethod", schema_of::<SdkMethod>),
    ("SqlResult", schema_of::<crate::sql::SqlResult>),
];

/// Names a Noun may not take: the declared record types, the `.d.ts`'s own names, and the
/// global types of TypeScript and JavaScript.
const RESERVED: &[&str] = &[
    "Page",
    "LoreSdk",
    "LoreCtx",
    "Array",
    "ArrayBuffer",
    "BigInt",
    "Boolean",
    "DataView",
    "Date",
    "Error",
    "EvalError",
    "Function",
    "Infinity",
    "Intl",
    "JSON",
    "Map",
    "Math",
    "NaN",
    "Number",
    "Object",
    "Partial",
    "Pick",
    "Omit",
    "Promise",
    "Proxy",
    "RangeError",
    "Readonly",
    "Record",
    "ReferenceError",
    "Reflect",
    "RegExp",
    "Required",
    "Exclude",
    "Extract",
    "Set",
    "String",
    "Symbol",
    "SyntaxError",
    "TypeError",
    "URIError",
    "WeakMap",
    "WeakSet",
    "Awaited",
    "ReturnType",
    "Parameters",
    "NonNullable",
    "Uppercase",
    "Lowercase",
    "Capitalize",
    "Uncapitalize",
    "Iterable",
    "Iterator",
    "Generator",
    "Uint8Array",
];

/// Whether a Noun name would clash with a name the declarations already use.
pub fn is_reserved(noun: &str) -> bool {
    RESERVED.contains(&noun) || RECORD_TYPES.iter().any(|(n, _)| *n == noun)
}

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

fn doc_comment(text: &str, pad: &str) -> String {
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
struct Render<'a> {
    names: &'a [(&'static str, Value)],
}

impl Render<'_> {
    fn named(&self, schema: &Value, depth: usize) -> String {
        match self.names.iter().find(|(_, s)| s == schema) {
            Some((name, _)) => (*name).to_string(),
            None => self.ts(schema, depth),
        }
    }

    fn ts(&self, schema: &Value, depth: usize) -> String {
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

/// `name(args): Promise<R>` of a static method.
pub fn signature(m: &MethodSpec) -> String {
    format!(
        "{}.{}({}): Promise<{}>",
        m.namespace,
        m.name,
        args_ts(&(m.args)(), 0),
        rust_to_ts(m.returns)
    )
}

pub fn noun_signature(m: &NounMethod) -> String {
    format!(
        "{}.{}({}): Promise<{}>",
        m.noun, m.verb, m.args_ts, m.returns_ts
    )
}

/// The `.d.ts` of `$` for `caller` through a surface that allows `allowed`.
pub fn declarations(
    caller: &Caller,
    allowed: Tier,
    types: &[EntityType],
    nouns: &[NounMethod],
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "// TypeScript declarations of the lore SDK (`$`, `client`, `ctx`) for org {} as {} ({}).\n// Generated by lore {}; only methods this caller may call are declared.\n",
        caller.org(),
        caller.principal().id,
        caller.role().as_str(),
        lore_base::VERSION
    );
    out.push_str("/** One page of a list; pass next_cursor as cursor to continue. */\ninterface Page<T> {\n  items: T[];\n  next_cursor?: string;\n}\n\n");
    let names: Vec<(&'static str, Value)> = RECORD_TYPES.iter().map(|(n, s)| (*n, s())).collect();
    let render = Render { names: &names };
    for (name, schema) in &names {
        let ts = render.ts(schema, 0);
        let union = ["oneOf", "anyOf", "allOf"]
            .iter()
            .any(|k| schema.get(k).is_some());
        if ts.starts_with('{') && !union {
            let _ = writeln!(out, "interface {name} {ts}\n");
        } else {
            let _ = writeln!(out, "type {name} = {ts};\n");
        }
    }
    for ty in types {
        if !ty.description.is_empty() {
            out.push_str(&doc_comment(&ty.description, ""));
        }
        let mut props = ty.schema.clone();
        if let Value::Object(map) = &mut props {
            map.entry("type").or_insert(Value::String("object".into()));
        }
        let _ = writeln!(
            out,
            "interface {} extends Entity {{\n  type: {};\n  properties: {};\n}}\n",
            ty.noun,
            Value::String(ty.name.clone()),
            ts_type(&props, 1)
        );
    }
    out.push_str(
        "/** The lore SDK: `$` and `client` are the same object. */\ninterface LoreSdk {\n",
    );
    let mut namespace = "";
    for m in METHODS.iter().filter(|m| may_call(caller, m.tier, allowed)) {
        if m.namespace != namespace {
            if !namespace.is_empty() {
                out.push_str("  };\n");
            }
            namespace = m.namespace;
            let _ = writeln!(out, "  {namespace}: {{");
        }
        out.push_str(&doc_comment(
            &format!("{} Access: {}.", m.description, m.tier.as_str()),
            "    ",
        ));
        let _ = writeln!(
            out,
            "    {}({}): Promise<{}>;",
            m.name,
            args_ts(&(m.args)(), 2),
            rust_to_ts(m.returns)
        );
    }
    if !namespace.is_empty() {
        out.push_str("  };\n");
    }
    let mut noun = "";
    for m in nouns.iter().filter(|m| may_call(caller, m.tier, allowed)) {
        if m.noun != noun {
            if !noun.is_empty() {
                out.push_str("  };\n");
            }
            noun = &m.noun;
            let _ = writeln!(out, "  {noun}: {{");
        }
        out.push_str(&doc_comment(
            &format!("{} Access: {}.", m.description, m.tier.as_str()),
            "    ",
        ));
        let _ = writeln!(
            out,
            "    {}({}): Promise<{}>;",
            m.verb, m.args_ts, m.returns_ts
        );
    }
    if !noun.is_empty() {
        out.push_str("  };\n");
    }
    out.push_str("}\n\n/** Runtime helpers of a script. */\ninterface LoreCtx {\n");
    for (_, sig, description) in HELPERS {
        out.push_str(&doc_comment(description, "  "));
        let _ = writeln!(out, "  {sig};");
    }
    out.push_str("}\n\ndeclare const $: LoreSdk;\ndeclare const client: LoreSdk;\ndeclare const ctx: LoreCtx;\n");
    out
}
