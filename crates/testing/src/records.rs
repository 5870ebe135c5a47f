//! The shared records suite: the org data model's behaviour over any storage backend. Every
//! backend runs every case through [`crate::records_suite!`] (native test runners) or calls
//! the cases from its own host (the edge adapters), exactly like the storage suite.
//! A case panics with a message naming what went wrong.

use std::rc::Rc;

use serde_json::{Value, json};

use lore_base::error::LoreError;
use lore_base::model::Tier;
use lore_base::ports::Storage;
use lore_directory::caller::{self, Caller};
use lore_directory::{admin, tokens};
use lore_engine::call_method;
use lore_front::{Config, Lore};
use lore_records::metrics::Counts;

use crate::ports::step_ports;

fn instance(storage: Rc<dyn Storage>, seed: u64) -> Lore {
    Lore::new(step_ports(storage, seed), Config::default())
}

/// A core instance with org `acme` and its owner.
async fn setup(storage: Rc<dyn Storage>) -> (Lore, Caller) {
    let lore = instance(storage, 7);
    admin::init(lore.ports(), "acme").await.expect("init");
    let owner = lore.local_caller(Some("acme")).await.expect("owner");
    (lore, owner)
}

async fn call(lore: &Lore, caller: &Caller, path: &str, args: Value) -> Result<Value, LoreError> {
    let json = call_method(&lore.engine, caller, path, args, Tier::Admin).await?;
    Ok(serde_json::from_str(json.get()).expect("results are JSON"))
}

async fn ok(lore: &Lore, caller: &Caller, path: &str, args: Value) -> Value {
    match call(lore, caller, path, args).await {
        Ok(v) => v,
        Err(e) => panic!("{path} failed: {e}"),
    }
}

/// A new agent of `caller`'s org with `role`, signed in with a token of `scopes`.
async fn agent(lore: &Lore, owner: &Caller, role: &str, scopes: &str) -> Caller {
    let a = ok(
        lore,
        owner,
        "agents.create",
        json!({"name": role, "role": role}),
    )
    .await;
    let t = ok(
        lore,
        owner,
        "tokens.create",
        json!({"principal_id": a["principal_id"], "scopes": scopes}),
    )
    .await;
    let credential = tokens::verify_token(lore.ports(), t["token"].as_str().unwrap(), None)
        .await
        .expect("fresh token verifies");
    caller::resolve_caller(
        lore.ports(),
        credential,
        Some(owner.org().as_str()),
        &lore.config.default_org,
    )
    .await
    .expect("member of the org")
}

async fn ticket_type(lore: &Lore, owner: &Caller) {
    ok(
        lore,
        owner,
        "templates.create",
        json!({"name": "ticket", "schema": {
            "type": "object",
            "properties": {
                "title": {"type": "string"},
                "priority": {"enum": ["low", "high"]},
                "tags": {"type": "array", "items": {"type": "string"}}
            },
            "required": ["title"]
        }}),
    )
    .await;
}

fn code(r: Result<Value, LoreError>) -> String {
    match r {
        Ok(v) => panic!("expected an error, got {v}"),
        Err(e) => e.code().to_string(),
    }
}

pub async fn properties_are_validated_with_the_failing_pointer(s: Rc<dyn Storage>) {
    let (lore, owner) = setup(s).await;
    ticket_type(&lore, &owner).await;
    let bad = call(
        &lore,
        &owner,
        "entities.create",
        json!({"type": "ticket", "name": "t", "properties": {"title": "x", "tags": ["a", 3]}}),
    )
    .await;
    match bad {
        Err(LoreError::InvalidArgument { field, .. }) => assert_eq!(field, "properties/tags/1"),
        other => panic!("want invalid_argument at properties/tags/1, got {other:?}"),
    }
    let missing = call(
        &lore,
        &owner,
        "Ticket.create",
        json!({"name": "t", "properties": {}}),
    )
    .await;
    assert_eq!(code(missing), "invalid_argument");
    let unknown_type = call(
        &lore,
        &owner,
        "entities.create",
        json!({"type": "nope", "name": "t"}),
    )
    .await;
    assert_eq!(code(unknown_type), "invalid_argument");
    let e = ok(
        &lore,
        &owner,
        "Ticket.create",
        json!({"name": "t", "properties": {"title": "x"}}),
    )
    .await;
    // An update is validated against the merged properties.
    let bad_update = call(
        &lore,
        &owner,
        "entities.update",
        json!({"id": e["id"], "properties": {"priority": "urgent"}}),
    )
    .await;
    assert_eq!(code(bad_update), "invalid_argument");
    let bad_schema = call(
        &lore,
        &owner,
        "templates.create",
        json!({"name": "bad", "schema": {"type": "object", "properties": {"x": {"type": "nonsense"}}}}),
    )
    .await;
    assert_eq!(code(bad_schema), "invalid_argument");
}

