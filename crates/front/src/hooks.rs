//! Webhook deliveries: `POST /hooks/{org}/{feed}`. The front reads the request into a
//! [`Delivery`] (body, content type, signature, authorization, delivery id) and the org engine
//! verifies it against the feed's secret and lands it (see
//! [`lore_records::webhooks`]). Answers `202 {"id", "duplicate"}`.

use http::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};

use crate::instance::Lore;
use crate::request_log::RequestLog;
use lore_base::error::LoreError;
use lore_records::webhooks::{Delivery, MAX_DELIVERY_BYTES};

fn reply(status: StatusCode, body: Value) -> Response<Vec<u8>> {
    crate::responses::json_response(status, body)
}

fn error(status: StatusCode, code: &str, message: impl Into<String>) -> Response<Vec<u8>> {
    reply(
        status,
        json!({"error": {"code": code, "message": message.into()}}),
    )
}

fn header<'a>(request: &'a Request<Vec<u8>>, name: &str) -> Option<&'a str> {
    crate::headers::get(request.headers(), name)
}

pub async fn handle(
    lore: &Lore,
    request: &Request<Vec<u8>>,
    org: &str,
    feed: &str,
) -> Response<Vec<u8>> {
    if let Some(log) = RequestLog::of(request) {
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
    let json = header(request, "content-type").is_some_and(|ct| {
        let media = ct
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        media == "application/json" || media.ends_with("+json")
    });
    let delivery = Delivery {
        body: request.body(),
        json,
        signature: header(request, "x-lore-signature")
            .or_else(|| header(request, "x-hub-signature-256")),
        authorization: header(request, "authorization"),
        delivery_id: ["x-lore-delivery", "x-github-delivery", "idempotency-key"]
            .iter()
            .find_map(|h| header(request, h)),
    };
    match lore.engine.deliver(org, feed, delivery).await {
        Ok(delivered) => reply(
            StatusCode::ACCEPTED,
            json!({"id": delivered.id, "duplicate": delivered.duplicate}),
        ),
        Err(
            e @ (LoreError::NotFound { .. }
            | LoreError::Unauthorized(_)
            | LoreError::InvalidArgument { .. }),
        ) => {
            let status = StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
            let message = match &e {
                LoreError::Unauthorized(m) => m.clone(),
                LoreError::InvalidArgument { message, .. } => message.clone(),
                _ => format!("no webhook feed {feed:?} in org {org:?}"),
            };
            error(status, e.code(), message)
        }
        Err(e) => crate::api::error_response(&e),
    }
}
