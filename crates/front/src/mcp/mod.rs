//! The MCP endpoint (`/mcp`, `/mcp/{org}`) over Streamable HTTP, serving both protocol eras on
//! one URL:
//!
//! - **legacy** (`2025-03-26`, `2025-06-18`, `2025-11-25`): `initialize` handshake, optional
//!   sessions (`Mcp-Session-Id`), `ping`, `logging/setLevel` — see `legacy.rs`;
//! - **current** (`2026-07-28`): stateless, `server/discover`, per-request `_meta`, header
//!   agreement — see `stateless.rs`.
//!
//! A request is in the current era when its `_meta` names a protocol version or its
//! `MCP-Protocol-Version` header is not a legacy one; otherwise it is legacy.

pub mod endpoint;
pub mod exchange;
#[cfg(feature = "conformance-fixtures")]
pub mod fixtures;
pub mod jsonrpc;
mod legacy;
mod methods;
pub mod reply;
pub mod result;
mod stateless;
pub mod versions;

use http::{Method, Request, Response};
use serde_json::Value;

use crate::headers;
use crate::instance::Lore;
use crate::request_log::RequestLog;
use endpoint::Endpoint;
use jsonrpc::RpcError;
use lore_base::error::LoreError;
use lore_base::keys::OrgKeys;
use lore_directory::Caller;
use reply::McpReply;
use versions::{LEGACY_VERSIONS, META_PROTOCOL_VERSION, VERSION_2026, unsupported_version};

/// Request headers a browser client may send (CORS preflight).
const CORS_ALLOW_HEADERS: &str = "authorization, content-type, accept, mcp-protocol-version, \
     mcp-session-id, mcp-method, mcp-name, last-event-id";
/// Response headers a browser client may read.
const CORS_EXPOSE_HEADERS: &str = "mcp-session-id, mcp-protocol-version, www-authenticate";

/// Entry point for every request to the MCP endpoint.
pub async fn handle(
    lore: &Lore,
    request: Request<Vec<u8>>,
    path_org: Option<&str>,
    stream: Option<std::rc::Rc<dyn reply::ReplyStream>>,
) -> Response<Vec<u8>> {
    if let Err(reason) = lore.config.origins.check(request.headers()) {
        return McpReply::error(&RpcError::new(jsonrpc::FORBIDDEN, reason, 403), None).into_http();
    }
    // Past the policy check, a request's Origin is an allowed one.
    let origin = headers::get(request.headers(), "origin").map(str::to_string);
    // A streamed head carries the CORS headers the reply would have.
    let stream = stream.map(|out| {
        let cors = origin.as_ref().map_or_else(Vec::new, |o| {
            vec![
                ("access-control-allow-origin".to_string(), o.clone()),
                (
                    "access-control-expose-headers".to_string(),
                    CORS_EXPOSE_HEADERS.to_string(),
                ),
                ("vary".to_string(), "Origin".to_string()),
            ]
        });
        std::rc::Rc::new(reply::Streamer::new(out, cors))
    });
    let mut reply = match *request.method() {
        Method::POST => post(lore, &request, path_org, stream).await,
        Method::DELETE => delete(lore, &request, path_org).await,
        Method::OPTIONS if origin.is_some() => McpReply {
            status: 204,
            body: reply::Body::Empty,
            headers: Vec::new(),
        }
        .header("access-control-allow-methods", "POST, DELETE")
        .header("access-control-allow-headers", CORS_ALLOW_HEADERS)
        .header("access-control-max-age", "86400"),
        _ => McpReply::error(
            &RpcError::new(
                jsonrpc::INVALID_REQUEST,
                format!(
                    "{} is not supported on the MCP endpoint; send JSON-RPC with POST",
                    request.method()
                ),
                405,
            ),
            None,
        )
        .header("allow", "POST, DELETE"),
    };
    // A 403 for a missing scope points at the metadata too, so the client can step up.
    let steps_up = |name: &str, value: &str| {
        name == "www-authenticate"
            && value.contains("insufficient_scope")
            && !value.contains("resource_metadata=")
    };
    if reply.headers.iter().any(|(n, v)| steps_up(n, v))
        && let Some(url) = resource_metadata(lore, &request, path_org)
    {
        for (name, value) in reply.headers.iter_mut() {
            if steps_up(name, value) {
                value.push_str(&format!(", resource_metadata=\"{url}\""));
            }
        }
    }
    match origin {
        Some(origin) => reply
            .header("access-control-allow-origin", origin)
            .header("access-control-expose-headers", CORS_EXPOSE_HEADERS)
            .header("vary", "Origin")
            .into_http(),
        None => reply.into_http(),
    }
}

