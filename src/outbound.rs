//! Outbound HTTP natively (`ureq` with rustls), held to three bounds:
//!
//! - **Off the serving threads.** Each exchange runs on a thread of its own; the worker that
//!   asked awaits its answer, serving other requests meanwhile. A peer that never answers holds
//!   that thread, not a worker.
//! - **A deadline and a share.** Each exchange ends by its `timeout_ms`, and takes one of the
//!   slots of its share (`lore_base::outbound::Share`: an org, a client address, the server)
//!   until its thread ends: past [`PER_SHARE`] in flight for one share, or [`IN_FLIGHT`] for
//!   the process, a request is refused at once rather than queued behind the others.
//! - **Only the addresses its reach permits.** The resolver keeps only the addresses a name
//!   (or an address written in the URL) resolves to that `lore_base::outbound::Policy`
//!   permits, and the connection is made to those: what is checked is what is used, whatever
//!   the URL spells (`[::ffff:127.0.0.1]`, `0x7f000001`, a name that resolves to a private
//!   address, one that changes its answer between two lookups). No proxy from the environment
//!   is used for requests that are not the operator's.

use std::collections::HashMap;
use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{DefaultConnector, NextTimeout};

use lore_base::outbound::{Policy, Reach, Share};
use lore_base::ports::{HttpClient, OutboundRequest, OutboundResponse, PortError};

/// Exchanges in flight for one share at most (an org's connections, one client's documents).
pub const PER_SHARE: usize = 8;

/// Exchanges in flight in the process at most.
pub const IN_FLIGHT: usize = 128;

/// The most of a response body kept (the callers cut further).
const MAX_RESPONSE: u64 = 16 << 20;

/// An exchange without a deadline of its own gets this one.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The environment variable naming a PEM file of root certificates to trust instead of the
/// built-in Mozilla roots (a private CA, or a test's self-signed certificate).
pub const TLS_CA_FILE: &str = "LORE_TLS_CA_FILE";

/// The exchanges in flight, per share and in all; shared by every worker thread's client.
#[derive(Default)]
pub struct Shares {
    held: Mutex<(usize, HashMap<Share, usize>)>,
}

/// One slot of a share, given back when dropped (when the exchange's thread ends).
struct Slot {
    shares: Arc<Shares>,
    share: Share,
}

impl Shares {
    fn take(self: &Arc<Self>, share: &Share) -> Result<Slot, PortError> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let (all, per) = &mut *held;
        let mine = per.get(share).copied().unwrap_or(0);
        if *all >= IN_FLIGHT {
            return Err(PortError(format!(
                "overloaded: the server has {IN_FLIGHT} outbound requests in flight; try again shortly"
            )));
        }
        if mine >= PER_SHARE && *share != Share::Server {
            return Err(PortError(format!(
                "overloaded: {} has {PER_SHARE} outbound requests in flight, its share; wait for one to end",
                describe(share)
            )));
        }
        *all += 1;
        *per.entry(share.clone()).or_insert(0) += 1;
        Ok(Slot {
            shares: self.clone(),
            share: share.clone(),
        })
    }

    /// Exchanges in flight now (all, and for `share`).
    pub fn in_flight(&self, share: &Share) -> (usize, usize) {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        (held.0, held.1.get(share).copied().unwrap_or(0))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut held = self.shares.held.lock().unwrap_or_else(|e| e.into_inner());
        let (all, per) = &mut *held;
        *all = all.saturating_sub(1);
        if let Some(n) = per.get_mut(&self.share) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                per.remove(&self.share);
            }
        }
    }
}

fn describe(share: &Share) -> String {
    match share {
        Share::Org(org) => format!("org {org}"),
        Share::Address(addr) => format!("the client at {addr}"),
        Share::Server => "the server".into(),
    }
}

/// Resolves as the system does, and keeps only the addresses `reach` permits.
#[derive(Debug)]
struct Permitted {
    reach: Reach,
    policy: Policy,
}

