//! How one server instance behaves ([`Config`]), and the one parser of it from named
//! variables ([`Config::from_vars`]) that every edge platform uses: the Worker over its
//! `[vars]` and secrets, the Spin component over its variables. `lore serve` takes the same
//! settings as flags (each with its `LORE_*` environment variable, parsed by clap) and builds the
//! same struct.
//!
//! | variable | meaning | default |
//! | --- | --- | --- |
//! | `LORE_DEFAULT_ORG` | the org of a token bound to one org when the path names none | `default` |
//! | `LORE_ALLOWED_ORIGINS` | browser origins allowed besides the server's own (comma-separated) | none |
//! | `LORE_ALLOWED_HOSTS` | host names accepted in `Host` (comma-separated) | any |
//! | `LORE_MAX_BODY_BYTES` | largest request body | 4 MiB |
//! | `LORE_RATE_TOKEN_PER_MINUTE`, `LORE_RATE_ORG_PER_MINUTE` | rate limits per token and per org (0: none) | 600, 3000 |
//! | `LORE_RATE_ANONYMOUS_PER_MINUTE` | records (sign-in sessions, pending authorizations, client registrations, fetched client documents) one client address may make per minute without credentials (0: none) | 60 |
//! | `LORE_SCRIPT_WALL_MS`, `LORE_SCRIPT_MEMORY_BYTES` | a script run's wall clock and memory caps | 180000, 64 MiB (32 MiB on wasm) |
//! | `LORE_OUTBOUND_ALLOW` | networks outbound requests of members and outsiders may reach although they are not public (comma-separated, `10.0.0.0/8`, `127.0.0.1`) | none |
//! | `LORE_PUBLIC_URL` | the public origin: the OAuth issuer and the prefix of resource URLs | from each request's `Host` |
//! | `LORE_GITHUB_*`, `LORE_OIDC_*` | sign-in providers (see [`crate::providers::from_vars`]) | none |
//! | `LORE_OPERATOR_SECRET` | turns the operator routes on (see `operator.rs`) | off |
//! | `LORE_EMBEDDINGS_URL`, `_MODEL`, `_KEY`, `_DIMENSIONS` | an OpenAI-compatible embeddings endpoint ([`embeddings_from_vars`]) | the platform's embedder |
//! | `LORE_NO_AUTH` | `1`: tokenless requests act as the local owner; honoured only by test builds | off |
//!
//! A platform whose variables are spelled otherwise (Spin's are lower-case) looks the same
//! names up in its own spelling ([`Spelling`]); errors name the variable as the platform spells it.
//! Sessions are always off at the edge: an instance lives for a short while and serves any org.

use crate::headers::{self, OriginPolicy};
use crate::providers::{self, Provider};
use lore_base::ids::OrgId;
use lore_base::ratelimit;
use lore_embed::openai::OpenAiConfig;
use lore_records::sql;

/// The default request body limit: 4 MiB.
pub const DEFAULT_MAX_BODY: usize = 4 << 20;

/// Records a client address may make per minute without credentials, by default: a person
/// signing in makes a few.
pub const DEFAULT_ANONYMOUS_PER_MINUTE: u32 = 60;

