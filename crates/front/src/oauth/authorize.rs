//! The authorization endpoint and the pages behind it: `GET /oauth/authorize` checks the
//! client and its redirect URI (failures there are shown, never redirected), then the request
//! (failures redirected to the client as RFC 6749 errors), and parks it as a pending request;
//! `/oauth/signin` signs the user in; `/oauth/consent` shows who asks for what and, on
//! approval, redirects back with a single-use code, the state and `iss` (RFC 9207).

use http::Response;
use serde::{Deserialize, Serialize};

use super::after::{after_sign_in, is_request_id};
use super::clients::{self, Client, redirect_matches};
use super::grants::{self, AuthorizationCode};
use super::metadata;
use super::pages;
use crate::web::Cx;
use crate::web::form::{OAuthError, Params};
use crate::web::page;
use crate::web::session::Session;
use lore_base::ids::OrgId;
use lore_base::keys::{self, OrgKeys};
use lore_base::model::{Membership, Principal, Scopes};

/// A pending authorization request lives this long (sign-in and consent must fit in it).
const REQUEST_TTL_MS: i64 = 15 * 60_000;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PendingAuthorization {
    pub client_id: String,
    pub client_name: String,
    pub redirect_uri: String,
    pub redirect_uri_given: bool,
    pub state: Option<String>,
    pub code_challenge: String,
    pub scopes: Scopes,
    pub audience: String,
    /// The org the resource names (`/mcp/{org}`): the only one the user may choose.
    pub org: Option<OrgId>,
    pub expires_at_ms: i64,
}

/// The scopes asked for: known ones kept, others ignored; none asked means both.
pub fn requested_scopes(scope: Option<&str>) -> Result<Scopes, OAuthError> {
    let Some(scope) = scope else {
        return Ok(Scopes::ALL);
    };
    let mut scopes = Scopes::default();
    for s in scope.split(' ').filter(|s| !s.is_empty()) {
        match s {
            "mcp:read" => scopes.read = true,
            "mcp:write" => scopes.write = true,
            _ => {}
        }
    }
    if !scopes.read && !scopes.write {
        return Err(OAuthError::invalid_scope(format!(
            "none of the scopes {scope:?} is offered here; ask for mcp:read and/or mcp:write"
        )));
    }
    Ok(scopes)
}

/// The audience a `resource` parameter names (RFC 8707): this server's `/mcp` or an org's
/// `/mcp/{org}`; the bare origin means the whole server. Without one: the whole server.
pub fn audience(base: &str, resource: Option<&str>) -> Result<(String, Option<OrgId>), OAuthError> {
    let whole = metadata::resource_url(base, None);
    let Some(resource) = resource else {
        return Ok((whole, None));
    };
    let trimmed = resource.trim_end_matches('/');
    if trimmed == base || trimmed == whole {
        return Ok((whole, None));
    }
    if let Some(org) = trimmed.strip_prefix(&format!("{whole}/"))
        && let Ok(org) = OrgId::parse(org)
    {
        return Ok((metadata::resource_url(base, Some(org.as_str())), Some(org)));
    }
    Err(OAuthError::invalid_target(format!(
        "{resource} is not a resource of this server; use {whole} or {whole}/{{org}}"
    )))
}

/// `uri` with the response parameters added to its query.
fn with_params(uri: &str, params: &[(&str, &str)]) -> String {
    match url::Url::parse(uri) {
        Ok(mut url) => {
            url.query_pairs_mut().extend_pairs(params);
            url.to_string()
        }
        Err(_) => uri.to_string(),
    }
}

/// The redirect that carries an error back to the client.
fn error_redirect(
    redirect_uri: &str,
    state: Option<&str>,
    issuer: &str,
    e: &OAuthError,
) -> Response<Vec<u8>> {
    tracing::info!(error = e.error, description = %e.description, "authorization request refused");
    let mut params = vec![("error", e.error), ("error_description", &e.description)];
    if let Some(s) = state {
        params.push(("state", s));
    }
    params.push(("iss", issuer));
    page::see_other(&with_params(redirect_uri, &params), None)
}

