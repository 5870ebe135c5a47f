//! The admin tools (not on `tools/list`): `manage_*`, `query_metric`, `list_metrics`,
//! `list_organizations`. Each is a view of registry methods: a `manage_*` tool takes
//! `{action, ...}` and runs `{namespace}.{action}`; the others are one method. Their JSON
//! Schemas are generated from the methods', so the REST surface, the SDK namespaces and the
//! CLI cannot drift apart.

use serde_json::{Map, Value, json};

use super::methods::METHODS;
use super::{Tier, call};
use crate::Lore;
use crate::auth::Caller;
use crate::error::{LoreError, Result};

/// What an admin tool runs.
pub enum Target {
    /// `{action, ...args}` → `{namespace}.{action}`.
    Namespace(&'static str),
    /// One method path.
    Method(&'static str),
}

pub struct AdminTool {
    pub name: &'static str,
    pub description: &'static str,
    pub target: Target,
}

/// Every admin tool, reachable as `POST /api/{org}/{name}` and by `lore memory run`.
pub static ADMIN_TOOLS: &[AdminTool] = &[
    AdminTool {
        name: "manage_agents",
        description: "Register, list, read and remove the org's agents.",
        target: Target::Namespace("agents"),
    },
    AdminTool {
        name: "manage_connections",
        description: "Manage connections to external HTTP services (credentials are write-only) and call them.",
        target: Target::Namespace("connections"),
    },
    AdminTool {
        name: "manage_feeds",
        description: "Manage feeds: webhooks, connection feeds (pull) and virtual feeds (read live).",
        target: Target::Namespace("feeds"),
    },
    AdminTool {
        name: "manage_operations",
        description: "Manage operations (named Verbs) and run them.",
        target: Target::Namespace("operations"),
    },
    AdminTool {
        name: "manage_behaviors",
        description: "Manage behaviors: triggers with reaction scripts.",
        target: Target::Namespace("behaviors"),
    },
    AdminTool {
        name: "manage_templates",
        description: "Manage entity types (templates, Nouns) and their property schemas.",
        target: Target::Namespace("templates"),
    },
    AdminTool {
        name: "manage_members",
        description: "List members, invite principals, change roles, remove members.",
        target: Target::Namespace("members"),
    },
    AdminTool {
        name: "manage_tokens",
        description: "List, issue and revoke API tokens.",
        target: Target::Namespace("tokens"),
    },
    AdminTool {
        name: "query_metric",
        description: "Evaluate a metric over a day range, in total or grouped by tool or day.",
        target: Target::Method("metrics.query"),
    },
    AdminTool {
        name: "list_metrics",
        description: "List built-in and org-defined metrics.",
        target: Target::Method("metrics.list"),
    },
    AdminTool {
        name: "list_organizations",
        description: "List the organizations you belong to.",
        target: Target::Method("organizations.list"),
    },
];

pub fn find(name: &str) -> Option<&'static AdminTool> {
    ADMIN_TOOLS.iter().find(|t| t.name == name)
}

impl AdminTool {
    /// The input JSON Schema: the method's, or one branch per action.
    pub fn input_schema(&self) -> Value {
        match self.target {
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
        match self.target {
            Target::Namespace(ns) => METHODS
                .iter()
                .filter(|m| m.namespace == ns)
                .map(|m| m.name)
                .collect(),
            Target::Method(_) => Vec::new(),
        }
    }

    /// Runs the tool: picks the method, then dispatches it with every check of [`call`].
    pub async fn run(&self, lore: &Lore, caller: &Caller, args: Value) -> Result<super::Json> {
        match self.target {
            Target::Method(path) => call(lore, caller, path, args, Tier::Admin).await,
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
                                self.name,
                                actions.join(", ")
                            ),
                        ));
                    }
                    None => {
                        return Err(LoreError::invalid(
                            "action",
                            format!("{} needs an action: {}", self.name, actions.join(", ")),
                        ));
                    }
                };
                call(
                    lore,
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