pub async fn versions_refuse_stale_writes(s: Rc<dyn Storage>) {
    let (lore, owner) = setup(s).await;
    ticket_type(&lore, &owner).await;
    let e = ok(
        &lore,
        &owner,
        "Ticket.create",
        json!({"name": "a", "properties": {"title": "x"}}),
    )
    .await;
    assert_eq!(e["version"], 1);
    let u = ok(
        &lore,
        &owner,
        "entities.update",
        json!({"id": e["id"], "version": 1, "properties": {"priority": "high", "title": "y"}}),
    )
    .await;
    assert_eq!(u["version"], 2);
    assert_eq!(u["properties"], json!({"title": "y", "priority": "high"}));
    let stale = call(
        &lore,
        &owner,
        "entities.update",
        json!({"id": e["id"], "version": 1, "name": "b"}),
    )
    .await;
    assert_eq!(code(stale), "conflict");
    // null removes a property; the result is validated.
    let u = ok(
        &lore,
        &owner,
        "entities.update",
        json!({"id": e["id"], "properties": {"priority": null}}),
    )
    .await;
    assert_eq!(u["properties"], json!({"title": "y"}));
    let stale_delete = call(
        &lore,
        &owner,
        "entities.delete",
        json!({"id": e["id"], "version": 2}),
    )
    .await;
    assert_eq!(code(stale_delete), "conflict");
    ok(
        &lore,
        &owner,
        "entities.delete",
        json!({"id": e["id"], "version": 3}),
    )
    .await;
    assert_eq!(
        code(call(&lore, &owner, "entities.get", json!({"id": e["id"]})).await),
        "not_found"
    );
}

