//! Another process writes the database under a running `lore serve` (the real binary, SQLite):
//! the server keeps the small values its warm requests read (`src/kept.rs`) and answers them
//! without a read transaction, so these checks are what keeps that honest. A memory saved by the
//! CLI is found by the server's next search; a token revoked by the CLI is refused at the
//! server's next request; a token the CLI issues works at once.

use std::path::Path;
use std::process::{Child, Command};

use serde_json::{Value, json};

use crate::common;

/// The CLI, as another process, on the test's database; its JSON output.
fn cli(db: &Path, args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_lore"))
        .args(args)
        .arg("--db")
        .arg(db)
        .env("LORE_EMBEDDER", "builtin")
        .env("RUST_LOG", "warn")
        .output()
        .expect("the CLI runs");
    assert!(out.status.success(), "lore {args:?}: {out:?}");
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

struct Serving {
    child: Child,
    /// The MCP endpoint.
    url: String,
    agent: ureq::Agent,
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Serving {
    fn start(db: &Path) -> Serving {
        let (child, url, _) =
            common::start_lore_binary(db, &[("LORE_EMBEDDER", "builtin"), ("RUST_LOG", "info")]);
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build();
        Serving {
            child,
            url,
            agent: config.into(),
        }
    }

    /// One stateless `tools/call`: the HTTP status and the JSON-RPC answer.
    fn call(&self, token: &str, tool: &str, arguments: Value) -> (u16, Value) {
        let body = common::tool_call_body(tool, arguments);
        let mut response = self
            .agent
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", tool)
            .header("authorization", format!("Bearer {token}"))
            .send(body.to_string())
            .expect("the server answers");
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().expect("a body");
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// The texts `search_memory` finds for `query`.
    fn search(&self, token: &str, query: &str) -> Vec<String> {
        let (status, answer) = self.call(token, "search_memory", json!({ "query": query }));
        assert_eq!(status, 200, "{answer}");
        let results = answer["result"]["structuredContent"]["results"].as_array();
        let results = results.unwrap_or_else(|| panic!("search results: {answer}"));
        results
            .iter()
            .map(|r| r["content"].as_str().unwrap_or_default().to_string())
            .collect()
    }
}

#[test]
fn writes_by_another_process_hold_at_the_servers_next_request() {
    let dir = common::Dir::new("processes");
    let db = dir.join("lore.db");
    let owner = cli(&db, &["init", "--json"])["token"]
        .as_str()
        .expect("an owner token")
        .to_string();
    let server = Serving::start(&db);
    assert!(
        std::fs::metadata(lore::sqlite::changes_path(&db.canonicalize().unwrap())).is_ok(),
        "the server keeps values, with the change counters beside the database"
    );

    // Warm: the token's caller and the org's index are kept, and their keys read and kept.
    let first = "the staging cluster was moved to the eu-west region in March";
    cli(
        &db,
        &[
            "memory",
            "run",
            "save_memory",
            &json!({ "memories": [{ "content": first }] }).to_string(),
        ],
    );
    for _ in 0..4 {
        assert!(
            server
                .search(&owner, "staging cluster region")
                .contains(&first.to_string())
        );
    }

    // A memory another process saves is found at the next search.
    let second = "the kafka runbook belongs to the platform team since the reorg";
    cli(
        &db,
        &[
            "memory",
            "run",
            "save_memory",
            &json!({ "memories": [{ "content": second }] }).to_string(),
        ],
    );
    assert!(
        server
            .search(&owner, "who owns the kafka runbook")
            .contains(&second.to_string()),
        "the memory saved by another process is found"
    );

    // A token another process issues works at once; once it revokes it, the next request with
    // it is refused, however warm it was.
    let issued = cli(&db, &["token", "create", "--role", "member", "--json"]);
    let (token, id) = (
        issued["token"].as_str().unwrap(),
        issued["token_id"].as_str().unwrap(),
    );
    for _ in 0..4 {
        assert!(!server.search(token, "kafka runbook").is_empty());
    }
    cli(&db, &["token", "revoke", id]);
    let (status, answer) = server.call(token, "search_memory", json!({ "query": "kafka" }));
    assert_eq!(
        status, 401,
        "a token revoked by another process is refused: {answer}"
    );
    // The owner, whose caller shares the org's stamp, is read again and still served.
    assert!(!server.search(&owner, "kafka runbook").is_empty());
}
