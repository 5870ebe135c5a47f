//! The actions pages: the org's audit log (`actions.list`, newest first), filtered by who acted
//! and how it ended, and one action with each SDK call it made (`actions.get`): its method,
//! mode, timing and outcome, the calls a `do` program queued, and the error it ended with.
//! Admins see everyone's actions; members and viewers see their own, as the SDK decides.

use std::collections::HashMap;

use http::Response;
use serde_json::{Value, json};

use super::context::App;
use super::view::{self, alert, not_found, when, who};
use crate::oauth::pages::esc;
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
    let mut body = filters(app, &names, agent.as_deref(), status.as_deref());
    match app.call("actions.list", args).await {
        Ok(v) => {
            let items = v["items"].as_array().cloned().unwrap_or_default();
            body.push_str(&format!(
                "<p class=\"muted\" role=\"status\">{}</p>\n",
                match items.len() {
                    0 => "No actions here.".to_string(),
                    n => format!("{n} actions, newest first."),
                }
            ));
            if !items.is_empty() {
                body.push_str("<div class=\"scroll\"><table>\n<thead><tr><th>When</th><th>Who</th><th>What</th><th>Status</th><th>Calls</th><th>Time</th></tr></thead>\n<tbody>\n");
                for a in &items {
                    body.push_str(&row(app, &names, a));
                }
                body.push_str("</tbody></table></div>\n");
            }
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
            body.push_str(&view::pager(
                here,
                cursor.is_some(),
                v["next_cursor"].as_str(),
                "Older actions",
            ));
        }
        Err(e) => body.push_str(&alert(&e)),
    }
    view::page(app, "actions", "Actions", &body)
}

fn filters(
    app: &App<'_>,
    names: &HashMap<String, String>,
    agent: Option<&str>,
    status: Option<&str>,
) -> String {
    let selected = |on: bool| if on { " selected" } else { "" };
    let mut out = format!(
        "<form class=\"filters\" method=\"get\" action=\"/app/{}/actions\">\n",
        esc(app.org())
    );
    if app.is_admin() {
        let mut people: Vec<(&String, &String)> = names.iter().collect();
        people.sort_by(|a, b| a.1.cmp(b.1).then(a.0.cmp(b.0)));
        out.push_str(&format!(
            "<div><label for=\"agent\">Who</label><select id=\"agent\" name=\"agent\"><option value=\"\">Everyone</option>{}</select></div>\n",
            people
                .iter()
                .map(|(id, name)| format!(
                    "<option value=\"{}\"{}>{}</option>",
                    esc(id),
                    selected(agent == Some(id.as_str())),
                    esc(name)
                ))
                .collect::<String>()
        ));
    }
    out.push_str(&format!(
        "<div><label for=\"status\">Status</label><select id=\"status\" name=\"status\"><option value=\"\">Any</option>{}</select></div>\n\
<div><button type=\"submit\" class=\"primary\">Show</button></div>\n</form>\n",
        STATUSES
            .iter()
            .map(|s| format!("<option{}>{s}</option>", selected(status == Some(*s))))
            .collect::<String>()
    ));
    if !app.is_admin() {
        out.push_str(
            "<p class=\"muted\">You see your own actions; the org's admins see everyone's.</p>\n",
        );
    }
    out
}

/// The milliseconds an action's calls took together.
fn elapsed(a: &Value) -> u64 {
    a["steps"].as_array().map_or(0, |s| {
        s.iter().filter_map(|s| s["elapsed_ms"].as_u64()).sum()
    })
}

fn status_tag(status: &str) -> String {
    let class = if status == "ok" { "tag" } else { "tag bad" };
    format!("<span class=\"{class}\">{}</span>", esc(status))
}

