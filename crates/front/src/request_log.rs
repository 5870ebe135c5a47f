//! One structured log line per request (SPEC 10), on every platform: request id, org,
//! principal id, HTTP method and path, JSON-RPC method, tool, duration, status, the error
//! code and the cap a script hit. `Lore::serve` puts a [`RequestLog`] in the request's
//! extensions; the parts that learn something (authentication, the MCP exchange, the REST
//! surface) note it there; `serve` writes the line (`tracing`, target `lore::request`) when
//! the answer is ready.
//!
//! Never logged: the query string (OAuth codes and states travel there), headers, bodies,
//! tokens, secrets, connection credentials and script source. Only names, ids and codes.

use std::sync::{Arc, Mutex};

use http::Request;

use lore_base::error::LoreError;
use lore_directory::Caller;

/// The response header that carries the request id.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// Ids for the requests that bring none: the instance's random prefix (drawn once) and a
/// count, so a request asks the platform for no randomness (natively a system call each).
/// Unique per instance, not secret: an id only ties a log line to a response.
pub struct RequestIds {
    prefix: String,
    next: std::cell::Cell<u32>,
}

impl RequestIds {
    pub fn new(ports: &lore_base::ports::Ports) -> Self {
        Self {
            prefix: ports.random_hex(4),
            next: std::cell::Cell::new(0),
        }
    }

    /// The next id: 16 hexadecimal digits, as a random one had.
    pub fn fresh(&self) -> String {
        let n = self.next.get();
        self.next.set(n.wrapping_add(1));
        let mut id = String::with_capacity(16);
        id.push_str(&self.prefix);
        id.push_str(&lore_base::keys::to_hex(&n.to_be_bytes()));
        id
    }
}

/// What one request did, noted as it is served.
#[derive(Debug)]
pub struct RequestLog {
    pub id: String,
    facts: Mutex<Facts>,
}

#[derive(Debug, Default, Clone)]
struct Facts {
    org: Option<String>,
    principal: Option<String>,
    rpc_method: Option<String>,
    tool: Option<String>,
    error_code: Option<String>,
    cap: Option<String>,
}

impl RequestLog {
    /// A log for a request: its id is the client's `x-request-id` when that is a short
    /// plain token, else `fresh`.
    pub fn start(request: &Request<Vec<u8>>, fresh: impl FnOnce() -> String) -> Arc<Self> {
        let id = request
            .headers()
            .get(REQUEST_ID_HEADER)
            .and_then(|v| v.to_str().ok())
            .filter(|v| {
                !v.is_empty()
                    && v.len() <= 64
                    && v.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b))
            })
            .map_or_else(fresh, str::to_string);
        Arc::new(Self {
            id,
            facts: Mutex::default(),
        })
    }

    /// The log of the request being served, if `Lore::serve` started one.
    pub fn of<B>(request: &Request<B>) -> Option<&Arc<Self>> {
        request.extensions().get::<Arc<Self>>()
    }

    fn note(&self, f: impl FnOnce(&mut Facts)) {
        if let Ok(mut facts) = self.facts.lock() {
            f(&mut facts);
        }
    }

    /// The authenticated caller: its org and principal id.
    pub fn caller(&self, caller: &Caller) {
        self.note(|f| {
            f.org = Some(caller.org().to_string());
            f.principal = Some(caller.principal().id.clone());
        });
    }

    /// The org a request names before anyone is authenticated (webhook deliveries).
    pub fn org(&self, org: &str) {
        self.note(|f| f.org = Some(org.chars().take(64).collect()));
    }

    pub fn rpc_method(&self, method: &str) {
        self.note(|f| f.rpc_method = Some(method.chars().take(64).collect()));
    }

    pub fn tool(&self, name: &str) {
        self.note(|f| f.tool = Some(name.chars().take(64).collect()));
    }

    /// How the request's tool or method failed: its stable code and, for a script, the cap.
    pub fn error(&self, e: &LoreError) {
        self.note(|f| {
            f.error_code = Some(e.code().to_string());
            if let LoreError::Script(failure) = e {
                f.cap = failure.cap.map(str::to_string);
            }
        });
    }

    /// Writes the request's line through `tracing` (natively, `--log-format json` makes it
    /// JSON) and returns it, for adapters without a subscriber to print as one JSON object.
    pub fn emit(&self, method: &str, path: &str, status: u16, duration_ms: i64) -> Line {
        let f = self.facts.lock().map(|f| f.clone()).unwrap_or_default();
        let or_dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
        tracing::info!(
            target: "lore::request",
            request_id = %self.id,
            method = %method,
            path = %path,
            status,
            duration_ms,
            org = %or_dash(&f.org),
            principal = %or_dash(&f.principal),
            rpc_method = %or_dash(&f.rpc_method),
            tool = %or_dash(&f.tool),
            error_code = %or_dash(&f.error_code),
            cap = %or_dash(&f.cap),
            "request"
        );
        Line {
            request_id: self.id.clone(),
            method: method.to_string(),
            path: path.to_string(),
            status,
            duration_ms,
            facts: f,
        }
    }
}

/// A request's log line, left in the response's extensions by `Lore::serve`: the hosts that
/// print it (Workers, Spin) write it as JSON (`Display`); natively `tracing` writes it, and
/// the JSON is never made.
#[derive(Debug, Clone)]
pub struct Line {
    request_id: String,
    method: String,
    path: String,
    status: u16,
    duration_ms: i64,
    facts: Facts,
}

impl std::fmt::Display for Line {
    fn fmt(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let f = &self.facts;
        let json = serde_json::json!({
            "target": "lore::request",
            "request_id": self.request_id,
            "method": self.method,
            "path": self.path,
            "status": self.status,
            "duration_ms": self.duration_ms,
            "org": f.org,
            "principal": f.principal,
            "rpc_method": f.rpc_method,
            "tool": f.tool,
            "error_code": f.error_code,
            "cap": f.cap,
        });
        write!(out, "{json}")
    }
}

impl Line {
    /// The line `Lore::serve` left on `response`, if any.
    pub fn of<B>(response: &http::Response<B>) -> Option<&Self> {
        response.extensions().get::<Self>()
    }
}
