//! Bearer tokens: their secrets, and verifying one into a [`Credential`]. Only hashes are
//! stored; a verified credential may be cached, and is trusted while its org's auth stamp
//! ([`crate::stamp`]) is unchanged, so every revocation holds at once.

use base64::Engine;

use crate::caller::Credential;
use lore_base::error::{LoreError, Result};
use lore_base::ids::OrgId;
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

/// How long a verified credential may stay in the cache ([`Ports::cache`]). It is trusted only
/// while its org's auth stamp ([`crate::stamp`]) is the one it was verified under, so every
/// revocation holds at once; this bounds only how long an unused entry is kept.
pub const CREDENTIAL_TTL_SECS: u32 = 60;

/// A verified token and its principal as cached under [`keys::cached_credential`], with the
/// org it was verified for and that org's auth stamp then. Principals are never rewritten.
#[derive(serde::Serialize, serde::Deserialize)]
struct CachedCredential {
    token: TokenRecord,
    principal: Principal,
    org: OrgId,
    stamp: Option<Vec<u8>>,
}

/// Verifies a bearer secret for a request to `path_org` (`None`: the token's only org): known,
/// not revoked, not expired, its grant live, its principal there. With a cache port, a
/// credential verified before is served from the cache while the org's auth stamp is the one
/// it was verified under (one read of the org's own store instead of two to four of the
/// directory); expiry is checked either way.
pub async fn verify_token(
    ports: &Ports,
    secret: &str,
    path_org: Option<&str>,
) -> Result<Credential> {
    if !secret.starts_with(TOKEN_PREFIX) || secret.len() > 256 {
        return Err(unauthorized("the bearer token is not a lore token"));
    }
    let hash = keys::sha256_hex(secret);
    let Some(cache) = &ports.cache else {
        return verify_stored(ports, &hash).await;
    };
    let key = keys::cached_credential(&hash);
    let cached = cache
        .get(&key)
        .await
        .and_then(|bytes| serde_json::from_slice::<CachedCredential>(&bytes).ok());
    // The org whose stamp vouches for the request; its stamp is read before any record.
    let org = match (path_org, &cached) {
        (Some(name), _) => OrgId::parse(name).ok(),
        (None, Some(c)) => only_org(&c.token),
        // Learns the org from the record, which is read again after the stamp.
        (None, None) => ports
            .record::<TokenRecord>(&keys::token_by_hash(&hash))
            .await?
            .as_ref()
            .and_then(only_org),
    };
    let Some(org) = org else {
        return verify_stored(ports, &hash).await;
    };
    let stamp = crate::stamp::read(ports, &org).await?;
    if let Some(c) = cached
        && c.org == org
        && c.stamp == stamp
    {
        check_expiry(ports, &c.token)?;
        return Ok(Credential {
            principal: c.principal,
            token: Some(c.token),
            stamp: Some((org, stamp)),
        });
    }
    let mut credential = verify_stored(ports, &hash).await?;
    if let Some(token) = &credential.token {
        let entry = CachedCredential {
            token: token.clone(),
            principal: credential.principal.clone(),
            org: org.clone(),
            stamp: stamp.clone(),
        };
        if let Ok(bytes) = serde_json::to_vec(&entry) {
            cache.put(&key, bytes, CREDENTIAL_TTL_SECS).await;
        }
    }
    credential.stamp = Some((org, stamp));
    Ok(credential)
}

fn unauthorized(why: &str) -> LoreError {
    LoreError::Unauthorized(why.to_string())
}

fn only_org(token: &TokenRecord) -> Option<OrgId> {
    match token.orgs.as_slice() {
        [only] => Some(only.clone()),
        _ => None,
    }
}

fn check_expiry(ports: &Ports, token: &TokenRecord) -> Result<()> {
    if expired(ports, token.expires_at_ms) {
        return Err(unauthorized("the bearer token has expired"));
    }
    Ok(())
}

/// Whether a token that expires at `expires_at_ms` (`None`: never) has expired by now.
pub fn expired(ports: &Ports, expires_at_ms: Option<i64>) -> bool {
    expires_at_ms.is_some_and(|exp| exp <= ports.clock.now_ms())
}

/// Verifies the token whose secret hashes to `hash` from storage.
async fn verify_stored(ports: &Ports, hash: &str) -> Result<Credential> {
    let record: TokenRecord = ports
        .record(&keys::token_by_hash(hash))
        .await?
        .ok_or_else(|| unauthorized("the bearer token is unknown"))?;
    if record.revoked_at_ms.is_some() {
        return Err(unauthorized("the bearer token was revoked"));
    }
    check_expiry(ports, &record)?;
    if let Some(grant) = &record.grant
        && !crate::grants::is_live(ports, grant).await?
    {
        return Err(unauthorized(
            "the bearer token was revoked (its grant was withdrawn)",
        ));
    }
    let principal: Principal = ports
        .record(&keys::principal(&record.principal))
        .await?
        .ok_or_else(|| unauthorized("the token's principal no longer exists"))?;
    Ok(Credential {
        principal,
        token: Some(record),
        stamp: None,
    })
}
