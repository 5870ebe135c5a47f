//! Relationships: typed, directed edges between two entities of the org, with properties.
//! Each is stored by id and under both ends, in one batch, so either side lists in one scan.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::entities::{self, DeleteEntity};
use super::{
    DEFAULT_PAGE, MAX_PAGE, Page, RecordsCopies, check_cursor, check_name, now_text, to_bytes,
};
use lore_base::error::{LoreError, Result};
use lore_base::ids::{new_ulid, parse_record_id};
use lore_base::ports::Ports;
use lore_base::storage::{Batch, StorageError};
use lore_directory::Caller;

/// An edge `from` → `to`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Relationship {
    /// `rel_…`
    pub id: String,
    /// What the edge means, e.g. `blocks`, `owned_by`.
    #[serde(rename = "type")]
    pub type_name: String,
    /// Source entity id.
    pub from: String,
    /// Target entity id.
    pub to: String,
    pub properties: Map<String, Value>,
    pub author: String,
    pub created_at: String,
}

/// `relationships.create`
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateRelationship {
    /// What the edge means, e.g. `blocks` (a name: a-z, 0-9, `_`, `-`).
    #[serde(rename = "type")]
    pub type_name: String,
    /// Source entity id.
    pub from: String,
    /// Target entity id.
    pub to: String,
    #[serde(default)]
    pub properties: Map<String, Value>,
}

/// `entities.link` and every Noun's `link`: an edge from `id` to `to`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LinkEntity {
    /// Source entity id.
    pub id: String,
    /// Target entity id.
    pub to: String,
    /// What the edge means, e.g. `blocks`.
    #[serde(rename = "type")]
    pub type_name: String,
    #[serde(default)]
    pub properties: Map<String, Value>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Edges leaving the entity.
    Out,
    /// Edges arriving at the entity.
    In,
    /// Both (out first, then in).
    #[default]
    Both,
}

/// `relationships.list`
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListRelationships {
    /// Only edges touching this entity.
    pub entity_id: Option<String>,
    /// With `entity_id`: which edges (default both).
    #[serde(default)]
    pub direction: Direction,
    /// Only edges of this type.
    #[serde(rename = "type")]
    pub type_name: Option<String>,
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<usize>,
    pub cursor: Option<String>,
}

pub async fn get(ports: &Ports, caller: &Caller, id: &str) -> Result<Relationship> {
    let ulid = parse_record_id(id, "rel", "id")?;
    ports
        .record(&caller.keys().relationship(ulid))
        .await?
        .ok_or_else(|| LoreError::not_found(format!("relationship {id} in org {}", caller.org())))
}

pub async fn create(
    ports: &Ports,
    copies: &dyn RecordsCopies,
    caller: &Caller,
    args: CreateRelationship,
) -> Result<Relationship> {
    check_name("type", &args.type_name)?;
    entities::check_size(&args.properties, "properties")?;
    for (field, id) in [("from", &args.from), ("to", &args.to)] {
        parse_record_id(id, "ent", field)?;
        if entities::get(ports, caller, id).await.is_err() {
            return Err(LoreError::invalid(
                field,
                format!("there is no entity {id} in org {}", caller.org()),
            ));
        }
    }
    let rel = Relationship {
        id: format!("rel_{}", new_ulid(ports)),
        type_name: args.type_name,
        from: args.from,
        to: args.to,
        properties: args.properties,
        author: caller.principal().id.clone(),
        created_at: now_text(ports),
    };
    let keys = caller.keys();
    let ulid = &rel.id[4..];
    let bytes = to_bytes(&rel);
    let mut batch = Batch::new();
    batch
        .require_absent(keys.relationship(ulid))
        .put(keys.relationship(ulid), bytes.clone())
        .put(keys.relationship_by("out", &rel.from, ulid), bytes.clone())
        .put(keys.relationship_by("in", &rel.to, ulid), bytes);
    // Both ends must still exist when the edge lands.
    for end in [&rel.from, &rel.to] {
        let entity = entities::get(ports, caller, end).await?;
        batch.require_equals(keys.entity(&end[4..]), to_bytes(&entity));
    }
    super::commit_records(ports, caller, copies, batch, &rel.id).await?;
    Ok(rel)
}

pub async fn link(
    ports: &Ports,
    copies: &dyn RecordsCopies,
    caller: &Caller,
    args: LinkEntity,
) -> Result<Relationship> {
    create(
        ports,
        copies,
        caller,
        CreateRelationship {
            type_name: args.type_name,
            from: args.id,
            to: args.to,
            properties: args.properties,
        },
    )
    .await
}

