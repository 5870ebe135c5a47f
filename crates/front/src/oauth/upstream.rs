//! Sign-in through an upstream identity provider: GitHub, or any OAuth 2.0 / OpenID Connect
//! provider by configuration. The client side is the `oauth2` crate (authorization URL with
//! state and PKCE, code exchange) over the HTTP port; the person is then read from the
//! provider's user endpoint (GitHub's `/user`, OIDC's `userinfo`). A first sign-in creates a
//! user who belongs to no org; invites (`members.invite`) add them.

use oauth2::{
    AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, PkceCodeChallenge,
    PkceCodeVerifier, RedirectUrl, Scope, TokenResponse, TokenUrl,
};
use serde_json::Value;

use super::client_http::PortHttp;
use crate::instance::Lore;
use crate::providers::{Provider, ProviderKind};
use crate::web::Cx;
use crate::web::form::constant_time_eq;
use crate::web::form::{OAuthError, Params};
use crate::web::page;
use crate::web::session::{Session, UpstreamAttempt};
use lore_base::ids::new_ulid;
use lore_base::keys;
use lore_base::model::{Principal, PrincipalKind};
use lore_base::ports::OutboundRequest;
use lore_base::storage::{Batch, StorageError};

/// The providers the sign-in page offers: `(id, label)`.
pub fn choices(lore: &Lore) -> Vec<(String, String)> {
    lore.config
        .upstream
        .iter()
        .map(|p| (p.id.clone(), p.label.clone()))
        .collect()
}

fn provider<'a>(lore: &'a Lore, id: &str) -> Option<&'a Provider> {
    lore.config.upstream.iter().find(|p| p.id == id)
}

fn random_b64(lore: &Lore) -> String {
    super::grants::secret(lore, "")
}

type Configured = oauth2::basic::BasicClient<
    oauth2::EndpointSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointSet,
>;

fn client(p: &Provider, base: &str) -> Result<Configured, OAuthError> {
    let bad = |e: url::ParseError| OAuthError::server_error(format!("provider {}: {e}", p.id));
    let mut client = oauth2::basic::BasicClient::new(ClientId::new(p.client_id.clone()))
        .set_auth_uri(AuthUrl::new(p.authorize_url.clone()).map_err(bad)?)
        .set_token_uri(TokenUrl::new(p.token_url.clone()).map_err(bad)?)
        .set_redirect_uri(
            RedirectUrl::new(format!("{base}/oauth/upstream/callback")).map_err(bad)?,
        );
    if let Some(secret) = &p.client_secret {
        client = client.set_client_secret(ClientSecret::new(secret.clone()));
    }
    Ok(client)
}

/// `POST /oauth/upstream/start`: sends the browser to the provider.
pub async fn start(cx: &Cx<'_>, params: &Params) -> http::Response<Vec<u8>> {
    let Some(mut session) = cx.session_for_post(params).await else {
        return cx.stale_form();
    };
    let id = params.one("provider").ok().flatten().unwrap_or("");
    let Some(p) = provider(cx.lore, id) else {
        return page::error_page(
            400,
            "Unknown sign-in method",
            "That identity provider is not configured here.",
        );
    };
    let client = match client(p, &cx.base) {
        Ok(c) => c,
        Err(e) => return page::error_page(500, "Server error", &e.description),
    };
    let state = random_b64(cx.lore);
    let verifier = random_b64(cx.lore);
    let challenge =
        PkceCodeChallenge::from_code_verifier_sha256(&PkceCodeVerifier::new(verifier.clone()));
    let mut request = client
        .authorize_url(|| CsrfToken::new(state.clone()))
        .set_pkce_challenge(challenge);
    for s in &p.scopes {
        request = request.add_scope(Scope::new(s.clone()));
    }
    let (url, _) = request.url();
    session.record.upstream = Some(UpstreamAttempt {
        provider: p.id.clone(),
        state,
        pkce_verifier: verifier,
        then: params.one("then").ok().flatten().unwrap_or("").to_string(),
    });
    if let Err(e) = session.save(cx.lore).await {
        return page::error_page(500, "Server error", &e.description);
    }
    page::see_other(url.as_str(), None)
}

/// Who the provider says signed in.
struct Person {
    subject: String,
    name: String,
    /// Identities invites can name: `github:{login}`, `email:{verified address}`.
    identities: Vec<String>,
}

async fn read_person(cx: &Cx<'_>, p: &Provider, access_token: &str) -> Result<Person, OAuthError> {
    let http = cx
        .lore
        .ports()
        .http
        .as_ref()
        .ok_or_else(|| OAuthError::server_error("no outbound HTTP on this host"))?;
    let response = http
        .send(OutboundRequest {
            method: "GET".into(),
            url: p.userinfo_url.clone(),
            headers: vec![
                ("authorization".into(), format!("Bearer {access_token}")),
                ("accept".into(), "application/json".into()),
                ("user-agent".into(), format!("lore/{}", lore_base::VERSION)),
            ],
            body: Vec::new(),
            // The operator configured the provider; the sign-in is the browser's.
            reach: lore_base::outbound::Reach::Configured,
            share: cx.client_share(),
            timeout_ms: 15_000,
        })
        .await
        .map_err(|e| OAuthError::server_error(format!("the provider's user endpoint: {e}")))?;
    if response.status != 200 {
        return Err(OAuthError::access_denied(format!(
            "the provider's user endpoint answered HTTP {}",
            response.status
        )));
    }
    let user: Value = serde_json::from_slice(&response.body)
        .map_err(|_| OAuthError::server_error("the provider's user endpoint sent no JSON"))?;
    let text = |k: &str| user.get(k).and_then(Value::as_str).map(str::to_string);
    match p.kind {
        ProviderKind::GitHub => {
            let id = user
                .get("id")
                .and_then(Value::as_u64)
                .ok_or_else(|| OAuthError::server_error("GitHub sent no user id"))?;
            let login = text("login").unwrap_or_else(|| id.to_string());
            let mut identities = vec![format!("github:{}", login.to_ascii_lowercase())];
            if let Some(email) = text("email") {
                identities.push(format!("email:{}", email.to_ascii_lowercase()));
            }
            Ok(Person {
                subject: id.to_string(),
                name: text("name").unwrap_or_else(|| login.clone()),
                identities,
            })
        }
        ProviderKind::Oidc => {
            let sub =
                text("sub").ok_or_else(|| OAuthError::server_error("the provider sent no sub"))?;
            let mut identities = Vec::new();
            let verified = user.get("email_verified").and_then(Value::as_bool) == Some(true);
            if let (Some(email), true) = (text("email"), verified) {
                identities.push(format!("email:{}", email.to_ascii_lowercase()));
            }
            Ok(Person {
                name: text("name")
                    .or_else(|| text("preferred_username"))
                    .or_else(|| text("email"))
                    .unwrap_or_else(|| sub.clone()),
                subject: sub,
                identities,
            })
        }
    }
}

