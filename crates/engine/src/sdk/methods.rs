//! The static entries of the SDK registry, one per method. Adding a method means adding one
//! entry here: dispatch, access checks, `search_sdk`, the `.d.ts`, the argument JSON Schema
//! and the REST route all follow from it.

use serde_json::Value;

use super::names::is_reserved;
use super::results::{MemoryHit, MemoryPage, MemoryResults, MemoryVersions, SavedIds};
use super::spec::{BoxFuture, Cx, MethodSpec, authorize, parse_args};
use lore_base::error::LoreError;
use lore_base::ids::parse_record_id;
use lore_base::model::{Mode, Tier};
use lore_base::schema::schema_of;
use lore_base::time::format_time;
use lore_directory::admin::{IssuedToken, TokenSummary};
use lore_directory::invites::{self, Invite, InviteArgs, InviteOutcome, UninviteArgs};
use lore_memory::event::Event;
use lore_memory::{ListInput, SaveInput, SearchInput};
use lore_records::actions::{Action, ListActions};
use lore_records::behaviors::{Behavior, CreateBehavior, UpdateBehavior};
use lore_records::connections::{
    CallConnection, CallResult, Connection, CreateConnection, UpdateConnection,
};
use lore_records::entities::{
    CreateEntities, CreateEntity, DeleteEntity, Entity, GetEntities, GetEntity, ListEntities,
    UpdateEntity,
};
use lore_records::feeds::{
    CreateFeed, Feed, FeedCreated, FeedItems, FeedWithSecret, PullResult, ReadFeed, UpdateFeed,
};
use lore_records::metrics::{DefineMetric, Metric, MetricInfo, MetricValue, QueryMetric};
use lore_records::operations::{CreateOperation, Operation, RunOperation, UpdateOperation};
use lore_records::people::{
    ByPrincipal, CreateAgent, CreateToken, GrantInfo, Member, OrgInfo, RevokeToken, SetRole,
    UpdateOrg,
};
use lore_records::relationships::{
    CreateRelationship, LinkEntity, ListRelationships, Relationship,
};
use lore_records::sql::{QuerySql, SqlResult};
use lore_records::types::{CreateType, EntityType, UpdateType};
use lore_records::{
    ById, ByName, Done, NoArgs, Page, Stored, actions, behaviors, connections, entities, feeds,
    metrics, operations, people, relationships, types,
};

/// `memory.get`
async fn memory_get(cx: &Cx<'_>, id: &str) -> lore_base::error::Result<MemoryHit> {
    let ulid = parse_record_id(id, "evt", "id")?;
    let event: Event = cx
        .engine
        .ports
        .record(&cx.caller.keys().event(ulid))
        .await?
        .ok_or_else(|| LoreError::not_found(format!("memory {id} in org {}", cx.caller.org())))?;
    Ok(MemoryHit {
        id: event.id,
        content: event.content,
        kind: event.kind,
        score: None,
        entity_ids: event.entity_ids,
        author: event.author,
        created_at: format_time(event.created_at_ms),
        occurred_at: event.occurred_at_ms.map(format_time),
        supersedes_event_id: event.supersedes_event_id,
        superseded_by: None,
        payload: event.payload,
    })
}

