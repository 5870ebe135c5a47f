//! `POST /oauth/token` (authorization code with PKCE, and rotating refresh tokens) and
//! `POST /oauth/revoke` (RFC 7009). A code is exchanged once: a second exchange revokes what
//! the first issued. A refresh token is traded once: presenting a traded one again means two
//! parties hold it, and the whole grant is revoked (OAuth 2.1 section 4.3.1).

use base64::Engine;
use http::{Request, Response};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::authorize::audience;
use super::clients::{self, Client};
use super::grants::{self, AuthorizationCode, Grant, IssuedTokens, RefreshToken};
use super::reply;
use crate::web::Cx;
use crate::web::form::{self, OAuthError, Params};
use lore_base::keys;
use lore_base::model::TokenRecord;
use lore_base::storage::{Batch, StorageError};

/// The largest token or revocation request body.
const MAX_FORM_BYTES: usize = 16 * 1024;

fn form_of(request: &Request<Vec<u8>>) -> Result<Params, OAuthError> {
    if !form::is_form(request.headers()) {
        return Err(OAuthError::invalid_request(
            "send the parameters as application/x-www-form-urlencoded",
        ));
    }
    if request.body().len() > MAX_FORM_BYTES {
        return Err(OAuthError::invalid_request("the request body is too large"));
    }
    Ok(Params::parse(request.body()))
}

fn token_response(issued: &IssuedTokens) -> Response<Vec<u8>> {
    let mut body = json!({
        "access_token": issued.access_token,
        "token_type": "Bearer",
        "expires_in": issued.expires_in_s,
        "scope": issued.scopes.to_oauth_string(),
    });
    if let Some(refresh) = &issued.refresh_token {
        body["refresh_token"] = json!(refresh);
    }
    let mut response = reply::json(200, &body);
    response.headers_mut().insert(
        http::header::PRAGMA,
        http::HeaderValue::from_static("no-cache"),
    );
    response
}

/// An error of the token endpoint; `invalid_client` over Basic names the scheme to use.
fn error_response(e: &OAuthError, basic: bool) -> Response<Vec<u8>> {
    let mut response = e.response();
    if e.error == "invalid_client" && basic {
        response.headers_mut().insert(
            http::header::WWW_AUTHENTICATE,
            http::HeaderValue::from_static("Basic realm=\"lore\""),
        );
    }
    response
}

fn used_basic(cx: &Cx<'_>) -> bool {
    crate::headers::get(cx.request.headers(), "authorization")
        .is_some_and(|v| v.to_ascii_lowercase().starts_with("basic "))
}

/// `POST /oauth/token`.
pub async fn token(cx: &Cx<'_>) -> Response<Vec<u8>> {
    let result = async {
        let params = form_of(cx.request)?;
        let grant_type = params.required("grant_type")?.to_string();
        let client = clients::authenticate(cx, &params).await?;
        match grant_type.as_str() {
            "authorization_code" => exchange_code(cx, &params, &client).await,
            "refresh_token" => refresh(cx, &params, &client).await,
            other => Err(OAuthError::unsupported_grant_type(format!(
                "grant_type {other:?} is not supported; use authorization_code or refresh_token"
            ))),
        }
    }
    .await;
    match result {
        Ok(issued) => token_response(&issued),
        Err(e) => error_response(&e, used_basic(cx)),
    }
}

/// Whether `verifier` is a valid PKCE verifier whose S256 challenge is `challenge`.
fn pkce_matches(verifier: &str, challenge: &str) -> bool {
    let well_formed = (43..=128).contains(&verifier.len())
        && verifier
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'));
    let computed = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(Sha256::digest(verifier.as_bytes()));
    well_formed && form::constant_time_eq(computed.as_bytes(), challenge.as_bytes())
}

