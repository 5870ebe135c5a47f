//! The actions pages: the org's audit log (`actions.list`, newest first), filtered by who acted
//! and how it ended, and one action with each SDK call it made (`actions.get`): its method,
//! mode, timing and outcome, the calls a `do` program queued, and the error it ended with.
//! Admins see everyone's actions; members and viewers see their own, as the SDK decides.

use std::collections::HashMap;

use http::Response;
use maud::{Markup, html};
use serde_json::{Value, json};

use super::context::App;
use super::view::{self, alert, not_found, when, who};
use lore_base::error::LoreError;

/// Actions per page.
const PAGE: usize = 50;
/// The statuses an action ends with, as the filter offers them.
const STATUSES: &[&str] = &["ok", "error", "skipped", "running"];

/// An action's time to the second (UTC).
fn when_secs(text: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(text).map_or_else(
        |_| text.to_string(),
        |t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
    )
}

/// `GET /app/{org}/actions`.
pub async fn list(app: &App<'_>) -> Response<Vec<u8>> {
    let query = app.query();
    let get = |name: &str| {
        query
            .one(name)
            .ok()
            .flatten()
            .map(str::trim)
            .filter(|v| !v.is_empty() && v.len() <= 200)
            .map(str::to_string)
    };
    let (agent, status, cursor) = (get("agent"), get("status"), get("cursor"));
    let names = app.names().await;
    let mut args = json!({ "newest_first": true, "limit": PAGE });
    if let Some(a) = &agent {
        args["principal"] = json!(a);
    }
    if let Some(s) = &status {
        args["status"] = json!(s);
    }
    if let Some(c) = &cursor {
        args["cursor"] = json!(c);
    }
    let answer = app.call("actions.list", args).await;
    let here = |c: Option<&str>| {
        let mut q = url::form_urlencoded::Serializer::new(String::new());
        if let Some(a) = &agent {
            q.append_pair("agent", a);
        }
        if let Some(s) = &status {
            q.append_pair("status", s);
        }
        if let Some(c) = c {
            q.append_pair("cursor", c);
        }
        q.finish()
    };
    let body = html! {
        (filters(app, &names, agent.as_deref(), status.as_deref()))
        @match &answer {
            Ok(v) => {
                @let items = v["items"].as_array().cloned().unwrap_or_default();
                p.muted role="status" {
                    @match items.len() {
                        0 => "No actions here.",
                        n => { (n) " actions, newest first." }
                    }
                }
                @if !items.is_empty() {
                    div.scroll { table {
                        thead { tr { th { "When" } th { "Who" } th { "What" } th { "Status" } th { "Calls" } th { "Time" } } }
                        tbody { @for a in &items { (row(app, &names, a)) } }
                    } }
                }
                (view::pager(here, cursor.is_some(), v["next_cursor"].as_str(), "Older actions"))
            }
            Err(e) => (alert(e)),
        }
    };
    view::page(app, "actions", "Actions", body)
}

fn filters(
    app: &App<'_>,
    names: &HashMap<String, String>,
    agent: Option<&str>,
    status: Option<&str>,
) -> Markup {
    let mut people: Vec<(&String, &String)> = names.iter().collect();
    people.sort_by(|a, b| a.1.cmp(b.1).then(a.0.cmp(b.0)));
    html! {
        form.filters method="get" action={ "/app/" (app.org()) "/actions" } {
            @if app.is_admin() {
                div {
                    label for="agent" { "Who" }
                    select #agent name="agent" {
                        option value="" { "Everyone" }
                        @for (id, name) in &people {
                            option value=(id) selected[agent == Some(id.as_str())] { (name) }
                        }
                    }
                }
            }
            div {
                label for="status" { "Status" }
                select #status name="status" {
                    option value="" { "Any" }
                    @for s in STATUSES { option selected[status == Some(*s)] { (s) } }
                }
            }
            div { button.primary type="submit" { "Show" } }
        }
        @if !app.is_admin() {
            p.muted { "You see your own actions; the org's admins see everyone's." }
        }
    }
}