/// The redirect URI of a request: the one given (which must be registered), or the only one
/// registered.
fn redirect_uri_of(client: &Client, given: Option<&str>) -> Result<String, String> {
    match given {
        Some(uri) => client
            .redirect_uris
            .iter()
            .any(|r| redirect_matches(r, uri))
            .then(|| uri.to_string())
            .ok_or_else(|| {
                format!("the redirect URI {uri} is not one this application registered")
            }),
        None => match client.redirect_uris.as_slice() {
            [only] => Ok(only.clone()),
            _ => Err(
                "the request names no redirect_uri and the application registered several".into(),
            ),
        },
    }
}

/// `GET /oauth/authorize`.
pub async fn authorize(cx: &Cx<'_>) -> Response<Vec<u8>> {
    let params = Params::query(cx.request.uri());
    let shown = |title: &str, message: String| page::error_page(400, title, &message);
    let client_id = match params.one("client_id") {
        Ok(Some(id)) => id,
        Ok(None) => return shown("Missing client", "The request names no client_id.".into()),
        Err(e) => return shown("Invalid request", e.description),
    };
    let client = match clients::find(cx, client_id).await {
        Ok(c) => c,
        Err(e) if e.status >= 500 => return page::error_page(500, "Server error", &e.description),
        Err(e) => return shown("Unknown application", e.description),
    };
    let given = match params.one("redirect_uri") {
        Ok(g) => g,
        Err(e) => return shown("Invalid request", e.description),
    };
    let redirect_uri = match redirect_uri_of(&client, given) {
        Ok(uri) => uri,
        Err(why) => return shown("Invalid redirect", why),
    };
    // From here on, errors go back to the application.
    let state = params.one("state").ok().flatten().map(str::to_string);
    let fail = |e: OAuthError| error_redirect(&redirect_uri, state.as_deref(), &cx.base, &e);
    match pending_from(
        cx,
        &params,
        &client,
        &redirect_uri,
        given.is_some(),
        state.clone(),
    ) {
        Ok(pending) => {
            let id = cx.lore.ports().random_hex(16);
            // A pending authorization is what anyone can make: counted against the asking
            // address, and it ends with its request (`web::anonymous`).
            let stored = match crate::web::anonymous::admit(cx.lore, cx.request).await {
                Ok(()) => {
                    crate::web::anonymous::store(
                        cx.lore,
                        lore_base::storage::Batch::new(),
                        &keys::oauth_request(&id),
                        grants::json(&pending),
                        pending.expires_at_ms,
                    )
                    .await
                }
                Err(e) => Err(e),
            };
            if let Err(e) = stored {
                return page::error_page(e.status.max(400), "Try again later", &e.description);
            }
            let session = match Session::load(cx.lore, cx.request.headers(), cx.secure).await {
                Ok(s) => s,
                Err(e) => return fail(e),
            };
            let next = if session.is_some_and(|s| s.record.principal.is_some()) {
                format!("/oauth/consent?request={id}")
            } else {
                format!("/oauth/signin?request={id}")
            };
            page::see_other(&next, None)
        }
        Err(e) => fail(e),
    }
}

fn pending_from(
    cx: &Cx<'_>,
    params: &Params,
    client: &Client,
    redirect_uri: &str,
    redirect_uri_given: bool,
    state: Option<String>,
) -> Result<PendingAuthorization, OAuthError> {
    match params.one("response_type")? {
        Some("code") => {}
        Some(other) => {
            return Err(OAuthError::unsupported_response_type(format!(
                "response_type {other:?} is not supported; use code"
            )));
        }
        None => return Err(OAuthError::invalid_request("response_type is missing")),
    }
    if !client.grant_types.iter().any(|g| g == "authorization_code") {
        return Err(OAuthError::unauthorized_client(
            "this client did not register the authorization_code grant",
        ));
    }
    let challenge = params
        .one("code_challenge")?
        .ok_or_else(|| OAuthError::invalid_request("PKCE is required: send a code_challenge"))?;
    if params.one("code_challenge_method")? != Some("S256") {
        return Err(OAuthError::invalid_request(
            "code_challenge_method must be S256",
        ));
    }
    let valid_challenge = challenge.len() == 43
        && challenge
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !valid_challenge {
        return Err(OAuthError::invalid_request(
            "code_challenge must be the base64url SHA-256 of the verifier (43 characters)",
        ));
    }
    if state.as_ref().is_some_and(|s| s.len() > 2048) {
        return Err(OAuthError::invalid_request(
            "state is longer than 2048 bytes",
        ));
    }
    let scopes = requested_scopes(params.one("scope")?)?;
    let resources = params.all("resource");
    if resources.len() > 1 {
        return Err(OAuthError::invalid_target(
            "ask for one resource per authorization",
        ));
    }
    let (audience, org) = audience(&cx.base, resources.first().copied())?;
    Ok(PendingAuthorization {
        client_id: client.client_id.clone(),
        client_name: client.display_name(),
        redirect_uri: redirect_uri.to_string(),
        redirect_uri_given,
        state,
        code_challenge: challenge.to_string(),
        scopes,
        audience,
        org,
        expires_at_ms: cx.lore.ports().clock.now_ms() + REQUEST_TTL_MS,
    })
}

