//! Behaviors' reactions and script operations through the sandbox runner, in-process on the
//! in-memory store with a clock whose sleeps jump: a reaction runs after the write that
//! triggers it and its writes land; a failing reaction leaves that write alone and is a failed
//! Action; reactions that trigger themselves stop at the depth limit; a reaction runs with its
//! owner's permissions as they are now; script operations return their value, check their
//! arguments, are Actions, nest inside a run (same overlay, shared budget) up to a depth.

use crate::common;

use std::rc::Rc;

use futures_executor::block_on;
use serde_json::{Value, json};

use common::{Harness, jumping_ports, ok};
use lore_base::model::Role;
use lore_testing::ports::Later;

fn harness() -> Harness {
    harness_with(None)
}

fn harness_with(background: Option<Rc<dyn lore_base::ports::Background>>) -> Harness {
    let h = Harness::on(jumping_ports(7, background), "acme");
    ok(&run(
        &h,
        &h.owner,
        "await client.templates.create({name: 'ticket', schema: {type: 'object', properties: {n: {type: 'integer'}}}}); return 'ok';",
    ));
    h
}

fn token(h: &Harness, role: Role) -> String {
    common::token(&h.lore, "acme", role, "mcp:read mcp:write")
}

fn run(h: &Harness, token: &str, code: &str) -> Value {
    h.call(token, "run_sdk", json!({"code": code}))
}

fn failed(r: &Value) -> Value {
    assert_eq!(r["isError"], true, "{r}");
    let text = r["content"][0]["text"].as_str().unwrap();
    serde_json::from_str::<Value>(text).unwrap()["error"].clone()
}

fn ticket_names(h: &Harness) -> Vec<String> {
    let r = ok(&run(
        h,
        &h.owner,
        "return (await client.entities.list({type: 'ticket'})).items.map((t: any) => t.name).sort()",
    ));
    serde_json::from_value(r).unwrap()
}

/// The org's actions of `source`, oldest first.
fn actions(h: &Harness, source: &str) -> Vec<Value> {
    let r = ok(&run(
        h,
        &h.owner,
        &format!(
            "return (await client.actions.list({{limit: 500}})).items.filter((a: any) => a.source === '{source}')"
        ),
    ));
    r.as_array().unwrap().clone()
}

fn behavior(h: &Harness, token: &str, name: &str, kinds: &[&str], code: &str) -> Value {
    h.call(
        token,
        "run_sdk",
        json!({"code": "return await client.behaviors.create(ctx.args)",
               "args": {"name": name, "trigger": {"event_kinds": kinds}, "code": code}}),
    )
}

#[test]
fn a_reaction_runs_after_a_matching_save_and_its_writes_land() {
    let h = harness();
    ok(&behavior(
        &h,
        &h.owner,
        "triage",
        &["observation"],
        "const e = ctx.args.event;\nawait client.entities.create({type: 'ticket', name: 'about ' + e.content});\nreturn e.id;",
    ));
    let ids = h.save(
        &h.owner,
        json!({"content": "db down", "kind": "observation"}),
    );
    assert_eq!(ticket_names(&h), vec!["about db down"]);
    h.save(
        &h.owner,
        json!({"content": "lunch at noon", "kind": "note"}),
    );
    assert_eq!(ticket_names(&h).len(), 1, "a note triggers nothing");
    let acts = actions(&h, "behavior");
    assert_eq!(acts.len(), 1, "{acts:?}");
    let a = &acts[0];
    assert_eq!(a["status"], "ok", "{a}");
    assert_eq!(a["behavior"], "triage");
    assert_eq!(a["trigger_event"], json!(ids[0]));
    assert_eq!(a["depth"], 1);
    assert_eq!(a["steps"][0]["method"], "entities.create");

    // An event saved by a script triggers once the script commits; a failed run triggers nothing.
    ok(&run(
        &h,
        &h.owner,
        "await client.memory.save({content: 'disk full', kind: 'observation'}); return 1",
    ));
    assert_eq!(ticket_names(&h), vec!["about db down", "about disk full"]);
    failed(&run(
        &h,
        &h.owner,
        "await client.memory.save({content: 'cpu hot', kind: 'observation'}); throw new Error('no')",
    ));
    assert_eq!(ticket_names(&h).len(), 2);
    // Disabled behaviors do not react.
    ok(&run(
        &h,
        &h.owner,
        "return await client.behaviors.update({name: 'triage', enabled: false})",
    ));
    h.save(
        &h.owner,
        json!({"content": "net flaky", "kind": "observation"}),
    );
    assert_eq!(ticket_names(&h).len(), 2);
}

