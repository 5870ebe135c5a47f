//! The in-process harness the integration tests share: a `Lore` on given ports, driven through
//! `Lore::handle` with real MCP requests.
#![allow(dead_code)]

use futures_executor::block_on;
use serde_json::{Value, json};

use lore::admin::{self, InitOutcome};
use lore::ports::Ports;
use lore::{Config, Lore};

pub const V26: &str = "2026-07-28";

pub struct Harness {
    pub lore: Lore,
    pub owner: String,
}

impl Harness {
    /// A core on `ports` whose store is initialised with org `org` (or already was: then
    /// `owner` is empty and tests bring their own token).
    pub fn on(ports: Ports, org: &str) -> Self {
        let lore = Lore::new(ports, Config::default());
        let owner = match block_on(admin::init(&lore.ports, org)).unwrap() {
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

    /// A stateless (2026-07-28) `tools/call`; the `result` object.
    pub fn call(&self, token: &str, tool: &str, args: Value) -> Value {
        let response = block_on(self.lore.handle(self.request(token, tool, args)));
        assert_eq!(response.status(), 200);
        let bytes = response.into_body();
        let text = String::from_utf8(bytes).unwrap();
        let json = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .next_back()
            .map(str::to_string)
            .unwrap_or(text);
        let v: Value = serde_json::from_str(&json).unwrap();
        v["result"].clone()
    }

    fn request(&self, token: &str, tool: &str, args: Value) -> http::Request<Vec<u8>> {
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
        let json = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .next_back()
            .map(str::to_string)
            .unwrap_or(text);
        (status, serde_json::from_str(&json).unwrap_or(Value::Null))
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

pub fn ids(results: &[Value]) -> Vec<String> {
    results
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect()
}