async fn exchange_code(
    cx: &Cx<'_>,
    params: &Params,
    client: &Client,
) -> Result<IssuedTokens, OAuthError> {
    let code = params.required("code")?;
    let key = keys::oauth_code(code);
    let stored = cx.lore.ports().storage.get(&key).await?;
    let Some(bytes) = stored else {
        return Err(OAuthError::invalid_grant(
            "the authorization code is unknown",
        ));
    };
    let mut record: AuthorizationCode = serde_json::from_slice(&bytes)
        .map_err(|e| OAuthError::server_error(format!("stored code: {e}")))?;
    if record.client_id != client.client_id {
        return Err(OAuthError::invalid_grant(
            "the authorization code was issued to another client",
        ));
    }
    if record.used_at_ms.is_some() {
        if let Some(grant) = &record.grant {
            grants::revoke(cx.lore.ports(), grant, "authorization code replayed").await?;
        }
        return Err(OAuthError::invalid_grant(
            "the authorization code was already used; the tokens issued for it are revoked",
        ));
    }
    let now = cx.lore.ports().clock.now_ms();
    if record.expires_at_ms <= now {
        return Err(OAuthError::invalid_grant(
            "the authorization code has expired",
        ));
    }
    match params.one("redirect_uri")? {
        Some(uri) if uri != record.redirect_uri => {
            return Err(OAuthError::invalid_grant(
                "redirect_uri differs from the one in the authorization request",
            ));
        }
        None if record.redirect_uri_given => {
            return Err(OAuthError::invalid_request(
                "redirect_uri is required: the authorization request named one",
            ));
        }
        _ => {}
    }
    let verifier = params
        .one("code_verifier")?
        .ok_or_else(|| OAuthError::invalid_request("PKCE: the code_verifier is missing"))?;
    if !pkce_matches(verifier, &record.code_challenge) {
        return Err(OAuthError::invalid_grant(
            "PKCE: the code_verifier does not match the code_challenge",
        ));
    }
    if let Some(resource) = params.one("resource")? {
        let (aud, _) = audience(&cx.base, Some(resource))?;
        if aud != record.audience {
            return Err(OAuthError::invalid_target(format!(
                "the code was issued for {}, not {resource}",
                record.audience
            )));
        }
    }
    let grant = grants::new_grant(cx.lore, &record, &client.display_name());
    let mut batch = Batch::new();
    let issued = grants::issue(
        cx.lore,
        &mut batch,
        &grant,
        grant.scopes,
        client.may_refresh(),
    );
    record.used_at_ms = Some(now);
    record.grant = Some(grant.id.clone());
    if client.expires_at_ms.is_some() {
        // A registration that was used is kept: it no longer ends (`web::anonymous`).
        let kept = Client {
            expires_at_ms: None,
            ..client.clone()
        };
        batch.put(keys::oauth_client(&client.client_id), grants::json(&kept));
    }
    batch
        .require_equals(&key, bytes)
        .put(&key, grants::json(&record))
        .put(keys::oauth_grant(&grant.id), grants::json(&grant))
        .put(
            keys::oauth_user_grant(&grant.principal, &grant.id),
            Vec::new(),
        );
    match cx.lore.ports().storage.commit(batch).await {
        Ok(()) => {
            tracing::info!(client_id = %client.client_id, grant = %grant.id, "authorization code exchanged");
            Ok(issued)
        }
        Err(StorageError::Conflict { .. }) => Err(OAuthError::invalid_grant(
            "the authorization code was already used",
        )),
        Err(e) => Err(e.into()),
    }
}

