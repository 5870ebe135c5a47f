//! kill -9 between an event write and its index segment write: `lore serve` (the real binary,
//! SQLite) acknowledges a batch of memories, which makes an index segment due; the segment is
//! written in the background after the answer, and the test SIGKILLs the process the moment the
//! answer arrives, so the kill lands before, during or after that write. Over several rounds on
//! one database, then a last start: every acknowledged memory must be found by `search_memory`
//! (served from whatever segments survived plus the events past them), and `lore doctor` must
//! find the stored index usable.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command};

use serde_json::{Value, json};

use crate::common;

struct Server {
    child: Child,
    addr: String,
    /// The owner token, printed on the first start of a new database only.
    token: Option<String>,
}

impl Server {
    fn start(db: &Path) -> Self {
        let (child, url, log) = common::start_lore_binary(db, &[("RUST_LOG", "warn")]);
        let addr = url.trim_start_matches("http://").split('/').next();
        let addr = addr.expect("an address").to_string();
        let token = log
            .lines()
            .find(|line| line.starts_with("  lore_"))
            .map(|line| line.trim().to_string());
        Server { child, addr, token }
    }

    /// One `tools/call`; the tool's structured result (panics on a protocol or tool error).
    fn call(&self, token: &str, tool: &str, arguments: Value) -> Value {
        let body = common::tool_call_body(tool, arguments).to_string();
        let mut stream = TcpStream::connect(&self.addr).expect("connect");
        let request = format!(
            "POST /mcp HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
             accept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\n\
             mcp-method: tools/call\r\nmcp-name: {tool}\r\nauthorization: Bearer {token}\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n{body}",
            self.addr,
            body.len()
        );
        stream.write_all(request.as_bytes()).expect("send");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("read");
        let (head, rest) = response.split_once("\r\n\r\n").expect("an HTTP response");
        assert!(head.starts_with("HTTP/1.1 200"), "{tool}: {response}");
        let json_text = if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            dechunk(rest)
        } else {
            rest.to_string()
        };
        let v: Value = serde_json::from_str(&json_text).expect("a JSON-RPC answer");
        let result = &v["result"];
        assert_ne!(result["isError"], json!(true), "{tool}: {v}");
        result["structuredContent"].clone()
    }

    fn kill(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reaped");
    }
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    loop {
        let (size, rest) = body.split_once("\r\n").expect("a chunk size");
        let n = usize::from_str_radix(size.trim(), 16).expect("hex chunk size");
        if n == 0 {
            return out;
        }
        out.push_str(&rest[..n]);
        body = &rest[n + 2..];
    }
}

#[test]
fn every_acknowledged_memory_is_found_after_kill_9_between_events_and_segments() {
    let dir = common::Dir::new("segkill");
    let db = dir.join("lore.db");
    let mut token = None;
    let mut acknowledged: Vec<(String, usize)> = Vec::new();
    let mut n = 0;
    for round in 0..6 {
        let server = Server::start(&db);
        let token = token.get_or_insert_with(|| server.token.clone().expect("owner token"));
        // Rounds vary the batch so that segment writes of several sizes are due at the kill.
        for batch in 0..=(round % 3) {
            let memories: Vec<Value> = (0..(20 + 17 * batch))
                .map(|_| {
                    n += 1;
                    json!({ "content": format!("kill round r{round}: the lapwing tally at fen n{n}") })
                })
                .collect();
            let first = n + 1 - memories.len();
            let saved = server.call(token, "save_memory", json!({ "memories": memories }));
            let ids = saved["ids"].as_array().expect("ids").clone();
            for (i, id) in ids.iter().enumerate() {
                acknowledged.push((id.as_str().unwrap().to_string(), first + i));
            }
        }
        server.kill();
    }
    let server = Server::start(&db);
    let token = token.unwrap();
    for (id, n) in &acknowledged {
        let found = server.call(
            &token,
            "search_memory",
            json!({ "query": format!("lapwing fen n{n}"), "limit": 5 }),
        );
        let ids: Vec<&str> = found["results"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r["id"].as_str())
            .collect();
        assert!(
            ids.contains(&id.as_str()),
            "memory {n} ({id}) acknowledged before a kill -9 is not found: {ids:?}"
        );
    }
    server.kill();
    let doctor = Command::new(env!("CARGO_BIN_EXE_lore"))
        .args(["doctor", "--db"])
        .arg(&db)
        .output()
        .expect("lore doctor runs");
    assert!(
        doctor.status.success(),
        "lore doctor after the kills: {}{}",
        String::from_utf8_lossy(&doctor.stdout),
        String::from_utf8_lossy(&doctor.stderr)
    );
}
