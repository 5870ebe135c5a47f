//! Responses of the OAuth routes: JSON for machines (any origin may read it), discovery
//! documents, RFC 6749 error bodies, and the CORS preflight of the machine endpoints.

use http::{Response, StatusCode};
use serde_json::Value;

fn build(status: u16, content_type: &str, body: Vec<u8>) -> Response<Vec<u8>> {
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
    let h = response.headers_mut();
    h.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_str(content_type).expect("static content type"),
    );
    h.insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-store"),
    );
    response
}

/// JSON for machines; any origin may read it (no cookies are involved).
pub fn json(status: u16, value: &Value) -> Response<Vec<u8>> {
    let mut r = build(
        status,
        "application/json",
        serde_json::to_vec(value).unwrap_or_default(),
    );
    r.headers_mut().insert(
        http::header::ACCESS_CONTROL_ALLOW_ORIGIN,
        http::HeaderValue::from_static("*"),
    );
    r
}

/// A discovery document.
pub fn metadata(value: &Value) -> Response<Vec<u8>> {
    let mut r = json(200, value);
    r.headers_mut().insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("public, max-age=300"),
    );
    r
}

/// An RFC 6749 error body: `{"error", "error_description"}`.
pub fn error_json(status: u16, error: &str, description: &str) -> Response<Vec<u8>> {
    json(
        status,
        &serde_json::json!({ "error": error, "error_description": description }),
    )
}

/// The answer to a CORS preflight of the machine endpoints.
pub fn preflight() -> Response<Vec<u8>> {
    let mut r = build(204, "text/plain", Vec::new());
    let h = r.headers_mut();
    h.insert(
        http::header::ACCESS_CONTROL_ALLOW_ORIGIN,
        http::HeaderValue::from_static("*"),
    );
    h.insert(
        http::header::ACCESS_CONTROL_ALLOW_METHODS,
        http::HeaderValue::from_static("GET, POST, OPTIONS"),
    );
    h.insert(
        http::header::ACCESS_CONTROL_ALLOW_HEADERS,
        http::HeaderValue::from_static("authorization, content-type, mcp-protocol-version"),
    );
    h.insert(
        http::header::ACCESS_CONTROL_MAX_AGE,
        http::HeaderValue::from_static("86400"),
    );
    r
}

impl crate::web::form::OAuthError {
    /// The RFC 6749 error response: JSON, with `Retry-After` when the refusal has one.
    pub fn response(&self) -> http::Response<Vec<u8>> {
        if self.status >= 500 {
            tracing::error!(error = self.error, description = %self.description, "OAuth endpoint failed");
        } else {
            tracing::info!(error = self.error, description = %self.description, "OAuth request refused");
        }
        let mut response = error_json(self.status, self.error, &self.description);
        if let Some(after) = self.retry_after_s {
            response
                .headers_mut()
                .insert(http::header::RETRY_AFTER, http::HeaderValue::from(after));
        }
        response
    }
}