/// The caller of this request, with failures mapped to 401/403. `first_reads`: the org keys
/// the request reads first, read with the auth stamp of a caller kept from before.
async fn authenticate(
    lore: &Lore,
    request: &Request<Vec<u8>>,
    path_org: Option<&str>,
    first_reads: impl FnOnce(&OrgKeys) -> Vec<String>,
) -> Result<Caller, RpcError> {
    lore.authenticate_reading(request.headers(), path_org, first_reads)
        .await
        .map_err(|(e, token_was_sent)| match e {
            LoreError::Unauthorized(m) => unauthorized(
                &m,
                token_was_sent,
                resource_metadata(lore, request, path_org).as_deref(),
            ),
            LoreError::Forbidden(m) => {
                RpcError::new(jsonrpc::FORBIDDEN, format!("forbidden: {m}"), 403)
            }
            e @ LoreError::RateLimited { .. } => {
                let retry = e.retry_after_secs().unwrap_or(1);
                RpcError::new(jsonrpc::RATE_LIMITED, e.to_string(), 429)
                    .with_data(e.to_json())
                    .with_header("retry-after", retry.to_string())
            }
            other => RpcError::internal(other.to_string()),
        })
}

/// The URL of this endpoint's protected resource metadata (RFC 9728), for challenges.
fn resource_metadata(
    lore: &Lore,
    request: &Request<Vec<u8>>,
    path_org: Option<&str>,
) -> Option<String> {
    let base = lore.config.base_url(request.headers())?;
    let org = path_org.filter(|o| lore_base::ids::OrgId::parse(o).is_ok());
    Some(crate::oauth::metadata::resource_metadata_url(&base, org))
}

fn unauthorized(message: &str, token_was_sent: bool, resource_metadata: Option<&str>) -> RpcError {
    let challenge = crate::oauth::metadata::unauthorized_challenge(
        resource_metadata,
        token_was_sent.then_some(message),
    );
    RpcError::new(
        jsonrpc::UNAUTHORIZED,
        format!("unauthorized: {message}"),
        401,
    )
    .with_header("www-authenticate", challenge)
}

fn content_type_ok(request: &Request<Vec<u8>>) -> bool {
    headers::get(request.headers(), "content-type").is_some_and(|ct| {
        ct.split(';')
            .next()
            .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
    })
}

/// Whether the client can read SSE; it must accept JSON at least.
fn accepts(request: &Request<Vec<u8>>) -> Result<bool, RpcError> {
    let Some(accept) = headers::get(request.headers(), "accept") else {
        return Ok(false);
    };
    let lower = accept.to_ascii_lowercase();
    let sse = lower.contains("text/event-stream") || lower.contains("*/*");
    let json = lower.contains("application/json")
        || lower.contains("application/*")
        || lower.contains("*/*");
    if !json && !sse {
        return Err(RpcError::new(
            jsonrpc::INVALID_REQUEST,
            "the Accept header must allow application/json and text/event-stream",
            406,
        ));
    }
    Ok(sse)
}