/// How one server instance behaves.
#[derive(Debug, Clone)]
pub struct Config {
    /// The org of tokenless requests when auth is off.
    pub default_org: OrgId,
    /// Serve requests without a token as the local owner (`lore serve --no-auth`, loopback only).
    pub no_auth: bool,
    /// Issue legacy MCP sessions (native); the edge runs without them.
    pub sessions: bool,
    pub max_body_bytes: usize,
    pub origins: OriginPolicy,
    /// The server's public base URL (`https://lore.example.com`): the OAuth issuer and the
    /// prefix of the resource URLs tokens are bound to. `None` derives it from each request's
    /// `Host` (`http` on loopback names, `https` otherwise).
    pub public_url: Option<String>,
    /// Identity providers people sign in with (GitHub, OIDC), besides the local owner's
    /// password.
    pub upstream: Vec<Provider>,
    /// The row, time and size budgets of one `query_sql` query.
    pub sql: sql::Limits,
    /// Requests per minute per token and per org, enforced when a rate limiter is attached
    /// (`Lore::with_rate_limiter`); orgs may lower them for themselves.
    pub rate_limits: ratelimit::RateLimits,
    /// Records one client address may make per minute without credentials (0: no limit),
    /// enforced when a rate limiter is attached; each also expires (`storage::expiring`).
    pub anonymous_per_minute: u32,
    /// Where outbound requests made for members and outsiders may go besides public addresses.
    pub outbound: lore_base::outbound::Policy,
    /// The caps of every script run.
    pub scripts: lore_engine::ScriptCaps,
    /// The secret of the operator routes (`POST /operator/{action}`, see `operator.rs`);
    /// `None` (natively always) leaves them off.
    pub operator_secret: Option<String>,
    /// A test build (`/__test/` routes served, `LORE_NO_AUTH` honoured, the operator route
    /// `schedules` taking a time); never a product build.
    pub test_build: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            default_org: OrgId::parse("default").expect("valid org name"),
            no_auth: false,
            sessions: true,
            max_body_bytes: DEFAULT_MAX_BODY,
            origins: OriginPolicy::loopback(),
            public_url: None,
            upstream: Vec::new(),
            sql: sql::Limits::default(),
            rate_limits: ratelimit::RateLimits::default(),
            anonymous_per_minute: DEFAULT_ANONYMOUS_PER_MINUTE,
            outbound: lore_base::outbound::Policy::default(),
            scripts: lore_engine::ScriptCaps::default(),
            operator_secret: None,
            test_build: false,
        }
    }
}

/// How a platform spells the variables [`Config::from_vars`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spelling {
    /// `LORE_DEFAULT_ORG` (Workers, environment variables).
    Upper,
    /// `lore_default_org` (Spin variables).
    Lower,
}

impl Spelling {
    /// `name` (given upper-case) as this platform spells it.
    pub fn spell(self, name: &str) -> String {
        match self {
            Spelling::Upper => name.to_string(),
            Spelling::Lower => name.to_ascii_lowercase(),
        }
    }
}

/// Every variable [`Config::from_vars`] and [`embeddings_from_vars`] may read, upper-case. A
/// platform that must fetch variables before parsing (Spin's are read asynchronously) reads
/// these.
pub const VARIABLES: &[&str] = &[
    "LORE_DEFAULT_ORG",
    "LORE_ALLOWED_ORIGINS",
    "LORE_ALLOWED_HOSTS",
    "LORE_MAX_BODY_BYTES",
    "LORE_RATE_TOKEN_PER_MINUTE",
    "LORE_RATE_ORG_PER_MINUTE",
    "LORE_RATE_ANONYMOUS_PER_MINUTE",
    "LORE_OUTBOUND_ALLOW",
    "LORE_SCRIPT_WALL_MS",
    "LORE_SCRIPT_MEMORY_BYTES",
    "LORE_PUBLIC_URL",
    "LORE_OPERATOR_SECRET",
    "LORE_NO_AUTH",
    "LORE_EMBEDDER",
    "LORE_EMBEDDINGS_URL",
    "LORE_EMBEDDINGS_MODEL",
    "LORE_EMBEDDINGS_KEY",
    "LORE_EMBEDDINGS_DIMENSIONS",
    "LORE_GITHUB_CLIENT_ID",
    "LORE_GITHUB_CLIENT_SECRET",
    "LORE_GITHUB_URL",
    "LORE_GITHUB_API_URL",
    "LORE_OIDC_CLIENT_ID",
    "LORE_OIDC_CLIENT_SECRET",
    "LORE_OIDC_AUTH_URL",
    "LORE_OIDC_TOKEN_URL",
    "LORE_OIDC_USERINFO_URL",
    "LORE_OIDC_NAME",
    "LORE_OIDC_SCOPES",
];

/// Variables looked up by their upper-case name in a platform's spelling; trimmed, and an
/// empty value reads as unset.
struct Vars<'a> {
    lookup: &'a dyn Fn(&str) -> Option<String>,
    spelling: Spelling,
}

