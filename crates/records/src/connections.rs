//! Connections: external HTTP services the org's operations and feeds call. A connection's
//! credential is write-only: it is stored apart from the record (`secret/conn/{name}`), read
//! only here to sign an outbound request, and scrubbed from anything a response echoes back.
//! It is bound to where it may go (`StoredCredential`): the base URL and the way it was
//! stored to be sent; changing either needs the secret again, so no one who may edit a
//! connection can send a credential they never saw somewhere else.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{ByName, Done, check_name, now_text, require, to_bytes};
use lore_base::error::{LoreError, Result};
use lore_base::ports::{OutboundRequest, Ports};
use lore_base::storage::Batch;
use lore_directory::Caller;

/// Largest response body a call returns.
const MAX_RESPONSE_BYTES: usize = 1 << 20;

/// The longest one call through a connection may take, connection to last byte.
const CALL_TIMEOUT_MS: u64 = 30_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AuthScheme {
    /// `Authorization: Bearer <secret>`.
    #[default]
    Bearer,
    /// The secret as the value of `auth_header`.
    Header,
    /// No credential.
    None,
}

/// An external HTTP service (its credential is never shown).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Connection {
    pub name: String,
    pub description: String,
    /// `https://…` (plain `http://` only to loopback hosts).
    pub base_url: String,
    /// Hosts calls may reach; the base URL's host is always one.
    pub allowed_hosts: Vec<String>,
    pub auth: AuthScheme,
    /// Header that carries the secret when `auth` is `header`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_header: Option<String>,
    /// Whether a credential is stored (it is never returned).
    pub has_secret: bool,
    pub created_at: String,
    pub updated_at: String,
}

/// `connections.create`
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateConnection {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// `https://api.example.com/v1`
    pub base_url: String,
    /// Extra hosts calls may reach.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    #[serde(default)]
    pub auth: AuthScheme,
    pub auth_header: Option<String>,
    /// The credential. Write-only: stored apart, never returned, logged or echoed.
    pub secret: Option<String>,
}

/// `connections.update`: only the fields given change; `secret` replaces the credential.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateConnection {
    pub name: String,
    pub description: Option<String>,
    pub base_url: Option<String>,
    pub allowed_hosts: Option<Vec<String>>,
    pub auth: Option<AuthScheme>,
    pub auth_header: Option<String>,
    /// A new credential (write-only).
    pub secret: Option<String>,
}

/// `connections.call`: one HTTP request through the connection.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CallConnection {
    pub name: String,
    /// GET, POST, PUT, PATCH or DELETE (default GET).
    #[serde(default = "get_method")]
    pub method: String,
    /// Path under the base URL, e.g. `/issues?state=open`.
    #[serde(default)]
    pub path: String,
    /// JSON body.
    pub body: Option<Value>,
}

fn get_method() -> String {
    "GET".into()
}

/// What a call returned.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct CallResult {
    pub status: u16,
    /// The JSON body, or the body's text as a string (a body that is not JSON, was cut, or
    /// nests deeper than lore stores values).
    pub body: Value,
    /// Whether the body was cut at 1 MiB.
    pub truncated: bool,
    /// Set when the answer may hold the connection's credential in a form lore does not
    /// recognise: the upstream echoed the request (lore's request id came back) or lore
    /// redacted the credential from it. Redaction knows the credential as written, in
    /// percent-, base64-, hex- and JSON-escaped forms, and spelled out with separators (a
    /// list of characters); a secret split up, transformed or re-encoded otherwise is not
    /// recognised.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub may_hold_credential: bool,
}

/// A connection's credential as stored: the secret and what it was stored for. A call sends
/// it only while the connection still points where it did; an update that moves the base URL
/// or changes how it is sent must give the secret again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct StoredCredential {
    secret: String,
    base_url: String,
    auth: AuthScheme,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    auth_header: Option<String>,
}

impl StoredCredential {
    fn for_record(secret: String, record: &Connection) -> Self {
        Self {
            secret,
            base_url: record.base_url.clone(),
            auth: record.auth,
            auth_header: record.auth_header.as_ref().map(|h| h.to_ascii_lowercase()),
        }
    }