/// One registry entry. `$args` is deserialized from the validated arguments; `$ret` is what
/// the body returns, and its name is the TypeScript result type.
macro_rules! method {
    ($ns:literal . $name:ident, $tier:ident, $mode:ident, $args:ty => $ret:ty, $desc:expr,
     |$cx:ident, $a:ident| $body:expr) => {
        method!(@ $ns, $name, $tier, $mode, $args, schema_of::<$args>, $ret, $desc, |$cx, $a| $body)
    };
    ($ns:literal . $name:ident, $tier:ident, $mode:ident, $args:ty [$schema:path] => $ret:ty,
     $desc:expr, |$cx:ident, $a:ident| $body:expr) => {
        method!(@ $ns, $name, $tier, $mode, $args, $schema, $ret, $desc, |$cx, $a| $body)
    };
    (@ $ns:literal, $name:ident, $tier:ident, $mode:ident, $args:ty, $schema:expr, $ret:ty,
     $desc:expr, |$cx:ident, $a:ident| $body:expr) => {
        MethodSpec {
            namespace: $ns,
            name: stringify!($name),
            description: $desc,
            tier: Tier::$tier,
            mode: Mode::$mode,
            args: $schema,
            returns: stringify!($ret),
            run: {
                fn run<'a>($cx: &'a Cx<'a>, raw: Value) -> BoxFuture<'a> {
                    Box::pin(async move {
                        #[allow(unused_variables)]
                        let $a: $args = parse_args(raw)?;
                        let out: $ret = $body;
                        Ok(serde_json::value::to_raw_value(&out)?)
                    })
                }
                run
            },
        }
    };
}

