//! Nouns: every entity type of the org is also a typed SDK namespace (`$.Ticket`), with the
//! built-in verbs (`get`, `list`, `create`, `update`, `delete`, `link`) scoped to that type and
//! the operations bound to it as custom verbs (`$.Ticket.escalate(...)`).

use std::sync::OnceLock;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::spec::{Cx, Json, authorize, parse_args};
use super::tstype;
use lore_base::error::{LoreError, Result};
use lore_base::model::{Mode, Tier};
use lore_base::schema::schema_of;
use lore_records::entities::{
    self, CreateEntity, DeleteEntity, Entity, ListEntities, UpdateEntity,
};
use lore_records::operations::{self, Operation};
use lore_records::relationships::{self, LinkEntity};
use lore_records::types::{self, EntityType};

/// `Noun.get`
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NounGet {
    /// The entity id (`ent_…`).
    pub id: String,
}

/// `Noun.list`
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NounList {
    /// Only entities whose properties equal these values.
    #[serde(rename = "where")]
    pub filter: Option<Map<String, Value>>,
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<usize>,
    pub cursor: Option<String>,
}

/// `Noun.create`
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NounCreate {
    #[schemars(length(min = 1, max = 500))]
    pub name: String,
    #[serde(default)]
    pub properties: Map<String, Value>,
}

/// The built-in verbs: name, tier, description, argument schema, TypeScript arguments and
/// result (`N` stands for the Noun).
struct BuiltIn {
    verb: &'static str,
    tier: Tier,
    description: &'static str,
    schema: fn() -> Value,
    args_ts: &'static str,
    returns_ts: &'static str,
}

static BUILT_INS: &[BuiltIn] = &[
    BuiltIn {
        verb: "get",
        tier: Tier::Read,
        description: "Read one N by id.",
        schema: schema_of::<NounGet>,
        args_ts: "args: { id: string }",
        returns_ts: "N",
    },
    BuiltIn {
        verb: "list",
        tier: Tier::Read,
        description: "List N records, optionally where properties equal given values; paginated.",
        schema: schema_of::<NounList>,
        args_ts: "args?: { where?: Partial<N[\"properties\"]>; limit?: number; cursor?: string }",
        returns_ts: "Page<N>",
    },
    BuiltIn {
        verb: "create",
        tier: Tier::Write,
        description: "Create a N record; properties are validated against its schema.",
        schema: schema_of::<NounCreate>,
        args_ts: "args: { name: string; properties: N[\"properties\"] }",
        returns_ts: "N",
    },
    BuiltIn {
        verb: "update",
        tier: Tier::Write,
        description: "Update a N: rename it or merge property values; pass version to refuse a stale write.",
        schema: schema_of::<UpdateEntity>,
        args_ts: "args: { id: string; version?: number; name?: string; properties?: Partial<N[\"properties\"]>; replace?: boolean }",
        returns_ts: "N",
    },
    BuiltIn {
        verb: "delete",
        tier: Tier::Write,
        description: "Delete a N and its relationships.",
        schema: schema_of::<DeleteEntity>,
        args_ts: "args: { id: string; version?: number }",
        returns_ts: "Done",
    },
    BuiltIn {
        verb: "link",
        tier: Tier::Write,
        description: "Link a N to another entity with a typed relationship.",
        schema: schema_of::<LinkEntity>,
        args_ts: "args: { id: string; to: string; type: string; properties?: Record<string, unknown> }",
        returns_ts: "Relationship",
    },
];

fn built_in_validator(index: usize) -> &'static jsonschema::Validator {
    static VALIDATORS: OnceLock<Vec<jsonschema::Validator>> = OnceLock::new();
    &VALIDATORS.get_or_init(|| {
        BUILT_INS
            .iter()
            .map(|b| lore_base::schema::compile(&(b.schema)()).expect("noun verb schemas compile"))
            .collect()
    })[index]
}

/// The JSON Schema of a built-in verb's arguments; `None` for a custom verb.
pub fn built_in_schema(verb: &str) -> Option<Value> {
    BUILT_INS
        .iter()
        .find(|b| b.verb == verb)
        .map(|b| (b.schema)())
}

