//! What `search` and `fetch` share: the Verbs a caller may call, the newest entities, the
//! `url` of a path, and short excerpts.

use std::collections::HashSet;

use serde_json::Value;

use crate::instance::Engine;
use crate::sdk::methods::METHODS;
use crate::sdk::nouns::{self, NounMethod};
use crate::sdk::{may_call, tstype, typescript};
use lore_base::error::Result;
use lore_base::model::{Mode, Tier};
use lore_directory::Caller;
use lore_records::entities::Entity;
use lore_records::operations::{self, Operation};
use lore_records::types::{self, EntityType};

/// At most this many entities are read for one `search` (the newest, see [`newest_entities`]).
pub const ENTITY_SCAN: usize = 5_000;

/// Longest snippet, in characters.
pub const SNIPPET_CHARS: usize = 300;

/// Where a Verb's argument schema comes from (built only for the pages that show it).
pub enum VerbArgs {
    Static(fn() -> Value),
    BuiltIn(String),
    Operation(Value),
}

/// One callable Verb: a static SDK method (`entities.list`) or a Noun's (`Offer.publish`).
pub struct Verb {
    pub path: String,
    /// The namespace or Noun.
    pub namespace: String,
    pub name: String,
    pub signature: String,
    pub description: String,
    pub tier: Tier,
    pub mode: Mode,
    /// Whether the namespace is a Noun.
    pub noun: bool,
    pub args: VerbArgs,
    /// The TypeScript result type.
    pub returns: String,
}

impl Verb {
    pub fn args_schema(&self) -> Value {
        match &self.args {
            VerbArgs::Static(f) => f(),
            VerbArgs::BuiltIn(verb) => nouns::built_in_schema(verb).unwrap_or_default(),
            VerbArgs::Operation(schema) => schema.clone(),
        }
    }
}

/// The org's Nouns and every Verb the caller may call (through a surface that allows admin
/// methods; `may_call` then leaves out what the role or the token's scopes do not allow).
pub struct Catalog {
    pub types: Vec<EntityType>,
    pub noun_methods: Vec<NounMethod>,
    pub verbs: Vec<Verb>,
}

impl Catalog {
    pub async fn load(engine: &Engine, caller: &Caller) -> Result<Self> {
        let types = types::list(&engine.ports, caller).await?;
        let ops: Vec<Operation> = if types.is_empty() {
            Vec::new()
        } else {
            operations::list(&engine.ports, caller).await?
        };
        let noun_methods: Vec<NounMethod> =
            types.iter().flat_map(|t| nouns::verbs(t, &ops)).collect();
        let mut verbs: Vec<Verb> = METHODS
            .iter()
            .filter(|m| may_call(caller, m.tier, Tier::Admin))
            .map(|m| Verb {
                path: m.path(),
                namespace: m.namespace.into(),
                name: m.name.into(),
                signature: typescript::signature(m),
                description: m.description.into(),
                tier: m.tier,
                mode: m.mode,
                noun: false,
                args: VerbArgs::Static(m.args),
                returns: tstype::rust_to_ts(m.returns),
            })
            .collect();
        for m in noun_methods
            .iter()
            .filter(|m| may_call(caller, m.tier, Tier::Admin))
        {
            let args = match nouns::built_in_schema(&m.verb) {
                Some(_) => VerbArgs::BuiltIn(m.verb.clone()),
                None => {
                    let type_name = types.iter().find(|t| t.noun == m.noun).map(|t| &t.name);
                    let schema = ops
                        .iter()
                        .find(|o| o.name == m.verb && o.entity_type.as_ref() == type_name)
                        .map(|o| o.args_schema.clone())
                        .unwrap_or_default();
                    VerbArgs::Operation(schema)
                }
            };
            verbs.push(Verb {
                path: m.path(),
                namespace: m.noun.clone(),
                name: m.verb.clone(),
                signature: typescript::noun_signature(m),
                description: m.description.clone(),
                tier: m.tier,
                mode: m.mode,
                noun: true,
                args,
                returns: m.returns_ts.clone(),
            });
        }
        Ok(Self {
            types,
            noun_methods,
            verbs,
        })
    }

    /// The Noun named `noun` (or its type name), any case.
    pub fn noun(&self, noun: &str) -> Option<&EntityType> {
        self.types
            .iter()
            .find(|t| t.noun == noun || t.name == noun)
            .or_else(|| {
                self.types
                    .iter()
                    .find(|t| t.noun.eq_ignore_ascii_case(noun))
            })
    }

    pub fn verb(&self, path: &str) -> Option<&Verb> {
        self.verbs.iter().find(|v| v.path == path)
    }

    /// The callable Verbs of one Noun.
    pub fn verbs_of<'a>(&'a self, noun: &'a str) -> impl Iterator<Item = &'a Verb> + 'a {
        self.verbs
            .iter()
            .filter(move |v| v.noun && v.namespace == noun)
    }

    /// The Nouns, for messages: `Offer, Ticket` (or a note that there are none).
    pub fn noun_names(&self) -> String {
        if self.types.is_empty() {
            "this org has no entity types yet".into()
        } else {
            let names: Vec<&str> = self.types.iter().map(|t| t.noun.as_str()).collect();
            format!("Nouns: {}", names.join(", "))
        }
    }
}

