//! Feeds: named sources of events. `webhook` feeds receive signed POSTs at
//! `/hooks/{org}/{feed}` (see [`super::webhooks`]); `connection` feeds are pulled through a
//! connection and their items land as events; `virtual` feeds are read live through their
//! connection and never stored.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::connections::{self, CallConnection};
use super::{ByName, Done, check_name, now_text, require, to_bytes};
use lore_base::error::{LoreError, Result};
use lore_base::ids::new_ulid;
use lore_base::ports::Ports;
use lore_base::storage::Batch;
use lore_directory::Caller;
use lore_memory::event::Event;
use lore_memory::{FeedItem, MemoryService};

/// Largest item text kept as an event's content.
const MAX_CONTENT_CHARS: usize = 4000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FeedKind {
    /// Signed POST deliveries to `/hooks/{org}/{feed}` land as events.
    Webhook,
    /// Items pulled through a connection (`feeds.pull`) land as events.
    Connection,
    /// Read live through a connection (`feeds.read`), never stored.
    Virtual,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum WebhookAuth {
    /// `X-Lore-Signature: sha256=<hex HMAC-SHA256 of the body>` (or `X-Hub-Signature-256`).
    #[default]
    Hmac,
    /// `Authorization: Bearer <secret>`.
    Bearer,
}

/// A feed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Feed {
    pub name: String,
    pub kind: FeedKind,
    pub description: String,
    /// The event kind its items get.
    pub event_kind: String,
    /// Webhook feeds: how deliveries authenticate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<WebhookAuth>,
    /// Webhook feeds: where to POST deliveries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Connection and virtual feeds: the connection to read through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection: Option<String>,
    /// Connection and virtual feeds: the path to GET, e.g. `/issues`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// JSON pointer to the item list in the response (default: the body if it is an array).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items_pointer: Option<String>,
    /// JSON pointer to an item's unique id (default `/id`; else a hash of the item).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id_pointer: Option<String>,
    /// JSON pointer to an item's text (default: the item as compact JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_pointer: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

/// A feed with its signing secret: returned once, when the secret is made.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct FeedWithSecret {
    #[serde(flatten)]
    pub feed: Feed,
    /// The webhook secret. Shown only now; store it in the sender.
    pub secret: String,
}

/// What `feeds.create` returns: webhook feeds come with their secret.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum FeedCreated {
    WithSecret(FeedWithSecret),
    Plain(Feed),
}

/// `feeds.create`
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateFeed {
    pub name: String,
    pub kind: FeedKind,
    #[serde(default)]
    pub description: String,
    /// The event kind of its items (default `feed_item`).
    pub event_kind: Option<String>,
    /// Webhook feeds: `hmac` (default) or `bearer`.
    pub auth: Option<WebhookAuth>,
    /// Webhook feeds: your own secret (16-256 characters); default: a random one.
    pub secret: Option<String>,
    pub connection: Option<String>,
    pub path: Option<String>,
    pub items_pointer: Option<String>,
    pub id_pointer: Option<String>,
    pub content_pointer: Option<String>,
}

/// `feeds.update`: only the fields given change.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateFeed {
    pub name: String,
    pub description: Option<String>,
    pub event_kind: Option<String>,
    pub path: Option<String>,
    pub items_pointer: Option<String>,
    pub id_pointer: Option<String>,
    pub content_pointer: Option<String>,
}

/// `feeds.read`
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadFeed {
    pub name: String,
    /// Items to return, 1-1000 (default 100).
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<usize>,
}

/// Items read live from a virtual feed.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct FeedItems {
    pub items: Vec<Value>,
}

/// What `feeds.pull` did.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PullResult {
    /// Ids of the events of new items.
    pub added: Vec<String>,
    /// Items delivered before.
    pub duplicates: usize,
}

fn check_pointer(field: &str, pointer: Option<&str>) -> Result<()> {
    match pointer {
        Some(p) if !(p.is_empty() || p.starts_with('/')) => Err(LoreError::invalid(
            field,
            "a JSON pointer starts with / (e.g. /data/items), or is empty for the whole value",
        )),
        _ => Ok(()),
    }
}

fn check_secret(secret: &str) -> Result<()> {
    if !(16..=256).contains(&secret.len()) || secret.chars().any(char::is_control) {
        return Err(LoreError::invalid(
            "secret",
            "a webhook secret is 16-256 printable characters",
        ));
    }
    Ok(())
}

pub async fn get(ports: &Ports, caller: &Caller, name: &str) -> Result<Feed> {
    check_name("name", name)?;
    require(
        ports,
        &caller.keys().named("feed", name),
        format!("feed {name:?} in org {}", caller.org()),
    )
    .await
}

