//! The people side of an org: agents (registered agent principals), members and their roles,
//! API tokens, and the organizations a caller belongs to.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Done, to_bytes};
use lore_base::error::{LoreError, Result};
use lore_base::ids::{OrgId, new_ulid};
use lore_base::keys;
use lore_base::model::{Membership, Org, Principal, PrincipalKind, Role, Scopes, TokenIndexEntry};
use lore_base::ports::Ports;
use lore_base::storage::Batch;
use lore_base::time::format_time;
use lore_directory::Caller;
use lore_directory::admin::{self, IssuedToken, TokenSummary};

/// A member of the org, user or agent.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Member {
    /// `usr_…` or `agt_…`.
    pub principal_id: String,
    /// `user` or `agent`.
    pub kind: String,
    pub name: String,
    pub description: String,
    /// `owner`, `admin`, `member` or `viewer`.
    pub role: String,
    pub joined_at: String,
}

/// `agents.create`
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateAgent {
    #[schemars(length(min = 1, max = 200))]
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// `viewer`, `member` (default) or `admin`.
    pub role: Option<String>,
}

/// `{principal_id}`
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ByPrincipal {
    pub principal_id: String,
}

/// `members.add` and `members.update`
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetRole {
    pub principal_id: String,
    /// `owner`, `admin`, `member` or `viewer`.
    pub role: String,
}

/// `tokens.create`
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateToken {
    /// The member it is for (default: you).
    pub principal_id: Option<String>,
    /// `mcp:read`, `mcp:write` or `mcp:read,write` (default).
    pub scopes: Option<String>,
    pub label: Option<String>,
    /// Lifetime in days (default: no expiry).
    #[schemars(range(min = 1, max = 3650))]
    pub expires_in_days: Option<u32>,
}

/// `tokens.revoke`
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RevokeToken {
    /// The token id (`tok_…`).
    pub id: String,
}

/// An org as its member sees it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct OrgInfo {
    pub id: String,
    pub description: String,
    /// Your role in it.
    pub role: String,
    pub created_at: String,
    /// The tool profile `/mcp` serves this org unless the URL says `?profile=`.
    pub default_profile: lore_base::model::Profile,
    /// The org's own rate limits (requests per minute), where it set lower ones than the
    /// server's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limits: Option<lore_base::ratelimit::OrgRateLimits>,
}

/// `organizations.update`
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateOrg {
    #[schemars(length(max = 2000))]
    pub description: Option<String>,
    /// The tool profile `/mcp` serves this org unless the URL says `?profile=`: `workspace`
    /// (search_memory, save_memory, search_sdk, query_sdk, query_sql, run_sdk) or `compact`
    /// (search, fetch, do).
    pub default_profile: Option<lore_base::model::Profile>,
    /// Lower the server's rate limits for this org (requests per minute per token, and for
    /// the whole org); values above the server's limits are refused. `{}` clears them.
    pub rate_limits: Option<lore_base::ratelimit::OrgRateLimits>,
}

fn parse_role(field: &str, role: &str) -> Result<Role> {
    Role::parse(role).map_err(|_| {
        LoreError::invalid(
            field,
            format!("{role:?} is not a role; use owner, admin, member or viewer"),
        )
    })
}

async fn member_info(ports: &Ports, m: Membership) -> Result<Member> {
    let p: Option<Principal> = ports.record(&keys::principal(&m.principal)).await?;
    let (kind, name, description) = match p {
        Some(p) => (
            match p.kind {
                PrincipalKind::User => "user",
                PrincipalKind::Agent => "agent",
            },
            p.name,
            p.description,
        ),
        None => ("user", String::new(), String::new()),
    };
    Ok(Member {
        principal_id: m.principal,
        kind: kind.into(),
        name,
        description,
        role: m.role.as_str().into(),
        joined_at: format_time(m.created_at_ms),
    })
}