/// The milliseconds an action's calls took together.
fn elapsed(a: &Value) -> u64 {
    a["steps"].as_array().map_or(0, |s| {
        s.iter().filter_map(|s| s["elapsed_ms"].as_u64()).sum()
    })
}

fn status_tag(status: &str) -> Markup {
    html! { span class=(if status == "ok" { "tag" } else { "tag bad" }) { (status) } }
}

fn row(app: &App<'_>, names: &HashMap<String, String>, a: &Value) -> Markup {
    let s = |k: &str| a[k].as_str().unwrap_or("");
    let steps = a["steps"].as_array().map_or(0, Vec::len);
    let single = a["steps"]
        .as_array()
        .filter(|s| s.len() == 1)
        .and_then(|s| s[0]["method"].as_str());
    let what = html! {
        @match (a["operation"].as_str(), a["behavior"].as_str(), single) {
            (Some(op), _, _) => { (s("source")) " · operation " (op) }
            (None, Some(b), _) => { (s("source")) " · behavior " (b) }
            (None, None, Some(m)) if matches!(s("source"), "api" | "app") => { code { (m) } " · " (s("source")) }
            _ => (s("source")),
        }
    };
    html! {
        tr {
            td.when { a href={ "/app/" (app.org()) "/actions/" (s("id")) } { (when_secs(s("created_at"))) } }
            td { (who(names, s("principal"))) }
            td {
                (what) " " span.muted { "(" (s("mode")) ")" }
                @if a["dry_run"].as_bool() == Some(true) { " " span.tag { "dry run" } }
            }
            td { (status_tag(s("status"))) }
            td { (steps) }
            td { (elapsed(a)) " ms" }
        }
    }
}

/// `GET /app/{org}/actions/{id}`.
pub async fn one(app: &App<'_>, id: &str) -> Response<Vec<u8>> {
    let a = match app.call("actions.get", json!({ "id": id })).await {
        Ok(a) => a,
        Err(LoreError::NotFound { .. } | LoreError::InvalidArgument { .. }) => return not_found(),
        Err(e) => return view::page(app, "actions", "Actions", alert(&e)),
    };
    let names = app.names().await;
    let s = |k: &str| a[k].as_str().unwrap_or("");
    let mut facts: Vec<(&str, Markup)> = vec![
        ("When", html! { (when_secs(s("created_at"))) }),
        ("Who", who(&names, s("principal"))),
        ("Source", html! { (s("source")) }),
        ("Mode", html! { (s("mode")) }),
        ("Status", status_tag(s("status"))),
        (
            "Dry run",
            html! { (if a["dry_run"].as_bool() == Some(true) { "yes" } else { "no" }) },
        ),
    ];
    for (label, key) in [
        ("Operation", "operation"),
        ("Behavior", "behavior"),
        ("Trigger event", "trigger_event"),
        ("Script SHA-256", "code_hash"),
    ] {
        if let Some(v) = a[key].as_str() {
            facts.push((label, html! { code { (v) } }));
        }
    }
    if let Some(d) = a["depth"].as_u64() {
        facts.push(("Reaction depth", html! { (d) }));
    }
    let steps = a["steps"].as_array().cloned().unwrap_or_default();
    let sends = a["sends"].as_array().cloned().unwrap_or_default();
    let e = &a["error"];
    let body = html! {
        p { a href={ "/app/" (app.org()) "/actions" } { "All actions" } }
        dl.facts { @for (k, v) in &facts { dt { (k) } dd { (v) } } }
        @if !e.is_null() {
            h2 { "Error" }
            p {
                span.tag.bad { (e["code"].as_str().unwrap_or("error")) }
                @if let Some(c) = e["cap"].as_str() { " the " code { (c) } " cap" }
            }
            pre.card { (e["message"].as_str().unwrap_or("")) }
        }
        (caps_used(&a))
        h2 { "Calls" }
        p.muted { (steps.len()) " SDK calls, " (elapsed(&a)) " ms in all." }
        @if !steps.is_empty() {
            div.scroll { table {
                thead { tr { th { "#" } th { "Method" } th { "Mode" } th { "Outcome" } th { "Time" } } }
                tbody {
                    @for (i, st) in steps.iter().enumerate() {
                        @let t = |k: &str| st[k].as_str().unwrap_or("");
                        tr {
                            td { (i + 1) }
                            td { code { (t("method")) } }
                            td { (if t("mode").is_empty() { s("mode") } else { t("mode") }) }
                            td {
                                @if st["ok"].as_bool() == Some(true) {
                                    "ok"
                                } @else {
                                    span.tag.bad { (if t("error_code").is_empty() { "error" } else { t("error_code") }) }
                                }
                                @if let Some(n) = st["attempts"].as_u64().filter(|n| *n > 1) { " after " (n) " attempts" }
                                @if st["replayed"].as_bool() == Some(true) { " (replayed)" }
                            }
                            td { (st["elapsed_ms"].as_u64().unwrap_or(0)) " ms" }
                        }
                    }
                }
            } }
        }
        @if !sends.is_empty() {
            h2 { "Queued calls" }
            div.scroll { table {
                thead { tr { th { "Method" } th { "Status" } th { "Attempts" } th { "Finished" } } }
                tbody {
                    @for q in &sends {
                        @let t = |k: &str| q[k].as_str().unwrap_or("");
                        tr {
                            td { code { (t("method")) } }
                            td { (status_tag(t("status"))) }
                            td { (q["attempts"].as_u64().unwrap_or(0)) }
                            td.when { (when(t("finished_at"))) }
                        }
                    }
                }
            } }
        }
    };
    view::page(app, "actions", "An action", body)
}

