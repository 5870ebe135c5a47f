//! What the request-level targets share: one in-memory core per process with two orgs, `fuzz`
//! (the caller's) and `rival` (whose every text carries [`MARKER`]), and a worker thread with
//! the native server's stack that runs each input on it.
#![allow(dead_code)]

use std::rc::Rc;
use std::sync::Mutex;
use std::sync::OnceLock;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use futures_executor::block_on;
use lore_base::ids::OrgId;
use lore_base::model::{Role, Scopes};
use lore_base::ports::Ports;
use lore_base::storage::memory::MemoryStorage;
use lore_directory::admin::{self, InitOutcome, TokenRequest};
use lore_directory::caller::{Caller, resolve_caller};
use lore_directory::tokens::verify_token;
use lore_front::{Config, Lore};
use lore_testing::ports::{SeqRandom, StepClock};
use serde_json::{Value, json};

/// Only the rival org's data holds this; no answer to a `fuzz` caller may contain it.
pub const MARKER: &str = "RivalSecret-9c1e5b7d";
pub const ORG: &str = "fuzz";
pub const RIVAL: &str = "rival";

/// A core with both orgs seeded, and the callers' tokens.
pub struct Core {
    pub lore: Lore,
    /// The `fuzz` org's owner token (reaches only `fuzz`).
    pub owner: String,
    /// A member (agent) token of `fuzz`, both scopes.
    pub member: String,
    pub owner_caller: Caller,
    pub member_caller: Caller,
    /// Inputs served since the core was built (it is rebuilt now and then: writes pile up).
    pub served: u64,
}

/// A fresh core. `config` lets a target shrink budgets (SQL row visits).
pub fn build(config: Config) -> Core {
    let ports = Ports {
        storage: Rc::new(MemoryStorage::new()),
        clock: Rc::new(StepClock::starting_at(1_767_225_600_000)),
        random: Rc::new(SeqRandom::seeded(11)),
        http: None,
        embedder: None,
        cache: None,
        background: None,
    };
    let lore = Lore::new(ports, config);
    block_on(async {
        let owner = match admin::init(lore.ports(), ORG).await.unwrap() {
            InitOutcome::Created(t) => t.token,
            _ => unreachable!("a fresh store"),
        };
        let rival = admin::create_org(lore.ports(), RIVAL).await.unwrap().token;
        let member = admin::create_token(
            lore.ports(),
            TokenRequest {
                org: ORG.into(),
                role: Some(Role::Member),
                scopes: Scopes::ALL,
                principal: None,
                name: Some("fuzz member".into()),
                expires_at_ms: None,
            },
        )
        .await
        .unwrap()
        .token;
        seed(&lore, ORG, &owner, "ours").await;
        seed(&lore, RIVAL, &rival, MARKER).await;
        let owner_caller = caller(&lore, &owner).await;
        let member_caller = caller(&lore, &member).await;
        Core {
            lore,
            owner,
            member,
            owner_caller,
            member_caller,
            served: 0,
        }
    })
}

async fn caller(lore: &Lore, token: &str) -> Caller {
    let credential = verify_token(lore.ports(), token, None).await.unwrap();
    let org = OrgId::parse(ORG).unwrap();
    resolve_caller(lore.ports(), credential, Some(ORG), &org)
        .await
        .unwrap()
}

/// One REST call that must succeed (seeding).
async fn api(lore: &Lore, org: &str, token: &str, method: &str, args: Value) -> Value {
    let response = lore
        .handle(post(
            &format!("/api/{org}/{method}"),
            token,
            serde_json::to_vec(&args).unwrap(),
        ))
        .await;
    let status = response.status();
    let body: Value = serde_json::from_slice(response.body()).unwrap_or(Value::Null);
    assert!(
        status.is_success(),
        "seeding {org} {method}: {status} {body}"
    );
    body
}

pub fn post(uri: &str, token: &str, body: Vec<u8>) -> http::Request<Vec<u8>> {
    http::Request::builder()
        .method("POST")
        .uri(uri)
        .header("host", "127.0.0.1:8787")
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .body(body)
        .unwrap()
}