#[test]
fn a_throwing_reaction_leaves_the_write_and_records_a_failed_action() {
    let h = harness();
    ok(&behavior(
        &h,
        &h.owner,
        "broken",
        &["observation"],
        "await client.entities.create({type: 'ticket', name: 'half done'});\nthrow new Error('reaction broke');",
    ));
    ok(&behavior(
        &h,
        &h.owner,
        "capped",
        &["observation"],
        "while (true) {}",
    ));
    let ids = h.save(
        &h.owner,
        json!({"content": "db down", "kind": "observation"}),
    );
    assert_eq!(ids.len(), 1);
    let found = h.search(&h.owner, json!({"query": "db down"}));
    assert_eq!(found.len(), 1, "the triggering write stands");
    assert!(
        ticket_names(&h).is_empty(),
        "a failed reaction writes nothing"
    );
    let acts = actions(&h, "behavior");
    assert_eq!(acts.len(), 2, "{acts:?}");
    let broken = acts.iter().find(|a| a["behavior"] == "broken").unwrap();
    assert_eq!(broken["status"], "error");
    assert_eq!(broken["error"]["code"], "script_error");
    assert!(
        broken["error"]["message"]
            .as_str()
            .unwrap()
            .contains("reaction broke")
    );
    assert_eq!(broken["trigger_event"], json!(ids[0]));
    let capped = acts.iter().find(|a| a["behavior"] == "capped").unwrap();
    assert_eq!(capped["error"]["cap"], "steps", "{capped}");
}

#[test]
fn reactions_that_trigger_themselves_stop_at_the_depth_limit() {
    let h = harness();
    ok(&behavior(
        &h,
        &h.owner,
        "echo",
        &["decision"],
        "await client.memory.save({content: ctx.args.event.content + '!', kind: 'decision'}); return 1",
    ));
    h.save(&h.owner, json!({"content": "ping", "kind": "decision"}));
    let contents: Vec<String> = h
        .search(
            &h.owner,
            json!({"query": "ping", "kinds": ["decision"], "limit": 10}),
        )
        .iter()
        .map(|r| r["content"].as_str().unwrap().to_string())
        .collect();
    let mut sorted = contents.clone();
    sorted.sort();
    assert_eq!(sorted, vec!["ping", "ping!", "ping!!"], "{contents:?}");
    let acts = actions(&h, "behavior");
    let summary: Vec<(String, u64)> = acts
        .iter()
        .map(|a| {
            (
                a["status"].as_str().unwrap().to_string(),
                a["depth"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![("ok".into(), 1), ("ok".into(), 2), ("skipped".into(), 3)]
    );
    assert_eq!(acts[2]["error"]["code"], "reaction_depth");
}

#[test]
fn a_reaction_runs_with_its_owners_permissions_as_they_are_now() {
    let h = harness();
    let admin = token(&h, Role::Admin);
    let made = ok(&behavior(
        &h,
        &admin,
        "scribe",
        &["observation"],
        "await client.entities.create({type: 'ticket', name: 'scribed'}); return 1",
    ));
    let owner_id = made["owner"].as_str().unwrap().to_string();
    assert!(owner_id.starts_with("agt_"), "{made}");
    // The owner is demoted to viewer: the reaction may no longer write.
    ok(&h.call(
        &h.owner,
        "run_sdk",
        json!({"code": "return await client.members.update({principal_id: ctx.args.p, role: 'viewer'})",
               "args": {"p": owner_id}}),
    ));
    h.save(
        &h.owner,
        json!({"content": "db down", "kind": "observation"}),
    );
    assert!(ticket_names(&h).is_empty());
    let acts = actions(&h, "behavior");
    assert_eq!(acts.len(), 1);
    assert_eq!(acts[0]["status"], "error");
    assert_eq!(acts[0]["error"]["code"], "needs_write", "{}", acts[0]);
    assert_eq!(acts[0]["principal"], json!(owner_id));
    // Removed from the org: the reaction does not run at all.
    ok(&h.call(
        &h.owner,
        "run_sdk",
        json!({"code": "return await client.members.remove({principal_id: ctx.args.p})",
               "args": {"p": owner_id}}),
    ));
    h.save(
        &h.owner,
        json!({"content": "disk full", "kind": "observation"}),
    );
    let acts = actions(&h, "behavior");
    assert_eq!(acts.len(), 2);
    assert_eq!(acts[1]["status"], "error");
    assert_eq!(acts[1]["error"]["code"], "forbidden", "{}", acts[1]);
    assert!(acts[1]["steps"].as_array().unwrap().is_empty());
    assert!(ticket_names(&h).is_empty());
}

fn operation(h: &Harness, args: Value) {
    ok(&h.call(
        &h.owner,
        "run_sdk",
        json!({"code": "return await client.operations.create(ctx.args)", "args": args}),
    ));
}

fn rest(h: &Harness, token: &str, method: &str, args: Value) -> (u16, Value) {
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("/api/acme/{method}"))
        .header("host", "127.0.0.1:8787")
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&args).unwrap())
        .unwrap();
    let response = block_on(h.lore.handle(request));
    let status = response.status().as_u16();
    (
        status,
        serde_json::from_slice(&response.into_body()).unwrap(),
    )
}

