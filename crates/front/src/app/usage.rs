//! The usage page: the org's built-in usage counters (`metrics.query` of `tool_calls`,
//! `tool_errors` and `cap_hits`, per day and tool) over the last days, as a chart of calls per
//! day with the errors and cap hits among them, and per tool its totals and a small chart of its
//! days. Charts are inline SVG
//! drawn here (no script); every number is also in the page as text.

use std::collections::BTreeMap;

use chrono::{Duration, NaiveDate};
use http::Response;
use serde_json::json;

use super::context::App;
use super::view::{self, alert};
use crate::oauth::pages::esc;

/// The periods offered, in days; the first is the default.
const PERIODS: &[i64] = &[30, 7, 14, 90];

/// Calls, errors and cap hits of one day or tool.
#[derive(Default, Clone, Copy)]
struct Count {
    calls: f64,
    errors: f64,
    cap_hits: f64,
}

impl Count {
    fn add(&mut self, other: Self) {
        self.calls += other.calls;
        self.errors += other.errors;
        self.cap_hits += other.cap_hits;
    }
}

/// One of a [`Count`]'s numbers.
type Field = fn(&mut Count) -> &mut f64;

/// The built-in metrics the page shows, and where each goes in a [`Count`].
const METRICS: &[(&str, Field)] = &[
    ("tool_calls", |c| &mut c.calls),
    ("tool_errors", |c| &mut c.errors),
    ("cap_hits", |c| &mut c.cap_hits),
];

/// `GET /app/{org}/usage`.
pub async fn page(app: &App<'_>) -> Response<Vec<u8>> {
    let days = app
        .query()
        .one("days")
        .ok()
        .flatten()
        .and_then(|d| d.parse::<i64>().ok())
        .filter(|d| PERIODS.contains(d))
        .unwrap_or(PERIODS[0]);
    let today = chrono::DateTime::from_timestamp_millis(app.lore().ports().clock.now_ms())
        .map_or_else(|| NaiveDate::MIN, |t| t.date_naive());
    let first = today - Duration::days(days - 1);
    let since = first.format("%Y-%m-%d").to_string();
    let until = today.format("%Y-%m-%d").to_string();
    let mut by_day_tool: BTreeMap<(String, String), Count> = BTreeMap::new();
    for (name, field) in METRICS {
        let args =
            json!({"name": name, "since": since, "until": until, "group_by": "day_and_tool"});
        let value = match app.call("metrics.query", args).await {
            Ok(v) => v,
            Err(e) => return view::page(app, "usage", "Usage", &alert(&e)),
        };
        for sample in value["series"].as_array().into_iter().flatten() {
            let (Some(key), Some(n)) = (sample["key"].as_str(), sample["value"].as_f64()) else {
                continue;
            };
            let Some((day, tool)) = key.split_once('/') else {
                continue;
            };
            *field(
                by_day_tool
                    .entry((day.to_string(), tool.to_string()))
                    .or_default(),
            ) += n;
        }
    }
    let all_days: Vec<String> = (0..days)
        .map(|i| (first + Duration::days(i)).format("%Y-%m-%d").to_string())
        .collect();
    let mut per_day: BTreeMap<&str, Count> = all_days
        .iter()
        .map(|d| (d.as_str(), Count::default()))
        .collect();
    let mut per_tool: BTreeMap<&str, Count> = BTreeMap::new();
    for ((day, tool), c) in &by_day_tool {
        if let Some(d) = per_day.get_mut(day.as_str()) {
            d.add(*c);
        }
        per_tool.entry(tool.as_str()).or_default().add(*c);
    }
    let mut total = Count::default();
    per_day.values().for_each(|c| total.add(*c));

    let mut body = period_picker(app, days);
    body.push_str(&format!(
        "<p role=\"status\"><strong>{}</strong> {}, <strong>{}</strong> {} and <strong>{}</strong> {} from {since} to {until} (UTC){}.</p>\n",
        total.calls,
        if total.calls == 1.0 { "call" } else { "calls" },
        total.errors,
        if total.errors == 1.0 { "error" } else { "errors" },
        total.cap_hits,
        if total.cap_hits == 1.0 { "cap hit" } else { "cap hits" },
        if total.calls > 0.0 {
            format!(", {:.1}% of calls ended in an error", 100.0 * total.errors / total.calls)
        } else {
            String::new()
        }
    ));
    body.push_str("<h2>Calls per day</h2>\n<p class=\"legend\"><span><i class=\"calls\"></i>calls</span><span><i class=\"errs\"></i>errors</span><span><i class=\"caps\"></i>cap hits</span></p>\n");
    let series: Vec<(String, Count)> = per_day
        .iter()
        .map(|(d, c)| ((*d).to_string(), *c))
        .collect();
    body.push_str(&chart(&series, 100, "chart"));
    body.push_str(&format!(
        "<p class=\"axis muted\"><span>{since}</span><span>most in a day: {}</span><span>{until}</span></p>\n",
        series.iter().map(|(_, c)| c.calls).fold(0.0, f64::max)
    ));
    body.push_str("<h2>By tool and method</h2>\n");
    if per_tool.is_empty() {
        body.push_str("<p class=\"muted\">No calls in this period.</p>\n");
    } else {
        let mut tools: Vec<(&str, Count)> = per_tool.into_iter().collect();
        tools.sort_by(|a, b| b.1.calls.total_cmp(&a.1.calls).then(a.0.cmp(b.0)));
        body.push_str("<div class=\"scroll\"><table>\n<thead><tr><th>Tool or method</th><th>Calls</th><th>Errors</th><th>Cap hits</th><th>Per day</th></tr></thead>\n<tbody>\n");
        for (tool, c) in tools {
            let days: Vec<(String, Count)> = all_days
                .iter()
                .map(|d| {
                    let c = by_day_tool
                        .get(&(d.clone(), tool.to_string()))
                        .copied()
                        .unwrap_or_default();
                    (d.clone(), c)
                })
                .collect();
            body.push_str(&format!(
                "<tr><td class=\"name\"><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td class=\"spark\">{}</td></tr>\n",
                esc(tool),
                c.calls,
                c.errors,
                c.cap_hits,
                chart(&days, 24, "spark"),
            ));
        }
        body.push_str("</tbody></table></div>\n");
    }
    body.push_str("<p class=\"muted\">Calls by agents and API clients (MCP tools, REST, SDK methods in scripts); this app's own reads are not counted. A cap hit is a call that reached a limit: a script's cap, the org's share of script slots, or a rate limit (refused requests are counted under <code>rate_limited</code>). Counts reach this page within a few seconds of the calls (each server instance adds its counts every two seconds).</p>\n");
    view::page(app, "usage", "Usage", &body)
}

