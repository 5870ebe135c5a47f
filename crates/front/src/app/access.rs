//! The access page: who can reach the org. Everyone signed in sees its members (people and
//! agents, with their roles); admins also see its API tokens and the OAuth grants (applications
//! members allowed), and can revoke either: the token, or every token of the grant, stops
//! working at the next request on every instance (the engine renews the org's auth stamp in the
//! same write). Reads and revocations are the SDK's `members.list`, `tokens.list`,
//! `tokens.revoke`, `grants.list` and `grants.revoke`, as the signed-in person.

use std::collections::HashMap;

use http::Response;
use serde_json::{Value, json};

use super::context::App;
use super::view::{self, alert, forbidden, when, when_ms};
use crate::oauth::form::Params;
use crate::oauth::pages::{self, esc};

/// `GET /app/{org}/access`.
pub async fn page(app: &App<'_>) -> Response<Vec<u8>> {
    let mut body = String::new();
    if let Some(what) = app.query().one("revoked").ok().flatten() {
        let what = if what.starts_with("grt_") {
            "That application's access is revoked: its tokens no longer work."
        } else {
            "That token is revoked: it no longer works."
        };
        body.push_str(&format!("<p class=\"notice\" role=\"status\">{what}</p>\n"));
    }
    let members = match app.call("members.list", json!({})).await {
        Ok(v) => v.as_array().cloned().unwrap_or_default(),
        Err(e) => return view::page(app, "access", "Access", &alert(&e)),
    };
    let names: HashMap<&str, &str> = members
        .iter()
        .filter_map(|m| Some((m["principal_id"].as_str()?, m["name"].as_str()?)))
        .collect();
    body.push_str(&members_table(&members));
    if app.is_admin() {
        body.push_str(&tokens_table(app, &names).await);
        body.push_str(&grants_table(app, &names).await);
    } else {
        body.push_str(&format!(
            "<p class=\"muted\">You are a {} of this org; its admins also see and revoke its API tokens and the applications its members allowed.</p>\n",
            esc(app.caller.role().as_str())
        ));
    }
    body.push_str(&your_sessions(app));
    view::page(app, "access", "Access", &body)
}

/// The signed-in person's own browser sessions: a form that ends all of them.
fn your_sessions(app: &App<'_>) -> String {
    format!(
        "<h2>Your browser sessions</h2>\n<section class=\"card\"><p>Signed in {since}. Signing out everywhere ends this session and every other browser's you signed in with (a password change does the same); agents' tokens are not affected.</p>\n\
<form method=\"post\" action=\"/oauth/signout\"><input type=\"hidden\" name=\"csrf\" value=\"{csrf}\"><input type=\"hidden\" name=\"everywhere\" value=\"1\">\
<button type=\"submit\" class=\"secondary\">Sign out everywhere</button></form></section>\n",
        since = esc(&when_ms(Some(app.session.record.created_at_ms))),
        csrf = esc(&app.session.record.csrf),
    )
}

fn members_table(members: &[Value]) -> String {
    let mut out = format!(
        "<h2>Members</h2>\n<p class=\"muted\">{} people and agents.</p>\n<div class=\"scroll\"><table>\n<thead><tr><th>Name</th><th>Kind</th><th>Role</th><th>Joined</th></tr></thead>\n<tbody>\n",
        members.len()
    );
    for m in members {
        let s = |k: &str| esc(m[k].as_str().unwrap_or(""));
        out.push_str(&format!(
            "<tr><td>{}<code class=\"muted id\">{}</code></td><td>{}</td><td>{}</td><td class=\"when\">{}</td></tr>\n",
            s("name"),
            s("principal_id"),
            s("kind"),
            s("role"),
            esc(&when(m["joined_at"].as_str().unwrap_or(""))),
        ));
    }
    out.push_str("</tbody></table></div>\n");
    out
}

/// The name of `principal` if it is a member, else its id.
fn who<'a>(names: &HashMap<&str, &'a str>, principal: &'a str) -> &'a str {
    names.get(principal).copied().unwrap_or(principal)
}

fn revoke_form(app: &App<'_>, field: &str, id: &str, what: &str) -> String {
    format!(
        "<form method=\"post\" action=\"/app/{org}/access/revoke\"><input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
<input type=\"hidden\" name=\"{field}\" value=\"{id}\"><button type=\"submit\" class=\"danger\" aria-label=\"Revoke {what}\">Revoke</button></form>",
        org = esc(app.org()),
        csrf = esc(&app.session.record.csrf),
        id = esc(id),
        what = esc(what),
    )
}

