//! The [`Caller`]: who is asking, in which org, with which role and scopes.
//! A `Caller` is only ever built here, from a verified token (or the local owner when the server
//! runs without auth), after the org membership is checked. Every org-scoped operation takes a
//! `&Caller` and derives its storage keys from it.

use lore_base::error::{LoreError, Result};
use lore_base::ids::OrgId;
use lore_base::keys::{self, OrgKeys};
use lore_base::model::{Membership, Principal, Role, Scopes, TokenRecord};
use lore_base::ports::Ports;
use lore_base::storage::ReadAhead;

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
    /// The org's auth stamp, read once for the request before any record it vouches for.
    stamp: Option<Vec<u8>>,
    /// Org keys this request read in the same storage call as its stamp, for the engine's
    /// first read of each (`with_read_ahead`).
    read_ahead: ReadAhead,
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
    /// The org's auth stamp as this request read it (`crate::stamp`; `None` before its first
    /// change): copies of directory records read under it are current for the request.
    pub fn auth_stamp(&self) -> Option<&[u8]> {
        self.stamp.as_deref()
    }
    /// This caller for one request, with values of its org's keys read together with the
    /// org's stamp (`crate::callers`), to be taken by the reads they stand in for.
    pub fn with_read_ahead(mut self, read_ahead: ReadAhead) -> Self {
        self.read_ahead = read_ahead;
        self
    }
    /// The value of `key` this request read ahead, once (see [`ReadAhead::take`]).
    pub fn read_ahead(&self, key: &str) -> Option<Option<Vec<u8>>> {
        self.read_ahead.take(key)
    }
    /// Whether this credential may reach `org` at all (before membership).
    pub fn token_reaches(&self, org: &OrgId) -> bool {
        self.token_orgs
            .as_ref()
            .is_none_or(|orgs| orgs.contains(org))
    }

    /// Whether this caller may act on a principal who holds `role` in its org (change or
    /// remove their membership, issue or revoke their tokens and grants, withdraw their
    /// invite) or hand `role` out: only at or below its own role. Every people operation
    /// passes here with the role of the principal it touches, so no one makes an action happen
    /// with more authority than their own (an admin cannot revoke an owner's token or make
    /// anyone an owner).
    pub fn may_act_on(&self, role: Role, what: &str) -> Result<()> {
        if role > self.role {
            return Err(LoreError::NeedsAdmin(format!(
                "{what} touches the {} role, above yours ({} of {}); ask an {}",
                role.as_str(),
                self.role.as_str(),
                self.org,
                role.as_str()
            )));
        }
        Ok(())
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
    /// An org's auth stamp read while verifying (with a cache port), before the records it
    /// vouches for: the caller reuses it when it resolves to that org.
    pub stamp: Option<(OrgId, Option<Vec<u8>>)>,
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
        stamp: None,
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
    let stamp = match credential.stamp {
        Some((of, stamp)) if of == org => stamp,
        _ => crate::stamp::read(ports, &org).await?,
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
        stamp,
        read_ahead: ReadAhead::default(),
    })
}

/// `principal` as a member of `org` now: the role its membership has now and both scopes (code
/// that runs on someone's behalf has no token; the role decides). Fails when the principal is
/// gone or no longer a member. For operator work on an org (as its owner) and, through
/// [`least_of`], for stored code.
pub async fn member_now(ports: &Ports, org: &OrgId, principal: &str) -> Result<Caller> {
    let principal: Principal = ports
        .record(&keys::principal(principal))
        .await?
        .ok_or_else(|| LoreError::Forbidden(format!("{principal} no longer exists")))?;
    let stamp = crate::stamp::read(ports, org).await?;
    let keys = OrgKeys::new(org);
    let membership: Membership = ports
        .record(&keys.member(&principal.id))
        .await?
        .ok_or_else(|| {
            LoreError::Forbidden(format!(
                "{} is no longer a member of org {org}",
                principal.id
            ))
        })?;
    Ok(Caller {
        principal,
        role: membership.role,
        scopes: Scopes::ALL,
        token_orgs: Some(vec![org.clone()]),
        token_id: None,
        org: org.clone(),
        keys,
        stamp,
        read_ahead: ReadAhead::default(),
    })
}

/// Of the principals who shaped stored code (`shapers`, oldest first: who created it, then
/// each who changed it), the one with the least role in `org` now (the latest of equals), with
/// that role: read in one storage call. No principal can make code run with more authority than
/// its own, so stored code runs with this. Fails when any of them is no longer a member (their
/// code has no one's authority).
pub async fn least_shaper(
    ports: &Ports,
    org: &OrgId,
    shapers: &[String],
) -> Result<(String, Role)> {
    let keys = OrgKeys::new(org);
    let wanted: Vec<String> = shapers.iter().map(|p| keys.member(p)).collect();
    let mut least: Option<(String, Role)> = None;
    for (principal, stored) in shapers.iter().zip(ports.storage.get_many(&wanted).await?) {
        let Some(bytes) = stored else {
            return Err(LoreError::Forbidden(format!(
                "it was shaped by {principal}, who is no longer a member of org {org} and can lend it no authority; delete it and create it again"
            )));
        };
        let m: Membership = serde_json::from_slice(&bytes)?;
        if least.as_ref().is_none_or(|(_, role)| m.role <= *role) {
            least = Some((principal.clone(), m.role));
        }
    }
    least.ok_or_else(|| LoreError::Internal("stored code with no principal who shaped it".into()))
}

/// The caller stored code with no caller of its own (a behavior) runs as: the least privileged
/// of its shapers ([`least_shaper`]), as a member of `org` now.
pub async fn least_of(ports: &Ports, org: &OrgId, shapers: &[String]) -> Result<Caller> {
    let (principal, _) = least_shaper(ports, org, shapers).await?;
    member_now(ports, org, &principal).await
}

impl Caller {
    /// This caller with at most `role`: never more than it has (least authority). A script
    /// operation runs with the least of its caller's role and its shapers' ([`least_shaper`]).
    pub fn narrowed(&self, role: Role) -> Caller {
        let mut narrowed = self.clone();
        narrowed.role = narrowed.role.min(role);
        narrowed.read_ahead = ReadAhead::default();
        narrowed
    }
}
