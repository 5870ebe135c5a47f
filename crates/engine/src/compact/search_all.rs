//! `search`: records, Nouns, Verbs and docs by keyword and meaning.
//!
//! Every kind is ranked on its own, then the rankings are fused by reciprocal rank:
//! - Nouns, Verbs and docs: BM25 over their names and descriptions, plus, with an embedder,
//!   cosine similarity of the query to their text (see `rank::similarities`);
//! - memories: the hybrid memory search (BM25 and vectors, already fused);
//! - entities: BM25 over name, type and property values of the newest
//!   [`ENTITY_SCAN`] entities (a query that is an `ent_…` id also finds an older one).
//!
//! An exact match of a Noun, a Verb path, an id, an entity's name or a doc topic comes first.

use serde_json::{Value, json};

use super::SearchArgs;
use super::catalog::{self, Catalog, ENTITY_SCAN, SNIPPET_CHARS, clip, excerpt, url};
use super::docs::DOCS;
use super::rank::{self, Fields};
use crate::instance::Engine;
use lore_base::error::LoreError;
use lore_directory::Caller;
use lore_memory::keyword::Tokenizer;
use lore_records::entities::{self, Entity};

/// What a hit is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Entity,
    Memory,
    Noun,
    Verb,
    Doc,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Entity => "entity",
            Self::Memory => "memory",
            Self::Noun => "noun",
            Self::Verb => "verb",
            Self::Doc => "doc",
        }
    }
}

/// One thing search may return.
struct Candidate {
    kind: Kind,
    path: String,
    title: String,
    snippet: String,
    /// Keyword fields (empty for memories, which come ranked).
    fields: Fields,
    /// Text compared by meaning (Nouns, Verbs, docs).
    meaning: Option<String>,
    /// Lowercase strings that, typed as the whole query, name this exactly.
    exact: Vec<String>,
}

/// Added to an exact match's fused score: far above any reciprocal-rank sum.
const EXACT_BOOST: f64 = 1.0;

fn noun_candidates(catalog: &Catalog, out: &mut Vec<Candidate>) {
    for t in &catalog.types {
        let props: Vec<&String> = t
            .schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().collect())
            .unwrap_or_default();
        let props_text = props
            .iter()
            .map(|p| p.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let description = if t.description.is_empty() {
            format!("Entity type {}.", t.name)
        } else {
            t.description.clone()
        };
        let snippet = if props.is_empty() {
            description.clone()
        } else {
            format!("{description} Properties: {props_text}.")
        };
        out.push(Candidate {
            kind: Kind::Noun,
            path: format!("/types/{}", t.noun),
            title: format!("{} (Noun, entity type {})", t.noun, t.name),
            snippet: clip(&snippet, SNIPPET_CHARS),
            fields: vec![
                (3.0, t.noun.clone()),
                (3.0, t.name.replace('_', " ")),
                (1.0, description.clone()),
                (1.0, catalog::value_text(&t.schema, 4_000)),
            ],
            meaning: Some(format!("{}: {description} {props_text}", t.noun)),
            exact: vec![
                t.noun.to_lowercase(),
                t.name.clone(),
                format!("/types/{}", t.noun).to_lowercase(),
                format!("$.{}", t.noun).to_lowercase(),
            ],
        });
    }
}

fn verb_candidates(catalog: &Catalog, out: &mut Vec<Candidate>) {
    for v in &catalog.verbs {
        out.push(Candidate {
            kind: Kind::Verb,
            path: format!("/verbs/{}", v.path),
            title: format!(
                "{} ({} Verb, {})",
                v.path,
                if v.noun { "Noun" } else { "SDK" },
                v.tier.as_str()
            ),
            snippet: clip(
                &format!("{} — {}", v.signature, v.description),
                SNIPPET_CHARS,
            ),
            fields: vec![
                (3.0, v.name.replace('_', " ")),
                (2.0, v.namespace.clone()),
                (1.0, v.description.clone()),
            ],
            meaning: Some(format!("{}: {}", v.path, v.description)),
            exact: vec![
                v.path.to_lowercase(),
                format!("/verbs/{}", v.path).to_lowercase(),
                format!("$.{}", v.path).to_lowercase(),
            ],
        });
    }
}

