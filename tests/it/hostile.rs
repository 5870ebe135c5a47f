//! Hostile tenants and outsiders beyond scripts: where outbound requests may go (decided by the
//! address they connect to, in every spelling), what a silent peer holds (its org's share of
//! outbound requests, never the threads that serve other orgs), and what requests without
//! credentials may leave in storage (each record rate-limited per client address, and gone
//! once it ends).

use crate::common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::rc::Rc;
use std::sync::Arc;

use futures_executor::block_on;
use serde_json::{Value, json};

use common::{Dir, start_lore_binary, tool_call_body};
use lore::outbound::{Shares, UreqClient};
use lore_base::outbound::{Policy, Reach, Share};
use lore_base::ports::{ClientAddr, HttpClient, OutboundRequest};
use lore_front::{Config, Lore};
use lore_testing::ports::JumpClock;

fn get(url: &str, reach: Reach) -> OutboundRequest {
    OutboundRequest {
        method: "GET".into(),
        url: url.into(),
        headers: Vec::new(),
        body: Vec::new(),
        reach,
        share: Share::Org("acme".into()),
        timeout_ms: 5_000,
    }
}

#[test]
fn an_outbound_request_reaches_only_the_addresses_its_reach_permits_however_spelled() {
    let base = common::serve_http(|_, _| ("200 OK".into(), "{\"ok\":true}".into()));
    let port = base.rsplit(':').next().unwrap().to_string();
    let public_only = UreqClient::default();
    // Decided by the address the name resolves to (the client alone, without the front's
    // guard): a name, a decimal or hex number, a mapped or compatible IPv6 form, and a name
    // that resolves to loopback without being spelled `localhost` when this machine has one.
    let mut spellings = vec![
        format!("http://127.0.0.1:{port}/"),
        format!("http://localhost:{port}/"),
        format!("http://2130706433:{port}/"),
        format!("http://0x7f000001:{port}/"),
        format!("http://[::ffff:127.0.0.1]:{port}/"),
        format!("http://[::1]:{port}/"),
    ];
    for name in ["ip6-localhost", "localhost.localdomain"] {
        if std::net::ToSocketAddrs::to_socket_addrs(&(name, 1)).is_ok() {
            spellings.push(format!("http://{name}:{port}/"));
        }
    }
    for url in &spellings {
        let refused = block_on(public_only.send(get(url, Reach::Public)));
        let e = refused.expect_err(url).0;
        assert!(e.contains("does not reach"), "{url}: {e}");
    }
    // The same addresses are reached where the operator allows them, or configured them.
    let allowed = UreqClient::new(&Policy::parse("127.0.0.0/8").unwrap(), Arc::default());
    let answer = block_on(allowed.send(get(&format!("http://127.0.0.1:{port}/"), Reach::Public)));
    assert_eq!(answer.unwrap().status, 200);
    let answer = block_on(public_only.send(get(&base, Reach::Configured)));
    assert_eq!(answer.unwrap().status, 200);
    let answer = block_on(public_only.send(get(&base, Reach::PublicOrLoopback)));
    assert_eq!(answer.unwrap().status, 200);
}

/// A loopback server that accepts connections and never answers; dropping it closes them.
struct Silent {
    port: u16,
    held: Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
}

