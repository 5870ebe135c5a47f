//! Rate limits per token and per org (SPEC 10) through `/mcp` and `/api`: over a limit is HTTP
//! 429 with `Retry-After` and an error naming the limit; buckets refill with time; an org may
//! lower its limits but not raise them; other orgs are not affected.

use crate::common;

use std::rc::Rc;

use futures_executor::block_on;
use serde_json::{Value, json};

use common::{Harness, V26};
use lore_base::model::Role;
use lore_base::ports::Ports;
use lore_base::ratelimit::{MemoryLimiter, RateLimits};
use lore_base::storage::memory::MemoryStorage;
use lore_directory::admin;
use lore_front::{Config, Lore};
use lore_testing::ports::{JumpClock, SeqRandom};

struct World {
    h: Harness,
    clock: JumpClock,
    rival: String,
}

/// 60 requests a minute per token (a burst of 10), 120 per org (a burst of 20).
fn world() -> World {
    let clock = JumpClock::starting_at(1_767_225_600_000);
    let ports = Ports {
        storage: Rc::new(MemoryStorage::new()),
        clock: Rc::new(JumpClock(clock.0.clone())),
        random: Rc::new(SeqRandom::seeded(9)),
        http: None,
        embedder: None,
        cache: None,
        background: None,
    };
    let mut h = Harness::on(ports.clone(), "acme");
    let rival = block_on(admin::create_org(&ports, "rival")).unwrap().token;
    let config = Config {
        rate_limits: RateLimits {
            token_per_minute: 60,
            org_per_minute: 120,
        },
        ..Config::default()
    };
    h.lore = Lore::new(ports, config).with_rate_limiter(Rc::new(MemoryLimiter::default()));
    World { h, clock, rival }
}

impl World {
    fn token(&self, role: Role) -> String {
        common::token(&self.h.lore, "acme", role, "mcp:read mcp:write")
    }

    /// `tools/list` on `/mcp`: status, `Retry-After`, body.
    fn list(&self, token: &str) -> (u16, Option<String>, Value) {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": V26,
            "io.modelcontextprotocol/clientCapabilities": {}}}});
        let request = http::Request::builder()
            .method("POST")
            .uri("/mcp")
            .header("host", "127.0.0.1:8787")
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .header("mcp-protocol-version", V26)
            .header("mcp-method", "tools/list")
            .body(serde_json::to_vec(&body).unwrap())
            .unwrap();
        reply(block_on(self.h.lore.handle(request)))
    }

    /// `POST /api/{org}/{method}`: status, `Retry-After`, body.
    fn api(
        &self,
        org: &str,
        token: &str,
        method: &str,
        args: Value,
    ) -> (u16, Option<String>, Value) {
        let r = self.h.api(org, token, method, args);
        let retry = r
            .headers
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_string());
        (r.status, retry, r.json)
    }

    fn wait_ms(&self, ms: i64) {
        self.clock.0.set(self.clock.0.get() + ms);
    }
}

fn reply(response: http::Response<Vec<u8>>) -> (u16, Option<String>, Value) {
    let status = response.status().as_u16();
    let retry = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    let body = serde_json::from_slice(response.body()).unwrap_or(Value::Null);
    (status, retry, body)
}

#[test]
fn a_token_over_its_limit_gets_429_with_retry_after_then_refills() {
    let w = world();
    let owner = w.h.owner.clone();
    for i in 0..10 {
        assert_eq!(w.list(&owner).0, 200, "request {i} is within the burst");
    }
    let (status, retry, body) = w.list(&owner);
    assert_eq!(status, 429, "{body}");
    assert_eq!(retry.as_deref(), Some("1"));
    assert_eq!(body["error"]["code"], -32029, "{body}");
    assert_eq!(body["error"]["data"]["limit"], "token");
    assert_eq!(body["error"]["data"]["per_minute"], 60);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("token limit")
    );
    // The REST surface is limited by the same buckets.
    let (status, retry, body) = w.api("acme", &owner, "organizations.get", json!({}));
    assert_eq!(status, 429, "{body}");
    assert!(retry.is_some());
    assert_eq!(body["error"]["code"], "rate_limited");
    // Another org is not affected; one second later the token may call again.
    assert_eq!(
        w.api("rival", &w.rival, "organizations.get", json!({})).0,
        200
    );
    w.wait_ms(1_000);
    assert_eq!(w.list(&owner).0, 200);
    assert_eq!(w.list(&owner).0, 429);
}