async fn tokens_table(app: &App<'_>, names: &HashMap<&str, &str>) -> String {
    let tokens = match app.call("tokens.list", json!({})).await {
        Ok(v) => v.as_array().cloned().unwrap_or_default(),
        Err(e) => return format!("<h2>API tokens</h2>\n{}", alert(&e)),
    };
    let now = app.lore().ports().clock.now_ms();
    let mut out = String::from(
        "<h2>API tokens</h2>\n<div class=\"scroll\"><table>\n<thead><tr><th>Token</th><th>For</th><th>Scopes</th><th>Created</th><th>Expires</th><th>State</th><th></th></tr></thead>\n<tbody>\n",
    );
    let mut shown = 0;
    for t in tokens.iter().rev() {
        let id = t["id"].as_str().unwrap_or("");
        let label = t["label"].as_str().unwrap_or("");
        let expires = t["expires_at_ms"].as_i64();
        let state = if t["revoked"].as_bool() == Some(true) {
            "revoked"
        } else if expires.is_some_and(|e| e <= now) {
            "expired"
        } else {
            "active"
        };
        let action = if state == "active" {
            revoke_form(app, "token", id, if label.is_empty() { id } else { label })
        } else {
            String::new()
        };
        out.push_str(&format!(
            "<tr id=\"{id}\"><td>{label}<code class=\"muted id\">{id}</code></td><td>{who}</td><td>{scopes}</td><td class=\"when\">{created}</td><td class=\"when\">{expires}</td><td>{state}</td><td>{action}</td></tr>\n",
            id = esc(id),
            label = esc(label),
            who = esc(who(names, t["principal"].as_str().unwrap_or(""))),
            scopes = esc(t["scopes"].as_str().unwrap_or("")),
            created = esc(&when_ms(t["created_at_ms"].as_i64())),
            expires = expires.map_or_else(|| "never".to_string(), |e| esc(&when_ms(Some(e)))),
        ));
        shown += 1;
    }
    if shown == 0 {
        out.push_str("<tr><td colspan=\"7\" class=\"muted\">No API tokens.</td></tr>\n");
    }
    out.push_str("</tbody></table></div>\n");
    out
}

async fn grants_table(app: &App<'_>, names: &HashMap<&str, &str>) -> String {
    let grants = match app.call("grants.list", json!({})).await {
        Ok(v) => v.as_array().cloned().unwrap_or_default(),
        Err(e) => return format!("<h2>Applications</h2>\n{}", alert(&e)),
    };
    let mut out = String::from(
        "<h2>Applications</h2>\n<p class=\"muted\">MCP clients members allowed through OAuth; revoking one ends all its tokens.</p>\n<div class=\"scroll\"><table>\n<thead><tr><th>Application</th><th>Allowed by</th><th>Scopes</th><th>Allowed</th><th>Last refreshed</th><th>State</th><th></th></tr></thead>\n<tbody>\n",
    );
    for g in &grants {
        let s = |k: &str| g[k].as_str().unwrap_or("");
        let live = g["revoked_at"].is_null();
        let action = if live {
            revoke_form(app, "grant", s("id"), s("client_name"))
        } else {
            String::new()
        };
        out.push_str(&format!(
            "<tr id=\"{id}\"><td>{client}<code class=\"muted id\">{id}</code></td><td>{who}</td><td>{scopes}</td><td class=\"when\">{created}</td><td class=\"when\">{refreshed}</td><td>{state}</td><td>{action}</td></tr>\n",
            id = esc(s("id")),
            client = esc(s("client_name")),
            who = esc(who(names, s("principal_id"))),
            scopes = esc(s("scopes")),
            created = esc(&when(s("created_at"))),
            refreshed = g["refreshed_at"].as_str().map_or_else(|| "never".to_string(), |t| esc(&when(t))),
            state = if live { "active".to_string() } else { format!("revoked {}", esc(&when(s("revoked_at")))) },
        ));
    }
    if grants.is_empty() {
        out.push_str(
            "<tr><td colspan=\"7\" class=\"muted\">No application has been allowed.</td></tr>\n",
        );
    }
    out.push_str("</tbody></table></div>\n");
    out
}

/// `POST /app/{org}/access/revoke`: revokes the token (`token=tok_…`) or grant (`grant=grt_…`)
/// the form names.
pub async fn revoke(app: &App<'_>, form: &Params) -> Response<Vec<u8>> {
    if !app.is_admin() {
        return forbidden(
            app,
            "access",
            "Only the org's admins can revoke its tokens and applications.",
        );
    }
    let one = |name: &str| {
        form.one(name)
            .ok()
            .flatten()
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    let (method, id) = match (one("token"), one("grant")) {
        (Some(t), None) => ("tokens.revoke", t),
        (None, Some(g)) => ("grants.revoke", g),
        _ => {
            return view::page_error(
                400,
                "Nothing to revoke",
                "The form named neither one token nor one application.",
            );
        }
    };
    match app.call(method, json!({ "id": id })).await {
        Ok(_) => {
            let back: String = url::form_urlencoded::byte_serialize(id.as_bytes()).collect();
            pages::see_other(&format!("/app/{}/access?revoked={back}", app.org()), None)
        }
        Err(e) => {
            let mut r = view::page(app, "access", "Access", &alert(&e));
            *r.status_mut() = http::StatusCode::from_u16(e.http_status())
                .unwrap_or(http::StatusCode::BAD_REQUEST);
            r
        }
    }
}
