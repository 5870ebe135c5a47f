//! Discovery documents: RFC 9728 protected resource metadata (what `/mcp` and `/mcp/{org}`
//! are and which authorization server issues their tokens) and RFC 8414 authorization server
//! metadata (lore's own endpoints and what they support), plus the `WWW-Authenticate`
//! challenges that point clients at them.

use serde_json::{Value, json};

use super::context::Endpoints;

/// The scopes lore issues: reading and writing through MCP.
pub const SCOPES_SUPPORTED: [&str; 2] = ["mcp:read", "mcp:write"];

/// The canonical URI of the MCP endpoint a token is for: `{base}/mcp` or `{base}/mcp/{org}`.
pub fn resource_url(base: &str, org: Option<&str>) -> String {
    match org {
        Some(org) => format!("{base}/mcp/{org}"),
        None => format!("{base}/mcp"),
    }
}

/// Where the protected resource metadata of that resource is served (RFC 9728 section 3.1:
/// the well-known name inserted before the resource's path).
pub fn resource_metadata_url(base: &str, org: Option<&str>) -> String {
    match org {
        Some(org) => format!("{base}/.well-known/oauth-protected-resource/mcp/{org}"),
        None => format!("{base}/.well-known/oauth-protected-resource/mcp"),
    }
}

/// The protected resource metadata of `/mcp` (or `/mcp/{org}`).
pub fn protected_resource(base: &str, org: Option<&str>) -> Value {
    json!({
        "resource": resource_url(base, org),
        "authorization_servers": [base],
        "scopes_supported": SCOPES_SUPPORTED,
        "bearer_methods_supported": ["header"],
        "resource_name": match org {
            Some(org) => format!("lore (org {org})"),
            None => "lore".to_string(),
        },
        "resource_documentation": format!("{base}/oauth/signin"),
    })
}

/// The authorization server metadata; `base` is the issuer.
pub fn authorization_server(e: &Endpoints) -> Value {
    json!({
        "issuer": e.issuer,
        "authorization_endpoint": e.authorize,
        "token_endpoint": e.token,
        "registration_endpoint": e.register,
        "revocation_endpoint": e.revoke,
        "scopes_supported": SCOPES_SUPPORTED,
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none", "client_secret_post", "client_secret_basic"],
        "revocation_endpoint_auth_methods_supported": ["none", "client_secret_post", "client_secret_basic"],
        "client_id_metadata_document_supported": true,
        "authorization_response_iss_parameter_supported": true,
        "service_documentation": format!("{}/oauth/signin", e.issuer),
    })
}

/// Quotes a challenge parameter value (RFC 9110 quoted-string; quotes and backslashes never
/// appear in what lore puts there, so they are replaced rather than escaped).
fn quoted(value: &str) -> String {
    format!("\"{}\"", value.replace(['"', '\\'], "'"))
}

/// The `WWW-Authenticate` value of a 401: where to discover how to get a token, and the
/// scopes to ask for; with `error` when a token was sent and refused (RFC 6750 section 3).
pub fn unauthorized_challenge(resource_metadata: Option<&str>, error: Option<&str>) -> String {
    let mut parts = vec![String::from("Bearer realm=\"lore\"")];
    if let Some(url) = resource_metadata {
        parts.push(format!("resource_metadata={}", quoted(url)));
    }
    parts.push(format!("scope={}", quoted(&SCOPES_SUPPORTED.join(" "))));
    if let Some(description) = error {
        parts.push("error=\"invalid_token\"".into());
        parts.push(format!("error_description={}", quoted(description)));
    }
    parts.join(", ")
}

/// The `WWW-Authenticate` value of a 403 for a token without the scope a call needs.
pub fn insufficient_scope_challenge(resource_metadata: Option<&str>, description: &str) -> String {
    let mut parts = vec![
        String::from("Bearer error=\"insufficient_scope\""),
        format!("scope={}", quoted(&SCOPES_SUPPORTED.join(" "))),
    ];
    if let Some(url) = resource_metadata {
        parts.push(format!("resource_metadata={}", quoted(url)));
    }
    parts.push(format!("error_description={}", quoted(description)));
    parts.join(", ")
}
