//! The virtual tables of one org: which exist (the built-in ones, one per entity type, one per
//! virtual feed), their columns, and how their rows are read through the storage port (or,
//! for a virtual feed, fetched live through its connection).
//!
//! Every key read here comes from the caller's [`OrgKeys`](lore_base::keys::OrgKeys), and a table
//! name is only ever looked up in this org's list, never turned into a key: a query cannot
//! name another org's data. Rows a caller may not see (other members' actions, for a member)
//! are never produced.

use std::collections::{BTreeMap, BTreeSet};

use gluesql_core::ast::DataType;
use gluesql_core::data::Value as Sql;
use serde_json::Value as Json;

use super::budget::Budget;
use super::rows::{Keyed, RowDecoder};
use super::value::{data_type_of_schema, from_json, opt_text, text};
use crate::actions::Action;
use crate::feeds::{self, Feed, FeedKind};
use crate::metrics::{self, Metric};
use crate::operations::{Operation, OperationBody};
use crate::types::EntityType;
use lore_base::error::Result;
use lore_base::ports::Ports;
use lore_base::time::format_time;
use lore_directory::Caller;
use lore_memory::event::Event;

/// The tables every org has, in the order errors list them.
pub const BUILT_IN: &[&str] = &[
    "entities",
    "relationships",
    "events",
    "event_history",
    "entity_types",
    "feeds",
    "operations",
    "actions",
    "metrics",
];

const ENTITY_BASE: &[(&str, DataType)] = &[("id", DataType::Text), ("name", DataType::Text)];
const ENTITY_TAIL: &[(&str, DataType)] = &[
    ("author", DataType::Text),
    ("version", DataType::Int),
    ("created_at", DataType::Text),
    ("updated_at", DataType::Text),
];

/// Rows read per storage page while loading a table.
const SCAN_PAGE: usize = 1024;

/// Where a table's rows come from.
#[derive(Debug, Clone)]
pub enum Source {
    Entities,
    Relationships,
    Events,
    EventHistory,
    EntityTypes,
    Feeds,
    Operations,
    Actions,
    Metrics,
    /// One entity type: its properties as columns.
    Typed(Box<EntityType>),
    /// A virtual feed, fetched live at query time and never stored.
    VirtualFeed(Box<Feed>),
}

/// The columns a query can use: the ones it names, or all of them when it selects `*`. A
/// column no query part names is loaded as `NULL` without being decoded.
pub struct Needed<'a> {
    pub all: bool,
    pub names: &'a BTreeSet<String>,
    /// When set, `entities` rows of other types can never be in the result (see
    /// [`super::statement::entity_type_filter`]): only these types' rows are read.
    pub entity_types: Option<&'a BTreeSet<String>>,
}

impl Needed<'_> {
    pub fn wants(&self, column: &str) -> bool {
        self.all || self.names.contains(column)
    }
}

/// A table's rows, loaded for one query.
#[derive(Debug, Clone)]
pub struct Table {
    pub name: String,
    pub columns: Vec<(String, DataType)>,
    /// Shared with the instance's [`super::cache::TableCache`] when it keeps the table.
    pub rows: std::sync::Arc<Vec<Vec<Sql>>>,
}

/// The tables of the caller's org.
pub struct Catalog {
    tables: Vec<(String, Source)>,
}

impl Catalog {
    /// Reads the org's entity types and feeds (two scans) to name its typed and feed tables.
    /// A type's table is its name (`type_{name}` when that is a built-in table's name); a
    /// virtual feed's is its name too, or `feed_{name}` when that is taken.
    pub async fn read(ports: &Ports, caller: &Caller) -> Result<Self> {
        let mut tables: Vec<(String, Source)> = vec![
            ("entities".into(), Source::Entities),
            ("relationships".into(), Source::Relationships),
            ("events".into(), Source::Events),
            ("event_history".into(), Source::EventHistory),
            ("entity_types".into(), Source::EntityTypes),
            ("feeds".into(), Source::Feeds),
            ("operations".into(), Source::Operations),
            ("actions".into(), Source::Actions),
            ("metrics".into(), Source::Metrics),
        ];
        let (types, feeds) = names(ports, caller).await?;
        let mut taken: BTreeSet<String> = BUILT_IN.iter().map(|s| (*s).to_string()).collect();
        for t in types {
            let name = typed_table_name(&t.name);
            taken.insert(name.clone());
            tables.push((name, Source::Typed(Box::new(t))));
        }
        for f in feeds {
            if let Some(name) = feed_table_name(&f.name, &taken) {
                taken.insert(name.clone());
                tables.push((name, Source::VirtualFeed(Box::new(f))));
            }
        }
        Ok(Self { tables })
    }

