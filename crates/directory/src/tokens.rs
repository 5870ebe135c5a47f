//! Bearer tokens: their secrets, and verifying one into a [`Credential`]. Only hashes are
//! stored; a verified credential may be cached for [`CREDENTIAL_TTL_SECS`], and every
//! revocation path drops the cached copy at once.

use base64::Engine;

use crate::caller::Credential;
use lore_base::error::{LoreError, Result};
use lore_base::keys;
use lore_base::model::{Principal, TokenRecord};
use lore_base::ports::Ports;

/// Every API token starts with this, so leaked tokens are easy to recognise and scan for.
pub const TOKEN_PREFIX: &str = "lore_";

/// A new random token secret: the prefix and 32 random bytes, base64url.
pub fn new_token_secret(ports: &Ports) -> String {
    let mut bytes = [0u8; 32];
    ports.random.fill(&mut bytes);
    format!(
        "{TOKEN_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

/// How long a verified credential may be served from the cache ([`Ports::cache`]). Revocation
/// deletes the entry at once; this bounds only a verification that raced a revocation.
pub const CREDENTIAL_TTL_SECS: u32 = 60;

/// A verified token and its principal as cached under [`keys::cached_credential`]. Principals
/// are never rewritten, and every change that must stop a token (revocation, removing the
/// member or agent) goes through [`crate::admin::revoke_token`], which deletes the entry.
#[derive(serde::Serialize, serde::Deserialize)]
struct CachedCredential {
    token: TokenRecord,
    principal: Principal,
}

/// Drops the cached copy of the credential whose secret hashes to `hash`, so that a revocation
/// written to storage holds on every instance at once. Every revocation path calls it after
/// writing the record; without a cache port there is nothing to drop.
pub async fn forget_cached_credential(ports: &Ports, hash: &str) -> Result<()> {
    let Some(cache) = &ports.cache else {
        return Ok(());
    };
    cache
        .delete(&keys::cached_credential(hash))
        .await
        .map_err(|e| {
            LoreError::Internal(format!(
                "the token is revoked, but its cached credential could not be deleted ({e}); \
                 it stops working within {CREDENTIAL_TTL_SECS} s, or revoke it again"
            ))
        })
}

/// Verifies a bearer secret: known, not revoked, not expired, principal exists. With a cache
/// port, a credential verified by any instance in the last [`CREDENTIAL_TTL_SECS`] is read from
/// the cache instead of storage (two reads saved); expiry is checked either way.
pub async fn verify_token(ports: &Ports, secret: &str) -> Result<Credential> {
    let unauthorized = |why: &str| LoreError::Unauthorized(why.to_string());
    if !secret.starts_with(TOKEN_PREFIX) || secret.len() > 256 {
        return Err(unauthorized("the bearer token is not a lore token"));
    }
    let hash = keys::sha256_hex(secret);
    let cached = match &ports.cache {
        Some(cache) => cache
            .get(&keys::cached_credential(&hash))
            .await
            .and_then(|bytes| serde_json::from_slice::<CachedCredential>(&bytes).ok()),
        None => None,
    };
    let (record, principal) = match cached {
        Some(c) => (c.token, Some(c.principal)),
        None => {
            let record: TokenRecord = ports
                .record(&keys::token_by_hash(&hash))
                .await?
                .ok_or_else(|| unauthorized("the bearer token is unknown"))?;
            (record, None)
        }
    };
    if record.revoked_at_ms.is_some() {
        return Err(unauthorized("the bearer token was revoked"));
    }
    if record
        .expires_at_ms
        .is_some_and(|exp| exp <= ports.clock.now_ms())
    {
        return Err(unauthorized("the bearer token has expired"));
    }
    if let Some(grant) = &record.grant
        && !crate::grants::is_live(ports, grant).await?
    {
        return Err(unauthorized(
            "the bearer token was revoked (its grant was withdrawn)",
        ));
    }
    let principal = match principal {
        Some(p) => p,
        None => {
            let principal: Principal = ports
                .record(&keys::principal(&record.principal))
                .await?
                .ok_or_else(|| unauthorized("the token's principal no longer exists"))?;
            if let Some(cache) = &ports.cache {
                let entry = CachedCredential {
                    token: record.clone(),
                    principal: principal.clone(),
                };
                if let Ok(bytes) = serde_json::to_vec(&entry) {
                    cache
                        .put(&keys::cached_credential(&hash), bytes, CREDENTIAL_TTL_SECS)
                        .await;
                }
            }
            principal
        }
    };
    Ok(Credential {
        principal,
        token: Some(record),
    })
}