    /// Whether it was stored for `record` as it is now.
    fn fits(&self, record: &Connection) -> bool {
        self.base_url == record.base_url
            && self.auth == record.auth
            && self.auth_header == record.auth_header.as_ref().map(|h| h.to_ascii_lowercase())
    }

    fn bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// Splits `scheme://host[:port]/…` into the scheme and the host (lowercase, without port).
fn url_host(url: &str) -> Option<(&str, String)> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    if authority.is_empty() || authority.contains('@') {
        return None;
    }
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next()?.to_string(),
        None => authority.split(':').next()?.to_string(),
    };
    Some((scheme, host.to_ascii_lowercase()))
}

fn is_loopback(host: &str) -> bool {
    host == "localhost" || host == "::1" || host.starts_with("127.")
}

fn check_base_url(url: &str) -> Result<String> {
    let invalid = |why: &str| LoreError::invalid("base_url", format!("{url:?}: {why}"));
    let (scheme, host) = url_host(url).ok_or_else(|| invalid("not an absolute http(s) URL"))?;
    match scheme {
        "https" => {}
        "http" if is_loopback(&host) => {}
        "http" => {
            return Err(invalid(
                "use https (plain http is allowed only to loopback hosts)",
            ));
        }
        _ => return Err(invalid("use an https:// URL")),
    }
    Ok(host)
}

