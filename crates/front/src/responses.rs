//! The JSON responses routes answer with: a body and its status, `Content-Type:
//! application/json`.

use http::{Response, StatusCode};
use serde_json::Value;

/// A JSON response with its status and `Content-Type: application/json`.
pub fn json_response(status: StatusCode, body: Value) -> Response<Vec<u8>> {
    let mut response = Response::new(serde_json::to_vec(&body).unwrap_or_default());
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}
