//! Records of the identity model: orgs, principals (users and agents), memberships with roles,
//! and API tokens. Events live in the org engine's memory.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::LoreError;
use crate::ids::OrgId;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Org {
    pub id: OrgId,
    #[serde(default)]
    pub description: String,
    pub created_at_ms: i64,
    /// The principal that created it.
    pub owner: String,
    /// The tool profile `/mcp` serves this org when the URL does not choose one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_profile: Option<Profile>,
    /// The org's own, lower rate limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limits: Option<crate::ratelimit::OrgRateLimits>,
    /// Where the org's data lives on Cloudflare; set when it is created, never changed.
    #[serde(default, skip_serializing_if = "Placement::is_default")]
    pub placement: Placement,
}

/// Where an org's data lives on Cloudflare: its Durable Object is created near a location
/// hint, and may be bound to a jurisdiction (its data stored and processed only there). Chosen
/// when the org is created and never changed, since an object's id depends on its
/// jurisdiction. Every platform stores it; only Workers act on it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Placement {
    /// Near where the object is first created: one of [`Placement::LOCATION_HINTS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location_hint: Option<String>,
    /// Where its data stays: one of [`Placement::JURISDICTIONS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jurisdiction: Option<String>,
}

impl Placement {
    /// Cloudflare's location hints for Durable Objects.
    pub const LOCATION_HINTS: &[&str] = &[
        "wnam", "enam", "sam", "weur", "eeur", "apac", "oc", "afr", "me",
    ];
    /// Cloudflare's Durable Object jurisdictions.
    pub const JURISDICTIONS: &[&str] = &["eu", "fedramp"];

    /// A placement from what an operator asked for, each part checked against its list.
    pub fn new(location_hint: Option<&str>, jurisdiction: Option<&str>) -> Result<Self, LoreError> {
        fn pick(
            field: &str,
            value: Option<&str>,
            allowed: &[&str],
        ) -> Result<Option<String>, LoreError> {
            match value.map(str::trim).filter(|v| !v.is_empty()) {
                None => Ok(None),
                Some(v) if allowed.contains(&v) => Ok(Some(v.to_string())),
                Some(v) => Err(LoreError::invalid(
                    field,
                    format!("{v:?} is not one of {}", allowed.join(", ")),
                )),
            }
        }
        Ok(Self {
            location_hint: pick("location_hint", location_hint, Self::LOCATION_HINTS)?,
            jurisdiction: pick("jurisdiction", jurisdiction, Self::JURISDICTIONS)?,
        })
    }

    pub fn is_default(&self) -> bool {
        self.location_hint.is_none() && self.jurisdiction.is_none()
    }
}

/// Which tool set an endpoint serves (`/mcp` chooses one per org or per URL).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// `search_memory`, `save_memory`, `search_sdk`, `query_sdk`, `query_sql`, `run_sdk`.
    #[default]
    Workspace,
    /// `search`, `fetch`, `do`.
    Compact,
}

impl Profile {
    pub const NAMES: &[&str] = &["workspace", "compact"];