/// A pending request by id, if it has not expired.
async fn pending(cx: &Cx<'_>, id: &str) -> Result<Option<PendingAuthorization>, OAuthError> {
    if !is_request_id(id) {
        return Ok(None);
    }
    let p: Option<PendingAuthorization> = cx.lore.ports().record(&keys::oauth_request(id)).await?;
    Ok(p.filter(|p| p.expires_at_ms > cx.lore.ports().clock.now_ms()))
}

fn expired_page() -> Response<Vec<u8>> {
    page::error_page(
        400,
        "This sign-in request expired",
        "The authorization request is unknown or took too long. Start connecting again from your application.",
    )
}

/// The local owner, who signs in with the password `lore init` set.
async fn local_owner(cx: &Cx<'_>) -> Result<Option<String>, OAuthError> {
    Ok(cx
        .lore
        .ports()
        .storage
        .get(keys::LOCAL_OWNER)
        .await?
        .map(|b| String::from_utf8_lossy(&b).into_owned()))
}

/// Whether the local owner can sign in with a password.
async fn password_sign_in(cx: &Cx<'_>) -> Result<bool, OAuthError> {
    Ok(match local_owner(cx).await? {
        Some(owner) => lore_directory::password::is_set(cx.lore.ports(), &owner).await?,
        None => false,
    })
}

/// Where the sign-in form goes next: a pending request's consent, or the token page.
async fn sign_in_page(
    cx: &Cx<'_>,
    session: &Session,
    request: Option<&str>,
    status: u16,
    error: Option<&str>,
) -> Response<Vec<u8>> {
    let client_name = match request {
        Some(id) if is_request_id(id) => match pending(cx, id).await {
            Ok(Some(p)) => Some(p.client_name),
            Ok(None) => return expired_page(),
            Err(e) => return page::error_page(500, "Server error", &e.description),
        },
        _ => None,
    };
    let password = match password_sign_in(cx).await {
        Ok(p) => p,
        Err(e) => return page::error_page(500, "Server error", &e.description),
    };
    let providers = super::upstream::choices(cx.lore);
    let page = pages::sign_in(&pages::SignIn {
        csrf: &session.record.csrf,
        then: request.unwrap_or(""),
        client_name: client_name.as_deref(),
        password,
        providers: &providers,
        error,
    });
    page::html(status, page, session.set_cookie.as_deref())
}

/// `GET /oauth/signin`.
pub async fn sign_in_get(cx: &Cx<'_>) -> Response<Vec<u8>> {
    let params = Params::query(cx.request.uri());
    let request = params.one("request").ok().flatten();
    let session = match Session::load_or_start(cx.lore, cx.request, cx.secure).await {
        Ok(s) => s,
        Err(e) => return page::error_page(e.status.max(500), "Server error", &e.description),
    };
    if session.record.principal.is_some() {
        return page::see_other(&after_sign_in(request), None);
    }
    sign_in_page(cx, &session, request, 200, None).await
}

