//! What consent creates and the token endpoint trades: authorization codes, grants (one
//! consent's family of tokens) and refresh tokens, and the access tokens issued from them.
//! Access tokens are ordinary [`TokenRecord`]s (looked up by hash like every lore token)
//! that also name their audience, client and grant; revoking the grant revokes them all.

use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::instance::Lore;
use lore_base::ids::{OrgId, new_ulid};
use lore_base::keys;
use lore_base::model::{Scopes, TokenRecord};
use lore_base::storage::Batch;
pub use lore_directory::grants::{Grant, of_principal, revoke};

/// An authorization code is good for this long (OAuth 2.1 section 4.1.2: at most 10 minutes).
pub const CODE_TTL_MS: i64 = 5 * 60_000;
/// An access token is good for this long.
pub const ACCESS_TTL_MS: i64 = 3_600_000;
/// A refresh token is good for this long after it was issued (each rotation starts anew).
pub const REFRESH_TTL_MS: i64 = 30 * 86_400_000;

/// The prefixes of what lore issues: easy to recognise in a leak, never confused.
pub const ACCESS_PREFIX: &str = "lore_at_";
pub const REFRESH_PREFIX: &str = "lore_rt_";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AuthorizationCode {
    pub client_id: String,
    pub redirect_uri: String,
    /// Whether the authorization request named the redirect URI (then the token request must
    /// repeat it).
    pub redirect_uri_given: bool,
    pub code_challenge: String,
    pub principal: String,
    pub org: OrgId,
    pub scopes: Scopes,
    pub audience: String,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    /// Set when the code was exchanged; a second exchange revokes what the first issued.
    #[serde(default)]
    pub used_at_ms: Option<i64>,
    #[serde(default)]
    pub grant: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RefreshToken {
    pub grant: String,
    pub client_id: String,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    /// Set when it was traded for new tokens; presenting it again revokes the grant.
    #[serde(default)]
    pub used_at_ms: Option<i64>,
}

/// What the token endpoint hands out.
#[derive(Debug, Clone)]
pub struct IssuedTokens {
    pub access_token: String,
    pub refresh_token: Option<String>,
    pub expires_in_s: i64,
    pub scopes: Scopes,
}

/// A random secret with a prefix (32 bytes, base64url).
pub fn secret(lore: &Lore, prefix: &str) -> String {
    let mut bytes = [0u8; 32];
    lore.ports().random.fill(&mut bytes);
    format!(
        "{prefix}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

pub fn json(value: &impl Serialize) -> Vec<u8> {
    serde_json::to_vec(value).expect("records serialize")
}

/// Adds an access token (and, when asked, a refresh token) of `grant` to `batch`.
pub fn issue(
    lore: &Lore,
    batch: &mut Batch,
    grant: &Grant,
    scopes: Scopes,
    with_refresh: bool,
) -> IssuedTokens {
    let now = lore.ports().clock.now_ms();
    let access_token = secret(lore, ACCESS_PREFIX);
    let record = TokenRecord {
        id: format!("tok_{}", new_ulid(lore.ports())),
        principal: grant.principal.clone(),
        orgs: vec![grant.org.clone()],
        scopes,
        created_at_ms: now,
        expires_at_ms: Some(now + ACCESS_TTL_MS),
        revoked_at_ms: None,
        label: Some(grant.client_name.clone()),
        audience: Some(grant.audience.clone()),
        client_id: Some(grant.client_id.clone()),
        grant: Some(grant.id.clone()),
    };
    let key = keys::token_by_hash(&keys::sha256_hex(&access_token));
    batch.require_absent(&key).put(key, json(&record));
    let refresh_token = with_refresh.then(|| {
        let token = secret(lore, REFRESH_PREFIX);
        let record = RefreshToken {
            grant: grant.id.clone(),
            client_id: grant.client_id.clone(),
            created_at_ms: now,
            expires_at_ms: now + REFRESH_TTL_MS,
            used_at_ms: None,
        };
        let key = keys::oauth_refresh(&token);
        batch.require_absent(&key).put(key, json(&record));
        token
    });
    IssuedTokens {
        access_token,
        refresh_token,
        expires_in_s: ACCESS_TTL_MS / 1000,
        scopes,
    }
}

/// A new grant for a consent (not yet stored).
pub fn new_grant(lore: &Lore, code: &AuthorizationCode, client_name: &str) -> Grant {
    Grant {
        id: format!("grt_{}", new_ulid(lore.ports())),
        principal: code.principal.clone(),
        client_id: code.client_id.clone(),
        client_name: client_name.to_string(),
        org: code.org.clone(),
        scopes: code.scopes,
        audience: code.audience.clone(),
        created_at_ms: lore.ports().clock.now_ms(),
        refreshed_at_ms: None,
        revoked_at_ms: None,
        revoked_reason: None,
    }
}
