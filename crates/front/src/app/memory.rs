//! The memory pages: the timeline and search (`memory.list`, `memory.search`) under the search's
//! filters; one memory with every version of it (`memory.versions`); and a correction, saved as
//! a new version that supersedes the current one (`memory.save`), recorded as the person who
//! made it. Nothing here deletes a memory.

use std::collections::HashMap;

use http::Response;
use maud::{Markup, html};
use serde_json::{Value, json};

use super::context::App;
use super::view::{self, alert, forbidden, not_found, when, who};
use crate::web::form::Params;
use crate::web::page;
use lore_base::error::LoreError;
use lore_memory::event::MEMORY_KINDS;

/// Memories per page of the timeline.
const PAGE: usize = 50;
/// Search results shown, best first.
const SEARCH_PAGE: usize = 20;
/// Versions shown on a memory's page, around the one asked for.
const SHOWN_VERSIONS: usize = 50;
/// Characters shown of a version that is neither the one asked for nor the current one.
const CUT_TEXT: usize = 2_000;

/// The filters of the memory page, as the query string gives them.
struct Filters {
    q: String,
    kind: String,
    author: String,
    entity: String,
    since: String,
    until: String,
    superseded: bool,
    cursor: String,
}

impl Filters {
    fn of(params: &Params) -> Self {
        let get = |name: &str| {
            params
                .one(name)
                .ok()
                .flatten()
                .unwrap_or("")
                .trim()
                .chars()
                .take(2_000)
                .collect::<String>()
        };
        Self {
            q: get("q"),
            kind: get("kind"),
            author: get("author"),
            entity: get("entity"),
            since: get("since"),
            until: get("until"),
            superseded: !get("superseded").is_empty(),
            cursor: get("cursor"),
        }
    }

    /// The SDK arguments both `memory.list` and `memory.search` take.
    fn args(&self) -> Value {
        let mut args = json!({ "limit": PAGE, "include_superseded": self.superseded });
        let set = |args: &mut Value, key: &str, value: &str, v: Value| {
            if !value.is_empty() {
                args[key] = v;
            }
        };
        set(&mut args, "kinds", &self.kind, json!([self.kind]));
        set(&mut args, "author", &self.author, json!(self.author));
        set(&mut args, "entity_ids", &self.entity, json!([self.entity]));
        set(&mut args, "since", &self.since, json!(self.since));
        set(&mut args, "until", &self.until, json!(self.until));
        args
    }

    /// This page's query string with `cursor` replaced.
    fn with_cursor(&self, cursor: Option<&str>) -> String {
        let mut out = url::form_urlencoded::Serializer::new(String::new());
        for (k, v) in [
            ("q", &self.q),
            ("kind", &self.kind),
            ("author", &self.author),
            ("entity", &self.entity),
            ("since", &self.since),
            ("until", &self.until),
        ] {
            if !v.is_empty() {
                out.append_pair(k, v);
            }
        }
        if self.superseded {
            out.append_pair("superseded", "1");
        }
        if let Some(c) = cursor {
            out.append_pair("cursor", c);
        }
        out.finish()
    }
}

/// `GET /app/{org}/memory`: search when there is a query, else the timeline, newest first.
pub async fn list(app: &App<'_>) -> Response<Vec<u8>> {
    let f = Filters::of(&app.query());
    let mut args = f.args();
    let (answer, searching) = if f.q.is_empty() {
        if !f.cursor.is_empty() {
            args["cursor"] = json!(f.cursor);
        }
        (app.call("memory.list", args).await, false)
    } else {
        args["query"] = json!(f.q);
        args["limit"] = json!(SEARCH_PAGE);
        (app.call("memory.search", args).await, true)
    };
    let names = app.names().await;
    let body = html! {
        (filters_form(app, &names, &f))
        @match answer {
            Ok(v) => {
                @let items = v[if searching { "results" } else { "items" }]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                p.muted role="status" {
                    (match (searching, items.len()) {
                        (true, 0) => "No memory matches this search.".to_string(),
                        (true, n) => format!("{n} memories, best match first."),
                        (false, 0) => "No memories here yet.".to_string(),
                        (false, n) => format!("{n} memories, newest first."),
                    })
                }
                ol.memories {
                    @for m in &items { (memory_item(app, &names, m, None)) }
                }
                (view::pager(
                    |c| f.with_cursor(c),
                    !f.cursor.is_empty(),
                    v["next_cursor"].as_str(),
                    "Older memories",
                ))
            }
            Err(e) => (alert(&e)),
        }
    };
    view::page(app, "memory", "Memory", body)
}

