//! This server as a protected resource: which resources a token's audience reaches.

use super::metadata::resource_url;

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
