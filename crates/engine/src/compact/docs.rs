//! The docs `search` finds and `fetch` returns: short topic pages shipped with lore, written in
//! markdown under `src/compact/docs/` and compiled in.

/// One topic page.
pub struct Doc {
    /// The path segment: `/docs/{topic}`.
    pub topic: &'static str,
    pub title: &'static str,
    /// One line, for listings and search snippets.
    pub summary: &'static str,
    /// The page, markdown.
    pub body: &'static str,
}

/// Every topic, in listing order.
pub static DOCS: &[Doc] = &[
    Doc {
        topic: "search-fetch-do",
        title: "Search, fetch, do: the workflow",
        summary: "Find with search, read with fetch (ids are paths; /$.d.ts is your TypeScript), act with a do program run as one Action.",
        body: include_str!("docs/search-fetch-do.md"),
    },
    Doc {
        topic: "sdk",
        title: "The SDK: $, client and ctx",
        summary: "What a program has in scope ($, client, ctx), the two script forms, Nouns (entity types) and their Verbs, e.g. $.Offer.publish({offer: 'offer_1'}).",
        body: include_str!("docs/sdk.md"),
    },
    Doc {
        topic: "modes",
        title: "Modes: try, send and do",
        summary: "How calls are dispatched: try (once, failures throw), send (queued, a receipt), do (durable, retried, replayed by idempotency_key given as an argument or in _meta).",
        body: include_str!("docs/modes.md"),
    },
    Doc {
        topic: "caps",
        title: "Caps: the limits of one run",
        summary: "200 SDK calls, 180 s, 30 s per sleep, 1 MB of output, a step budget, 64 MiB of memory (32 MiB on wasm), and what happens at a cap.",
        body: include_str!("docs/caps.md"),
    },
    Doc {
        topic: "sql",
        title: "SQL over the org's tables",
        summary: "The tables $.sql.query and query_sql read: entities, relationships, events, event_history, entity_types, feeds, operations, actions, metrics and one per entity type.",
        body: include_str!("docs/sql.md"),
    },
    Doc {
        topic: "errors",
        title: "Errors and their stable codes",
        summary: "The error shape {code, message, field?, line, column, cap, limit} and the stable codes: invalid_argument, not_found, needs_write, conflict, cap_exceeded and more.",
        body: include_str!("docs/errors.md"),
    },
];

/// The topic named `topic`.
pub fn find(topic: &str) -> Option<&'static Doc> {
    DOCS.iter().find(|d| d.topic.eq_ignore_ascii_case(topic))
}

/// The topics, for messages: `sdk, modes, ...`.
pub fn topics() -> String {
    DOCS.iter().map(|d| d.topic).collect::<Vec<_>>().join(", ")
}
