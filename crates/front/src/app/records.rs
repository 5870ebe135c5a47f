//! The records pages: the org's entity types with their schemas (`templates.list`), the
//! entities of a type, newest first and filtered by a property (`entities.list`), and one
//! entity with its properties, its relationships and a small graph of its neighbourhood
//! (`entities.get`, `relationships.list`), and the memories about it (`memory.list`). Every
//! list pages with the SDK's cursor, so a page reads what it shows, whatever the org's size.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use http::Response;
use serde_json::{Value, json};

use super::context::App;
use super::view::{self, alert, not_found, when, who};
use crate::oauth::pages::esc;
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

/// `GET /app/{org}/records`: the entity types and their schemas, and the newest entities.
pub async fn types(app: &App<'_>) -> Response<Vec<u8>> {
    let org = esc(app.org());
    let types = match app.call("templates.list", json!({})).await {
        Ok(v) => v.as_array().cloned().unwrap_or_default(),
        Err(e) => return view::page(app, "records", "Records", &alert(&e)),
    };
    let mut body = String::new();
    if types.is_empty() {
        body.push_str("<p class=\"muted\">This org has no entity types yet; agents create them with <code>templates.create</code>.</p>\n");
    }
    body.push_str("<h2>Entity types</h2>\n");
    for t in &types {
        let s = |k: &str| t[k].as_str().unwrap_or("");
        let required: Vec<&str> = t["schema"]["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut props = String::new();
        if let Some(p) = t["schema"]["properties"].as_object() {
            for (name, spec) in p {
                let kind = match (&spec["type"], &spec["enum"]) {
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
                };
                let _ = write!(
                    props,
                    "<tr><td class=\"name\"><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    esc(name),
                    esc(&kind),
                    if required.contains(&name.as_str()) {
                        "required"
                    } else {
                        ""
                    },
                    esc(spec["description"].as_str().unwrap_or("")),
                );
            }
        }
        let _ = write!(
            body,
            "<section class=\"card\"><h3><a href=\"/app/{org}/records/{name}\">{name}</a> <span class=\"muted\">{noun}</span></h3>\n<p>{desc}</p>\n",
            name = esc(s("name")),
            noun = esc(s("noun")),
            desc = esc(s("description")),
        );
        if props.is_empty() {
            body.push_str("<p class=\"muted\">No declared properties.</p>\n");
        } else {
            let _ = writeln!(
                body,
                "<div class=\"scroll\"><table><thead><tr><th>Property</th><th>Type</th><th></th><th>Description</th></tr></thead><tbody>{props}</tbody></table></div>"
            );
        }
        body.push_str("</section>\n");
    }
    match app
        .call("entities.list", json!({"newest_first": true, "limit": 20}))
        .await
    {
        Ok(v) => {
            let items = v["items"].as_array().cloned().unwrap_or_default();
            if !items.is_empty() {
                body.push_str("<h2>Newest entities</h2>\n");
                body.push_str(&entity_table(app, &items, true));
            }
        }
        Err(e) => body.push_str(&alert(&e)),
    }
    view::page(app, "records", "Records", &body)
}

/// A table of entities: name (linked), type when asked, a few properties, last change.
fn entity_table(app: &App<'_>, items: &[Value], with_type: bool) -> String {
    let org = esc(app.org());
    let mut out = format!(
        "<div class=\"scroll\"><table>\n<thead><tr><th>Name</th>{}<th>Properties</th><th>Updated</th></tr></thead>\n<tbody>\n",
        if with_type { "<th>Type</th>" } else { "" }
    );
    for e in items {
        let s = |k: &str| e[k].as_str().unwrap_or("");
        let props: Vec<String> = e["properties"]
            .as_object()
            .map(|p| {
                p.iter()
                    .take(4)
                    .map(|(k, v)| format!("<span><b>{}</b> {}</span>", esc(k), esc(&short(v, 60))))
                    .collect()
            })
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "<tr><td><a href=\"/app/{org}/entities/{id}\">{name}</a><code class=\"muted id\">{id}</code></td>{ty}<td class=\"props\">{props}</td><td class=\"when\">{updated}</td></tr>",
            id = esc(s("id")),
            name = esc(s("name")),
            ty = if with_type {
                format!("<td>{}</td>", esc(s("type")))
            } else {
                String::new()
            },
            props = props.join(" "),
            updated = esc(&when(s("updated_at"))),
        );
    }
    out.push_str("</tbody></table></div>\n");
    out
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
        Err(e) => return view::page(app, "records", "Records", &alert(&e)),
    };
    let org = esc(app.org());
    let ty = esc(type_name);
    let mut body = format!(
        "<p><a href=\"/app/{org}/records\">All types</a></p>\n\
<form class=\"filters\" method=\"get\" action=\"/app/{org}/records/{ty}\">\n\
<div><label for=\"prop\">Property</label><input id=\"prop\" name=\"prop\" value=\"{p}\"></div>\n\
<div><label for=\"value\">equals</label><input id=\"value\" name=\"value\" value=\"{v}\"></div>\n\
<div><button type=\"submit\" class=\"primary\">Show</button></div>\n</form>\n",
        p = esc(prop.as_deref().unwrap_or("")),
        v = esc(value.as_deref().unwrap_or("")),
    );
    let items = answer["items"].as_array().cloned().unwrap_or_default();
    let _ = writeln!(
        body,
        "<p class=\"muted\" role=\"status\">{}</p>",
        match items.len() {
            0 => "No entities here.".to_string(),
            n => format!("{n} entities, newest first."),
        }
    );
    if !items.is_empty() {
        body.push_str(&entity_table(app, &items, false));
    }
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
    body.push_str(&view::pager(
        here,
        cursor.is_some(),
        answer["next_cursor"].as_str(),
        "Older entities",
    ));
    view::page(
        app,
        "records",
        &format!("Entities of type {type_name}"),
        &body,
    )
}

