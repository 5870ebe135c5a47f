//! The core's [`Config`] from Spin variables (`[variables]` in `spin.toml`, set with
//! `SPIN_VARIABLE_*` or `spin up --variable`; the dev host takes `--var NAME=VALUE`).
//!
//! | variable | meaning | default |
//! | --- | --- | --- |
//! | `lore_default_org` | the org of a token bound to one org when the path names none | `default` |
//! | `lore_allowed_origins` | browser origins allowed besides the app's own (comma-separated) | none |
//! | `lore_allowed_hosts` | host names accepted in `Host` (comma-separated) | any |
//! | `lore_max_body_bytes` | largest request body | 4 MiB |
//! | `lore_no_auth` | `1`: tokenless requests act as the local owner. Honoured only by the test build | off |
//! | `lore_operator_secret` | turns the operator routes on (see `operator`) | unset: off |
//!
//! Spin variable names are lowercase. Sessions are always off: an instance serves one request.

use lore::Config;
use lore::ids::OrgId;
use lore::mcp::headers::OriginPolicy;

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
    Ok(Config {
        default_org,
        no_auth,
        sessions: false,
        max_body_bytes,
        origins,
    })
}