async fn membership(ports: &Ports, caller: &Caller, id: &str) -> Result<Membership> {
    if id.is_empty() || id.len() > 64 || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return Err(LoreError::invalid(
            "principal_id",
            "not a principal id (usr_… or agt_…)",
        ));
    }
    ports
        .record(&caller.keys().member(id))
        .await?
        .ok_or_else(|| LoreError::not_found(format!("member {id} of org {}", caller.org())))
}

pub async fn list_members(ports: &Ports, caller: &Caller) -> Result<Vec<Member>> {
    let mut out = Vec::new();
    for m in super::all::<Membership>(ports, &caller.keys().members()).await? {
        out.push(member_info(ports, m).await?);
    }
    Ok(out)
}

pub async fn list_agents(ports: &Ports, caller: &Caller) -> Result<Vec<Member>> {
    Ok(list_members(ports, caller)
        .await?
        .into_iter()
        .filter(|m| m.kind == "agent")
        .collect())
}

pub async fn get_agent(ports: &Ports, caller: &Caller, id: &str) -> Result<Member> {
    let m = membership(ports, caller, id).await?;
    let info = member_info(ports, m).await?;
    if info.kind != "agent" {
        return Err(LoreError::not_found(format!(
            "agent {id} in org {}",
            caller.org()
        )));
    }
    Ok(info)
}

/// A membership the caller may change: its principal's role is at most the caller's
/// (`Caller::may_act_on`). The operations that change, remove or issue credentials for a
/// member take one, and [`subordinate`] is the only way to get one.
struct Subordinate(Membership);

/// `id`'s membership, if the caller may act on it (`what` names the action for the error).
async fn subordinate(ports: &Ports, caller: &Caller, id: &str, what: &str) -> Result<Subordinate> {
    let m = membership(ports, caller, id).await?;
    caller.may_act_on(m.role, &format!("{what} of {id}"))?;
    Ok(Subordinate(m))
}

async fn owners(ports: &Ports, caller: &Caller) -> Result<usize> {
    Ok(super::all::<Membership>(ports, &caller.keys().members())
        .await?
        .iter()
        .filter(|m| m.role == Role::Owner)
        .count())
}

pub async fn create_agent(ports: &Ports, caller: &Caller, args: CreateAgent) -> Result<Member> {
    let role = parse_role("role", args.role.as_deref().unwrap_or("member"))?;
    if role == Role::Owner {
        return Err(LoreError::invalid(
            "role",
            "agents cannot be owners; use admin at most",
        ));
    }
    caller.may_act_on(role, "an agent's role")?;
    let now = ports.clock.now_ms();
    let principal = Principal {
        id: format!("agt_{}", new_ulid(ports)),
        kind: PrincipalKind::Agent,
        name: args.name,
        description: args.description,
        created_at_ms: now,
        org: Some(caller.org().clone()),
    };
    let m = Membership {
        principal: principal.id.clone(),
        role,
        created_at_ms: now,
    };
    let mut batch = Batch::new();
    batch
        .require_absent(keys::principal(&principal.id))
        .put(keys::principal(&principal.id), to_bytes(&principal))
        .put(caller.keys().member(&principal.id), to_bytes(&m))
        .put(keys::member_of(&principal.id, caller.org()), Vec::new());
    ports.storage.commit(batch).await?;
    member_info(ports, m).await
}

/// Checks that the caller may end credentials of `principal` in this org: a member only at or
/// below the caller's role; one who is no longer a member holds no authority here to protect.
async fn acts_on_credentials_of(
    ports: &Ports,
    caller: &Caller,
    principal: &str,
    what: &str,
) -> Result<()> {
    let m: Option<Membership> = ports.record(&caller.keys().member(principal)).await?;
    match m {
        Some(m) => caller.may_act_on(m.role, &format!("{what} of {principal}")),
        None => Ok(()),
    }
}

/// Revokes every token of `principal` that reaches this org.
async fn revoke_tokens_of(ports: &Ports, caller: &Caller, principal: &str) -> Result<()> {
    for t in admin::list_tokens(ports, caller.org().as_str()).await? {
        if t.principal == principal && !t.revoked {
            admin::revoke_token(ports, caller.org().as_str(), &t.id).await?;
        }
    }
    Ok(())
}