    pub fn names(&self) -> Vec<&str> {
        self.tables.iter().map(|(n, _)| n.as_str()).collect()
    }

    pub fn find(&self, name: &str) -> Option<&Source> {
        self.tables.iter().find(|(n, _)| n == name).map(|(_, s)| s)
    }

    /// Every table's columns as known before loading (a virtual feed's item fields are known
    /// only once it is fetched).
    pub fn schemas(&self) -> Vec<(String, Vec<(String, DataType)>)> {
        self.tables
            .iter()
            .map(|(name, source)| (name.clone(), columns(source, &[])))
            .collect()
    }

    /// Loads one table's rows, charging them to the budget; with them, for a table of stored
    /// records (see [`RowDecoder`]), what a cached copy needs to take later writes.
    pub async fn load(
        &self,
        ports: &Ports,
        caller: &Caller,
        name: &str,
        budget: &mut Budget,
        needed: &Needed<'_>,
    ) -> Result<(Table, Option<Keyed>)> {
        let source = self
            .find(name)
            .ok_or_else(|| lore_base::error::LoreError::Internal(format!("no table {name}")))?;
        let mut keyed = None;
        let (columns, rows) = match source {
            Source::VirtualFeed(feed) => {
                let items = feeds::fetch_items(ports, caller, feed).await?;
                budget.charge(name, items.len())?;
                let extra = item_fields(&items);
                let rows = items
                    .iter()
                    .map(|item| feed_row(feed, item, &extra))
                    .collect();
                (columns(source, &extra), rows)
            }
            _ => match decoder(source, needed) {
                Some(decoder) => {
                    let (rows, k) = load_keyed(ports, caller, name, decoder, budget).await?;
                    keyed = Some(k);
                    (columns(source, &[]), rows)
                }
                None => (
                    columns(source, &[]),
                    load_rows(ports, caller, name, source, budget).await?,
                ),
            },
        };
        let table = Table {
            name: name.to_string(),
            columns: columns
                .into_iter()
                .map(|(n, t)| (n.to_string(), t))
                .collect(),
            rows: std::sync::Arc::new(rows),
        };
        Ok((table, keyed))
    }
}

async fn names(ports: &Ports, caller: &Caller) -> Result<(Vec<EntityType>, Vec<Feed>)> {
    let keys = caller.keys();
    let types: Vec<EntityType> = crate::all(ports, &keys.entity_types()).await?;
    let feeds: Vec<Feed> = crate::all(ports, &keys.all_named("feed")).await?;
    Ok((
        types,
        feeds
            .into_iter()
            .filter(|f| f.kind == FeedKind::Virtual)
            .collect(),
    ))
}

fn typed_table_name(type_name: &str) -> String {
    if BUILT_IN.contains(&type_name) {
        format!("type_{type_name}")
    } else {
        type_name.to_string()
    }
}

fn feed_table_name(feed: &str, taken: &BTreeSet<String>) -> Option<String> {
    [feed.to_string(), format!("feed_{feed}")]
        .into_iter()
        .find(|n| !taken.contains(n))
}