/// `POST /oauth/signin`: the owner password.
pub async fn sign_in_post(cx: &Cx<'_>, params: &Params) -> Response<Vec<u8>> {
    let Some(session) = cx.session_for_post(params).await else {
        return cx.stale_form();
    };
    let request = params.one("then").ok().flatten();
    let password = params.one("password").ok().flatten().unwrap_or("");
    let owner = match local_owner(cx).await {
        Ok(o) => o,
        Err(e) => return page::error_page(500, "Server error", &e.description),
    };
    let ok = match &owner {
        Some(owner) => lore_directory::password::check(cx.lore.ports(), owner, password)
            .await
            .unwrap_or(false),
        None => false,
    };
    let (true, Some(owner)) = (ok, owner) else {
        tracing::warn!("owner sign-in refused: wrong password");
        // Slow down guessing.
        cx.lore.ports().clock.sleep(750).await;
        return sign_in_page(
            cx,
            &session,
            request,
            401,
            Some("That password is not right."),
        )
        .await;
    };
    match session.sign_in(cx.lore, owner.clone(), cx.secure).await {
        Ok(new) => {
            tracing::info!(principal = %owner, "owner signed in");
            page::see_other(&after_sign_in(request), new.set_cookie.as_deref())
        }
        Err(e) => page::error_page(500, "Server error", &e.description),
    }
}

/// The orgs `principal` belongs to, with their role.
pub async fn orgs_of(cx: &Cx<'_>, principal: &str) -> Result<Vec<pages::OrgChoice>, OAuthError> {
    let mut out = Vec::new();
    for (key, _) in cx
        .lore
        .ports()
        .storage
        .scan_all(&keys::member_of_all(principal))
        .await?
    {
        let Some(Ok(org)) = key.rsplit('/').next().map(OrgId::parse) else {
            continue;
        };
        let membership: Option<Membership> = cx
            .lore
            .ports()
            .record(&OrgKeys::new(&org).member(principal))
            .await?;
        if let Some(m) = membership {
            out.push(pages::OrgChoice {
                name: org.to_string(),
                role: m.role.as_str().to_string(),
            });
        }
    }
    Ok(out)
}

async fn principal_name(cx: &Cx<'_>, id: &str) -> String {
    match cx
        .lore
        .ports()
        .record::<Principal>(&keys::principal(id))
        .await
    {
        Ok(Some(p)) => p.name,
        _ => id.to_string(),
    }
}

/// `GET /oauth/consent?request=…`.
pub async fn consent_get(cx: &Cx<'_>) -> Response<Vec<u8>> {
    let params = Params::query(cx.request.uri());
    let Some(id) = params.one("request").ok().flatten() else {
        return expired_page();
    };
    let session = match Session::load(cx.lore, cx.request.headers(), cx.secure).await {
        Ok(Some(s)) if s.record.principal.is_some() => s,
        Ok(_) => return page::see_other(&format!("/oauth/signin?request={id}"), None),
        Err(e) => return page::error_page(500, "Server error", &e.description),
    };
    let pending = match pending(cx, id).await {
        Ok(Some(p)) => p,
        Ok(None) => return expired_page(),
        Err(e) => return page::error_page(500, "Server error", &e.description),
    };
    let principal = session.record.principal.clone().unwrap_or_default();
    let mut orgs = match orgs_of(cx, &principal).await {
        Ok(o) => o,
        Err(e) => return page::error_page(500, "Server error", &e.description),
    };
    if let Some(pinned) = &pending.org {
        orgs.retain(|o| o.name == pinned.as_str());
    }
    let redirect_host = url::Url::parse(&pending.redirect_uri)
        .ok()
        .map(|u| match u.origin() {
            origin @ url::Origin::Tuple(..) => origin.ascii_serialization(),
            url::Origin::Opaque(_) => format!("{}:", u.scheme()),
        })
        .unwrap_or_else(|| pending.redirect_uri.clone());
    let user = principal_name(cx, &principal).await;
    let page = pages::consent(&pages::Consent {
        csrf: &session.record.csrf,
        request: id,
        client_name: &pending.client_name,
        client_id: &pending.client_id,
        redirect_host: &redirect_host,
        user: &user,
        orgs: &orgs,
        pinned_org: pending.org.as_ref().map(OrgId::as_str),
        write_requested: pending.scopes.write,
    });
    page::html(200, page, None)
}

