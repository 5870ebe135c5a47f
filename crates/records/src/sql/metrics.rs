//! Org-defined metrics (a named read-only SQL query with a value column) and evaluating any
//! metric, built-in usage counts or SQL. The records and the usage counters are
//! [`crate::metrics`]'s; what needs the SQL engine is here.

use std::collections::BTreeMap;

use lore_directory::Caller;

use crate::metrics::{
    BUILT_IN, Counts, DefineMetric, GroupBy, Metric, MetricValue, QueryMetric, Sample,
    UsageCounters,
};
use crate::{check_name, commit_new, now_text, to_bytes};
use lore_base::error::{LoreError, Result};
use lore_base::ports::{Offload, Ports};
use lore_base::storage::Batch;

pub async fn define(ports: &Ports, caller: &Caller, args: DefineMetric) -> Result<Metric> {
    check_name("name", &args.name)?;
    if BUILT_IN.iter().any(|(n, _)| *n == args.name) {
        return Err(LoreError::invalid(
            "name",
            "that is a built-in metric's name",
        ));
    }
    let sql = args.sql.trim();
    // The same checks query_sql makes: one read-only SELECT (or WITH … SELECT).
    super::check(sql)?;
    let metric = Metric {
        name: args.name,
        description: args.description,
        sql: sql.to_string(),
        value_column: args.value_column.unwrap_or_else(|| "value".into()),
        author: caller.principal().id.clone(),
        created_at: now_text(ports),
    };
    let key = caller.keys().named("metric", &metric.name);
    let mut batch = Batch::new();
    batch.require_absent(&key).put(&key, to_bytes(&metric));
    commit_new(ports, batch, || format!("metric {:?}", metric.name)).await?;
    Ok(metric)
}

fn check_day(field: &str, day: Option<&str>) -> Result<()> {
    match day {
        Some(d) if chrono::NaiveDate::parse_from_str(d, "%Y-%m-%d").is_err() => {
            Err(LoreError::invalid(field, "give a day as YYYY-MM-DD"))
        }
        _ => Ok(()),
    }
}

/// Evaluates a metric. The caller's own instance flushes first, so its latest counts show.
pub async fn query(
    ports: &Ports,
    usage: &UsageCounters,
    sql_limits: &super::Limits,
    offload: Option<&dyn Offload>,
    caller: &Caller,
    args: QueryMetric,
) -> Result<MetricValue> {
    check_day("since", args.since.as_deref())?;
    check_day("until", args.until.as_deref())?;
    let counted: fn(&Counts) -> u64 = match args.name.as_str() {
        "tool_calls" => |c| c.calls,
        "tool_errors" => |c| c.errors,
        "cap_hits" => |c| c.cap_hits,
        other => {
            check_name("name", other)?;
            let key = caller.keys().named("metric", other);
            return match ports.record::<Metric>(&key).await? {
                Some(metric) => sql_metric(ports, caller, sql_limits, offload, &metric).await,
                None => Err(LoreError::not_found(format!(
                    "metric {other:?}; list them with list_metrics"
                ))),
            };
        }
    };
    usage.flush(ports).await?;
    let mut groups: BTreeMap<String, f64> = BTreeMap::new();
    let mut total = 0.0;
    let prefix = caller.keys().usage_all();
    // Counts are keyed by day first: the scan starts at `since` and stops after `until`.
    let mut after = args.since.as_deref().map(|s| format!("{prefix}{s}"));
    'scan: loop {
        let page = ports.storage.scan(&prefix, after.as_deref(), 512).await?;
        for (key, bytes) in &page.entries {
            let mut parts = key[prefix.len()..].splitn(3, '/');
            let (Some(day), Some(tool)) = (parts.next(), parts.next()) else {
                continue;
            };
            if args.until.as_deref().is_some_and(|u| day > u) {
                break 'scan;
            }
            if args.since.as_deref().is_some_and(|s| day < s)
                || args.tool.as_deref().is_some_and(|t| t != tool)
            {
                continue;
            }
            let counts: Counts = serde_json::from_slice(bytes)?;
            let n = counted(&counts) as f64;
            total += n;
            let group = match args.group_by {
                GroupBy::None => continue,
                GroupBy::Tool => tool.to_string(),
                GroupBy::Day => day.to_string(),
                GroupBy::DayAndTool => format!("{day}/{tool}"),
            };
            *groups.entry(group).or_default() += n;
        }
        match page.cursor {
            Some(c) => after = Some(c),
            None => break,
        }
    }
    Ok(MetricValue {
        name: args.name,
        value: total,
        series: groups
            .into_iter()
            .map(|(key, value)| Sample { key, value })
            .collect(),
    })
}

/// Evaluates an org metric through the `query_sql` engine for the caller (who sees what
/// `query_sql` shows them): one row gives the value; several give a series keyed by the other
/// columns (joined with `/`) and their sum.
/// `since`, `until`, `tool` and `group_by` are for the built-in metrics; a SQL metric filters
/// and groups in its query.
async fn sql_metric(
    ports: &Ports,
    caller: &Caller,
    limits: &super::Limits,
    offload: Option<&dyn Offload>,
    metric: &Metric,
) -> Result<MetricValue> {
    let (labels, rows, _) = super::run(
        ports,
        caller,
        limits,
        &super::TableCache::new(0),
        offload,
        &metric.sql,
        &[],
    )
    .await
    .map_err(|e| match e {
        LoreError::InvalidArgument { message, .. } => LoreError::invalid(
            "name",
            format!("metric {}'s query failed: {message}", metric.name),
        ),
        other => other,
    })?;
    let column = labels
        .iter()
        .position(|l| *l == metric.value_column)
        .ok_or_else(|| {
            LoreError::invalid(
                "name",
                format!(
                    "metric {}'s query returns the columns {}, not its value column {:?}",
                    metric.name,
                    labels.join(", "),
                    metric.value_column
                ),
            )
        })?;
    let mut series = Vec::new();
    let mut total = 0.0;
    for row in &rows {
        let value = match super::value::to_json(&row[column]) {
            serde_json::Value::Null => 0.0,
            serde_json::Value::Number(n) => n.as_f64().unwrap_or_default(),
            other => {
                return Err(LoreError::invalid(
                    "name",
                    format!(
                        "metric {}'s value column {:?} holds {other}, not a number",
                        metric.name, metric.value_column
                    ),
                ));
            }
        };
        total += value;
        if rows.len() > 1 {
            let key = row
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != column)
                .map(|(_, v)| String::from(v))
                .collect::<Vec<_>>()
                .join("/");
            series.push(Sample { key, value });
        }
    }
    Ok(MetricValue {
        name: metric.name.clone(),
        value: total,
        series,
    })
}