fn filters_form(app: &App<'_>, names: &HashMap<String, String>, f: &Filters) -> Markup {
    let mut people: Vec<(&String, &String)> = names.iter().collect();
    people.sort_by(|a, b| a.1.cmp(b.1).then(a.0.cmp(b.0)));
    html! {
        form.filters method="get" action={ "/app/" (app.org()) "/memory" } role="search" {
            div.q {
                label for="q" { "Search" }
                input #q name="q" type="search" value=(f.q) placeholder="Ask in your own words";
            }
            div {
                label for="kind" { "Kind" }
                input #kind name="kind" list="kinds" value=(f.kind);
                // The built-in kinds are offered; any other kind can be typed.
                datalist #kinds { @for k in MEMORY_KINDS { option value=(k); } }
            }
            div {
                label for="author" { "Author" }
                select #author name="author" {
                    option value="" { "Anyone" }
                    @for (id, name) in &people {
                        option value=(id) selected[**id == f.author] { (name) }
                    }
                    @if !f.author.is_empty() && !names.contains_key(&f.author) {
                        // Someone no longer a member (or an id typed into the address).
                        option value=(f.author) selected { (f.author) }
                    }
                }
            }
            div { label for="entity" { "Entity id" } input #entity name="entity" value=(f.entity); }
            div { label for="since" { "About, from" } input #since name="since" type="date" value=(f.since); }
            div { label for="until" { "About, until" } input #until name="until" type="date" value=(f.until); }
            div {
                label.check {
                    input type="checkbox" name="superseded" value="1" checked[f.superseded];
                    " Show replaced versions"
                }
            }
            div { button.primary type="submit" { "Show" } }
        }
    }
}

/// One memory in a list: its text, kind, author, times and links to its versions.
fn memory_item(
    app: &App<'_>,
    names: &HashMap<String, String>,
    m: &Value,
    marked: Option<&str>,
) -> Markup {
    let text = |k: &str| m[k].as_str().unwrap_or("");
    let org = app.org();
    let id = text("id");
    let replaced = m["superseded_by"].as_str();
    let mut classes = Vec::new();
    if replaced.is_some() {
        classes.push("old");
    }
    if marked == Some(id) {
        classes.push("current");
    }
    let entities: Vec<&str> = m["entity_ids"]
        .as_array()
        .map(|ids| ids.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    html! {
        li class=(classes.join(" ")) id=(id) {
            p.memory-text { (text("content")) }
            p.meta {
                span.tag { (text("kind")) }
                span { "by " (who(names, text("author"))) }
                span { "saved " (when(text("created_at"))) }
                @if let Some(at) = m["occurred_at"].as_str() { span { "about " (when(at)) } }
                @if !entities.is_empty() {
                    span {
                        "about "
                        @for (i, e) in entities.iter().enumerate() {
                            @if i > 0 { ", " }
                            code { (e) }
                        }
                    }
                }
                @if let Some(newer) = replaced {
                    span { "replaced by " a href={ "/app/" (org) "/memory/" (newer) } { (newer) } }
                }
                @if let Some(older) = m["supersedes_event_id"].as_str() {
                    span { "replaces " a href={ "/app/" (org) "/memory/" (older) } { (older) } }
                }
                @if marked.is_none() {
                    a href={ "/app/" (org) "/memory/" (id) } aria-label={ "Versions of " (id) } { "versions" }
                }
            }
        }
    }
}

/// `GET /app/{org}/memory/{id}`: the memory's versions, and the correction form.
pub async fn one(app: &App<'_>, id: &str) -> Response<Vec<u8>> {
    let saved = app.query().one("saved").ok().flatten().is_some();
    versions_page(app, id, saved.then_some("Saved: your correction is the current version now; the earlier text stays below in the history."), None, None).await
}

async fn versions_page(
    app: &App<'_>,
    id: &str,
    notice: Option<&str>,
    error: Option<&LoreError>,
    draft: Option<(&str, &str)>,
) -> Response<Vec<u8>> {
    let versions = match app.call("memory.versions", json!({ "id": id })).await {
        Ok(v) => v["versions"].as_array().cloned().unwrap_or_default(),
        Err(LoreError::NotFound { .. } | LoreError::InvalidArgument { .. }) => return not_found(),
        Err(e) => return view::page(app, "memory", "Memory", alert(&e)),
    };
    let Some(current) = versions
        .iter()
        .rev()
        .find(|v| v["superseded_by"].is_null())
        .or(versions.last())
    else {
        return not_found();
    };
    let names = app.names().await;
    // At most SHOWN_VERSIONS around the one asked for; the text of the others than it and the
    // current one cut to CUT_TEXT characters (each links to its own page, where it is whole).
    let current_id = current["id"].as_str().unwrap_or("").to_string();
    let at = versions.iter().position(|v| v["id"] == id).unwrap_or(0);
    let start = at
        .saturating_sub(SHOWN_VERSIONS / 2)
        .min(versions.len().saturating_sub(SHOWN_VERSIONS));
    let end = (start + SHOWN_VERSIONS).min(versions.len());
    let shown: Vec<Value> = versions[start..end]
        .iter()
        .map(|v| {
            let vid = v["id"].as_str().unwrap_or("");
            let mut v = v.clone();
            let cut = v["content"]
                .as_str()
                .filter(|t| vid != id && vid != current_id && t.chars().count() > CUT_TEXT)
                .map(|t| format!("{}…", t.chars().take(CUT_TEXT).collect::<String>()));
            if let Some(cut) = cut {
                v["content"] = json!(cut);
            }
            v
        })
        .collect();
    let (content, kind) = draft.unwrap_or((
        current["content"].as_str().unwrap_or(""),
        current["kind"].as_str().unwrap_or(""),
    ));
    let org = app.org();
    let body = html! {
        @if let Some(n) = notice { p.notice role="status" { (n) } }
        @if let Some(e) = error { (alert(e)) }
        p { a href={ "/app/" (org) "/memory" } { "All memories" } }
        h2 { "Versions, oldest first" }
        @if start > 0 {
            p.muted { (start) " older versions are not shown; follow “replaces” to reach them." }
        }
        ol.memories {
            @for v in &shown { (memory_item(app, &names, v, Some(id))) }
        }
        @if end < versions.len() {
            p.muted { (versions.len() - end) " newer versions are not shown; follow “replaced by” to reach them." }
        }
        @if app.can_write() {
            h2 { "Correct it" }
            form.card method="post" action={ "/app/" (org) "/memory/" (current_id) } {
                (page::hidden("csrf", &app.session.record.csrf))
                label for="content" { "The memory as it should read" }
                textarea #content name="content" required maxlength="20000" { (content) }
                label for="kind" { "Kind" }
                input #kind name="kind" type="text" value=(kind);
                p.muted { "Saved as a new version by " (app.user) ", replacing the current one; no version is deleted." }
                div.actions { button.primary type="submit" { "Save correction" } }
            }
        } @else {
            p.muted { "You are a " (app.caller.role().as_str()) " of this org: you can read its memory, not change it." }
        }
    };
    view::page(app, "memory", "A memory and its versions", body)
}

/// `POST /app/{org}/memory/{id}`: saves a correction that supersedes memory `id`.
pub async fn supersede(app: &App<'_>, id: &str, form: &Params) -> Response<Vec<u8>> {
    if !app.can_write() {
        return forbidden(
            app,
            "memory",
            "Viewers can read the org's memory but not change it.",
        );
    }
    let content = form.one("content").ok().flatten().unwrap_or("").trim();
    let kind = form.one("kind").ok().flatten().unwrap_or("").trim();
    let old = match app.call("memory.get", json!({ "id": id })).await {
        Ok(v) => v,
        Err(LoreError::NotFound { .. } | LoreError::InvalidArgument { .. }) => return not_found(),
        Err(e) => return view::page(app, "memory", "Memory", alert(&e)),
    };
    let mut memory = json!({
        "content": content,
        "entity_ids": old["entity_ids"],
        "supersedes_event_id": id,
    });
    if !kind.is_empty() {
        memory["kind"] = json!(kind);
    }
    match app.call("memory.save", memory).await {
        Ok(v) => {
            let new = v["ids"][0].as_str().unwrap_or(id);
            page::see_other(&format!("/app/{}/memory/{}?saved=1", app.org(), new), None)
        }
        Err(e) => {
            let mut r = versions_page(app, id, None, Some(&e), Some((content, kind))).await;
            *r.status_mut() = http::StatusCode::from_u16(e.http_status())
                .unwrap_or(http::StatusCode::BAD_REQUEST);
            r
        }
    }
}