fn doc_candidates(out: &mut Vec<Candidate>) {
    for d in DOCS {
        out.push(Candidate {
            kind: Kind::Doc,
            path: format!("/docs/{}", d.topic),
            title: d.title.into(),
            snippet: clip(d.summary, SNIPPET_CHARS),
            fields: vec![
                (3.0, d.topic.replace('-', " ")),
                (2.0, d.title.into()),
                (2.0, d.summary.into()),
                (1.0, d.body.into()),
            ],
            meaning: Some(format!("{}: {}", d.title, d.summary)),
            exact: vec![d.topic.into(), format!("/docs/{}", d.topic)],
        });
    }
}

fn entity_candidate(e: &Entity, catalog: &Catalog) -> Candidate {
    let noun = catalog
        .types
        .iter()
        .find(|t| t.name == e.type_name)
        .map_or_else(|| e.type_name.clone(), |t| t.noun.clone());
    let props = Value::Object(e.properties.clone());
    let props_text = catalog::value_text(&props, 4_000);
    let shown = serde_json::to_string(&props).unwrap_or_default();
    Candidate {
        kind: Kind::Entity,
        path: format!("/entities/{}", e.id),
        title: format!("{noun} {}", e.name),
        snippet: clip(
            &format!("{} ({noun}, {}): {shown}", e.name, e.id),
            SNIPPET_CHARS,
        ),
        fields: vec![
            (3.0, e.name.clone()),
            (2.0, format!("{} {noun}", e.type_name.replace('_', " "))),
            (1.0, props_text),
        ],
        meaning: None,
        exact: vec![
            e.id.clone(),
            e.name.to_lowercase(),
            format!("/entities/{}", e.id),
        ],
    }
}

