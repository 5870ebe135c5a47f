//! `fetch`: one record, list or definition by id or path, and `/$.d.ts`.
//!
//! Paths: `/entities/{ent_id}`, `/memory/{evt_id}`, `/types/{Noun}`, `/verbs/{Noun.verb}` (or
//! `/verbs/{namespace.method}`), `/docs/{topic}`; the lists `/entities` (the newest 50),
//! `/memory` (the 20 most recent), `/types`, `/verbs` (every Verb the caller may call), `/docs`;
//! `/{type}` and `/{type}/{ent_id}` with a type's name (`/offer`, `/offers/ent_…`: the first
//! 50 of that type in creation order, one of them); `/` (what there is); and `/$.d.ts`.
//! Conveniences: a bare `ent_…` or `evt_…` id, `Noun`, `Noun.verb`, `$.Noun.verb`, a doc
//! topic, and the `url` a search hit carries (`lore://{org}/…` or `…/api/{org}/fetch?id=…`).

use serde_json::{Value, json};

use super::catalog::{self, Catalog, clip, url};
use super::docs::{self, DOCS};
use crate::instance::Engine;
use crate::sdk::typescript;
use lore_base::error::LoreError;
use lore_base::model::Tier;
use lore_base::time::format_time;
use lore_directory::Caller;
use lore_memory::event::Event;
use lore_records::entities::{self, Entity, ListEntities};

/// The path forms, for messages.
pub const FORMS: &str = "/entities, /entities/{ent_id}, /memory, /memory/{evt_id}, /types, /types/{Noun}, /verbs, /verbs/{Noun.verb}, /docs, /docs/{topic}, /$.d.ts";

/// How many records the lists show.
const LIST_ENTITIES: usize = 50;
const LIST_MEMORIES: usize = 20;

/// One answer before its `url`.
struct Page {
    path: String,
    title: String,
    text: String,
    metadata: Value,
}

