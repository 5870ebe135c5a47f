//! JSON-RPC 2.0 envelopes as MCP uses them: parsing one incoming message, and the error type
//! every protocol failure becomes (with the HTTP status it is sent with).

use serde_json::{Map, Value, json};

pub const PARSE_ERROR: i32 = -32700;
pub const INVALID_REQUEST: i32 = -32600;
pub const METHOD_NOT_FOUND: i32 = -32601;
pub const INVALID_PARAMS: i32 = -32602;
pub const INTERNAL_ERROR: i32 = -32603;
/// Session unknown or ended (legacy era).
pub const SESSION_NOT_FOUND: i32 = -32001;
/// Authentication missing or invalid.
pub const UNAUTHORIZED: i32 = -32005;
/// Authenticated, but not allowed (wrong org, missing scope).
pub const FORBIDDEN: i32 = -32003;
/// The HTTP headers disagree with the body (2026-07-28).
pub const HEADER_MISMATCH: i32 = -32020;
pub const MISSING_CLIENT_CAPABILITY: i32 = -32021;
pub const UNSUPPORTED_PROTOCOL_VERSION: i32 = -32022;
/// Over a rate limit (lore's own code in the server range); HTTP 429 with `Retry-After`.
pub const RATE_LIMITED: i32 = -32029;

/// A protocol-level failure: a JSON-RPC error object plus how to send it over HTTP.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i32,
    pub message: String,
    pub data: Option<Value>,
    pub http_status: u16,
    /// Extra response headers (e.g. `WWW-Authenticate`).
    pub headers: Vec<(String, String)>,
}

impl RpcError {
    pub fn new(code: i32, message: impl Into<String>, http_status: u16) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
            http_status,
            headers: Vec::new(),
        }
    }
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }
    pub fn with_header(mut self, name: &str, value: String) -> Self {
        self.headers.push((name.to_string(), value));
        self
    }
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message, 400)
    }
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(INVALID_REQUEST, message, 400)
    }
    pub fn method_not_found(method: &str, status: u16) -> Self {
        Self::new(
            METHOD_NOT_FOUND,
            format!("Method not found: {method}"),
            status,
        )
        .with_data(json!({ "method": method }))
    }
    pub fn header_mismatch(message: impl Into<String>) -> Self {
        Self::new(HEADER_MISMATCH, message, 400)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(INTERNAL_ERROR, message, 500)
    }

    /// The JSON-RPC error response object.
    pub fn to_response(&self, id: Option<&Value>) -> Value {
        let mut error = json!({ "code": self.code, "message": self.message });
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        let mut response = json!({ "jsonrpc": "2.0", "error": error });
        response["id"] = id.cloned().unwrap_or(Value::Null);
        response
    }
}

/// One incoming JSON-RPC message.
#[derive(Debug, Clone)]
pub enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Map<String, Value>,
    },
    Notification {
        method: String,
        params: Map<String, Value>,
    },
    /// A client's response to a server request; lore sends none, so these are acknowledged.
    Response,
}

impl Incoming {
    pub fn method(&self) -> Option<&str> {
        match self {
            Self::Request { method, .. } | Self::Notification { method, .. } => Some(method),
            Self::Response => None,
        }
    }
    pub fn params(&self) -> Option<&Map<String, Value>> {
        match self {
            Self::Request { params, .. } | Self::Notification { params, .. } => Some(params),
            Self::Response => None,
        }
    }
    pub fn id(&self) -> Option<&Value> {
        match self {
            Self::Request { id, .. } => Some(id),
            _ => None,
        }
    }
}

/// Reads the request id if it is usable, so errors about the rest can still echo it.
pub fn salvage_id(value: &Value) -> Option<Value> {
    match value.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => Some(id.clone()),
        _ => None,
    }
}

/// Validates the shape of one message.
pub fn parse_message(value: Value) -> Result<Incoming, RpcError> {
    let Value::Object(mut obj) = value else {
        return Err(RpcError::invalid_request(
            "a JSON-RPC message must be a JSON object",
        ));
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(RpcError::invalid_request(
            "the message must have \"jsonrpc\": \"2.0\"",
        ));
    }
    let id = match obj.remove("id") {
        None => None,
        Some(id @ (Value::String(_) | Value::Number(_))) => Some(id),
        Some(Value::Null) => {
            return Err(RpcError::invalid_request("the request id must not be null"));
        }
        Some(_) => {
            return Err(RpcError::invalid_request(
                "the request id must be a string or a number",
            ));
        }
    };
    let params = match obj.remove("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(p)) => p,
        Some(_) => return Err(RpcError::invalid_params("params must be an object")),
    };
    match obj.remove("method") {
        Some(Value::String(method)) if !method.is_empty() => Ok(match id {
            Some(id) => Incoming::Request { id, method, params },
            None => Incoming::Notification { method, params },
        }),
        Some(_) => Err(RpcError::invalid_request(
            "method must be a non-empty string",
        )),
        None if id.is_some() && (obj.contains_key("result") || obj.contains_key("error")) => {
            Ok(Incoming::Response)
        }
        None => Err(RpcError::invalid_request("the message has no method")),
    }
}

/// A success response.
pub fn result_response(id: &Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

pub fn notification(method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "method": method, "params": params })
}