/// Runs `search` for `caller`; `base_url` (when known) makes each hit's `url`.
pub async fn search_all(
    engine: &Engine,
    caller: &Caller,
    args: SearchArgs,
    base_url: Option<&str>,
) -> Result<Value, LoreError> {
    let query = args.query.trim();
    if query.is_empty() {
        return Err(LoreError::invalid(
            "query",
            "give words, a name, a Verb such as Offer.publish, or an id to search for",
        ));
    }
    let limit = args.limit.unwrap_or(10).clamp(1, 100);
    let depth = (limit * 3).clamp(30, 100);
    let exact_query = query.to_lowercase();
    let tokenizer = Tokenizer::default();
    let terms = tokenizer.terms(query);

    let catalog = Catalog::load(engine, caller).await?;
    let mut candidates: Vec<Candidate> = Vec::new();
    noun_candidates(&catalog, &mut candidates);
    verb_candidates(&catalog, &mut candidates);
    doc_candidates(&mut candidates);
    let mut newest = catalog::newest_entities(engine, caller, ENTITY_SCAN).await?;
    if lore_base::ids::parse_record_id(query, "ent", "query").is_ok()
        && !newest.iter().any(|e| e.id == query)
    {
        match entities::get(&engine.ports, caller, query).await {
            Ok(e) => newest.push(e),
            Err(LoreError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    candidates.extend(newest.iter().map(|e| entity_candidate(e, &catalog)));
    let records_from = candidates.len();

    // Memories, ranked by the memory search; one exact id also finds a memory it ranks low.
    let memories = engine
        .memory
        .search(&engine.ports, caller, catalog::memory_query(query, depth))
        .await?
        .into_value()?;
    let mut memory_ranking = Vec::new();
    let hits = memories["results"].as_array().cloned().unwrap_or_default();
    for hit in hits {
        // A query without indexable words lists the newest memories (score 0): not a match.
        if hit["score"].as_f64().unwrap_or(0.0) == 0.0 {
            continue;
        }
        memory_ranking.push(candidates.len());
        candidates.push(memory_candidate(&hit, &terms, &tokenizer));
    }
    if lore_base::ids::parse_record_id(query, "evt", "query").is_ok()
        && !candidates
            .iter()
            .any(|c| c.kind == Kind::Memory && c.exact[0] == query)
        && let Some(hit) = event_hit(engine, caller, query).await?
    {
        candidates.push(memory_candidate(&hit, &terms, &tokenizer));
    }

    // Keyword ranking of everything but memories, one ranking per kind.
    let docs: Vec<&Fields> = candidates[..records_from]
        .iter()
        .map(|c| &c.fields)
        .collect();
    let mut keyword = rank::keyword_scores(&tokenizer, query, &docs);
    keyword.resize(candidates.len(), 0.0);
    let mut fused = vec![0.0; candidates.len()];
    let best = keyword.iter().copied().fold(0.0, f64::max);
    for kind in [Kind::Noun, Kind::Verb, Kind::Doc, Kind::Entity] {
        let scores: Vec<f64> = candidates
            .iter()
            .zip(&keyword)
            .map(|(c, s)| if c.kind == kind { *s } else { 0.0 })
            .collect();
        rank::fuse(&mut fused, &rank::top(&scores, depth), |i| {
            rank::strength(keyword[i], best)
        });
    }
    // Meaning, where an embedder answers.
    let meaning: Vec<(usize, String)> = candidates[..records_from]
        .iter()
        .enumerate()
        .filter_map(|(i, c)| c.meaning.clone().map(|m| (i, m)))
        .collect();
    let texts: Vec<String> = meaning.iter().map(|(_, t)| t.clone()).collect();
    let semantic = rank::similarities(&engine.ports, query, &texts).await;
    if let Some(sims) = &semantic {
        let best = sims.iter().copied().fold(0.0, f32::max);
        for kind in [Kind::Noun, Kind::Verb, Kind::Doc] {
            let mut scores = vec![0.0; candidates.len()];
            for ((i, _), s) in meaning.iter().zip(sims) {
                if candidates[*i].kind == kind {
                    scores[*i] = f64::from(*s);
                }
            }
            let ranking = rank::top(&scores, limit.min(10));
            rank::fuse(&mut fused, &ranking, |i| {
                rank::strength(scores[i], f64::from(best))
            });
        }
    }
    // The memory search fused keyword and vector rankings itself: it counts as both.
    let memory_weight = if engine.ports.embedder.is_some() {
        2.0
    } else {
        1.0
    };
    rank::fuse(&mut fused, &memory_ranking, |_| memory_weight);
    for (i, c) in candidates.iter().enumerate() {
        if c.exact.contains(&exact_query) {
            fused[i] += EXACT_BOOST;
        }
    }

    let mut order: Vec<usize> = (0..candidates.len()).filter(|&i| fused[i] > 0.0).collect();
    order.sort_by(|&a, &b| {
        fused[b]
            .total_cmp(&fused[a])
            .then(keyword[b].total_cmp(&keyword[a]))
            .then(a.cmp(&b))
    });
    order.truncate(limit);
    let results: Vec<Value> = order
        .into_iter()
        .map(|i| {
            let c = &candidates[i];
            json!({
                "id": c.path,
                "title": c.title,
                "url": url(base_url, caller, &c.path),
                "kind": c.kind.as_str(),
                "snippet": c.snippet,
                "score": (fused[i] * 1e6).round() / 1e6,
            })
        })
        .collect();
    Ok(json!({ "results": results }))
}

/// A memory search hit (or an event read by id, shaped the same) as a candidate.
fn memory_candidate(hit: &Value, terms: &[String], tokenizer: &Tokenizer) -> Candidate {
    let id = hit["id"].as_str().unwrap_or_default().to_string();
    let content = hit["content"].as_str().unwrap_or_default();
    let kind = hit["kind"].as_str().unwrap_or("note");
    Candidate {
        kind: Kind::Memory,
        path: format!("/memory/{id}"),
        title: format!("Memory ({kind}): {}", clip(content, 80)),
        snippet: excerpt(content, terms, tokenizer),
        fields: Vec::new(),
        meaning: None,
        exact: vec![id.clone(), format!("/memory/{id}")],
    }
}

/// The event `id` of the caller's org as a memory hit, if it exists.
async fn event_hit(engine: &Engine, caller: &Caller, id: &str) -> Result<Option<Value>, LoreError> {
    let ulid = lore_base::ids::parse_record_id(id, "evt", "id")?;
    let event: Option<lore_memory::event::Event> =
        engine.ports.record(&caller.keys().event(ulid)).await?;
    Ok(event.map(|e| json!({"id": e.id, "content": e.content, "kind": e.kind})))
}
