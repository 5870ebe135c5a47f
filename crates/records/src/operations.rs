//! Operations: named Verbs. Either a TypeScript body run in the sandbox, or one HTTP call
//! through a connection. Each declares its access tier and default mode; an operation bound to
//! an entity type is also a custom verb of that type's Noun (`$.Ticket.escalate(...)`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::connections::{self, CallConnection, CallResult};
use super::{ByName, Done, now_text, require, to_bytes};
use lore_base::error::{LoreError, Result};
use lore_base::model::{Mode, Tier};
use lore_base::ports::Ports;
use lore_base::storage::Batch;
use lore_directory::Caller;

/// The built-in verbs every Noun has; operations may not take these names.
pub const BUILT_IN_VERBS: &[&str] = &["get", "list", "create", "update", "delete", "link"];

/// What an operation does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum OperationBody {
    /// A TypeScript function body run in the sandbox with `ctx.args`.
    Script {
        /// The script.
        code: String,
    },
    /// One HTTP call through a connection; `{name}` placeholders in `path` come from the args,
    /// the other args go in the JSON body (or the query string for GET and DELETE).
    Http {
        connection: String,
        /// GET, POST, PUT, PATCH or DELETE.
        method: String,
        /// e.g. `/tickets/{id}/escalate`.
        path: String,
    },
}

/// A named Verb.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Operation {
    pub name: String,
    pub description: String,
    /// The entity type whose Noun gets this verb, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity_type: Option<String>,
    #[serde(flatten)]
    pub body: OperationBody,
    /// JSON Schema of the arguments.
    pub args_schema: Value,
    /// The tier a caller needs to run it.
    pub access: Tier,
    /// How it is dispatched when a script does not choose.
    pub mode: Mode,
    /// The principal who created it.
    pub author: String,
    /// Every principal who changed it since, oldest first (each once). A script operation
    /// runs with the least role among its caller, its author and these, as they are now
    /// (`lore_directory::caller::least_of`): an admin's edit never runs with an owner's rights.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed_by: Vec<String>,
    pub created_at: String,
    pub updated_at: String,
}

/// `operations.create`
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateOperation {
    /// A verb name: a-z, 0-9 and `_`, starting with a letter.
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Bind it to this entity type as a custom verb of its Noun.
    pub entity_type: Option<String>,
    /// `script` (a TypeScript body in `code`) or `http` (`connection`, `method`, `path`).
    pub kind: OperationKind,
    /// Script operations: the TypeScript body.
    pub code: Option<String>,
    /// HTTP operations: the connection to call through.
    pub connection: Option<String>,
    /// HTTP operations: GET, POST, PUT, PATCH or DELETE (default POST).
    pub method: Option<String>,
    /// HTTP operations: the path, with `{arg}` placeholders, e.g. `/tickets/{id}/escalate`.
    pub path: Option<String>,
    /// JSON Schema of the arguments (default: any object).
    pub args_schema: Option<Value>,
    /// Default `write`.
    pub access: Option<Tier>,
    /// Default `try`.
    pub mode: Option<Mode>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OperationKind {
    Script,
    Http,
}

impl CreateOperation {
    /// The body the fields describe; the error names the missing or misplaced field.
    fn body(&self) -> Result<OperationBody> {
        let missing = |field: &str| {
            LoreError::invalid(
                field,
                format!(
                    "a {} operation needs {field}",
                    match self.kind {
                        OperationKind::Script => "script",
                        OperationKind::Http => "http",
                    }
                ),
            )
        };
        let stray = |field: &str, kind: &str| {
            LoreError::invalid(field, format!("{field} is for {kind} operations"))
        };
        match self.kind {
            OperationKind::Script => {
                for (field, v) in [
                    ("connection", &self.connection),
                    ("method", &self.method),
                    ("path", &self.path),
                ] {
                    if v.is_some() {
                        return Err(stray(field, "http"));
                    }
                }
                Ok(OperationBody::Script {
                    code: self.code.clone().ok_or_else(|| missing("code"))?,
                })
            }
            OperationKind::Http => {
                if self.code.is_some() {
                    return Err(stray("code", "script"));
                }
                Ok(OperationBody::Http {
                    connection: self
                        .connection
                        .clone()
                        .ok_or_else(|| missing("connection"))?,
                    method: self.method.clone().unwrap_or_else(|| "POST".into()),
                    path: self.path.clone().ok_or_else(|| missing("path"))?,
                })
            }
        }
    }
}

/// `operations.update`: only the fields given change.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateOperation {
    pub name: String,
    pub description: Option<String>,
    /// Replaces the body (`{kind: "script", code}` or `{kind: "http", connection, method, path}`).
    pub body: Option<OperationBody>,
    pub args_schema: Option<Value>,
    pub access: Option<Tier>,
    pub mode: Option<Mode>,
}

