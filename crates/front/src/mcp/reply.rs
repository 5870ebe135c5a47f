//! What an MCP exchange sends back: a JSON body, an SSE stream of messages, or nothing (202),
//! turned into an HTTP response. Where the adapter can stream a body ([`ReplyStream`]), a
//! `tools/call` with a progress token streams its progress notifications as they happen.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use http::{HeaderValue, Response, StatusCode};
use serde_json::Value;

use super::jsonrpc::{self, RpcError};

/// Where a streamed reply goes as it is produced (natively: a channel-backed response body).
/// The core calls `start` once, before the first `send`; once it has, the response
/// [`crate::Lore::handle_streaming`] returns is only the rest of the body (its status and
/// headers are the ones `start` gave). Platform-neutral: a host that cannot stream passes
/// none and gets the whole reply, notifications first.
pub trait ReplyStream {
    fn start(&self, status: u16, headers: &[(String, String)]);
    fn send(&self, bytes: Vec<u8>);
}

/// What a host's task hands on from [`crate::Lore::handle_streaming`]: a streamed reply's
/// head once, then pieces of its body, and last the response the core returned (the whole
/// reply, or the rest of a streamed one's body).
pub enum Streamed {
    Head(u16, Vec<(String, String)>),
    Chunk(Vec<u8>),
    Whole(Response<Vec<u8>>),
}

/// The [`ReplyStream`] of a host that passes a reply's parts on to another task: each goes to
/// `F` (a channel's send; a closed channel drops it, and the run goes on).
pub struct Forward<F: Fn(Streamed)>(pub F);

impl<F: Fn(Streamed)> ReplyStream for Forward<F> {
    fn start(&self, status: u16, headers: &[(String, String)]) {
        (self.0)(Streamed::Head(status, headers.to_vec()));
    }
    fn send(&self, bytes: Vec<u8>) {
        (self.0)(Streamed::Chunk(bytes));
    }
}

/// Whether a request may get a streamed reply ([`crate::Lore::handle_streaming`]): an MCP
/// `POST` that asks for progress. Hosts answer the rest whole, without a task and channel of
/// their own.
pub fn may_stream(method: &http::Method, path: &str, body: &[u8]) -> bool {
    method == http::Method::POST
        && path.starts_with("/mcp")
        && body.windows(13).any(|w| w == b"progressToken")
}

/// One SSE event of a message.
pub fn sse_event(message: &Value) -> Vec<u8> {
    let mut out = b"event: message\ndata: ".to_vec();
    out.extend_from_slice(&serde_json::to_vec(message).unwrap_or_default());
    out.extend_from_slice(b"\n\n");
    out
}

/// An exchange's SSE stream: started with the headers of an SSE reply (and the request's CORS
/// headers) by its first message.
pub struct Streamer {
    out: Rc<dyn ReplyStream>,
    headers: RefCell<Vec<(String, String)>>,
    started: Cell<bool>,
}

impl Streamer {
    pub fn new(out: Rc<dyn ReplyStream>, headers: Vec<(String, String)>) -> Self {
        Self {
            out,
            headers: RefCell::new(headers),
            started: Cell::new(false),
        }
    }

    /// Sends one message now, starting the response first if needed.
    pub fn send(&self, message: &Value) {
        if !self.started.replace(true) {
            let mut headers = vec![
                ("content-type".to_string(), "text/event-stream".to_string()),
                ("cache-control".to_string(), "no-cache".to_string()),
            ];
            headers.extend(self.headers.take());
            self.out.start(200, &headers);
        }
        self.out.send(sse_event(message));
    }

    pub fn started(&self) -> bool {
        self.started.get()
    }
}

#[derive(Debug)]
pub enum Body {
    Empty,
    Json(Value),
    /// Notifications first, the response last, each as one `data:` event.
    Sse(Vec<Value>),
    /// A JSON response serialized already.
    Raw(Vec<u8>),
}

#[derive(Debug)]
pub struct McpReply {
    pub status: u16,
    pub body: Body,
    pub headers: Vec<(String, String)>,
}

impl McpReply {
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

    /// The JSON response to request `id` whose result is the JSON `result`, serialized
    /// already (a cached `tools/list`): written around it, not parsed again.
    pub fn raw_result(id: &Value, result: &[u8]) -> Self {
        let id = serde_json::to_vec(id).unwrap_or_else(|_| b"null".to_vec());
        let mut out = Vec::with_capacity(result.len() + id.len() + 40);
        out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
        out.extend_from_slice(&id);
        out.extend_from_slice(b",\"result\":");
        out.extend_from_slice(result);
        out.push(b'}');
        Self {
            status: 200,
            body: Body::Raw(out),
            headers: Vec::new(),
        }
    }

    /// The end of a reply whose head was streamed already: the remaining notifications and
    /// the response, as SSE, whatever the outcome (the status was sent).
    pub fn rest_of_stream(
        id: &Value,
        result: Result<Value, RpcError>,
        mut notifications: Vec<Value>,
    ) -> Self {
        notifications.push(match result {
            Ok(r) => jsonrpc::result_response(id, r),
            Err(e) => e.to_response(Some(id)),
        });
        Self {
            status: 200,
            body: Body::Sse(notifications),
            headers: Vec::new(),
        }
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
            Body::Raw(bytes) => (Some("application/json"), bytes),
            Body::Sse(messages) => {
                let mut out = Vec::new();
                for m in messages {
                    out.extend_from_slice(&sse_event(&m));
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
