//! The usage page: the org's built-in usage counters (`metrics.query` of `tool_calls`,
//! `tool_errors` and `cap_hits`, per day and tool) over the last days, as a chart of calls per
//! day with the errors and cap hits among them, and per tool its totals and a small chart of its
//! days. Charts are inline SVG
//! drawn here (no script); every number is also in the page as text.

use std::collections::BTreeMap;

use chrono::{Duration, NaiveDate};
use http::Response;
use maud::{Markup, html};
use serde_json::json;

use super::context::App;
use super::view::{self, alert};

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
            Err(e) => return view::page(app, "usage", "Usage", alert(&e)),
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

    let series: Vec<(String, Count)> = per_day
        .iter()
        .map(|(d, c)| ((*d).to_string(), *c))
        .collect();
    let mut tools: Vec<(&str, Count)> = per_tool.into_iter().collect();
    tools.sort_by(|a, b| b.1.calls.total_cmp(&a.1.calls).then(a.0.cmp(b.0)));
    let plural = |n: f64, one: &'static str, many: &'static str| if n == 1.0 { one } else { many };
    let body = html! {
        (period_picker(app, days))
        p role="status" {
            strong { (num(total.calls)) } " " (plural(total.calls, "call", "calls")) ", "
            strong { (num(total.errors)) } " " (plural(total.errors, "error", "errors")) " and "
            strong { (num(total.cap_hits)) } " " (plural(total.cap_hits, "cap hit", "cap hits"))
            " from " (since) " to " (until) " (UTC)"
            @if total.calls > 0.0 {
                ", " (format!("{:.1}", 100.0 * total.errors / total.calls)) "% of calls ended in an error"
            }
            "."
        }
        h2 { "Calls per day" }
        p.legend {
            span { i.calls {} "calls" } span { i.errs {} "errors" } span { i.caps {} "cap hits" }
        }
        (chart(&series, 100, "chart"))
        p.axis.muted {
            span { (since) }
            span { "most in a day: " (num(series.iter().map(|(_, c)| c.calls).fold(0.0, f64::max))) }
            span { (until) }
        }
        h2 { "By tool and method" }
        @if tools.is_empty() {
            p.muted { "No calls in this period." }
        } @else {
            div.scroll { table {
                thead { tr { th { "Tool or method" } th { "Calls" } th { "Errors" } th { "Cap hits" } th { "Per day" } } }
                tbody {
                    @for (tool, c) in &tools {
                        @let days: Vec<(String, Count)> = all_days
                            .iter()
                            .map(|d| {
                                let c = by_day_tool
                                    .get(&(d.clone(), (*tool).to_string()))
                                    .copied()
                                    .unwrap_or_default();
                                (d.clone(), c)
                            })
                            .collect();
                        tr {
                            td.name { code { (tool) } }
                            td { (num(c.calls)) } td { (num(c.errors)) } td { (num(c.cap_hits)) }
                            td.spark { (chart(&days, 24, "spark")) }
                        }
                    }
                }
            } }
        }
        p.muted {
            "Calls by agents and API clients (MCP tools, REST, SDK methods in scripts); this app's own reads are not counted. A cap hit is a call that reached a limit: a script's cap, the org's share of script slots, or a rate limit (refused requests are counted under "
            code { "rate_limited" }
            "). Counts reach this page within a few seconds of the calls (each server instance adds its counts every two seconds)."
        }
    };
    view::page(app, "usage", "Usage", body)
}

/// A count as the page shows it (`4`, not `4.0`).
fn num(n: f64) -> String {
    n.to_string()
}

fn period_picker(app: &App<'_>, days: i64) -> Markup {
    let mut periods = PERIODS.to_vec();
    periods.sort_unstable();
    html! {
        nav.periods aria-label="Period" {
            @for (i, d) in periods.iter().enumerate() {
                @if i > 0 { " · " }
                @if *d == days {
                    strong aria-current="true" { (d) " days" }
                } @else {
                    a href={ "/app/" (app.org()) "/usage?days=" (d) } { (d) " days" }
                }
            }
        }
    }
}

/// A bar chart of `series` (calls, with the errors among them drawn over them and the cap hits
/// over those), `height` units tall; each bar carries its day and numbers as a tooltip and for screen readers.
fn chart(series: &[(String, Count)], height: u32, class: &str) -> Markup {
    let max = series
        .iter()
        .map(|(_, c)| c.calls)
        .fold(0.0, f64::max)
        .max(1.0);
    let h = f64::from(height);
    let width = series.len() * 10;
    let bar = |n: f64| (n / max * h).max(if n > 0.0 { 1.0 } else { 0.0 });
    let f2 = |v: f64| format!("{v:.2}");
    let label: f64 = series.iter().map(|(_, c)| c.calls).sum();
    html! {
        svg class=(class) viewBox={ "0 0 " (width) " " (height) } preserveAspectRatio="none" role="img"
            aria-label={ (num(label)) " calls over " (series.len()) " days" } {
            @for (i, (day, c)) in series.iter().enumerate() {
                @let x = i * 10 + 1;
                @let (calls, errors, caps) = (bar(c.calls), bar(c.errors), bar(c.cap_hits));
                g {
                    title { (day) ": " (num(c.calls)) " calls, " (num(c.errors)) " errors, " (num(c.cap_hits)) " cap hits" }
                    rect.calls x=(x) y=(f2(h - calls)) width="8" height=(f2(calls)) {}
                    rect.errs x=(x) y=(f2(h - errors)) width="8" height=(f2(errors)) {}
                    rect.caps x=(x) y=(f2(h - caps)) width="8" height=(f2(caps)) {}
                }
            }
        }
    }
}
