//! One org's records (SPEC 2) beyond memory, below the org engine (`lore-engine`), and member-safe
//! read-only SQL over them ([`sql`]): entity types (templates), entities,
//! relationships, feeds, connections, operations, behaviors, actions, metrics, and the people
//! side (agents, members, tokens, organizations). Each module stores its records through the
//! storage port under keys from the caller's [`OrgKeys`](lore_base::keys::OrgKeys), and is reached
//! only through the SDK dispatcher (`lore_engine::sdk`), which has already checked role, scopes and
//! tier. Record types derive `JsonSchema`: the SDK's TypeScript declarations come from them.

pub mod actions;
pub mod behaviors;
pub mod connections;
pub mod entities;
pub mod feeds;
pub mod metrics;
pub mod operations;
pub mod outbound;
pub mod people;
pub mod relationships;
pub mod sql;
#[doc(hidden)]
pub mod types;
pub mod webhooks;

use std::borrow::Cow;
use std::marker::PhantomData;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use serde_json::value::RawValue;

use lore_base::error::{LoreError, Result};
use lore_base::ports::Ports;
use lore_base::storage::{Batch, StorageError};

/// Largest page a list call returns.
pub const MAX_PAGE: usize = 500;
/// Default page size of list calls.
pub const DEFAULT_PAGE: usize = 50;

/// One page of a list.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Pass as `cursor` to get the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// A record of type `T` exactly as stored: passed through to the caller without being decoded
/// and encoded again (a page of 100 entities is copied, not rebuilt). Its schema is `T`'s.
#[derive(Debug, Clone)]
pub struct Stored<T> {
    raw: Box<RawValue>,
    record: PhantomData<fn() -> T>,
}

impl<T: DeserializeOwned> Stored<T> {
    /// Decodes the record.
    pub fn parse(&self) -> Result<T> {
        Ok(serde_json::from_str(self.raw.get())?)
    }
}

impl<T> Serialize for Stored<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.raw.serialize(s)
    }
}

impl<'de, T> Deserialize<'de> for Stored<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Ok(Self {
            raw: Box::<RawValue>::deserialize(d)?,
            record: PhantomData,
        })
    }
}

impl<T: JsonSchema> JsonSchema for Stored<T> {
    fn inline_schema() -> bool {
        T::inline_schema()
    }
    fn schema_name() -> Cow<'static, str> {
        T::schema_name()
    }
    fn schema_id() -> Cow<'static, str> {
        T::schema_id()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }
}

/// The record as stored bytes.
pub fn to_bytes(value: &impl Serialize) -> Vec<u8> {
    serde_json::to_vec(value).expect("records serialize")
}

/// What an instance keeps of an org's records between requests, kept up to date by the
/// instance's own writes (the SQL table cache, `sql::cache`).
pub trait RecordsCopies {
    /// The org's records version the copies of `org` were read at, if there are any.
    fn version(&self, org: &str) -> Option<Vec<u8>>;
    /// A batch that required the records version `from` committed `writes` and moved the
    /// version to `to`: nothing else was written in between.
    fn committed(&self, org: &str, from: &[u8], to: &[u8], writes: &[lore_base::storage::Write]);
    /// The org's records version is no longer the one the copies were read at: they are
    /// dropped, so that the next writes do not require it again (each would fail once).
    fn stale(&self, org: &str);
}

/// Commits `batch`, which writes entities or relationships, with a new records version
/// (`OrgKeys::records_version`): every copy of the org's records read under the old one, in this
/// instance and every other, is then stale. `what` (the record's id and version) and random
/// bytes make the value one no other committed write uses.
///
/// When this instance holds copies (`copies`), the batch first requires the version they were
/// read at, so that once it commits they take its writes and stay current; if another write
/// came first, that condition fails, and the batch commits without it (the copies go stale).
/// A conflict on any other key is the caller's, as without copies.
pub async fn commit_records(
    ports: &Ports,
    caller: &lore_directory::Caller,
    copies: &dyn RecordsCopies,
    mut batch: lore_base::storage::Batch,
    what: &str,
) -> std::result::Result<(), lore_base::storage::StorageError> {
    let key = caller.keys().records_version();
    let to = format!("{what}/{}", ports.random_hex(12));
    batch.put(key.clone(), to.clone());
    if let Some(from) = copies.version(caller.org().as_str()) {
        let mut required = batch.clone();
        required.require_equals(key.clone(), from.clone());
        match ports.storage.commit(required).await {
            Ok(()) => {
                copies.committed(caller.org().as_str(), &from, to.as_bytes(), &batch.writes);
                return Ok(());
            }
            Err(lore_base::storage::StorageError::Conflict { key: k }) if k == key => {
                copies.stale(caller.org().as_str());
            }
            Err(e) => return Err(e),
        }
    }
    ports.storage.commit(batch).await
}