/// One verb of one Noun, as listings show it.
#[derive(Debug, Clone)]
pub struct NounMethod {
    pub noun: String,
    pub verb: String,
    pub description: String,
    pub tier: Tier,
    pub mode: Mode,
    /// The TypeScript parameter list, e.g. `args: { id: string }`.
    pub args_ts: String,
    /// The TypeScript result type.
    pub returns_ts: String,
    /// An HTTP operation: calling it reaches outside lore.
    pub external: bool,
}

impl NounMethod {
    pub fn path(&self) -> String {
        format!("{}.{}", self.noun, self.verb)
    }
}

/// The verbs of one type: built-ins, then the operations bound to it.
pub fn verbs(ty: &EntityType, ops: &[Operation]) -> Vec<NounMethod> {
    let mut out: Vec<NounMethod> = BUILT_INS
        .iter()
        .map(|b| NounMethod {
            noun: ty.noun.clone(),
            verb: b.verb.into(),
            description: b.description.replace(" N", &format!(" {}", ty.noun)),
            tier: b.tier,
            mode: Mode::Try,
            args_ts: b.args_ts.replace("N[", &format!("{}[", ty.noun)),
            returns_ts: match b.returns_ts {
                "N" => ty.noun.clone(),
                "Page<N>" => format!("Page<{}>", ty.noun),
                other => other.to_string(),
            },
            external: false,
        })
        .collect();
    for op in ops
        .iter()
        .filter(|o| o.entity_type.as_deref() == Some(ty.name.as_str()))
    {
        let required = op
            .args_schema
            .get("required")
            .and_then(Value::as_array)
            .is_some_and(|r| !r.is_empty());
        out.push(NounMethod {
            noun: ty.noun.clone(),
            verb: op.name.clone(),
            description: if op.description.is_empty() {
                format!("Custom verb of {} (operation {}).", ty.noun, op.name)
            } else {
                op.description.clone()
            },
            tier: op.access,
            mode: op.mode,
            args_ts: format!(
                "args{}: {}",
                if required { "" } else { "?" },
                tstype::ts_type(&op.args_schema, 2)
            ),
            returns_ts: match op.body {
                operations::OperationBody::Http { .. } => "CallResult".into(),
                operations::OperationBody::Script { .. } => "unknown".into(),
            },
            external: matches!(op.body, operations::OperationBody::Http { .. }),
        });
    }
    out
}

/// Every Noun method of the caller's org.
pub async fn catalog(cx: &Cx<'_>) -> Result<(Vec<EntityType>, Vec<NounMethod>)> {
    let ports = &cx.engine.ports;
    let tys = types::list(ports, cx.caller).await?;
    if tys.is_empty() {
        return Ok((tys, Vec::new()));
    }
    let ops = operations::list(ports, cx.caller).await?;
    let methods = tys.iter().flat_map(|t| verbs(t, &ops)).collect();
    Ok((tys, methods))
}

/// Validates a Noun verb's arguments without running it (dry runs, queued calls): a built-in
/// verb's against its schema, an operation's against its `args_schema`.
pub async fn check_args(cx: &Cx<'_>, path: &str, args: &Value) -> Result<()> {
    let (noun, verb) = path.split_once('.').unwrap_or((path, ""));
    if let Some(index) = BUILT_INS.iter().position(|b| b.verb == verb) {
        return lore_base::schema::check(built_in_validator(index), args, "");
    }
    let tys = types::list(&cx.engine.ports, cx.caller).await?;
    let ty = tys
        .iter()
        .find(|t| t.noun == noun)
        .ok_or_else(|| LoreError::not_found(format!("SDK namespace {noun:?}")))?;
    let op = operations::list(&cx.engine.ports, cx.caller)
        .await?
        .into_iter()
        .find(|o| o.name == verb && o.entity_type.as_deref() == Some(ty.name.as_str()))
        .ok_or_else(|| LoreError::not_found(format!("verb {verb:?} of {noun}")))?;
    operations::check_args(&op, args)
}

