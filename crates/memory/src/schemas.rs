//! The JSON Schemas of the memory calls, `save_memory` / `memory.save` and `search_memory` /
//! `memory.search`: the tool table and the SDK registry both take them from here.

use serde_json::{Value, json};

const MAX_CONTENT: usize = 32_768;

fn kind_schema() -> Value {
    json!({
        "type": "string",
        "enum": super::event::MEMORY_KINDS,
        "description": "What sort of memory this is. Default: note."
    })
}

fn memory_item_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "content": {"type": "string", "minLength": 1, "maxLength": MAX_CONTENT, "description": "The text to remember, self-contained: who, what, when."},
            "kind": kind_schema(),
            "entity_ids": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 200}, "maxItems": 100, "description": "Ids (ent_…) of existing entities this memory is about."},
            "supersedes_event_id": {"type": "string", "description": "Id of an earlier memory this one replaces; the old one is kept in history and hidden from searches."},
            "idempotency_key": {"type": "string", "minLength": 1, "maxLength": 200, "description": "Retrying with the same key returns the first save's id instead of saving twice."},
            "payload": {"description": "Optional structured data kept with the memory."},
            "occurred_at": {"type": "string", "maxLength": 64, "description": "When what this memory describes happened (RFC 3339 or YYYY-MM-DD), when that is not now: a meeting last week, a chat turn being imported. since/until filter on it; default: the time of saving."}
        },
        "required": ["content"],
        "additionalProperties": false
    })
}

pub fn save_input() -> Value {
    let item = memory_item_schema();
    let mut single = item.clone();
    single["properties"]["memories"] = json!({
        "type": "array", "minItems": 1, "maxItems": 100, "items": item,
        "description": "Several memories at once, instead of the top-level fields."
    });
    single["properties"]["wait_for_vectors"] = json!({
        "type": "boolean", "default": false,
        "description": "Answer only once the memories' vectors are stored, so that a search by meaning finds them at once. By default a save answers as soon as its memories are durable and found by keywords; their vectors follow within seconds (the answer says vectors: pending)."
    });
    single["required"] = json!([]);
    single["oneOf"] = json!([
        {"required": ["content"], "not": {"required": ["memories"]}},
        {"required": ["memories"], "propertyNames": {"enum": ["memories", "wait_for_vectors"]}}
    ]);
    single
}

pub fn save_output() -> Value {
    json!({
        "type": "object",
        "properties": {
            "ids": {"type": "array", "items": {"type": "string"}, "description": "Memory ids, in input order: new ones, or the existing one where the save was deduplicated (or retried with its idempotency key)."},
            "deduplicated": {"type": "boolean", "description": "True when at least one memory was not stored again because a current memory with the same text, entities, kind, payload and author exists; its id is returned instead."},
            "deduplicated_indexes": {"type": "array", "items": {"type": "integer"}, "description": "Which memories (0-based, input order) were deduplicated; present when deduplicated is true."},
            "vectors": {"type": "string", "enum": ["pending"], "description": "pending: the new memories are durable and found by keywords; the background embedder stores their vectors shortly (pass wait_for_vectors to wait for them). Absent when the vectors were stored with the memories."}
        },
        "required": ["ids", "deduplicated"]
    })
}

pub fn search_input() -> Value {
    json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": 2000, "description": "Words to look for."},
            "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
            "kinds": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 64}, "maxItems": 20, "description": "Only these kinds: fact, preference, decision, observation, note, or a feed's event kind."},
            "entity_ids": {"type": "array", "items": {"type": "string"}, "description": "Only memories linked to one of these entities."},
            "author": {"type": "string", "description": "Only memories saved by this principal id."},
            "since": {"type": "string", "description": "Only memories about a time at or after this one (their occurred_at, else when they were saved; RFC 3339 or YYYY-MM-DD)."},
            "until": {"type": "string", "description": "Only memories about a time at or before this one (their occurred_at, else when they were saved; RFC 3339 or YYYY-MM-DD)."},
            "include_superseded": {"type": "boolean", "default": false, "description": "Also return memories that a later one replaced."},
            "as_of": {"type": "string", "description": "Answer as of this time (RFC 3339 or YYYY-MM-DD): only memories saved by then, and a memory replaced after then counts as current."}
        },
        "required": ["query"],
        "additionalProperties": false
    })
}

pub fn search_output() -> Value {
    json!({
        "type": "object",
        "properties": {
            "results": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "content": {"type": "string"},
                    "kind": {"type": "string"},
                    "score": {"type": "number"},
                    "entity_ids": {"type": "array", "items": {"type": "string"}},
                    "author": {"type": "string"},
                    "created_at": {"type": "string"},
                    "occurred_at": {"type": "string"},
                    "supersedes_event_id": {"type": "string"},
                    "superseded_by": {"type": "string"},
                    "payload": {}
                },
                "required": ["id", "content", "kind", "score", "entity_ids", "author", "created_at"]
            }},
            "pending_vectors": {"type": "integer", "minimum": 1, "description": "How many of the org's memories have no vectors yet (saved moments ago; the background embedder is on them): this search ranked them by keywords alone. Absent when every memory has its vectors."}
        },
        "required": ["results"]
    })
}
