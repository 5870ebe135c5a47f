//! The memory pages: the timeline and search (`memory.list`, `memory.search`) under the search's
//! filters; one memory with every version of it (`memory.versions`); and a correction, saved as
//! a new version that supersedes the current one (`memory.save`), recorded as the person who
//! made it. Nothing here deletes a memory.

use std::collections::HashMap;

use http::Response;
use serde_json::{Value, json};

use super::context::App;
use super::view::{self, alert, forbidden, not_found, when, who};
use crate::oauth::form::Params;
use crate::oauth::pages::{self, esc};
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
    let mut body = filters_form(app, &names, &f);
    match answer {
        Ok(v) => {
            let items = v[if searching { "results" } else { "items" }]
                .as_array()
                .cloned()
                .unwrap_or_default();
            body.push_str(&format!(
                "<p class=\"muted\" role=\"status\">{}</p>\n",
                match (searching, items.len()) {
                    (true, 0) => "No memory matches this search.".to_string(),
                    (true, n) => format!("{n} memories, best match first."),
                    (false, 0) => "No memories here yet.".to_string(),
                    (false, n) => format!("{n} memories, newest first."),
                }
            ));
            body.push_str("<ol class=\"memories\">\n");
            for m in &items {
                body.push_str(&memory_item(app, &names, m, None));
            }
            body.push_str("</ol>\n");
            body.push_str(&view::pager(
                |c| f.with_cursor(c),
                !f.cursor.is_empty(),
                v["next_cursor"].as_str(),
                "Older memories",
            ));
        }
        Err(e) => body.push_str(&alert(&e)),
    }
    view::page(app, "memory", "Memory", &body)
}

fn filters_form(app: &App<'_>, names: &HashMap<String, String>, f: &Filters) -> String {
    let mut people: Vec<(&String, &String)> = names.iter().collect();
    people.sort_by(|a, b| a.1.cmp(b.1).then(a.0.cmp(b.0)));
    let mut authors: String = people
        .iter()
        .map(|(id, name)| {
            let on = if **id == f.author { " selected" } else { "" };
            format!("<option value=\"{}\"{on}>{}</option>", esc(id), esc(name))
        })
        .collect();
    if !f.author.is_empty() && !names.contains_key(&f.author) {
        // Someone no longer a member (or an id typed into the address).
        authors.push_str(&format!(
            "<option value=\"{0}\" selected>{0}</option>",
            esc(&f.author)
        ));
    }
    // The built-in kinds are offered; any other kind can be typed.
    let kinds: String = MEMORY_KINDS
        .iter()
        .map(|k| format!("<option value=\"{k}\">"))
        .collect();
    format!(
        "<form class=\"filters\" method=\"get\" action=\"/app/{org}/memory\" role=\"search\">\n\
<div class=\"q\"><label for=\"q\">Search</label><input id=\"q\" name=\"q\" type=\"search\" value=\"{q}\" placeholder=\"Ask in your own words\"></div>\n\
<div><label for=\"kind\">Kind</label><input id=\"kind\" name=\"kind\" list=\"kinds\" value=\"{kind}\"><datalist id=\"kinds\">{kinds}</datalist></div>\n\
<div><label for=\"author\">Author</label><select id=\"author\" name=\"author\"><option value=\"\">Anyone</option>{authors}</select></div>\n\
<div><label for=\"entity\">Entity id</label><input id=\"entity\" name=\"entity\" value=\"{entity}\"></div>\n\
<div><label for=\"since\">About, from</label><input id=\"since\" name=\"since\" type=\"date\" value=\"{since}\"></div>\n\
<div><label for=\"until\">About, until</label><input id=\"until\" name=\"until\" type=\"date\" value=\"{until}\"></div>\n\
<div><label class=\"check\"><input type=\"checkbox\" name=\"superseded\" value=\"1\"{checked}> Show replaced versions</label></div>\n\
<div><button type=\"submit\" class=\"primary\">Show</button></div>\n</form>\n",
        org = esc(app.org()),
        q = esc(&f.q),
        kind = esc(&f.kind),
        entity = esc(&f.entity),
        since = esc(&f.since),
        until = esc(&f.until),
        checked = if f.superseded { " checked" } else { "" },
    )
}

