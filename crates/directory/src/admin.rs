//! Operator actions on a local database: `lore init`, orgs and tokens. These run with the
//! authority of whoever holds the database file (the CLI), not of a network caller; the network
//! admin surface comes with the SDK registry and goes through [`crate::caller::Caller`].

use serde::Serialize;

use crate::tokens::new_token_secret;
use lore_base::error::{LoreError, Result};
use lore_base::ids::{OrgId, new_ulid};
use lore_base::keys::{self, OrgKeys};
use lore_base::model::{
    Membership, Org, Placement, Principal, PrincipalKind, Role, Scopes, TokenIndexEntry,
    TokenRecord,
};
use lore_base::ports::Ports;
use lore_base::storage::{Batch, StorageError};

/// A freshly issued token. `token` is the only time the secret is ever shown.
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct IssuedToken {
    pub org: String,
    pub token: String,
    pub token_id: String,
    pub principal: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum InitOutcome {
    Created(IssuedToken),
    AlreadyInitialised { owner: String },
}

fn json(value: &impl Serialize) -> Vec<u8> {
    serde_json::to_vec(value).expect("records serialize")
}

async fn local_owner_id(ports: &Ports) -> Result<Option<String>> {
    Ok(ports
        .storage
        .get(keys::LOCAL_OWNER)
        .await?
        .map(|b| String::from_utf8_lossy(&b).into_owned()))
}

/// Adds the writes that create a token for `principal` in `org` to `batch`.
pub fn issue_token(
    ports: &Ports,
    batch: &mut Batch,
    org: &OrgId,
    principal: &str,
    scopes: Scopes,
    expires_at_ms: Option<i64>,
    label: Option<String>,
) -> IssuedToken {
    let secret = new_token_secret(ports);
    let hash = keys::sha256_hex(&secret);
    let record = TokenRecord {
        id: format!("tok_{}", new_ulid(ports)),
        principal: principal.to_string(),
        orgs: vec![org.clone()],
        scopes,
        created_at_ms: ports.clock.now_ms(),
        expires_at_ms,
        revoked_at_ms: None,
        label,
        audience: None,
        client_id: None,
        grant: None,
    };
    batch
        .require_absent(keys::token_by_hash(&hash))
        .put(keys::token_by_hash(&hash), json(&record));
    batch.put(
        OrgKeys::new(org).token(&record.id),
        json(&TokenIndexEntry { hash }),
    );
    IssuedToken {
        org: org.to_string(),
        token: secret,
        token_id: record.id,
        principal: principal.to_string(),
    }
}

/// Adds the writes that create `org` owned by `owner`, with an owner token.
fn create_org_writes(
    ports: &Ports,
    batch: &mut Batch,
    org: &OrgId,
    owner: &str,
    placement: Placement,
) -> IssuedToken {
    let now = ports.clock.now_ms();
    let record = Org {
        id: org.clone(),
        description: String::new(),
        created_at_ms: now,
        owner: owner.to_string(),
        default_profile: None,
        rate_limits: None,
        placement,
    };
    batch
        .require_absent(keys::org(org))
        .put(keys::org(org), json(&record));
    let member = Membership {
        principal: owner.to_string(),
        role: Role::Owner,
        created_at_ms: now,
    };
    batch.put(OrgKeys::new(org).member(owner), json(&member));
    batch.put(keys::member_of(owner, org), Vec::new());
    issue_token(
        ports,
        batch,
        org,
        owner,
        Scopes::ALL,
        None,
        Some("owner".into()),
    )
}

/// Creates the local owner and the first org. A second run changes nothing.
pub async fn init(ports: &Ports, org_name: &str) -> Result<InitOutcome> {
    let org = OrgId::parse(org_name)?;
    if let Some(owner) = local_owner_id(ports).await? {
        return Ok(InitOutcome::AlreadyInitialised { owner });
    }
    let owner = Principal {
        id: format!("usr_{}", new_ulid(ports)),
        kind: PrincipalKind::User,
        name: "local owner".into(),
        description: String::new(),
        created_at_ms: ports.clock.now_ms(),
        org: None,
    };
    let mut batch = Batch::new();
    batch
        .require_absent(keys::LOCAL_OWNER)
        .put(keys::LOCAL_OWNER, owner.id.as_bytes().to_vec())
        .put(keys::LOCAL_ORG, org.as_str().as_bytes().to_vec());
    batch.put(keys::principal(&owner.id), json(&owner));
    let issued = create_org_writes(ports, &mut batch, &org, &owner.id, Placement::default());
    match ports.storage.commit(batch).await {
        Ok(()) => Ok(InitOutcome::Created(issued)),
        // Another process initialised the database at the same moment.
        Err(StorageError::Conflict { .. }) => match local_owner_id(ports).await? {
            Some(owner) => Ok(InitOutcome::AlreadyInitialised { owner }),
            None => Err(LoreError::Conflict(format!("org {org} already exists"))),
        },
        Err(e) => Err(e.into()),
    }
}

/// Sets the sign-in password of the local owner (for the OAuth sign-in page).
pub async fn set_owner_password(ports: &Ports, password: &str) -> Result<()> {
    let owner = local_owner_id(ports).await?.ok_or_else(|| {
        LoreError::Conflict("the database is not initialised; run `lore init` first".into())
    })?;
    crate::password::set(ports, &owner, password).await
}

/// Whether the local owner has a sign-in password.
pub async fn owner_password_is_set(ports: &Ports) -> Result<bool> {
    match local_owner_id(ports).await? {
        Some(owner) => crate::password::is_set(ports, &owner).await,
        None => Ok(false),
    }
}

/// Creates a further org owned by the local owner and returns an owner token for it.
pub async fn create_org(ports: &Ports, org_name: &str) -> Result<IssuedToken> {
    create_placed_org(ports, org_name, Placement::default()).await
}

/// Creates an org placed where `placement` says (its Durable Object's location hint and
/// jurisdiction on Cloudflare; stored, and without effect, elsewhere).
pub async fn create_placed_org(
    ports: &Ports,
    org_name: &str,
    placement: Placement,
) -> Result<IssuedToken> {
    let org = OrgId::parse(org_name)?;
    let owner = local_owner_id(ports).await?.ok_or_else(|| {
        LoreError::Conflict("the database is not initialised; run `lore init` first".into())
    })?;
    let mut batch = Batch::new();
    let issued = create_org_writes(ports, &mut batch, &org, &owner, placement);
    match ports.storage.commit(batch).await {
        Ok(()) => Ok(issued),
        Err(StorageError::Conflict { .. }) => {
            Err(LoreError::Conflict(format!("org {org} already exists")))
        }
        Err(e) => Err(e.into()),
    }
}

pub async fn list_orgs(ports: &Ports) -> Result<Vec<Org>> {
    let rows = ports.storage.scan_all(keys::ORG_PREFIX).await?;
    rows.iter()
        .map(|(_, v)| serde_json::from_slice(v).map_err(Into::into))
        .collect()
}

async fn require_org(ports: &Ports, org_name: &str) -> Result<OrgId> {
    let org = OrgId::parse(org_name)?;
    if ports.storage.get(&keys::org(&org)).await?.is_none() {
        return Err(LoreError::not_found(format!("org {org}")));
    }
    Ok(org)
}

/// What `lore token create` asks for.
#[derive(Debug, Clone)]
pub struct TokenRequest {
    pub org: String,
    /// The new agent's role (default member). Not allowed with `principal`: an existing
    /// member keeps the role they have.
    pub role: Option<Role>,
    pub scopes: Scopes,
    /// Issue for this existing member instead of a new agent principal.
    pub principal: Option<String>,
    pub name: Option<String>,
    pub expires_at_ms: Option<i64>,
}

/// Issues a token. Without `principal`, a new agent principal joins the org with `role`.
pub async fn create_token(ports: &Ports, request: TokenRequest) -> Result<IssuedToken> {
    let org = require_org(ports, &request.org).await?;
    let org_keys = OrgKeys::new(&org);
    let mut batch = Batch::new();
    let principal_id = match request.principal {
        Some(_) if request.role.is_some() => {
            return Err(LoreError::invalid(
                "role",
                "a token for an existing member carries that member's role; leave out --role",
            ));
        }
        Some(id) => {
            if ports.storage.get(&org_keys.member(&id)).await?.is_none() {
                return Err(LoreError::not_found(format!("member {id} of org {org}")));
            }
            id
        }
        None => {
            let now = ports.clock.now_ms();
            let principal = Principal {
                id: format!("agt_{}", new_ulid(ports)),
                kind: PrincipalKind::Agent,
                name: request.name.clone().unwrap_or_else(|| "api token".into()),
                description: String::new(),
                created_at_ms: now,
                org: Some(org.clone()),
            };
            let member = Membership {
                principal: principal.id.clone(),
                role: request.role.unwrap_or(Role::Member),
                created_at_ms: now,
            };
            batch.put(keys::principal(&principal.id), json(&principal));
            batch.put(org_keys.member(&principal.id), json(&member));
            batch.put(keys::member_of(&principal.id, &org), Vec::new());
            principal.id
        }
    };
    let issued = issue_token(
        ports,
        &mut batch,
        &org,
        &principal_id,
        request.scopes,
        request.expires_at_ms,
        request.name,
    );
    ports.storage.commit(batch).await?;
    Ok(issued)
}

/// A token as listed: never the secret or its hash.
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct TokenSummary {
    pub id: String,
    pub principal: String,
    pub role: Option<Role>,
    pub scopes: String,
    pub label: Option<String>,
    pub created_at_ms: i64,
    pub expires_at_ms: Option<i64>,
    pub revoked: bool,
}

pub async fn list_tokens(ports: &Ports, org_name: &str) -> Result<Vec<TokenSummary>> {
    let org = require_org(ports, org_name).await?;
    let org_keys = OrgKeys::new(&org);
    let mut out = Vec::new();
    for (_, value) in ports.storage.scan_all(&org_keys.tokens()).await? {
        let entry: TokenIndexEntry = serde_json::from_slice(&value)?;
        let Some(record) = ports
            .record::<TokenRecord>(&keys::token_by_hash(&entry.hash))
            .await?
        else {
            continue;
        };
        let role = ports
            .record::<Membership>(&org_keys.member(&record.principal))
            .await?
            .map(|m| m.role);
        out.push(TokenSummary {
            id: record.id,
            principal: record.principal,
            role,
            scopes: record.scopes.to_oauth_string(),
            label: record.label,
            created_at_ms: record.created_at_ms,
            expires_at_ms: record.expires_at_ms,
            revoked: record.revoked_at_ms.is_some(),
        });
    }
    Ok(out)
}

/// Revokes a token by id; it stops working on the next request, on every instance: the auth
/// stamp of each org it reaches is renewed in the same batch ([`crate::stamp`]), so no cached
/// copy of it is trusted any more.
pub async fn revoke_token(ports: &Ports, org_name: &str, token_id: &str) -> Result<()> {
    let org = require_org(ports, org_name).await?;
    let index_key = OrgKeys::new(&org).token(token_id);
    let entry: TokenIndexEntry = ports
        .record(&index_key)
        .await?
        .ok_or_else(|| LoreError::not_found(format!("token {token_id} in org {org}")))?;
    let key = keys::token_by_hash(&entry.hash);
    let mut record = ports
        .record::<TokenRecord>(&key)
        .await?
        .ok_or_else(|| LoreError::not_found(format!("token {token_id}")))?;
    // The org's index names only the org's own tokens: an entry that points elsewhere (an
    // imported or damaged one) revokes nothing.
    if record.id != token_id || !record.orgs.contains(&org) {
        return Err(LoreError::not_found(format!(
            "token {token_id} in org {org}"
        )));
    }
    let mut batch = Batch::new();
    if record.revoked_at_ms.is_none() {
        record.revoked_at_ms = Some(ports.clock.now_ms());
        batch.put(key, json(&record));
    }
    // Also when it was already revoked: a retry after a failed stamp write renews them.
    crate::stamp::renew(ports, &mut batch, &record.orgs);
    ports.storage.commit(batch).await?;
    Ok(())
}