fn pretty(v: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

/// Runs `fetch` for `caller`; `base_url` (when known) makes the answer's `url`.
pub async fn fetch(
    engine: &Engine,
    caller: &Caller,
    id: &str,
    base_url: Option<&str>,
) -> Result<Value, LoreError> {
    let path = normalize(caller, id)?;
    let page = resolve(engine, caller, &path).await?;
    Ok(json!({
        "id": page.path,
        "title": page.title,
        "text": page.text,
        "url": url(base_url, caller, &page.path),
        "metadata": page.metadata,
    }))
}

/// The path an id, path or URL names.
fn normalize(caller: &Caller, id: &str) -> Result<String, LoreError> {
    let id = id.trim();
    if id.is_empty() {
        return Err(LoreError::invalid(
            "id",
            format!("give an id or a path: {FORMS}"),
        ));
    }
    if let Some(rest) = id.strip_prefix("lore://") {
        let (org, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        if org != caller.org().as_str() {
            return Err(LoreError::not_found(format!(
                "{id}: it is not a URL of org {}",
                caller.org()
            )));
        }
        return normalize(caller, if path.is_empty() { "/" } else { path });
    }
    if id.starts_with("http://") || id.starts_with("https://") {
        let inner = url::Url::parse(id).ok().and_then(|u| {
            u.path()
                .ends_with("/fetch")
                .then(|| {
                    u.query_pairs()
                        .find(|(k, _)| k == "id")
                        .map(|(_, v)| v.into_owned())
                })
                .flatten()
        });
        return match inner {
            Some(inner) if !inner.starts_with("http") => normalize(caller, &inner),
            _ => Err(LoreError::invalid(
                "id",
                format!("{id} is not a fetch URL; give an id or a path: {FORMS}"),
            )),
        };
    }
    if matches!(id, "$.d.ts" | "/$.d.ts" | "sdk.d.ts" | "/sdk.d.ts") {
        return Ok("/$.d.ts".into());
    }
    if id.starts_with('/') {
        return Ok(id.to_string());
    }
    let bare = id.strip_prefix("$.").unwrap_or(id);
    Ok(if bare.starts_with("ent_") {
        format!("/entities/{bare}")
    } else if bare.starts_with("evt_") {
        format!("/memory/{bare}")
    } else if bare.contains('.') {
        format!("/verbs/{bare}")
    } else if bare.starts_with(|c: char| c.is_ascii_uppercase()) {
        format!("/types/{bare}")
    } else if docs::find(bare).is_some() {
        format!("/docs/{bare}")
    } else {
        format!("/{bare}")
    })
}

async fn resolve(engine: &Engine, caller: &Caller, path: &str) -> Result<Page, LoreError> {
    let segments: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    match segments.as_slice() {
        [] => Ok(index(engine, caller).await?),
        ["$.d.ts"] => {
            let cat = Catalog::load(engine, caller).await?;
            Ok(Page {
                path: "/$.d.ts".into(),
                title: format!("TypeScript declarations of $ for you in {}", caller.org()),
                text: typescript::declarations(caller, Tier::Admin, &cat.types, &cat.noun_methods),
                metadata: json!({"kind": "declarations", "format": "typescript", "role": caller.role().as_str()}),
            })
        }
        ["entities"] => entity_list(engine, caller).await,
        ["entities", id] => entity(engine, caller, id, None).await,
        ["memory"] => memory_list(engine, caller).await,
        ["memory", id] => memory(engine, caller, id).await,
        ["types"] => {
            let cat = Catalog::load(engine, caller).await?;
            let items: Vec<Value> = cat
                .types
                .iter()
                .map(|t| json!({"noun": t.noun, "name": t.name, "description": t.description, "path": format!("/types/{}", t.noun)}))
                .collect();
            Ok(list_page("/types", "Nouns (entity types)", "noun", &items))
        }
        ["types", noun] => noun_page(engine, caller, noun).await,
        ["verbs"] => {
            let cat = Catalog::load(engine, caller).await?;
            let items: Vec<Value> = cat
                .verbs
                .iter()
                .map(|v| json!({"path": v.path, "signature": v.signature, "access": v.tier.as_str(), "mode": v.mode.as_str()}))
                .collect();
            Ok(list_page("/verbs", "Verbs you may call", "verb", &items))
        }
        ["verbs", verb] => verb_page(engine, caller, verb).await,
        ["docs"] => {
            let items: Vec<Value> = DOCS
                .iter()
                .map(|d| json!({"topic": d.topic, "title": d.title, "summary": d.summary, "path": format!("/docs/{}", d.topic)}))
                .collect();
            Ok(list_page("/docs", "Docs", "doc", &items))
        }
        ["docs", topic] => {
            let doc = docs::find(topic).ok_or_else(|| {
                LoreError::not_found(format!("doc /docs/{topic} (topics: {})", docs::topics()))
            })?;
            Ok(Page {
                path: format!("/docs/{}", doc.topic),
                title: doc.title.into(),
                text: doc.body.into(),
                metadata: json!({"kind": "doc", "topic": doc.topic, "format": "markdown", "summary": doc.summary}),
            })
        }
        [first, rest @ ..] if rest.len() <= 1 => {
            let cat = Catalog::load(engine, caller).await?;
            let ty = cat.types.iter().find(|t| {
                *first == t.name
                    || first.strip_suffix('s') == Some(t.name.as_str())
                    || first.eq_ignore_ascii_case(&t.noun)
            });
            match (ty, rest) {
                (Some(t), [id]) => entity(engine, caller, id, Some(&t.name)).await,
                (Some(t), _) => {
                    let list = ListEntities {
                        type_name: Some(t.name.clone()),
                        filter: None,
                        limit: Some(LIST_ENTITIES),
                        cursor: None,
                        newest_first: false,
                    };
                    let page = entities::list(&engine.ports, caller, list).await?;
                    let mut p = list_page(
                        &format!("/{}", t.name),
                        &format!("{} records", t.noun),
                        "entity",
                        &page.items,
                    );
                    p.metadata["next_cursor"] = json!(page.next_cursor);
                    Ok(p)
                }
                (None, _) => Err(LoreError::not_found(format!(
                    "{path:?} in org {}: fetch takes {FORMS} ({})",
                    caller.org(),
                    cat.noun_names()
                ))),
            }
        }
        _ => Err(LoreError::invalid(
            "id",
            format!("{path:?} is not a path fetch knows: {FORMS}"),
        )),
    }
}

fn list_page(path: &str, title: &str, of: &str, items: &[impl serde::Serialize]) -> Page {
    Page {
        path: path.into(),
        title: title.into(),
        text: pretty(&items),
        metadata: json!({"kind": "list", "of": of, "count": items.len()}),
    }
}

async fn index(engine: &Engine, caller: &Caller) -> Result<Page, LoreError> {
    let cat = Catalog::load(engine, caller).await?;
    let text = format!(
        "# What you can fetch in {org}\n\n- `/types`: the Nouns ({nouns})\n- `/verbs`: the {verbs} Verbs you may call\n- `/entities`, `/memory`: the newest records\n- `/docs`: {topics}\n- `/$.d.ts`: the TypeScript of `$` for you\n\nOne item: {FORMS}.\n",
        org = caller.org(),
        nouns = cat.noun_names(),
        verbs = cat.verbs.len(),
        topics = docs::topics(),
    );
    Ok(Page {
        path: "/".into(),
        title: format!("lore: {}", caller.org()),
        text,
        metadata: json!({"kind": "index"}),
    })
}

async fn entity(
    engine: &Engine,
    caller: &Caller,
    id: &str,
    of_type: Option<&str>,
) -> Result<Page, LoreError> {
    let e: Entity = entities::get(&engine.ports, caller, id).await?;
    if of_type.is_some_and(|t| t != e.type_name) {
        return Err(LoreError::not_found(format!(
            "{} {id} in org {} (it is a {}: /entities/{id})",
            of_type.unwrap_or_default(),
            caller.org(),
            e.type_name
        )));
    }
    let noun = lore_records::types::noun_of(&e.type_name);
    Ok(Page {
        path: format!("/entities/{}", e.id),
        title: format!("{noun} {}", e.name),
        text: pretty(&e),
        metadata: json!({
            "kind": "entity",
            "type": e.type_name,
            "noun": noun,
            "version": e.version,
            "author": e.author,
            "created_at": e.created_at,
            "updated_at": e.updated_at,
        }),
    })
}

async fn entity_list(engine: &Engine, caller: &Caller) -> Result<Page, LoreError> {
    let newest = catalog::newest_entities(engine, caller, LIST_ENTITIES).await?;
    let items: Vec<Value> = newest
        .iter()
        .map(|e| json!({"id": e.id, "type": e.type_name, "name": e.name, "created_at": e.created_at, "path": format!("/entities/{}", e.id)}))
        .collect();
    let mut page = list_page("/entities", "The newest entities", "entity", &items);
    page.metadata["note"] = json!(format!(
        "at most the {LIST_ENTITIES} newest, newest first; search, /{{type}}, or $.entities.list pages for more"
    ));
    Ok(page)
}

async fn memory(engine: &Engine, caller: &Caller, id: &str) -> Result<Page, LoreError> {
    let ulid = lore_base::ids::parse_record_id(id, "evt", "id")?;
    let event: Event = engine
        .ports
        .record(&caller.keys().event(ulid))
        .await?
        .ok_or_else(|| {
            LoreError::not_found(format!(
                "memory {id} in org {} (recent ones: /memory)",
                caller.org()
            ))
        })?;
    Ok(Page {
        path: format!("/memory/{}", event.id),
        title: format!("Memory ({}): {}", event.kind, clip(&event.content, 80)),
        text: pretty(&lore_memory::event_json(&event)),
        metadata: json!({
            "kind": "memory",
            "memory_kind": event.kind,
            "author": event.author,
            "entity_ids": event.entity_ids,
            "created_at": format_time(event.created_at_ms),
        }),
    })
}

async fn memory_list(engine: &Engine, caller: &Caller) -> Result<Page, LoreError> {
    let found = engine
        .memory
        .search(
            &engine.ports,
            caller,
            catalog::memory_query("", LIST_MEMORIES),
        )
        .await?
        .into_value()?;
    let items: Vec<Value> = found["results"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|mut m| {
            if let Some(o) = m.as_object_mut() {
                o.remove("score");
                let path = format!("/memory/{}", o["id"].as_str().unwrap_or_default());
                o.insert("path".into(), json!(path));
            }
            m
        })
        .collect();
    Ok(list_page("/memory", "Recent memories", "memory", &items))
}

async fn noun_page(engine: &Engine, caller: &Caller, noun: &str) -> Result<Page, LoreError> {
    let cat = Catalog::load(engine, caller).await?;
    let ty = cat.noun(noun).ok_or_else(|| {
        LoreError::not_found(format!(
            "Noun {noun:?} in org {} ({})",
            caller.org(),
            cat.noun_names()
        ))
    })?;
    let verbs: Vec<Value> = cat
        .verbs_of(&ty.noun)
        .map(|v| json!({"path": v.path, "signature": v.signature, "description": v.description, "access": v.tier.as_str(), "mode": v.mode.as_str()}))
        .collect();
    let text = pretty(&json!({
        "noun": ty.noun,
        "name": ty.name,
        "description": ty.description,
        "schema": ty.schema,
        "verbs": verbs,
        "sql_table": ty.name,
    }));
    Ok(Page {
        path: format!("/types/{}", ty.noun),
        title: format!("{} (Noun, entity type {})", ty.noun, ty.name),
        text,
        metadata: json!({
            "kind": "noun",
            "type": ty.name,
            "noun": ty.noun,
            "version": ty.version,
            "created_at": ty.created_at,
            "updated_at": ty.updated_at,
            "verbs": verbs.iter().map(|v| v["path"].clone()).collect::<Vec<_>>(),
        }),
    })
}

async fn verb_page(engine: &Engine, caller: &Caller, path: &str) -> Result<Page, LoreError> {
    let path = path.strip_prefix("$.").unwrap_or(path);
    let cat = Catalog::load(engine, caller).await?;
    let Some(v) = cat.verb(path) else {
        let namespace = path.split('.').next().unwrap_or_default();
        let same: Vec<&str> = cat
            .verbs
            .iter()
            .filter(|v| v.namespace == namespace)
            .map(|v| v.path.as_str())
            .collect();
        let hint = if same.is_empty() {
            format!(
                "{}; fetch /verbs for every Verb you may call",
                cat.noun_names()
            )
        } else {
            format!("{namespace} has, for you: {}", same.join(", "))
        };
        return Err(LoreError::not_found(format!(
            "Verb {path:?} that you may call in org {} (it does not exist, or your role or token does not allow it; {hint})",
            caller.org()
        )));
    };
    let text = pretty(&json!({
        "path": v.path,
        "signature": v.signature,
        "description": v.description,
        "access": v.tier.as_str(),
        "mode": v.mode.as_str(),
        "args_schema": v.args_schema(),
        "returns": v.returns,
        "call": format!("await $.{}({{ ... }})", v.path),
    }));
    Ok(Page {
        path: format!("/verbs/{}", v.path),
        title: format!("{} ({} Verb)", v.path, if v.noun { "Noun" } else { "SDK" }),
        text,
        metadata: json!({
            "kind": "verb",
            "signature": v.signature,
            "access": v.tier.as_str(),
            "mode": v.mode.as_str(),
            "namespace": v.namespace,
            "noun": v.noun,
        }),
    })
}