async fn remove(ports: &Ports, caller: &Caller, m: &Subordinate) -> Result<()> {
    let Subordinate(m) = m;
    let mut batch = Batch::new();
    batch
        .require_equals(caller.keys().member(&m.principal), to_bytes(m))
        .delete(caller.keys().member(&m.principal))
        .delete(keys::member_of(&m.principal, caller.org()));
    lore_directory::stamp::renew(ports, &mut batch, [caller.org()]);
    ports.storage.commit(batch).await?;
    revoke_tokens_of(ports, caller, &m.principal).await
}

pub async fn delete_agent(ports: &Ports, caller: &Caller, id: &str) -> Result<Done> {
    get_agent(ports, caller, id).await?;
    let m = subordinate(ports, caller, id, "removing the agent").await?;
    remove(ports, caller, &m).await?;
    Ok(Done { ok: true })
}

pub async fn add_member(ports: &Ports, caller: &Caller, args: SetRole) -> Result<Member> {
    let role = parse_role("role", &args.role)?;
    caller.may_act_on(role, "this membership")?;
    let id = &args.principal_id;
    if id.is_empty() || id.len() > 64 || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return Err(LoreError::invalid(
            "principal_id",
            "not a principal id (usr_… or agt_…)",
        ));
    }
    // An agent belongs to the one org that created it: another org's agent is answered
    // exactly as an unknown id is, so the answer tells nothing about other orgs.
    let principal: Option<Principal> = ports.record(&keys::principal(id)).await?;
    let joinable = principal.is_some_and(|p| match p.kind {
        PrincipalKind::User => true,
        PrincipalKind::Agent => p.org.as_ref() == Some(caller.org()),
    });
    if !joinable {
        return Err(LoreError::invalid(
            "principal_id",
            format!(
                "there is no principal {id} that can join org {}; people sign in once before they can be added, and agents are made in their org with agents.create",
                caller.org()
            ),
        ));
    }
    let m = Membership {
        principal: id.clone(),
        role,
        created_at_ms: ports.clock.now_ms(),
    };
    let key = caller.keys().member(id);
    let mut batch = Batch::new();
    batch
        .require_absent(&key)
        .put(&key, to_bytes(&m))
        .put(keys::member_of(id, caller.org()), Vec::new());
    ports.storage.commit(batch).await.map_err(|e| match e {
        lore_base::storage::StorageError::Conflict { .. } => {
            LoreError::Conflict(format!("{id} is already a member; use members.update"))
        }
        other => other.into(),
    })?;
    member_info(ports, m).await
}

pub async fn update_member(ports: &Ports, caller: &Caller, args: SetRole) -> Result<Member> {
    let role = parse_role("role", &args.role)?;
    caller.may_act_on(role, "this membership")?;
    let Subordinate(old) =
        subordinate(ports, caller, &args.principal_id, "changing the role").await?;
    if old.role == Role::Owner && role != Role::Owner && owners(ports, caller).await? == 1 {
        return Err(LoreError::Conflict(
            "this is the org's last owner; make someone else owner first".into(),
        ));
    }
    let mut m = old.clone();
    m.role = role;
    // Callers resolved under the old role are trusted while the auth stamp stands: it changes
    // with the role, in the same commit.
    let key = caller.keys().member(&m.principal);
    let mut batch = Batch::new();
    batch
        .require_equals(&key, to_bytes(&old))
        .put(&key, to_bytes(&m));
    lore_directory::stamp::renew(ports, &mut batch, [caller.org()]);
    ports.storage.commit(batch).await?;
    member_info(ports, m).await
}