#[test]
fn a_script_operation_returns_its_value_checks_its_args_and_is_an_action() {
    let h = harness();
    operation(
        &h,
        json!({"name": "double", "kind": "script", "access": "read",
               "code": "const n: number = ctx.args.n;\nreturn {n: n * 2, tickets: (await client.entities.list({type: 'ticket'})).items.length};",
               "args_schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}),
    );
    // Through REST, as a Verb of the registry.
    let (status, body) = rest(
        &h,
        &h.owner,
        "operations.run",
        json!({"name": "double", "args": {"n": 21}}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"n": 42, "tickets": 0}));
    let (status, body) = rest(
        &h,
        &h.owner,
        "operations.run",
        json!({"name": "double", "args": {"n": "x"}}),
    );
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "invalid_argument", "{body}");
    let acts = actions(&h, "operation");
    assert_eq!(acts.len(), 1, "{acts:?}");
    assert_eq!(acts[0]["operation"], "double");
    assert_eq!(acts[0]["status"], "ok");
    assert_eq!(acts[0]["steps"][0]["method"], "entities.list");
    // From a script: the value comes back; bad args are an error the script can catch.
    let r = ok(&h.call(
        &h.owner,
        "query_sdk",
        json!({"code": "const a = await client.operations.run({name: 'double', args: {n: 2}});\nlet code = '';\ntry { await client.operations.run({name: 'double', args: {}}) } catch (e) { code = e.code }\nreturn [a.n, code];"}),
    ));
    assert_eq!(r, json!([4, "invalid_argument"]));
    // A failing body is a structured script error with the TypeScript line.
    operation(
        &h,
        json!({"name": "boom", "kind": "script", "access": "read",
               "code": "const x = 1;\nthrow new Error('boom ' + x);"}),
    );
    let (status, body) = rest(&h, &h.owner, "operations.run", json!({"name": "boom"}));
    assert_ne!(status, 200);
    assert_eq!(body["error"]["code"], "script_error", "{body}");
    assert!(body.to_string().contains("boom 1"), "{body}");
}

