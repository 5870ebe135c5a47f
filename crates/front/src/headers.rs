//! Reading the HTTP headers MCP defines, and the Host/Origin checks that stop DNS rebinding.

use base64::Engine;
use http::HeaderMap;

pub const PROTOCOL_VERSION: &str = "mcp-protocol-version";
pub const SESSION_ID: &str = "mcp-session-id";
pub const METHOD: &str = "mcp-method";
pub const NAME: &str = "mcp-name";

/// A header's value with optional whitespace trimmed (RFC 9110), if present and valid text.
pub fn get<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

/// Headers a request may carry at most once: the ones that say who the caller is, which
/// session, protocol and origin a request belongs to, and how its body is framed. A second
/// copy would leave it to each reader which one counts (a proxy may check one, lore use the
/// other), so such a request is refused before anything reads them.
pub const SINGLETONS: &[&str] = &[
    "authorization",
    "host",
    "origin",
    "content-type",
    "content-length",
    "mcp-session-id",
    "mcp-protocol-version",
    "mcp-method",
    "mcp-name",
    "last-event-id",
    "idempotency-key",
    "x-lore-signature",
    "x-hub-signature-256",
    "x-lore-delivery",
    "x-github-delivery",
];

/// The first header of [`SINGLETONS`] that `headers` holds more than once. Hosts that join
/// repeated headers into one value (the Fetch API does, with ", ": Workers) pass a second
/// `Authorization` on as a value with a comma, which no credential has.
pub fn repeated_singleton(headers: &HeaderMap) -> Option<&'static str> {
    SINGLETONS
        .iter()
        .find(|name| {
            let mut values = headers.get_all(**name).iter();
            let first = values.next();
            values.next().is_some()
                || (**name == "authorization"
                    && first.is_some_and(|v| v.as_bytes().contains(&b',')))
        })
        .copied()
}

/// Decodes the `=?base64?…?=` form clients use for values that are not plain visible ASCII.
pub fn decode_value(raw: &str) -> Option<String> {
    match raw
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    {
        Some(b64) => {
            let bytes = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
            String::from_utf8(bytes).ok()
        }
        None => Some(raw.to_string()),
    }
}

/// Which hosts and browser origins may reach the server.
#[derive(Debug, Clone, Default)]
pub struct OriginPolicy {
    /// Host names (without port) accepted in `Host`; `None` accepts any (behind a proxy).
    pub allowed_hosts: Option<Vec<String>>,
    /// Extra origins (`scheme://host[:port]`) allowed besides the server's own hosts.
    pub allowed_origins: Vec<String>,
}

pub const LOOPBACK_HOSTS: &[&str] = &["localhost", "127.0.0.1", "[::1]", "::1"];

/// `example.com:8080` → `example.com`; `[::1]:80` → `[::1]`.
pub fn host_name(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    host.rsplit_once(':').map_or(host, |(h, port)| {
        if port.bytes().all(|b| b.is_ascii_digit()) {
            h
        } else {
            host
        }
    })
}

/// The port of an authority, if it names one.
fn port(authority: &str) -> Option<&str> {
    let rest = if authority.starts_with('[') {
        authority.split_once(']').map(|(_, r)| r)?
    } else {
        authority
    };
    rest.rsplit_once(':').map(|(_, p)| p)
}

/// Whether an authority (`host[:port]`) names a loopback host.
pub fn is_loopback(authority: &str) -> bool {
    LOOPBACK_HOSTS.contains(&host_name(authority).to_ascii_lowercase().as_str())
}

impl OriginPolicy {
    /// Accepts only loopback hosts and origins: the default of a server bound to 127.0.0.1.
    pub fn loopback() -> Self {
        Self {
            allowed_hosts: Some(LOOPBACK_HOSTS.iter().map(|h| h.to_string()).collect()),
            allowed_origins: vec![],
        }
    }

    fn host_allowed(&self, host: &str) -> bool {
        let name = host_name(host).to_ascii_lowercase();
        self.allowed_hosts
            .as_ref()
            .is_none_or(|hosts| hosts.contains(&name))
    }