/// `operations.run`
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunOperation {
    pub name: String,
    /// Arguments, valid against the operation's `args_schema`.
    #[serde(default)]
    pub args: Map<String, Value>,
}

/// Checks a verb name: it must be a plain JS identifier and not a built-in verb.
pub fn check_verb(name: &str) -> Result<()> {
    let ok = (1..=64).contains(&name.len())
        && name.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if !ok {
        return Err(LoreError::invalid(
            "name",
            format!(
                "{name:?} is not a valid verb name: use 1-64 of a-z, 0-9 and '_', starting with a letter"
            ),
        ));
    }
    if BUILT_IN_VERBS.contains(&name) {
        return Err(LoreError::invalid(
            "name",
            format!("{name:?} is a built-in verb of every Noun; pick another name"),
        ));
    }
    Ok(())
}

async fn check_body(ports: &Ports, caller: &Caller, body: &OperationBody) -> Result<()> {
    match body {
        OperationBody::Script { code } => {
            if code.trim().is_empty() || code.len() > 64 * 1024 {
                return Err(LoreError::invalid(
                    "code",
                    "give a script of 1 byte to 64 KiB",
                ));
            }
        }
        OperationBody::Http {
            connection,
            method,
            path,
        } => {
            connections::get(ports, caller, connection)
                .await
                .map_err(|_| {
                    LoreError::invalid(
                        "connection",
                        format!("there is no connection {connection:?}; create it first"),
                    )
                })?;
            if !["GET", "POST", "PUT", "PATCH", "DELETE"]
                .contains(&method.to_ascii_uppercase().as_str())
            {
                return Err(LoreError::invalid(
                    "method",
                    "use GET, POST, PUT, PATCH or DELETE",
                ));
            }
            if !path.starts_with('/') || path.contains("://") {
                return Err(LoreError::invalid("path", "give a path starting with /"));
            }
        }
    }
    Ok(())
}

fn check_args_schema(schema: &Value) -> Result<()> {
    if !schema.is_object() {
        return Err(LoreError::invalid(
            "args_schema",
            "give a JSON Schema object",
        ));
    }
    lore_base::schema::check_stored_depth(schema, "args_schema")?;
    lore_base::schema::compile(schema)
        .map(|_| ())
        .map_err(|e| LoreError::invalid("args_schema", format!("not a valid JSON Schema: {e}")))
}

pub async fn get(ports: &Ports, caller: &Caller, name: &str) -> Result<Operation> {
    super::check_name("name", name)?;
    require(
        ports,
        &caller.keys().named("op", name),
        format!("operation {name:?} in org {}", caller.org()),
    )
    .await
}

pub async fn list(ports: &Ports, caller: &Caller) -> Result<Vec<Operation>> {
    super::all(ports, &caller.keys().all_named("op")).await
}