impl Vars<'_> {
    fn get(&self, name: &str) -> Option<String> {
        (self.lookup)(&self.spelling.spell(name))
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    }

    fn name(&self, name: &str) -> String {
        self.spelling.spell(name)
    }

    fn list(&self, name: &str) -> Vec<String> {
        self.get(name)
            .map(|v| {
                v.split(',')
                    .map(|s| s.trim().to_ascii_lowercase())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A whole number; unset is `default`. `what` says what the number counts, for the error.
    fn number<T: std::str::FromStr>(
        &self,
        name: &str,
        default: T,
        what: &str,
    ) -> Result<T, String> {
        match self.get(name) {
            Some(n) => n
                .parse()
                .map_err(|_| format!("{}: {n:?} is not a number of {what}", self.name(name))),
            None => Ok(default),
        }
    }
}

impl Config {
    /// An edge deployment's configuration from its variables (the table in [`crate::config`]),
    /// `lookup` answering a name in `spelling`. `test_build` honours `LORE_NO_AUTH`; a product
    /// build ignores it. An invalid value is an error naming the variable.
    pub fn from_vars(
        spelling: Spelling,
        lookup: impl Fn(&str) -> Option<String>,
        test_build: bool,
    ) -> Result<Config, String> {
        let vars = Vars {
            lookup: &lookup,
            spelling,
        };
        let defaults = Config::default();
        let default_org = match vars.get("LORE_DEFAULT_ORG") {
            Some(name) => OrgId::parse(&name)
                .map_err(|e| format!("{}: {e}", vars.name("LORE_DEFAULT_ORG")))?,
            None => defaults.default_org,
        };
        let hosts = vars.list("LORE_ALLOWED_HOSTS");
        let origins = OriginPolicy {
            allowed_hosts: (!hosts.is_empty()).then_some(hosts),
            allowed_origins: vars.list("LORE_ALLOWED_ORIGINS"),
        };
        let upstream = providers::from_vars(|name| vars.get(name))
            .map_err(|e| format!("identity provider configuration: {e}"))?;
        let rates = defaults.rate_limits;
        Ok(Config {
            default_org,
            no_auth: test_build && vars.get("LORE_NO_AUTH").as_deref() == Some("1"),
            test_build,
            sessions: false,
            max_body_bytes: vars.number("LORE_MAX_BODY_BYTES", DEFAULT_MAX_BODY, "bytes")?,
            origins,
            public_url: vars
                .get("LORE_PUBLIC_URL")
                .map(|u| u.trim_end_matches('/').to_string()),
            upstream,
            sql: defaults.sql,
            rate_limits: ratelimit::RateLimits {
                token_per_minute: vars.number(
                    "LORE_RATE_TOKEN_PER_MINUTE",
                    rates.token_per_minute,
                    "requests per minute",
                )?,
                org_per_minute: vars.number(
                    "LORE_RATE_ORG_PER_MINUTE",
                    rates.org_per_minute,
                    "requests per minute",
                )?,
            },
            anonymous_per_minute: vars.number(
                "LORE_RATE_ANONYMOUS_PER_MINUTE",
                DEFAULT_ANONYMOUS_PER_MINUTE,
                "records per minute",
            )?,
            outbound: lore_base::outbound::Policy::parse(
                &vars.get("LORE_OUTBOUND_ALLOW").unwrap_or_default(),
            )
            .map_err(|e| format!("{}: {e}", vars.name("LORE_OUTBOUND_ALLOW")))?,
            scripts: {
                let caps = lore_engine::ScriptCaps::default();
                lore_engine::ScriptCaps {
                    wall_ms: vars.number("LORE_SCRIPT_WALL_MS", caps.wall_ms, "ms")?,
                    memory_bytes: vars.number(
                        "LORE_SCRIPT_MEMORY_BYTES",
                        caps.memory_bytes,
                        "bytes",
                    )?,
                    ..caps
                }
            },
            operator_secret: vars.get("LORE_OPERATOR_SECRET"),
        })
    }
}

/// The OpenAI-compatible endpoint to embed with, if `LORE_EMBEDDINGS_URL` is set; `None` means
/// the platform's own embedder. An instance that lives for one request cannot ask the
/// endpoint for its vector length the way `lore serve` does at start, so
/// `LORE_EMBEDDINGS_DIMENSIONS` is required with the URL.
pub fn embeddings_from_vars(
    spelling: Spelling,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Option<OpenAiConfig>, String> {
    let vars = Vars {
        lookup: &lookup,
        spelling,
    };
    let Some(url) = vars.get("LORE_EMBEDDINGS_URL") else {
        return Ok(None);
    };
    let (url_name, model_name, dimensions_name) = (
        vars.name("LORE_EMBEDDINGS_URL"),
        vars.name("LORE_EMBEDDINGS_MODEL"),
        vars.name("LORE_EMBEDDINGS_DIMENSIONS"),
    );
    let model = vars
        .get("LORE_EMBEDDINGS_MODEL")
        .ok_or_else(|| format!("{url_name} needs {model_name}"))?;
    let dimensions = vars
        .get("LORE_EMBEDDINGS_DIMENSIONS")
        .ok_or_else(|| format!("{url_name} needs {dimensions_name} (the vector length)"))?;
    let dimensions = match dimensions.parse::<usize>() {
        Ok(n) if n > 0 => n,
        _ => return Err(format!("{dimensions_name}: {dimensions:?} is not a length")),
    };
    Ok(Some(OpenAiConfig {
        url,
        model,
        key: vars.get("LORE_EMBEDDINGS_KEY"),
        dimensions,
    }))
}

impl Config {
    /// The server's public base URL (scheme, host, port; no trailing slash): the issuer, and the
    /// prefix of every resource URL. From the configured `public_url`, else from the request's
    /// `Host` (`http` for loopback names, `https` otherwise). `None` without either.
    pub fn base_url(&self, request_headers: &http::HeaderMap) -> Option<String> {
        if let Some(url) = &self.public_url {
            return Some(url.trim_end_matches('/').to_string());
        }
        let host = headers::get(request_headers, "host")?.to_ascii_lowercase();
        let valid = !host.is_empty()
            && host.bytes().all(|b| {
                b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']' | b'_')
            });
        if !valid {
            return None;
        }
        let scheme = if headers::is_loopback(&host) {
            "http"
        } else {
            "https"
        };
        Some(format!("{scheme}://{host}"))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn unset_variables_give_the_edge_defaults() {
        let config = Config::from_vars(Spelling::Upper, |_| None, false).unwrap();
        assert_eq!(config.default_org.as_str(), "default");
        assert!(!config.sessions && !config.no_auth);
        assert_eq!(config.max_body_bytes, DEFAULT_MAX_BODY);
        assert_eq!(config.origins.allowed_hosts, None);
        assert!(config.operator_secret.is_none() && config.public_url.is_none());
        assert_eq!(config.rate_limits.token_per_minute, 600);
    }

    #[test]
    fn each_spelling_reads_its_own_names_and_errors_name_them() {
        let lower = vars(&[
            ("lore_default_org", " acme "),
            ("lore_allowed_hosts", "A.example, b.example,,"),
            ("lore_public_url", "https://lore.example/"),
            ("lore_rate_org_per_minute", "12"),
            ("lore_operator_secret", "s"),
            ("lore_no_auth", "1"),
            ("LORE_MAX_BODY_BYTES", "not read: wrong spelling"),
        ]);
        let config = Config::from_vars(Spelling::Lower, |n| lower.get(n).cloned(), true).unwrap();
        assert_eq!(config.default_org.as_str(), "acme");
        assert_eq!(
            config.origins.allowed_hosts,
            Some(vec!["a.example".to_string(), "b.example".to_string()])
        );
        assert_eq!(config.public_url.as_deref(), Some("https://lore.example"));
        assert_eq!(config.rate_limits.org_per_minute, 12);
        assert_eq!(config.operator_secret.as_deref(), Some("s"));
        assert!(config.no_auth);
        assert_eq!(config.max_body_bytes, DEFAULT_MAX_BODY);
        // A product build never honours LORE_NO_AUTH.
        let product = Config::from_vars(Spelling::Lower, |n| lower.get(n).cloned(), false).unwrap();
        assert!(!product.no_auth);

        let bad = vars(&[("lore_max_body_bytes", "4MB")]);
        let e = Config::from_vars(Spelling::Lower, |n| bad.get(n).cloned(), false).unwrap_err();
        assert_eq!(e, "lore_max_body_bytes: \"4MB\" is not a number of bytes");
        let bad = vars(&[("LORE_RATE_TOKEN_PER_MINUTE", "-1")]);
        let e = Config::from_vars(Spelling::Upper, |n| bad.get(n).cloned(), false).unwrap_err();
        assert!(e.starts_with("LORE_RATE_TOKEN_PER_MINUTE: "), "{e}");
        let bad = vars(&[("LORE_DEFAULT_ORG", "Not An Org")]);
        let e = Config::from_vars(Spelling::Upper, |n| bad.get(n).cloned(), false).unwrap_err();
        assert!(e.starts_with("LORE_DEFAULT_ORG: "), "{e}");
        let bad = vars(&[("lore_github_client_id", "id")]);
        let e = Config::from_vars(Spelling::Lower, |n| bad.get(n).cloned(), false).unwrap_err();
        assert!(e.contains("LORE_GITHUB_CLIENT_SECRET"), "{e}");
    }

    #[test]
    fn every_variable_read_is_listed() {
        let read = std::cell::RefCell::new(Vec::new());
        let all = |name: &str| {
            read.borrow_mut().push(name.to_string());
            Some(match name {
                "LORE_DEFAULT_ORG" => "acme".to_string(),
                "LORE_EMBEDDINGS_DIMENSIONS"
                | "LORE_MAX_BODY_BYTES"
                | "LORE_SCRIPT_WALL_MS"
                | "LORE_SCRIPT_MEMORY_BYTES" => "8".to_string(),
                n if n.contains("PER_MINUTE") => "8".to_string(),
                n if n.ends_with("_URL") => "https://x.example".to_string(),
                "LORE_OUTBOUND_ALLOW" => "10.0.0.0/8".to_string(),
                _ => "x".to_string(),
            })
        };
        Config::from_vars(Spelling::Upper, all, true).unwrap();
        embeddings_from_vars(Spelling::Upper, all).unwrap();
        for name in read.borrow().iter() {
            assert!(
                VARIABLES.contains(&name.as_str()),
                "{name} is read but not in VARIABLES"
            );
        }
    }

    #[test]
    fn embeddings_need_model_and_a_length() {
        assert_eq!(embeddings_from_vars(Spelling::Lower, |_| None), Ok(None));
        let v = vars(&[("lore_embeddings_url", "https://e.example/v1/embeddings")]);
        let e = embeddings_from_vars(Spelling::Lower, |n| v.get(n).cloned()).unwrap_err();
        assert_eq!(e, "lore_embeddings_url needs lore_embeddings_model");
        let v = vars(&[
            ("lore_embeddings_url", "https://e.example/v1/embeddings"),
            ("lore_embeddings_model", "m"),
            ("lore_embeddings_dimensions", "0"),
        ]);
        let e = embeddings_from_vars(Spelling::Lower, |n| v.get(n).cloned()).unwrap_err();
        assert_eq!(e, "lore_embeddings_dimensions: \"0\" is not a length");
        let v = vars(&[
            ("LORE_EMBEDDINGS_URL", "https://e.example/v1/embeddings"),
            ("LORE_EMBEDDINGS_MODEL", "m"),
            ("LORE_EMBEDDINGS_DIMENSIONS", "384"),
            ("LORE_EMBEDDINGS_KEY", "k"),
        ]);
        let c = embeddings_from_vars(Spelling::Upper, |n| v.get(n).cloned())
            .unwrap()
            .unwrap();
        assert_eq!(
            (c.model.as_str(), c.dimensions, c.key.as_deref()),
            ("m", 384, Some("k"))
        );
    }
}