/// Every static SDK method, grouped by namespace.
pub static METHODS: &[MethodSpec] = &[
    // entities
    method!("entities".get, Read, Try, GetEntity => Entity,
        "Read one record (entity) by id.",
        |cx, a| entities::get(&cx.engine.ports, cx.caller, &a.id).await?),
    method!("entities".get_many, Read, Try, GetEntities => Vec<Stored<Entity>>,
        "Read up to 100 records (entities) by id in one call, in the order given; ids that do not exist are left out.",
        |cx, a| entities::get_many(&cx.engine.ports, cx.caller, &a.ids).await?),
    method!("entities".list, Read, Try, ListEntities => Page<Stored<Entity>>,
        "List records (entities), optionally of one type and where properties equal given values; paginated with cursor.",
        |cx, a| entities::list(&cx.engine.ports, cx.caller, a).await?),
    method!("entities".create, Write, Try, CreateEntity => Entity,
        "Create a record (an entity) of a type; its properties are validated against the type's JSON Schema.",
        |cx, a| entities::create(&cx.engine.ports, &*cx.engine.sql_cache, &cx.engine.schemas, cx.caller, a).await?),
    method!("entities".create_many, Write, Try, CreateEntities => Page<Entity>,
        "Create up to 500 entities of one type in one call, all or none (bulk import).",
        |cx, a| entities::create_many(&cx.engine.ports, &*cx.engine.sql_cache, &cx.engine.schemas, cx.caller, a).await?),
    method!("entities".update, Write, Try, UpdateEntity => Entity,
        "Update an entity: rename it or merge new property values (null removes one); pass version to refuse a stale write.",
        |cx, a| entities::update(&cx.engine.ports, &*cx.engine.sql_cache, &cx.engine.schemas, cx.caller, a).await?),
    method!("entities".delete, Write, Try, DeleteEntity => Done,
        "Delete an entity and every relationship that touches it.",
        |cx, a| relationships::delete_entity(&cx.engine.ports, &*cx.engine.sql_cache, cx.caller, a).await?),
    method!("entities".link, Write, Try, LinkEntity => Relationship,
        "Link two entities: a typed relationship from one to the other.",
        |cx, a| relationships::link(&cx.engine.ports, &*cx.engine.sql_cache, cx.caller, a).await?),
    // relationships
    method!("relationships".get, Read, Try, ById => Relationship,
        "Read one relationship (edge between two entities) by id.",
        |cx, a| relationships::get(&cx.engine.ports, cx.caller, &a.id).await?),
    method!("relationships".list, Read, Try, ListRelationships => Page<Relationship>,
        "List relationships: all, or the edges of one entity (out, in or both), optionally of one type.",
        |cx, a| relationships::list(&cx.engine.ports, cx.caller, a).await?),
    method!("relationships".create, Write, Try, CreateRelationship => Relationship,
        "Create a typed relationship (edge) from one entity to another, with properties.",
        |cx, a| relationships::create(&cx.engine.ports, &*cx.engine.sql_cache, cx.caller, a).await?),
    method!("relationships".delete, Write, Try, ById => Done,
        "Delete a relationship.",
        |cx, a| relationships::delete(&cx.engine.ports, &*cx.engine.sql_cache, cx.caller, &a.id).await?),
    // memory
    method!("memory".search, Read, Try, SearchInput [lore_memory::schemas::search_input] => MemoryResults,
        "Search the org's shared memory (facts, decisions, preferences, observations, notes, feed items) by meaning and keywords, with filters.",
        |cx, a| serde_json::from_value(cx.engine.memory.search(&cx.engine.ports, cx.caller, a).await?.into_value()?)?),
    method!("memory".save, Write, Try, SaveInput [lore_memory::schemas::save_input] => SavedIds,
        "Save one memory or several so the org's other agents share them; supersedes_event_id replaces an outdated one.",
        |cx, a| serde_json::from_value(cx.engine.save_memory(cx.caller, a).await?)?),
    method!("memory".list, Read, Try, ListInput => MemoryPage,
        "List the org's memories newest first (by when they were saved), with the search's filters; paginated with cursor.",
        |cx, a| serde_json::from_value(cx.engine.memory.list(&cx.engine.ports, cx.caller, a).await?)?),
    method!("memory".versions, Read, Try, ById => MemoryVersions,
        "Every version of a memory, oldest first: what it replaced and what replaced it since.",
        |cx, a| serde_json::from_value(cx.engine.memory.versions(&cx.engine.ports, cx.caller, &a.id).await?)?),
    method!("memory".get, Read, Try, ById => MemoryHit,
        "Read one memory (event) by id, superseded or not.",
        |cx, a| memory_get(cx, &a.id).await?),
    // templates
    method!("templates".list, Read, Try, NoArgs => Vec<EntityType>,
        "List the entity types (templates, Nouns) of the org with their property schemas.",
        |cx, a| types::list(&cx.engine.ports, cx.caller).await?),
    method!("templates".get, Read, Try, ByName => EntityType,
        "Read one entity type (template) and its property schema.",
        |cx, a| types::get(&cx.engine.ports, cx.caller, &a.name).await?),
    method!("templates".create, Admin, Try, CreateType => EntityType,
        "Define an entity type (template): a name, a description and a JSON Schema for its properties. It becomes a Noun namespace.",
        |cx, a| types::create(&cx.engine.ports, cx.caller, a, is_reserved).await?),
    method!("templates".update, Admin, Try, UpdateType => EntityType,
        "Change an entity type's description or property schema.",
        |cx, a| types::update(&cx.engine.ports, cx.caller, a).await?),
    method!("templates".delete, Admin, Try, ByName => Done,
        "Delete an entity type that no entity uses.",
        |cx, a| types::delete(&cx.engine.ports, cx.caller, a).await?),
    // feeds
    method!("feeds".list, Read, Try, NoArgs => Vec<Feed>,
        "List the org's feeds (webhook, connection and virtual sources of events).",
        |cx, a| feeds::list(&cx.engine.ports, cx.caller).await?),
    method!("feeds".get, Read, Try, ByName => Feed,
        "Read one feed's definition.",
        |cx, a| feeds::get(&cx.engine.ports, cx.caller, &a.name).await?),
    method!("feeds".create, Admin, Try, CreateFeed => FeedCreated,
        "Create a feed: a webhook (signed POSTs become events; the secret is shown once), a connection feed (pulled) or a virtual feed (read live).",
        |cx, a| feeds::create(&cx.engine.ports, cx.caller, a).await?),
    method!("feeds".update, Admin, Try, UpdateFeed => Feed,
        "Change a feed's description, event kind, path or JSON pointers.",
        |cx, a| feeds::update(&cx.engine.ports, cx.caller, a).await?),
    method!("feeds".delete, Admin, Try, ByName => Done,
        "Delete a feed (its events stay in memory).",
        |cx, a| feeds::delete(&cx.engine.ports, cx.caller, a).await?),
    method!("feeds".rotate_secret, Admin, Try, ByName => FeedWithSecret,
        "Replace a webhook feed's signing secret; the new one is shown once.",
        |cx, a| feeds::rotate_secret(&cx.engine.ports, cx.caller, a).await?),
    method!("feeds".pull, Write, Do, ByName => PullResult,
    "Pull a connection feed now: new items become events, items seen before are skipped.",
    |cx, a| {
        let (pulled, events) = feeds::pull(&cx.engine.ports, &cx.engine.memory, cx.caller, a).await?;
        cx.engine.after_commit(cx.caller.org(), events).await;
        pulled
    }),
    method!("feeds".read, Read, Try, ReadFeed => FeedItems,
        "Read a virtual feed's items live through its connection (never stored).",
        |cx, a| feeds::read(&cx.engine.ports, cx.caller, a).await?),
    // connections
    method!("connections".list, Read, Try, NoArgs => Vec<Connection>,
        "List the org's connections to external HTTP services (credentials are never shown).",
        |cx, a| connections::list(&cx.engine.ports, cx.caller).await?),
    method!("connections".get, Read, Try, ByName => Connection,
        "Read one connection (without its credential).",
        |cx, a| connections::get(&cx.engine.ports, cx.caller, &a.name).await?),
    method!("connections".create, Admin, Try, CreateConnection => Connection,
        "Add a connection to an external HTTP service: base URL, allowed hosts and a write-only credential.",
        |cx, a| connections::create(&cx.engine.ports, cx.caller, a).await?),
    method!("connections".update, Admin, Try, UpdateConnection => Connection,
        "Change a connection; a new secret replaces the stored credential.",
        |cx, a| connections::update(&cx.engine.ports, cx.caller, a).await?),
    method!("connections".delete, Admin, Try, ByName => Done,
        "Delete a connection and its credential.",
        |cx, a| connections::delete(&cx.engine.ports, cx.caller, a).await?),
    method!("connections".call, Write, Try, CallConnection => CallResult,
        "Send one HTTP request through a connection; lore adds the credential and keeps it out of the result.",
        |cx, a| connections::call(&cx.engine.ports, cx.caller, a).await?),
    // operations
    method!("operations".list, Read, Try, NoArgs => Vec<Operation>,
        "List the org's operations (named Verbs: scripts or HTTP calls through a connection).",
        |cx, a| operations::list(&cx.engine.ports, cx.caller).await?),
    method!("operations".get, Read, Try, ByName => Operation,
        "Read one operation's definition.",
        |cx, a| operations::get(&cx.engine.ports, cx.caller, &a.name).await?),
    method!("operations".create, Admin, Try, CreateOperation => Operation,
        "Define an operation (a Verb): a TypeScript body or an HTTP call through a connection, with its access tier and default mode; bind it to an entity type to make it a custom verb of that Noun.",
        |cx, a| operations::create(&cx.engine.ports, cx.caller, a).await?),
    method!("operations".update, Admin, Try, UpdateOperation => Operation,
        "Change an operation's body, schema, access tier or mode.",
        |cx, a| operations::update(&cx.engine.ports, cx.caller, a).await?),
    method!("operations".delete, Admin, Try, ByName => Done,
        "Delete an operation.",
        |cx, a| operations::delete(&cx.engine.ports, cx.caller, a).await?),
    method!("operations".run, Read, Try, RunOperation => Value,
    "Run an operation by name with arguments; it needs the access tier the operation declares.",
    |cx, a| {
        let op = operations::get(&cx.engine.ports, cx.caller, &a.name).await?;
        authorize(cx.engine, cx.caller, op.access, cx.allowed, &format!("operations.run({})", op.name))?;
        super::invoke::run(cx.engine, cx.caller, &op, a.args, cx.allowed).await?
    }),
    // behaviors
    method!("behaviors".list, Read, Try, NoArgs => Vec<Behavior>,
        "List the org's behaviors (triggers with reaction scripts).",
        |cx, a| behaviors::list(&cx.engine.ports, cx.caller).await?),
    method!("behaviors".get, Read, Try, ByName => Behavior,
        "Read one behavior.",
        |cx, a| behaviors::get(&cx.engine.ports, cx.caller, &a.name).await?),
    method!("behaviors".create, Admin, Try, CreateBehavior => Behavior,
        "Create a behavior: a trigger (event kinds, a feed or a schedule) and a reaction script run with your permissions.",
        |cx, a| behaviors::create(&cx.engine.ports, cx.caller, a).await?),
    method!("behaviors".update, Admin, Try, UpdateBehavior => Behavior,
        "Change a behavior's trigger, script or enabled flag.",
        |cx, a| behaviors::update(&cx.engine.ports, cx.caller, a).await?),
    method!("behaviors".delete, Admin, Try, ByName => Done,
        "Delete a behavior.",
        |cx, a| behaviors::delete(&cx.engine.ports, cx.caller, a).await?),
    // actions
    method!("actions".list, Read, Try, ListActions => Page<Action>,
        "List the audit log of actions (writes, admin changes, script runs); members see their own.",
        |cx, a| actions::list(&cx.engine.ports, cx.caller, a).await?),
    method!("actions".get, Read, Try, ById => Action,
        "Read one action of the audit log with its steps.",
        |cx, a| actions::get(&cx.engine.ports, cx.caller, &a.id).await?),
    // metrics
    method!("metrics".list, Read, Try, NoArgs => Vec<MetricInfo>,
        "List metrics: built-in usage counters and the org's own SQL metrics.",
        |cx, a| metrics::list(&cx.engine.ports, cx.caller).await?),
    method!("metrics".query, Read, Try, QueryMetric => MetricValue,
        "Evaluate a metric: a built-in one (e.g. tool_calls) over a day range, in total or grouped by tool or day, or an org SQL metric through the query_sql engine.",
        |cx, a| lore_records::sql::metrics::query(&cx.engine.ports, &cx.engine.usage, &cx.engine.config.sql, cx.engine.offload.as_deref(), cx.caller, a).await?),
    method!("metrics".define, Admin, Try, DefineMetric => Metric,
        "Define an org metric: a named read-only SQL query with a value column.",
        |cx, a| lore_records::sql::metrics::define(&cx.engine.ports, cx.caller, a).await?),
    method!("metrics".delete, Admin, Try, ByName => Done,
        "Delete an org metric.",
        |cx, a| metrics::delete(&cx.engine.ports, cx.caller, a).await?),
    // sql
    method!("sql".query, Read, Try, QuerySql => SqlResult,
        "Run one read-only SQL SELECT over the org's tables (entities, relationships, events, event_history, entity_types, feeds, operations, actions, metrics, one per entity type, one per virtual feed); paginated like query_sql.",
        |cx, a| lore_records::sql::query(&cx.engine.ports, cx.caller, &cx.engine.config.sql, &cx.engine.sql_cache, cx.engine.offload.as_deref(), a).await?),
    // agents
    method!("agents".list, Read, Try, NoArgs => Vec<Member>,
        "List the org's registered agents.",
        |cx, a| people::list_agents(&cx.engine.ports, cx.caller).await?),
    method!("agents".get, Read, Try, ById => Member,
        "Read one agent.",
        |cx, a| people::get_agent(&cx.engine.ports, cx.caller, &a.id).await?),
    method!("agents".create, Admin, Try, CreateAgent => Member,
        "Register an agent principal in the org with a role; give it tokens with tokens.create.",
        |cx, a| people::create_agent(&cx.engine.ports, cx.caller, a).await?),
    method!("agents".delete, Admin, Try, ById => Done,
        "Remove an agent from the org and revoke its tokens.",
        |cx, a| people::delete_agent(&cx.engine.ports, cx.caller, &a.id).await?),
    // members
    method!("members".list, Read, Try, NoArgs => Vec<Member>,
        "List the org's members (users and agents) and their roles.",
        |cx, a| people::list_members(&cx.engine.ports, cx.caller).await?),
    method!("members".add, Admin, Try, SetRole => Member,
        "Invite an existing principal into the org with a role.",
        |cx, a| people::add_member(&cx.engine.ports, cx.caller, a).await?),
    method!("members".update, Admin, Try, SetRole => Member,
        "Change a member's role (only owners grant or remove owner).",
        |cx, a| people::update_member(&cx.engine.ports, cx.caller, a).await?),
    method!("members".remove, Admin, Try, ByPrincipal => Done,
        "Remove a member from the org and revoke their tokens for it.",
        |cx, a| people::remove_member(&cx.engine.ports, cx.caller, a).await?),
    method!("members".invite, Admin, Try, InviteArgs => InviteOutcome,
        "Invite a person by identity (github:{login} or email:{address}) with a role: added now if they signed in before, else when they first sign in.",
        |cx, a| invites::invite(&cx.engine.ports, cx.caller, a).await?),
    method!("members".invites, Admin, Try, NoArgs => Vec<Invite>,
        "List the org's pending invites.",
        |cx, a| invites::list(&cx.engine.ports, cx.caller).await?),
    method!("members".uninvite, Admin, Try, UninviteArgs => Done,
        "Withdraw a pending invite.",
        |cx, a| invites::cancel(&cx.engine.ports, cx.caller, a).await?),
    // tokens
    method!("tokens".list, Admin, Try, NoArgs => Vec<TokenSummary>,
        "List the org's API tokens (never their secrets).",
        |cx, a| people::list_tokens(&cx.engine.ports, cx.caller).await?),
    method!("tokens".create, Admin, Try, CreateToken => IssuedToken,
        "Issue an API token for a member or agent; the secret is shown once.",
        |cx, a| people::create_token(&cx.engine.ports, cx.caller, a).await?),
    method!("tokens".revoke, Admin, Try, RevokeToken => Done,
        "Revoke an API token; it stops working at once.",
        |cx, a| people::revoke_token(&cx.engine.ports, cx.caller, a).await?),
    // OAuth grants
    method!("grants".list, Admin, Try, NoArgs => Vec<GrantInfo>,
        "List the OAuth grants that reach the org (applications its members allowed), newest first.",
        |cx, a| people::list_grants(&cx.engine.ports, cx.caller).await?),
    method!("grants".revoke, Admin, Try, ById => Done,
        "Revoke an OAuth grant: every access and refresh token of it stops working at once.",
        |cx, a| people::revoke_grant(&cx.engine.ports, cx.caller, &a.id).await?),
    // organizations
    method!("organizations".list, Read, Try, NoArgs => Vec<OrgInfo>,
        "List the organizations you belong to, with your role in each.",
        |cx, a| people::list_orgs(&cx.engine.ports, cx.caller).await?),
    method!("organizations".get, Read, Try, NoArgs => OrgInfo,
        "Read the current organization.",
        |cx, a| people::get_org(&cx.engine.ports, cx.caller).await?),
    method!("organizations".update, Admin, Try, UpdateOrg => OrgInfo,
    "Change the current organization's description, its default tool profile (workspace or compact), or lower its rate limits.",
    |cx, a| people::update_org(&cx.engine.ports, cx.caller, a, cx.engine.config.rate_limits).await?),
];

/// Runtime helpers scripts get beside the SDK (`ctx`), for `search_sdk` and the `.d.ts`.
pub static HELPERS: &[(&str, &str, &str)] = &[
    (
        "ctx.sleep",
        "sleep(ms: number): Promise<void>",
        "Wait up to 30 s (polling); counts against the 180 s script limit.",
    ),
    (
        "ctx.log",
        "log(...values: unknown[]): void",
        "Add a line to the script's logs (returned with the result).",
    ),
    (
        "ctx.now",
        "now(): string",
        "The current time as RFC 3339 text.",
    ),
    (
        "ctx.args",
        "args: Record<string, unknown>",
        "The script's `args` argument.",
    ),
];