fn check_auth(auth: AuthScheme, header: Option<&str>) -> Result<()> {
    if auth == AuthScheme::Header {
        let ok = header.is_some_and(|h| {
            !h.is_empty() && h.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
        if !ok {
            return Err(LoreError::invalid(
                "auth_header",
                "auth \"header\" needs auth_header, a header name such as X-Api-Key",
            ));
        }
    }
    Ok(())
}

fn check_secret(secret: &str) -> Result<()> {
    if secret.is_empty() || secret.len() > 4096 || secret.chars().any(char::is_control) {
        // Never quote the secret back.
        return Err(LoreError::invalid(
            "secret",
            "the secret must be 1-4096 printable characters",
        ));
    }
    Ok(())
}

pub async fn get(ports: &Ports, caller: &Caller, name: &str) -> Result<Connection> {
    check_name("name", name)?;
    require(
        ports,
        &caller.keys().named("conn", name),
        format!("connection {name:?} in org {}", caller.org()),
    )
    .await
}

pub async fn list(ports: &Ports, caller: &Caller) -> Result<Vec<Connection>> {
    super::all(ports, &caller.keys().all_named("conn")).await
}

pub async fn create(ports: &Ports, caller: &Caller, args: CreateConnection) -> Result<Connection> {
    check_name("name", &args.name)?;
    let host = check_base_url(&args.base_url)?;
    check_auth(args.auth, args.auth_header.as_deref())?;
    if let Some(s) = &args.secret {
        check_secret(s)?;
    }
    let mut allowed: Vec<String> = vec![host];
    for h in args.allowed_hosts {
        let h = h.to_ascii_lowercase();
        if !allowed.contains(&h) {
            allowed.push(h);
        }
    }
    let now = now_text(ports);
    let record = Connection {
        name: args.name,
        description: args.description,
        base_url: args.base_url.trim_end_matches('/').to_string(),
        allowed_hosts: allowed,
        auth: args.auth,
        auth_header: args.auth_header,
        has_secret: args.secret.is_some(),
        created_at: now.clone(),
        updated_at: now,
    };
    let keys = caller.keys();
    let key = keys.named("conn", &record.name);
    let mut batch = Batch::new();
    batch.require_absent(&key).put(&key, to_bytes(&record));
    if let Some(secret) = args.secret {
        batch.put(
            keys.secret("conn", &record.name),
            StoredCredential::for_record(secret, &record).bytes(),
        );
    }
    super::commit_new(ports, batch, || format!("connection {:?}", record.name)).await?;
    Ok(record)
}

pub async fn update(ports: &Ports, caller: &Caller, args: UpdateConnection) -> Result<Connection> {
    let old = get(ports, caller, &args.name).await?;
    let mut record = old.clone();
    if let Some(d) = args.description {
        record.description = d;
    }
    if let Some(url) = args.base_url {
        let host = check_base_url(&url)?;
        record.base_url = url.trim_end_matches('/').to_string();
        if !record.allowed_hosts.contains(&host) {
            record.allowed_hosts.insert(0, host);
        }
    }
    if let Some(hosts) = args.allowed_hosts {
        let (_, base_host) = url_host(&record.base_url).expect("stored base URLs parse");
        record.allowed_hosts = vec![base_host];
        for h in hosts {
            let h = h.to_ascii_lowercase();
            if !record.allowed_hosts.contains(&h) {
                record.allowed_hosts.push(h);
            }
        }
    }
    if let Some(a) = args.auth {
        record.auth = a;
    }
    if args.auth_header.is_some() {
        record.auth_header = args.auth_header;
    }
    check_auth(record.auth, record.auth_header.as_deref())?;
    let keys = caller.keys();
    let mut batch = Batch::new();
    let secret_key = keys.secret("conn", &record.name);
    match args.secret {
        Some(secret) => {
            check_secret(&secret)?;
            record.has_secret = true;
            batch.put(
                &secret_key,
                StoredCredential::for_record(secret, &record).bytes(),
            );
        }
        None if old.has_secret => {
            let moved = StoredCredential::for_record(String::new(), &old);
            if !moved.fits(&record) {
                return Err(LoreError::invalid(
                    "secret",
                    "the stored credential is bound to the connection's base_url, auth and auth_header: give the secret again to change them",
                ));
            }
        }
        None => {}
    }
    record.updated_at = now_text(ports);
    let key = keys.named("conn", &record.name);
    batch
        .require_equals(&key, to_bytes(&old))
        .put(&key, to_bytes(&record));
    ports.storage.commit(batch).await?;
    Ok(record)
}

pub async fn delete(ports: &Ports, caller: &Caller, args: ByName) -> Result<Done> {
    let old = get(ports, caller, &args.name).await?;
    let keys = caller.keys();
    let key = keys.named("conn", &old.name);
    let mut batch = Batch::new();
    batch
        .require_equals(&key, to_bytes(&old))
        .delete(&key)
        .delete(keys.secret("conn", &old.name));
    ports.storage.commit(batch).await?;
    Ok(Done { ok: true })
}

/// The credential stored for `conn`, if it may be sent to `conn` as it is now. One stored
/// before credentials were bound (its bare secret) is taken as bound to the record as it is.
async fn credential(ports: &Ports, caller: &Caller, conn: &Connection) -> Result<Option<String>> {
    let Some(bytes) = ports
        .storage
        .get(&caller.keys().secret("conn", &conn.name))
        .await?
    else {
        return Ok(None);
    };
    match serde_json::from_slice::<StoredCredential>(&bytes) {
        Ok(stored) if stored.fits(conn) => Ok(Some(stored.secret)),
        Ok(_) => Err(LoreError::Forbidden(format!(
            "the credential of connection {} was stored for another base URL or header; give it again with connections.update",
            conn.name
        ))),
        Err(_) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
    }
}

/// Sends one request through the connection: the URL must stay on an allowed host, the
/// credential is added here, and the response is scrubbed of it.
pub async fn call(ports: &Ports, caller: &Caller, args: CallConnection) -> Result<CallResult> {
    let conn = get(ports, caller, &args.name).await?;
    let method = args.method.to_ascii_uppercase();
    if !["GET", "POST", "PUT", "PATCH", "DELETE"].contains(&method.as_str()) {
        return Err(LoreError::invalid(
            "method",
            format!(
                "{:?} is not allowed; use GET, POST, PUT, PATCH or DELETE",
                args.method
            ),
        ));
    }
    let url = super::outbound::target_url(&conn.base_url, &args.path)?;
    let host = url_host(&url)
        .map(|(_, h)| h)
        .filter(|h| conn.allowed_hosts.contains(h))
        .ok_or_else(|| {
            LoreError::invalid("path", "the URL leaves the connection's allowed hosts")
        })?;
    let http = ports.http.as_ref().ok_or_else(|| {
        LoreError::Unavailable(
            "this host has no outbound HTTP; connections cannot be called".into(),
        )
    })?;
    let secret = match conn.auth {
        AuthScheme::None => None,
        _ => credential(ports, caller, &conn).await?,
    };
    // Names this request; an upstream that sends it back echoes requests, so its answer may
    // hold the credential in a form redaction does not know.
    let request_id = format!("lore-{}", ports.random_hex(12));
    let mut headers = vec![
        ("accept".to_string(), "application/json".to_string()),
        (
            "user-agent".to_string(),
            format!("lore/{}", lore_base::VERSION),
        ),
        ("x-lore-request".to_string(), request_id.clone()),
    ];
    match (conn.auth, &secret) {
        (AuthScheme::Bearer, Some(s)) => {
            headers.push(("authorization".into(), format!("Bearer {s}")))
        }
        (AuthScheme::Header, Some(s)) => headers.push((
            conn.auth_header
                .clone()
                .unwrap_or_default()
                .to_ascii_lowercase(),
            s.clone(),
        )),
        _ => {}
    }
    // The secret and the whole header value it travels in, in every form redaction knows.
    let credential_header = headers
        .iter()
        .find(|(_, v)| secret.as_deref().is_some_and(|s| v.contains(s)))
        .map(|(_, v)| v.clone());
    let redactor = super::outbound::Redactor::new(
        &[secret.as_deref(), credential_header.as_deref()]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>(),
    );
    let body = match &args.body {
        Some(b) => {
            headers.push(("content-type".into(), "application/json".into()));
            serde_json::to_vec(b)?
        }
        None => Vec::new(),
    };
    let response = http
        .send(OutboundRequest {
            method,
            url,
            headers,
            body,
            // The org's member named it: public addresses only, in the org's share.
            reach: lore_base::outbound::Reach::Public,
            share: lore_base::outbound::Share::Org(caller.org().to_string()),
            timeout_ms: CALL_TIMEOUT_MS,
        })
        .await
        .map_err(|e| LoreError::Upstream {
            status: None,
            message: format!(
                "connection {} ({host}) failed: {}",
                conn.name,
                redactor.scrub(&e.0)
            ),
        })?;
    // Redacted whole, then cut: a cut never leaves part of an echo behind.
    let (scrubbed, redactions) = redactor.scrub_counted(&String::from_utf8_lossy(&response.body));
    let echoed = super::outbound::Redactor::new(&[&request_id])
        .scrub_counted(&scrubbed)
        .1
        > 0;
    let truncated = scrubbed.len() > MAX_RESPONSE_BYTES;
    let text = if truncated {
        redactor.cut(&scrubbed, MAX_RESPONSE_BYTES)
    } else {
        scrubbed
    };
    // JSON nested deeper than lore stores comes back as its text, as a non-JSON body does.
    let body = match serde_json::from_str::<Value>(&text) {
        Ok(v)
            if !truncated
                && lore_base::schema::depth(&v) <= lore_base::schema::MAX_STORED_DEPTH =>
        {
            v
        }
        _ => Value::String(text),
    };
    Ok(CallResult {
        status: response.status,
        body,
        truncated,
        may_hold_credential: secret.is_some() && (echoed || redactions > 0),
    })
}

/// The `{key}` placeholders of `template` filled from `args` (percent-encoded).
pub fn fill_path(template: &str, args: &Map<String, Value>) -> Result<String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let end = rest[start..]
            .find('}')
            .map(|e| start + e)
            .ok_or_else(|| LoreError::invalid("path", "unclosed { in the path template"))?;
        let key = &rest[start + 1..end];
        let value = args.get(key).ok_or_else(|| {
            LoreError::invalid(
                format!("args/{key}"),
                "the operation's path needs this argument",
            )
        })?;
        let text = match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        for b in text.bytes() {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                out.push(b as char);
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}