#[test]
fn a_script_operation_runs_with_the_callers_permissions_and_its_own_tier() {
    let h = harness();
    operation(
        &h,
        json!({"name": "file", "kind": "script", "access": "write", "entity_type": "ticket",
               "code": "return (await client.entities.create({type: 'ticket', name: ctx.args.name})).name"}),
    );
    operation(
        &h,
        json!({"name": "sneaky", "kind": "script", "access": "read",
               "code": "return (await client.entities.create({type: 'ticket', name: 'sneaky'})).name"}),
    );
    let viewer = token(&h, Role::Viewer);
    let (status, body) = rest(
        &h,
        &viewer,
        "operations.run",
        json!({"name": "file", "args": {"name": "v"}}),
    );
    assert_eq!(status, 403, "{body}");
    // A read operation's body may only read, whoever calls it.
    let (_, body) = rest(&h, &h.owner, "operations.run", json!({"name": "sneaky"}));
    assert_eq!(body["error"]["code"], "needs_write", "{body}");
    // As a Noun verb from run_sdk, its writes join the run's: committed together, or not at all.
    assert_eq!(
        ok(&run(
            &h,
            &h.owner,
            "return await client.Ticket.file({name: 'kept'})"
        )),
        "kept"
    );
    let e = failed(&run(
        &h,
        &h.owner,
        "await client.Ticket.file({name: 'dropped'});\nthrow new Error('undo')",
    ));
    assert_eq!(e["code"], "script_error");
    assert_eq!(ticket_names(&h), vec!["kept"]);
}

#[test]
fn nested_script_operations_share_the_budget_and_stop_at_a_depth() {
    let h = harness();
    operation(
        &h,
        json!({"name": "deeper", "kind": "script", "access": "read",
               "code": "const d = (ctx.args.d ?? 0) + 1;\nreturn await client.operations.run({name: 'deeper', args: {d}});"}),
    );
    let e = failed(&h.call(
        &h.owner,
        "query_sdk",
        json!({"code": "return await client.operations.run({name: 'deeper', args: {}})"}),
    ));
    assert_eq!(e["code"], "forbidden", "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("nest at most 2"),
        "{e}"
    );
    operation(
        &h,
        json!({"name": "spend", "kind": "script", "access": "read",
               "code": "for (let i = 0; i < 150; i++) await client.templates.list({});\nreturn 'spent';"}),
    );
    // The nested run's calls count against the caller's 200.
    let r = h.call(
        &h.owner,
        "query_sdk",
        json!({"code": "const first = await client.operations.run({name: 'spend'});\nlet second = '';\ntry { await client.operations.run({name: 'spend'}) } catch (e) { second = e.code + ':' + e.message }\nctx.log(first, second);\nawait client.templates.list({});"}),
    );
    let e = failed(&r);
    assert_eq!(e["code"], "cap_exceeded", "{e}");
    assert_eq!(e["cap"], "sdk_calls");
    let logs = e["logs"].as_array().unwrap();
    let last = logs.last().unwrap().as_str().unwrap();
    assert!(last.starts_with("spent cap_exceeded"), "{logs:?}");
}

#[test]
fn a_webhook_delivery_triggers_the_behaviors_of_its_feed() {
    let h = harness();
    let feed = ok(&h.call(
        &h.owner,
        "run_sdk",
        json!({"code": "return await client.feeds.create({name: 'github', kind: 'webhook', auth: 'bearer', event_kind: 'github_push', content_pointer: '/msg'})"}),
    ));
    let secret = feed["secret"].as_str().unwrap().to_string();
    ok(&h.call(
        &h.owner,
        "run_sdk",
        json!({"code": "return await client.behaviors.create(ctx.args)",
               "args": {"name": "pushes", "trigger": {"feed": "github"},
                        "code": "await client.entities.create({type: 'ticket', name: 'push: ' + ctx.args.event.content + ' ' + ctx.args.event.payload.ref}); return 1"}}),
    ));
    let deliver = |id: &str| {
        let request = http::Request::builder()
            .method("POST")
            .uri("/hooks/acme/github")
            .header("host", "127.0.0.1:8787")
            .header("authorization", format!("Bearer {secret}"))
            .header("content-type", "application/json")
            .header("x-lore-delivery", id)
            .body(br#"{"msg": "fix login", "ref": "main"}"#.to_vec())
            .unwrap();
        block_on(h.lore.handle(request)).status().as_u16()
    };
    assert_eq!(deliver("d-1"), 202);
    assert_eq!(deliver("d-1"), 202, "a duplicate delivery triggers nothing");
    assert_eq!(ticket_names(&h), vec!["push: fix login main"]);
    let acts = actions(&h, "behavior");
    assert_eq!(acts.len(), 1, "{acts:?}");
    assert_eq!(acts[0]["status"], "ok");
}

#[test]
fn with_a_background_port_reactions_run_after_the_answer() {
    let later = Rc::new(Later::default());
    let h = harness_with(Some(later.clone()));
    ok(&behavior(
        &h,
        &h.owner,
        "triage",
        &["observation"],
        "await client.entities.create({type: 'ticket', name: 'later'}); return 1",
    ));
    h.save(
        &h.owner,
        json!({"content": "db down", "kind": "observation"}),
    );
    assert!(
        ticket_names(&h).is_empty(),
        "not yet: the save was answered first"
    );
    let tasks: Vec<_> = later.0.borrow_mut().drain(..).collect();
    assert_eq!(tasks.len(), 1);
    for task in tasks {
        block_on(task);
    }
    assert_eq!(ticket_names(&h), vec!["later"]);
    assert_eq!(actions(&h, "behavior")[0]["status"], "ok");
}

/// The role `principal` holds in acme now.
fn role_of(h: &Harness, principal: &str) -> String {
    let members = ok(&run(h, &h.owner, "return await client.members.list({})"));
    members
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["principal_id"] == principal)
        .map(|m| m["role"].as_str().unwrap().to_string())
        .unwrap_or_default()
}

