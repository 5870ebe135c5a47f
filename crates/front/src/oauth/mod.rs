//! lore's OAuth 2.1 authorization server and the resource-server side of MCP authorization:
//! discovery documents, client registration (client ID metadata documents and RFC 7591),
//! the authorization endpoint with its sign-in and consent pages, the token endpoint
//! (authorization code + PKCE, rotating refresh tokens), revocation, and the browser session
//! those pages share. No crate implements the server side of OAuth at this size, so this
//! module does, by the RFCs; the upstream identity provider client is the `oauth2` crate.
//!
//! Everything goes through the ports: records through storage (keys in [`crate::keys`]),
//! secrets from the randomness port, time from the clock port, client metadata documents and
//! upstream providers through the HTTP port, so the same code serves natively and at the edge.

pub mod authorize;
pub mod client_http;
pub mod clients;
pub mod form;
pub mod grants;
pub mod manage;
pub mod metadata;
pub mod pages;
pub mod session;
pub mod token;
pub mod upstream;

use http::{HeaderMap, Method, Request, Response, StatusCode};
use serde_json::Value;

use crate::instance::Lore;
use crate::mcp::headers;
use form::Params;
use session::Session;

/// One request to an OAuth route: the core, the request, and the issuer it is served under.
pub struct Cx<'a> {
    pub lore: &'a Lore,
    pub request: &'a Request<Vec<u8>>,
    /// The issuer (the server's public base URL).
    pub base: String,
    /// Whether the issuer is HTTPS (cookies are then `Secure`).
    pub secure: bool,
}

impl Cx<'_> {
    /// The session of a page's form post, after the CSRF checks: the `Origin`, when the
    /// browser sends one, is this server's, and the form's token is the session's.
    pub async fn session_for_post(&self, params: &Params) -> Option<Session> {
        if let Some(origin) = headers::get(self.request.headers(), "origin")
            && !origin.eq_ignore_ascii_case(&self.base)
            && self
                .lore
                .config
                .origins
                .check(self.request.headers())
                .is_err()
        {
            tracing::warn!(%origin, "form post from another origin refused");
            return None;
        }
        let session = Session::load(self.lore, self.request.headers(), self.secure)
            .await
            .ok()
            .flatten()?;
        session.check_csrf(params).ok()?;
        Some(session)
    }

    /// The page for a form post that failed the CSRF checks.
    pub fn stale_form(&self) -> Response<Vec<u8>> {
        pages::error_page(
            403,
            "This form has expired",
            "The form was not sent from this site's current page, or your session ended. Go back, reload the page and try again.",
        )
    }
}

/// lore's OAuth endpoints under one issuer.
#[derive(Debug, Clone)]
pub struct Endpoints {
    pub issuer: String,
    pub authorize: String,
    pub token: String,
    pub register: String,
    pub revoke: String,
}

impl Endpoints {
    pub fn new(base: &str) -> Self {
        Self {
            issuer: base.to_string(),
            authorize: format!("{base}/oauth/authorize"),
            token: format!("{base}/oauth/token"),
            register: format!("{base}/oauth/register"),
            revoke: format!("{base}/oauth/revoke"),
        }
    }
}

/// The server's public base URL (scheme, host, port; no trailing slash): the issuer, and the
/// prefix of every resource URL. From the configured `public_url`, else from the request's
/// `Host` (`http` for loopback names, `https` otherwise). `None` without either.
pub fn base_url(config: &crate::Config, request_headers: &HeaderMap) -> Option<String> {
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
    audience == metadata::resource_url(base, None)
        || path_org.is_some_and(|org| audience == metadata::resource_url(base, Some(org)))
}

/// The org named by an MCP path, if the path is `/mcp/{org}` with a valid org name.
fn org_of_resource_path(rest: &[&str]) -> Result<Option<String>, ()> {
    match rest {
        [] | ["mcp"] => Ok(None),
        ["mcp", org] if crate::ids::OrgId::parse(org).is_ok() => Ok(Some(org.to_string())),
        _ => Err(()),
    }
}

/// Serves `/.well-known/oauth-*` and `/oauth/*`; `None` for any other path.
pub async fn handle(lore: &Lore, request: &Request<Vec<u8>>) -> Option<Response<Vec<u8>>> {
    let path = request.uri().path().to_string();
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let is_oauth = matches!(
        segments.as_slice(),
        [".well-known", "oauth-protected-resource", ..]
            | [".well-known", "oauth-authorization-server"]
            | ["oauth", ..]
    );
    if !is_oauth {
        return None;
    }
    if let Err(reason) = lore.config.origins.check_host(request.headers()) {
        return Some(reply::error_json(403, "forbidden", &reason));
    }
    let Some(base) = base_url(&lore.config, request.headers()) else {
        return Some(reply::error_json(
            400,
            "invalid_request",
            "send a Host header, or configure the server's public URL (LORE_PUBLIC_URL)",
        ));
    };
    let method = request.method().clone();
    if method == Method::OPTIONS {
        return Some(reply::preflight());
    }
    let cx = Cx {
        lore,
        request,
        secure: base.starts_with("https://"),
        base: base.clone(),
    };
    let form = || Params::parse(request.body());
    let response = match (segments.as_slice(), &method) {
        ([".well-known", "oauth-protected-resource", rest @ ..], &Method::GET) => {
            match org_of_resource_path(rest) {
                Ok(org) => reply::metadata(&metadata::protected_resource(&base, org.as_deref())),
                Err(()) => reply::error_json(404, "not_found", "no protected resource there"),
            }
        }
        ([".well-known", "oauth-authorization-server"], &Method::GET) => {
            reply::metadata(&metadata::authorization_server(&Endpoints::new(&base)))
        }
        (["oauth", "register"], &Method::POST) => {
            match clients::register(lore, request.body()).await {
                Ok(answer) => reply::json(201, &answer),
                Err(e) => e.response(),
            }
        }
        (["oauth", "token"], &Method::POST) => token::token(&cx).await,
        (["oauth", "revoke"], &Method::POST) => token::revoke(&cx).await,
        (["oauth", "authorize"], &Method::GET) => authorize::authorize(&cx).await,
        (["oauth", "signin"], &Method::GET) => authorize::sign_in_get(&cx).await,
        (["oauth", "signin"], &Method::POST) => authorize::sign_in_post(&cx, &form()).await,
        (["oauth", "consent"], &Method::GET) => authorize::consent_get(&cx).await,
        (["oauth", "consent"], &Method::POST) => authorize::consent_post(&cx, &form()).await,
        (["oauth", "signout"], &Method::POST) => authorize::sign_out(&cx, &form()).await,
        (["oauth", "upstream", "start"], &Method::POST) => upstream::start(&cx, &form()).await,
        (["oauth", "upstream", "callback"], &Method::GET) => upstream::callback(&cx).await,
        (["oauth", "tokens"], &Method::GET) => manage::page(&cx).await,
        (["oauth", "tokens", "revoke"], &Method::POST) => manage::revoke(&cx, &form()).await,
        _ => reply::error_json(
            if segments.first() == Some(&".well-known") || method == Method::GET {
                404
            } else {
                405
            },
            "not_found",
            &format!("no OAuth route for {method} {path}"),
        ),
    };
    Some(response)
}

/// Responses of the OAuth routes.
pub(crate) mod reply {
    use super::*;

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
}