#[test]
fn an_org_limit_holds_across_its_tokens() {
    let w = world();
    let tokens: Vec<String> = (0..3).map(|_| w.token(Role::Member)).collect();
    // Two tokens use up the org's burst of 20 between them.
    for t in &tokens[..2] {
        for _ in 0..10 {
            assert_eq!(w.list(t).0, 200);
        }
    }
    let (status, _, body) = w.list(&tokens[2]);
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["data"]["limit"], "org");
    // A refused request took nothing: after 0.5 s (one org request back) the fresh token
    // still has its whole burst for the org to meter.
    w.wait_ms(500);
    assert_eq!(w.list(&tokens[2]).0, 200);
    assert_eq!(w.list(&tokens[2]).0, 429);
}

#[test]
fn an_org_may_lower_its_limits_and_never_raise_them() {
    let w = world();
    let owner = w.h.owner.clone();
    let (status, _, body) = w.api(
        "acme",
        &owner,
        "organizations.update",
        json!({"rate_limits": {"token_per_minute": 600}}),
    );
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["field"], "rate_limits/token_per_minute");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("only lower")
    );
    let (status, _, body) = w.api(
        "acme",
        &owner,
        "organizations.update",
        json!({"rate_limits": {"token_per_minute": 6}}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["rate_limits"]["token_per_minute"], 6);
    // 6 a minute: a burst of one.
    let member = w.token(Role::Member);
    assert_eq!(w.list(&member).0, 200);
    let (status, _, body) = w.list(&member);
    assert_eq!(status, 429);
    assert_eq!(body["error"]["data"]["per_minute"], 6);
    // `{}` clears the org's own limits.
    w.wait_ms(60_000);
    let (status, _, body) = w.api(
        "acme",
        &owner,
        "organizations.update",
        json!({"rate_limits": {}}),
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.get("rate_limits").is_none(), "{body}");
    for _ in 0..5 {
        assert_eq!(w.list(&member).0, 200);
    }
}

#[test]
fn scripts_past_the_servers_cap_or_an_orgs_or_tokens_share_are_refused_saying_whose() {
    let mut w = world();
    // 4 slots: an org may hold 2 of them, a token 1.
    let slots = lore_base::ratelimit::ScriptSlots::new(4);
    let ports = w.h.lore.ports().clone();
    let lore = std::mem::replace(&mut w.h.lore, Lore::new(ports, Config::default()));
    w.h.lore = lore.with_script_slots(slots.clone());
    let owner = w.h.owner.clone();
    let member = w.token(Role::Member);
    let rival = w.rival.clone();
    let refused = |r: &serde_json::Value, says: &str| {
        assert_eq!(r["isError"], true, "{r}");
        let text = r["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("overloaded"), "{text}");
        assert!(text.contains(says), "{says}: {text}");
    };
    // Two of acme's scripts run elsewhere (here the slots are held by hand).
    let held_owner = slots.try_take("acme", "held-by-owner").expect("a slot");
    let held_member = slots.try_take("acme", "held-by-member").expect("a slot");
    // acme now holds its share of 2: any acme token is refused, naming the org's share.
    refused(
        &w.h.call(&member, "run_sdk", json!({"code": "return 1"})),
        "org acme already runs 2 scripts",
    );
    refused(
        &w.h.call(&owner, "query_sdk", json!({"code": "return 1"})),
        "its share",
    );
    // Another org still runs its scripts.
    let r = w.h.call(&rival, "query_sdk", json!({"code": "return 2"}));
    assert_eq!(r["structuredContent"]["result"], 2, "{r}");
    drop(held_member);
    // One slot free for acme; a token that holds one already is refused, naming the token.
    let r = w.h.call(&member, "run_sdk", json!({"code": "return 1"}));
    assert_eq!(r["isError"], false, "{r}");
    let by_token = slots.try_take("acme", "t1").unwrap();
    let again = slots.try_take("acme", "t1");
    assert!(matches!(
        again,
        Err(lore_base::ratelimit::SlotsFull::Org { .. }
            | lore_base::ratelimit::SlotsFull::Token { .. })
    ));
    drop(by_token);
    // The server's whole cap: every slot held, any org is refused.
    drop(held_owner);
    let all: Vec<_> = ["a", "b", "c", "d"]
        .iter()
        .map(|o| slots.try_take(o, o).unwrap())
        .collect();
    let r = w.h.call(&rival, "run_sdk", json!({"code": "return 1"}));
    refused(&r, "on this server");
    drop(all);
    let r = w.h.call(&owner, "run_sdk", json!({"code": "return 1"}));
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["result"], 1);
}