/// The principal id a token acts as: the principal of the Action its own script run records.
fn principal_of(h: &Harness, token: &str) -> String {
    ok(&h.call(token, "run_sdk", json!({"code": "return 'whoami'"})));
    let acts = ok(&run(
        h,
        &h.owner,
        "return (await client.actions.list({limit: 1, newest_first: true})).items.map((a: any) => a.principal)",
    ));
    acts[0].as_str().unwrap().to_string()
}

/// What an admin's code tries once it runs with an owner's rights: make the admin an owner,
/// and mint an owner-level token for it.
fn escalation(admin_id: &str) -> String {
    format!(
        "let made = 'no';\ntry {{ await client.members.update({{principal_id: '{admin_id}', role: 'owner'}}); made = 'owner'; }} catch (e) {{ made = e.code; }}\nreturn made;"
    )
}

#[test]
fn an_admins_edit_of_an_owners_behavior_runs_with_the_admins_rights() {
    let h = harness();
    let admin = token(&h, Role::Admin);
    let admin_id = principal_of(&h, &admin);
    ok(&behavior(
        &h,
        &h.owner,
        "owners",
        &["observation"],
        "await client.entities.create({type: 'ticket', name: 'owner code'}); return 1",
    ));
    // The admin replaces the code: the behavior runs as the least of its shapers, the admin.
    let updated = ok(&h.call(
        &admin,
        "run_sdk",
        json!({"code": "return await client.behaviors.update(ctx.args)",
               "args": {"name": "owners", "code": escalation(&admin_id)}}),
    ));
    assert_eq!(updated["changed_by"], json!([admin_id]), "{updated}");
    h.save(&h.owner, json!({"content": "x", "kind": "observation"}));
    let acts = actions(&h, "behavior");
    assert_eq!(acts.len(), 1, "{acts:?}");
    assert_eq!(acts[0]["principal"], json!(admin_id), "{}", acts[0]);
    assert_eq!(
        role_of(&h, &admin_id),
        "admin",
        "the admin did not become owner"
    );
    // Another shape: the admin only changes the trigger of an owner's behavior whose code would
    // make the admin an owner; what fires it is the admin's doing, so it runs as the admin.
    ok(&behavior(
        &h,
        &h.owner,
        "dormant",
        &["never"],
        &escalation(&admin_id),
    ));
    ok(&h.call(
        &admin,
        "run_sdk",
        json!({"code": "return await client.behaviors.update(ctx.args)",
               "args": {"name": "dormant", "trigger": {"event_kinds": ["decision"]}}}),
    ));
    h.save(&h.owner, json!({"content": "y", "kind": "decision"}));
    assert_eq!(role_of(&h, &admin_id), "admin");
    let acts = actions(&h, "behavior");
    assert_eq!(acts.last().unwrap()["principal"], json!(admin_id));
}