async fn refresh(
    cx: &Cx<'_>,
    params: &Params,
    client: &Client,
) -> Result<IssuedTokens, OAuthError> {
    let token = params.required("refresh_token")?;
    let key = keys::oauth_refresh(token);
    let Some(bytes) = cx.lore.ports().storage.get(&key).await? else {
        return Err(OAuthError::invalid_grant("the refresh token is unknown"));
    };
    let mut record: RefreshToken = serde_json::from_slice(&bytes)
        .map_err(|e| OAuthError::server_error(format!("stored refresh token: {e}")))?;
    if record.client_id != client.client_id {
        return Err(OAuthError::invalid_grant(
            "the refresh token was issued to another client",
        ));
    }
    if record.used_at_ms.is_some() {
        grants::revoke(cx.lore.ports(), &record.grant, "refresh token reused").await?;
        tracing::warn!(grant = %record.grant, client_id = %client.client_id, "refresh token reuse: grant revoked");
        return Err(OAuthError::invalid_grant(
            "the refresh token was already used; every token of this grant is now revoked",
        ));
    }
    let now = cx.lore.ports().clock.now_ms();
    if record.expires_at_ms <= now {
        return Err(OAuthError::invalid_grant("the refresh token has expired"));
    }
    let grant_key = keys::oauth_grant(&record.grant);
    let Some(mut grant) = cx.lore.ports().record::<Grant>(&grant_key).await? else {
        return Err(OAuthError::invalid_grant("the grant no longer exists"));
    };
    if grant.revoked_at_ms.is_some() {
        return Err(OAuthError::invalid_grant("the grant was revoked"));
    }
    let scopes = match params.one("scope")? {
        None => grant.scopes,
        Some(scope) => {
            let asked = super::authorize::requested_scopes(Some(scope))?;
            if (asked.read && !grant.scopes.read) || (asked.write && !grant.scopes.write) {
                return Err(OAuthError::invalid_scope(format!(
                    "the grant covers {} only",
                    grant.scopes.to_oauth_string()
                )));
            }
            asked
        }
    };
    if let Some(resource) = params.one("resource")? {
        let (aud, _) = audience(&cx.base, Some(resource))?;
        if aud != grant.audience {
            return Err(OAuthError::invalid_target(format!(
                "the grant is for {}, not {resource}",
                grant.audience
            )));
        }
    }
    let mut batch = Batch::new();
    let issued = grants::issue(cx.lore, &mut batch, &grant, scopes, true);
    record.used_at_ms = Some(now);
    grant.refreshed_at_ms = Some(now);
    batch
        .require_equals(&key, bytes)
        .put(&key, grants::json(&record))
        .put(&grant_key, grants::json(&grant));
    match cx.lore.ports().storage.commit(batch).await {
        Ok(()) => Ok(issued),
        Err(StorageError::Conflict { .. }) => {
            // Someone traded the same refresh token at the same moment.
            grants::revoke(
                cx.lore.ports(),
                &record.grant,
                "refresh token used twice at once",
            )
            .await?;
            Err(OAuthError::invalid_grant(
                "the refresh token was used twice; every token of this grant is now revoked",
            ))
        }
        Err(e) => Err(e.into()),
    }
}

/// `POST /oauth/revoke` (RFC 7009): revokes an access token, or a refresh token and its
/// grant. Unknown tokens are answered 200, as the RFC asks.
pub async fn revoke(cx: &Cx<'_>) -> Response<Vec<u8>> {
    let result = async {
        let params = form_of(cx.request)?;
        let client = clients::authenticate(cx, &params).await?;
        let token = params.required("token")?;
        let hint = params.one("token_type_hint")?;
        if let Some(h) = hint
            && h != "access_token"
            && h != "refresh_token"
        {
            return Err(OAuthError {
                error: "unsupported_token_type",
                description: format!("token_type_hint {h:?} is not one lore issues"),
                status: 400,
                retry_after_s: None,
            });
        }
        revoke_token(cx, &client, token).await
    }
    .await;
    match result {
        Ok(()) => {
            let mut r = reply::json(200, &json!({}));
            r.headers_mut().insert(
                http::header::PRAGMA,
                http::HeaderValue::from_static("no-cache"),
            );
            r
        }
        Err(e) => error_response(&e, used_basic(cx)),
    }
}

async fn revoke_token(cx: &Cx<'_>, client: &Client, token: &str) -> Result<(), OAuthError> {
    let not_yours = || OAuthError::unauthorized_client("the token was issued to another client");
    if let Some(record) = cx
        .lore
        .ports()
        .record::<RefreshToken>(&keys::oauth_refresh(token))
        .await?
    {
        if record.client_id != client.client_id {
            return Err(not_yours());
        }
        grants::revoke(cx.lore.ports(), &record.grant, "revoked by the client").await?;
        return Ok(());
    }
    let key = keys::token_by_hash(&keys::sha256_hex(token));
    if let Some(mut record) = cx.lore.ports().record::<TokenRecord>(&key).await? {
        match &record.client_id {
            Some(id) if id == &client.client_id => {}
            // A static token, or another client's: not this client's to revoke.
            _ => return Err(not_yours()),
        }
        let mut batch = Batch::new();
        let fresh = record.revoked_at_ms.is_none();
        if fresh {
            record.revoked_at_ms = Some(cx.lore.ports().clock.now_ms());
            batch.put(key, grants::json(&record));
        }
        // Every instance stops accepting it at once: no cached copy outlives its org's stamp.
        lore_directory::stamp::renew(cx.lore.ports(), &mut batch, &record.orgs);
        cx.lore.ports().storage.commit(batch).await?;
        if fresh {
            tracing::info!(token_id = %record.id, client_id = %client.client_id, "access token revoked");
        }
    }
    Ok(())
}
