//! Metrics: built-in usage counters (calls and errors per tool, per day) and org-defined
//! metrics (a named read-only SQL query with a value column).
//!
//! Counting must not cost a storage write per call, so each core instance buffers its counts
//! and flushes them at most every [`FLUSH_EVERY_MS`] into keys of its own
//! (`usage/{day}/{tool}/{instance}`); a query sums the instances, so counts from other
//! instances show within one interval (the native server also flushes idle workers). A crash
//! loses at most the last interval of counts of that instance, never a record.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ByName, Done, check_name, to_bytes};
use lore_base::error::{LoreError, Result};
use lore_base::ids::OrgId;
use lore_base::keys::OrgKeys;
use lore_base::ports::Ports;
use lore_base::storage::{Batch, StorageError};
use lore_directory::Caller;

/// How often an instance writes its buffered counts.
pub const FLUSH_EVERY_MS: i64 = 2_000;

/// The built-in metrics.
pub const BUILT_IN: &[(&str, &str)] = &[
    (
        "tool_calls",
        "Calls of each tool and SDK method (MCP tools, REST admin tools and methods).",
    ),
    (
        "tool_errors",
        "Calls that ended in an error, per tool and SDK method.",
    ),
    (
        "cap_hits",
        "Calls that reached a limit, per tool and SDK method: a script's cap (cap_exceeded), a rate limit (rate_limited, counted under the tool rate_limited) or the org's share of script slots (overloaded).",
    ),
];

/// The stable error codes counted as cap hits (as well as errors).
pub const CAP_HIT_CODES: &[&str] = &["cap_exceeded", "rate_limited", "overloaded"];

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub calls: u64,
    pub errors: u64,
    #[serde(default)]
    pub cap_hits: u64,
}

impl Counts {
    /// One call that ended with `outcome`.
    pub fn of<T>(outcome: &Result<T>) -> Self {
        let code = outcome.as_ref().err().map(LoreError::code);
        Self {
            calls: 1,
            errors: u64::from(code.is_some()),
            cap_hits: u64::from(code.is_some_and(|c| CAP_HIT_CODES.contains(&c))),
        }
    }

    fn add(&mut self, other: Self) {
        self.calls += other.calls;
        self.errors += other.errors;
        self.cap_hits += other.cap_hits;
    }
}

/// One instance's buffered counts.
pub struct UsageCounters {
    instance: String,
    pending: RefCell<BTreeMap<(OrgId, String, String), Counts>>,
    last_flush_ms: Cell<i64>,
}

impl UsageCounters {
    pub fn new(instance: String) -> Self {
        Self {
            instance,
            pending: RefCell::default(),
            last_flush_ms: Cell::new(0),
        }
    }

    /// Adds `counts` to `tool`'s in `org`.
    pub fn count(&self, org: &OrgId, tool: &str, counts: Counts, now_ms: i64) {
        let day = lore_base::time::format_time(now_ms)
            .get(..10)
            .unwrap_or("1970-01-01")
            .to_string();
        let tool: String = tool
            .chars()
            .filter(|c| c.is_ascii_graphic() && *c != '/')
            .take(100)
            .collect();
        let mut pending = self.pending.borrow_mut();
        pending
            .entry((org.clone(), day, tool))
            .or_default()
            .add(counts);
    }

    /// Flushes when the last flush is older than [`FLUSH_EVERY_MS`].
    pub async fn flush_if_due(&self, ports: &Ports) -> Result<()> {
        let now = ports.clock.now_ms();
        if now - self.last_flush_ms.get() < FLUSH_EVERY_MS || self.pending.borrow().is_empty() {
            return Ok(());
        }
        self.flush(ports).await
    }

    /// Adds the buffered counts to this instance's stored ones, in one batch.
    pub async fn flush(&self, ports: &Ports) -> Result<()> {
        self.last_flush_ms.set(ports.clock.now_ms());
        let pending = std::mem::take(&mut *self.pending.borrow_mut());
        if pending.is_empty() {
            return Ok(());
        }
        for _ in 0..4 {
            // Counts, not records: a power cut may lose the last ones (no fsync per request).
            let mut batch = Batch::new();
            batch.relaxed();
            for ((org, day, tool), add) in &pending {
                let key = OrgKeys::new(org).usage(day, tool, &self.instance);
                let stored = ports.storage.get(&key).await?;
                let mut total: Counts = match &stored {
                    Some(b) => serde_json::from_slice(b)?,
                    None => Counts::default(),
                };
                total.add(*add);
                match stored {
                    Some(b) => batch.require_equals(&key, b),
                    None => batch.require_absent(&key),
                };
                batch.put(&key, to_bytes(&total));
            }
            match ports.storage.commit(batch).await {
                Err(StorageError::Conflict { .. }) => continue,
                other => return other.map_err(Into::into),
            }
        }
        Err(LoreError::Conflict("usage counters kept changing".into()))
    }
}

/// An org-defined metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Metric {
    pub name: String,
    pub description: String,
    /// A read-only SQL query over the org's tables (see `query_sql`).
    pub sql: String,
    /// The result column that holds the value.
    pub value_column: String,
    pub author: String,
    pub created_at: String,
}

/// A metric as listed.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct MetricInfo {
    pub name: String,
    /// `builtin` or `sql`.
    pub kind: String,
    pub description: String,
}

/// `metrics.define`
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DefineMetric {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// One read-only SELECT over the org's tables.
    pub sql: String,
    /// Default `value`.
    pub value_column: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    /// One total.
    #[default]
    None,
    Tool,
    Day,
    /// Per day and tool, keyed `{day}/{tool}`.
    DayAndTool,
}

/// `metrics.query` (`query_metric`)
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueryMetric {
    pub name: String,
    /// First day counted, `YYYY-MM-DD` (inclusive).
    pub since: Option<String>,
    /// Last day counted, `YYYY-MM-DD` (inclusive).
    pub until: Option<String>,
    /// Only this tool or method.
    pub tool: Option<String>,
    #[serde(default)]
    pub group_by: GroupBy,
}

/// One group of a metric's value.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Sample {
    pub key: String,
    pub value: f64,
}

/// A metric's value.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct MetricValue {
    pub name: String,
    pub value: f64,
    /// Per group, when `group_by` is `tool`, `day` or `day_and_tool`.
    pub series: Vec<Sample>,
}

pub async fn list(ports: &Ports, caller: &Caller) -> Result<Vec<MetricInfo>> {
    let mut out: Vec<MetricInfo> = BUILT_IN
        .iter()
        .map(|(name, description)| MetricInfo {
            name: (*name).into(),
            kind: "builtin".into(),
            description: (*description).into(),
        })
        .collect();
    let defined: Vec<Metric> = super::all(ports, &caller.keys().all_named("metric")).await?;
    out.extend(defined.into_iter().map(|m| MetricInfo {
        name: m.name,
        kind: "sql".into(),
        description: m.description,
    }));
    Ok(out)
}

pub async fn delete(ports: &Ports, caller: &Caller, args: ByName) -> Result<Done> {
    check_name("name", &args.name)?;
    let key = caller.keys().named("metric", &args.name);
    if ports.storage.get(&key).await?.is_none() {
        return Err(LoreError::not_found(format!("metric {:?}", args.name)));
    }
    ports.storage.delete(&key).await?;
    Ok(Done { ok: true })
}