#[test]
fn an_operation_runs_with_the_least_role_of_its_caller_and_its_shapers() {
    let h = harness();
    let admin = token(&h, Role::Admin);
    let admin_id = principal_of(&h, &admin);
    // An admin's operation, called by the owner, runs with the admin's rights.
    ok(&h.call(
        &admin,
        "run_sdk",
        json!({"code": "return await client.operations.create(ctx.args)",
               "args": {"name": "promote", "kind": "script", "access": "read", "code": escalation(&admin_id)}}),
    ));
    let (status, body) = rest(&h, &h.owner, "operations.run", json!({"name": "promote"}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!("needs_admin"), "{body}");
    assert_eq!(role_of(&h, &admin_id), "admin");
    // The owner's operation, edited by the admin: the same.
    operation(
        &h,
        json!({"name": "tidy", "kind": "script", "access": "read", "code": "return 'tidy'"}),
    );
    ok(&h.call(
        &admin,
        "run_sdk",
        json!({"code": "return await client.operations.update(ctx.args)",
               "args": {"name": "tidy", "body": {"kind": "script", "code": escalation(&admin_id)}}}),
    ));
    let (_, body) = rest(&h, &h.owner, "operations.run", json!({"name": "tidy"}));
    assert_eq!(body, json!("needs_admin"), "{body}");
    // As a Noun verb from the owner's own script, too.
    operation(
        &h,
        json!({"name": "bump", "kind": "script", "access": "write", "entity_type": "ticket", "code": "return 'bump'"}),
    );
    ok(&h.call(
        &admin,
        "run_sdk",
        json!({"code": "return await client.operations.update(ctx.args)",
               "args": {"name": "bump", "body": {"kind": "script", "code": escalation(&admin_id)}}}),
    ));
    assert_eq!(
        ok(&run(&h, &h.owner, "return await client.Ticket.bump({})")),
        "needs_admin"
    );
    assert_eq!(role_of(&h, &admin_id), "admin");
    // Once a shaper leaves the org, the operation runs for no one.
    ok(&run(
        &h,
        &h.owner,
        &format!("return await client.members.remove({{principal_id: '{admin_id}'}})"),
    ));
    let (status, body) = rest(&h, &h.owner, "operations.run", json!({"name": "tidy"}));
    assert_eq!(status, 403, "{body}");
}

#[test]
fn an_admin_acts_on_no_one_above_its_role() {
    let h = harness();
    let admin = token(&h, Role::Admin);
    let admin_id = principal_of(&h, &admin);
    let owner_id = principal_of(&h, &h.owner);
    let tokens = ok(&run(&h, &h.owner, "return await client.tokens.list({})"));
    let owner_token = tokens
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["principal"] == owner_id)
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    for (method, args) in [
        ("tokens.revoke", json!({"id": owner_token})),
        (
            "members.update",
            json!({"principal_id": owner_id, "role": "viewer"}),
        ),
        (
            "members.update",
            json!({"principal_id": admin_id, "role": "owner"}),
        ),
        ("members.remove", json!({"principal_id": owner_id})),
        ("tokens.create", json!({"principal_id": owner_id})),
        (
            "members.invite",
            json!({"identity": "github:mallory", "role": "owner"}),
        ),
    ] {
        let (status, body) = rest(&h, &admin, method, args.clone());
        assert_eq!(status, 403, "{method} {args}: {body}");
    }
    // The owner's token still works; an admin still acts on its peers and below.
    assert_eq!(
        h.status(&h.owner, "search_memory", json!({"query": "x"})),
        200
    );
    let peer = token(&h, Role::Admin);
    let peer_id = principal_of(&h, &peer);
    let (status, body) = rest(
        &h,
        &admin,
        "members.update",
        json!({"principal_id": peer_id, "role": "member"}),
    );
    assert_eq!(status, 200, "{body}");
    // An owner invite withdrawn by an admin: refused too.
    ok(&run(
        &h,
        &h.owner,
        "return await client.members.invite({identity: 'github:carol', role: 'owner'})",
    ));
    let (status, body) = rest(
        &h,
        &admin,
        "members.uninvite",
        json!({"identity": "github:carol"}),
    );
    assert_eq!(status, 403, "{body}");
}
