//! The in-process harness the integration tests share: a `Lore` on given ports, driven through
//! `Lore::handle` with real MCP requests.
#![allow(dead_code)]

use futures_executor::block_on;
use serde_json::{Value, json};

use lore_base::ports::Ports;
use lore_directory::admin::{self, InitOutcome};
use lore_front::{Config, Lore};

pub const V26: &str = "2026-07-28";

/// Outbound requests of members may reach this machine's loopback addresses: for tests whose
/// upstreams (connections, feeds) listen on 127.0.0.1. Public addresses only is the default.
pub fn loopback_upstreams() -> lore_base::outbound::Policy {
    lore_base::outbound::Policy::parse("127.0.0.0/8,::1").unwrap()
}

/// The native outbound client, reaching loopback upstreams too ([`loopback_upstreams`]).
pub fn loopback_client() -> lore::outbound::UreqClient {
    lore::outbound::UreqClient::new(&loopback_upstreams(), Default::default())
}

/// Where every in-process test's clock starts: 2026-01-01T00:00:00Z.
pub const START_MS: i64 = 1_767_225_600_000;

/// Ports for an in-process test: a fresh memory store, a clock that steps from [`START_MS`],
/// randomness from `seed`; no HTTP client, embedder, cache or background runner (set them with
/// `Ports { http: …, ..memory_ports(seed) }`).
pub fn memory_ports(seed: u64) -> Ports {
    Ports {
        storage: std::rc::Rc::new(lore_base::storage::memory::MemoryStorage::new()),
        clock: std::rc::Rc::new(lore_testing::ports::StepClock::starting_at(START_MS)),
        random: std::rc::Rc::new(lore_testing::ports::SeqRandom::seeded(seed)),
        http: None,
        embedder: None,
        cache: None,
        background: None,
    }
}

/// Tests that run scripts in script processes or count them (or this process's resident memory)
/// take this, so they run one at a time: another's scripts would change what they count.
pub fn scripts_alone() -> std::sync::MutexGuard<'static, ()> {
    static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ALONE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub struct Harness {
    pub lore: Lore,
    pub owner: String,
}

impl Harness {
    /// A core on `ports` whose store is initialised with org `org` (or already was: then
    /// `owner` is empty and tests bring their own token).
    pub fn on(ports: Ports, org: &str) -> Self {
        Self::on_with(ports, org, Config::default())
    }

    /// [`Harness::on`] with `config`.
    pub fn on_with(ports: Ports, org: &str, config: Config) -> Self {
        let lore = Lore::new(ports, config);
        let owner = match block_on(admin::init(lore.ports(), org)).unwrap() {
            InitOutcome::Created(t) => t.token,
            _ => String::new(),
        };
        Self { lore, owner }
    }

    /// The HTTP status of a stateless `tools/call`.
    pub fn status(&self, token: &str, tool: &str, args: Value) -> u16 {
        block_on(self.lore.handle(self.request(token, tool, args)))
            .status()
            .as_u16()
    }

    /// [`Harness::call`] awaited, for tests that run on a tokio runtime (script processes).
    pub async fn call_async(&self, token: &str, tool: &str, args: Value) -> Value {
        let response = self.lore.handle(self.request(token, tool, args)).await;
        assert_eq!(response.status(), 200);
        rpc_message(&String::from_utf8(response.into_body()).unwrap())["result"].clone()
    }

    /// A stateless (2026-07-28) `tools/call`; the `result` object.
    pub fn call(&self, token: &str, tool: &str, args: Value) -> Value {
        let response = block_on(self.lore.handle(self.request(token, tool, args)));
        assert_eq!(response.status(), 200);
        rpc_message(&String::from_utf8(response.into_body()).unwrap())["result"].clone()
    }

