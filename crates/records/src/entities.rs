//! Entities: typed records with properties validated against their type's schema, and an
//! optimistic `version`. Each entity is stored twice in one batch, by id and under its type, so
//! a typed list is one ordered scan.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::types::{self, EntityType, SchemaCache};
use super::{
    DEFAULT_PAGE, MAX_PAGE, Page, RecordsCopies, Stored, check_cursor, now_text, to_bytes,
};
use lore_base::error::{LoreError, Result};
use lore_base::ids::{new_ulid, parse_record_id};
use lore_base::ports::Ports;
use lore_base::storage::{Batch, StorageError};
use lore_directory::Caller;

/// Largest `properties` object, serialized.
pub const MAX_PROPERTIES_BYTES: usize = 64 * 1024;
/// Entities a filtered list reads at most per call before it returns what it found.
const FILTER_SCAN_BUDGET: usize = 5_000;

/// A record of an entity type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Entity {
    /// `ent_…`
    pub id: String,
    /// The entity type's name.
    #[serde(rename = "type")]
    pub type_name: String,
    pub name: String,
    /// Validated against the type's schema on every write.
    pub properties: Map<String, Value>,
    /// Principal id of the creator.
    pub author: String,
    /// Starts at 1 and goes up by one on every update; pass it back to update safely.
    pub version: u64,
    pub created_at: String,
    pub updated_at: String,
}

/// `entities.get`
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetEntity {
    /// The entity id (`ent_…`).
    pub id: String,
}

/// `entities.get_many`
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetEntities {
    /// Entity ids (`ent_…`).
    #[schemars(length(min = 1, max = MAX_GET_MANY))]
    pub ids: Vec<String>,
}

/// The most ids one `entities.get_many` reads.
pub const MAX_GET_MANY: usize = 100;

/// `entities.list`
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListEntities {
    /// Only entities of this type.
    #[serde(rename = "type")]
    pub type_name: Option<String>,
    /// Only entities whose properties equal these values (top-level keys).
    #[serde(rename = "where")]
    pub filter: Option<Map<String, Value>>,
    /// Page size, 1-500 (default 50).
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<usize>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// Newest first (the cursor then continues toward older entities).
    #[serde(default)]
    pub newest_first: bool,
}

/// `entities.create`
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateEntity {
    /// The entity type's name, e.g. `ticket`.
    #[serde(rename = "type")]
    pub type_name: String,
    /// A short human title.
    #[schemars(length(min = 1, max = 500))]
    pub name: String,
    /// Properties, valid against the type's schema.
    #[serde(default)]
    pub properties: Map<String, Value>,
}

/// One item of `entities.create_many`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewEntity {
    #[schemars(length(min = 1, max = 500))]
    pub name: String,
    #[serde(default)]
    pub properties: Map<String, Value>,
}

/// `entities.create_many`: up to 500 entities of one type, all or none.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateEntities {
    #[serde(rename = "type")]
    pub type_name: String,
    #[schemars(length(min = 1, max = 500))]
    pub items: Vec<NewEntity>,
}

/// `entities.update`: `properties` is merged into the stored ones (a key set to null is
/// removed) unless `replace` is true.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateEntity {
    pub id: String,
    /// The version you read; the update fails with `conflict` if the entity changed since.
    pub version: Option<u64>,
    #[schemars(length(min = 1, max = 500))]
    pub name: Option<String>,
    pub properties: Option<Map<String, Value>>,
    /// Replace the properties instead of merging.
    #[serde(default)]
    pub replace: bool,
}

/// `entities.delete`: removes the entity and its relationships.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteEntity {
    pub id: String,
    /// Delete only if the entity is still at this version.
    pub version: Option<u64>,
}

/// The bounds every stored `properties` object keeps (entities and relationships): its size
/// serialized and its nesting ([`lore_base::schema::MAX_STORED_DEPTH`]).
pub(super) fn check_size(properties: &Map<String, Value>, field: &str) -> Result<()> {
    let size = serde_json::to_vec(properties).map_or(0, |v| v.len());
    if size > MAX_PROPERTIES_BYTES {
        return Err(LoreError::invalid(
            field,
            format!("properties are {size} bytes serialized; the limit is {MAX_PROPERTIES_BYTES}"),
        ));
    }
    lore_base::schema::check_stored_properties(properties, field)
}

