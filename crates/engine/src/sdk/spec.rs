//! One entry of the method registry ([`MethodSpec`]), what its handler runs with ([`Cx`]), and
//! the access check every call passes before it runs ([`authorize`]): the surface's tier, the
//! token's scopes and the caller's role.

use std::future::Future;
use std::pin::Pin;

use serde::de::DeserializeOwned;
use serde_json::Value;

use lore_directory::Caller;

use crate::instance::Engine;
use lore_base::error::{LoreError, Result};
use lore_base::model::{Mode, Tier};

/// What a handler runs with: the core instance and the checked caller.
pub struct Cx<'a> {
    pub engine: &'a Engine,
    pub caller: &'a Caller,
    /// The highest tier the surface allows (`query_sdk`: read; `run_sdk` and REST: admin).
    pub allowed: Tier,
}

/// A method's result, serialized once: stored records pass through as they are.
pub type Json = Box<serde_json::value::RawValue>;

pub type BoxFuture<'a> = Pin<Box<dyn Future<Output = Result<Json>> + 'a>>;
pub type Handler = for<'a> fn(&'a Cx<'a>, Value) -> BoxFuture<'a>;

/// One entry of the registry.
pub struct MethodSpec {
    pub namespace: &'static str,
    pub name: &'static str,
    pub description: &'static str,
    pub tier: Tier,
    pub mode: Mode,
    /// JSON Schema of the arguments.
    pub args: fn() -> Value,
    /// The TypeScript type of the result (declared in the generated `.d.ts`).
    pub returns: &'static str,
    pub run: Handler,
}

impl MethodSpec {
    pub fn path(&self) -> String {
        format!("{}.{}", self.namespace, self.name)
    }

    /// Whether `path` names this method (without allocating).
    pub fn is(&self, path: &str) -> bool {
        path.split_once('.')
            .is_some_and(|(ns, name)| ns == self.namespace && name == self.name)
    }
}

/// Deserializes validated arguments; a mismatch here is a registry bug, but still a clear error.
pub fn parse_args<T: DeserializeOwned>(raw: Value) -> Result<T> {
    serde_json::from_value(raw).map_err(|e| LoreError::invalid("arguments", e.to_string()))
}

/// Why a call of some tier is refused.
enum Refusal {
    /// The surface allows less than the method needs.
    Surface,
    /// The token lacks `mcp:write`.
    Scope,
    /// The caller's role is too low.
    Role,
}

fn refusal(caller: &Caller, tier: Tier, allowed: Tier) -> Option<Refusal> {
    if tier > allowed {
        return Some(Refusal::Surface);
    }
    if tier >= Tier::Write && !caller.scopes().write {
        return Some(Refusal::Scope);
    }
    match tier {
        Tier::Read => None,
        Tier::Write if caller.role().can_write() => None,
        Tier::Admin if caller.role().is_admin() => None,
        _ => Some(Refusal::Role),
    }
}

/// Whether `caller` may call a method of `tier` through a surface that allows `allowed`; the
/// refusal says what stands in the way, and for a read-only surface which one it is (a script
/// run says why it reads only: `query_sdk`, or the read operation it runs in).
pub fn authorize(
    engine: &Engine,
    caller: &Caller,
    tier: Tier,
    allowed: Tier,
    path: &str,
) -> Result<()> {
    let Some(refusal) = refusal(caller, tier, allowed) else {
        return Ok(());
    };
    Err(match (refusal, tier) {
        (Refusal::Surface, Tier::Admin) => LoreError::NeedsAdmin(format!(
            "{path} is an admin method; call it from run_sdk or the REST admin surface"
        )),
        (Refusal::Surface, _) => {
            let why = engine
                .script
                .as_ref()
                .and_then(|s| s.read_only.clone())
                .unwrap_or_else(|| "this tool may only read; use run_sdk for writes".into());
            LoreError::NeedsWrite(format!("{path} writes, and {why}"))
        }
        (Refusal::Scope, _) => LoreError::InsufficientScope(format!(
            "{path} needs a token with the mcp:write scope; this token has {}",
            caller.scopes().to_oauth_string()
        )),
        (Refusal::Role, Tier::Admin) => LoreError::NeedsAdmin(format!(
            "{path} needs the admin or owner role; you are a {} of {}",
            caller.role().as_str(),
            caller.org()
        )),
        (Refusal::Role, _) => LoreError::NeedsWrite(format!(
            "{path} needs the member role or higher; you are a {} of {}",
            caller.role().as_str(),
            caller.org()
        )),
    })
}

/// Whether `caller` may call a method of `tier` (for listings: search_sdk, `.d.ts`).
pub fn may_call(caller: &Caller, tier: Tier, allowed: Tier) -> bool {
    refusal(caller, tier, allowed).is_none()
}
