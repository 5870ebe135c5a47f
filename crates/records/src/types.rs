//! Entity types (templates, the compact profile's *Nouns*): a name, a description and a JSON
//! Schema that every entity's properties are validated against on every write.

use std::cell::RefCell;
use std::num::NonZeroUsize;
use std::rc::Rc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{ByName, check_name, now_text, require, to_bytes};
use lore_base::error::{LoreError, Result};
use lore_base::ids::OrgId;
use lore_base::ports::Ports;
use lore_base::storage::Batch;
use lore_directory::Caller;

/// Largest properties schema, serialized.
const MAX_SCHEMA_BYTES: usize = 64 * 1024;

/// An entity type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EntityType {
    /// Lowercase name, e.g. `ticket`; entities carry it as their `type`.
    pub name: String,
    /// The typed SDK namespace for this type, e.g. `Ticket` (`$.Ticket.list()`).
    pub noun: String,
    pub description: String,
    /// JSON Schema of the entities' `properties`.
    pub schema: Value,
    /// Bumped on every update.
    pub version: u64,
    pub created_at: String,
    pub updated_at: String,
}

/// The Noun of a type name: `support_case` → `SupportCase`.
pub fn noun_of(name: &str) -> String {
    name.split(['_', '-'])
        .filter(|p| !p.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect()
}

/// `templates.create`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateType {
    /// Lowercase name, e.g. `ticket` or `support_case`.
    pub name: String,
    /// What these records are, for people and agents.
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the properties (an object schema). Default: any object.
    #[serde(default)]
    pub schema: Option<Value>,
}

/// `templates.update`: only the fields given change. Existing entities are not re-validated;
/// their next write is.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateType {
    pub name: String,
    pub description: Option<String>,
    pub schema: Option<Value>,
    /// The version you read; the update fails with `conflict` if it changed since.
    pub version: Option<u64>,
}

fn check_schema(schema: &Value) -> Result<()> {
    if schema.to_string().len() > MAX_SCHEMA_BYTES {
        return Err(LoreError::invalid(
            "schema",
            format!("the schema is larger than {} KiB", MAX_SCHEMA_BYTES / 1024),
        ));
    }
    if !schema.is_object() {
        return Err(LoreError::invalid(
            "schema",
            "give a JSON Schema object, e.g. {\"type\":\"object\",\"properties\":{...}}",
        ));
    }
    lore_base::schema::check_stored_depth(schema, "schema")?;
    if let Some(t) = schema.get("type")
        && t != "object"
    {
        return Err(LoreError::invalid(
            "schema/type",
            "entity properties are an object: the schema's type must be \"object\"",
        ));
    }
    lore_base::schema::compile(schema)
        .map(|_| ())
        .map_err(|e| LoreError::invalid("schema", format!("not a valid JSON Schema: {e}")))
}

pub async fn get(ports: &Ports, caller: &Caller, name: &str) -> Result<EntityType> {
    check_name("name", name)?;
    require(
        ports,
        &caller.keys().entity_type(name),
        format!("entity type {name:?} in org {}", caller.org()),
    )
    .await
}

pub async fn list(ports: &Ports, caller: &Caller) -> Result<Vec<EntityType>> {
    super::all(ports, &caller.keys().entity_types()).await
}

/// Creates an entity type; `reserved` says which Noun names the SDK's declarations already use
/// (the SDK's rule, given by the dispatcher).
pub async fn create(
    ports: &Ports,
    caller: &Caller,
    args: CreateType,
    reserved: fn(&str) -> bool,
) -> Result<EntityType> {
    check_name("name", &args.name)?;
    let schema = args.schema.unwrap_or_else(|| json!({"type": "object"}));
    check_schema(&schema)?;
    let noun = noun_of(&args.name);
    if reserved(&noun) {
        return Err(LoreError::invalid(
            "name",
            format!(
                "{:?} would make the Noun {noun}, a name the SDK declarations already use; pick another name",
                args.name
            ),
        ));
    }
    let existing = list(ports, caller).await?;
    if let Some(other) = existing.iter().find(|t| t.noun == noun) {
        return Err(LoreError::Conflict(format!(
            "entity type {:?} already exists (Noun {noun}); update it or pick another name",
            other.name
        )));
    }
    let now = now_text(ports);
    let record = EntityType {
        name: args.name,
        noun,
        description: args.description,
        schema,
        version: 1,
        created_at: now.clone(),
        updated_at: now,
    };
    let key = caller.keys().entity_type(&record.name);
    let mut batch = Batch::new();
    batch.require_absent(&key).put(&key, to_bytes(&record));
    super::commit_new(ports, batch, || format!("entity type {:?}", record.name)).await?;
    Ok(record)
}

pub async fn update(ports: &Ports, caller: &Caller, args: UpdateType) -> Result<EntityType> {
    let old = get(ports, caller, &args.name).await?;
    if let Some(v) = args.version
        && v != old.version
    {
        return Err(LoreError::Conflict(format!(
            "entity type {:?} is at version {}, not {v}; read it again",
            old.name, old.version
        )));
    }
    let mut record = old.clone();
    if let Some(d) = args.description {
        record.description = d;
    }
    if let Some(s) = args.schema {
        check_schema(&s)?;
        record.schema = s;
    }
    record.version += 1;
    record.updated_at = now_text(ports);
    let key = caller.keys().entity_type(&record.name);
    super::replace(ports, &key, &old, &record).await?;
    Ok(record)
}

/// Deletes a type that no entity uses.
pub async fn delete(ports: &Ports, caller: &Caller, args: ByName) -> Result<super::Done> {
    let record = get(ports, caller, &args.name).await?;
    let keys = caller.keys();
    let used = ports
        .storage
        .scan(&keys.entities_of_type(&record.name), None, 1)
        .await?;
    if !used.entries.is_empty() {
        return Err(LoreError::Conflict(format!(
            "entity type {:?} still has entities; delete them first",
            record.name
        )));
    }
    let key = keys.entity_type(&record.name);
    super::remove(ports, &key, &record).await?;
    Ok(super::Done { ok: true })
}

/// Compiled property schemas, keyed by org, type and version, least recently used evicted.
pub struct SchemaCache {
    compiled: RefCell<lru::LruCache<(OrgId, String, u64), Rc<jsonschema::Validator>>>,
}

impl Default for SchemaCache {
    fn default() -> Self {
        Self {
            compiled: RefCell::new(lru::LruCache::new(
                NonZeroUsize::new(1024).expect("nonzero"),
            )),
        }
    }
}

impl SchemaCache {
    /// Validates `properties` against the type's schema; the error's field is the JSON pointer
    /// under `properties`.
    pub fn check(&self, org: &OrgId, ty: &EntityType, properties: &Value) -> Result<()> {
        let key = (org.clone(), ty.name.clone(), ty.version);
        let cached = self.compiled.borrow_mut().get(&key).cloned();
        let validator = match cached {
            Some(v) => v,
            None => {
                let v = Rc::new(lore_base::schema::compile(&ty.schema).map_err(|e| {
                    LoreError::Internal(format!(
                        "stored schema of {} does not compile: {e}",
                        ty.name
                    ))
                })?);
                self.compiled.borrow_mut().put(key, v.clone());
                v
            }
        };
        lore_base::schema::check(&validator, properties, "properties")
    }
}
