//! A webhook delivery to a feed (`POST /hooks/{org}/{feed}`): the sender proves it holds the
//! feed's secret (an HMAC-SHA256 of the body in `X-Lore-Signature` or `X-Hub-Signature-256`,
//! or the secret as a bearer token, as the feed says); the JSON body lands as one event of the
//! feed's kind, deduplicated by the delivery id (or else the body's hash).
//!
//! This is the one way into an org without a `Caller`: the feed's secret is the credential,
//! and it opens only that feed of that org. The front reads the HTTP request into a
//! [`Delivery`]; everything that needs the org's records is here.

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

use super::feeds::{self, Feed, FeedKind, WebhookAuth};
use lore_base::error::{LoreError, Result};
use lore_base::ids::OrgId;
use lore_base::keys::{OrgKeys, sha256_hex};
use lore_base::ports::Ports;
use lore_memory::event::Event;
use lore_memory::{FeedItem, MemoryService};

/// Largest delivery body.
pub const MAX_DELIVERY_BYTES: usize = 256 * 1024;

/// One delivery as the transport brought it.
pub struct Delivery<'a> {
    pub body: &'a [u8],
    /// Whether the body was sent as JSON (`application/json` or `+json`).
    pub json: bool,
    /// `X-Lore-Signature` or `X-Hub-Signature-256`.
    pub signature: Option<&'a str>,
    /// The `Authorization` header.
    pub authorization: Option<&'a str>,
    /// `X-Lore-Delivery`, `X-GitHub-Delivery` or `Idempotency-Key`.
    pub delivery_id: Option<&'a str>,
}

/// What a delivery became.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Delivered {
    /// The event's id (the earlier one's, for a repeated delivery).
    pub id: String,
    /// Whether this delivery was seen before.
    pub duplicate: bool,
}

fn hex_decode(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Equal in time that does not depend on where the inputs differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn verified(delivery: &Delivery<'_>, feed: &Feed, secret: &[u8]) -> bool {
    match feed.auth.unwrap_or_default() {
        WebhookAuth::Hmac => {
            let Some(sig) = delivery
                .signature
                .and_then(|s| s.trim().strip_prefix("sha256="))
                .and_then(hex_decode)
            else {
                return false;
            };
            let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
                return false;
            };
            mac.update(delivery.body);
            mac.verify_slice(&sig).is_ok()
        }
        WebhookAuth::Bearer => delivery
            .authorization
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .is_some_and(|(_, token)| same(token.trim().as_bytes(), secret)),
    }
}

/// Verifies and lands one delivery; returns what it became and the new events (none for a
/// repeated delivery), for the reactions that follow the commit.
pub async fn deliver(
    ports: &Ports,
    memory: &MemoryService,
    org: &OrgId,
    feed_name: &str,
    delivery: Delivery<'_>,
) -> Result<(Delivered, Vec<Event>)> {
    let not_found = || LoreError::not_found(format!("webhook feed {feed_name:?} in org {org}"));
    if super::check_name("feed", feed_name).is_err() {
        return Err(not_found());
    }
    let keys = OrgKeys::new(org);
    let feed: Option<Feed> = ports.record(&keys.named("feed", feed_name)).await?;
    let secret = ports.storage.get(&keys.secret("feed", feed_name)).await?;
    let (feed, secret) = match feed.zip(secret) {
        Some((feed, secret)) if feed.kind == FeedKind::Webhook => (feed, secret),
        _ => return Err(not_found()),
    };
    if !verified(&delivery, &feed, &secret) {
        return Err(LoreError::Unauthorized(
            match feed.auth.unwrap_or_default() {
                WebhookAuth::Hmac => {
                    "sign the body: X-Lore-Signature: sha256=<hex HMAC-SHA256 of the body with the feed's secret>"
                }
                WebhookAuth::Bearer => "send the feed's secret as Authorization: Bearer <secret>",
            }
            .into(),
        ));
    }
    if !delivery.json {
        return Err(LoreError::invalid(
            "content-type",
            "deliveries are JSON: send Content-Type: application/json",
        ));
    }
    let body: Value = serde_json::from_slice(delivery.body)
        .map_err(|e| LoreError::invalid("body", format!("the body is not valid JSON: {e}")))?;
    let depth = lore_base::schema::depth(&body);
    if depth > lore_base::schema::MAX_STORED_DEPTH {
        return Err(LoreError::invalid(
            "body",
            format!(
                "the body nests {depth} levels deep; lore stores values at most {} levels deep (objects and arrays)",
                lore_base::schema::MAX_STORED_DEPTH
            ),
        ));
    }
    let delivery_id = delivery
        .delivery_id
        .map(str::trim)
        .filter(|d| !d.is_empty() && d.len() <= 200)
        .map_or_else(
            || format!("sha256:{}", sha256_hex(&body.to_string())),
            str::to_string,
        );
    let mut event = feeds::item_event(ports, &feed, &body);
    event.origin_id = Some(delivery_id.clone());
    let item = FeedItem {
        origin_key: keys.origin(&feed.name, &sha256_hex(&delivery_id)),
        event,
    };
    let event = item.event.clone();
    let out = memory.append_feed_items(ports, &keys, &[item]).await?;
    let (id, new) = out.into_iter().next().unwrap_or_default();
    let events = if new { vec![event] } else { Vec::new() };
    Ok((
        Delivered {
            id,
            duplicate: !new,
        },
        events,
    ))
}
