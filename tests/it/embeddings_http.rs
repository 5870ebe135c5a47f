//! The OpenAI-compatible embedder through the real native HTTP client (`UreqClient`) against a
//! stub embeddings server this test starts on 127.0.0.1: batching, ordering by `index`, the
//! bearer key, every error an endpoint can cause, and the native wiring of both embedders.
// A native test: the stub server runs on its own thread.
#![allow(clippy::disallowed_methods)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use futures_executor::block_on;
use serde_json::{Value, json};

use lore::outbound::UreqClient;
use lore::ports::{EmbedderChoice, native_ports};
use lore_base::ports::Embedder;
use lore_embed::openai::{MAX_BATCH, OpenAiConfig, OpenAiEmbedder};

/// What the stub saw of one request.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    authorization: Option<String>,
    content_type: Option<String>,
    body: Value,
}

/// A stub embeddings server; each path is a behaviour:
/// - `/v1/embeddings`: 4-d vectors `[chars, first byte, position, 1]`, listed in reverse
///   order so the client must sort by `index`;
/// - `/fail`: HTTP 500; `/not-json`: 200 with a text body; `/short`: one vector too few;
///   `/ragged`: the last vector 3-d; `/twice`: index 0 twice; `/far`: an index past the end.
struct Stub {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Stub {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        // The thread ends with the test process.
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                if let Some(request) = read_request(&stream) {
                    let reply = answer(&request);
                    log.lock().unwrap().push(request);
                    let _ = write_reply(stream, reply);
                }
            }
        });
        Self { addr, seen }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn read_request(stream: &TcpStream) -> Option<Seen> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let path = line.split_whitespace().nth(1)?.to_string();
    let (mut length, mut authorization, mut content_type) = (0, None, None);
    loop {
        line.clear();
        reader.read_line(&mut line).ok()?;
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        let value = value.trim().to_string();
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.parse().ok()?,
            "authorization" => authorization = Some(value),
            "content-type" => content_type = Some(value),
            _ => {}
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Seen {
        path,
        authorization,
        content_type,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    })
}

fn answer(request: &Seen) -> (u16, String) {
    let inputs: Vec<String> = request.body["input"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|v| v.as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default();
    let vector = |i: usize, text: &str| {
        json!([
            text.chars().count(),
            text.bytes().next().unwrap_or(0),
            i,
            1.0
        ])
    };
    let mut data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, t)| json!({ "object": "embedding", "index": i, "embedding": vector(i, t) }))
        .collect();
    data.reverse();
    match request.path.as_str() {
        "/fail" => return (500, r#"{"error":"upstream exploded"}"#.to_string()),
        "/not-json" => return (200, "<html>gateway</html>".to_string()),
        "/short" => {
            data.pop();
        }
        "/ragged" => data[0] = json!({ "index": inputs.len() - 1, "embedding": [1.0, 2.0, 3.0] }),
        "/twice" => data[0]["index"] = json!(0),
        "/far" => data[0]["index"] = json!(inputs.len()),
        _ => {}
    }
    let model = request.body["model"].clone();
    (
        200,
        json!({ "object": "list", "data": data, "model": model, "usage": {} }).to_string(),
    )
}

fn write_reply(mut stream: TcpStream, (status, body): (u16, String)) -> std::io::Result<()> {
    write!(
        stream,
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn embedder(stub: &Stub, path: &str, key: Option<&str>) -> OpenAiEmbedder {
    OpenAiEmbedder::new(
        OpenAiConfig {
            url: stub.url(path),
            model: "stub-embed-4".into(),
            key: key.map(str::to_string),
            dimensions: 4,
        },
        Rc::new(UreqClient::default()),
    )
}

fn texts(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("memory number {i}")).collect()
}

#[test]
fn embeds_in_batches_of_96_in_input_order_with_the_bearer_key() {
    let stub = Stub::start();
    let embedder = embedder(&stub, "/v1/embeddings", Some("sk-test"));
    assert_eq!(embedder.model_id(), "stub-embed-4");
    assert_eq!(embedder.dimensions(), 4);
    let texts = texts(2 * MAX_BATCH + 8);
    let vectors = block_on(embedder.embed(&texts)).unwrap();
    assert_eq!(vectors.len(), texts.len());
    for (i, (text, v)) in texts.iter().zip(&vectors).enumerate() {
        let position = (i % MAX_BATCH) as f32;
        assert_eq!(
            v,
            &[text.len() as f32, f32::from(b'm'), position, 1.0],
            "{i}"
        );
    }
    let seen = stub.seen();
    let batches: Vec<usize> = seen
        .iter()
        .map(|s| s.body["input"].as_array().unwrap().len())
        .collect();
    assert_eq!(batches, [96, 96, 8]);
    for s in &seen {
        assert_eq!(s.path, "/v1/embeddings");
        assert_eq!(s.authorization.as_deref(), Some("Bearer sk-test"));
        assert_eq!(s.content_type.as_deref(), Some("application/json"));
        assert_eq!(s.body["model"], "stub-embed-4");
    }
    assert_eq!(seen[2].body["input"][0], "memory number 192");
}

#[test]
fn the_key_is_not_in_debug_output() {
    let config = OpenAiConfig {
        url: "http://127.0.0.1:1/v1/embeddings".into(),
        model: "m".into(),
        key: Some("sk-secret".into()),
        dimensions: 4,
    };
    let shown = format!("{:?}", EmbedderChoice::OpenAi(config));
    assert!(!shown.contains("sk-secret"), "{shown}");
    assert!(shown.contains("<redacted>"), "{shown}");
}

#[test]
fn no_key_sends_no_authorization_and_no_text_sends_no_request() {
    let stub = Stub::start();
    let embedder = embedder(&stub, "/v1/embeddings", None);
    block_on(embedder.embed(&texts(1))).unwrap();
    assert!(block_on(embedder.embed(&[])).unwrap().is_empty());
    let seen = stub.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].authorization, None);
}

