//! Native implementations of the clock, randomness and outbound HTTP ports, and the choice of
//! embedder.

use std::io::Read;
use std::path::Path;
use std::rc::Rc;

use async_trait::async_trait;

use lore_base::cache::MemoryCache;
use lore_base::ports::{
    Clock, Embedder, HttpClient, OutboundRequest, OutboundResponse, PortError, Ports, Randomness,
};
use lore_base::storage::StorageError;
use lore_embed::builtin::BuiltinEmbedder;
use lore_embed::openai::{OpenAiConfig, OpenAiEmbedder};
use lore_embed::transformer::{TransformerEmbedder, TransformerModel};

use crate::sqlite::SqliteStorage;

pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        i64::try_from(now.as_millis()).unwrap_or(i64::MAX)
    }

    fn sleep(&self, ms: u64) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>> {
        Box::pin(tokio::time::sleep(std::time::Duration::from_millis(ms)))
    }
}

pub struct OsRandom;

impl Randomness for OsRandom {
    fn fill(&self, buf: &mut [u8]) {
        getrandom::fill(buf).expect("the operating system's random source is available");
    }
}

/// Blocking HTTP through `ureq`; outbound calls are rare and short, and each worker thread has
/// its own runtime, so blocking one briefly does not stall the others.
pub struct UreqClient {
    agent: ureq::Agent,
}

/// The environment variable naming a PEM file of root certificates to trust instead of the
/// built-in Mozilla roots (a private CA, or a test's self-signed certificate).
pub const TLS_CA_FILE: &str = "LORE_TLS_CA_FILE";

/// The root certificates HTTPS calls trust: those in `LORE_TLS_CA_FILE`, else Mozilla's.
fn root_certs() -> ureq::tls::RootCerts {
    let Some(path) = std::env::var_os(TLS_CA_FILE).filter(|p| !p.is_empty()) else {
        return ureq::tls::RootCerts::WebPki;
    };
    let certs: Vec<ureq::tls::Certificate<'static>> = std::fs::read(&path)
        .map(|pem| {
            ureq::tls::parse_pem(&pem)
                .filter_map(|item| match item {
                    Ok(ureq::tls::PemItem::Certificate(c)) => Some(c),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    if certs.is_empty() {
        tracing::error!(path = %path.to_string_lossy(), "{TLS_CA_FILE} holds no readable PEM certificate; using the built-in roots");
        return ureq::tls::RootCerts::WebPki;
    }
    ureq::tls::RootCerts::new_with_certs(&certs)
}

/// An agent for a one-off HTTPS download from a public registry (the embedding model's
/// package): the roots in `LORE_TLS_CA_FILE`, else this machine's trust store (as pip and curl
/// use: `SSL_CERT_FILE`, the system bundle), redirects followed, statuses other than 2xx as
/// errors.
pub(crate) fn https_agent(timeout: std::time::Duration) -> ureq::Agent {
    let roots = if std::env::var_os(TLS_CA_FILE).is_some_and(|p| !p.is_empty()) {
        root_certs()
    } else {
        ureq::tls::RootCerts::PlatformVerifier
    };
    ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .tls_config(ureq::tls::TlsConfig::builder().root_certs(roots).build())
        .build()
        .into()
}

impl Default for UreqClient {
    fn default() -> Self {
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(std::time::Duration::from_secs(30)))
            .http_status_as_error(false)
            // A redirect could leave a connection's allowed hosts: callers see the 3xx instead.
            .max_redirects(0)
            .tls_config(
                ureq::tls::TlsConfig::builder()
                    .root_certs(root_certs())
                    .build(),
            )
            .build();
        Self {
            agent: config.into(),
        }
    }
}

const MAX_RESPONSE: u64 = 16 << 20;

#[async_trait(?Send)]
impl HttpClient for UreqClient {
    async fn send(&self, request: OutboundRequest) -> Result<OutboundResponse, PortError> {
        let err = |e: ureq::Error| {
            PortError(format!(
                "HTTP {} {} failed: {e}",
                request.method, request.url
            ))
        };
        let mut builder = ureq::http::Request::builder()
            .method(request.method.as_str())
            .uri(request.url.as_str());
        for (name, value) in &request.headers {
            builder = builder.header(name, value);
        }
        let http_request = builder
            .body(request.body.clone())
            .map_err(|e| PortError(e.to_string()))?;
        let response = self.agent.run(http_request).map_err(err)?;
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_string(),
                    v.to_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        let mut body = Vec::new();
        response
            .into_body()
            .into_reader()
            .take(MAX_RESPONSE)
            .read_to_end(&mut body)
            .map_err(|e| {
                PortError(format!(
                    "reading the response of {} failed: {e}",
                    request.url
                ))
            })?;
        Ok(OutboundResponse {
            status,
            headers,
            body,
        })
    }
}

/// Which embedder a native core instance uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum EmbedderChoice {
    /// The built-in offline model (no network, deterministic).
    #[default]
    Builtin,
    /// all-MiniLM-L6-v2 run in process (`crate::model`), one copy shared by every thread.
    Transformer(SharedModel),
    /// An OpenAI-compatible embeddings endpoint (`LORE_EMBEDDINGS_URL`).
    OpenAi(OpenAiConfig),
}

/// A loaded transformer model; two are equal when they are the same copy.
#[derive(Clone)]
pub struct SharedModel(pub std::sync::Arc<TransformerModel>);

impl std::fmt::Debug for SharedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(lore_embed::transformer::MODEL_ID)
    }
}

impl PartialEq for SharedModel {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for SharedModel {}

/// The native ports over the SQLite file at `db`, embedding with `embedder`.
pub fn native_ports(db: &Path, embedder: &EmbedderChoice) -> Result<Ports, StorageError> {
    let http: Rc<dyn HttpClient> = Rc::new(UreqClient::default());
    let embedder: Rc<dyn Embedder> = match embedder {
        EmbedderChoice::Builtin => Rc::new(BuiltinEmbedder::new()),
        EmbedderChoice::Transformer(model) => Rc::new(TransformerEmbedder::new(model.0.clone())),
        EmbedderChoice::OpenAi(config) => {
            Rc::new(OpenAiEmbedder::new(config.clone(), http.clone()))
        }
    };
    let clock: Rc<dyn Clock> = Rc::new(SystemClock);
    Ok(Ports {
        storage: Rc::new(SqliteStorage::open(db)?),
        cache: Some(Rc::new(MemoryCache::new(clock.clone()))),
        clock,
        random: Rc::new(OsRandom),
        http: Some(http),
        embedder: Some(embedder),
        background: None,
    })
}