fn row(app: &App<'_>, names: &HashMap<String, String>, a: &Value) -> String {
    let s = |k: &str| a[k].as_str().unwrap_or("");
    let steps = a["steps"].as_array().map_or(0, Vec::len);
    let single = a["steps"]
        .as_array()
        .filter(|s| s.len() == 1)
        .and_then(|s| s[0]["method"].as_str());
    let what = match (a["operation"].as_str(), a["behavior"].as_str(), single) {
        (Some(op), _, _) => format!("{} · operation {}", esc(s("source")), esc(op)),
        (None, Some(b), _) => format!("{} · behavior {}", esc(s("source")), esc(b)),
        (None, None, Some(m)) if matches!(s("source"), "api" | "app") => {
            format!("<code>{}</code> · {}", esc(m), esc(s("source")))
        }
        _ => esc(s("source")),
    };
    let dry = if a["dry_run"].as_bool() == Some(true) {
        " <span class=\"tag\">dry run</span>"
    } else {
        ""
    };
    format!(
        "<tr><td class=\"when\"><a href=\"/app/{org}/actions/{id}\">{at}</a></td><td>{who}</td><td>{what} <span class=\"muted\">({mode})</span>{dry}</td><td>{status}</td><td>{steps}</td><td>{ms} ms</td></tr>\n",
        org = esc(app.org()),
        id = esc(s("id")),
        at = esc(&when_secs(s("created_at"))),
        who = who(names, s("principal")),
        mode = esc(s("mode")),
        status = status_tag(s("status")),
        ms = elapsed(a),
    )
}

/// `GET /app/{org}/actions/{id}`.
pub async fn one(app: &App<'_>, id: &str) -> Response<Vec<u8>> {
    let a = match app.call("actions.get", json!({ "id": id })).await {
        Ok(a) => a,
        Err(LoreError::NotFound { .. } | LoreError::InvalidArgument { .. }) => return not_found(),
        Err(e) => return view::page(app, "actions", "Actions", &alert(&e)),
    };
    let names = app.names().await;
    let s = |k: &str| a[k].as_str().unwrap_or("");
    let mut facts = vec![
        ("When", esc(&when_secs(s("created_at")))),
        ("Who", who(&names, s("principal"))),
        ("Source", esc(s("source"))),
        ("Mode", esc(s("mode"))),
        ("Status", status_tag(s("status"))),
        (
            "Dry run",
            if a["dry_run"].as_bool() == Some(true) {
                "yes".into()
            } else {
                "no".into()
            },
        ),
    ];
    for (label, key) in [
        ("Operation", "operation"),
        ("Behavior", "behavior"),
        ("Trigger event", "trigger_event"),
        ("Script SHA-256", "code_hash"),
    ] {
        if let Some(v) = a[key].as_str() {
            facts.push((label, format!("<code>{}</code>", esc(v))));
        }
    }
    if let Some(d) = a["depth"].as_u64() {
        facts.push(("Reaction depth", d.to_string()));
    }
    let mut body = format!(
        "<p><a href=\"/app/{}/actions\">All actions</a></p>\n<dl class=\"facts\">{}</dl>\n",
        esc(app.org()),
        facts
            .iter()
            .map(|(k, v)| format!("<dt>{k}</dt><dd>{v}</dd>"))
            .collect::<String>()
    );
    if !a["error"].is_null() {
        let e = &a["error"];
        body.push_str(&format!(
            "<h2>Error</h2>\n<p><span class=\"tag bad\">{}</span>{}</p>\n<pre class=\"card\">{}</pre>\n",
            esc(e["code"].as_str().unwrap_or("error")),
            e["cap"]
                .as_str()
                .map(|c| format!(" the <code>{}</code> cap", esc(c)))
                .unwrap_or_default(),
            esc(e["message"].as_str().unwrap_or("")),
        ));
    }
    body.push_str(&caps_used(&a));
    let steps = a["steps"].as_array().cloned().unwrap_or_default();
    body.push_str(&format!(
        "<h2>Calls</h2>\n<p class=\"muted\">{} SDK calls, {} ms in all.</p>\n",
        steps.len(),
        elapsed(&a)
    ));
    if !steps.is_empty() {
        body.push_str("<div class=\"scroll\"><table>\n<thead><tr><th>#</th><th>Method</th><th>Mode</th><th>Outcome</th><th>Time</th></tr></thead>\n<tbody>\n");
        for (i, st) in steps.iter().enumerate() {
            let t = |k: &str| st[k].as_str().unwrap_or("");
            let mut outcome = if st["ok"].as_bool() == Some(true) {
                "ok".to_string()
            } else {
                format!(
                    "<span class=\"tag bad\">{}</span>",
                    esc(if t("error_code").is_empty() {
                        "error"
                    } else {
                        t("error_code")
                    })
                )
            };
            if let Some(n) = st["attempts"].as_u64().filter(|n| *n > 1) {
                outcome.push_str(&format!(" after {n} attempts"));
            }
            if st["replayed"].as_bool() == Some(true) {
                outcome.push_str(" (replayed)");
            }
            body.push_str(&format!(
                "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{outcome}</td><td>{} ms</td></tr>\n",
                i + 1,
                esc(t("method")),
                esc(if t("mode").is_empty() { s("mode") } else { t("mode") }),
                st["elapsed_ms"].as_u64().unwrap_or(0),
            ));
        }
        body.push_str("</tbody></table></div>\n");
    }
    let sends = a["sends"].as_array().cloned().unwrap_or_default();
    if !sends.is_empty() {
        body.push_str("<h2>Queued calls</h2>\n<div class=\"scroll\"><table>\n<thead><tr><th>Method</th><th>Status</th><th>Attempts</th><th>Finished</th></tr></thead>\n<tbody>\n");
        for q in &sends {
            let t = |k: &str| q[k].as_str().unwrap_or("");
            body.push_str(&format!(
                "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td class=\"when\">{}</td></tr>\n",
                esc(t("method")),
                status_tag(t("status")),
                q["attempts"].as_u64().unwrap_or(0),
                esc(&when(t("finished_at"))),
            ));
        }
        body.push_str("</tbody></table></div>\n");
    }
    view::page(app, "actions", "An action", &body)
}