fn period_picker(app: &App<'_>, days: i64) -> String {
    let mut periods = PERIODS.to_vec();
    periods.sort_unstable();
    let links: String = periods
        .iter()
        .map(|d| {
            if *d == days {
                format!("<strong aria-current=\"true\">{d} days</strong>")
            } else {
                format!(
                    "<a href=\"/app/{}/usage?days={d}\">{d} days</a>",
                    esc(app.org())
                )
            }
        })
        .collect::<Vec<_>>()
        .join(" · ");
    format!("<nav class=\"periods\" aria-label=\"Period\">{links}</nav>\n")
}

/// A bar chart of `series` (calls, with the errors among them drawn over them and the cap hits
/// over those), `height` units tall; each bar carries its day and numbers as a tooltip and for screen readers.
fn chart(series: &[(String, Count)], height: u32, class: &str) -> String {
    let max = series
        .iter()
        .map(|(_, c)| c.calls)
        .fold(0.0, f64::max)
        .max(1.0);
    let h = f64::from(height);
    let width = series.len() * 10;
    let mut bars = String::new();
    for (i, (day, c)) in series.iter().enumerate() {
        let x = i * 10 + 1;
        let calls = (c.calls / max * h).max(if c.calls > 0.0 { 1.0 } else { 0.0 });
        let errors = (c.errors / max * h).max(if c.errors > 0.0 { 1.0 } else { 0.0 });
        let caps = (c.cap_hits / max * h).max(if c.cap_hits > 0.0 { 1.0 } else { 0.0 });
        bars.push_str(&format!(
            "<g><title>{day}: {} calls, {} errors, {} cap hits</title><rect class=\"calls\" x=\"{x}\" y=\"{:.2}\" width=\"8\" height=\"{calls:.2}\"/><rect class=\"errs\" x=\"{x}\" y=\"{:.2}\" width=\"8\" height=\"{errors:.2}\"/><rect class=\"caps\" x=\"{x}\" y=\"{:.2}\" width=\"8\" height=\"{caps:.2}\"/></g>",
            c.calls,
            c.errors,
            c.cap_hits,
            h - calls,
            h - errors,
            h - caps,
            day = esc(day),
        ));
    }
    let label: f64 = series.iter().map(|(_, c)| c.calls).sum();
    format!(
        "<svg class=\"{class}\" viewBox=\"0 0 {width} {height}\" preserveAspectRatio=\"none\" role=\"img\" aria-label=\"{label} calls over {} days\">{bars}</svg>",
        series.len()
    )
}