    /// `POST /api/{org}/{method}` (an admin tool or SDK method) with `args` as `token`.
    pub fn api(&self, org: &str, token: &str, method: &str, args: Value) -> Reply {
        let request = http::Request::builder()
            .method("POST")
            .uri(format!("/api/{org}/{method}"))
            .header("host", "127.0.0.1:8787")
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&args).unwrap())
            .unwrap();
        let response = block_on(self.lore.handle(request));
        Reply {
            status: response.status().as_u16(),
            headers: response.headers().clone(),
            json: serde_json::from_slice(response.body()).unwrap_or(Value::Null),
        }
    }

    pub fn request(&self, token: &str, tool: &str, args: Value) -> http::Request<Vec<u8>> {
        let params = json!({"name": tool, "arguments": args});
        self.rpc_request("/mcp", token, "tools/call", params)
    }

    /// A stateless (2026-07-28) request to `uri` (e.g. `/mcp?profile=compact`): the HTTP
    /// status and the JSON-RPC response. `params._meta` gets the protocol fields added.
    pub fn rpc(&self, uri: &str, token: &str, method: &str, params: Value) -> (u16, Value) {
        let response = block_on(
            self.lore
                .handle(self.rpc_request(uri, token, method, params)),
        );
        let status = response.status().as_u16();
        let text = String::from_utf8(response.into_body()).unwrap();
        (status, rpc_message(&text))
    }

    fn rpc_request(
        &self,
        uri: &str,
        token: &str,
        method: &str,
        mut params: Value,
    ) -> http::Request<Vec<u8>> {
        let meta = params
            .as_object_mut()
            .unwrap()
            .entry("_meta")
            .or_insert_with(|| json!({}));
        meta["io.modelcontextprotocol/protocolVersion"] = json!(V26);
        meta["io.modelcontextprotocol/clientCapabilities"] = json!({});
        let name = params["name"].as_str().map(str::to_string);
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let mut builder = http::Request::builder()
            .method("POST")
            .uri(uri)
            .header("host", "127.0.0.1:8787")
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", V26)
            .header("mcp-method", method);
        if let Some(name) = name {
            builder = builder.header("mcp-name", name);
        }
        builder.body(serde_json::to_vec(&body).unwrap()).unwrap()
    }

    /// `save_memory`'s ids.
    pub fn save(&self, token: &str, args: Value) -> Vec<String> {
        let r = self.call(token, "save_memory", args);
        assert_eq!(r["isError"], false, "{r}");
        r["structuredContent"]["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    }

    /// The result of a `run_sdk` script run as `token`, which must succeed.
    pub fn run_ok(&self, token: &str, code: &str) -> Value {
        ok(&self.call(token, "run_sdk", json!({ "code": code })))
    }

    /// `search_memory`'s results.
    pub fn search(&self, token: &str, args: Value) -> Vec<Value> {
        let r = self.call(token, "search_memory", args);
        assert_eq!(r["isError"], false, "{r}");
        r["structuredContent"]["results"]
            .as_array()
            .unwrap()
            .clone()
    }
}

/// The structured result of a tool call that succeeded.
/// A new token of `org` for a new agent with `role` and `scopes` (`"mcp:read mcp:write"`).
pub fn token(lore: &Lore, org: &str, role: lore_base::model::Role, scopes: &str) -> String {
    let request = lore_directory::admin::TokenRequest {
        org: org.into(),
        role: Some(role),
        scopes: lore_base::model::Scopes::parse(scopes).unwrap(),
        principal: None,
        name: None,
        expires_at_ms: None,
    };
    block_on(lore_directory::admin::create_token(lore.ports(), request))
        .unwrap()
        .token
}

pub fn ok(r: &Value) -> Value {
    assert_eq!(r["isError"], false, "{r}");
    r["structuredContent"]["result"].clone()
}

/// Ports over a fresh in-memory store, with a clock whose sleeps jump (from 2026-01-01), a
/// random source seeded with `seed` and `background`; no HTTP, embedder or cache.
pub fn jumping_ports(
    seed: u64,
    background: Option<std::rc::Rc<dyn lore_base::ports::Background>>,
) -> Ports {
    Ports {
        storage: std::rc::Rc::new(lore_base::storage::memory::MemoryStorage::new()),
        clock: std::rc::Rc::new(lore_testing::ports::JumpClock::starting_at(
            1_767_225_600_000,
        )),
        random: std::rc::Rc::new(lore_testing::ports::SeqRandom::seeded(seed)),
        http: None,
        embedder: None,
        cache: None,
        background,
    }
}

/// An HTTP answer of the REST surface.
pub struct Reply {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub json: Value,
}

/// The JSON-RPC message of an MCP answer: the body, or the last `data:` line of an SSE
/// stream; `Null` when it is not JSON.
pub fn rpc_message(text: &str) -> Value {
    let json = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .next_back()
        .unwrap_or(text);
    serde_json::from_str(json).unwrap_or(Value::Null)
}

/// A loopback HTTP/1.1 server on its own thread: `answer(method and path, body)` gives each
/// request's status line (e.g. `200 OK`) and JSON body. Returns its base URL.
#[allow(clippy::disallowed_methods)] // the server needs a thread of its own
pub fn serve_http(answer: impl Fn(&str, &[u8]) -> (String, String) + Send + 'static) -> String {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            let _ = reader.read_line(&mut request_line);
            let target: String = request_line
                .split_whitespace()
                .take(2)
                .collect::<Vec<_>>()
                .join(" ");
            let mut line = String::new();
            let mut length = 0;
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                if line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                line.clear();
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let (status, body) = answer(&target, &body);
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://127.0.0.1:{}", addr.port())
}

pub fn ids(results: &[Value]) -> Vec<String> {
    results
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect()
}

/// The real `lore serve` on `db`, on a free loopback port with rate limits off and `env` set,
/// its log in a file beside the database. Returns the process, the MCP URL and the log's text
/// when it started (panics with the log if it does not).
pub fn start_lore_binary(
    db: &std::path::Path,
    env: &[(&str, &str)],
) -> (std::process::Child, String, String) {
    // The output goes to a file, read until it names the address, so that nothing has to keep
    // draining a pipe.
    let log = db.with_extension(format!("log{}", std::process::id()));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_lore"))
        .args(["serve", "--addr", "127.0.0.1:0", "--db"])
        .arg(db)
        .env("LORE_RATE_TOKEN_PER_MINUTE", "0")
        .env("LORE_RATE_ORG_PER_MINUTE", "0")
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("lore serve starts");
    for _ in 0..6000 {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let url = text
            .split("lore listening on ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next());
        if let Some(url) = url {
            return (child, url.to_string(), text);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!(
        "lore serve did not start: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    )
}

/// The body of a stateless (2026-07-28) `tools/call`.
pub fn tool_call_body(tool: &str, arguments: Value) -> Value {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {
            "name": tool, "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": V26,
                "io.modelcontextprotocol/clientCapabilities": {}
            }
        }
    })
}

/// A fresh directory under the system temp dir (`lore-test-{name}-{pid}`), removed when dropped,
/// also when the test fails.
pub struct Dir(pub std::path::PathBuf);

impl Dir {
    pub fn new(name: &str) -> Self {
        let path = std::env::temp_dir().join(format!("lore-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }

    pub fn join(&self, name: &str) -> std::path::PathBuf {
        self.0.join(name)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