/// The principal of an upstream identity, created on its first sign-in.
async fn principal_of(cx: &Cx<'_>, p: &Provider, person: &Person) -> Result<String, OAuthError> {
    let key = keys::identity(&p.id, &person.subject);
    if let Some(id) = cx.lore.ports().storage.get(&key).await? {
        return Ok(String::from_utf8_lossy(&id).into_owned());
    }
    let principal = Principal {
        id: format!("usr_{}", new_ulid(cx.lore.ports())),
        kind: PrincipalKind::User,
        name: person.name.chars().take(200).collect(),
        description: format!("signed in with {}", p.label),
        created_at_ms: cx.lore.ports().clock.now_ms(),
        org: None,
    };
    let mut batch = Batch::new();
    batch
        .require_absent(&key)
        .put(&key, principal.id.as_bytes().to_vec())
        .put(
            keys::principal(&principal.id),
            super::grants::json(&principal),
        );
    match cx.lore.ports().storage.commit(batch).await {
        Ok(()) => {
            tracing::info!(principal = %principal.id, provider = %p.id, "new user signed in");
            Ok(principal.id)
        }
        // A second sign-in of the same person at the same moment created it.
        Err(StorageError::Conflict { .. }) => cx
            .lore
            .ports()
            .storage
            .get(&key)
            .await?
            .map(|id| String::from_utf8_lossy(&id).into_owned())
            .ok_or_else(|| OAuthError::server_error("identity vanished")),
        Err(e) => Err(e.into()),
    }
}

/// `GET /oauth/upstream/callback`: the provider sends the browser back.
pub async fn callback(cx: &Cx<'_>) -> http::Response<Vec<u8>> {
    let params = Params::query(cx.request.uri());
    let session = match Session::load(cx.lore, cx.request.headers(), cx.secure).await {
        Ok(Some(s)) => s,
        Ok(None) => return cx.stale_form(),
        Err(e) => return page::error_page(500, "Server error", &e.description),
    };
    let Some(attempt) = session.record.upstream.clone() else {
        return cx.stale_form();
    };
    let state = params.one("state").ok().flatten().unwrap_or("");
    if !constant_time_eq(state.as_bytes(), attempt.state.as_bytes()) {
        tracing::warn!("upstream sign-in refused: the state does not match this browser's");
        return cx.stale_form();
    }
    if let Some(error) = params.one("error").ok().flatten() {
        return page::error_page(
            403,
            "Sign-in was not completed",
            &format!("The identity provider answered: {error}."),
        );
    }
    match finish(cx, &attempt, params.one("code").ok().flatten()).await {
        Ok(principal) => match session.sign_in(cx.lore, principal, cx.secure).await {
            Ok(new) => {
                let next = super::after::after_sign_in(Some(attempt.then.as_str()));
                page::see_other(&next, new.set_cookie.as_deref())
            }
            Err(e) => page::error_page(500, "Server error", &e.description),
        },
        Err(e) => {
            tracing::warn!(error = e.error, description = %e.description, "upstream sign-in failed");
            page::error_page(
                if e.status >= 500 { 502 } else { 403 },
                "Sign-in failed",
                &e.description,
            )
        }
    }
}

async fn finish(
    cx: &Cx<'_>,
    attempt: &UpstreamAttempt,
    code: Option<&str>,
) -> Result<String, OAuthError> {
    let p = provider(cx.lore, &attempt.provider)
        .ok_or_else(|| OAuthError::access_denied("that provider is no longer configured"))?;
    let code = code.ok_or_else(|| OAuthError::access_denied("the provider sent no code"))?;
    let http = cx
        .lore
        .ports()
        .http
        .as_ref()
        .ok_or_else(|| OAuthError::server_error("no outbound HTTP on this host"))?;
    let tokens = client(p, &cx.base)?
        .exchange_code(AuthorizationCode::new(code.to_string()))
        .set_pkce_verifier(PkceCodeVerifier::new(attempt.pkce_verifier.clone()))
        .request_async(&PortHttp(http.as_ref(), cx.client_share()))
        .await
        .map_err(|e| match e {
            oauth2::RequestTokenError::ServerResponse(r) => {
                OAuthError::access_denied(format!("the provider refused the code: {}", r.error()))
            }
            other => OAuthError::server_error(format!("the provider's token endpoint: {other}")),
        })?;
    let person = read_person(cx, p, tokens.access_token().secret()).await?;
    let principal = principal_of(cx, p, &person).await?;
    lore_directory::invites::accept(cx.lore.ports(), &principal, &person.identities).await?;
    Ok(principal)
}