impl Resolver for Permitted {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let resolved = DefaultResolver::default().resolve(uri, config, timeout)?;
        let mut kept = DefaultResolver::default().empty();
        for addr in resolved.iter().copied() {
            if self.policy.permits(self.reach, addr.ip()) {
                kept.push(addr);
            }
        }
        if kept.is_empty() {
            return Err(ureq::Error::Other(
                format!(
                    "{} resolves only to addresses lore does not reach for members and outsiders ({}); an operator may allow a network with LORE_OUTBOUND_ALLOW",
                    uri.host().unwrap_or("the host"),
                    resolved
                        .iter()
                        .map(|a| a.ip().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
                .into(),
            ));
        }
        Ok(kept)
    }
}

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

/// An agent for one reach: statuses as answers, no redirects (a redirect could leave where
/// the request may go: callers see the 3xx), and for any reach but the operator's no proxy.
fn agent(reach: Reach, policy: &Policy) -> ureq::Agent {
    let mut config = ureq::Agent::config_builder()
        .timeout_global(Some(DEFAULT_TIMEOUT))
        .http_status_as_error(false)
        .max_redirects(0)
        .tls_config(
            ureq::tls::TlsConfig::builder()
                .root_certs(root_certs())
                .build(),
        );
    if reach != Reach::Configured {
        config = config.proxy(None);
    }
    ureq::Agent::with_parts(
        config.build(),
        DefaultConnector::default(),
        Permitted {
            reach,
            policy: policy.clone(),
        },
    )
}

/// An agent for a one-off HTTPS download from a public registry (the embedding model's
/// package): the roots in `LORE_TLS_CA_FILE`, else this machine's trust store (as pip and curl
/// use: `SSL_CERT_FILE`, the system bundle), redirects followed, statuses other than 2xx as
/// errors.
pub(crate) fn https_agent(timeout: Duration) -> ureq::Agent {
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

/// The native outbound client (see the module's text). Clones share their agents and shares.
#[derive(Clone)]
pub struct UreqClient {
    public: ureq::Agent,
    public_or_loopback: ureq::Agent,
    configured: ureq::Agent,
    shares: Arc<Shares>,
}

impl Default for UreqClient {
    /// Public addresses only for requests that are not the operator's, with shares of its own.
    fn default() -> Self {
        Self::new(&Policy::default(), Arc::default())
    }
}

impl UreqClient {
    /// A client that lets requests of `Reach::Public` reach `policy`'s networks too, counting
    /// exchanges in `shares` (one per process, for every worker's client).
    pub fn new(policy: &Policy, shares: Arc<Shares>) -> Self {
        Self {
            public: agent(Reach::Public, policy),
            public_or_loopback: agent(Reach::PublicOrLoopback, policy),
            configured: agent(Reach::Configured, policy),
            shares,
        }
    }

    /// The exchanges this client's shares hold now.
    pub fn shares(&self) -> &Arc<Shares> {
        &self.shares
    }
}

/// One exchange, on the calling (outbound) thread.
fn exchange(agent: &ureq::Agent, request: &OutboundRequest) -> Result<OutboundResponse, PortError> {
    let failed = |e: &dyn std::fmt::Display| {
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
    let timeout = match request.timeout_ms {
        0 => DEFAULT_TIMEOUT,
        ms => Duration::from_millis(ms),
    };
    let http_request = agent
        .configure_request(http_request)
        .timeout_global(Some(timeout))
        .build();
    let response = agent.run(http_request).map_err(|e| failed(&e))?;
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

#[async_trait(?Send)]
impl HttpClient for UreqClient {
    async fn send(&self, request: OutboundRequest) -> Result<OutboundResponse, PortError> {
        let slot = self.shares.take(&request.share)?;
        let agent = match request.reach {
            Reach::Public => self.public.clone(),
            Reach::PublicOrLoopback => self.public_or_loopback.clone(),
            Reach::Configured => self.configured.clone(),
        };
        let (answer, answered) = tokio::sync::oneshot::channel();
        let spawned = std::thread::Builder::new()
            .name("lore-outbound".into())
            .spawn(move || {
                let result = exchange(&agent, &request);
                // The share is taken until the exchange is over, whoever still waits for it.
                drop(slot);
                let _ = answer.send(result);
            });
        if let Err(e) = spawned {
            return Err(PortError(format!(
                "could not start an outbound thread: {e}"
            )));
        }
        answered
            .await
            .unwrap_or_else(|_| Err(PortError("the outbound thread stopped".into())))
    }
}
