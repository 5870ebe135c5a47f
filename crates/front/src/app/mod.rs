//! The org's web app, `/app/{org}/…`: server-rendered pages where the people responsible for an
//! org's memory see what its agents saved and correct it. Signed in through the browser session
//! of the OAuth pages; the signed-in person's membership in the org decides what is shown and
//! allowed, and every read or write goes through the engine as SDK method calls
//! ([`Reach::App`]), so the app can do nothing the person could not do through the SDK.
//! Writes are recorded as Actions with `source: "app"`.
//!
//! Pages are the web kit's (`crate::web`): `maud` templates, so every value shown is escaped,
//! with its headers (CSP with no scripts, no framing); every form posts the session's CSRF token
//! and is checked like the consent page's. A person who is not a member of the org gets the
//! same "not found" as for an org that does not exist.

mod access;
mod actions;
mod context;
mod memory;
mod records;
mod usage;
mod view;

use http::{Method, Request, Response};

use crate::instance::Lore;
use crate::web::Cx;
use crate::web::form::Params;
use crate::web::page;
use crate::web::session::Session;
use context::App;
use lore_base::error::LoreError;
use lore_base::model::Principal;
use lore_directory::caller::{Credential, resolve_caller};
use view::not_found;

/// Serves `/app/{org}/{rest…}`.
pub async fn handle(
    lore: &Lore,
    request: &Request<Vec<u8>>,
    org: &str,
    rest: &[&str],
) -> Response<Vec<u8>> {
    if let Err(reason) = lore.config.origins.check_host(request.headers()) {
        return page::error_page(403, "Forbidden", &reason);
    }
    let Some(base) = lore.config.base_url(request.headers()) else {
        return page::error_page(
            400,
            "No host",
            "Send a Host header, or configure the server's public URL (LORE_PUBLIC_URL).",
        );
    };
    let cx = Cx::new(lore, request, base);
    let post = request.method() == Method::POST;
    let form = if post {
        Params::parse(request.body())
    } else {
        Params::parse(b"")
    };
    let session = if post {
        match cx.session_for_post(&form).await {
            Some(s) => s,
            None => return cx.stale_form(),
        }
    } else {
        match Session::load(lore, request.headers(), cx.secure).await {
            Ok(Some(s)) => s,
            Ok(None) => return sign_in(request),
            Err(e) => return page::error_page(500, "Server error", &e.description),
        }
    };
    let Some(principal_id) = session.record.principal.clone() else {
        return sign_in(request);
    };
    let principal: Option<Principal> = match lore
        .ports()
        .record(&lore_base::keys::principal(&principal_id))
        .await
    {
        Ok(p) => p,
        Err(e) => return page::error_page(500, "Server error", &view::for_people(&e)),
    };
    let Some(principal) = principal else {
        return sign_in(request);
    };
    let user = principal.name.clone();
    let credential = Credential {
        principal,
        token: None,
        stamp: None,
    };
    let caller = match resolve_caller(
        lore.ports(),
        credential,
        Some(org),
        &lore.config.default_org,
    )
    .await
    {
        Ok(c) => c,
        Err(LoreError::Forbidden(_)) => return not_found(),
        Err(e) => return page::error_page(500, "Server error", &view::for_people(&e)),
    };
    if let Some(log) = crate::request_log::RequestLog::of(request) {
        log.caller(&caller);
    }
    // A page is one request against the person's and the org's buckets, like an MCP call.
    match lore.rate_check(&caller).await {
        Ok(()) => {}
        Err(e @ LoreError::RateLimited { .. }) => {
            let mut r = page::error_page(429, "Too many requests", &e.to_string());
            if let Some(secs) = e.retry_after_secs()
                && let Ok(v) = http::HeaderValue::from_str(&secs.to_string())
            {
                r.headers_mut().insert(http::header::RETRY_AFTER, v);
            }
            return r;
        }
        Err(e) => return page::error_page(500, "Server error", &view::for_people(&e)),
    }
    let app = App {
        cx,
        session,
        caller,
        user,
    };
    match (rest, post) {
        ([] | [""], false) => page::see_other(&format!("/app/{}/memory", app.org()), None),
        (["memory"], false) => memory::list(&app).await,
        (["memory", id], false) => memory::one(&app, id).await,
        (["memory", id], true) => memory::supersede(&app, id, &form).await,
        (["records"], false) => records::types(&app).await,
        (["records", type_name], false) => records::of_type(&app, type_name).await,
        (["entities", id], false) => records::entity(&app, id).await,
        (["actions"], false) => actions::list(&app).await,
        (["actions", id], false) => actions::one(&app, id).await,
        (["usage"], false) => usage::page(&app).await,
        (["access"], false) => access::page(&app).await,
        (["access", "revoke"], true) => access::revoke(&app, &form).await,
        _ => not_found(),
    }
}

/// The sign-in page, coming back to this page after.
fn sign_in(request: &Request<Vec<u8>>) -> Response<Vec<u8>> {
    let here = request
        .uri()
        .path_and_query()
        .map_or("/app/", |p| p.as_str());
    let back = if crate::oauth::after::is_app_path(here) {
        here
    } else {
        request.uri().path()
    };
    let then: String = url::form_urlencoded::byte_serialize(back.as_bytes()).collect();
    page::see_other(&format!("/oauth/signin?request={then}"), None)
}