async fn post(
    lore: &Lore,
    request: &Request<Vec<u8>>,
    path_org: Option<&str>,
    stream: Option<std::rc::Rc<reply::Streamer>>,
) -> McpReply {
    if request.body().len() > lore.config.max_body_bytes {
        return McpReply::error(&too_large(lore.config.max_body_bytes), None);
    }
    // The body is parsed once: here, when the token's caller is kept from before (a tool call
    // then has the keys it reads first read with the caller's auth stamp), else below.
    let body = std::cell::OnceCell::new();
    let first_reads = |keys: &OrgKeys| {
        if !content_type_ok(request) {
            return Vec::new();
        }
        body.get_or_init(|| serde_json::from_slice::<Value>(request.body()))
            .as_ref()
            .ok()
            .and_then(called_tool)
            .and_then(lore_engine::tools::find)
            .and_then(|tool| tool.first_reads)
            .map_or_else(Vec::new, |reads| reads(keys))
    };
    let caller = match authenticate(lore, request, path_org, first_reads).await {
        Ok(c) => c,
        Err(e) => return McpReply::error(&e, None),
    };
    if let Some(log) = RequestLog::of(request) {
        log.caller(&caller);
    }
    let endpoint = match Endpoint::of(lore, request, &caller).await {
        Ok(e) => e,
        Err(e) => return McpReply::error(&e, None),
    };
    if !content_type_ok(request) {
        let e = RpcError::new(
            jsonrpc::INVALID_REQUEST,
            "Content-Type must be application/json",
            415,
        );
        return McpReply::error(&e, None);
    }
    let sse_ok = match accepts(request) {
        Ok(s) => s,
        Err(e) => return McpReply::error(&e, None),
    };
    let parsed = body
        .into_inner()
        .unwrap_or_else(|| serde_json::from_slice(request.body()));
    let value: Value = match parsed {
        Ok(v) => v,
        Err(e) => {
            let e = RpcError::new(
                jsonrpc::PARSE_ERROR,
                format!("Parse error: the body is not valid JSON ({e})"),
                400,
            );
            return McpReply::error(&e, None);
        }
    };
    let headers = request.headers();
    let header_version = headers::get(headers, headers::PROTOCOL_VERSION);
    if let Value::Array(batch) = value {
        return legacy::batch(lore, &caller, &endpoint, headers, batch, sse_ok).await;
    }
    let id = jsonrpc::salvage_id(&value);
    let message = match jsonrpc::parse_message(value) {
        Ok(m) => m,
        Err(e) => return McpReply::error(&e, id.as_ref()),
    };
    if let (Some(log), Some(method)) = (&endpoint.log, message.method()) {
        log.rpc_method(method);
    }
    let meta_version = message
        .params()
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(META_PROTOCOL_VERSION));
    // A `_meta` version only selects this era when it is not a legacy one; a 2026 header does
    // too, so a header and `_meta` that disagree are answered as a header mismatch.
    let meta_is_current = meta_version
        .and_then(Value::as_str)
        .is_none_or(|v| !LEGACY_VERSIONS.contains(&v));
    let is_current =
        (meta_version.is_some() && meta_is_current) || header_version == Some(VERSION_2026);
    if is_current {
        return stateless::handle(lore, &caller, &endpoint, headers, message, sse_ok, stream).await;
    }
    if let Some(h) = header_version
        && !LEGACY_VERSIONS.contains(&h)
    {
        return McpReply::error(&unsupported_version(h, 400), id.as_ref());
    }
    legacy::handle(lore, &caller, &endpoint, headers, message, sse_ok, stream).await
}

/// The tool a single JSON-RPC `tools/call` message calls.
fn called_tool(message: &Value) -> Option<&str> {
    if message.get("method")?.as_str()? != "tools/call" {
        return None;
    }
    message.get("params")?.get("name")?.as_str()
}

pub fn too_large(limit: usize) -> RpcError {
    RpcError::new(
        jsonrpc::INVALID_REQUEST,
        format!(
            "the request body is larger than the {} KiB limit",
            limit / 1024
        ),
        413,
    )
}

async fn delete(lore: &Lore, request: &Request<Vec<u8>>, path_org: Option<&str>) -> McpReply {
    let headers = request.headers();
    let version = headers::get(headers, headers::PROTOCOL_VERSION);
    let session = headers::get(headers, headers::SESSION_ID);
    match (session, version) {
        (Some(id), v) if v.is_none_or(|v| LEGACY_VERSIONS.contains(&v)) => {
            let caller = match authenticate(lore, request, path_org, |_| Vec::new()).await {
                Ok(c) => c,
                Err(e) => return McpReply::error(&e, None),
            };
            legacy::end_session(lore, &caller, id).await
        }
        _ => McpReply::error(
            &RpcError::new(
                jsonrpc::INVALID_REQUEST,
                "DELETE ends a legacy session; send its Mcp-Session-Id",
                405,
            ),
            None,
        )
        .header("allow", "POST, DELETE"),
    }
}
