//! The browser session of the sign-in, consent and token pages: a random secret in an
//! `HttpOnly`, `SameSite=Lax` cookie, stored only as a hash, holding who signed in and the
//! CSRF token every form posts back (the synchronizer token pattern). Signing in replaces the
//! session with a new one, so a session id planted before sign-in is worth nothing after.

use base64::Engine;
use http::HeaderMap;
use serde::{Deserialize, Serialize};

use super::form::constant_time_eq;
use super::form::{OAuthError, Params, cookie};
use crate::instance::Lore;
use lore_base::keys;
use lore_directory::sessions;

/// An anonymous session (between the authorization request and sign-in) lives this long.
const ANONYMOUS_TTL_MS: i64 = 3_600_000;
/// A signed-in session lives this long.
const SIGNED_IN_TTL_MS: i64 = 12 * 3_600_000;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BrowserSession {
    pub csrf: String,
    #[serde(default)]
    pub principal: Option<String>,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    /// The principal's session epoch when they signed in (`lore_directory::sessions`).
    #[serde(default)]
    pub epoch: u64,
    /// An upstream sign-in in progress: its state, PKCE verifier and where to go after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<UpstreamAttempt>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UpstreamAttempt {
    pub provider: String,
    pub state: String,
    pub pkce_verifier: String,
    pub then: String,
}

/// A session as loaded for one request, with the cookie to set when it is new.
#[derive(Debug, Clone)]
pub struct Session {
    secret: String,
    pub record: BrowserSession,
    /// `Set-Cookie` value to send (a new or replaced session).
    pub set_cookie: Option<String>,
}

fn random_secret(lore: &Lore) -> String {
    let mut bytes = [0u8; 32];
    lore.ports().random.fill(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The cookie's name: `__Host-` prefixed (Secure, whole host) on HTTPS.
pub fn cookie_name(secure: bool) -> &'static str {
    if secure {
        "__Host-lore_session"
    } else {
        "lore_session"
    }
}

fn set_cookie(secret: &str, secure: bool, max_age_s: i64) -> String {
    format!(
        "{}={secret}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age_s}{}",
        cookie_name(secure),
        if secure { "; Secure" } else { "" }
    )
}

/// Clears the session cookie.
pub fn clear_cookie(secure: bool) -> String {
    set_cookie("", secure, 0)
}

impl Session {
    /// The session this request's cookie names, if it exists and has not expired.
    pub async fn load(
        lore: &Lore,
        headers: &HeaderMap,
        secure: bool,
    ) -> Result<Option<Self>, OAuthError> {
        let Some(secret) = cookie(headers, cookie_name(secure)).filter(|s| s.len() <= 128) else {
            return Ok(None);
        };
        let key = keys::oauth_session(secret);
        let Some(record) = lore
            .ports()
            .record::<BrowserSession>(&key)
            .await?
            .filter(|r| r.expires_at_ms > lore.ports().clock.now_ms())
        else {
            return Ok(None);
        };
        if let Some(principal) = &record.principal
            && sessions::epoch(lore.ports(), principal).await? > record.epoch
        {
            // Ended by a password change or a sign-out everywhere.
            lore.ports().storage.delete(&key).await?;
            return Ok(None);
        }
        Ok(Some(Self {
            secret: secret.to_string(),
            record,
            set_cookie: None,
        }))
    }

    /// The request's session, or a new anonymous one: a record anyone can make, so it counts
    /// against the asking address's rate (`oauth::anonymous`).
    pub async fn load_or_start(
        lore: &Lore,
        request: &http::Request<Vec<u8>>,
        secure: bool,
    ) -> Result<Self, OAuthError> {
        match Self::load(lore, request.headers(), secure).await? {
            Some(s) => Ok(s),
            None => {
                super::anonymous::admit(lore, request).await?;
                Self::start(lore, None, secure).await
            }
        }
    }

    /// A new session (anonymous, or signed in as `principal`).
    pub async fn start(
        lore: &Lore,
        principal: Option<String>,
        secure: bool,
    ) -> Result<Self, OAuthError> {
        let now = lore.ports().clock.now_ms();
        let ttl = if principal.is_some() {
            SIGNED_IN_TTL_MS
        } else {
            ANONYMOUS_TTL_MS
        };
        let epoch = match &principal {
            Some(p) => sessions::epoch(lore.ports(), p).await?,
            None => 0,
        };
        let secret = random_secret(lore);
        let record = BrowserSession {
            csrf: random_secret(lore),
            principal,
            created_at_ms: now,
            expires_at_ms: now + ttl,
            epoch,
            upstream: None,
        };
        super::anonymous::store(
            lore,
            lore_base::storage::Batch::new(),
            &keys::oauth_session(&secret),
            serde_json::to_vec(&record).unwrap_or_default(),
            record.expires_at_ms,
        )
        .await?;
        Ok(Self {
            set_cookie: Some(set_cookie(&secret, secure, ttl / 1000)),
            secret,
            record,
        })
    }

    /// Signs `principal` in: this session ends and a new one, with a new id and CSRF token,
    /// takes its place.
    pub async fn sign_in(
        self,
        lore: &Lore,
        principal: String,
        secure: bool,
    ) -> Result<Self, OAuthError> {
        self.end(lore).await?;
        Self::start(lore, Some(principal), secure).await
    }

    /// Deletes the session.
    pub async fn end(&self, lore: &Lore) -> Result<(), OAuthError> {
        lore.ports()
            .storage
            .delete(&keys::oauth_session(&self.secret))
            .await?;
        Ok(())
    }

    /// Stores a changed record (an upstream sign-in attempt).
    pub async fn save(&self, lore: &Lore) -> Result<(), OAuthError> {
        super::anonymous::store(
            lore,
            lore_base::storage::Batch::new(),
            &keys::oauth_session(&self.secret),
            serde_json::to_vec(&self.record).unwrap_or_default(),
            self.record.expires_at_ms,
        )
        .await
    }

    /// Checks the form's CSRF token against the session's.
    pub fn check_csrf(&self, params: &Params) -> Result<(), OAuthError> {
        let sent = params.one("csrf")?.unwrap_or("");
        if constant_time_eq(sent.as_bytes(), self.record.csrf.as_bytes()) {
            Ok(())
        } else {
            Err(OAuthError::invalid_request(
                "the form is stale or was not sent from this site; reload the page and try again",
            ))
        }
    }
}