/// `POST /oauth/consent`: allow or deny.
pub async fn consent_post(cx: &Cx<'_>, params: &Params) -> Response<Vec<u8>> {
    let Some(session) = cx.session_for_post(params).await else {
        return cx.stale_form();
    };
    let Some(principal) = session.record.principal.clone() else {
        return cx.stale_form();
    };
    let Some(id) = params.one("request").ok().flatten() else {
        return expired_page();
    };
    let pending = match pending(cx, id).await {
        Ok(Some(p)) => p,
        Ok(None) => return expired_page(),
        Err(e) => return page::error_page(500, "Server error", &e.description),
    };
    // The request is answered once, whatever the answer.
    if let Err(e) = cx
        .lore
        .ports()
        .storage
        .delete(&keys::oauth_request(id))
        .await
    {
        return page::error_page(500, "Server error", &e.to_string());
    }
    let state = pending.state.as_deref();
    let fail = |e: OAuthError| error_redirect(&pending.redirect_uri, state, &cx.base, &e);
    if params.one("decision").ok().flatten() != Some("approve") {
        return fail(OAuthError::access_denied("the user denied the request"));
    }
    let org = match params.one("org").ok().flatten().map(OrgId::parse) {
        Some(Ok(org)) => org,
        _ => return fail(OAuthError::access_denied("no org was chosen")),
    };
    if pending.org.as_ref().is_some_and(|p| p != &org) {
        return fail(OAuthError::access_denied("the resource names another org"));
    }
    let member: Option<Membership> = match cx
        .lore
        .ports()
        .record(&OrgKeys::new(&org).member(&principal))
        .await
    {
        Ok(m) => m,
        Err(e) => return fail(OAuthError::server_error(e.to_string())),
    };
    if member.is_none() {
        return fail(OAuthError::access_denied(format!(
            "the user is not a member of org {org}"
        )));
    }
    let chosen = params.all("scope");
    let scopes = Scopes {
        read: pending.scopes.read && chosen.contains(&"mcp:read"),
        write: pending.scopes.write && chosen.contains(&"mcp:write"),
    };
    if !scopes.read && !scopes.write {
        return fail(OAuthError::access_denied("no permission was granted"));
    }
    let now = cx.lore.ports().clock.now_ms();
    let code = grants::secret(cx.lore, "");
    let record = AuthorizationCode {
        client_id: pending.client_id.clone(),
        redirect_uri: pending.redirect_uri.clone(),
        redirect_uri_given: pending.redirect_uri_given,
        code_challenge: pending.code_challenge.clone(),
        principal: principal.clone(),
        org: org.clone(),
        scopes,
        audience: pending.audience.clone(),
        created_at_ms: now,
        expires_at_ms: now + grants::CODE_TTL_MS,
        used_at_ms: None,
        grant: None,
    };
    if let Err(e) = cx
        .lore
        .ports()
        .storage
        .put(&keys::oauth_code(&code), grants::json(&record))
        .await
    {
        return fail(OAuthError::server_error(e.to_string()));
    }
    tracing::info!(client_id = %pending.client_id, %principal, %org, scopes = %scopes.to_oauth_string(), "authorization approved");
    let mut response_params = vec![("code", code.as_str())];
    if let Some(s) = state {
        response_params.push(("state", s));
    }
    response_params.push(("iss", &cx.base));
    page::see_other(&with_params(&pending.redirect_uri, &response_params), None)
}

/// `POST /oauth/signout`; with `everywhere=1`, every browser session of the person ends.
pub async fn sign_out(cx: &Cx<'_>, params: &Params) -> Response<Vec<u8>> {
    let Some(session) = cx.session_for_post(params).await else {
        return cx.stale_form();
    };
    let everywhere = matches!(params.one("everywhere"), Ok(Some("1")));
    if everywhere
        && let Some(principal) = &session.record.principal
        && let Err(e) = lore_directory::sessions::end_all(cx.lore.ports(), principal).await
    {
        return page::error_page(500, "Server error", &e.to_string());
    }
    let _ = session.end(cx.lore).await;
    let clear = crate::web::session::clear_cookie(cx.secure);
    page::html(
        200,
        page::layout(
            "Signed out",
            maud::html! {
                h1 { "Signed out" }
                p {
                    "You are signed out of lore "
                    (if everywhere { "in every browser" } else { "in this browser" }) "."
                }
                p { a href="/oauth/signin" { "Sign in again" } }
            },
        ),
        Some(&clear),
    )
}