/// `GET /app/{org}/entities/{id}`: one entity, its relationships and its neighbourhood.
pub async fn entity(app: &App<'_>, id: &str) -> Response<Vec<u8>> {
    let e = match app.call("entities.get", json!({ "id": id })).await {
        Ok(e) => e,
        Err(LoreError::NotFound { .. } | LoreError::InvalidArgument { .. }) => return not_found(),
        Err(e) => return view::page(app, "records", "Records", &alert(&e)),
    };
    let org = esc(app.org());
    let s = |k: &str| e[k].as_str().unwrap_or("");
    let mut body = format!(
        "<p><a href=\"/app/{org}/records/{ty}\">All of type {ty}</a></p>\n<dl class=\"facts\"><dt>Id</dt><dd><code>{id}</code></dd><dt>Type</dt><dd>{ty}</dd><dt>Version</dt><dd>{version}</dd><dt>Created</dt><dd>{created}</dd><dt>Updated</dt><dd>{updated}</dd><dt>Created by</dt><dd>{author}</dd></dl>\n",
        id = esc(s("id")),
        ty = esc(s("type")),
        version = e["version"].as_u64().unwrap_or(0),
        created = esc(&when(s("created_at"))),
        updated = esc(&when(s("updated_at"))),
        author = who(&app.names().await, s("author")),
    );
    if let Some(p) = e["properties"].as_object().filter(|p| !p.is_empty()) {
        body.push_str("<h2>Properties</h2>\n<div class=\"scroll\"><table><tbody>\n");
        for (k, v) in p {
            let shown = match v {
                Value::String(s) => esc(s),
                other => format!(
                    "<code>{}</code>",
                    esc(&serde_json::to_string(other).unwrap_or_default())
                ),
            };
            let _ = writeln!(
                body,
                "<tr><th class=\"name\"><code>{}</code></th><td class=\"value\">{shown}</td></tr>",
                esc(k)
            );
        }
        body.push_str("</tbody></table></div>\n");
    }

    let edges = match app
        .call(
            "relationships.list",
            json!({"entity_id": id, "limit": EDGES}),
        )
        .await
    {
        Ok(v) => v,
        Err(err) => {
            body.push_str(&alert(&err));
            return view::page(app, "records", s("name"), &body);
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
    let _ = writeln!(
        body,
        "<h2>Relationships</h2>\n<p class=\"muted\">{}{}</p>",
        match edges.len() {
            0 => "No relationships.".to_string(),
            1 => "1 relationship.".to_string(),
            n => format!("{n} relationships."),
        },
        if more {
            format!(" Showing the first {EDGES}.")
        } else {
            String::new()
        }
    );
    if !edges.is_empty() {
        body.push_str(&graph(app, &e, &edges, &neighbours, &names));
        body.push_str("<div class=\"scroll\"><table><thead><tr><th>Relationship</th><th>With</th><th>Since</th></tr></thead><tbody>\n");
        for r in &edges {
            let out = r["from"] == e["id"];
            let other = if out { &r["to"] } else { &r["from"] };
            let other = other.as_str().unwrap_or("");
            let label = names.get(other).map_or(other, |(n, _)| n.as_str());
            let _ = writeln!(
                body,
                "<tr><td>{arrow} <code>{ty}</code></td><td><a href=\"/app/{org}/entities/{oid}\">{label}</a></td><td class=\"when\">{at}</td></tr>",
                arrow = if out { "→" } else { "←" },
                ty = esc(r["type"].as_str().unwrap_or("")),
                oid = esc(other),
                label = esc(label),
                at = esc(&when(r["created_at"].as_str().unwrap_or(""))),
            );
        }
        body.push_str("</tbody></table></div>\n");
    }

    match app
        .call("memory.list", json!({"entity_ids": [id], "limit": 10}))
        .await
    {
        Ok(v) => {
            let items = v["items"].as_array().cloned().unwrap_or_default();
            let _ = writeln!(
                body,
                "<h2>Memories about it</h2>\n<p class=\"muted\">{} <a href=\"/app/{org}/memory?entity={id}\">All of them</a></p>",
                if items.is_empty() {
                    "None yet."
                } else {
                    "The newest:"
                },
                id = esc(id),
            );
            if !items.is_empty() {
                body.push_str("<ul>\n");
                for m in &items {
                    let _ = writeln!(
                        body,
                        "<li><a href=\"/app/{org}/memory/{mid}\">{text}</a></li>",
                        mid = esc(m["id"].as_str().unwrap_or("")),
                        text = esc(&short(&m["content"], 160)),
                    );
                }
                body.push_str("</ul>\n");
            }
        }
        Err(err) => body.push_str(&alert(&err)),
    }
    view::page(app, "records", s("name"), &body)
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
) -> String {
    let org = esc(app.org());
    let drawn: Vec<&String> = neighbours.iter().take(DRAWN).collect();
    let (w, h, cx, cy, r) = (640.0_f64, 330.0_f64, 320.0_f64, 165.0_f64, 200.0_f64);
    let mut lines = String::new();
    let mut nodes = String::new();
    let n = drawn.len().max(1) as f64;
    for (i, other) in drawn.iter().enumerate() {
        let angle = -std::f64::consts::FRAC_PI_2 + std::f64::consts::TAU * i as f64 / n;
        let (x, y) = (cx + r * angle.cos(), cy + r * angle.sin() * 0.68);
        // Every relationship type between the two, with its direction.
        let mut kinds: Vec<String> = edges
            .iter()
            .filter(|rel| {
                rel["from"].as_str() == Some(other.as_str())
                    || rel["to"].as_str() == Some(other.as_str())
            })
            .map(|rel| {
                let out = rel["from"] == e["id"];
                // An edge against the drawn arrow says so.
                let against = out != any_out_of(edges, e, other);
                format!(
                    "{}{}",
                    if against { "← " } else { "" },
                    rel["type"].as_str().unwrap_or("")
                )
            })
            .collect();
        kinds.dedup();
        let any_out = any_out_of(edges, e, other);
        // The line stops short of both label boxes; its arrow points at the target (the
        // neighbour when any edge goes out to it, else the entity).
        let (dx, dy) = (x - cx, y - cy);
        let len = (dx * dx + dy * dy).sqrt().max(1.0);
        let near = (cx + dx / len * 40.0, cy + dy / len * 24.0);
        let far = (x - dx / len * 40.0, y - dy / len * 22.0);
        let ((x1, y1), (x2, y2)) = if any_out { (near, far) } else { (far, near) };
        let marker = " marker-end=\"url(#arrow)\"";
        let label = kinds.join(", ");
        let _ = write!(
            lines,
            "<line x1=\"{x1:.1}\" y1=\"{y1:.1}\" x2=\"{x2:.1}\" y2=\"{y2:.1}\"{marker}/><text class=\"edge\" x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            (x1 + x2) / 2.0,
            (y1 + y2) / 2.0 - 4.0,
            esc(&short(&json!(label), 28)),
        );
        let (name, ty) = names
            .get(other.as_str())
            .map_or((other.as_str(), ""), |(n, t)| (n.as_str(), t.as_str()));
        let _ = write!(
            nodes,
            "<a href=\"/app/{org}/entities/{id}\"><title>{full} ({ty})</title><rect class=\"node\" x=\"{:.1}\" y=\"{:.1}\" width=\"120\" height=\"34\" rx=\"8\"/><text x=\"{x:.1}\" y=\"{:.1}\">{name}</text><text class=\"type\" x=\"{x:.1}\" y=\"{:.1}\">{ty}</text></a>",
            x - 60.0,
            y - 17.0,
            y - 1.0,
            y + 12.0,
            id = esc(other),
            full = esc(name),
            name = esc(&short(&json!(name), 16)),
            ty = esc(ty),
        );
    }
    let center = short(&e["name"], 18);
    let rest = neighbours.len().saturating_sub(drawn.len());
    format!(
        "<svg class=\"graph\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"{label}\">\
<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0,0L10,5L0,10z\"/></marker>\
</defs>\
<g class=\"edges\">{lines}</g>{nodes}<rect class=\"node center\" x=\"{:.1}\" y=\"{:.1}\" width=\"140\" height=\"38\" rx=\"8\"/><text class=\"center\" x=\"{cx}\" y=\"{:.1}\">{}</text></svg>\n{}",
        cx - 70.0,
        cy - 19.0,
        cy + 5.0,
        esc(&center),
        if rest > 0 {
            format!(
                "<p class=\"muted\">The graph shows {} neighbours; {rest} more are in the table.</p>",
                drawn.len()
            )
        } else {
            String::new()
        },
        label = esc(&format!(
            "{} and its {} neighbours",
            short(&e["name"], 80),
            neighbours.len()
        )),
    )
}

/// Whether any of `edges` goes from the entity `e` to `other`.
fn any_out_of(edges: &[Value], e: &Value, other: &str) -> bool {
    edges
        .iter()
        .any(|rel| rel["from"] == e["id"] && rel["to"].as_str() == Some(other))
}
