//! The records pages: the org's entity types with their schemas (`templates.list`), the
//! entities of a type, newest first and filtered by a property (`entities.list`), and one
//! entity with its properties, its relationships and a small graph of its neighbourhood
//! (`entities.get`, `relationships.list`), and the memories about it (`memory.list`). Every
//! list pages with the SDK's cursor, so a page reads what it shows, whatever the org's size.

use std::collections::BTreeMap;

use http::Response;
use maud::{Markup, html};
use serde_json::{Value, json};

use super::context::App;
use super::view::{self, alert, not_found, when, who};
use lore_base::error::LoreError;

/// Entities per page.
const PAGE: usize = 50;
/// Neighbours drawn in the graph; the rest are listed.
const DRAWN: usize = 16;
/// Relationships read for one entity.
const EDGES: usize = 200;
/// Neighbours whose names are read (one `entities.get_many`); the others show by id.
const MAX_NAMED: usize = 100;

/// A JSON value in one short line (strings without their quotes), at most `max` characters.
fn short(v: &Value, max: usize) -> String {
    let text = match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if text.chars().count() > max {
        let cut: String = text.chars().take(max).collect();
        format!("{cut}…")
    } else {
        text
    }
}

/// A schema property's type as the page shows it: its enum's values, its type or types.
fn kind_of(spec: &Value) -> String {
    match (&spec["type"], &spec["enum"]) {
        (_, Value::Array(e)) => e
            .iter()
            .map(|v| short(v, 40))
            .collect::<Vec<_>>()
            .join(" | "),
        (Value::String(k), _) => k.clone(),
        (Value::Array(k), _) => k
            .iter()
            .map(|v| short(v, 20))
            .collect::<Vec<_>>()
            .join(" | "),
        _ => "any".into(),
    }
}

/// `GET /app/{org}/records`: the entity types and their schemas, and the newest entities.
pub async fn types(app: &App<'_>) -> Response<Vec<u8>> {
    let org = app.org();
    let types = match app.call("templates.list", json!({})).await {
        Ok(v) => v.as_array().cloned().unwrap_or_default(),
        Err(e) => return view::page(app, "records", "Records", alert(&e)),
    };
    let newest = app
        .call("entities.list", json!({"newest_first": true, "limit": 20}))
        .await
        .map(|v| v["items"].as_array().cloned().unwrap_or_default());
    let body = html! {
        @if types.is_empty() {
            p.muted { "This org has no entity types yet; agents create them with " code { "templates.create" } "." }
        }
        h2 { "Entity types" }
        @for t in &types {
            @let s = |k: &str| t[k].as_str().unwrap_or("");
            @let required: Vec<&str> = t["schema"]["required"]
                .as_array()
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            @let props = t["schema"]["properties"].as_object().filter(|p| !p.is_empty());
            section.card {
                h3 { a href={ "/app/" (org) "/records/" (s("name")) } { (s("name")) } " " span.muted { (s("noun")) } }
                p { (s("description")) }
                @if let Some(props) = props {
                    div.scroll { table {
                        thead { tr { th { "Property" } th { "Type" } th {} th { "Description" } } }
                        tbody {
                            @for (name, spec) in props {
                                tr {
                                    td.name { code { (name) } }
                                    td { (kind_of(spec)) }
                                    td { @if required.contains(&name.as_str()) { "required" } }
                                    td { (spec["description"].as_str().unwrap_or("")) }
                                }
                            }
                        }
                    } }
                } @else {
                    p.muted { "No declared properties." }
                }
            }
        }
        @match &newest {
            Ok(items) if !items.is_empty() => {
                h2 { "Newest entities" }
                (entity_table(app, items, true))
            }
            Ok(_) => {}
            Err(e) => (alert(e)),
        }
    };
    view::page(app, "records", "Records", body)
}

