//! The legacy protocol era (2025-03-26, 2025-06-18, 2025-11-25): the `initialize` handshake,
//! optional sessions kept in storage, `ping`, `logging/setLevel`, and (2025-03-26 only) batches.

use http::HeaderMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::exchange::{Exchange, LogLevel};
use super::jsonrpc::{self, Incoming, RpcError};
use super::reply::{Body, McpReply};
use super::versions::LEGACY_VERSIONS;
use crate::headers;
use crate::instance::Lore;
use lore_directory::Caller;

/// The version assumed when a legacy client sends no `MCP-Protocol-Version` header.
const DEFAULT_VERSION: &str = "2025-03-26";
/// Sessions end this long after `initialize`; the client then initializes again.
const SESSION_TTL_MS: i64 = 24 * 60 * 60 * 1000;
/// The only legacy version that allows JSON-RPC batches.
const BATCH_VERSION: &str = "2025-03-26";

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Session {
    principal: String,
    protocol_version: String,
    #[serde(default)]
    log_level: Option<String>,
    created_at_ms: i64,
}

fn session_not_found(id: &str) -> RpcError {
    RpcError::new(
        jsonrpc::SESSION_NOT_FOUND,
        format!("Session not found: {id:?} is unknown or was ended; initialize again"),
        404,
    )
}

fn valid_session_id(id: &str) -> bool {
    (1..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric())
}

async fn load_session(lore: &Lore, caller: &Caller, id: &str) -> Result<Session, RpcError> {
    if !valid_session_id(id) {
        return Err(session_not_found(id));
    }
    let stored = lore
        .ports()
        .storage
        .get(&caller.keys().session(id))
        .await
        .map_err(|e| RpcError::internal(e.to_string()))?;
    let session: Session = stored
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .ok_or_else(|| session_not_found(id))?;
    // A session belongs to the principal that opened it; to anyone else it does not exist.
    if session.principal != caller.principal().id {
        return Err(session_not_found(id));
    }
    if lore.ports().clock.now_ms() - session.created_at_ms > SESSION_TTL_MS {
        // Expired: gone for good (best effort; a failed delete is retried on the next use).
        let _ = lore
            .ports()
            .storage
            .delete(&caller.keys().session(id))
            .await;
        return Err(session_not_found(id));
    }
    Ok(session)
}

async fn save_session(
    lore: &Lore,
    caller: &Caller,
    id: &str,
    session: &Session,
) -> Result<(), RpcError> {
    let bytes = serde_json::to_vec(session).map_err(|e| RpcError::internal(e.to_string()))?;
    lore.ports()
        .storage
        .put(&caller.keys().session(id), bytes)
        .await
        .map_err(|e| RpcError::internal(e.to_string()))
}

pub async fn end_session(lore: &Lore, caller: &Caller, id: &str) -> McpReply {
    match load_session(lore, caller, id).await {
        Ok(_) => match lore
            .ports()
            .storage
            .delete(&caller.keys().session(id))
            .await
        {
            Ok(()) => McpReply {
                status: 204,
                body: Body::Empty,
                headers: Vec::new(),
            },
            Err(e) => McpReply::error(&RpcError::internal(e.to_string()), None),
        },
        Err(e) => McpReply::error(&e, None),
    }
}

fn capabilities() -> Value {
    #[allow(unused_mut)]
    let mut caps = json!({ "tools": { "listChanged": false }, "logging": {} });
    #[cfg(feature = "conformance-fixtures")]
    super::fixtures::add_capabilities(&mut caps, false);
    caps
}

async fn initialize(
    lore: &Lore,
    caller: &Caller,
    endpoint: &super::endpoint::Endpoint,
    id: &Value,
    params: &Map<String, Value>,
) -> McpReply {
    let Some(requested) = params.get("protocolVersion").and_then(Value::as_str) else {
        let e = RpcError::new(
            jsonrpc::INVALID_PARAMS,
            "initialize needs params.protocolVersion, a string",
            400,
        );
        return McpReply::error(&e, Some(id));
    };
    let version = if LEGACY_VERSIONS.contains(&requested) {
        requested
    } else {
        LEGACY_VERSIONS[0]
    };
    let result = json!({
        "protocolVersion": version,
        "capabilities": capabilities(),
        "serverInfo": lore.server_info(),
        "instructions": endpoint.instructions(),
    });
    let mut reply = McpReply::json(200, jsonrpc::result_response(id, result));
    if lore.config.sessions {
        let session_id = lore.ports().random_hex(16);
        let session = Session {
            principal: caller.principal().id.clone(),
            protocol_version: version.to_string(),
            log_level: None,
            created_at_ms: lore.ports().clock.now_ms(),
        };
        if let Err(e) = save_session(lore, caller, &session_id, &session).await {
            return McpReply::error(&e, Some(id));
        }
        reply = reply.header(headers::SESSION_ID, session_id);
    }
    reply
}