pub async fn typed_lists_page_in_creation_order(s: Rc<dyn Storage>) {
    let (lore, owner) = setup(s).await;
    ticket_type(&lore, &owner).await;
    ok(
        &lore,
        &owner,
        "templates.create",
        json!({"name": "customer"}),
    )
    .await;
    let items: Vec<Value> = (0..120)
        .map(|i| json!({"name": format!("t{i}"), "properties": {"title": format!("n{i}"), "priority": if i % 3 == 0 {"high"} else {"low"}}}))
        .collect();
    let created = ok(
        &lore,
        &owner,
        "entities.create_many",
        json!({"type": "ticket", "items": items}),
    )
    .await;
    assert_eq!(created["items"].as_array().unwrap().len(), 120);
    ok(
        &lore,
        &owner,
        "entities.create",
        json!({"type": "customer", "name": "c"}),
    )
    .await;
    let mut names = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut args = json!({"limit": 50});
        if let Some(c) = &cursor {
            args["cursor"] = json!(c);
        }
        let page = ok(&lore, &owner, "Ticket.list", args).await;
        names.extend(
            page["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["name"].as_str().unwrap().to_string()),
        );
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    let want: Vec<String> = (0..120).map(|i| format!("t{i}")).collect();
    assert_eq!(
        names, want,
        "pages cover every ticket once, in creation order"
    );
    let high = ok(
        &lore,
        &owner,
        "Ticket.list",
        json!({"where": {"priority": "high"}, "limit": 500}),
    )
    .await;
    assert_eq!(high["items"].as_array().unwrap().len(), 40);
    let all = ok(&lore, &owner, "entities.list", json!({"limit": 500})).await;
    assert_eq!(all["items"].as_array().unwrap().len(), 121);
    let bad_cursor = call(&lore, &owner, "entities.list", json!({"cursor": "../x/y"})).await;
    assert_eq!(code(bad_cursor), "invalid_argument");
    // create_many is all or none.
    let half_bad = call(
        &lore,
        &owner,
        "entities.create_many",
        json!({"type": "ticket", "items": [{"name": "ok", "properties": {"title": "x"}}, {"name": "bad", "properties": {}}]}),
    )
    .await;
    match half_bad {
        Err(LoreError::InvalidArgument { field, .. }) => {
            assert!(field.starts_with("items/1"), "{field}")
        }
        other => panic!("{other:?}"),
    }
    let count = ok(&lore, &owner, "Ticket.list", json!({"limit": 500})).await;
    assert_eq!(count["items"].as_array().unwrap().len(), 120);
}

pub async fn deleting_an_entity_removes_its_relationships(s: Rc<dyn Storage>) {
    let (lore, owner) = setup(s).await;
    ticket_type(&lore, &owner).await;
    let a = ok(
        &lore,
        &owner,
        "Ticket.create",
        json!({"name": "a", "properties": {"title": "a"}}),
    )
    .await;
    let b = ok(
        &lore,
        &owner,
        "Ticket.create",
        json!({"name": "b", "properties": {"title": "b"}}),
    )
    .await;
    let r = ok(
        &lore,
        &owner,
        "Ticket.link",
        json!({"id": a["id"], "to": b["id"], "type": "blocks"}),
    )
    .await;
    assert_eq!(r["from"], a["id"]);
    let out = ok(
        &lore,
        &owner,
        "relationships.list",
        json!({"entity_id": a["id"], "direction": "out"}),
    )
    .await;
    assert_eq!(out["items"].as_array().unwrap().len(), 1);
    let into_b = ok(
        &lore,
        &owner,
        "relationships.list",
        json!({"entity_id": b["id"], "direction": "in", "type": "blocks"}),
    )
    .await;
    assert_eq!(into_b["items"][0]["id"], r["id"]);
    let dangling = call(
        &lore,
        &owner,
        "relationships.create",
        json!({"type": "x", "from": a["id"], "to": "ent_00000000000000000000000000"}),
    )
    .await;
    assert_eq!(code(dangling), "invalid_argument");
    ok(&lore, &owner, "entities.delete", json!({"id": b["id"]})).await;
    let out = ok(
        &lore,
        &owner,
        "relationships.list",
        json!({"entity_id": a["id"]}),
    )
    .await;
    assert!(
        out["items"].as_array().unwrap().is_empty(),
        "edges to a deleted entity go with it"
    );
    assert_eq!(
        code(call(&lore, &owner, "relationships.get", json!({"id": r["id"]})).await),
        "not_found"
    );
}

pub async fn connection_secrets_are_write_only(s: Rc<dyn Storage>) {
    let (lore, owner) = setup(s.clone()).await;
    let secret = "sk_live_do_not_show_me_12345";
    let created = ok(
        &lore,
        &owner,
        "connections.create",
        json!({"name": "crm", "base_url": "https://crm.example.com/api", "secret": secret}),
    )
    .await;
    assert_eq!(created["has_secret"], true);
    for (path, args) in [
        ("connections.get", json!({"name": "crm"})),
        ("connections.list", json!({})),
        (
            "connections.update",
            json!({"name": "crm", "description": "d"}),
        ),
    ] {
        let v = ok(&lore, &owner, path, args).await;
        assert!(!v.to_string().contains(secret), "{path} showed the secret");
    }
    let bad = call(
        &lore,
        &owner,
        "connections.create",
        json!({"name": "x", "base_url": "http://example.com"}),
    )
    .await;
    assert_eq!(code(bad), "invalid_argument");
    // Without an outbound HTTP port the call says so, without the secret.
    let e = call(
        &lore,
        &owner,
        "connections.call",
        json!({"name": "crm", "path": "/x"}),
    )
    .await
    .unwrap_err();
    assert!(!e.to_string().contains(secret));
    // The secret is stored only under its secret key.
    let mut holders = Vec::new();
    for (k, v) in every_entry(s.as_ref(), &["acme"]).await {
        if String::from_utf8_lossy(&v).contains(secret) {
            holders.push(k);
        }
    }
    assert_eq!(holders, vec!["o/acme/secret/conn/crm".to_string()]);
    ok(&lore, &owner, "connections.delete", json!({"name": "crm"})).await;
    assert_eq!(s.get("o/acme/secret/conn/crm").await.unwrap(), None);
}

/// Every entry of the directory and of `orgs`, one scan per store's share of the key space, so
/// that it reads a split store (each org apart, see `lore_base::storage::split`) as well as one.
async fn every_entry(s: &dyn Storage, orgs: &[&str]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for first in 0x21u8..0x7f {
        let first = first as char;
        if first != 'o' {
            out.extend(s.scan_all(&first.to_string()).await.unwrap());
            continue;
        }
        for second in 0x21u8..0x7f {
            if second != b'/' {
                out.extend(s.scan_all(&format!("o{}", second as char)).await.unwrap());
            }
        }
        out.extend(s.get("o").await.unwrap().map(|v| ("o".to_string(), v)));
    }
    for org in orgs {
        out.extend(s.scan_all(&format!("o/{org}/")).await.unwrap());
    }
    out
}

pub async fn webhook_feeds_show_their_secret_once(s: Rc<dyn Storage>) {
    let (lore, owner) = setup(s).await;
    let created = ok(
        &lore,
        &owner,
        "feeds.create",
        json!({"name": "github", "kind": "webhook"}),
    )
    .await;
    let secret = created["secret"]
        .as_str()
        .expect("secret on create")
        .to_string();
    assert_eq!(created["url"], "/hooks/acme/github");
    let got = ok(&lore, &owner, "feeds.get", json!({"name": "github"})).await;
    assert!(got.get("secret").is_none() && !got.to_string().contains(&secret));
    let rotated = ok(
        &lore,
        &owner,
        "feeds.rotate_secret",
        json!({"name": "github"}),
    )
    .await;
    assert_ne!(rotated["secret"], json!(secret));
    let no_conn = call(
        &lore,
        &owner,
        "feeds.create",
        json!({"name": "pulled", "kind": "connection"}),
    )
    .await;
    assert_eq!(code(no_conn), "invalid_argument");
}

pub async fn orgs_see_none_of_each_other(s: Rc<dyn Storage>) {
    let (lore, owner) = setup(s).await;
    ticket_type(&lore, &owner).await;
    let e = ok(
        &lore,
        &owner,
        "Ticket.create",
        json!({"name": "secret plan", "properties": {"title": "x"}}),
    )
    .await;
    admin::create_org(lore.ports(), "other").await.unwrap();
    let other = lore.local_caller(Some("other")).await.unwrap();
    assert_eq!(
        code(call(&lore, &other, "entities.get", json!({"id": e["id"]})).await),
        "not_found"
    );
    let list = ok(&lore, &other, "entities.list", json!({})).await;
    assert!(list["items"].as_array().unwrap().is_empty());
    // Batch reads: in the order asked, each once, missing ids and other orgs' left out.
    let e2 = ok(
        &lore,
        &owner,
        "Ticket.create",
        json!({"name": "second", "properties": {"title": "y"}}),
    )
    .await;
    let missing = "ent_00000000000000000000000000";
    let many = ok(
        &lore,
        &owner,
        "entities.get_many",
        json!({"ids": [e2["id"], missing, e["id"], e2["id"]]}),
    )
    .await;
    let ids: Vec<&Value> = many.as_array().unwrap().iter().map(|v| &v["id"]).collect();
    assert_eq!(ids, [&e2["id"], &e["id"]]);
    let theirs = ok(
        &lore,
        &other,
        "entities.get_many",
        json!({"ids": [e["id"]]}),
    )
    .await;
    assert_eq!(theirs, json!([]));
    let too_many = json!({"ids": vec![missing; 101]});
    for bad in [json!({"ids": [e["id"], "x"]}), json!({"ids": []}), too_many] {
        let r = call(&lore, &owner, "entities.get_many", bad).await;
        assert_eq!(code(r), "invalid_argument");
    }
    assert!(
        ok(&lore, &other, "templates.list", json!({}))
            .await
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        code(call(&lore, &other, "Ticket.list", json!({})).await),
        "not_found"
    );
    // An agent of acme is not a member of other.
    let member = agent(&lore, &owner, "member", "mcp:read,write").await;
    let orgs = ok(&lore, &member, "organizations.list", json!({})).await;
    assert_eq!(orgs.as_array().unwrap().len(), 1);
    assert_eq!(orgs[0]["id"], "acme");
}

pub async fn roles_scopes_and_tiers_gate_every_call(s: Rc<dyn Storage>) {
    let (lore, owner) = setup(s).await;
    ticket_type(&lore, &owner).await;
    let viewer = agent(&lore, &owner, "viewer", "mcp:read,write").await;
    let member = agent(&lore, &owner, "member", "mcp:read,write").await;
    let read_only = agent(&lore, &owner, "member", "mcp:read").await;
    let t = json!({"name": "x", "properties": {"title": "x"}});
    assert_eq!(
        code(call(&lore, &viewer, "Ticket.create", t.clone()).await),
        "needs_write"
    );
    assert_eq!(
        code(call(&lore, &read_only, "Ticket.create", t.clone()).await),
        "insufficient_scope"
    );
    assert_eq!(
        code(call(&lore, &member, "templates.create", json!({"name": "y"})).await),
        "needs_admin"
    );
    let created = ok(&lore, &member, "Ticket.create", t.clone()).await;
    ok(&lore, &viewer, "Ticket.get", json!({"id": created["id"]})).await;
    // A read-only surface (query_sdk) refuses writes whatever the role.
    let refused = call_method(
        &lore.engine,
        &owner,
        "entities.create",
        json!({"type": "ticket", "name": "x", "properties": {"title": "x"}}),
        Tier::Read,
    )
    .await
    .map(|_| Value::Null);
    assert_eq!(code(refused), "needs_write");
    assert_eq!(
        code(call(&lore, &owner, "nothing.here", json!({})).await),
        "not_found"
    );
    // Refused calls wrote nothing.
    let all = ok(&lore, &owner, "Ticket.list", json!({})).await;
    assert_eq!(all["items"].as_array().unwrap().len(), 1);
    // Members cannot touch owners; the last owner stays.
    let owner_id = owner.principal().id.clone();
    let last = call(
        &lore,
        &owner,
        "members.update",
        json!({"principal_id": owner_id, "role": "member"}),
    )
    .await;
    assert_eq!(code(last), "conflict");
    let admin_agent = agent(&lore, &owner, "admin", "mcp:read,write").await;
    let demote = call(
        &lore,
        &admin_agent,
        "members.remove",
        json!({"principal_id": owner_id}),
    )
    .await;
    assert_eq!(code(demote), "needs_admin");
}

pub async fn usage_counters_sum_across_instances(s: Rc<dyn Storage>) {
    let (lore, owner) = setup(s.clone()).await;
    let second = instance(s, 99);
    let owner2 = second.local_caller(Some("acme")).await.unwrap();
    for _ in 0..3 {
        let counts = Counts::of(&Ok::<(), LoreError>(()));
        lore.engine
            .count_usage(&owner, "entities.get", counts)
            .await;
    }
    let failed = Err::<(), _>(LoreError::not_found("x"));
    second
        .engine
        .count_usage(&owner2, "entities.get", Counts::of(&failed))
        .await;
    let capped = Err::<(), _>(LoreError::Overloaded("full".into()));
    second
        .engine
        .count_usage(&owner2, "run_sdk", Counts::of(&capped))
        .await;
    second.engine.flush_usage().await;
    let v = ok(
        &lore,
        &owner,
        "metrics.query",
        json!({"name": "tool_calls", "group_by": "tool"}),
    )
    .await;
    assert_eq!(v["value"], 5.0, "{v}");
    let errors = ok(
        &lore,
        &owner,
        "metrics.query",
        json!({"name": "tool_errors"}),
    )
    .await;
    assert_eq!(errors["value"], 2.0);
    let caps = ok(
        &lore,
        &owner,
        "metrics.query",
        json!({"name": "cap_hits", "group_by": "tool"}),
    )
    .await;
    assert_eq!(caps["value"], 1.0, "{caps}");
    // Every tool counted in the period has a group, with none for those that hit no cap.
    assert_eq!(
        caps["series"],
        json!([{"key": "entities.get", "value": 0.0}, {"key": "run_sdk", "value": 1.0}])
    );
    ok(
        &lore,
        &owner,
        "metrics.define",
        json!({"name": "open_tickets", "sql": "SELECT count(*) AS value FROM entities"}),
    )
    .await;
    let listed = ok(&lore, &owner, "metrics.list", json!({})).await;
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == "open_tickets" && m["kind"] == "sql")
    );
    let not_select = call(
        &lore,
        &owner,
        "metrics.define",
        json!({"name": "x", "sql": "DELETE FROM entities"}),
    )
    .await;
    assert_eq!(code(not_select), "invalid_argument");
}