fn delete_writes(batch: &mut Batch, caller: &Caller, rel: &Relationship) {
    let keys = caller.keys();
    let ulid = &rel.id[4..];
    batch
        .delete(keys.relationship(ulid))
        .delete(keys.relationship_by("out", &rel.from, ulid))
        .delete(keys.relationship_by("in", &rel.to, ulid));
}

pub async fn delete(
    ports: &Ports,
    copies: &dyn RecordsCopies,
    caller: &Caller,
    id: &str,
) -> Result<super::Done> {
    let rel = get(ports, caller, id).await?;
    let mut batch = Batch::new();
    batch.require_equals(caller.keys().relationship(&rel.id[4..]), to_bytes(&rel));
    delete_writes(&mut batch, caller, &rel);
    let what = format!("{}.deleted", rel.id);
    super::commit_records(ports, caller, copies, batch, &what).await?;
    Ok(super::Done { ok: true })
}

/// Adds the deletion of every edge touching `entity_id` to `batch`.
async fn unlink_all(
    ports: &Ports,
    caller: &Caller,
    entity_id: &str,
    batch: &mut Batch,
) -> Result<()> {
    for dir in ["out", "in"] {
        let prefix = caller.keys().relationships_by(dir, entity_id);
        for (_, bytes) in ports.storage.scan_all(&prefix).await? {
            let rel: Relationship = serde_json::from_slice(&bytes)?;
            delete_writes(batch, caller, &rel);
        }
    }
    Ok(())
}

pub async fn list(
    ports: &Ports,
    caller: &Caller,
    args: ListRelationships,
) -> Result<Page<Relationship>> {
    check_cursor(args.cursor.as_deref())?;
    let keys = caller.keys();
    let limit = args.limit.unwrap_or(DEFAULT_PAGE).clamp(1, MAX_PAGE);
    // The scans to walk, in order; a cursor is `{scan index}:{key suffix}`.
    let prefixes: Vec<String> = match &args.entity_id {
        None => vec![keys.relationships()],
        Some(id) => {
            parse_record_id(id, "ent", "entity_id")?;
            match args.direction {
                Direction::Out => vec![keys.relationships_by("out", id)],
                Direction::In => vec![keys.relationships_by("in", id)],
                Direction::Both => vec![
                    keys.relationships_by("out", id),
                    keys.relationships_by("in", id),
                ],
            }
        }
    };
    let (mut scan, mut after) = match args.cursor.as_deref() {
        None => (0, None),
        Some(c) => {
            let (i, rest) = c
                .split_once(':')
                .and_then(|(i, rest)| Some((i.parse::<usize>().ok()?, rest)))
                .filter(|(i, _)| *i < prefixes.len())
                .ok_or_else(|| {
                    LoreError::invalid("cursor", "this is not a cursor lore returned")
                })?;
            (i, Some(format!("{}{rest}", prefixes[i])))
        }
    };
    let mut items = Vec::new();
    let mut scanned = 0;
    while scan < prefixes.len() {
        let prefix = &prefixes[scan];
        let page = ports.storage.scan(prefix, after.as_deref(), 500).await?;
        for (key, bytes) in &page.entries {
            scanned += 1;
            after = Some(key.clone());
            let rel: Relationship = serde_json::from_slice(bytes)?;
            if args.type_name.as_ref().is_none_or(|t| *t == rel.type_name) {
                items.push(rel);
            }
            if items.len() == limit || scanned == 5_000 {
                let cursor = format!("{scan}:{}", &key[prefix.len()..]);
                return Ok(Page {
                    items,
                    next_cursor: Some(cursor),
                });
            }
        }
        if page.cursor.is_none() {
            scan += 1;
            after = None;
        }
    }
    Ok(Page {
        items,
        next_cursor: None,
    })
}

/// `entities.delete`: deletes an entity and every edge that touches it, in one batch.
pub async fn delete_entity(
    ports: &Ports,
    copies: &dyn RecordsCopies,
    caller: &Caller,
    args: DeleteEntity,
) -> Result<super::Done> {
    let old = entities::get(ports, caller, &args.id).await?;
    if let Some(v) = args.version
        && v != old.version
    {
        return Err(entities::stale(&old.id, old.version, v));
    }
    let keys = caller.keys();
    let ulid = &old.id[4..];
    let mut batch = Batch::new();
    batch
        .require_equals(keys.entity(ulid), to_bytes(&old))
        .delete(keys.entity(ulid))
        .delete(keys.entity_by_type(&old.type_name, ulid));
    unlink_all(ports, caller, &old.id, &mut batch).await?;
    let what = format!("{}.deleted", old.id);
    match super::commit_records(ports, caller, copies, batch, &what).await {
        Ok(()) => Ok(super::Done { ok: true }),
        Err(StorageError::Conflict { .. }) => {
            Err(entities::stale(&old.id, old.version + 1, old.version))
        }
        Err(e) => Err(e.into()),
    }
}