pub async fn remove_member(ports: &Ports, caller: &Caller, args: ByPrincipal) -> Result<Done> {
    let m = subordinate(ports, caller, &args.principal_id, "removing the membership").await?;
    if m.0.role == Role::Owner && owners(ports, caller).await? == 1 {
        return Err(LoreError::Conflict(
            "this is the org's last owner; make someone else owner first".into(),
        ));
    }
    remove(ports, caller, &m).await?;
    Ok(Done { ok: true })
}

pub async fn list_tokens(ports: &Ports, caller: &Caller) -> Result<Vec<TokenSummary>> {
    admin::list_tokens(ports, caller.org().as_str()).await
}

pub async fn create_token(
    ports: &Ports,
    caller: &Caller,
    args: CreateToken,
) -> Result<IssuedToken> {
    let principal = args
        .principal_id
        .unwrap_or_else(|| caller.principal().id.clone());
    let Subordinate(m) = subordinate(ports, caller, &principal, "a token").await?;
    // Admins issue tokens for themselves and for agents, never to act as another user.
    if principal != caller.principal().id && !principal.starts_with("agt_") {
        return Err(LoreError::Forbidden(
            "tokens are issued to yourself or to agents; other users sign in themselves".into(),
        ));
    }
    let scopes = Scopes::parse(args.scopes.as_deref().unwrap_or("mcp:read,write"))?;
    let expires = args
        .expires_in_days
        .map(|d| ports.clock.now_ms() + i64::from(d) * 86_400_000);
    let mut batch = Batch::new();
    batch.require_equals(caller.keys().member(&principal), to_bytes(&m));
    let issued = admin::issue_token(
        ports,
        &mut batch,
        caller.org(),
        &principal,
        scopes,
        expires,
        args.label,
    );
    ports.storage.commit(batch).await?;
    Ok(issued)
}

pub async fn revoke_token(ports: &Ports, caller: &Caller, args: RevokeToken) -> Result<Done> {
    let not_found = || LoreError::not_found(format!("token {} in org {}", args.id, caller.org()));
    let entry: TokenIndexEntry = ports
        .record(&caller.keys().token(&args.id))
        .await
        .ok()
        .flatten()
        .ok_or_else(not_found)?;
    let token: lore_base::model::TokenRecord = ports
        .record(&keys::token_by_hash(&entry.hash))
        .await?
        .ok_or_else(not_found)?;
    acts_on_credentials_of(ports, caller, &token.principal, "revoking a token").await?;
    admin::revoke_token(ports, caller.org().as_str(), &args.id).await?;
    Ok(Done { ok: true })
}

/// An OAuth grant that reaches the org: an application a member allowed (at the consent
/// page), whose access and refresh tokens all end when it is revoked.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct GrantInfo {
    /// `grt_…`
    pub id: String,
    /// The member who allowed it.
    pub principal_id: String,
    pub client_id: String,
    /// The application's name as it registered.
    pub client_name: String,
    pub scopes: String,
    pub created_at: String,
    /// When its tokens were last refreshed.
    pub refreshed_at: Option<String>,
    pub revoked_at: Option<String>,
    pub revoked_reason: Option<String>,
}

/// `grants.list`: the org's OAuth grants, newest first.
pub async fn list_grants(ports: &Ports, caller: &Caller) -> Result<Vec<GrantInfo>> {
    Ok(lore_directory::grants::of_org(ports, caller.org())
        .await?
        .into_iter()
        .map(|g| GrantInfo {
            id: g.id,
            principal_id: g.principal,
            client_id: g.client_id,
            client_name: g.client_name,
            scopes: g.scopes.to_oauth_string(),
            created_at: format_time(g.created_at_ms),
            refreshed_at: g.refreshed_at_ms.map(format_time),
            revoked_at: g.revoked_at_ms.map(format_time),
            revoked_reason: g.revoked_reason,
        })
        .collect())
}

