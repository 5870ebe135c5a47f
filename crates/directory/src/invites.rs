//! Invites: how a person who signs in through an identity provider joins an org. An admin
//! invites an identity (`github:octocat`, `email:ann@example.com`) with a role; if that person
//! has signed in before they are added at once, otherwise the invite waits and is accepted
//! on their next sign-in with that identity. Until then they belong to no org.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::caller::Caller;
use lore_base::error::{LoreError, Result};
use lore_base::ids::OrgId;
use lore_base::keys::{self, OrgKeys};
use lore_base::model::{Membership, Role};
use lore_base::ports::Ports;
use lore_base::storage::{Batch, StorageError};

/// A pending invite as stored (under the identity and under the org).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Invite {
    /// `github:{login}` or `email:{address}`, lowercase.
    pub identity: String,
    pub org: String,
    /// `admin`, `member` or `viewer` (owners grant `owner` too).
    pub role: String,
    /// Who invited (principal id).
    pub invited_by: String,
    pub created_at_ms: i64,
}

/// `members.invite`
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InviteArgs {
    /// `github:{login}` or `email:{address}` (an address the provider reports as verified).
    #[schemars(length(min = 3, max = 260))]
    pub identity: String,
    /// `viewer`, `member` (default), `admin`, or `owner`.
    pub role: Option<String>,
}

/// `members.uninvite`
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UninviteArgs {
    #[schemars(length(min = 3, max = 260))]
    pub identity: String,
}

/// What `members.invite` did.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct InviteOutcome {
    pub identity: String,
    /// `added` (they had signed in before and are a member now) or `pending`.
    pub status: String,
    /// The member's principal id when added.
    pub principal_id: Option<String>,
    pub role: String,
}

fn json(value: &impl Serialize) -> Vec<u8> {
    serde_json::to_vec(value).expect("records serialize")
}

/// Checks and lowercases an identity.
pub fn parse_identity(identity: &str) -> Result<String> {
    let lower = identity.trim().to_ascii_lowercase();
    let ok = match lower.split_once(':') {
        Some(("github", login)) => {
            (1..=39).contains(&login.len())
                && login
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        }
        Some(("email", address)) => {
            address.len() <= 254
                && address.split_once('@').is_some_and(|(local, domain)| {
                    !local.is_empty()
                        && domain.contains('.')
                        && !address.contains(char::is_whitespace)
                })
        }
        _ => false,
    };
    if ok {
        Ok(lower)
    } else {
        Err(LoreError::invalid(
            "identity",
            format!("{identity:?} is not an identity; use github:{{login}} or email:{{address}}"),
        ))
    }
}

/// Adds `principal` to `org` with `role` unless already a member; returns whether it did.
async fn add_member(ports: &Ports, org: &OrgId, principal: &str, role: Role) -> Result<bool> {
    let key = OrgKeys::new(org).member(principal);
    let m = Membership {
        principal: principal.to_string(),
        role,
        created_at_ms: ports.clock.now_ms(),
    };
    let mut batch = Batch::new();
    batch
        .require_absent(&key)
        .put(&key, json(&m))
        .put(keys::member_of(principal, org), Vec::new());
    match ports.storage.commit(batch).await {
        Ok(()) => Ok(true),
        Err(StorageError::Conflict { .. }) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// `members.invite`: adds a known person now, or leaves an invite for their first sign-in.
pub async fn invite(ports: &Ports, caller: &Caller, args: InviteArgs) -> Result<InviteOutcome> {
    let identity = parse_identity(&args.identity)?;
    let role = Role::parse(args.role.as_deref().unwrap_or("member"))?;
    caller.may_act_on(role, "this invite")?;
    let known = ports.storage.get(&keys::known_identity(&identity)).await?;
    if let Some(principal) = known.map(|b| String::from_utf8_lossy(&b).into_owned()) {
        if !add_member(ports, caller.org(), &principal, role).await? {
            return Err(LoreError::Conflict(format!(
                "{identity} is already a member ({principal}); use members.update"
            )));
        }
        return Ok(InviteOutcome {
            identity,
            status: "added".into(),
            principal_id: Some(principal),
            role: role.as_str().into(),
        });
    }
    let record = Invite {
        identity: identity.clone(),
        org: caller.org().to_string(),
        role: role.as_str().into(),
        invited_by: caller.principal().id.clone(),
        created_at_ms: ports.clock.now_ms(),
    };
    let mut batch = Batch::new();
    batch
        .put(keys::invite(&identity, caller.org()), json(&record))
        .put(caller.keys().invite(&identity), json(&record));
    ports.storage.commit(batch).await?;
    Ok(InviteOutcome {
        identity,
        status: "pending".into(),
        principal_id: None,
        role: role.as_str().into(),
    })
}

/// `members.invites`: the org's pending invites.
pub async fn list(ports: &Ports, caller: &Caller) -> Result<Vec<Invite>> {
    ports
        .storage
        .scan_all(&caller.keys().invites())
        .await?
        .iter()
        .map(|(_, v)| serde_json::from_slice(v).map_err(Into::into))
        .collect()
}

/// `members.uninvite`: withdraws a pending invite.
pub async fn cancel(
    ports: &Ports,
    caller: &Caller,
    args: UninviteArgs,
) -> Result<lore_base::model::Done> {
    let identity = parse_identity(&args.identity)?;
    let key = caller.keys().invite(&identity);
    let Some(stored) = ports.storage.get(&key).await? else {
        return Err(LoreError::not_found(format!("invite of {identity}")));
    };
    let invite: Invite = serde_json::from_slice(&stored)?;
    caller.may_act_on(Role::parse(&invite.role)?, "withdrawing this invite")?;
    let mut batch = Batch::new();
    batch
        .delete(key)
        .delete(keys::invite(&identity, caller.org()));
    ports.storage.commit(batch).await?;
    Ok(lore_base::model::Done { ok: true })
}

/// At sign-in: remembers which principal holds each identity, and turns the invites waiting
/// for them into memberships.
pub async fn accept(ports: &Ports, principal: &str, identities: &[String]) -> Result<()> {
    for identity in identities {
        ports
            .storage
            .put(
                &keys::known_identity(identity),
                principal.as_bytes().to_vec(),
            )
            .await?;
        for (key, value) in ports.storage.scan_all(&keys::invites_of(identity)).await? {
            let invite: Invite = serde_json::from_slice(&value)?;
            let (Ok(org), Ok(role)) = (OrgId::parse(&invite.org), Role::parse(&invite.role)) else {
                continue;
            };
            if add_member(ports, &org, principal, role).await? {
                tracing::info!(%principal, %org, role = role.as_str(), "invite accepted");
            }
            let mut batch = Batch::new();
            batch
                .delete(key)
                .delete(OrgKeys::new(&org).invite(identity));
            ports.storage.commit(batch).await?;
        }
    }
    Ok(())
}