/// A script run's use of its caps: each cap's amount used, its limit and the share as a bar;
/// the cap the run ended on (if any) is marked.
fn caps_used(a: &Value) -> Markup {
    let Some(caps) = a["caps_used"].as_array().filter(|c| !c.is_empty()) else {
        return html! {};
    };
    let reached = a["error"]["cap"].as_str().unwrap_or("");
    html! {
        h2 { "Caps used" }
        div.scroll { table {
            thead { tr { th { "Cap" } th { "Used" } th { "Limit" } th { "Share" } } }
            tbody {
                @for c in caps {
                    @let cap = c["cap"].as_str().unwrap_or("");
                    @let used = c["used"].as_u64().unwrap_or(0);
                    @let limit = c["limit"].as_u64().unwrap_or(0);
                    @let share = if limit == 0 { 0.0 } else { (used as f64 / limit as f64).min(1.0) };
                    @let label = match cap {
                        "sdk_calls" => "SDK calls",
                        "wall_clock" => "wall clock",
                        "buffered_writes" => "writes",
                        other => other,
                    };
                    tr {
                        td { (label) @if cap == reached { " " span.tag.bad { "reached" } } }
                        td { (amount(cap, used)) }
                        td { (amount(cap, limit)) }
                        td {
                            meter min="0" max="1" value=(format!("{share:.4}")) {}
                            " " (format!("{:.1}%", share * 100.0))
                        }
                    }
                }
            }
        } }
        p.muted { "Memory is the most the server's scripts held at one of this run's checks (runs on one thread share it)." }
    }
}

/// An amount of `cap`'s unit, for people.
fn amount(cap: &str, n: u64) -> String {
    match cap {
        "memory" | "output" if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / f64::from(1 << 20)),
        "memory" | "output" if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        "memory" | "output" => format!("{n} bytes"),
        "wall_clock" if n >= 10_000 => format!("{:.1} s", n as f64 / 1000.0),
        "wall_clock" => format!("{n} ms"),
        _ => thousands(n),
    }
}

/// `n` with its digits grouped by three: 20,000,000.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}
