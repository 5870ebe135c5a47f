//! Authentication and the [`Caller`]: who is asking, in which org, with which role and scopes.
//! A `Caller` is only ever built here, from a verified token (or the local owner when the server
//! runs without auth), after the org membership is checked. Every org-scoped operation takes a
//! `&Caller` and derives its storage keys from it.

use base64::Engine;

use crate::error::{LoreError, Result};
use crate::ids::OrgId;
use crate::keys::{self, OrgKeys};
use crate::model::{Membership, Principal, Role, Scopes, TokenRecord};
use crate::ports::Ports;

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

/// The authenticated identity of one request, pinned to one org.
#[derive(Debug, Clone)]
pub struct Caller {
    principal: Principal,
    org: OrgId,
    role: Role,
    scopes: Scopes,
    token_id: Option<String>,
    /// The orgs the token is bound to (`None` for the local owner, who reaches all of theirs).
    token_orgs: Option<Vec<OrgId>>,
    keys: OrgKeys,
}

impl Caller {
    pub fn principal(&self) -> &Principal {
        &self.principal
    }
    pub fn org(&self) -> &OrgId {
        &self.org
    }
    pub fn role(&self) -> Role {
        self.role
    }
    pub fn scopes(&self) -> Scopes {
        self.scopes
    }
    pub fn token_id(&self) -> Option<&str> {
        self.token_id.as_deref()
    }
    pub fn keys(&self) -> &OrgKeys {
        &self.keys
    }
    /// Whether this credential may reach `org` at all (before membership).
    pub fn token_reaches(&self, org: &OrgId) -> bool {
        self.token_orgs
            .as_ref()
            .is_none_or(|orgs| orgs.contains(org))
    }

    /// Role check for writes (the token's scopes are checked at the transport, which answers
    /// 403 `insufficient_scope`; this is the second gate).
    pub fn require_write(&self, action: &str) -> Result<()> {
        if !self.scopes.write {
            return Err(LoreError::NeedsWrite(format!(
                "{action} needs a token with the mcp:write scope"
            )));
        }
        if !self.role.can_write() {
            return Err(LoreError::NeedsWrite(format!(
                "{action} needs the member role or higher; you are a {} of {}",
                self.role.as_str(),
                self.org
            )));
        }
        Ok(())
    }
}

/// A verified credential, before an org is chosen.
#[derive(Debug, Clone)]
pub struct Credential {
    pub principal: Principal,
    pub token: Option<TokenRecord>,
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
        && !crate::oauth::grants::is_live(ports, grant).await?
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

/// The local owner, for servers started with `--no-auth` on a loopback address.
pub async fn local_owner(ports: &Ports) -> Result<Credential> {
    let id = ports.storage.get(keys::LOCAL_OWNER).await?.ok_or_else(|| {
        LoreError::Unauthorized("the database has no local owner; run `lore init`".into())
    })?;
    let id = String::from_utf8(id)
        .map_err(|_| LoreError::Internal("local owner id is not UTF-8".into()))?;
    let principal: Principal = ports
        .record(&keys::principal(&id))
        .await?
        .ok_or_else(|| LoreError::Internal("the local owner principal is missing".into()))?;
    Ok(Credential {
        principal,
        token: None,
    })
}

/// Pins a credential to one org: the path org if given (it must be one the token is bound to),
/// else the token's only org. The principal must be a member of it.
pub async fn resolve_caller(
    ports: &Ports,
    credential: Credential,
    path_org: Option<&str>,
    default_org: &OrgId,
) -> Result<Caller> {
    let org = match (&credential.token, path_org) {
        (_, Some(name)) => {
            let org = OrgId::parse(name).map_err(|_| {
                LoreError::Forbidden(format!("{name:?} is not an org you can reach"))
            })?;
            if let Some(token) = &credential.token
                && !token.orgs.contains(&org)
            {
                return Err(LoreError::Forbidden(format!(
                    "this token is not valid for org {org}"
                )));
            }
            org
        }
        (Some(token), None) => match token.orgs.as_slice() {
            [only] => only.clone(),
            [] => return Err(LoreError::Forbidden("this token is bound to no org".into())),
            many => {
                let names: Vec<&str> = many.iter().map(OrgId::as_str).collect();
                return Err(LoreError::Forbidden(format!(
                    "this token reaches several orgs ({}); connect to /mcp/{{org}} to choose one",
                    names.join(", ")
                )));
            }
        },
        (None, None) => default_org.clone(),
    };
    let keys = OrgKeys::new(&org);
    let membership: Membership = ports
        .record(&keys.member(&credential.principal.id))
        .await?
        .ok_or_else(|| LoreError::Forbidden(format!("you are not a member of org {org}")))?;
    let scopes = credential.token.as_ref().map_or(Scopes::ALL, |t| t.scopes);
    Ok(Caller {
        principal: credential.principal,
        role: membership.role,
        scopes,
        token_orgs: credential.token.as_ref().map(|t| t.orgs.clone()),
        token_id: credential.token.map(|t| t.id),
        org,
        keys,
    })
}

/// The owner of a behavior, for its reaction: `principal` as a member of `org` now, with the
/// role its membership has now and both scopes (a reaction has no token; the role decides).
/// Fails when the principal is gone or no longer a member.
pub async fn behavior_owner(ports: &Ports, org: &OrgId, principal: &str) -> Result<Caller> {
    let principal: Principal = ports
        .record(&keys::principal(principal))
        .await?
        .ok_or_else(|| LoreError::Forbidden(format!("the owner {principal} no longer exists")))?;
    let credential = Credential {
        principal,
        token: None,
    };
    let keys = OrgKeys::new(org);
    let membership: Membership = ports
        .record(&keys.member(&credential.principal.id))
        .await?
        .ok_or_else(|| {
            LoreError::Forbidden(format!(
                "the owner {} is no longer a member of org {org}",
                credential.principal.id
            ))
        })?;
    Ok(Caller {
        principal: credential.principal,
        role: membership.role,
        scopes: Scopes::ALL,
        token_orgs: Some(vec![org.clone()]),
        token_id: None,
        org: org.clone(),
        keys,
    })
}
