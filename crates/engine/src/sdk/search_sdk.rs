//! `search_sdk`: find SDK methods, Noun verbs and runtime helpers by name, namespace or free
//! text. Only what the caller may call is ever returned; `mode: "read"` keeps read methods.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::methods::{HELPERS, METHODS};
use super::results::SdkMethod;
use super::spec::{Cx, may_call};
use super::{nouns, typescript};
use lore_base::error::Result;
use lore_base::model::Tier;
use lore_memory::keyword::Tokenizer;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SearchMode {
    /// Only methods that read.
    Read,
    /// Everything you may call.
    #[default]
    All,
}

/// `search_sdk` arguments.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchSdk {
    /// Words, a method name or a path, e.g. "create a record" or "entities.list".
    pub query: Option<String>,
    /// Only this namespace, e.g. `entities` or a Noun such as `Ticket`.
    pub namespace: Option<String>,
    #[serde(default)]
    pub mode: SearchMode,
    /// At most this many methods (1-100, default 20).
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<usize>,
}

struct Candidate {
    namespace: String,
    name: String,
    method: SdkMethod,
}

/// Runs a search for the caller.
pub async fn search_sdk(cx: &Cx<'_>, args: SearchSdk) -> Result<Value> {
    let allowed = match args.mode {
        SearchMode::Read => Tier::Read,
        SearchMode::All => cx.allowed,
    };
    let mut candidates: Vec<Candidate> = METHODS
        .iter()
        .filter(|m| may_call(cx.caller, m.tier, allowed))
        .map(|m| Candidate {
            namespace: m.namespace.into(),
            name: m.name.into(),
            method: SdkMethod {
                path: m.path(),
                signature: typescript::signature(m),
                description: m.description.into(),
                access: m.tier.as_str().into(),
                mode: m.mode.as_str().into(),
            },
        })
        .collect();
    let (_, noun_methods) = nouns::catalog(cx).await?;
    candidates.extend(
        noun_methods
            .iter()
            .filter(|m| may_call(cx.caller, m.tier, allowed))
            .map(|m| Candidate {
                namespace: m.noun.clone(),
                name: m.verb.clone(),
                method: SdkMethod {
                    path: m.path(),
                    signature: typescript::noun_signature(m),
                    description: m.description.clone(),
                    access: m.tier.as_str().into(),
                    mode: m.mode.as_str().into(),
                },
            }),
    );
    candidates.extend(HELPERS.iter().map(|(path, sig, description)| {
        let (namespace, name) = path.split_once('.').unwrap_or(("ctx", path));
        Candidate {
            namespace: namespace.into(),
            name: name.into(),
            method: SdkMethod {
                path: (*path).into(),
                signature: format!("ctx.{sig}"),
                description: (*description).into(),
                access: "read".into(),
                mode: "try".into(),
            },
        }
    }));
    if let Some(ns) = &args.namespace {
        candidates.retain(|c| c.namespace.eq_ignore_ascii_case(ns));
    }
    let limit = args.limit.unwrap_or(20).clamp(1, 100);
    let query = args.query.as_deref().map(str::trim).unwrap_or_default();
    if query.is_empty() {
        let methods: Vec<SdkMethod> = candidates
            .into_iter()
            .take(limit)
            .map(|c| c.method)
            .collect();
        return Ok(json!({ "methods": methods }));
    }
    let tokenizer = Tokenizer::default();
    let docs: Vec<(Vec<String>, Vec<String>, Vec<String>)> = candidates
        .iter()
        .map(|c| {
            (
                tokenizer.terms(&c.name),
                tokenizer.terms(&c.namespace),
                tokenizer.terms(&c.method.description),
            )
        })
        .collect();
    let terms = tokenizer.terms(query);
    let mut df: HashMap<&str, usize> = HashMap::new();
    for (name, ns, desc) in &docs {
        for t in &terms {
            if name.contains(t) || ns.contains(t) || desc.contains(t) {
                *df.entry(t.as_str()).or_default() += 1;
            }
        }
    }
    let n = docs.len() as f64;
    let exact = query.to_ascii_lowercase();
    let mut scored: Vec<(f64, usize)> = docs
        .iter()
        .enumerate()
        .filter_map(|(i, (name, ns, desc))| {
            let mut score = 0.0;
            for t in &terms {
                let idf = (1.0 + n / (1.0 + *df.get(t.as_str()).unwrap_or(&0) as f64)).ln();
                let weight = if name.contains(t) {
                    3.0
                } else if ns.contains(t) {
                    2.0
                } else if desc.contains(t) {
                    1.0
                } else {
                    0.0
                };
                score += weight * idf;
            }
            let path = candidates[i].method.path.to_ascii_lowercase();
            if path == exact || candidates[i].name.eq_ignore_ascii_case(&exact) {
                score += 100.0;
            }
            (score > 0.0).then_some((score, i))
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let methods: Vec<&SdkMethod> = scored
        .iter()
        .take(limit)
        .map(|(_, i)| &candidates[*i].method)
        .collect();
    Ok(json!({ "methods": methods }))
}