impl Silent {
    #[allow(clippy::disallowed_methods)] // a listener of the test's own
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let held: Arc<std::sync::Mutex<Vec<std::net::TcpStream>>> = Arc::default();
        let keep = held.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                keep.lock().unwrap().push(stream);
            }
        });
        Self { port, held }
    }

    fn close(&self) {
        for s in self.held.lock().unwrap().drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

#[test]
fn outbound_requests_of_one_share_stop_at_its_share_and_leave_the_others_alone() {
    let silent = Silent::start();
    let client = UreqClient::new(
        &Policy::parse("127.0.0.0/8").unwrap(),
        Arc::new(Shares::default()),
    );
    let url = format!("http://127.0.0.1:{}/slow", silent.port);
    // The share's requests run on threads of their own: starting them never blocks here.
    let pending: Vec<_> = (0..lore::outbound::PER_SHARE)
        .map(|_| {
            let client = client.clone();
            let url = url.clone();
            #[allow(clippy::disallowed_methods)]
            std::thread::spawn(move || block_on(client.send(get(&url, Reach::Public))))
        })
        .collect();
    let share = Share::Org("acme".into());
    for _ in 0..500 {
        if client.shares().in_flight(&share).1 == lore::outbound::PER_SHARE {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(
        client.shares().in_flight(&share).1,
        lore::outbound::PER_SHARE
    );
    // One more of the same org is refused at once; another org's goes through meanwhile.
    let over = block_on(client.send(get(&url, Reach::Public)))
        .unwrap_err()
        .0;
    assert!(
        over.contains("overloaded") && over.contains("org acme"),
        "{over}"
    );
    let base = common::serve_http(|_, _| ("200 OK".into(), "{}".into()));
    let mut other = get(&base, Reach::Public);
    other.share = Share::Org("rival".into());
    assert_eq!(block_on(client.send(other)).unwrap().status, 200);
    assert_eq!(
        client.shares().in_flight(&share).1,
        lore::outbound::PER_SHARE
    );
    // Once the peer hangs up, every slot is given back.
    silent.close();
    for p in pending {
        assert!(p.join().unwrap().is_err());
    }
    assert_eq!(client.shares().in_flight(&share), (0, 0));
}

/// One request to a running `lore serve`, on a connection of its own; the JSON-RPC answer.
fn post(url: &str, token: &str, body: &Value) -> Value {
    let addr = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let path = format!(
        "/{}",
        url.trim_start_matches("http://").split_once('/').unwrap().1
    );
    let tool = body["params"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let body = serde_json::to_vec(body).unwrap();
    let mut stream = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {token}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\nmcp-method: tools/call\r\nmcp-name: {tool}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len(),
    )
    .unwrap();
    stream.write_all(&body).unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    let body = text.split("\r\n\r\n").nth(1).unwrap_or_default();
    common::rpc_message(body)
}

#[test]
fn a_silent_upstream_holds_no_thread_that_serves_another_org() {
    let dir = Dir::new("silent-upstream");
    let db = dir.join("lore.db");
    let silent = Silent::start();
    // One worker thread: were the call to wait on it, every other request would wait too.
    let (mut server, url, log) = start_lore_binary(
        &db,
        &[
            ("LORE_WORKERS", "1"),
            ("LORE_OUTBOUND_ALLOW", "127.0.0.0/8"),
        ],
    );
    let token = log
        .lines()
        .find_map(|l| l.trim().strip_prefix("lore_"))
        .map(|t| format!("lore_{t}"))
        .expect("the owner token is printed");
    let rival = std::process::Command::new(env!("CARGO_BIN_EXE_lore"))
        .args(["org", "create", "rival", "--json", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let rival: Value = serde_json::from_slice(&rival.stdout).unwrap();
    let rival = rival["token"].as_str().unwrap().to_string();
    let made = post(
        &url,
        &token,
        &tool_call_body(
            "run_sdk",
            json!({"code": format!("return await client.connections.create({{name: 'slow', base_url: 'http://127.0.0.1:{}'}})", silent.port)}),
        ),
    );
    assert_eq!(made["result"]["isError"], false, "{made}");
    let (done, finished) = std::sync::mpsc::channel();
    let call_url = url.clone();
    #[allow(clippy::disallowed_methods)]
    std::thread::spawn(move || {
        let answer = post(
            &call_url,
            &token,
            &tool_call_body(
                "run_sdk",
                json!({"code": "return await client.connections.call({name: 'slow', path: '/x'})"}),
            ),
        );
        let _ = done.send(answer);
    });
    // Wait until the call is out, then ask as the other org.
    for _ in 0..500 {
        if !silent.held.lock().unwrap().is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(
        !silent.held.lock().unwrap().is_empty(),
        "the call reached the upstream"
    );
    let other = post(
        &url.replace("/mcp", "/mcp/rival"),
        &rival,
        &tool_call_body("search_memory", json!({"query": "anything"})),
    );
    assert_eq!(other["result"]["isError"], false, "{other}");
    assert!(
        finished.try_recv().is_err(),
        "the other org was answered while the silent call still waited"
    );
    silent.close();
    let answer = finished.recv().unwrap();
    assert!(answer.to_string().contains("slow"), "{answer}");
    let _ = server.kill();
    let _ = server.wait();
}

/// A front with rate limits on a store and clock of the test's own.
fn front(clock: &JumpClock) -> Lore {
    let ports = lore_base::ports::Ports {
        storage: Rc::new(lore_base::storage::memory::MemoryStorage::new()),
        clock: Rc::new(JumpClock(clock.0.clone())),
        random: Rc::new(lore_testing::ports::SeqRandom::seeded(3)),
        http: None,
        embedder: None,
        cache: None,
        background: None,
    };
    let config = Config {
        anonymous_per_minute: 30,
        ..Config::default()
    };
    let lore = Lore::new(ports, config)
        .with_rate_limiter(Rc::new(lore_base::ratelimit::MemoryLimiter::default()));
    block_on(lore_directory::admin::init(lore.ports(), "default")).unwrap();
    lore
}

fn from(addr: &str, method: &str, uri: &str, body: Vec<u8>) -> http::Request<Vec<u8>> {
    let mut request = http::Request::builder()
        .method(method)
        .uri(uri)
        .header("host", "127.0.0.1:8787")
        .header("content-type", "application/json")
        .body(body)
        .unwrap();
    request
        .extensions_mut()
        .insert(ClientAddr(addr.parse().unwrap()));
    request
}

fn keys(lore: &Lore, prefix: &str) -> usize {
    block_on(lore.ports().storage.scan_all(prefix))
        .unwrap()
        .len()
}

fn register(lore: &Lore, addr: &str) -> u16 {
    let body =
        json!({"redirect_uris": ["http://127.0.0.1:9/cb"], "token_endpoint_auth_method": "none"});
    let request = from(
        addr,
        "POST",
        "/oauth/register",
        serde_json::to_vec(&body).unwrap(),
    );
    block_on(lore.handle(request)).status().as_u16()
}

#[test]
fn what_requests_without_credentials_make_is_rate_limited_per_address_and_ends() {
    let clock = JumpClock::starting_at(1_767_225_600_000);
    let lore = front(&clock);
    // One address: registrations past its burst are refused with 429 and Retry-After.
    let statuses: Vec<u16> = (0..200).map(|_| register(&lore, "203.0.113.7")).collect();
    let made = statuses.iter().filter(|s| **s == 201).count();
    assert!(
        made > 0 && made <= 10,
        "{made} registrations from one address"
    );
    assert!(
        statuses.iter().all(|s| *s == 201 || *s == 429),
        "{statuses:?}"
    );
    // Addresses of one IPv6 /64 share a bucket; another address has its own.
    let v6: Vec<u16> = (0..50)
        .map(|i| register(&lore, &format!("2001:db8:1:2::{i:x}")))
        .collect();
    assert!(v6.iter().filter(|s| **s == 201).count() <= 10, "{v6:?}");
    assert_eq!(register(&lore, "198.51.100.1"), 201);
    // Sign-in pages and authorizations: each session is a record, counted the same way.
    for _ in 0..1_500 {
        let _ = block_on(lore.handle(from("203.0.113.8", "GET", "/oauth/signin", Vec::new())));
    }
    let sessions = keys(&lore, "oauth/session/");
    assert!(
        sessions <= 10,
        "{sessions} sessions from 1,500 anonymous GETs"
    );
    // A day later every unused registration and every session has ended; the next record
    // made sweeps them out of storage.
    let before = keys(&lore, "oauth/client/") + keys(&lore, "oauth/session/");
    assert!(before > 0);
    clock.0.set(clock.0.get() + 2 * 86_400_000);
    for i in 0..4 {
        assert_eq!(register(&lore, &format!("192.0.2.{i}")), 201);
    }
    assert_eq!(keys(&lore, "oauth/session/"), 0);
    assert_eq!(
        keys(&lore, "oauth/client/"),
        4,
        "only the four new registrations are left"
    );
    assert_eq!(keys(&lore, "exp/"), 4);
}