pub async fn create(ports: &Ports, caller: &Caller, args: CreateOperation) -> Result<Operation> {
    check_verb(&args.name)?;
    if let Some(t) = &args.entity_type {
        super::types::get(ports, caller, t).await.map_err(|_| {
            LoreError::invalid("entity_type", format!("there is no entity type {t:?}"))
        })?;
    }
    let body = args.body()?;
    check_body(ports, caller, &body).await?;
    let args_schema = args
        .args_schema
        .unwrap_or_else(|| json!({"type": "object"}));
    check_args_schema(&args_schema)?;
    let now = now_text(ports);
    let op = Operation {
        name: args.name,
        description: args.description,
        entity_type: args.entity_type,
        body,
        args_schema,
        access: args.access.unwrap_or(Tier::Write),
        mode: args.mode.unwrap_or(Mode::Try),
        author: caller.principal().id.clone(),
        changed_by: Vec::new(),
        created_at: now.clone(),
        updated_at: now,
    };
    let key = caller.keys().named("op", &op.name);
    let mut batch = Batch::new();
    batch.require_absent(&key).put(&key, to_bytes(&op));
    super::commit_new(ports, batch, || format!("operation {:?}", op.name)).await?;
    Ok(op)
}

pub async fn update(ports: &Ports, caller: &Caller, args: UpdateOperation) -> Result<Operation> {
    let old = get(ports, caller, &args.name).await?;
    let mut op = old.clone();
    if let Some(d) = args.description {
        op.description = d;
    }
    if let Some(b) = args.body {
        check_body(ports, caller, &b).await?;
        op.body = b;
    }
    if let Some(s) = args.args_schema {
        check_args_schema(&s)?;
        op.args_schema = s;
    }
    if let Some(a) = args.access {
        op.access = a;
    }
    if let Some(m) = args.mode {
        op.mode = m;
    }
    super::behaviors::shaped_by(&op.author, &mut op.changed_by, &caller.principal().id);
    op.updated_at = now_text(ports);
    let key = caller.keys().named("op", &op.name);
    super::replace(ports, &key, &old, &op).await?;
    Ok(op)
}

pub async fn delete(ports: &Ports, caller: &Caller, args: ByName) -> Result<Done> {
    let old = get(ports, caller, &args.name).await?;
    let key = caller.keys().named("op", &old.name);
    super::remove(ports, &key, &old).await?;
    Ok(Done { ok: true })
}

fn query_string(args: &Map<String, Value>) -> String {
    let mut out = String::new();
    for (k, v) in args {
        let text = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        out.push(if out.is_empty() { '?' } else { '&' });
        for (i, part) in [k.as_str(), text.as_str()].iter().enumerate() {
            if i == 1 {
                out.push('=');
            }
            for b in part.bytes() {
                if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                    out.push(b as char);
                } else {
                    out.push_str(&format!("%{b:02X}"));
                }
            }
        }
    }
    out
}

impl Operation {
    /// The principals who shaped it: its author, then each who changed it.
    pub fn shapers(&self) -> Vec<String> {
        let mut all = vec![self.author.clone()];
        all.extend(self.changed_by.iter().cloned());
        all
    }
}

/// Checks arguments against the operation's `args_schema`; the error names the field.
pub fn check_args(op: &Operation, args: &Value) -> Result<()> {
    let validator = lore_base::schema::compile(&op.args_schema)
        .map_err(|e| LoreError::Internal(format!("stored args_schema does not compile: {e}")))?;
    lore_base::schema::check(&validator, args, "args")
}

/// Calls an HTTP operation's connection with `args` (already valid): path parameters fill
/// the path, the rest go in the query (GET, DELETE) or the JSON body.
pub async fn call_http(
    ports: &Ports,
    caller: &Caller,
    connection: &str,
    method: &str,
    path: &str,
    args: &Map<String, Value>,
) -> Result<Value> {
    let filled = connections::fill_path(path, args)?;
    let mut rest = args.clone();
    rest.retain(|k, _| !path.contains(&format!("{{{k}}}")));
    let method = method.to_ascii_uppercase();
    let (path, body) = if method == "GET" || method == "DELETE" {
        let query = query_string(&rest);
        let query = if filled.contains('?') {
            query.replacen('?', "&", 1)
        } else {
            query
        };
        (format!("{filled}{query}"), None)
    } else {
        (filled, Some(Value::Object(rest)))
    };
    let result: CallResult = connections::call(
        ports,
        caller,
        CallConnection {
            name: connection.to_string(),
            method,
            path,
            body,
        },
    )
    .await?;
    Ok(serde_json::to_value(result)?)
}
