//! OAuth grants as the directory keeps them: one consent's family of tokens. The front's OAuth
//! flows write them; whoever verifies a token asks whether its grant still stands.

use serde::{Deserialize, Serialize};

use lore_base::error::Result;
use lore_base::ids::OrgId;
use lore_base::keys::{self, OrgKeys};
use lore_base::model::{Membership, Scopes};
use lore_base::ports::Ports;
use lore_base::storage::Batch;

/// One consent: a client's access to one org for one principal, until revoked.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Grant {
    pub id: String,
    pub principal: String,
    pub client_id: String,
    pub client_name: String,
    pub org: OrgId,
    pub scopes: Scopes,
    pub audience: String,
    pub created_at_ms: i64,
    #[serde(default)]
    pub refreshed_at_ms: Option<i64>,
    #[serde(default)]
    pub revoked_at_ms: Option<i64>,
    #[serde(default)]
    pub revoked_reason: Option<String>,
}

/// Whether the grant an access token belongs to still stands.
pub async fn is_live(ports: &Ports, grant_id: &str) -> Result<bool> {
    let grant: Option<Grant> = ports.record(&keys::oauth_grant(grant_id)).await?;
    Ok(grant.is_some_and(|g| g.revoked_at_ms.is_none()))
}

/// Revokes a grant: every access and refresh token of it stops working at once (the org's auth
/// stamp is renewed with it, so no cached credential of the grant is trusted). Revoking one
/// already revoked renews the stamp again and keeps the first reason.
pub async fn revoke(ports: &Ports, grant_id: &str, reason: &str) -> Result<()> {
    let key = keys::oauth_grant(grant_id);
    let Some(mut grant) = ports.record::<Grant>(&key).await? else {
        return Ok(());
    };
    let mut batch = Batch::new();
    let fresh = grant.revoked_at_ms.is_none();
    if fresh {
        grant.revoked_at_ms = Some(ports.clock.now_ms());
        grant.revoked_reason = Some(reason.to_string());
        batch.put(key, serde_json::to_vec(&grant).expect("records serialize"));
    }
    // Its tokens reach only its org; cached copies of them stop being trusted there.
    crate::stamp::renew(ports, &mut batch, [&grant.org]);
    ports.storage.commit(batch).await?;
    if fresh {
        tracing::info!(grant = %grant_id, client_id = %grant.client_id, reason, "OAuth grant revoked");
    }
    Ok(())
}

/// The grants `principal` approved, newest first.
pub async fn of_principal(ports: &Ports, principal: &str) -> Result<Vec<Grant>> {
    let mut out = Vec::new();
    for (key, _) in ports
        .storage
        .scan_all(&keys::oauth_user_grants(principal))
        .await?
    {
        let id = key.rsplit('/').next().unwrap_or_default();
        if let Some(grant) = ports.record::<Grant>(&keys::oauth_grant(id)).await? {
            out.push(grant);
        }
    }
    out.reverse();
    Ok(out)
}

/// The grants that reach `org`, of its present members, newest first. (A grant of someone no
/// longer a member reaches nothing: its tokens resolve no caller in the org.)
pub async fn of_org(ports: &Ports, org: &OrgId) -> Result<Vec<Grant>> {
    let mut out = Vec::new();
    for (_, value) in ports.storage.scan_all(&OrgKeys::new(org).members()).await? {
        let member: Membership = serde_json::from_slice(&value)?;
        out.extend(
            of_principal(ports, &member.principal)
                .await?
                .into_iter()
                .filter(|g| g.org == *org),
        );
    }
    out.sort_by(|a, b| b.created_at_ms.cmp(&a.created_at_ms).then(b.id.cmp(&a.id)));
    Ok(out)
}