/// `grants.revoke`: ends one of the org's grants and every token of it, at once.
pub async fn revoke_grant(ports: &Ports, caller: &Caller, id: &str) -> Result<Done> {
    let grant: Option<lore_directory::grants::Grant> = if id.starts_with("grt_")
        && id.len() <= 64
        && id[4..].bytes().all(|b| b.is_ascii_alphanumeric())
    {
        ports.record(&keys::oauth_grant(id)).await?
    } else {
        None
    };
    match grant {
        Some(g) if g.org == *caller.org() => {
            acts_on_credentials_of(ports, caller, &g.principal, "revoking an OAuth grant").await?;
            let reason = format!("revoked by {}", caller.principal().id);
            lore_directory::grants::revoke(ports, id, &reason).await?;
            Ok(Done { ok: true })
        }
        _ => Err(LoreError::not_found(format!(
            "OAuth grant {id} in org {}",
            caller.org()
        ))),
    }
}

async fn org_info(ports: &Ports, org: &OrgId, role: Role) -> Result<Option<OrgInfo>> {
    let record: Option<Org> = ports.record(&keys::org(org)).await?;
    Ok(record.map(|o| OrgInfo {
        id: o.id.to_string(),
        description: o.description,
        role: role.as_str().into(),
        created_at: format_time(o.created_at_ms),
        default_profile: o.default_profile.unwrap_or_default(),
        rate_limits: o.rate_limits,
    }))
}

/// The orgs the caller's principal belongs to and the caller's token reaches.
pub async fn list_orgs(ports: &Ports, caller: &Caller) -> Result<Vec<OrgInfo>> {
    let prefix = keys::member_of_all(&caller.principal().id);
    let mut out = Vec::new();
    for (key, _) in ports.storage.scan_all(&prefix).await? {
        let Ok(org) = OrgId::parse(&key[prefix.len()..]) else {
            continue;
        };
        if !caller.token_reaches(&org) {
            continue;
        }
        let m: Option<Membership> = ports
            .record(&lore_base::keys::OrgKeys::new(&org).member(&caller.principal().id))
            .await?;
        if let Some(m) = m
            && let Some(info) = org_info(ports, &org, m.role).await?
        {
            out.push(info);
        }
    }
    Ok(out)
}

pub async fn get_org(ports: &Ports, caller: &Caller) -> Result<OrgInfo> {
    org_info(ports, caller.org(), caller.role())
        .await?
        .ok_or_else(|| LoreError::not_found(format!("org {}", caller.org())))
}

/// `organizations.update`; `server` holds the server's rate limits, which an org may only
/// lower.
pub async fn update_org(
    ports: &Ports,
    caller: &Caller,
    args: UpdateOrg,
    server: lore_base::ratelimit::RateLimits,
) -> Result<OrgInfo> {
    if let Some(own) = &args.rate_limits {
        for (field, value, ceiling) in [
            (
                "rate_limits/token_per_minute",
                own.token_per_minute,
                server.token_per_minute,
            ),
            (
                "rate_limits/org_per_minute",
                own.org_per_minute,
                server.org_per_minute,
            ),
        ] {
            if let Some(v) = value
                && ceiling != 0
                && v > ceiling
            {
                return Err(LoreError::invalid(
                    field,
                    format!(
                        "{v} is above this server's limit of {ceiling} requests per minute; an org may only lower it"
                    ),
                ));
            }
        }
    }
    let key = keys::org(caller.org());
    let old: Org = ports
        .record(&key)
        .await?
        .ok_or_else(|| LoreError::not_found(format!("org {}", caller.org())))?;
    let mut org = old.clone();
    if let Some(d) = args.description {
        org.description = d;
    }
    if let Some(p) = args.default_profile {
        org.default_profile = Some(p);
    }
    if let Some(own) = args.rate_limits {
        org.rate_limits = (own != lore_base::ratelimit::OrgRateLimits::default()).then_some(own);
    }
    // The org's copies of its record (engines cache it) are checked against its auth stamp.
    let mut batch = Batch::new();
    batch
        .require_equals(key.clone(), to_bytes(&old))
        .put(key, to_bytes(&org));
    lore_directory::stamp::renew(ports, &mut batch, [caller.org()]);
    ports.storage.commit(batch).await?;
    get_org(ports, caller).await
}
