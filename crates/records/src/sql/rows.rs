//! How a stored record of `entities`, a typed table or `relationships` becomes a row of its
//! table: the decoding a load ([`super::catalog`]) and a write applied to a cached copy
//! ([`super::cache`]) share.

use std::borrow::Cow;

use gluesql_core::data::Value as Sql;
use serde::Deserialize;
use serde_json::Value as Json;
use serde_json::value::RawValue;

use super::value::{from_json, from_map, text};
use crate::relationships::Relationship;
use lore_base::error::Result;

fn parse<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    Ok(serde_json::from_slice(bytes)?)
}

/// An entity as stored, borrowed: its properties stay raw until a column needs them.
#[derive(Deserialize)]
struct StoredEntity<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
    #[serde(rename = "type", borrow)]
    type_name: Cow<'a, str>,
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow)]
    properties: &'a RawValue,
    #[serde(borrow)]
    author: Cow<'a, str>,
    version: u64,
    #[serde(borrow)]
    created_at: Cow<'a, str>,
    #[serde(borrow)]
    updated_at: Cow<'a, str>,
}

/// A table loaded from stored records, as a cached copy of it needs to take later writes: each
/// row's key after its prefix (ascending, in the rows' order), the prefixes, and the decoder.
#[derive(Debug, Clone)]
pub struct Keyed {
    pub sort_keys: Vec<String>,
    pub prefixes: Vec<String>,
    pub decoder: RowDecoder,
}

/// How a stored record of `entities`, a typed table or `relationships` becomes a row: the
/// columns a query wants decoded, the others `NULL`. Loading a table and applying a write to a
/// cached copy of it ([`super::cache`]) decode with the same one.
#[derive(Debug, Clone)]
pub struct RowDecoder {
    kind: DecoderKind,
    /// Per column of the table, in order: whether it is decoded.
    wants: Vec<bool>,
}

#[derive(Debug, Clone)]
enum DecoderKind {
    /// Every entity (`ent/`), or those of these types (`ent-t/{type}/`, one prefix each).
    Entities(Option<Vec<String>>),
    Typed {
        type_name: String,
        props: Vec<String>,
        any_property: bool,
    },
    Relationships,
}

impl RowDecoder {
    /// `entities`: every entity (`ent/`), or those of `types` (`ent-t/{type}/`, one prefix
    /// each). `wants`: per column of the table, whether it is decoded.
    pub fn entities(types: Option<Vec<String>>, wants: Vec<bool>) -> Self {
        Self {
            kind: DecoderKind::Entities(types),
            wants,
        }
    }

    /// A typed table: its properties' names, in column order, and whether any is wanted.
    pub fn typed(
        type_name: &str,
        props: Vec<String>,
        any_property: bool,
        wants: Vec<bool>,
    ) -> Self {
        Self {
            kind: DecoderKind::Typed {
                type_name: type_name.to_string(),
                props,
                any_property,
            },
            wants,
        }
    }

    pub fn relationships(wants: Vec<bool>) -> Self {
        Self {
            kind: DecoderKind::Relationships,
            wants,
        }
    }

    /// The key prefixes the rows are stored under, each row under one.
    pub fn prefixes(&self, keys: &lore_base::keys::OrgKeys) -> Vec<String> {
        match &self.kind {
            DecoderKind::Entities(None) => vec![keys.entities()],
            DecoderKind::Entities(Some(types)) => {
                types.iter().map(|t| keys.entities_of_type(t)).collect()
            }
            DecoderKind::Typed { type_name, .. } => vec![keys.entities_of_type(type_name)],
            DecoderKind::Relationships => vec![keys.relationships()],
        }
    }

    /// The row of a record stored under the `which`-th prefix; `None` when the record does not
    /// belong in the table (an entity filed under another type's prefix).
    pub fn row(&self, which: usize, bytes: &[u8]) -> Result<Option<Vec<Sql>>> {
        let mut column = 0;
        let mut pick = |value: &dyn Fn() -> Result<Sql>| -> Result<Sql> {
            column += 1;
            if self.wants.get(column - 1).copied().unwrap_or(true) {
                value()
            } else {
                Ok(Sql::Null)
            }
        };
        match &self.kind {
            DecoderKind::Entities(types) => {
                let e: StoredEntity = serde_json::from_slice(bytes)?;
                if let Some(types) = types
                    && types.get(which).map(String::as_str) != Some(&*e.type_name)
                {
                    return Ok(None);
                }
                Ok(Some(vec![
                    pick(&|| Ok(text(&e.id)))?,
                    pick(&|| Ok(text(&e.type_name)))?,
                    pick(&|| Ok(text(&e.name)))?,
                    pick(&|| Ok(from_json(&parse(e.properties.get().as_bytes())?)))?,
                    pick(&|| Ok(text(&e.author)))?,
                    pick(&|| Ok(Sql::I64(e.version as i64)))?,
                    pick(&|| Ok(text(&e.created_at)))?,
                    pick(&|| Ok(text(&e.updated_at)))?,
                ]))
            }
            DecoderKind::Typed {
                props,
                any_property,
                ..
            } => {
                let e: StoredEntity = serde_json::from_slice(bytes)?;
                let properties: serde_json::Map<String, Json> = if *any_property {
                    parse(e.properties.get().as_bytes())?
                } else {
                    serde_json::Map::new()
                };
                let mut row = Vec::with_capacity(self.wants.len());
                row.push(pick(&|| Ok(text(&e.id)))?);
                row.push(pick(&|| Ok(text(&e.name)))?);
                for property in props {
                    row.push(pick(&|| {
                        Ok(properties.get(property).map_or(Sql::Null, from_json))
                    })?);
                }
                row.extend([
                    pick(&|| Ok(text(&e.author)))?,
                    pick(&|| Ok(Sql::I64(e.version as i64)))?,
                    pick(&|| Ok(text(&e.created_at)))?,
                    pick(&|| Ok(text(&e.updated_at)))?,
                    pick(&|| Ok(from_map(&properties)))?,
                ]);
                Ok(Some(row))
            }
            // Every column, as before the cache decoded by column: a relationship is small.
            DecoderKind::Relationships => {
                let r: Relationship = parse(bytes)?;
                Ok(Some(vec![
                    text(&r.id),
                    text(&r.type_name),
                    text(&r.from),
                    text(&r.to),
                    from_map(&r.properties),
                    text(&r.author),
                    text(&r.created_at),
                ]))
            }
        }
    }
}
