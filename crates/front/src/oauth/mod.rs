//! lore's OAuth 2.1 authorization server and the resource-server side of MCP authorization:
//! discovery documents, client registration (client ID metadata documents and RFC 7591),
//! the authorization endpoint with its sign-in and consent pages, the token endpoint
//! (authorization code + PKCE, rotating refresh tokens) and revocation; their pages are the
//! web kit's (`crate::web`: page, forms, session, CSRF). No crate implements the server side
//! of OAuth at this size, so this module does, by the RFCs; the upstream identity provider
//! client is the `oauth2` crate.
//!
//! Everything goes through the ports: records through storage (keys in [`lore_base::keys`]),
//! secrets from the randomness port, time from the clock port, client metadata documents and
//! upstream providers through the HTTP port, so the same code serves natively and at the edge.

pub mod after;
pub mod authorize;
pub mod client_http;
pub mod clients;
pub mod context;
pub mod grants;
pub mod manage;
pub mod metadata;
pub mod pages;
pub mod reply;
pub mod resource;
pub mod token;
pub mod upstream;

use http::{Method, Request, Response};

use crate::instance::Lore;
use crate::web::Cx;
use crate::web::form::Params;
use context::Endpoints;
use resource::org_of_resource_path;

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
    let Some(base) = lore.config.base_url(request.headers()) else {
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
    let cx = Cx::new(lore, request, base.clone());
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
        (["oauth", "register"], &Method::POST) => match clients::register(&cx).await {
            Ok(answer) => reply::json(201, &answer),
            Err(e) => e.response(),
        },
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