/// One memory in a list: its text, kind, author, times and links to its versions.
fn memory_item(
    app: &App<'_>,
    names: &HashMap<String, String>,
    m: &Value,
    marked: Option<&str>,
) -> String {
    let text = |k: &str| m[k].as_str().unwrap_or("");
    let org = esc(app.org());
    let id = text("id");
    let replaced = m["superseded_by"].as_str();
    let mut classes = Vec::new();
    if replaced.is_some() {
        classes.push("old");
    }
    if marked == Some(id) {
        classes.push("current");
    }
    let mut meta = format!(
        "<span class=\"tag\">{}</span><span>by {}</span><span>saved {}</span>",
        esc(text("kind")),
        who(names, text("author")),
        esc(&when(text("created_at")))
    );
    if let Some(at) = m["occurred_at"].as_str() {
        meta.push_str(&format!("<span>about {}</span>", esc(&when(at))));
    }
    if let Some(ids) = m["entity_ids"].as_array().filter(|a| !a.is_empty()) {
        let ids: Vec<String> = ids
            .iter()
            .filter_map(Value::as_str)
            .map(|e| format!("<code>{}</code>", esc(e)))
            .collect();
        meta.push_str(&format!("<span>about {}</span>", ids.join(", ")));
    }
    if let Some(newer) = replaced {
        meta.push_str(&format!(
            "<span>replaced by <a href=\"/app/{org}/memory/{0}\">{0}</a></span>",
            esc(newer)
        ));
    }
    if let Some(older) = m["supersedes_event_id"].as_str() {
        meta.push_str(&format!(
            "<span>replaces <a href=\"/app/{org}/memory/{0}\">{0}</a></span>",
            esc(older)
        ));
    }
    if marked.is_none() {
        meta.push_str(&format!(
            "<a href=\"/app/{org}/memory/{0}\" aria-label=\"Versions of {0}\">versions</a>",
            esc(id)
        ));
    }
    format!(
        "<li class=\"{}\" id=\"{}\"><p class=\"memory-text\">{}</p><p class=\"meta\">{meta}</p></li>\n",
        classes.join(" "),
        esc(id),
        esc(text("content"))
    )
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
        Err(e) => return view::page(app, "memory", "Memory", &alert(&e)),
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
    let mut body = String::new();
    if let Some(n) = notice {
        body.push_str(&format!(
            "<p class=\"notice\" role=\"status\">{}</p>\n",
            esc(n)
        ));
    }
    if let Some(e) = error {
        body.push_str(&alert(e));
    }
    body.push_str(&format!(
        "<p><a href=\"/app/{}/memory\">All memories</a></p>\n<h2>Versions, oldest first</h2>\n<ol class=\"memories\">\n",
        esc(app.org())
    ));
    // At most SHOWN_VERSIONS around the one asked for; the text of the others than it and the
    // current one cut to CUT_TEXT characters (each links to its own page, where it is whole).
    let current_id = current["id"].as_str().unwrap_or("").to_string();
    let at = versions.iter().position(|v| v["id"] == id).unwrap_or(0);
    let start = at
        .saturating_sub(SHOWN_VERSIONS / 2)
        .min(versions.len().saturating_sub(SHOWN_VERSIONS));
    let end = (start + SHOWN_VERSIONS).min(versions.len());
    if start > 0 {
        body.push_str(&format!(
            "<p class=\"muted\">{start} older versions are not shown; follow “replaces” to reach them.</p>\n"
        ));
    }
    for v in &versions[start..end] {
        let vid = v["id"].as_str().unwrap_or("");
        let mut v = v.clone();
        let cut = v["content"]
            .as_str()
            .filter(|t| vid != id && vid != current_id && t.chars().count() > CUT_TEXT)
            .map(|t| format!("{}…", t.chars().take(CUT_TEXT).collect::<String>()));
        if let Some(cut) = cut {
            v["content"] = json!(cut);
        }
        body.push_str(&memory_item(app, &names, &v, Some(id)));
    }
    body.push_str("</ol>\n");
    if end < versions.len() {
        body.push_str(&format!(
            "<p class=\"muted\">{} newer versions are not shown; follow “replaced by” to reach them.</p>\n",
            versions.len() - end
        ));
    }
    if app.can_write() {
        let (content, kind) = draft.unwrap_or((
            current["content"].as_str().unwrap_or(""),
            current["kind"].as_str().unwrap_or(""),
        ));
        body.push_str(&format!(
            "<h2>Correct it</h2>\n<form method=\"post\" action=\"/app/{org}/memory/{cur}\" class=\"card\">\n\
<input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\n\
<label for=\"content\">The memory as it should read</label>\n<textarea id=\"content\" name=\"content\" required maxlength=\"20000\">{content}</textarea>\n\
<label for=\"kind\">Kind</label><input id=\"kind\" name=\"kind\" type=\"text\" value=\"{kind}\">\n\
<p class=\"muted\">Saved as a new version by {user}, replacing the current one; no version is deleted.</p>\n\
<div class=\"actions\"><button type=\"submit\" class=\"primary\">Save correction</button></div>\n</form>\n",
            org = esc(app.org()),
            cur = esc(&current_id),
            csrf = esc(&app.session.record.csrf),
            content = esc(content),
            kind = esc(kind),
            user = esc(&app.user),
        ));
    } else {
        body.push_str(&format!(
            "<p class=\"muted\">You are a {} of this org: you can read its memory, not change it.</p>\n",
            esc(app.caller.role().as_str())
        ));
    }
    view::page(app, "memory", "A memory and its versions", &body)
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
        Err(e) => return view::page(app, "memory", "Memory", &alert(&e)),
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
            pages::see_other(&format!("/app/{}/memory/{}?saved=1", app.org(), new), None)
        }
        Err(e) => {
            let mut r = versions_page(app, id, None, Some(&e), Some((content, kind))).await;
            *r.status_mut() = http::StatusCode::from_u16(e.http_status())
                .unwrap_or(http::StatusCode::BAD_REQUEST);
            r
        }
    }
}
