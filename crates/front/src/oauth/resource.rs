//! This server as a protected resource: its public base URL, and which resources a token's
//! audience reaches.

use http::HeaderMap;

use super::metadata::resource_url;
use crate::headers;

/// The server's public base URL (scheme, host, port; no trailing slash): the issuer, and the
/// prefix of every resource URL. From the configured `public_url`, else from the request's
/// `Host` (`http` for loopback names, `https` otherwise). `None` without either.
pub fn base_url(config: &crate::config::Config, request_headers: &HeaderMap) -> Option<String> {
    if let Some(url) = &config.public_url {
        return Some(url.trim_end_matches('/').to_string());
    }
    let host = headers::get(request_headers, "host")?.to_ascii_lowercase();
    let valid = !host.is_empty()
        && host.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']' | b'_')
        });
    if !valid {
        return None;
    }
    let scheme = if headers::is_loopback(&host) {
        "http"
    } else {
        "https"
    };
    Some(format!("{scheme}://{host}"))
}

/// Whether an access token issued for `audience` may be used at this request's resource
/// (`/mcp`, or an org's `/mcp/{org}` or `/api/{org}/…` when `path_org` is set). A token for
/// the whole server (`{base}/mcp`) reaches every org path its orgs allow; a token for one
/// org's resource reaches only that org.
pub fn audience_allows(audience: &str, base: Option<&str>, path_org: Option<&str>) -> bool {
    let Some(base) = base else {
        return false;
    };
    audience == resource_url(base, None)
        || path_org.is_some_and(|org| audience == resource_url(base, Some(org)))
}

/// The org named by an MCP path, if the path is `/mcp/{org}` with a valid org name.
pub(super) fn org_of_resource_path(rest: &[&str]) -> Result<Option<String>, ()> {
    match rest {
        [] | ["mcp"] => Ok(None),
        ["mcp", org] if lore_base::ids::OrgId::parse(org).is_ok() => Ok(Some(org.to_string())),
        _ => Err(()),
    }
}
