//! The protocol versions the endpoint serves, the `_meta` keys of the 2026-07-28 era, and the
//! error for a version it does not serve.

use serde_json::json;

use super::jsonrpc::{self, RpcError};

/// The current, stateless era.
pub const VERSION_2026: &str = "2026-07-28";
pub const LEGACY_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26"];
/// Every version served, newest first.
pub const SUPPORTED_VERSIONS: &[&str] = &["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"];
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";

pub fn unsupported_version(requested: &str, status: u16) -> RpcError {
    RpcError::new(
        jsonrpc::UNSUPPORTED_PROTOCOL_VERSION,
        format!(
            "Unsupported protocol version {requested:?}; supported: {}",
            SUPPORTED_VERSIONS.join(", ")
        ),
        status,
    )
    .with_data(json!({ "supported": SUPPORTED_VERSIONS, "requested": requested }))
}
