//! Webhook deliveries: `POST /hooks/{org}/{feed}`. The sender proves it holds the feed's
//! secret (an HMAC-SHA256 of the body in `X-Lore-Signature` or `X-Hub-Signature-256`, or the
//! secret as a bearer token, as the feed says); the JSON body lands as one event of the feed's
//! kind, deduplicated by the delivery id header (`X-Lore-Delivery`, `X-GitHub-Delivery`,
//! `Idempotency-Key`) or else the body's hash. Answers `202 {"id": ...}`.
//!
//! This is the one way into an org without a [`Caller`](crate::auth::Caller): the feed's
//! secret is the credential, and it opens only that feed of that org.

use hmac::{Hmac, Mac};
use http::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};
use sha2::Sha256;

use crate::Lore;
use crate::error::LoreError;
use crate::ids::OrgId;
use crate::keys::{OrgKeys, sha256_hex};
use crate::memory::FeedItem;
use crate::records::feeds::{self, Feed, FeedKind, WebhookAuth};

/// Largest delivery body.
pub const MAX_DELIVERY_BYTES: usize = 256 * 1024;

fn reply(status: StatusCode, body: Value) -> Response<Vec<u8>> {
    let mut r = Response::new(serde_json::to_vec(&body).unwrap_or_default());
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

fn error(status: StatusCode, code: &str, message: impl Into<String>) -> Response<Vec<u8>> {
    reply(
        status,
        json!({"error": {"code": code, "message": message.into()}}),
    )
}

fn header<'a>(request: &'a Request<Vec<u8>>, name: &str) -> Option<&'a str> {
    crate::mcp::headers::get(request.headers(), name)
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

fn verified(request: &Request<Vec<u8>>, feed: &Feed, secret: &[u8]) -> bool {
    match feed.auth.unwrap_or_default() {
        WebhookAuth::Hmac => {
            let Some(sig) = header(request, "x-lore-signature")
                .or_else(|| header(request, "x-hub-signature-256"))
                .and_then(|s| s.trim().strip_prefix("sha256="))
                .and_then(hex_decode)
            else {
                return false;
            };
            let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
                return false;
            };
            mac.update(request.body());
            mac.verify_slice(&sig).is_ok()
        }
        WebhookAuth::Bearer => header(request, "authorization")
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .is_some_and(|(_, token)| same(token.trim().as_bytes(), secret)),
    }
}

pub async fn handle(
    lore: &Lore,
    request: &Request<Vec<u8>>,
    org: &str,
    feed_name: &str,
) -> Response<Vec<u8>> {
    if let Some(log) = crate::request_log::RequestLog::of(request) {
        log.org(org);
    }
    if request.method() != Method::POST {
        let mut r = error(
            StatusCode::METHOD_NOT_ALLOWED,
            "invalid_argument",
            "deliver webhooks with POST",
        );
        r.headers_mut()
            .insert(http::header::ALLOW, http::HeaderValue::from_static("POST"));
        return r;
    }
    if request.body().len() > MAX_DELIVERY_BYTES {
        return error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_argument",
            format!("a delivery is at most {} KiB", MAX_DELIVERY_BYTES / 1024),
        );
    }
    let not_found = || {
        error(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no webhook feed {feed_name:?} in org {org:?}"),
        )
    };
    let (Ok(org), Ok(())) = (
        OrgId::parse(org),
        crate::records::check_name("feed", feed_name),
    ) else {
        return not_found();
    };
    let keys = OrgKeys::new(&org);
    let ports = &lore.ports;
    let found = async {
        let feed: Option<Feed> = ports.record(&keys.named("feed", feed_name)).await?;
        let secret = ports.storage.get(&keys.secret("feed", feed_name)).await?;
        Ok::<_, LoreError>(feed.zip(secret))
    }
    .await;
    let (feed, secret) = match found {
        Ok(Some((feed, secret))) if feed.kind == FeedKind::Webhook => (feed, secret),
        Ok(_) => return not_found(),
        Err(e) => return crate::api::error_response(&e),
    };
    if !verified(request, &feed, &secret) {
        return error(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            match feed.auth.unwrap_or_default() {
                WebhookAuth::Hmac => {
                    "sign the body: X-Lore-Signature: sha256=<hex HMAC-SHA256 of the body with the feed's secret>"
                }
                WebhookAuth::Bearer => "send the feed's secret as Authorization: Bearer <secret>",
            },
        );
    }
    let json_type = header(request, "content-type").is_some_and(|ct| {
        let media = ct
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        media == "application/json" || media.ends_with("+json")
    });
    if !json_type {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_argument",
            "deliveries are JSON: send Content-Type: application/json",
        );
    }
    let body: Value = match serde_json::from_slice(request.body()) {
        Ok(v) if crate::schema::depth(&v) > crate::schema::MAX_STORED_DEPTH => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_argument",
                format!(
                    "the body nests {} levels deep; lore stores values at most {} levels deep (objects and arrays)",
                    crate::schema::depth(&v),
                    crate::schema::MAX_STORED_DEPTH
                ),
            );
        }
        Ok(v) => v,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_argument",
                format!("the body is not valid JSON: {e}"),
            );
        }
    };
    let delivery = ["x-lore-delivery", "x-github-delivery", "idempotency-key"]
        .iter()
        .find_map(|h| header(request, h))
        .map(str::trim)
        .filter(|d| !d.is_empty() && d.len() <= 200)
        .map_or_else(
            || format!("sha256:{}", sha256_hex(&body.to_string())),
            str::to_string,
        );
    let mut event = feeds::item_event(ports, &feed, &body);
    event.origin_id = Some(delivery.clone());
    let item = FeedItem {
        origin_key: keys.origin(&feed.name, &sha256_hex(&delivery)),
        event,
    };
    let event = item.event.clone();
    match lore.memory.append_feed_items(ports, &keys, &[item]).await {
        Ok(out) => {
            let (id, new) = out.into_iter().next().unwrap_or_default();
            if new {
                lore.after_commit(&org, vec![event]).await;
            }
            reply(StatusCode::ACCEPTED, json!({"id": id, "duplicate": !new}))
        }
        Err(e) => crate::api::error_response(&e),
    }
}