pub async fn sql_reads_the_callers_org_only(s: Rc<dyn Storage>) {
    let (lore, owner) = setup(s).await;
    ticket_type(&lore, &owner).await;
    for (title, priority) in [("a", "high"), ("b", "low"), ("c", "high")] {
        ok(
            &lore,
            &owner,
            "Ticket.create",
            json!({"name": title, "properties": {"title": title, "priority": priority}}),
        )
        .await;
    }
    admin::create_org(lore.ports(), "other").await.unwrap();
    let other = lore.local_caller(Some("other")).await.unwrap();
    ticket_type(&lore, &other).await;
    ok(
        &lore,
        &other,
        "Ticket.create",
        json!({"name": "theirs", "properties": {"title": "theirs", "priority": "high"}}),
    )
    .await;
    let r = ok(
        &lore,
        &owner,
        "sql.query",
        json!({"sql": "SELECT priority, COUNT(*) AS n FROM ticket GROUP BY priority ORDER BY priority"}),
    )
    .await;
    assert_eq!(r["rows"], json!([["high", 2], ["low", 1]]));
    let r = ok(
        &lore,
        &other,
        "sql.query",
        json!({"sql": "SELECT name FROM entities"}),
    )
    .await;
    assert_eq!(r["rows"], json!([["theirs"]]));
    ok(
        &lore,
        &owner,
        "metrics.define",
        json!({"name": "high", "sql": "SELECT COUNT(*) AS value FROM ticket WHERE priority = 'high'"}),
    )
    .await;
    let v = ok(&lore, &owner, "metrics.query", json!({"name": "high"})).await;
    assert_eq!(v["value"], 2.0);
    assert_eq!(
        code(
            call(
                &lore,
                &owner,
                "sql.query",
                json!({"sql": "DELETE FROM ticket"})
            )
            .await
        ),
        "invalid_argument"
    );
}