async fn entity_type(ports: &Ports, caller: &Caller, name: &str) -> Result<EntityType> {
    types::get(ports, caller, name).await.map_err(|e| match e {
        LoreError::NotFound { .. } | LoreError::InvalidArgument { .. } => LoreError::invalid(
            "type",
            format!(
                "there is no entity type {name:?} in org {}; list them with templates.list",
                caller.org()
            ),
        ),
        other => other,
    })
}

/// Reads an entity by id.
pub async fn get(ports: &Ports, caller: &Caller, id: &str) -> Result<Entity> {
    let ulid = parse_record_id(id, "ent", "id")?;
    ports
        .record(&caller.keys().entity(ulid))
        .await?
        .ok_or_else(|| LoreError::not_found(format!("entity {id} in org {}", caller.org())))
}

/// The entities of `ids` that exist, in the order asked (each once), read in one storage
/// round trip and passed through as stored.
pub async fn get_many(
    ports: &Ports,
    caller: &Caller,
    ids: &[String],
) -> Result<Vec<Stored<Entity>>> {
    if ids.is_empty() || ids.len() > MAX_GET_MANY {
        return Err(LoreError::invalid(
            "ids",
            format!("give 1 to {MAX_GET_MANY} entity ids"),
        ));
    }
    let mut keys: Vec<String> = Vec::with_capacity(ids.len());
    for (i, id) in ids.iter().enumerate() {
        let key = caller
            .keys()
            .entity(parse_record_id(id, "ent", &format!("ids/{i}"))?);
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    let mut out = Vec::with_capacity(keys.len());
    for bytes in ports.storage.get_many(&keys).await?.into_iter().flatten() {
        out.push(serde_json::from_slice(&bytes)?);
    }
    Ok(out)
}

/// Lists entities as stored: pages go out without being decoded (filters decode to compare).
pub async fn list(
    ports: &Ports,
    caller: &Caller,
    args: ListEntities,
) -> Result<Page<Stored<Entity>>> {
    let keys = caller.keys();
    let prefix = match &args.type_name {
        Some(t) => {
            entity_type(ports, caller, t).await?;
            keys.entities_of_type(t)
        }
        None => keys.entities(),
    };
    let limit = args.limit.unwrap_or(DEFAULT_PAGE).clamp(1, MAX_PAGE);
    let Some(filter) = args.filter.filter(|f| !f.is_empty()) else {
        return super::page_in(
            ports,
            &prefix,
            args.cursor.as_deref(),
            limit,
            args.newest_first,
        )
        .await;
    };
    check_cursor(args.cursor.as_deref())?;
    let mut after = args.cursor.map(|c| format!("{prefix}{c}"));
    let mut items = Vec::new();
    let mut scanned = 0;
    loop {
        let page = if args.newest_first {
            ports
                .storage
                .scan_back(&prefix, after.as_deref(), 500)
                .await?
        } else {
            ports.storage.scan(&prefix, after.as_deref(), 500).await?
        };
        for (key, bytes) in &page.entries {
            scanned += 1;
            after = Some(key.clone());
            let stored: Stored<Entity> = serde_json::from_slice(bytes)?;
            let entity = stored.parse()?;
            if filter
                .iter()
                .all(|(k, v)| entity.properties.get(k) == Some(v))
            {
                items.push(stored);
            }
            if items.len() == limit || scanned == FILTER_SCAN_BUDGET {
                let next_cursor = after.as_deref().map(|k| k[prefix.len()..].to_string());
                return Ok(Page { items, next_cursor });
            }
        }
        if page.cursor.is_none() {
            return Ok(Page {
                items,
                next_cursor: None,
            });
        }
    }
}

fn new_entity(
    ports: &Ports,
    caller: &Caller,
    ty: &EntityType,
    name: String,
    properties: Map<String, Value>,
) -> Entity {
    let now = now_text(ports);
    Entity {
        id: format!("ent_{}", new_ulid(ports)),
        type_name: ty.name.clone(),
        name,
        properties,
        author: caller.principal().id.clone(),
        version: 1,
        created_at: now.clone(),
        updated_at: now,
    }
}

fn put_entity(batch: &mut Batch, caller: &Caller, entity: &Entity) {
    let ulid = &entity.id[4..];
    let bytes = to_bytes(entity);
    let keys = caller.keys();
    batch.put(keys.entity_by_type(&entity.type_name, ulid), bytes.clone());
    batch.put(keys.entity(ulid), bytes);
}

pub async fn create(
    ports: &Ports,
    copies: &dyn RecordsCopies,
    schemas: &SchemaCache,
    caller: &Caller,
    args: CreateEntity,
) -> Result<Entity> {
    let ty = entity_type(ports, caller, &args.type_name).await?;
    check_size(&args.properties, "properties")?;
    schemas.check(caller.org(), &ty, &Value::Object(args.properties.clone()))?;
    let entity = new_entity(ports, caller, &ty, args.name, args.properties);
    let mut batch = Batch::new();
    batch.require_absent(caller.keys().entity(&entity.id[4..]));
    put_entity(&mut batch, caller, &entity);
    super::commit_records(ports, caller, copies, batch, &entity.id).await?;
    Ok(entity)
}

pub async fn create_many(
    ports: &Ports,
    copies: &dyn RecordsCopies,
    schemas: &SchemaCache,
    caller: &Caller,
    args: CreateEntities,
) -> Result<Page<Entity>> {
    let ty = entity_type(ports, caller, &args.type_name).await?;
    let mut batch = Batch::new();
    let mut items = Vec::with_capacity(args.items.len());
    for (i, item) in args.items.into_iter().enumerate() {
        check_size(&item.properties, &format!("items/{i}/properties"))?;
        let properties = Value::Object(item.properties);
        schemas
            .check(caller.org(), &ty, &properties)
            .map_err(|e| match e {
                LoreError::InvalidArgument { field, message } => {
                    LoreError::invalid(format!("items/{i}/{field}"), message)
                }
                other => other,
            })?;
        let Value::Object(properties) = properties else {
            unreachable!("built from an object")
        };
        let entity = new_entity(ports, caller, &ty, item.name, properties);
        batch.require_absent(caller.keys().entity(&entity.id[4..]));
        put_entity(&mut batch, caller, &entity);
        items.push(entity);
    }
    if let Some(last) = items.last() {
        super::commit_records(ports, caller, copies, batch, &last.id).await?;
    }
    Ok(Page {
        items,
        next_cursor: None,
    })
}

/// JSON merge patch (RFC 7396) of one level of properties: null removes a key.
fn merge(base: &mut Map<String, Value>, patch: Map<String, Value>) {
    for (k, v) in patch {
        if v.is_null() {
            base.remove(&k);
        } else {
            base.insert(k, v);
        }
    }
}

pub(super) fn stale(id: &str, have: u64, want: u64) -> LoreError {
    LoreError::Conflict(format!(
        "entity {id} is at version {have}, not {want}: it changed since you read it; read it again"
    ))
}

pub async fn update(
    ports: &Ports,
    copies: &dyn RecordsCopies,
    schemas: &SchemaCache,
    caller: &Caller,
    args: UpdateEntity,
) -> Result<Entity> {
    let old = get(ports, caller, &args.id).await?;
    if let Some(v) = args.version
        && v != old.version
    {
        return Err(stale(&old.id, old.version, v));
    }
    let mut entity = old.clone();
    if let Some(name) = args.name {
        entity.name = name;
    }
    if let Some(patch) = args.properties {
        if args.replace {
            entity.properties = patch;
        } else {
            merge(&mut entity.properties, patch);
        }
    }
    check_size(&entity.properties, "properties")?;
    let ty = entity_type(ports, caller, &entity.type_name).await?;
    schemas.check(caller.org(), &ty, &Value::Object(entity.properties.clone()))?;
    entity.version += 1;
    entity.updated_at = now_text(ports);
    let mut batch = Batch::new();
    batch.require_equals(caller.keys().entity(&old.id[4..]), to_bytes(&old));
    put_entity(&mut batch, caller, &entity);
    let what = format!("{}.{}", entity.id, entity.version);
    match super::commit_records(ports, caller, copies, batch, &what).await {
        Ok(()) => Ok(entity),
        // Someone else wrote between our read and our commit.
        Err(StorageError::Conflict { .. }) => Err(stale(&old.id, old.version + 1, old.version)),
        Err(e) => Err(e.into()),
    }
}