    pub fn parse(s: &str) -> Result<Self, LoreError> {
        match s {
            "workspace" => Ok(Self::Workspace),
            "compact" => Ok(Self::Compact),
            other => Err(LoreError::invalid(
                "profile",
                format!("{other:?} is not a tool profile; use workspace or compact"),
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Workspace => "workspace",
            Self::Compact => "compact",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PrincipalKind {
    User,
    Agent,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Principal {
    /// `usr_…` or `agt_…`.
    pub id: String,
    pub kind: PrincipalKind,
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub created_at_ms: i64,
    /// The one org an agent belongs to (set when `agents.create` makes it); users have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub org: Option<crate::ids::OrgId>,
}

/// Org roles, weakest first; each includes what the ones before it may do.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Viewer,
    Member,
    Admin,
    Owner,
}

impl Role {
    pub fn parse(s: &str) -> Result<Self, LoreError> {
        match s {
            "viewer" => Ok(Self::Viewer),
            "member" => Ok(Self::Member),
            "admin" => Ok(Self::Admin),
            "owner" => Ok(Self::Owner),
            _ => Err(LoreError::invalid(
                "role",
                format!("{s:?} is not a role; use owner, admin, member or viewer"),
            )),
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Viewer => "viewer",
            Self::Member => "member",
            Self::Admin => "admin",
            Self::Owner => "owner",
        }
    }
    pub fn can_write(self) -> bool {
        self >= Self::Member
    }
    pub fn is_admin(self) -> bool {
        self >= Self::Admin
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Membership {
    pub principal: String,
    pub role: Role,
    pub created_at_ms: i64,
}

/// What a token may do, independent of the holder's role (both must allow an action).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Scopes {
    pub read: bool,
    pub write: bool,
}

impl Scopes {
    pub const ALL: Self = Self {
        read: true,
        write: true,
    };

    /// Parses `mcp:read`, `mcp:write`, `mcp:read,write` (and comma or space separated lists).
    pub fn parse(s: &str) -> Result<Self, LoreError> {
        let mut scopes = Self::default();
        let mut prefix_seen = false;
        for part in s.split([',', ' ']).map(str::trim).filter(|p| !p.is_empty()) {
            let name = match part.strip_prefix("mcp:") {
                Some(rest) => {
                    prefix_seen = true;
                    rest
                }
                None if prefix_seen => part,
                None => "",
            };
            match name {
                "read" => scopes.read = true,
                "write" => scopes.write = true,
                _ => {
                    return Err(LoreError::invalid(
                        "scopes",
                        format!(
                            "unknown scope {part:?}; use mcp:read, mcp:write or mcp:read,write"
                        ),
                    ));
                }
            }
        }
        if !scopes.read && !scopes.write {
            return Err(LoreError::invalid(
                "scopes",
                "give at least one scope: mcp:read or mcp:write",
            ));
        }
        Ok(scopes)
    }

    /// The space-separated OAuth form, e.g. `mcp:read mcp:write`.
    pub fn to_oauth_string(self) -> String {
        let mut parts = Vec::new();
        if self.read {
            parts.push("mcp:read");
        }
        if self.write {
            parts.push("mcp:write");
        }
        parts.join(" ")
    }
}

/// An API token as stored. The secret itself is never stored, only its SHA-256.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecord {
    /// `tok_…`, safe to show and log.
    pub id: String,
    pub principal: String,
    pub orgs: Vec<OrgId>,
    pub scopes: Scopes,
    pub created_at_ms: i64,
    pub expires_at_ms: Option<i64>,
    pub revoked_at_ms: Option<i64>,
    /// A human label, e.g. "laptop" or "ci".
    pub label: Option<String>,
    /// OAuth access tokens only: the resource they were issued for (RFC 8707 audience, the
    /// canonical MCP URL). A token presented to another resource is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    /// OAuth access tokens only: the client they were issued to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// OAuth access tokens only: the grant (refresh token family) they belong to; revoking
    /// the grant revokes them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<String>,
}

/// Listing of a token under its org: enough to find and revoke it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenIndexEntry {
    pub hash: String,
}

/// `{ok: true}`: what a call that returns nothing else answers.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Done {
    pub ok: bool,
}

/// What a method needs: `read` methods only read; `write` methods change the org's data
/// (role member or above, token scope `mcp:write`); `admin` methods change its configuration
/// (role admin or owner).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    Read,
    Write,
    Admin,
}

impl Tier {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Admin => "admin",
        }
    }
}

/// How a call is dispatched when a script does not choose (SPEC 4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// One attempt; a failure throws.
    Try,
    /// Queued, dispatched after the script; returns a receipt.
    Send,
    /// Durable: retried with backoff, replayed by idempotency key.
    Do,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Try => "try",
            Self::Send => "send",
            Self::Do => "do",
        }
    }
}
