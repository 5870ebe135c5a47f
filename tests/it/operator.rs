//! The operator routes (`POST /operator/{action}`) in the core, as every platform serves them:
//! off (a plain 404) without `Config::operator_secret`, refused with a short secret or a wrong
//! bearer, and, with the secret, the same admin actions as the CLI, whose tokens then work.

use std::rc::Rc;

use futures_executor::block_on;
use serde_json::{Value, json};

use lore_base::ports::Ports;
use lore_base::storage::memory::MemoryStorage;
use lore_front::{Config, Lore};
use lore_testing::ports::{JumpClock, SeqRandom};

const SECRET: &str = "an-operator-secret-of-at-least-32-characters";

fn server(secret: Option<&str>) -> Lore {
    let ports = Ports {
        storage: Rc::new(MemoryStorage::new()),
        clock: Rc::new(JumpClock::starting_at(1_767_225_600_000)),
        random: Rc::new(SeqRandom::seeded(4)),
        http: None,
        embedder: None,
        cache: None,
        background: None,
    };
    let config = Config {
        operator_secret: secret.map(str::to_string),
        ..Config::default()
    };
    Lore::new(ports, config)
}

fn call(lore: &Lore, method: &str, path: &str, bearer: Option<&str>, body: &str) -> (u16, Value) {
    let mut request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "127.0.0.1:8787");
    if let Some(bearer) = bearer {
        request = request.header("authorization", format!("Bearer {bearer}"));
    }
    let response = block_on(lore.handle(request.body(body.as_bytes().to_vec()).unwrap()));
    let status = response.status().as_u16();
    let body = serde_json::from_slice(response.body()).unwrap_or(Value::Null);
    (status, body)
}

#[test]
fn without_a_secret_every_operator_path_is_a_plain_404() {
    let lore = server(None);
    for action in ["init", "org-list", "token-create", "anything"] {
        let (status, body) = call(
            &lore,
            "POST",
            &format!("/operator/{action}"),
            Some(SECRET),
            "{}",
        );
        assert_eq!(status, 404, "{action}: {body}");
        assert_eq!(body["error"]["code"], "not_found", "{body}");
    }
}

#[test]
fn a_short_secret_a_wrong_bearer_and_a_get_are_refused() {
    let short = server(Some("short"));
    let (status, body) = call(&short, "POST", "/operator/org-list", Some("short"), "{}");
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (503, Some("misconfigured")),
        "{body}"
    );

    let lore = server(Some(SECRET));
    for bearer in [None, Some("wrong"), Some(&SECRET[1..])] {
        let (status, body) = call(&lore, "POST", "/operator/org-list", bearer, "{}");
        assert_eq!(status, 401, "{bearer:?}: {body}");
    }
    let (status, _) = call(&lore, "GET", "/operator/org-list", Some(SECRET), "");
    assert_eq!(status, 405);
    let (status, body) = call(
        &lore,
        "POST",
        "/operator/org-create",
        Some(SECRET),
        "{\"name\": \"x\", \"x\": 1}",
    );
    assert_eq!(status, 400, "unknown fields are refused: {body}");
    let (status, body) = call(&lore, "POST", "/operator/reboot", Some(SECRET), "{}");
    assert_eq!(status, 404, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("token-create"),
        "{body}"
    );
}

#[test]
fn the_actions_bootstrap_a_deployment_whose_tokens_then_work() {
    let lore = server(Some(SECRET));
    let (status, init) = call(
        &lore,
        "POST",
        "/operator/init",
        Some(SECRET),
        "{\"org\": \"acme\"}",
    );
    assert_eq!(status, 200, "{init}");
    let (status, created) = call(
        &lore,
        "POST",
        "/operator/org-create",
        Some(SECRET),
        "{\"name\": \"beta\"}",
    );
    assert_eq!(status, 200, "{created}");
    let (status, again) = call(
        &lore,
        "POST",
        "/operator/org-create",
        Some(SECRET),
        "{\"name\": \"beta\"}",
    );
    assert_eq!(status, 409, "{again}");
    let (_, orgs) = call(&lore, "POST", "/operator/org-list", Some(SECRET), "");
    let names: Vec<&str> = orgs["orgs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["id"].as_str())
        .collect();
    assert!(names.contains(&"acme") && names.contains(&"beta"), "{orgs}");

    let body =
        json!({"org": "acme", "role": "viewer", "scopes": "mcp:read", "name": "probe"}).to_string();
    let (status, issued) = call(&lore, "POST", "/operator/token-create", Some(SECRET), &body);
    assert_eq!(status, 200, "{issued}");
    let token = issued["token"].as_str().unwrap().to_string();
    let (status, _) = call(&lore, "GET", "/api/acme/sdk.d.ts", Some(&token), "");
    assert_eq!(status, 200, "the issued token authenticates");

    let (_, tokens) = call(
        &lore,
        "POST",
        "/operator/token-list",
        Some(SECRET),
        "{\"org\": \"acme\"}",
    );
    let id = tokens["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["label"] == "probe")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let body = json!({"org": "acme", "token_id": id}).to_string();
    let (status, revoked) = call(&lore, "POST", "/operator/token-revoke", Some(SECRET), &body);
    assert_eq!(status, 200, "{revoked}");
    let (status, _) = call(&lore, "GET", "/api/acme/sdk.d.ts", Some(&token), "");
    assert_eq!(status, 401, "a revoked token is refused");
}
