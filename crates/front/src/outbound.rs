//! The guard every outbound request passes on every platform ([`Guarded`], around the host's
//! client): a request that is not the operator's (`Reach::Public*`) whose URL names an address
//! its reach does not permit is refused before any host sees it. The host is read as a URL
//! parser reads it (the WHATWG parser: `0x7f000001`, `2130706433`, `0177.0.0.1` and
//! `[::ffff:127.0.0.1]` are all 127.0.0.1) and judged as an address
//! (`lore_base::outbound::Policy`), as are the names defined to be loopback (`localhost`,
//! `*.localhost`). Other names are resolved by the host, which connects only to permitted
//! addresses natively (`src/outbound.rs`); on Workers and Spin the platform keeps them off
//! private networks.

use core::net::{IpAddr, Ipv4Addr};
use std::rc::Rc;

use async_trait::async_trait;

use lore_base::outbound::{Policy, Reach};
use lore_base::ports::{HttpClient, OutboundRequest, OutboundResponse, PortError};

/// The host's client, behind the guard.
pub struct Guarded {
    inner: Rc<dyn HttpClient>,
    policy: Policy,
}

impl Guarded {
    pub fn new(inner: Rc<dyn HttpClient>, policy: Policy) -> Self {
        Self { inner, policy }
    }
}

/// The address `url`'s host is, where the URL itself says it: an IP address in any form the
/// URL parser takes, or a name that is loopback by definition (RFC 6761).
fn written_address(url: &url::Url) -> Option<IpAddr> {
    match url.host()? {
        url::Host::Ipv4(v4) => Some(IpAddr::V4(v4)),
        url::Host::Ipv6(v6) => Some(IpAddr::V6(v6)),
        url::Host::Domain(name) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            (name == "localhost" || name.ends_with(".localhost"))
                .then_some(IpAddr::V4(Ipv4Addr::LOCALHOST))
        }
    }
}

/// Why `request` may not go out, if it may not.
pub fn refusal(policy: &Policy, request: &OutboundRequest) -> Option<String> {
    if request.reach == Reach::Configured {
        return None;
    }
    let Ok(url) = url::Url::parse(&request.url) else {
        return Some(format!("{} is not a URL", request.url));
    };
    if !matches!(url.scheme(), "http" | "https") {
        return Some(format!("{} is not an http(s) URL", request.url));
    }
    let addr = written_address(&url)?;
    (!policy.permits(request.reach, addr)).then(|| {
        format!(
            "{} names {addr}, an address lore does not reach for members and outsiders; an operator may allow a network with LORE_OUTBOUND_ALLOW",
            url.host_str().unwrap_or_default()
        )
    })
}

#[async_trait(?Send)]
impl HttpClient for Guarded {
    async fn send(&self, request: OutboundRequest) -> Result<OutboundResponse, PortError> {
        if let Some(why) = refusal(&self.policy, &request) {
            return Err(PortError(why));
        }
        self.inner.send(request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lore_base::outbound::Share;

    fn request(url: &str, reach: Reach) -> OutboundRequest {
        OutboundRequest {
            method: "GET".into(),
            url: url.into(),
            headers: Vec::new(),
            body: Vec::new(),
            reach,
            share: Share::Server,
            timeout_ms: 1,
        }
    }

    #[test]
    fn every_spelling_of_a_private_address_is_refused() {
        let policy = Policy::default();
        for url in [
            "http://127.0.0.1/",
            "https://[::ffff:127.0.0.1]:8443/c.json",
            "https://[::ffff:7f00:1]/",
            "http://0x7f000001/",
            "http://2130706433/",
            "http://0177.0.0.1/",
            "http://127.1/",
            "http://localhost:9/",
            "http://api.localhost./",
            "http://169.254.169.254/latest/meta-data",
            "http://[fd00::1]/",
            "http://[64:ff9b::a9fe:a9fe]/",
            "http://[2002:a9fe:a9fe::]/",
            "http://0/",
            "http://10.0.0.1/",
            "file:///etc/passwd",
        ] {
            assert!(
                refusal(&policy, &request(url, Reach::Public)).is_some(),
                "{url}"
            );
        }
        for url in [
            "https://example.com/",
            "https://93.184.216.34/",
            "http://[2606:4700::1111]/",
        ] {
            assert!(
                refusal(&policy, &request(url, Reach::Public)).is_none(),
                "{url}"
            );
        }
        assert!(refusal(&policy, &request("http://127.0.0.1/", Reach::Configured)).is_none());
        assert!(
            refusal(
                &policy,
                &request("http://[::1]:9/", Reach::PublicOrLoopback)
            )
            .is_none()
        );
        let allowed = Policy::parse("127.0.0.0/8").unwrap();
        assert!(refusal(&allowed, &request("http://127.0.0.1:9/", Reach::Public)).is_none());
    }
}
