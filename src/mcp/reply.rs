//! What an MCP exchange sends back: a JSON body, an SSE stream of messages, or nothing (202),
//! turned into an HTTP response.

use http::{HeaderValue, Response, StatusCode};
use serde_json::Value;

use super::jsonrpc::{self, RpcError};

#[derive(Debug)]
pub enum Body {
    Empty,
    Json(Value),
    /// Notifications first, the response last, each as one `data:` event.
    Sse(Vec<Value>),
}

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body: Body,
    pub headers: Vec<(String, String)>,
}

impl Reply {
    pub fn accepted() -> Self {
        Self {
            status: 202,
            body: Body::Empty,
            headers: Vec::new(),
        }
    }
    pub fn json(status: u16, value: Value) -> Self {
        Self {
            status,
            body: Body::Json(value),
            headers: Vec::new(),
        }
    }
    pub fn error(error: &RpcError, id: Option<&Value>) -> Self {
        Self {
            status: error.http_status,
            body: Body::Json(error.to_response(id)),
            headers: error.headers.clone(),
        }
    }
    /// The reply to one request. Errors above the protocol (non-200 status) keep their status;
    /// otherwise the response is JSON, or SSE when notifications go first or `stream` (a
    /// progress token) asks for it and the client accepts SSE.
    pub fn respond(
        id: &Value,
        result: Result<Value, RpcError>,
        mut notifications: Vec<Value>,
        stream: bool,
        sse_ok: bool,
    ) -> Self {
        let response = match result {
            Ok(r) => jsonrpc::result_response(id, r),
            Err(e) if e.http_status != 200 => return Self::error(&e, Some(id)),
            Err(e) => e.to_response(Some(id)),
        };
        if sse_ok && (stream || !notifications.is_empty()) {
            notifications.push(response);
            return Self {
                status: 200,
                body: Body::Sse(notifications),
                headers: Vec::new(),
            };
        }
        Self::json(200, response)
    }

    pub fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_string(), value.into()));
        self
    }

    pub fn into_http(self) -> Response<Vec<u8>> {
        let (content_type, bytes) = match self.body {
            Body::Empty => (None, Vec::new()),
            Body::Json(v) => (
                Some("application/json"),
                serde_json::to_vec(&v).unwrap_or_default(),
            ),
            Body::Sse(messages) => {
                let mut out = Vec::new();
                for m in messages {
                    out.extend_from_slice(b"event: message\ndata: ");
                    out.extend_from_slice(&serde_json::to_vec(&m).unwrap_or_default());
                    out.extend_from_slice(b"\n\n");
                }
                (Some("text/event-stream"), out)
            }
        };
        let mut response = Response::new(bytes);
        *response.status_mut() =
            StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let headers = response.headers_mut();
        if let Some(ct) = content_type {
            headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static(ct));
            if ct == "text/event-stream" {
                headers.insert(
                    http::header::CACHE_CONTROL,
                    HeaderValue::from_static("no-cache"),
                );
            }
        }
        for (name, value) in self.headers {
            if let (Ok(name), Ok(value)) = (
                http::HeaderName::try_from(name.as_str()),
                HeaderValue::try_from(value.as_str()),
            ) {
                headers.append(name, value);
            }
        }
        response
    }
}