#[test]
fn probing_reads_the_dimensions_of_one_vector() {
    let stub = Stub::start();
    let http = UreqClient::default();
    let url = stub.url("/v1/embeddings");
    let dims = block_on(OpenAiEmbedder::probe_dimensions(&url, "m", None, &http)).unwrap();
    assert_eq!(dims, 4);
}

#[test]
fn endpoint_failures_are_clear_errors() {
    let stub = Stub::start();
    let cases = [
        ("/fail", "HTTP 500"),
        ("/fail", "upstream exploded"),
        ("/not-json", "not an embeddings response"),
        ("/not-json", "<html>gateway</html>"),
        ("/short", "2 vectors for 3 inputs"),
        ("/ragged", "a vector of 3 dimensions where 4 were expected"),
        ("/twice", "index 0 answered twice"),
        ("/far", "index 3 out of range"),
    ];
    for (path, expected) in cases {
        let error = block_on(embedder(&stub, path, Some("sk-secret")).embed(&texts(3)))
            .expect_err(path)
            .to_string();
        assert!(error.contains(expected), "{path}: {error}");
        assert!(error.contains(&stub.url(path)), "{path}: {error}");
        assert!(
            !error.contains("sk-secret"),
            "{path} leaks the key: {error}"
        );
    }
}

#[test]
fn a_configured_length_the_endpoint_does_not_match_is_an_error() {
    let stub = Stub::start();
    let embedder = OpenAiEmbedder::new(
        OpenAiConfig {
            url: stub.url("/v1/embeddings"),
            model: "m".into(),
            key: None,
            dimensions: 384,
        },
        Rc::new(UreqClient::default()),
    );
    let error = block_on(embedder.embed(&texts(2))).unwrap_err().to_string();
    assert!(error.contains("4 dimensions where 384"), "{error}");
    assert!(
        error.contains("configure the model's dimensions"),
        "{error}"
    );
}

#[test]
fn an_unreachable_endpoint_is_an_error() {
    // A port that was free a moment ago: nothing listens there.
    let addr = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let embedder = OpenAiEmbedder::new(
        OpenAiConfig {
            url: format!("http://{addr}/v1/embeddings"),
            model: "m".into(),
            key: None,
            dimensions: 4,
        },
        Rc::new(UreqClient::default()),
    );
    let error = block_on(embedder.embed(&texts(1))).unwrap_err().to_string();
    assert!(error.contains(&addr.to_string()), "{error}");
}

#[test]
fn native_ports_embed_with_the_builtin_model_unless_an_endpoint_is_chosen() {
    let dir = std::env::temp_dir().join(format!("lore-embeddings-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("ports.db");

    let ports = native_ports(&db, &EmbedderChoice::default()).unwrap();
    let builtin = ports.embedder.expect("an embedder by default");
    assert_eq!(builtin.model_id(), lore_embed::builtin::MODEL_ID);
    assert_eq!(builtin.dimensions(), 256);
    let vectors = block_on(builtin.embed(&texts(2))).unwrap();
    assert_eq!(vectors[0].len(), 256);

    let stub = Stub::start();
    let choice = EmbedderChoice::OpenAi(OpenAiConfig {
        url: stub.url("/v1/embeddings"),
        model: "stub-embed-4".into(),
        key: None,
        dimensions: 4,
    });
    let ports = native_ports(&db, &choice).unwrap();
    let remote = ports.embedder.expect("the endpoint's embedder");
    assert_eq!(remote.model_id(), "stub-embed-4");
    assert_eq!(
        block_on(remote.embed(&texts(1))).unwrap(),
        [[15.0, f32::from(b'm'), 0.0, 1.0]]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
