//! The core's [`Config`] from the Worker's variables (`[vars]` in `wrangler.toml`).
//!
//! | variable | meaning | default |
//! | --- | --- | --- |
//! | `LORE_DEFAULT_ORG` | the org of a token bound to one org when the path names none | `default` |
//! | `LORE_ALLOWED_ORIGINS` | browser origins allowed besides the Worker's own (comma-separated) | none |
//! | `LORE_ALLOWED_HOSTS` | host names accepted in `Host` (comma-separated) | any: Cloudflare routes only the Worker's own hosts here |
//! | `LORE_MAX_BODY_BYTES` | largest request body | 4 MiB |
//! | `LORE_RATE_TOKEN_PER_MINUTE`, `LORE_RATE_ORG_PER_MINUTE` | rate limits per token and per org (0: none; buckets in the `LORE_LIMITER` Durable Object) | 600, 3000 |
//! | `LORE_PUBLIC_URL` | the Worker's public origin: the OAuth issuer and the prefix of resource URLs | from each request's `Host`, `https` |
//! | `LORE_GITHUB_CLIENT_ID`, `LORE_OIDC_*` | identity providers for the sign-in page (see `lore::oauth::upstream::from_vars`; secrets as Worker secrets) | none |
//! | `LORE_NO_AUTH` | `1`: tokenless requests act as the local owner. Honoured only by the test build | off |
//!
//! Sessions are always off: an isolate lives for a short while and serves any org, so the edge
//! runs the legacy eras statelessly.

use lore::Config;
use lore::ids::OrgId;
use lore::mcp::headers::OriginPolicy;
use worker::Env;

fn var(env: &Env, name: &str) -> Option<String> {
    env.var(name)
        .ok()
        .map(|v| v.to_string())
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

fn list(value: Option<String>) -> Vec<String> {
    value
        .map(|v| {
            v.split(',')
                .map(|s| s.trim().to_ascii_lowercase())
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// Reads the configuration; an invalid value is an error naming the variable.
pub fn from_env(env: &Env) -> Result<Config, String> {
    let defaults = lore::ratelimit::RateLimits::default();
    let default_org = match var(env, "LORE_DEFAULT_ORG") {
        Some(name) => OrgId::parse(&name).map_err(|e| format!("LORE_DEFAULT_ORG: {e}"))?,
        None => Config::default().default_org,
    };
    let max_body_bytes = match var(env, "LORE_MAX_BODY_BYTES") {
        Some(n) => n
            .parse()
            .map_err(|_| format!("LORE_MAX_BODY_BYTES: {n:?} is not a number of bytes"))?,
        None => lore::DEFAULT_MAX_BODY,
    };
    let hosts = list(var(env, "LORE_ALLOWED_HOSTS"));
    let origins = OriginPolicy {
        allowed_hosts: (!hosts.is_empty()).then_some(hosts),
        allowed_origins: list(var(env, "LORE_ALLOWED_ORIGINS")),
    };
    let no_auth = cfg!(feature = "test-build") && var(env, "LORE_NO_AUTH").as_deref() == Some("1");
    Ok(Config {
        default_org,
        no_auth,
        sessions: false,
        max_body_bytes,
        origins,
        public_url: var(env, "LORE_PUBLIC_URL").map(|u| u.trim_end_matches('/').to_string()),
        // Client ids in [vars], client secrets as Worker secrets (`wrangler secret put`).
        upstream: lore::oauth::upstream::from_vars(|name| {
            var(env, name).or_else(|| env.secret(name).ok().map(|s| s.to_string()))
        })
        .map_err(|e| format!("identity provider configuration: {e}"))?,
        sql: lore::sql::Limits::default(),
        rate_limits: lore::ratelimit::RateLimits {
            token_per_minute: per_minute(
                env,
                "LORE_RATE_TOKEN_PER_MINUTE",
                defaults.token_per_minute,
            )?,
            org_per_minute: per_minute(env, "LORE_RATE_ORG_PER_MINUTE", defaults.org_per_minute)?,
        },
    })
}

/// A requests-per-minute variable; unset is `default`.
fn per_minute(env: &Env, name: &str, default: u32) -> Result<u32, String> {
    match var(env, name) {
        Some(n) => n
            .parse()
            .map_err(|_| format!("{name}: {n:?} is not a number of requests per minute")),
        None => Ok(default),
    }
}
