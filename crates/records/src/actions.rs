//! Actions: the audit log. Every write or admin call through the REST surface (and, with the
//! sandbox, every script run) is one Action: who, what, how it ended, and each SDK call.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{DEFAULT_PAGE, MAX_PAGE, Page, check_cursor, to_bytes};
use lore_base::error::{LoreError, Result};
use lore_base::ids::{new_ulid, parse_record_id};
use lore_base::ports::Ports;
use lore_directory::Caller;

/// One SDK call made during an Action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Step {
    /// Method path, e.g. `entities.create`.
    pub method: String,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    pub elapsed_ms: u64,
    /// `do` programs: the mode the call took effect in (reads have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// `do` programs: attempts made, when more than one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
    /// `do` programs: answered from an earlier run with the same idempotency key.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replayed: bool,
}

/// A call a `do` program queued in `send` mode, and how it went once made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SendOutcome {
    /// The receipt id (`snd_…`) the program got.
    pub id: String,
    pub method: String,
    /// `queued`, then `ok` or `error`.
    pub status: String,
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// `{code, message}` when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
}

/// What a script run used of one of its caps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CapUse {
    /// `steps`, `memory`, `sdk_calls`, `output`, `wall_clock` or `buffered_writes`.
    pub cap: String,
    pub used: u64,
    pub limit: u64,
}

/// An audit record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Action {
    /// `act_…`
    pub id: String,
    /// Principal id of the caller.
    pub principal: String,
    /// Where it came from: `api` (REST), `query_sdk`, `run_sdk`, `do`, `behavior` (a
    /// reaction), `operation` (a script operation's run).
    pub source: String,
    /// `try`, `send` or `do`; `default` for a `do` program that left each Verb its own.
    pub mode: String,
    pub dry_run: bool,
    /// `ok`, `error`, or `skipped` (a reaction past the depth limit).
    pub status: String,
    /// SHA-256 of the script, for script runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_hash: Option<String>,
    pub steps: Vec<Step>,
    /// `{code, message}` when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
    /// Reactions: the behavior that ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behavior: Option<String>,
    /// Reactions: the event that triggered it (`evt_…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger_event: Option<String>,
    /// Reactions: 1 for a reaction to a request's write, 2 for a reaction to a reaction's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<u8>,
    /// Script operations: the operation that ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    /// `do` programs: the calls queued in `send` mode and their outcomes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sends: Vec<SendOutcome>,
    /// Script runs: what the run used of its main caps (memory: the most the thread's
    /// scripts held at one of its checkpoints).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caps_used: Vec<CapUse>,
    pub created_at: String,
}

/// `actions.list`: oldest first (or newest first); members see their own, admins everyone's.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListActions {
    /// Only this principal's actions (admins).
    pub principal: Option<String>,
    /// Only actions that ended so: `ok`, `error`, `skipped` or `running`.
    pub status: Option<String>,
    /// Newest first (the cursor then continues toward older actions).
    #[serde(default)]
    pub newest_first: bool,
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<usize>,
    pub cursor: Option<String>,
}

/// Stores an action record for `caller`.
pub async fn record(ports: &Ports, caller: &Caller, mut action: Action) -> Result<Action> {
    let ulid = new_ulid(ports);
    action.id = format!("act_{ulid}");
    action.principal = caller.principal().id.clone();
    ports
        .storage
        .put(&caller.keys().action(&ulid), to_bytes(&action))
        .await?;
    Ok(action)
}

pub async fn get(ports: &Ports, caller: &Caller, id: &str) -> Result<Action> {
    let ulid = parse_record_id(id, "act", "id")?;
    let action: Action = ports
        .record(&caller.keys().action(ulid))
        .await?
        .ok_or_else(|| LoreError::not_found(format!("action {id} in org {}", caller.org())))?;
    if action.principal != caller.principal().id && !caller.role().is_admin() {
        return Err(LoreError::not_found(format!(
            "action {id} in org {}",
            caller.org()
        )));
    }
    Ok(action)
}

/// Lists actions in log order (or newest first), walking the log by id. A page ends at `limit`
/// matches or after 5,000 actions read, so a filter that matches little still answers promptly
/// with a cursor to go on.
pub async fn list(ports: &Ports, caller: &Caller, args: ListActions) -> Result<Page<Action>> {
    check_cursor(args.cursor.as_deref())?;
    let principal = if caller.role().is_admin() {
        args.principal
    } else {
        Some(caller.principal().id.clone())
    };
    let prefix = caller.keys().actions();
    let limit = args.limit.unwrap_or(DEFAULT_PAGE).clamp(1, MAX_PAGE);
    let mut from = args.cursor.map(|c| format!("{prefix}{c}"));
    let mut items = Vec::new();
    let mut scanned = 0;
    loop {
        let page = if args.newest_first {
            ports
                .storage
                .scan_back(&prefix, from.as_deref(), 500)
                .await?
        } else {
            ports.storage.scan(&prefix, from.as_deref(), 500).await?
        };
        for (key, bytes) in &page.entries {
            scanned += 1;
            from = Some(key.clone());
            let action: Action = serde_json::from_slice(bytes)?;
            if principal.as_ref().is_none_or(|p| *p == action.principal)
                && args.status.as_ref().is_none_or(|s| *s == action.status)
            {
                items.push(action);
            }
            if items.len() == limit || scanned == 5_000 {
                return Ok(Page {
                    items,
                    next_cursor: Some(key[prefix.len()..].to_string()),
                });
            }
        }
        if page.cursor.is_none() {
            return Ok(Page {
                items,
                next_cursor: None,
            });
        }
    }
}
