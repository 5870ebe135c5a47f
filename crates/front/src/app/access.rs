//! The access page: who can reach the org. Everyone signed in sees its members (people and
//! agents, with their roles); admins also see its API tokens and the OAuth grants (applications
//! members allowed), and can revoke either: the token, or every token of the grant, stops
//! working at the next request on every instance (the engine renews the org's auth stamp in the
//! same write). Reads and revocations are the SDK's `members.list`, `tokens.list`,
//! `tokens.revoke`, `grants.list` and `grants.revoke`, as the signed-in person.

use std::collections::HashMap;

use http::Response;
use maud::{Markup, html};
use serde_json::{Value, json};

use super::context::App;
use super::view::{self, alert, forbidden, when, when_ms};
use crate::web::form::Params;
use crate::web::page;

/// `GET /app/{org}/access`.
pub async fn page(app: &App<'_>) -> Response<Vec<u8>> {
    let revoked = app.query().one("revoked").ok().flatten().map(|what| {
        if what.starts_with("grt_") {
            "That application's access is revoked: its tokens no longer work."
        } else {
            "That token is revoked: it no longer works."
        }
    });
    let members = match app.call("members.list", json!({})).await {
        Ok(v) => v.as_array().cloned().unwrap_or_default(),
        Err(e) => return view::page(app, "access", "Access", alert(&e)),
    };
    let names: HashMap<&str, &str> = members
        .iter()
        .filter_map(|m| Some((m["principal_id"].as_str()?, m["name"].as_str()?)))
        .collect();
    let admin = if app.is_admin() {
        Some((
            tokens_table(app, &names).await,
            grants_table(app, &names).await,
        ))
    } else {
        None
    };
    let body = html! {
        @if let Some(what) = revoked { p.notice role="status" { (what) } }
        (members_table(&members))
        @if let Some((tokens, grants)) = admin {
            (tokens) (grants)
        } @else {
            p.muted {
                "You are a " (app.caller.role().as_str())
                " of this org; its admins also see and revoke its API tokens and the applications its members allowed."
            }
        }
        (your_sessions(app))
    };
    view::page(app, "access", "Access", body)
}

/// The signed-in person's own browser sessions: a form that ends all of them.
fn your_sessions(app: &App<'_>) -> Markup {
    html! {
        h2 { "Your browser sessions" }
        section.card {
            p {
                "Signed in " (when_ms(Some(app.session.record.created_at_ms)))
                ". Signing out everywhere ends this session and every other browser's you signed in with (a password change does the same); agents' tokens are not affected."
            }
            form method="post" action="/oauth/signout" {
                (page::hidden("csrf", &app.session.record.csrf))
                (page::hidden("everywhere", "1"))
                button.secondary type="submit" { "Sign out everywhere" }
            }
        }
    }
}

fn members_table(members: &[Value]) -> Markup {
    html! {
        h2 { "Members" }
        p.muted { (members.len()) " people and agents." }
        div.scroll { table {
            thead { tr { th { "Name" } th { "Kind" } th { "Role" } th { "Joined" } } }
            tbody {
                @for m in members {
                    @let s = |k: &str| m[k].as_str().unwrap_or("");
                    tr {
                        td { (s("name")) code.muted.id { (s("principal_id")) } }
                        td { (s("kind")) } td { (s("role")) }
                        td.when { (when(s("joined_at"))) }
                    }
                }
            }
        } }
    }
}

/// The name of `principal` if it is a member, else its id.
fn who<'a>(names: &HashMap<&str, &'a str>, principal: &'a str) -> &'a str {
    names.get(principal).copied().unwrap_or(principal)
}

fn revoke_form(app: &App<'_>, field: &str, id: &str, what: &str) -> Markup {
    html! {
        form method="post" action={ "/app/" (app.org()) "/access/revoke" } {
            (page::hidden("csrf", &app.session.record.csrf))
            (page::hidden(field, id))
            button.danger type="submit" aria-label={ "Revoke " (what) } { "Revoke" }
        }
    }
}

async fn tokens_table(app: &App<'_>, names: &HashMap<&str, &str>) -> Markup {
    let tokens = match app.call("tokens.list", json!({})).await {
        Ok(v) => v.as_array().cloned().unwrap_or_default(),
        Err(e) => return html! { h2 { "API tokens" } (alert(&e)) },
    };
    let now = app.lore().ports().clock.now_ms();
    html! {
        h2 { "API tokens" }
        div.scroll { table {
            thead { tr {
                th { "Token" } th { "For" } th { "Scopes" } th { "Created" } th { "Expires" } th { "State" } th {}
            } }
            tbody {
                @for t in tokens.iter().rev() {
                    @let id = t["id"].as_str().unwrap_or("");
                    @let label = t["label"].as_str().unwrap_or("");
                    @let expires = t["expires_at_ms"].as_i64();
                    @let state = if t["revoked"].as_bool() == Some(true) {
                        "revoked"
                    } else if expires.is_some_and(|e| e <= now) {
                        "expired"
                    } else {
                        "active"
                    };
                    tr id=(id) {
                        td { (label) code.muted.id { (id) } }
                        td { (who(names, t["principal"].as_str().unwrap_or(""))) }
                        td { (t["scopes"].as_str().unwrap_or("")) }
                        td.when { (when_ms(t["created_at_ms"].as_i64())) }
                        td.when { (expires.map_or_else(|| "never".to_string(), |e| when_ms(Some(e)))) }
                        td { (state) }
                        td {
                            @if state == "active" {
                                (revoke_form(app, "token", id, if label.is_empty() { id } else { label }))
                            }
                        }
                    }
                }
                @if tokens.is_empty() {
                    tr { td.muted colspan="7" { "No API tokens." } }
                }
            }
        } }
    }
}

async fn grants_table(app: &App<'_>, names: &HashMap<&str, &str>) -> Markup {
    let grants = match app.call("grants.list", json!({})).await {
        Ok(v) => v.as_array().cloned().unwrap_or_default(),
        Err(e) => return html! { h2 { "Applications" } (alert(&e)) },
    };
    html! {
        h2 { "Applications" }
        p.muted { "MCP clients members allowed through OAuth; revoking one ends all its tokens." }
        div.scroll { table {
            thead { tr {
                th { "Application" } th { "Allowed by" } th { "Scopes" } th { "Allowed" } th { "Last refreshed" } th { "State" } th {}
            } }
            tbody {
                @for g in &grants {
                    @let s = |k: &str| g[k].as_str().unwrap_or("");
                    @let live = g["revoked_at"].is_null();
                    tr id=(s("id")) {
                        td { (s("client_name")) code.muted.id { (s("id")) } }
                        td { (who(names, s("principal_id"))) }
                        td { (s("scopes")) }
                        td.when { (when(s("created_at"))) }
                        td.when { (g["refreshed_at"].as_str().map_or_else(|| "never".to_string(), when)) }
                        td { @if live { "active" } @else { "revoked " (when(s("revoked_at"))) } }
                        td { @if live { (revoke_form(app, "grant", s("id"), s("client_name"))) } }
                    }
                }
                @if grants.is_empty() {
                    tr { td.muted colspan="7" { "No application has been allowed." } }
                }
            }
        } }
    }
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
            page::see_other(&format!("/app/{}/access?revoked={back}", app.org()), None)
        }
        Err(e) => {
            let mut r = view::page(app, "access", "Access", alert(&e));
            *r.status_mut() = http::StatusCode::from_u16(e.http_status())
                .unwrap_or(http::StatusCode::BAD_REQUEST);
            r
        }
    }
}