/// Checks that an entity belongs to the Noun's type; others are "not found" through it.
async fn of_type(cx: &Cx<'_>, ty: &EntityType, id: &str) -> Result<Entity> {
    let entity = entities::get(&cx.engine.ports, cx.caller, id).await?;
    if entity.type_name != ty.name {
        return Err(LoreError::not_found(format!("{} {id}", ty.noun)));
    }
    Ok(entity)
}

/// Dispatches `Noun.verb`.
pub async fn call(cx: &Cx<'_>, path: &str, args: Value) -> Result<Json> {
    let (noun, verb) = path.split_once('.').unwrap_or((path, ""));
    let ports = &cx.engine.ports;
    let tys = types::list(ports, cx.caller).await?;
    let Some(ty) = tys.into_iter().find(|t| t.noun == noun) else {
        return Err(LoreError::not_found(format!(
            "SDK namespace {noun:?}: no entity type has that Noun (list them with templates.list)"
        )));
    };
    if let Some(index) = BUILT_INS.iter().position(|b| b.verb == verb) {
        let b = &BUILT_INS[index];
        authorize(cx.engine, cx.caller, b.tier, cx.allowed, path)?;
        lore_base::schema::check(built_in_validator(index), &args, "")?;
        let ps = ports;
        let caller = cx.caller;
        let out = match verb {
            "get" => {
                let a: NounGet = parse_args(args)?;
                serde_json::value::to_raw_value(&of_type(cx, &ty, &a.id).await?)?
            }
            "list" => {
                let a: NounList = parse_args(args)?;
                let list = ListEntities {
                    type_name: Some(ty.name.clone()),
                    filter: a.filter,
                    limit: a.limit,
                    cursor: a.cursor,
                    newest_first: false,
                };
                serde_json::value::to_raw_value(&entities::list(ps, caller, list).await?)?
            }
            "create" => {
                let a: NounCreate = parse_args(args)?;
                let create = CreateEntity {
                    type_name: ty.name.clone(),
                    name: a.name,
                    properties: a.properties,
                };
                serde_json::value::to_raw_value(
                    &entities::create(
                        ps,
                        &*cx.engine.sql_cache,
                        &cx.engine.schemas,
                        caller,
                        create,
                    )
                    .await?,
                )?
            }
            "update" => {
                let a: UpdateEntity = parse_args(args)?;
                of_type(cx, &ty, &a.id).await?;
                serde_json::value::to_raw_value(
                    &entities::update(ps, &*cx.engine.sql_cache, &cx.engine.schemas, caller, a)
                        .await?,
                )?
            }
            "delete" => {
                let a: DeleteEntity = parse_args(args)?;
                of_type(cx, &ty, &a.id).await?;
                serde_json::value::to_raw_value(
                    &lore_records::relationships::delete_entity(
                        ps,
                        &*cx.engine.sql_cache,
                        caller,
                        a,
                    )
                    .await?,
                )?
            }
            _ => {
                let a: LinkEntity = parse_args(args)?;
                of_type(cx, &ty, &a.id).await?;
                serde_json::value::to_raw_value(
                    &relationships::link(ps, &*cx.engine.sql_cache, caller, a).await?,
                )?
            }
        };
        return Ok(out);
    }
    let op = operations::list(ports, cx.caller)
        .await?
        .into_iter()
        .find(|o| o.name == verb && o.entity_type.as_deref() == Some(ty.name.as_str()))
        .ok_or_else(|| {
            LoreError::not_found(format!(
                "verb {verb:?} of {noun} (built-ins: get, list, create, update, delete, link; custom verbs are operations bound to the type)"
            ))
        })?;
    authorize(cx.engine, cx.caller, op.access, cx.allowed, path)?;
    let args = match args {
        Value::Object(map) => map,
        _ => {
            return Err(LoreError::invalid(
                "arguments",
                "give the arguments as an object",
            ));
        }
    };
    Ok(serde_json::value::to_raw_value(
        &super::invoke::run(cx.engine, cx.caller, &op, args, cx.allowed).await?,
    )?)
}
