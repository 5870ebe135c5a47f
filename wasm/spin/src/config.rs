//! The core's [`Config`] from Spin variables (`[variables]` in `spin.toml`, set with
//! `SPIN_VARIABLE_*` or `spin up --variable`; the dev host takes `--var NAME=VALUE`).
//!
//! | variable | meaning | default |
//! | --- | --- | --- |
//! | `lore_default_org` | the org of a token bound to one org when the path names none | `default` |
//! | `lore_allowed_origins` | browser origins allowed besides the app's own (comma-separated) | none |
//! | `lore_allowed_hosts` | host names accepted in `Host` (comma-separated) | any |
//! | `lore_max_body_bytes` | largest request body | 4 MiB |
//! | `lore_rate_token_per_minute`, `lore_rate_org_per_minute` | rate limits per token and per org (0: none; buckets in key-value) | 600, 3000 |
//! | `lore_no_auth` | `1`: tokenless requests act as the local owner. Honoured only by the test build | off |
//! | `lore_operator_secret` | turns the operator routes on (see `operator`) | unset: off |
//! | `lore_public_url` | the public base URL, the OAuth issuer and resource | the request's `Host` |
//! | `lore_github_*`, `lore_oidc_*` | sign-in through GitHub or an OIDC provider: the `LORE_GITHUB_*` and `LORE_OIDC_*` settings of `lore serve`, lowercased | none |
//! | `lore_embeddings_url`, `_model`, `_key`, `_dimensions` | an OpenAI-compatible embeddings endpoint instead of the built-in model (model and dimensions required with the URL) | the built-in model |
//!
//! Spin variable names are lowercase. Sessions are always off: an instance serves one request.

use std::collections::HashMap;

use lore::Config;
use lore::embed::openai::OpenAiConfig;
use lore::ids::OrgId;
use lore::mcp::headers::OriginPolicy;

/// The sign-in settings `lore::oauth::upstream::from_vars` reads, by their `lore serve` names;
/// in Spin each is the lowercase variable of the same name.
const UPSTREAM_VARS: &[&str] = &[
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

/// A variable's trimmed value; unset, undeclared and empty all read as `None`.
pub async fn var(name: &str) -> Option<String> {
    spin_sdk::variables::get(name)
        .await
        .ok()
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
pub async fn from_variables() -> Result<Config, String> {
    let defaults = lore::ratelimit::RateLimits::default();
    let default_org = match var("lore_default_org").await {
        Some(name) => OrgId::parse(&name).map_err(|e| format!("lore_default_org: {e}"))?,
        None => Config::default().default_org,
    };
    let max_body_bytes = match var("lore_max_body_bytes").await {
        Some(n) => n
            .parse()
            .map_err(|_| format!("lore_max_body_bytes: {n:?} is not a number of bytes"))?,
        None => lore::DEFAULT_MAX_BODY,
    };
    let hosts = list(var("lore_allowed_hosts").await);
    let origins = OriginPolicy {
        allowed_hosts: (!hosts.is_empty()).then_some(hosts),
        allowed_origins: list(var("lore_allowed_origins").await),
    };
    let no_auth = cfg!(feature = "test-build") && var("lore_no_auth").await.as_deref() == Some("1");
    let mut upstream_vars = HashMap::new();
    for name in UPSTREAM_VARS {
        if let Some(value) = var(&name.to_ascii_lowercase()).await {
            upstream_vars.insert(*name, value);
        }
    }
    let upstream = lore::oauth::upstream::from_vars(|name| upstream_vars.get(name).cloned())
        .map_err(|e| format!("identity provider configuration: {e}"))?;
    Ok(Config {
        default_org,
        no_auth,
        sessions: false,
        max_body_bytes,
        origins,
        public_url: var("lore_public_url")
            .await
            .map(|u| u.trim_end_matches('/').to_string()),
        upstream,
        sql: lore::sql::Limits::default(),
        rate_limits: lore::ratelimit::RateLimits {
            token_per_minute: per_minute("lore_rate_token_per_minute", defaults.token_per_minute)
                .await?,
            org_per_minute: per_minute("lore_rate_org_per_minute", defaults.org_per_minute).await?,
        },
    })
}

/// A requests-per-minute variable; unset is `default`.
async fn per_minute(name: &str, default: u32) -> Result<u32, String> {
    match var(name).await {
        Some(n) => n
            .parse()
            .map_err(|_| format!("{name}: {n:?} is not a number of requests per minute")),
        None => Ok(default),
    }
}

/// The OpenAI-compatible endpoint to embed with, if `lore_embeddings_url` is set; `None` means
/// the built-in model. A fresh instance per request cannot ask the endpoint for its vector
/// length the way `lore serve` does at start, so `lore_embeddings_dimensions` is required.
pub async fn embeddings() -> Result<Option<OpenAiConfig>, String> {
    let Some(url) = var("lore_embeddings_url").await else {
        return Ok(None);
    };
    let model = var("lore_embeddings_model")
        .await
        .ok_or("lore_embeddings_url needs lore_embeddings_model")?;
    let dimensions = var("lore_embeddings_dimensions")
        .await
        .ok_or("lore_embeddings_url needs lore_embeddings_dimensions (the vector length)")?;
    let dimensions = match dimensions.parse::<usize>() {
        Ok(n) if n > 0 => n,
        _ => {
            return Err(format!(
                "lore_embeddings_dimensions: {dimensions:?} is not a length"
            ));
        }
    };
    Ok(Some(OpenAiConfig {
        url,
        model,
        key: var("lore_embeddings_key").await,
        dimensions,
    }))
}