/// A ULID's first ten characters for time `ms`: every id made at or after `ms` sorts after it.
fn ulid_time_prefix(ms: i64) -> String {
    let ms = u64::try_from(ms).unwrap_or(0);
    let mut s = ulid::Ulid::from_parts(ms, 0)
        .to_string()
        .to_ascii_lowercase();
    s.truncate(10);
    s
}

/// The newest entities of the caller's org, newest first, at most `max`. Storage scans run
/// forward only, so this reads time windows back from now (a day, 30 days, a year, all time):
/// the widest window that holds fewer than `max` entities is read whole, and when the next one
/// holds more, its oldest entities fill the rest. At most about `max` entities are read per
/// window tried.
pub async fn newest_entities(engine: &Engine, caller: &Caller, max: usize) -> Result<Vec<Entity>> {
    const DAY_MS: i64 = 86_400_000;
    let prefix = caller.keys().entities();
    let now = engine.ports.clock.now_ms();
    let mut kept: Vec<(String, Vec<u8>)> = Vec::new();
    for window in [Some(DAY_MS), Some(30 * DAY_MS), Some(365 * DAY_MS), None] {
        let mut after = window
            .filter(|w| now > *w)
            .map(|w| format!("{prefix}{}", ulid_time_prefix(now - w)));
        let mut got: Vec<(String, Vec<u8>)> = Vec::new();
        let complete = loop {
            let page = engine
                .ports
                .storage
                .scan(&prefix, after.as_deref(), 500)
                .await?;
            got.extend(page.entries);
            if got.len() >= max {
                break false;
            }
            match page.cursor {
                Some(c) => after = Some(c),
                None => break true,
            }
        };
        if complete {
            kept = got;
            continue;
        }
        let have: HashSet<String> = kept.iter().map(|(k, _)| k.clone()).collect();
        for entry in got {
            if kept.len() >= max {
                break;
            }
            if !have.contains(&entry.0) {
                kept.push(entry);
            }
        }
        break;
    }
    kept.sort_by(|a, b| b.0.cmp(&a.0));
    kept.truncate(max);
    kept.iter()
        .map(|(_, bytes)| Ok(serde_json::from_slice::<Entity>(bytes)?))
        .collect()
}

/// The `url` of `path`: the REST fetch route under `base_url`, else a `lore://` URL.
pub fn url(base_url: Option<&str>, caller: &Caller, path: &str) -> String {
    match base_url {
        Some(base) => format!(
            "{}/api/{}/fetch?id={}",
            base.trim_end_matches('/'),
            caller.org(),
            url::form_urlencoded::byte_serialize(path.as_bytes()).collect::<String>()
        ),
        None => format!("lore://{}{path}", caller.org()),
    }
}

/// `text` cut to at most `max` characters (on a character boundary, `…` when cut), on one line.
pub fn clip(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let mut out: String = flat.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// A snippet of `text` around the first word matching one of `terms` (stemmed), at most
/// [`SNIPPET_CHARS`] characters.
pub fn excerpt(
    text: &str,
    terms: &[String],
    tokenizer: &lore_memory::keyword::Tokenizer,
) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut start = 0;
    let mut offset = 0;
    for word in flat.split(' ') {
        if tokenizer.terms(word).iter().any(|t| terms.contains(t)) {
            start = offset;
            break;
        }
        offset += word.len() + 1;
    }
    // Begin a little before the match, at a word boundary.
    let lead = 60;
    let mut begin = start.saturating_sub(lead);
    while !flat.is_char_boundary(begin) {
        begin -= 1;
    }
    if begin > 0 {
        begin = flat[begin..start]
            .find(' ')
            .map_or(begin, |i| begin + i + 1);
    }
    let tail = clip(&flat[begin..], SNIPPET_CHARS - usize::from(begin > 0));
    if begin > 0 {
        format!("…{tail}")
    } else {
        tail
    }
}

/// The text values inside a JSON value (strings, numbers, booleans), space-separated, at most
/// about `max` bytes: what keyword search reads of an entity's properties.
pub fn value_text(value: &Value, max: usize) -> String {
    fn walk(v: &Value, out: &mut String, max: usize) {
        if out.len() >= max {
            return;
        }
        match v {
            Value::String(s) => {
                out.push_str(s);
                out.push(' ');
            }
            Value::Number(n) => {
                out.push_str(&n.to_string());
                out.push(' ');
            }
            Value::Bool(b) => {
                out.push_str(if *b { "true " } else { "false " });
            }
            Value::Array(items) => items.iter().for_each(|i| walk(i, out, max)),
            Value::Object(map) => map.iter().for_each(|(k, v)| {
                out.push_str(k);
                out.push(' ');
                walk(v, out, max);
            }),
            Value::Null => {}
        }
    }
    let mut out = String::new();
    walk(value, &mut out, max);
    out
}

/// A memory search for `query` with the defaults (current memories, every kind).
pub fn memory_query(query: &str, limit: usize) -> lore_memory::SearchInput {
    lore_memory::SearchInput {
        query: query.to_string(),
        limit: Some(limit),
        kinds: None,
        entity_ids: None,
        author: None,
        since: None,
        until: None,
        include_superseded: false,
        as_of: None,
    }
}