/// Every case in one list: [`CASES`] names them and [`run_case`] runs one by name, for hosts
/// that drive the suite from outside a Rust test runner (the Workers adapter on D1).
macro_rules! by_name {
    ($($case:ident),* $(,)?) => {
        /// The name of every case, in the order [`crate::records_suite!`] runs them.
        pub const CASES: &[&str] = &[$(stringify!($case)),*];

        /// Runs the case called `name` against a store; `false` if there is no such case.
        pub async fn run_case(name: &str, s: Rc<dyn Storage>) -> bool {
            match name {
                $(stringify!($case) => $case(s).await,)*
                _ => return false,
            }
            true
        }

    };
}

by_name!(
    properties_are_validated_with_the_failing_pointer,
    versions_refuse_stale_writes,
    typed_lists_page_in_creation_order,
    deleting_an_entity_removes_its_relationships,
    connection_secrets_are_write_only,
    webhook_feeds_show_their_secret_once,
    orgs_see_none_of_each_other,
    roles_scopes_and_tiers_gate_every_call,
    usage_counters_sum_across_instances,
    sql_reads_the_callers_org_only,
);

/// Runs one records case per `#[test]` against a fresh store from `$make` (an
/// `Rc<dyn Storage>`), and checks that its list is [`CASES`].
#[macro_export]
macro_rules! records_suite {
    ($make:expr) => {
        $crate::records_suite!(@cases $make;
            properties_are_validated_with_the_failing_pointer,
            versions_refuse_stale_writes,
            typed_lists_page_in_creation_order,
            deleting_an_entity_removes_its_relationships,
            connection_secrets_are_write_only,
            webhook_feeds_show_their_secret_once,
            orgs_see_none_of_each_other,
            roles_scopes_and_tiers_gate_every_call,
            usage_counters_sum_across_instances,
            sql_reads_the_callers_org_only,
        );
    };
    (@cases $make:expr; $($case:ident),* $(,)?) => {
        mod records_suite {
            #[test]
            fn the_case_list_is_complete() {
                assert_eq!($crate::records::CASES, &[$(stringify!($case)),*]);
            }
            $(
                #[test]
                fn $case() {
                    let store: std::rc::Rc<dyn $crate::Storage> = $make;
                    $crate::block_on($crate::records::$case(store));
                }
            )*
        }
    };
}
