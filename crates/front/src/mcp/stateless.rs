//! The current protocol era (2026-07-28): every request stands alone. Its `_meta` carries the
//! protocol version and client capabilities, its headers must agree with its body, and results
//! carry `resultType` (lists and discovery also `ttlMs`/`cacheScope`).

use http::HeaderMap;
use serde_json::{Map, Value, json};

use super::exchange::{Exchange, LogLevel};
use super::jsonrpc::{self, Incoming, RpcError};
use super::reply::McpReply;
use super::versions::{
    META_CLIENT_CAPABILITIES, META_LOG_LEVEL, META_PROTOCOL_VERSION, SUPPORTED_VERSIONS,
    VERSION_2026,
};
use crate::headers;
use crate::instance::Lore;
use lore_directory::Caller;

/// How long a discovery result may be reused: it is the same for every caller of this build.
const DISCOVER_TTL_MS: u64 = 300_000;

fn capabilities() -> Value {
    #[allow(unused_mut)]
    let mut caps = json!({ "tools": {} });
    #[cfg(feature = "conformance-fixtures")]
    super::fixtures::add_capabilities(&mut caps, true);
    caps
}

/// Checks `_meta`, the version headers, `Mcp-Method` and `Mcp-Name`, in the order the
/// specification gives, so each failure gets its own code.
fn validate(
    headers: &HeaderMap,
    method: &str,
    params: &Map<String, Value>,
) -> Result<(), RpcError> {
    let meta = params
        .get("_meta")
        .and_then(Value::as_object)
        .ok_or_else(|| {
            RpcError::new(
                jsonrpc::INVALID_PARAMS,
                "params._meta is required in protocol 2026-07-28",
                400,
            )
        })?;
    let version = meta
        .get(META_PROTOCOL_VERSION)
        .and_then(Value::as_str)
        .ok_or_else(|| {
            RpcError::new(
                jsonrpc::INVALID_PARAMS,
                format!("params._meta[\"{META_PROTOCOL_VERSION}\"] is required"),
                400,
            )
        })?;
    if !meta
        .get(META_CLIENT_CAPABILITIES)
        .is_some_and(Value::is_object)
    {
        return Err(RpcError::new(
            jsonrpc::INVALID_PARAMS,
            format!(
                "params._meta[\"{META_CLIENT_CAPABILITIES}\"] is required and must be an object"
            ),
            400,
        ));
    }
    match headers::get(headers, headers::PROTOCOL_VERSION) {
        None => {
            return Err(RpcError::header_mismatch(
                "the MCP-Protocol-Version header is required",
            ));
        }
        Some(h) if h != version => {
            return Err(RpcError::header_mismatch(format!(
                "MCP-Protocol-Version header {h:?} does not match _meta protocolVersion {version:?}"
            )));
        }
        Some(_) => {}
    }
    if version != VERSION_2026 {
        return Err(super::versions::unsupported_version(version, 400));
    }
    match headers::get(headers, headers::METHOD) {
        Some(h) if h == method => {}
        Some(h) => {
            return Err(RpcError::header_mismatch(format!(
                "Mcp-Method header {h:?} does not match method {method:?}"
            )));
        }
        None => {
            return Err(RpcError::header_mismatch(
                "the Mcp-Method header is required",
            ));
        }
    }
    let name_field = match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    };
    if let Some(field) = name_field {
        let body_name = params.get(field).and_then(Value::as_str);
        let header_name = headers::get(headers, headers::NAME).and_then(headers::decode_value);
        match (header_name, body_name) {
            (Some(h), Some(b)) if h == b => {}
            (None, _) => {
                return Err(RpcError::header_mismatch(format!(
                    "{method} needs the Mcp-Name header"
                )));
            }
            (Some(h), b) => {
                return Err(RpcError::header_mismatch(format!(
                    "Mcp-Name header {h:?} does not match params.{field} {:?}",
                    b.unwrap_or_default()
                )));
            }
        }
    }
    Ok(())
}

fn discover(lore: &Lore, endpoint: &super::endpoint::Endpoint) -> Value {
    json!({
        "resultType": "complete",
        "supportedVersions": SUPPORTED_VERSIONS,
        "capabilities": capabilities(),
        "instructions": endpoint.instructions(),
        "ttlMs": DISCOVER_TTL_MS,
        "cacheScope": "public",
        "_meta": { "io.modelcontextprotocol/serverInfo": lore.server_info() },
    })
}

pub async fn handle(
    lore: &Lore,
    caller: &Caller,
    endpoint: &super::endpoint::Endpoint,
    headers: &HeaderMap,
    message: Incoming,
    sse_ok: bool,
    stream: Option<std::rc::Rc<super::reply::Streamer>>,
) -> McpReply {
    let (id, method, params) = match message {
        Incoming::Request { id, method, params } => (id, method, params),
        // Notifications and client responses need no answer in this era.
        Incoming::Notification { .. } | Incoming::Response => return McpReply::accepted(),
    };
    if let Err(e) = validate(headers, &method, &params) {
        return McpReply::error(&e, Some(&id));
    }
    let meta = params.get("_meta").and_then(Value::as_object);
    let mut ex = Exchange::new(lore, caller, endpoint, true, &params);
    if sse_ok {
        ex.stream_progress(stream);
    }
    ex.log_level = meta
        .and_then(|m| m.get(META_LOG_LEVEL))
        .and_then(Value::as_str)
        .and_then(LogLevel::parse);
    ex.client_capabilities = meta
        .and_then(|m| m.get(META_CLIENT_CAPABILITIES))
        .cloned()
        .unwrap_or_else(|| json!({}));
    let result = match method.as_str() {
        "server/discover" => Ok(discover(lore, endpoint)),
        // Without a progress token a list has nothing to stream: its cached bytes go as they are.
        "tools/list" if ex.progress_token.is_none() => {
            return McpReply::raw_result(&id, &super::methods::tools_list_bytes(&ex));
        }
        "tools/list" => Ok(super::methods::tools_list(&ex)),
        "tools/call" => {
            let result = super::methods::call_tool(&ex, &params).await;
            // Nothing to stream before it: a tool's value is written to bytes, serialized once.
            if let Ok(r) = &result
                && ex.progress_token.is_none()
                && !ex.has_notifications()
                && let Some(bytes) = r.bytes(lore.server_info_bytes())
            {
                return McpReply::raw_result(&id, &bytes);
            }
            result.map(|r| ex.finish_result(r.into_value(), false))
        }
        _ => {
            #[cfg(feature = "conformance-fixtures")]
            if let Some(r) = super::fixtures::dispatch(&ex, &method, &params).await {
                return finish(&ex, id, r, sse_ok);
            }
            Err(RpcError::method_not_found(&method, 404))
        }
    };
    finish(&ex, id, result, sse_ok)
}

/// The reply, with the notifications the request produced going first.
fn finish(ex: &Exchange<'_>, id: Value, result: Result<Value, RpcError>, sse_ok: bool) -> McpReply {
    let notifications = ex.take_notifications();
    if ex.streamed() {
        return McpReply::rest_of_stream(&id, result, notifications);
    }
    McpReply::respond(
        &id,
        result,
        notifications,
        ex.progress_token.is_some(),
        sse_ok,
    )
}