pub async fn list(ports: &Ports, caller: &Caller) -> Result<Vec<Feed>> {
    super::all(ports, &caller.keys().all_named("feed")).await
}

/// Creates a feed; webhook feeds come back with their secret (the only time it is shown).
pub async fn create(ports: &Ports, caller: &Caller, args: CreateFeed) -> Result<FeedCreated> {
    check_name("name", &args.name)?;
    let event_kind = args.event_kind.unwrap_or_else(|| "feed_item".into());
    check_name("event_kind", &event_kind)?;
    for (field, p) in [
        ("items_pointer", &args.items_pointer),
        ("id_pointer", &args.id_pointer),
        ("content_pointer", &args.content_pointer),
    ] {
        check_pointer(field, p.as_deref())?;
    }
    let webhook = args.kind == FeedKind::Webhook;
    if webhook {
        if args.connection.is_some() || args.path.is_some() {
            return Err(LoreError::invalid(
                "connection",
                "webhook feeds receive deliveries; connection and path are for connection and virtual feeds",
            ));
        }
    } else {
        let conn = args.connection.as_deref().ok_or_else(|| {
            LoreError::invalid(
                "connection",
                "connection and virtual feeds need a connection",
            )
        })?;
        connections::get(ports, caller, conn).await?;
        if args.secret.is_some() || args.auth.is_some() {
            return Err(LoreError::invalid(
                "secret",
                "only webhook feeds have a signing secret",
            ));
        }
    }
    let secret = match (webhook, args.secret) {
        (true, Some(s)) => {
            check_secret(&s)?;
            Some(s)
        }
        (true, None) => Some(format!("whsec_{}", ports.random_hex(24))),
        (false, _) => None,
    };
    let now = now_text(ports);
    let feed = Feed {
        url: webhook.then(|| format!("/hooks/{}/{}", caller.org(), args.name)),
        name: args.name,
        kind: args.kind,
        description: args.description,
        event_kind,
        auth: webhook.then(|| args.auth.unwrap_or_default()),
        connection: args.connection,
        path: args.path,
        items_pointer: args.items_pointer,
        id_pointer: args.id_pointer,
        content_pointer: args.content_pointer,
        created_at: now.clone(),
        updated_at: now,
    };
    let keys = caller.keys();
    let key = keys.named("feed", &feed.name);
    let mut batch = Batch::new();
    batch.require_absent(&key).put(&key, to_bytes(&feed));
    if let Some(s) = &secret {
        batch.put(keys.secret("feed", &feed.name), s.clone().into_bytes());
    }
    super::commit_new(ports, batch, || format!("feed {:?}", feed.name)).await?;
    Ok(match secret {
        Some(secret) => FeedCreated::WithSecret(FeedWithSecret { feed, secret }),
        None => FeedCreated::Plain(feed),
    })
}

pub async fn update(ports: &Ports, caller: &Caller, args: UpdateFeed) -> Result<Feed> {
    let old = get(ports, caller, &args.name).await?;
    let mut feed = old.clone();
    if let Some(d) = args.description {
        feed.description = d;
    }
    if let Some(k) = args.event_kind {
        check_name("event_kind", &k)?;
        feed.event_kind = k;
    }
    if args.path.is_some() {
        if feed.kind == FeedKind::Webhook {
            return Err(LoreError::invalid("path", "webhook feeds have no path"));
        }
        feed.path = args.path;
    }
    for (field, new, slot) in [
        ("items_pointer", args.items_pointer, &mut feed.items_pointer),
        ("id_pointer", args.id_pointer, &mut feed.id_pointer),
        (
            "content_pointer",
            args.content_pointer,
            &mut feed.content_pointer,
        ),
    ] {
        if new.is_some() {
            check_pointer(field, new.as_deref())?;
            *slot = new;
        }
    }
    feed.updated_at = now_text(ports);
    let key = caller.keys().named("feed", &feed.name);
    super::replace(ports, &key, &old, &feed).await?;
    Ok(feed)
}

/// A new random secret for a webhook feed; the old one stops working at once.
pub async fn rotate_secret(ports: &Ports, caller: &Caller, args: ByName) -> Result<FeedWithSecret> {
    let feed = get(ports, caller, &args.name).await?;
    if feed.kind != FeedKind::Webhook {
        return Err(LoreError::invalid(
            "name",
            "only webhook feeds have a secret",
        ));
    }
    let secret = format!("whsec_{}", ports.random_hex(24));
    ports
        .storage
        .put(
            &caller.keys().secret("feed", &feed.name),
            secret.clone().into_bytes(),
        )
        .await?;
    Ok(FeedWithSecret { feed, secret })
}