/// The same shapes in both orgs: a typed entity type, entities, a relationship, memories, a
/// metric. In the rival org every text (and a type of its own) carries `mark`.
async fn seed(lore: &Lore, org: &str, token: &str, mark: &str) {
    api(
        lore,
        org,
        token,
        "templates.create",
        json!({"name": "ticket", "description": format!("tickets {mark}"), "schema": {
            "type": "object", "properties": {
                "title": {"type": "string"}, "points": {"type": "integer"},
                "done": {"type": "boolean"}, "labels": {"type": "array", "items": {"type": "string"}}}}}),
    )
    .await;
    let own_type = if org == RIVAL {
        "rivalsecret_9c1e5b7d"
    } else {
        "note"
    };
    api(
        lore,
        org,
        token,
        "templates.create",
        json!({"name": own_type, "schema": {"type": "object", "properties": {"body": {"type": "string"}}}}),
    )
    .await;
    let mut ids = Vec::new();
    for i in 0..3 {
        let e = api(
            lore,
            org,
            token,
            "entities.create",
            json!({"type": "ticket", "name": format!("ticket {i} {mark}"), "properties": {
                "title": format!("title {mark}"), "points": i, "done": i == 1, "labels": [mark]}}),
        )
        .await;
        ids.push(e["id"].as_str().unwrap().to_string());
    }
    api(
        lore,
        org,
        token,
        "entities.create",
        json!({"type": own_type, "name": format!("{own_type} {mark}"), "properties": {"body": mark}}),
    )
    .await;
    api(
        lore,
        org,
        token,
        "relationships.create",
        json!({"type": "blocks", "from": ids[0], "to": ids[1], "properties": {"why": mark}}),
    )
    .await;
    let first = api(
        lore,
        org,
        token,
        "memory.save",
        json!({"content": format!("deploys happen on tuesdays {mark}"), "kind": "decision", "entity_ids": [ids[0]]}),
    )
    .await;
    api(
        lore,
        org,
        token,
        "memory.save",
        json!({"content": format!("deploys happen on thursdays {mark}"), "kind": "decision",
            "supersedes_event_id": first["ids"][0]}),
    )
    .await;
    api(
        lore,
        org,
        token,
        "memory.save",
        json!({"content": format!("the auth service belongs to ada {mark}"), "kind": "fact"}),
    )
    .await;
}

/// Whether `text` holds the rival's marker (case-insensitively).
pub fn has_marker(text: &str) -> bool {
    text.to_ascii_lowercase()
        .contains(&MARKER.to_ascii_lowercase())
}

/// Whether an input names the marker itself (then an echo is no leak, and its writes would
/// put the marker into the `fuzz` org: such inputs are not run).
pub fn input_names_marker(data: &[u8]) -> bool {
    if has_marker(&String::from_utf8_lossy(data)) {
        return true;
    }
    // JSON escapes could spell it too: compare the decoded text.
    serde_json::from_slice::<Value>(data).is_ok_and(|v| has_marker(&v.to_string()))
}

/// Asserts that `answer` holds nothing of the rival org.
pub fn assert_no_leak(answer: &str, what: &str) {
    assert!(
        !has_marker(answer),
        "{what}: the rival org's data leaked into the answer: {answer}"
    );
}

type Job = Box<dyn FnOnce() + Send>;

/// Runs `job` on one long-lived thread with the native server's stack
/// (`lore_sandbox::failure::STACK_BYTES`, as `lore serve`'s request threads have), so its
/// thread-locals (the core) live across inputs. A panic there aborts the process (libFuzzer's
/// panic hook), which is the finding.
pub fn on_worker(job: impl FnOnce() + Send + 'static) {
    static WORKER: OnceLock<Mutex<(SyncSender<Job>, Receiver<()>)>> = OnceLock::new();
    let worker = WORKER.get_or_init(|| {
        let (job_tx, job_rx) = sync_channel::<Job>(0);
        let (done_tx, done_rx) = sync_channel::<()>(0);
        std::thread::Builder::new()
            .name("fuzz-worker".into())
            .stack_size(lore_sandbox::failure::STACK_BYTES)
            .spawn(move || {
                while let Ok(job) = job_rx.recv() {
                    job();
                    if done_tx.send(()).is_err() {
                        break;
                    }
                }
            })
            .unwrap();
        Mutex::new((job_tx, done_rx))
    });
    let worker = worker.lock().unwrap();
    worker.0.send(Box::new(job)).unwrap();
    worker.1.recv().unwrap();
}

/// The text of an HTTP response body (SSE `data:` lines or plain JSON).
pub fn body_text(body: &[u8]) -> String {
    String::from_utf8_lossy(body).into_owned()
}