/// A typed table's property columns: `(column, property, type)`, in the schema's order. A
/// property whose name is one of the entity's own columns gets the prefix `prop_`.
fn property_columns(t: &EntityType) -> Vec<(String, String, DataType)> {
    let reserved =
        |n: &str| ENTITY_BASE.iter().chain(ENTITY_TAIL).any(|(c, _)| *c == n) || n == "properties";
    t.schema
        .get("properties")
        .and_then(Json::as_object)
        .map(|props| {
            props
                .iter()
                .map(|(name, schema)| {
                    let column = if reserved(name) {
                        format!("prop_{name}")
                    } else {
                        name.clone()
                    };
                    (column, name.clone(), data_type_of_schema(schema))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn cols(list: &[(&str, DataType)]) -> Vec<(String, DataType)> {
    list.iter()
        .map(|(n, t)| ((*n).to_string(), t.clone()))
        .collect()
}

/// The columns of a table; `extra` are a virtual feed's item fields once fetched.
pub fn columns(source: &Source, extra: &[String]) -> Vec<(String, DataType)> {
    use DataType::{Boolean, Int, List, Map, Text};
    match source {
        Source::Entities => cols(&[
            ("id", Text),
            ("type", Text),
            ("name", Text),
            ("properties", Map),
            ("author", Text),
            ("version", Int),
            ("created_at", Text),
            ("updated_at", Text),
        ]),
        Source::Relationships => cols(&[
            ("id", Text),
            ("type", Text),
            ("from_id", Text),
            ("to_id", Text),
            ("properties", Map),
            ("author", Text),
            ("created_at", Text),
        ]),
        Source::Events | Source::EventHistory => {
            let mut c = cols(&[
                ("id", Text),
                ("kind", Text),
                ("content", Text),
                ("payload", Map),
                ("entity_ids", List),
                ("author", Text),
                ("supersedes_event_id", Text),
                ("origin_id", Text),
                ("created_at", Text),
                ("occurred_at", Text),
            ]);
            if matches!(source, Source::EventHistory) {
                c.push(("superseded_by".into(), Text));
                c.push(("superseded_at".into(), Text));
            }
            c
        }
        Source::EntityTypes => cols(&[
            ("name", Text),
            ("noun", Text),
            ("description", Text),
            ("schema", Map),
            ("table_name", Text),
            ("version", Int),
            ("created_at", Text),
            ("updated_at", Text),
        ]),
        Source::Feeds => cols(&[
            ("name", Text),
            ("kind", Text),
            ("description", Text),
            ("event_kind", Text),
            ("connection", Text),
            ("path", Text),
            ("url", Text),
            ("created_at", Text),
            ("updated_at", Text),
        ]),
        Source::Operations => cols(&[
            ("name", Text),
            ("description", Text),
            ("entity_type", Text),
            ("kind", Text),
            ("code", Text),
            ("connection", Text),
            ("method", Text),
            ("path", Text),
            ("args_schema", Map),
            ("access", Text),
            ("mode", Text),
            ("author", Text),
            ("created_at", Text),
            ("updated_at", Text),
        ]),
        Source::Actions => cols(&[
            ("id", Text),
            ("principal", Text),
            ("source", Text),
            ("mode", Text),
            ("dry_run", Boolean),
            ("status", Text),
            ("code_hash", Text),
            ("steps", List),
            ("error", Map),
            ("created_at", Text),
        ]),
        Source::Metrics => cols(&[
            ("name", Text),
            ("kind", Text),
            ("description", Text),
            ("sql", Text),
            ("value_column", Text),
            ("author", Text),
            ("created_at", Text),
        ]),
        Source::Typed(t) => {
            let mut c = cols(ENTITY_BASE);
            c.extend(
                property_columns(t)
                    .into_iter()
                    .map(|(col, _, ty)| (col, ty)),
            );
            c.extend(cols(ENTITY_TAIL));
            c.push(("properties".into(), Map));
            c
        }
        Source::VirtualFeed(_) => {
            let mut c = cols(&[("id", Text), ("content", Text), ("item", Map)]);
            c.extend(extra.iter().map(|n| (n.clone(), Text)));
            c
        }
    }
}

/// Reads every record under `prefix`, page by page, charging the budget as it goes.
async fn scan(
    ports: &Ports,
    prefix: &str,
    table: &str,
    budget: &mut Budget,
    mut each: impl FnMut(&str, &[u8]) -> Result<()>,
) -> Result<()> {
    let mut after: Option<String> = None;
    loop {
        let page = ports
            .storage
            .scan(prefix, after.as_deref(), SCAN_PAGE)
            .await?;
        budget.charge(table, page.entries.len())?;
        for (key, bytes) in &page.entries {
            each(key, bytes)?;
        }
        match page.cursor {
            Some(c) => after = Some(c),
            None => return Ok(()),
        }
    }
}

fn parse<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    Ok(serde_json::from_slice(bytes)?)
}

async fn load_rows(
    ports: &Ports,
    caller: &Caller,
    table: &str,
    source: &Source,
    budget: &mut Budget,
) -> Result<Vec<Vec<Sql>>> {
    let keys = caller.keys();
    let mut rows = Vec::new();
    match source {
        Source::Events | Source::EventHistory => {
            let mut events: Vec<Event> = Vec::new();
            scan(ports, &keys.events(), table, budget, |_, b| {
                events.push(parse(b)?);
                Ok(())
            })
            .await?;
            // The replacement of each replaced event and when it was saved: `event_history`
            // answers "as of" a time with `created_at <= t AND (superseded_at IS NULL OR
            // superseded_at > t)`.
            let mut superseded_by: BTreeMap<&str, (&str, i64)> = BTreeMap::new();
            for e in &events {
                if let Some(old) = &e.supersedes_event_id {
                    superseded_by.insert(old.as_str(), (e.id.as_str(), e.created_at_ms));
                }
            }
            let history = matches!(source, Source::EventHistory);
            for e in &events {
                let replaced = superseded_by.get(e.id.as_str()).copied();
                if replaced.is_some() && !history {
                    continue;
                }
                let mut row = vec![
                    text(&e.id),
                    text(&e.kind),
                    text(&e.content),
                    e.payload.as_ref().map_or(Sql::Null, from_json),
                    Sql::List(e.entity_ids.iter().map(|id| text(id)).collect()),
                    text(&e.author),
                    opt_text(e.supersedes_event_id.as_deref()),
                    opt_text(e.origin_id.as_deref()),
                    text(&format_time(e.created_at_ms)),
                    e.occurred_at_ms
                        .map_or(Sql::Null, |t| text(&format_time(t))),
                ];
                if history {
                    row.push(opt_text(replaced.map(|(id, _)| id)));
                    row.push(replaced.map_or(Sql::Null, |(_, t)| text(&format_time(t))));
                }
                rows.push(row);
            }
        }
        Source::EntityTypes => {
            scan(ports, &keys.entity_types(), table, budget, |_, b| {
                let t: EntityType = parse(b)?;
                rows.push(vec![
                    text(&t.name),
                    text(&t.noun),
                    text(&t.description),
                    from_json(&t.schema),
                    text(&typed_table_name(&t.name)),
                    Sql::I64(t.version as i64),
                    text(&t.created_at),
                    text(&t.updated_at),
                ]);
                Ok(())
            })
            .await?;
        }
        Source::Feeds => {
            scan(ports, &keys.all_named("feed"), table, budget, |_, b| {
                let f: Feed = parse(b)?;
                let kind = serde_json::to_value(f.kind)?;
                rows.push(vec![
                    text(&f.name),
                    text(kind.as_str().unwrap_or_default()),
                    text(&f.description),
                    text(&f.event_kind),
                    opt_text(f.connection.as_deref()),
                    opt_text(f.path.as_deref()),
                    opt_text(f.url.as_deref()),
                    text(&f.created_at),
                    text(&f.updated_at),
                ]);
                Ok(())
            })
            .await?;
        }
        Source::Operations => {
            scan(ports, &keys.all_named("op"), table, budget, |_, b| {
                let o: Operation = parse(b)?;
                let (kind, code, connection, method, path) = match &o.body {
                    OperationBody::Script { code } => {
                        ("script", Some(code.as_str()), None, None, None)
                    }
                    OperationBody::Http {
                        connection,
                        method,
                        path,
                    } => (
                        "http",
                        None,
                        Some(connection.as_str()),
                        Some(method.as_str()),
                        Some(path.as_str()),
                    ),
                };
                rows.push(vec![
                    text(&o.name),
                    text(&o.description),
                    opt_text(o.entity_type.as_deref()),
                    text(kind),
                    opt_text(code),
                    opt_text(connection),
                    opt_text(method),
                    opt_text(path),
                    from_json(&o.args_schema),
                    text(o.access.as_str()),
                    text(o.mode.as_str()),
                    text(&o.author),
                    text(&o.created_at),
                    text(&o.updated_at),
                ]);
                Ok(())
            })
            .await?;
        }
        Source::Actions => {
            // Members see their own actions, admins everyone's (as `actions.list`).
            let only = (!caller.role().is_admin()).then(|| caller.principal().id.clone());
            scan(ports, &keys.actions(), table, budget, |_, b| {
                let a: Action = parse(b)?;
                if only.as_ref().is_some_and(|p| *p != a.principal) {
                    return Ok(());
                }
                let steps = serde_json::to_value(&a.steps)?;
                rows.push(vec![
                    text(&a.id),
                    text(&a.principal),
                    text(&a.source),
                    text(&a.mode),
                    Sql::Bool(a.dry_run),
                    text(&a.status),
                    opt_text(a.code_hash.as_deref()),
                    from_json(&steps),
                    a.error.as_ref().map_or(Sql::Null, from_json),
                    text(&a.created_at),
                ]);
                Ok(())
            })
            .await?;
        }
        Source::Metrics => {
            for (name, description) in metrics::BUILT_IN {
                rows.push(vec![
                    text(name),
                    text("builtin"),
                    text(description),
                    Sql::Null,
                    Sql::Null,
                    Sql::Null,
                    Sql::Null,
                ]);
            }
            scan(ports, &keys.all_named("metric"), table, budget, |_, b| {
                let m: Metric = parse(b)?;
                rows.push(vec![
                    text(&m.name),
                    text("sql"),
                    text(&m.description),
                    text(&m.sql),
                    text(&m.value_column),
                    text(&m.author),
                    text(&m.created_at),
                ]);
                Ok(())
            })
            .await?;
        }
        // Loaded by `load_keyed` and `feeds::fetch_items`.
        Source::Entities | Source::Typed(_) | Source::Relationships | Source::VirtualFeed(_) => {}
    }
    Ok(rows)
}

/// The decoder of `source`'s stored records for a query that needs `needed`; `None` for a
/// table whose rows are not stored records under a prefix.
fn decoder(source: &Source, needed: &Needed<'_>) -> Option<RowDecoder> {
    let wants = columns(source, &[])
        .iter()
        .map(|(c, _)| needed.wants(c))
        .collect();
    match source {
        Source::Entities => Some(RowDecoder::entities(
            needed.entity_types.map(|types| {
                // A name that is not a valid type name has no rows.
                types
                    .iter()
                    .filter(|t| crate::check_name("type", t).is_ok())
                    .cloned()
                    .collect()
            }),
            wants,
        )),
        Source::Typed(t) => {
            let props = property_columns(t);
            let any_property = needed.wants("properties")
                || props.iter().any(|(column, _, _)| needed.wants(column));
            let props = props.into_iter().map(|(_, property, _)| property).collect();
            Some(RowDecoder::typed(&t.name, props, any_property, wants))
        }
        Source::Relationships => Some(RowDecoder::relationships(wants)),
        _ => None,
    }
}

/// Loads a table whose rows are stored records under key prefixes (`entities`, a typed table,
/// `relationships`), in key order, with each row's place in that order (the key after its
/// prefix): what the table cache needs to apply a later write to the rows.
async fn load_keyed(
    ports: &Ports,
    caller: &Caller,
    table: &str,
    decoder: RowDecoder,
    budget: &mut Budget,
) -> Result<(Vec<Vec<Sql>>, Keyed)> {
    let prefixes = decoder.prefixes(caller.keys());
    let mut keyed: Vec<(String, Vec<Sql>)> = Vec::new();
    for (which, prefix) in prefixes.iter().enumerate() {
        scan(ports, prefix, table, budget, |key, b| {
            if let Some(row) = decoder.row(which, b)? {
                keyed.push((key[prefix.len()..].to_string(), row));
            }
            Ok(())
        })
        .await?;
    }
    // Several prefixes (one per entity type) merge in id order, as `ent/` lists them.
    if prefixes.len() > 1 {
        keyed.sort_by(|a, b| a.0.cmp(&b.0));
    }
    let (sort_keys, rows) = keyed.into_iter().unzip();
    Ok((
        rows,
        Keyed {
            sort_keys,
            prefixes,
            decoder,
        },
    ))
}

/// The top-level fields of a virtual feed's items, in first-seen order, without the fixed
/// columns' names.
fn item_fields(items: &[Json]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for item in items {
        if let Json::Object(map) = item {
            for key in map.keys() {
                if !["id", "content", "item"].contains(&key.as_str()) && seen.insert(key.clone()) {
                    out.push(key.clone());
                }
            }
        }
    }
    out
}

fn feed_row(feed: &Feed, item: &Json, extra: &[String]) -> Vec<Sql> {
    let id = match item.pointer(feed.id_pointer.as_deref().unwrap_or("/id")) {
        Some(Json::String(s)) => Sql::Str(s.clone()),
        Some(v) if !v.is_null() => Sql::Str(v.to_string()),
        _ => Sql::Null,
    };
    let content = match feed
        .content_pointer
        .as_deref()
        .and_then(|p| item.pointer(p))
    {
        Some(Json::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => item.to_string(),
    };
    let mut row = vec![id, Sql::Str(content), from_json(item)];
    row.extend(
        extra
            .iter()
            .map(|k| item.get(k).map_or(Sql::Null, from_json)),
    );
    row
}