pub async fn delete(ports: &Ports, caller: &Caller, args: ByName) -> Result<Done> {
    let old = get(ports, caller, &args.name).await?;
    let keys = caller.keys();
    let key = keys.named("feed", &old.name);
    let mut batch = Batch::new();
    batch
        .require_equals(&key, to_bytes(&old))
        .delete(&key)
        .delete(keys.secret("feed", &old.name));
    ports.storage.commit(batch).await?;
    Ok(Done { ok: true })
}

/// GETs the feed's path through its connection and returns the item list.
pub async fn fetch_items(ports: &Ports, caller: &Caller, feed: &Feed) -> Result<Vec<Value>> {
    let connection = feed
        .connection
        .clone()
        .ok_or_else(|| LoreError::invalid("name", "this feed has no connection"))?;
    let result = connections::call(
        ports,
        caller,
        CallConnection {
            name: connection.clone(),
            method: "GET".into(),
            path: feed.path.clone().unwrap_or_default(),
            body: None,
        },
    )
    .await?;
    if !(200..300).contains(&result.status) {
        return Err(LoreError::Unavailable(format!(
            "connection {connection} answered HTTP {}",
            result.status
        )));
    }
    let list = match &feed.items_pointer {
        Some(p) => result.body.pointer(p).cloned(),
        None => Some(result.body),
    };
    match list {
        Some(Value::Array(items)) => Ok(items),
        _ => Err(LoreError::Unavailable(format!(
            "connection {connection} did not return a list of items{}",
            feed.items_pointer
                .as_deref()
                .map(|p| format!(" at {p}"))
                .unwrap_or_default()
        ))),
    }
}

pub async fn read(ports: &Ports, caller: &Caller, args: ReadFeed) -> Result<FeedItems> {
    let feed = get(ports, caller, &args.name).await?;
    if feed.kind == FeedKind::Webhook {
        return Err(LoreError::invalid(
            "name",
            "webhook feeds are stored as events; search them with memory.search",
        ));
    }
    let mut items = fetch_items(ports, caller, &feed).await?;
    items.truncate(args.limit.unwrap_or(100).clamp(1, 1000));
    Ok(FeedItems { items })
}

/// The event a feed item becomes.
pub fn item_event(ports: &Ports, feed: &Feed, item: &Value) -> Event {
    let content = feed
        .content_pointer
        .as_deref()
        .and_then(|p| item.pointer(p))
        .map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .unwrap_or_else(|| item.to_string());
    Event {
        id: format!("evt_{}", new_ulid(ports)),
        kind: feed.event_kind.clone(),
        content: content.chars().take(MAX_CONTENT_CHARS).collect(),
        payload: Some(item.clone()),
        entity_ids: Vec::new(),
        author: format!("feed:{}", feed.name),
        supersedes_event_id: None,
        origin_id: None,
        occurred_at_ms: None,
        created_at_ms: ports.clock.now_ms(),
    }
}

/// Pulls a connection feed now: new items land as events, deliveries seen before are skipped.
/// Returns the new events too, for the reactions that follow the commit.
pub async fn pull(
    ports: &Ports,
    memory: &MemoryService,
    caller: &Caller,
    args: ByName,
) -> Result<(PullResult, Vec<Event>)> {
    let feed = get(ports, caller, &args.name).await?;
    if feed.kind != FeedKind::Connection {
        return Err(LoreError::invalid(
            "name",
            "only connection feeds are pulled; virtual feeds are read live with feeds.read",
        ));
    }
    let items = fetch_items(ports, caller, &feed).await?;
    for (i, item) in items.iter().enumerate() {
        lore_base::schema::check_stored_depth(item, &format!("items/{i}"))?;
    }
    let id_pointer = feed.id_pointer.as_deref().unwrap_or("/id");
    let batch: Vec<FeedItem> = items
        .iter()
        .map(|item| {
            let origin = match item.pointer(id_pointer) {
                Some(Value::String(s)) => s.clone(),
                Some(v) if !v.is_null() => v.to_string(),
                _ => lore_base::keys::sha256_hex(&item.to_string()),
            };
            let mut event = item_event(ports, &feed, item);
            event.origin_id = Some(origin.clone());
            FeedItem {
                origin_key: caller
                    .keys()
                    .origin(&feed.name, &lore_base::keys::sha256_hex(&origin)),
                event,
            }
        })
        .collect();
    let outcome = memory
        .append_feed_items(ports, caller.keys(), &batch)
        .await?;
    let events = batch
        .into_iter()
        .zip(&outcome)
        .filter(|(_, (_, new))| *new)
        .map(|(item, _)| item.event)
        .collect();
    let added: Vec<String> = outcome
        .iter()
        .filter(|(_, new)| *new)
        .map(|(id, _)| id.clone())
        .collect();
    Ok((
        PullResult {
            duplicates: outcome.len() - added.len(),
            added,
        },
        events,
    ))
}
