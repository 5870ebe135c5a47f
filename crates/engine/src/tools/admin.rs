//! What the admin tools (not on `tools/list`: `manage_*`, `query_metric`, `list_metrics`,
//! `list_organizations`) run. Each is a view of registry methods: a `manage_*` tool takes
//! `{action, ...}` and runs `{namespace}.{action}`; the others are one method. Their JSON
//! Schemas are generated from the methods', so the REST surface, the SDK namespaces and the
//! CLI cannot drift apart.

use serde_json::{Map, Value, json};

use crate::instance::Engine;
use crate::sdk::call;
use crate::sdk::methods::METHODS;
use crate::sdk::spec::Json;
use lore_base::error::{LoreError, Result};
use lore_base::model::Tier;
use lore_directory::Caller;

/// What an admin tool runs.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    /// `{action, ...args}` → `{namespace}.{action}`.
    Namespace(&'static str),
    /// One method path.
    Method(&'static str),
}

impl Target {
    /// The input JSON Schema: the method's, or one branch per action.
    pub fn input_schema(&self) -> Value {
        match *self {
            Target::Method(path) => {
                let m = METHODS
                    .iter()
                    .find(|m| m.is(path))
                    .expect("admin tool targets exist");
                (m.args)()
            }
            Target::Namespace(ns) => {
                let branches: Vec<Value> = METHODS
                    .iter()
                    .filter(|m| m.namespace == ns)
                    .map(|m| {
                        let mut schema = (m.args)();
                        let obj = schema.as_object_mut().expect("method schemas are objects");
                        let mut props = Map::new();
                        props.insert(
                            "action".into(),
                            json!({"const": m.name, "description": m.description}),
                        );
                        if let Some(Value::Object(p)) = obj.remove("properties") {
                            props.extend(p);
                        }
                        obj.insert("properties".into(), Value::Object(props));
                        let mut required = vec![json!("action")];
                        if let Some(Value::Array(r)) = obj.remove("required") {
                            required.extend(r);
                        }
                        obj.insert("required".into(), Value::Array(required));
                        obj.insert("type".into(), json!("object"));
                        schema
                    })
                    .collect();
                json!({ "type": "object", "oneOf": branches })
            }
        }
    }

    /// The actions of a `manage_*` tool.
    pub fn actions(&self) -> Vec<&'static str> {
        match *self {
            Target::Namespace(ns) => METHODS
                .iter()
                .filter(|m| m.namespace == ns)
                .map(|m| m.name)
                .collect(),
            Target::Method(_) => Vec::new(),
        }
    }

    /// Runs the tool: picks the method, then dispatches it with every check of [`call`].
    pub async fn run(
        &self,
        tool: &str,
        engine: &Engine,
        caller: &Caller,
        args: Value,
    ) -> Result<Json> {
        match *self {
            Target::Method(path) => call(engine, caller, path, args, Tier::Admin).await,
            Target::Namespace(ns) => {
                let mut args = match args {
                    Value::Object(map) => map,
                    Value::Null => Map::new(),
                    _ => {
                        return Err(LoreError::invalid(
                            "arguments",
                            "give an object: {\"action\": ..., ...}",
                        ));
                    }
                };
                let actions = self.actions();
                let action = match args.remove("action") {
                    Some(Value::String(a)) if actions.contains(&a.as_str()) => a,
                    Some(other) => {
                        return Err(LoreError::invalid(
                            "action",
                            format!(
                                "{other} is not an action of {}; use one of {}",
                                tool,
                                actions.join(", ")
                            ),
                        ));
                    }
                    None => {
                        return Err(LoreError::invalid(
                            "action",
                            format!("{tool} needs an action: {}", actions.join(", ")),
                        ));
                    }
                };
                call(
                    engine,
                    caller,
                    &format!("{ns}.{action}"),
                    Value::Object(args),
                    Tier::Admin,
                )
                .await
            }
        }
    }
}