/// A script run's use of its caps: each cap's amount used, its limit and the share as a bar;
/// the cap the run ended on (if any) is marked.
fn caps_used(a: &Value) -> String {
    let Some(caps) = a["caps_used"].as_array().filter(|c| !c.is_empty()) else {
        return String::new();
    };
    let reached = a["error"]["cap"].as_str().unwrap_or("");
    let mut out = String::from(
        "<h2>Caps used</h2>\n<div class=\"scroll\"><table>\n<thead><tr><th>Cap</th><th>Used</th><th>Limit</th><th>Share</th></tr></thead>\n<tbody>\n",
    );
    for c in caps {
        let cap = c["cap"].as_str().unwrap_or("");
        let used = c["used"].as_u64().unwrap_or(0);
        let limit = c["limit"].as_u64().unwrap_or(0);
        let share = if limit == 0 {
            0.0
        } else {
            (used as f64 / limit as f64).min(1.0)
        };
        let label = match cap {
            "sdk_calls" => "SDK calls",
            "wall_clock" => "wall clock",
            "buffered_writes" => "writes",
            other => other,
        };
        let mark = if cap == reached {
            " <span class=\"tag bad\">reached</span>"
        } else {
            ""
        };
        out.push_str(&format!(
            "<tr><td>{}{mark}</td><td>{}</td><td>{}</td><td><meter min=\"0\" max=\"1\" value=\"{share:.4}\"></meter> {:.1}%</td></tr>\n",
            esc(label),
            amount(cap, used),
            amount(cap, limit),
            share * 100.0,
        ));
    }
    out.push_str("</tbody></table></div>\n<p class=\"muted\">Memory is the most the server's scripts held at one of this run's checks (runs on one thread share it).</p>\n");
    out
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