    /// `Err(reason)` when the `Host` header names a host this server does not serve.
    pub fn check_host(&self, headers: &HeaderMap) -> Result<(), String> {
        match get(headers, "host") {
            Some(host) if !self.host_allowed(host) => Err(format!("Host {host:?} is not allowed")),
            _ => Ok(()),
        }
    }

    /// `Err(reason)` when the request must be refused with 403.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), String> {
        if let Some(host) = get(headers, "host")
            && !self.host_allowed(host)
        {
            return Err(format!("Host {host:?} is not allowed"));
        }
        let Some(origin) = get(headers, "origin") else {
            return Ok(());
        };
        if origin == "null" {
            return Err("Origin \"null\" is not allowed".into());
        }
        if self
            .allowed_origins
            .iter()
            .any(|o| o.eq_ignore_ascii_case(origin))
        {
            return Ok(());
        }
        let authority = origin
            .split_once("://")
            .map(|(_, rest)| rest)
            .unwrap_or(origin);
        // The server's own origin: the same authority as Host, or, on loopback, another loopback
        // name for the same port (localhost vs 127.0.0.1). Other local ports are other apps.
        if let Some(host) = get(headers, "host") {
            let same = host.eq_ignore_ascii_case(authority);
            let loopback =
                |a: &str| LOOPBACK_HOSTS.contains(&host_name(a).to_ascii_lowercase().as_str());
            let same_port = port(host) == port(authority);
            if same
                || (loopback(host)
                    && loopback(authority)
                    && same_port
                    && self.host_allowed(authority))
            {
                return Ok(());
            }
        }
        Err(format!(
            "Origin {origin:?} is not allowed; add it with --allowed-origin"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn loopback_policy_refuses_rebinding() {
        let p = OriginPolicy::loopback();
        assert!(p.check(&headers(&[("host", "127.0.0.1:8787")])).is_ok());
        assert!(
            p.check(&headers(&[
                ("host", "localhost:8787"),
                ("origin", "http://localhost:8787")
            ]))
            .is_ok()
        );
        assert!(p.check(&headers(&[("host", "[::1]:8787")])).is_ok());
        assert!(
            p.check(&headers(&[
                ("host", "127.0.0.1:8787"),
                ("origin", "http://localhost:8787")
            ]))
            .is_ok()
        );
        // Another local port is another app: not the server's origin.
        assert!(
            p.check(&headers(&[
                ("host", "127.0.0.1:8787"),
                ("origin", "http://localhost:3000")
            ]))
            .is_err()
        );
        assert!(p.check(&headers(&[("host", "evil.example.com")])).is_err());
        assert!(
            p.check(&headers(&[
                ("host", "127.0.0.1:8787"),
                ("origin", "http://evil.example.com")
            ]))
            .is_err()
        );
        assert!(
            p.check(&headers(&[("host", "127.0.0.1:8787"), ("origin", "null")]))
                .is_err()
        );
    }

    #[test]
    fn open_policy_allows_own_origin_and_listed_ones() {
        let p = OriginPolicy {
            allowed_hosts: None,
            allowed_origins: vec!["https://app.example".into()],
        };
        assert!(
            p.check(&headers(&[
                ("host", "lore.example"),
                ("origin", "https://lore.example")
            ]))
            .is_ok()
        );
        assert!(
            p.check(&headers(&[
                ("host", "lore.example"),
                ("origin", "https://app.example")
            ]))
            .is_ok()
        );
        assert!(
            p.check(&headers(&[
                ("host", "lore.example"),
                ("origin", "https://evil.example")
            ]))
            .is_err()
        );
    }

    #[test]
    fn decodes_base64_sentinel() {
        assert_eq!(decode_value("=?base64?aGk=?=").as_deref(), Some("hi"));
        assert_eq!(decode_value("plain").as_deref(), Some("plain"));
        assert_eq!(decode_value("=?base64?***?="), None);
    }
}