/// A table of entities: name (linked), type when asked, a few properties, last change.
fn entity_table(app: &App<'_>, items: &[Value], with_type: bool) -> Markup {
    let org = app.org();
    html! {
        div.scroll { table {
            thead { tr { th { "Name" } @if with_type { th { "Type" } } th { "Properties" } th { "Updated" } } }
            tbody {
                @for e in items {
                    @let s = |k: &str| e[k].as_str().unwrap_or("");
                    tr {
                        td {
                            a href={ "/app/" (org) "/entities/" (s("id")) } { (s("name")) }
                            code.muted.id { (s("id")) }
                        }
                        @if with_type { td { (s("type")) } }
                        td.props {
                            @for (i, (k, v)) in e["properties"].as_object().into_iter().flatten().take(4).enumerate() {
                                @if i > 0 { " " }
                                span { b { (k) } " " (short(v, 60)) }
                            }
                        }
                        td.when { (when(s("updated_at"))) }
                    }
                }
            }
        } }
    }
}

/// `GET /app/{org}/records/{type}`: the type's entities, newest first, optionally where a
/// property equals a value.
pub async fn of_type(app: &App<'_>, type_name: &str) -> Response<Vec<u8>> {
    let query = app.query();
    let get = |name: &str| {
        query
            .one(name)
            .ok()
            .flatten()
            .map(str::trim)
            .filter(|v| !v.is_empty() && v.chars().count() <= 500)
            .map(str::to_string)
    };
    let (prop, value, cursor) = (get("prop"), get("value"), get("cursor"));
    let mut args = json!({"type": type_name, "newest_first": true, "limit": PAGE});
    if let (Some(p), Some(v)) = (&prop, &value) {
        // A value that reads as JSON (a number, true, null, a quoted string) is that value.
        let v = serde_json::from_str::<Value>(v).unwrap_or_else(|_| json!(v));
        args["where"] = json!({ p: v });
    }
    if let Some(c) = &cursor {
        args["cursor"] = json!(c);
    }
    let answer = match app.call("entities.list", args).await {
        Ok(v) => v,
        Err(LoreError::NotFound { .. }) => return not_found(),
        Err(LoreError::InvalidArgument { field, .. }) if field == "type" => return not_found(),
        Err(e) => return view::page(app, "records", "Records", alert(&e)),
    };
    let org = app.org();
    let items = answer["items"].as_array().cloned().unwrap_or_default();
    let here = |c: Option<&str>| {
        let mut q = url::form_urlencoded::Serializer::new(String::new());
        if let (Some(p), Some(v)) = (&prop, &value) {
            q.append_pair("prop", p).append_pair("value", v);
        }
        if let Some(c) = c {
            q.append_pair("cursor", c);
        }
        q.finish()
    };
    let body = html! {
        p { a href={ "/app/" (org) "/records" } { "All types" } }
        form.filters method="get" action={ "/app/" (org) "/records/" (type_name) } {
            div { label for="prop" { "Property" } input #prop name="prop" value=(prop.as_deref().unwrap_or("")); }
            div { label for="value" { "equals" } input #value name="value" value=(value.as_deref().unwrap_or("")); }
            div { button.primary type="submit" { "Show" } }
        }
        p.muted role="status" {
            @match items.len() {
                0 => "No entities here.",
                n => { (n) " entities, newest first." }
            }
        }
        @if !items.is_empty() { (entity_table(app, &items, false)) }
        (view::pager(here, cursor.is_some(), answer["next_cursor"].as_str(), "Older entities"))
    };
    view::page(
        app,
        "records",
        &format!("Entities of type {type_name}"),
        body,
    )
}

/// `GET /app/{org}/entities/{id}`: one entity, its relationships and its neighbourhood.
pub async fn entity(app: &App<'_>, id: &str) -> Response<Vec<u8>> {
    let e = match app.call("entities.get", json!({ "id": id })).await {
        Ok(e) => e,
        Err(LoreError::NotFound { .. } | LoreError::InvalidArgument { .. }) => return not_found(),
        Err(e) => return view::page(app, "records", "Records", alert(&e)),
    };
    let org = app.org();
    let s = |k: &str| e[k].as_str().unwrap_or("");
    let names_of_members = app.names().await;
    let head = html! {
        p { a href={ "/app/" (org) "/records/" (s("type")) } { "All of type " (s("type")) } }
        dl.facts {
            dt { "Id" } dd { code { (s("id")) } }
            dt { "Type" } dd { (s("type")) }
            dt { "Version" } dd { (e["version"].as_u64().unwrap_or(0)) }
            dt { "Created" } dd { (when(s("created_at"))) }
            dt { "Updated" } dd { (when(s("updated_at"))) }
            dt { "Created by" } dd { (who(&names_of_members, s("author"))) }
        }
        @if let Some(p) = e["properties"].as_object().filter(|p| !p.is_empty()) {
            h2 { "Properties" }
            div.scroll { table { tbody {
                @for (k, v) in p {
                    tr {
                        th.name { code { (k) } }
                        td.value {
                            @match v {
                                Value::String(text) => (text),
                                other => code { (serde_json::to_string(other).unwrap_or_default()) },
                            }
                        }
                    }
                }
            } } }
        }
    };

    let edges = match app
        .call(
            "relationships.list",
            json!({"entity_id": id, "limit": EDGES}),
        )
        .await
    {
        Ok(v) => v,
        Err(err) => {
            return view::page(app, "records", s("name"), html! { (head) (alert(&err)) });
        }
    };
    let more = edges["next_cursor"].is_string();
    let edges = edges["items"].as_array().cloned().unwrap_or_default();
    // The neighbours, in the order first met, with their names (one read for all).
    let mut neighbours: Vec<String> = Vec::new();
    for r in &edges {
        let other = if r["from"] == e["id"] {
            &r["to"]
        } else {
            &r["from"]
        };
        if let Some(o) = other.as_str()
            && o != id
            && !neighbours.iter().any(|n| n == o)
        {
            neighbours.push(o.to_string());
        }
    }
    let mut names: BTreeMap<String, (String, String)> = BTreeMap::new();
    let named: Vec<&String> = neighbours.iter().take(MAX_NAMED).collect();
    if !named.is_empty()
        && let Ok(found) = app.call("entities.get_many", json!({ "ids": named })).await
    {
        for v in found.as_array().into_iter().flatten() {
            let s = |k: &str| v[k].as_str().unwrap_or("").to_string();
            names.insert(s("id"), (s("name"), s("type")));
        }
    }
    let memories = app
        .call("memory.list", json!({"entity_ids": [id], "limit": 10}))
        .await
        .map(|v| v["items"].as_array().cloned().unwrap_or_default());
    let body = html! {
        (head)
        h2 { "Relationships" }
        p.muted {
            @match edges.len() {
                0 => "No relationships.",
                1 => "1 relationship.",
                n => { (n) " relationships." }
            }
            @if more { " Showing the first " (EDGES) "." }
        }
        @if !edges.is_empty() {
            (graph(app, &e, &edges, &neighbours, &names))
            div.scroll { table {
                thead { tr { th { "Relationship" } th { "With" } th { "Since" } } }
                tbody {
                    @for r in &edges {
                        @let out = r["from"] == e["id"];
                        @let other = if out { &r["to"] } else { &r["from"] }.as_str().unwrap_or("");
                        @let label = names.get(other).map_or(other, |(n, _)| n.as_str());
                        tr {
                            td { (if out { "→" } else { "←" }) " " code { (r["type"].as_str().unwrap_or("")) } }
                            td { a href={ "/app/" (org) "/entities/" (other) } { (label) } }
                            td.when { (when(r["created_at"].as_str().unwrap_or(""))) }
                        }
                    }
                }
            } }
        }
        @match &memories {
            Ok(items) => {
                h2 { "Memories about it" }
                p.muted {
                    (if items.is_empty() { "None yet." } else { "The newest:" }) " "
                    a href={ "/app/" (org) "/memory?entity=" (id) } { "All of them" }
                }
                @if !items.is_empty() {
                    ul {
                        @for m in items {
                            li { a href={ "/app/" (org) "/memory/" (m["id"].as_str().unwrap_or("")) } { (short(&m["content"], 160)) } }
                        }
                    }
                }
            }
            Err(err) => (alert(err)),
        }
    };
    view::page(app, "records", s("name"), body)
}

/// The entity's neighbourhood as an SVG: the entity in the middle, up to [`DRAWN`] neighbours
/// on a circle around it, one line per relationship type between them (arrow toward the
/// target), each neighbour a link to its own page.
fn graph(
    app: &App<'_>,
    e: &Value,
    edges: &[Value],
    neighbours: &[String],
    names: &BTreeMap<String, (String, String)>,
) -> Markup {
    let org = app.org();
    let drawn: Vec<&String> = neighbours.iter().take(DRAWN).collect();
    let (w, h, cx, cy, r) = (640.0_f64, 330.0_f64, 320.0_f64, 165.0_f64, 200.0_f64);
    let n = drawn.len().max(1) as f64;
    let f1 = |v: f64| format!("{v:.1}");
    // Per neighbour: where it is drawn, its line (arrow toward the target), the line's label.
    struct Drawn<'a> {
        id: &'a str,
        x: f64,
        y: f64,
        from: (f64, f64),
        to: (f64, f64),
        label: String,
        name: &'a str,
        ty: &'a str,
    }
    let shown: Vec<Drawn> = drawn
        .iter()
        .enumerate()
        .map(|(i, other)| {
            let angle = -std::f64::consts::FRAC_PI_2 + std::f64::consts::TAU * i as f64 / n;
            let (x, y) = (cx + r * angle.cos(), cy + r * angle.sin() * 0.68);
            let any_out = any_out_of(edges, e, other);
            // Every relationship type between the two, with its direction.
            let mut kinds: Vec<String> = edges
                .iter()
                .filter(|rel| {
                    rel["from"].as_str() == Some(other.as_str())
                        || rel["to"].as_str() == Some(other.as_str())
                })
                .map(|rel| {
                    // An edge against the drawn arrow says so.
                    let against = (rel["from"] == e["id"]) != any_out;
                    format!(
                        "{}{}",
                        if against { "← " } else { "" },
                        rel["type"].as_str().unwrap_or("")
                    )
                })
                .collect();
            kinds.dedup();
            // The line stops short of both label boxes; its arrow points at the target (the
            // neighbour when any edge goes out to it, else the entity).
            let (dx, dy) = (x - cx, y - cy);
            let len = (dx * dx + dy * dy).sqrt().max(1.0);
            let near = (cx + dx / len * 40.0, cy + dy / len * 24.0);
            let far = (x - dx / len * 40.0, y - dy / len * 22.0);
            let (from, to) = if any_out { (near, far) } else { (far, near) };
            let (name, ty) = names
                .get(other.as_str())
                .map_or((other.as_str(), ""), |(n, t)| (n.as_str(), t.as_str()));
            Drawn {
                id: other,
                x,
                y,
                from,
                to,
                label: short(&json!(kinds.join(", ")), 28),
                name,
                ty,
            }
        })
        .collect();
    let rest = neighbours.len().saturating_sub(drawn.len());
    let label = format!(
        "{} and its {} neighbours",
        short(&e["name"], 80),
        neighbours.len()
    );
    html! {
        svg.graph viewBox={ "0 0 " (w) " " (h) } role="img" aria-label=(label) {
            defs {
                marker #arrow viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse" {
                    path d="M0,0L10,5L0,10z" {}
                }
            }
            g.edges {
                @for d in &shown {
                    line x1=(f1(d.from.0)) y1=(f1(d.from.1)) x2=(f1(d.to.0)) y2=(f1(d.to.1)) marker-end="url(#arrow)" {}
                    text.edge x=(f1((d.from.0 + d.to.0) / 2.0)) y=(f1((d.from.1 + d.to.1) / 2.0 - 4.0)) { (d.label) }
                }
            }
            @for d in &shown {
                a href={ "/app/" (org) "/entities/" (d.id) } {
                    title { (d.name) " (" (d.ty) ")" }
                    rect.node x=(f1(d.x - 60.0)) y=(f1(d.y - 17.0)) width="120" height="34" rx="8" {}
                    text x=(f1(d.x)) y=(f1(d.y - 1.0)) { (short(&json!(d.name), 16)) }
                    text.type x=(f1(d.x)) y=(f1(d.y + 12.0)) { (d.ty) }
                }
            }
            rect.node.center x=(f1(cx - 70.0)) y=(f1(cy - 19.0)) width="140" height="38" rx="8" {}
            text.center x=(cx) y=(f1(cy + 5.0)) { (short(&e["name"], 18)) }
        }
        @if rest > 0 {
            p.muted { "The graph shows " (drawn.len()) " neighbours; " (rest) " more are in the table." }
        }
    }
}

/// Whether any of `edges` goes from the entity `e` to `other`.
fn any_out_of(edges: &[Value], e: &Value, other: &str) -> bool {
    edges
        .iter()
        .any(|rel| rel["from"] == e["id"] && rel["to"].as_str() == Some(other))
}