/// Runs one request of an (optional) session; returns the result and any notifications.
async fn dispatch(
    lore: &Lore,
    caller: &Caller,
    endpoint: &super::endpoint::Endpoint,
    session: &mut Option<(String, Session)>,
    method: &str,
    params: &Map<String, Value>,
    stream: Option<std::rc::Rc<super::reply::Streamer>>,
) -> (Result<Value, RpcError>, Vec<Value>, bool) {
    let mut ex = Exchange::new(lore, caller, endpoint, false, params);
    ex.stream_progress(stream);
    ex.log_level = session
        .as_ref()
        .and_then(|(_, s)| s.log_level.as_deref())
        .and_then(LogLevel::parse);
    let result = match method {
        "ping" => Ok(json!({})),
        "tools/list" => Ok(super::methods::tools_list(&ex)),
        "tools/call" => super::methods::tools_call(&ex, params).await,
        "logging/setLevel" => match params
            .get("level")
            .and_then(Value::as_str)
            .and_then(LogLevel::parse)
        {
            Some(level) => match session {
                Some((id, s)) => {
                    s.log_level = Some(level.as_str().to_string());
                    save_session(lore, caller, id, s).await.map(|()| json!({}))
                }
                // Without a session there is nowhere to keep the level: accepted, and logs stay off.
                None => Ok(json!({})),
            },
            None => Err(RpcError::new(
                jsonrpc::INVALID_PARAMS,
                format!("params.level must be one of {}", LogLevel::NAMES.join(", ")),
                200,
            )),
        },
        "initialize" => Err(RpcError::invalid_request(
            "initialize must be sent alone, not in a batch",
        )),
        _ => {
            #[cfg(feature = "conformance-fixtures")]
            if let Some(r) = super::fixtures::dispatch(&ex, method, params).await {
                return (r, ex.take_notifications(), ex.streamed());
            }
            Err(RpcError::method_not_found(method, 200))
        }
    };
    (result, ex.take_notifications(), ex.streamed())
}

/// The protocol version of a legacy request: its header, else its session's, else the
/// default; a header that contradicts the session is refused.
fn negotiated_version<'a>(
    headers: &'a HeaderMap,
    session: &'a Option<(String, Session)>,
) -> Result<&'a str, RpcError> {
    let header = headers::get(headers, headers::PROTOCOL_VERSION);
    match (header, session) {
        (Some(h), Some((_, s))) if h != s.protocol_version => {
            Err(RpcError::invalid_request(format!(
                "MCP-Protocol-Version {h:?} differs from the {:?} this session negotiated",
                s.protocol_version
            )))
        }
        (Some(h), _) => Ok(h),
        (None, Some((_, s))) => Ok(&s.protocol_version),
        (None, None) => Ok(DEFAULT_VERSION),
    }
}

async fn session_from_headers(
    lore: &Lore,
    caller: &Caller,
    headers: &HeaderMap,
) -> Result<Option<(String, Session)>, RpcError> {
    match headers::get(headers, headers::SESSION_ID) {
        Some(id) => Ok(Some((
            id.to_string(),
            load_session(lore, caller, id).await?,
        ))),
        None => Ok(None),
    }
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
        Incoming::Response => return McpReply::accepted(),
        Incoming::Notification { .. } => {
            return match session_from_headers(lore, caller, headers).await {
                Ok(_) => McpReply::accepted(),
                Err(e) => McpReply::error(&e, None),
            };
        }
        Incoming::Request { id, method, params } => (id, method, params),
    };
    if method == "initialize" {
        return initialize(lore, caller, endpoint, &id, &params).await;
    }
    let mut session = match session_from_headers(lore, caller, headers).await {
        Ok(s) => s,
        Err(e) => return McpReply::error(&e, Some(&id)),
    };
    if let Err(e) = negotiated_version(headers, &session) {
        return McpReply::error(&e, Some(&id));
    }
    let wants_stream = params
        .get("_meta")
        .and_then(|m| m.get("progressToken"))
        .is_some();
    let stream = stream.filter(|_| sse_ok);
    let (result, notifications, streamed) = dispatch(
        lore,
        caller,
        endpoint,
        &mut session,
        &method,
        &params,
        stream,
    )
    .await;
    if streamed {
        return McpReply::rest_of_stream(&id, result, notifications);
    }
    McpReply::respond(&id, result, notifications, wants_stream, sse_ok)
}

/// A JSON-RPC batch: allowed only in 2025-03-26.
pub async fn batch(
    lore: &Lore,
    caller: &Caller,
    endpoint: &super::endpoint::Endpoint,
    headers: &HeaderMap,
    items: Vec<Value>,
    _sse_ok: bool,
) -> McpReply {
    let mut session = match session_from_headers(lore, caller, headers).await {
        Ok(s) => s,
        Err(e) => return McpReply::error(&e, None),
    };
    let version = match negotiated_version(headers, &session) {
        Ok(v) => v.to_string(),
        Err(e) => return McpReply::error(&e, None),
    };
    if version != BATCH_VERSION {
        let e = RpcError::invalid_request(format!(
            "JSON-RPC batches are not supported in protocol {version}; send one message per POST"
        ));
        return McpReply::error(&e, None);
    }
    if items.is_empty() {
        return McpReply::error(&RpcError::invalid_request("the batch is empty"), None);
    }
    let mut responses = Vec::new();
    for item in items {
        let id = jsonrpc::salvage_id(&item);
        match jsonrpc::parse_message(item) {
            Ok(Incoming::Request { id, method, params }) => {
                let (result, _, _) =
                    dispatch(lore, caller, endpoint, &mut session, &method, &params, None).await;
                responses.push(match result {
                    Ok(r) => jsonrpc::result_response(&id, r),
                    Err(e) => e.to_response(Some(&id)),
                });
            }
            Ok(_) => {}
            Err(e) => responses.push(e.to_response(id.as_ref())),
        }
    }
    if responses.is_empty() {
        McpReply::accepted()
    } else {
        McpReply::json(200, Value::Array(responses))
    }
}
