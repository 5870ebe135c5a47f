//! OAuth grants as the directory keeps them: one consent's family of tokens. The front's OAuth
//! flows write them; whoever verifies a token asks whether its grant still stands.

use serde::{Deserialize, Serialize};

use lore_base::error::Result;
use lore_base::ids::OrgId;
use lore_base::keys;
use lore_base::model::Scopes;
use lore_base::ports::Ports;

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