/// Now, as the RFC 3339 text every record shows.
pub fn now_text(ports: &Ports) -> String {
    lore_base::time::format_time(ports.clock.now_ms())
}

/// Checks a record name: 1-64 of `a-z`, `0-9`, `_`, `-`, starting with a letter.
pub fn check_name(field: &str, name: &str) -> Result<()> {
    let ok = (1..=64).contains(&name.len())
        && name.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(LoreError::invalid(
            field,
            format!(
                "{name:?} is not a valid name: use 1-64 of a-z, 0-9, '_' and '-', starting with a letter"
            ),
        ))
    }
}

/// A cursor is the last key suffix of the previous page: printable ASCII without '/'.
pub fn check_cursor(cursor: Option<&str>) -> Result<()> {
    match cursor {
        Some(c)
            if c.is_empty()
                || c.len() > 128
                || !c.bytes().all(|b| b.is_ascii_graphic() && b != b'/') =>
        {
            Err(LoreError::invalid(
                "cursor",
                "this is not a cursor lore returned; pass next_cursor from the previous page",
            ))
        }
        _ => Ok(()),
    }
}

/// Reads one page of JSON records under `prefix`, resuming after `cursor` (a key suffix).
pub async fn page<T: DeserializeOwned>(
    ports: &Ports,
    prefix: &str,
    cursor: Option<&str>,
    limit: usize,
) -> Result<Page<T>> {
    page_in(ports, prefix, cursor, limit, false).await
}

/// One page of the records under `prefix`, in key order or, `newest_first`, backward from the
/// cursor (for keys that end in a ULID, newest first).
pub async fn page_in<T: DeserializeOwned>(
    ports: &Ports,
    prefix: &str,
    cursor: Option<&str>,
    limit: usize,
    newest_first: bool,
) -> Result<Page<T>> {
    check_cursor(cursor)?;
    let from = cursor.map(|c| format!("{prefix}{c}"));
    let limit = limit.clamp(1, MAX_PAGE);
    let scanned = if newest_first {
        ports
            .storage
            .scan_back(prefix, from.as_deref(), limit)
            .await?
    } else {
        ports.storage.scan(prefix, from.as_deref(), limit).await?
    };
    let items = scanned
        .entries
        .iter()
        .map(|(_, v)| serde_json::from_slice(v))
        .collect::<std::result::Result<Vec<T>, _>>()?;
    let next_cursor = scanned
        .cursor
        .map(|k| k.strip_prefix(prefix).unwrap_or(&k).to_string());
    Ok(Page { items, next_cursor })
}

/// Every JSON record under `prefix` (for small, bounded sets such as types or feeds).
pub async fn all<T: DeserializeOwned>(ports: &Ports, prefix: &str) -> Result<Vec<T>> {
    ports
        .storage
        .scan_all(prefix)
        .await?
        .iter()
        .map(|(_, v)| serde_json::from_slice(v).map_err(Into::into))
        .collect()
}

/// Commits a batch whose preconditions guard a new record; a failed one means it exists.
pub async fn commit_new(
    ports: &Ports,
    batch: Batch,
    exists: impl FnOnce() -> String,
) -> Result<()> {
    ports.storage.commit(batch).await.map_err(|e| match e {
        StorageError::Conflict { .. } => {
            LoreError::Conflict(format!("{} already exists", exists()))
        }
        other => other.into(),
    })
}

/// Replaces the record at `key` with `new` if it still holds `old`.
pub async fn replace<T: Serialize>(ports: &Ports, key: &str, old: &T, new: &T) -> Result<()> {
    let mut batch = Batch::new();
    batch
        .require_equals(key, to_bytes(old))
        .put(key, to_bytes(new));
    Ok(ports.storage.commit(batch).await?)
}

/// Deletes the record at `key` if it still holds `old`.
pub async fn remove<T: Serialize>(ports: &Ports, key: &str, old: &T) -> Result<()> {
    let mut batch = Batch::new();
    batch.require_equals(key, to_bytes(old)).delete(key);
    Ok(ports.storage.commit(batch).await?)
}

/// Reads a named record or says what is missing.
pub async fn require<T: DeserializeOwned>(ports: &Ports, key: &str, what: String) -> Result<T> {
    ports
        .record(key)
        .await?
        .ok_or_else(|| LoreError::not_found(what))
}

/// `{name}` arguments shared by get/delete of named records.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ByName {
    /// The record's name.
    pub name: String,
}

/// `{id}` arguments shared by get/delete of id'd records.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ById {
    /// The record's id, as lore returned it.
    pub id: String,
}

/// `{limit?, cursor?}` for plain lists.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PageArgs {
    /// Page size, 1-500 (default 50).
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<usize>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// `{}`: no arguments.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

pub use lore_base::model::Done;
