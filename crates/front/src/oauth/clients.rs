//! OAuth clients: dynamic client registration (RFC 7591) stores a client under an id lore
//! chooses; a client ID metadata document is a client whose id is an HTTPS URL serving its
//! own metadata, fetched through the HTTP port, validated and cached in storage. Both end in
//! a [`Client`]: its redirect URIs (matched exactly, loopback ports aside), how it
//! authenticates at the token endpoint, and which grants it may use.

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::headers;
use crate::web::Cx;
use crate::web::form::{OAuthError, Params, constant_time_eq};
use lore_base::ids::new_ulid;
use lore_base::keys;
use lore_base::ports::OutboundRequest;
use lore_base::storage::Batch;

/// The largest registration request or metadata document accepted.
const MAX_METADATA_BYTES: usize = 5 * 1024;
/// A metadata document is fetched again after this long, or its `max-age` within bounds.
const DOCUMENT_TTL_MS: i64 = 3_600_000;
const DOCUMENT_TTL_MIN_MS: i64 = 60_000;
const DOCUMENT_TTL_MAX_MS: i64 = 86_400_000;

/// How a client proves itself at the token endpoint.
pub const AUTH_NONE: &str = "none";
pub const AUTH_POST: &str = "client_secret_post";
pub const AUTH_BASIC: &str = "client_secret_basic";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Client {
    pub client_id: String,
    #[serde(default)]
    pub client_name: Option<String>,
    #[serde(default)]
    pub client_uri: Option<String>,
    pub redirect_uris: Vec<String>,
    pub token_endpoint_auth_method: String,
    pub grant_types: Vec<String>,
    /// SHA-256 of the client secret (confidential registered clients only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_hash: Option<String>,
    /// Whether the id is the URL of a client ID metadata document.
    #[serde(default)]
    pub metadata_document: bool,
    pub created_at_ms: i64,
    /// A registration ends unless it is used: set when it is made, cleared at its first code
    /// exchange (`web::anonymous`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<i64>,
}

impl Client {
    /// What the consent page calls the client: its name, and where it lives.
    pub fn display_name(&self) -> String {
        self.client_name
            .clone()
            .unwrap_or_else(|| "an unnamed application".to_string())
    }
    pub fn may_refresh(&self) -> bool {
        self.grant_types.iter().any(|g| g == "refresh_token")
    }
}

/// A fetched metadata document as cached.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct CachedClientDocument {
    client: Client,
    expires_at_ms: i64,
}

/// Whether `requested` is the registered redirect URI `registered`: the same string, or for a
/// loopback IP redirect (RFC 8252 section 7.3) the same apart from the port, which a native
/// app picks when it starts listening.
pub fn redirect_matches(registered: &str, requested: &str) -> bool {
    if registered == requested {
        return true;
    }
    let (Ok(a), Ok(b)) = (url::Url::parse(registered), url::Url::parse(requested)) else {
        return false;
    };
    let loopback = |u: &url::Url| {
        u.scheme() == "http"
            && matches!(
                u.host_str(),
                Some("127.0.0.1") | Some("[::1]") | Some("localhost")
            )
    };
    loopback(&a)
        && loopback(&b)
        && a.host_str() == b.host_str()
        && a.path() == b.path()
        && a.query() == b.query()
        && a.username() == b.username()
        && a.password().is_none()
        && b.password().is_none()
}

/// Checks one redirect URI of a registration or a metadata document.
fn validate_redirect_uri(uri: &str) -> Result<(), OAuthError> {
    let bad = |why: &str| OAuthError::invalid_redirect_uri(format!("redirect URI {uri:?}: {why}"));
    let parsed = url::Url::parse(uri).map_err(|_| bad("not an absolute URI"))?;
    if parsed.fragment().is_some() {
        return Err(bad("a redirect URI has no fragment"));
    }
    if parsed.username() != "" || parsed.password().is_some() {
        return Err(bad("a redirect URI carries no credentials"));
    }
    match parsed.scheme() {
        "https" => Ok(()),
        "http" if parsed.host_str().is_some_and(headers::is_loopback) => Ok(()),
        "http" => Err(bad(
            "http is allowed only for loopback addresses; use https",
        )),
        "javascript" | "data" | "vbscript" | "file" | "blob" | "about" => {
            Err(bad("this scheme cannot receive an authorization response"))
        }
        // A private-use scheme of a native app (RFC 8252 section 7.1).
        _ => Ok(()),
    }
}

fn string_field(metadata: &Value, name: &str, max: usize) -> Result<Option<String>, OAuthError> {
    match metadata.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.chars().count() <= max => Ok(Some(s.clone())),
        Some(_) => Err(OAuthError::invalid_client_metadata(format!(
            "{name} must be a string of at most {max} characters"
        ))),
    }
}

fn string_list(metadata: &Value, name: &str) -> Result<Option<Vec<String>>, OAuthError> {
    match metadata.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .map(Some)
            .ok_or_else(|| {
                OAuthError::invalid_client_metadata(format!("{name} must be an array of strings"))
            }),
        Some(_) => Err(OAuthError::invalid_client_metadata(format!(
            "{name} must be an array of strings"
        ))),
    }
}

/// The client fields common to a registration and a metadata document.
fn client_from_metadata(
    metadata: &Value,
    client_id: String,
    default_auth: &str,
    now: i64,
) -> Result<Client, OAuthError> {
    if !metadata.is_object() {
        return Err(OAuthError::invalid_client_metadata(
            "client metadata must be a JSON object",
        ));
    }
    let redirect_uris = string_list(metadata, "redirect_uris")?.unwrap_or_default();
    if redirect_uris.is_empty() || redirect_uris.len() > 10 {
        return Err(OAuthError::invalid_redirect_uri(
            "give between 1 and 10 redirect_uris",
        ));
    }
    for uri in &redirect_uris {
        validate_redirect_uri(uri)?;
    }
    let auth = string_field(metadata, "token_endpoint_auth_method", 40)?
        .unwrap_or_else(|| default_auth.to_string());
    if ![AUTH_NONE, AUTH_POST, AUTH_BASIC].contains(&auth.as_str()) {
        return Err(OAuthError::invalid_client_metadata(format!(
            "token_endpoint_auth_method {auth:?} is not supported; use none, client_secret_post or client_secret_basic"
        )));
    }
    let grant_types = string_list(metadata, "grant_types")?
        .unwrap_or_else(|| vec!["authorization_code".into(), "refresh_token".into()]);
    if grant_types.is_empty()
        || grant_types
            .iter()
            .any(|g| g != "authorization_code" && g != "refresh_token")
    {
        return Err(OAuthError::invalid_client_metadata(
            "grant_types may hold authorization_code and refresh_token only",
        ));
    }
    if let Some(types) = string_list(metadata, "response_types")?
        && types.iter().any(|t| t != "code")
    {
        return Err(OAuthError::invalid_client_metadata(
            "response_types may hold code only",
        ));
    }
    let client_uri = string_field(metadata, "client_uri", 2000)?;
    Ok(Client {
        client_id,
        client_name: string_field(metadata, "client_name", 200)?,
        client_uri,
        redirect_uris,
        token_endpoint_auth_method: auth,
        grant_types,
        secret_hash: None,
        metadata_document: false,
        created_at_ms: now,
        expires_at_ms: None,
    })
}

/// How long a registration lasts unless a code is exchanged for it.
const UNUSED_REGISTRATION_MS: i64 = 86_400_000;

/// `POST /oauth/register` (RFC 7591): stores the client and answers its information, with a
/// secret shown once for confidential clients. Anyone may register, so a registration is a
/// record made without credentials (`web::anonymous`): it counts against the asking
/// address's rate, and ends after a day unless it is used.
pub async fn register(cx: &Cx<'_>) -> Result<Value, OAuthError> {
    let (lore, body) = (cx.lore, cx.request.body().as_slice());
    if body.len() > MAX_METADATA_BYTES {
        return Err(OAuthError::invalid_client_metadata(
            "the registration request is larger than 5 KiB",
        ));
    }
    let metadata: Value = serde_json::from_slice(body).map_err(|e| {
        OAuthError::invalid_client_metadata(format!("the body is not JSON client metadata: {e}"))
    })?;
    let now = lore.ports().clock.now_ms();
    let client_id = format!("dcr_{}", new_ulid(lore.ports()));
    // RFC 7591 section 2: without a method, a client authenticates with a secret over Basic.
    let mut client = client_from_metadata(&metadata, client_id.clone(), AUTH_BASIC, now)?;
    client.expires_at_ms = Some(now + UNUSED_REGISTRATION_MS);
    crate::web::anonymous::admit(cx.lore, cx.request).await?;
    let mut answer = json!({
        "client_id": client.client_id,
        "client_id_issued_at": now / 1000,
        "redirect_uris": client.redirect_uris,
        "token_endpoint_auth_method": client.token_endpoint_auth_method,
        "grant_types": client.grant_types,
        "response_types": ["code"],
    });
    if let Some(name) = &client.client_name {
        answer["client_name"] = json!(name);
    }
    if let Some(uri) = &client.client_uri {
        answer["client_uri"] = json!(uri);
    }
    if let Some(scope) = metadata.get("scope").and_then(Value::as_str) {
        answer["scope"] = json!(scope);
    }
    if client.token_endpoint_auth_method != AUTH_NONE {
        let mut bytes = [0u8; 32];
        lore.ports().random.fill(&mut bytes);
        let secret = format!(
            "lore_cs_{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
        );
        client.secret_hash = Some(keys::sha256_hex(&secret));
        answer["client_secret"] = json!(secret);
        answer["client_secret_expires_at"] = json!(0);
    }
    let mut batch = Batch::new();
    let key = keys::oauth_client(&client.client_id);
    batch.require_absent(&key);
    crate::web::anonymous::store(
        lore,
        batch,
        &key,
        serde_json::to_vec(&client).unwrap_or_default(),
        now + UNUSED_REGISTRATION_MS,
    )
    .await?;
    tracing::info!(client_id = %client.client_id, auth = %client.token_endpoint_auth_method, "OAuth client registered");
    Ok(answer)
}

/// Whether `client_id` is the URL of a client ID metadata document lore may fetch: HTTPS with
/// a path, no fragment or credentials. On a loopback issuer (a local server), `http` loopback
/// URLs are allowed too. Where it may be fetched from is decided by the address it connects
/// to (`lore_base::outbound::Reach`), not here.
pub fn metadata_document_url(client_id: &str, issuer_is_loopback: bool) -> Option<url::Url> {
    let url = url::Url::parse(client_id).ok()?;
    let host = url.host_str()?.to_string();
    let loopback_host = headers::is_loopback(&host);
    let scheme_ok =
        url.scheme() == "https" || (url.scheme() == "http" && loopback_host && issuer_is_loopback);
    let path_ok = url.path() != "/" && !url.path().split('/').any(|s| s == "." || s == "..");
    if !scheme_ok
        || !path_ok
        || url.fragment().is_some()
        || url.username() != ""
        || url.password().is_some()
    {
        return None;
    }
    Some(url)
}

/// The `max-age` of a `Cache-Control` header, clamped, in milliseconds.
fn document_ttl(response_headers: &[(String, String)]) -> i64 {
    response_headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("cache-control"))
        .flat_map(|(_, v)| v.split(','))
        .filter_map(|d| d.trim().strip_prefix("max-age="))
        .filter_map(|n| n.parse::<i64>().ok())
        .next()
        .map_or(DOCUMENT_TTL_MS, |s| {
            (s * 1000).clamp(DOCUMENT_TTL_MIN_MS, DOCUMENT_TTL_MAX_MS)
        })
}

/// The longest fetching a client metadata document may take.
const DOCUMENT_TIMEOUT_MS: u64 = 5_000;

/// The client of a metadata document: from the cache while fresh, else fetched and checked,
/// in the asking client's share, from a public address (or loopback where the issuer is).
/// Fetching and caching a document is what an unauthenticated request makes, so it counts
/// against the asking address's rate (`web::anonymous`).
async fn client_from_document(
    cx: &Cx<'_>,
    url: &url::Url,
    reach: lore_base::outbound::Reach,
) -> Result<Client, OAuthError> {
    let lore = cx.lore;
    let client_id = url.as_str();
    let key = keys::oauth_client_document(client_id);
    let now = lore.ports().clock.now_ms();
    if let Some(cached) = lore.ports().record::<CachedClientDocument>(&key).await?
        && cached.expires_at_ms > now
        && cached.client.client_id == client_id
    {
        return Ok(cached.client);
    }
    let http = lore.ports().http.as_ref().ok_or_else(|| {
        OAuthError::invalid_client("this server cannot fetch client metadata documents")
    })?;
    crate::web::anonymous::admit(cx.lore, cx.request).await?;
    let unusable = |why: String| {
        OAuthError::invalid_client(format!("the client metadata document at {url} {why}"))
    };
    let response = http
        .send(OutboundRequest {
            method: "GET".into(),
            url: client_id.to_string(),
            headers: vec![("accept".into(), "application/json".into())],
            body: Vec::new(),
            reach,
            share: cx.client_share(),
            timeout_ms: DOCUMENT_TIMEOUT_MS,
        })
        .await
        .map_err(|e| unusable(format!("could not be fetched: {e}")))?;
    if response.status != 200 {
        return Err(unusable(format!("answered HTTP {}", response.status)));
    }
    if response.body.len() > MAX_METADATA_BYTES {
        return Err(unusable("is larger than 5 KiB".into()));
    }
    let metadata: Value = serde_json::from_slice(&response.body)
        .map_err(|_| unusable("is not a JSON document".into()))?;
    if metadata.get("client_id").and_then(Value::as_str) != Some(client_id) {
        return Err(unusable(
            "names another client_id; it must be the document's own URL".into(),
        ));
    }
    if metadata.get("client_secret").is_some() || metadata.get("client_secret_expires_at").is_some()
    {
        return Err(unusable(
            "carries a client secret, which it must not".into(),
        ));
    }
    let mut client = client_from_metadata(&metadata, client_id.to_string(), AUTH_NONE, now)
        .map_err(|e| unusable(format!("is invalid: {}", e.description)))?;
    if client.token_endpoint_auth_method != AUTH_NONE {
        return Err(unusable(
            "asks for a client secret; a metadata document client authenticates with none".into(),
        ));
    }
    client.metadata_document = true;
    let cached = CachedClientDocument {
        client: client.clone(),
        expires_at_ms: now + document_ttl(&response.headers),
    };
    crate::web::anonymous::store(
        lore,
        Batch::new(),
        &key,
        serde_json::to_vec(&cached).unwrap_or_default(),
        cached.expires_at_ms,
    )
    .await?;
    Ok(client)
}

/// The client `client_id` names: a registered one (while its registration lasts), or a
/// metadata document (fetched for the asking client, in its share).
pub async fn find(cx: &Cx<'_>, client_id: &str) -> Result<Client, OAuthError> {
    let (lore, issuer) = (cx.lore, cx.base.as_str());
    if client_id.len() > 2000 {
        return Err(OAuthError::invalid_client("the client_id is too long"));
    }
    if client_id.starts_with("dcr_") {
        return lore
            .ports()
            .record::<Client>(&keys::oauth_client(client_id))
            .await?
            .filter(|c| {
                c.expires_at_ms
                    .is_none_or(|at| at > lore.ports().clock.now_ms())
            })
            .ok_or_else(|| {
                OAuthError::invalid_client(format!("client {client_id} is not registered here"))
            });
    }
    let issuer_is_loopback = url::Url::parse(issuer)
        .ok()
        .and_then(|u| u.host_str().map(headers::is_loopback))
        .unwrap_or(false);
    match metadata_document_url(client_id, issuer_is_loopback) {
        Some(url) => {
            let reach = if issuer_is_loopback {
                lore_base::outbound::Reach::PublicOrLoopback
            } else {
                lore_base::outbound::Reach::Public
            };
            client_from_document(cx, &url, reach).await
        }
        None => Err(OAuthError::invalid_client(format!(
            "client {client_id:?} is not registered here and is not the HTTPS URL of a client metadata document"
        ))),
    }
}

/// Authenticates the client of a token or revocation request: HTTP Basic, or `client_id`
/// (and `client_secret`) in the body, exactly one way.
pub async fn authenticate(cx: &Cx<'_>, params: &Params) -> Result<Client, OAuthError> {
    let request_headers = cx.request.headers();
    let basic = headers::get(request_headers, "authorization")
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("basic"))
        .map(|(_, creds)| creds.trim().to_string());
    let body_id = params.one("client_id")?;
    let body_secret = params.one("client_secret")?;
    let (client_id, secret) = match basic {
        Some(creds) => {
            if body_secret.is_some() {
                return Err(OAuthError::invalid_request(
                    "authenticate the client one way: Basic or client_secret, not both",
                ));
            }
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(creds)
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .ok_or_else(|| OAuthError::invalid_client("malformed Basic credentials"))?;
            let (id, secret) = decoded
                .split_once(':')
                .ok_or_else(|| OAuthError::invalid_client("malformed Basic credentials"))?;
            let decode = |s: &str| {
                url::form_urlencoded::parse(format!("x={s}").as_bytes())
                    .next()
                    .map(|(_, v)| v.into_owned())
                    .unwrap_or_default()
            };
            let id = decode(id);
            if body_id.is_some_and(|b| b != id) {
                return Err(OAuthError::invalid_request(
                    "client_id in the body differs from the Basic credentials",
                ));
            }
            (id, Some(decode(secret)))
        }
        None => {
            let id = body_id.ok_or_else(|| {
                OAuthError::invalid_client("name the client: client_id or Basic credentials")
            })?;
            (id.to_string(), body_secret.map(str::to_string))
        }
    };
    let client = find(cx, &client_id).await?;
    match (&client.secret_hash, secret) {
        (None, None) => Ok(client),
        (None, Some(_)) => Err(OAuthError::invalid_client(
            "this client is public and has no secret",
        )),
        (Some(_), None) => Err(OAuthError::invalid_client(
            "this client must authenticate with its secret",
        )),
        (Some(hash), Some(secret)) => {
            // Either secret method (Basic or in the body) is accepted.
            if !constant_time_eq(hash.as_bytes(), keys::sha256_hex(&secret).as_bytes()) {
                return Err(OAuthError::invalid_client("the client secret is wrong"));
            }
            Ok(client)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_uris_match_exactly_except_loopback_ports() {
        assert!(redirect_matches(
            "https://a.example/cb",
            "https://a.example/cb"
        ));
        assert!(!redirect_matches(
            "https://a.example/cb",
            "https://a.example/cb/"
        ));
        assert!(!redirect_matches(
            "https://a.example/cb",
            "https://a.example/cb?x=1"
        ));
        assert!(!redirect_matches(
            "https://a.example/cb",
            "https://a.example:8443/cb"
        ));
        assert!(redirect_matches(
            "http://127.0.0.1/cb",
            "http://127.0.0.1:53100/cb"
        ));
        assert!(redirect_matches(
            "http://127.0.0.1:3000/cb",
            "http://127.0.0.1:4000/cb"
        ));
        assert!(redirect_matches(
            "http://localhost:3000/cb",
            "http://localhost:9/cb"
        ));
        assert!(!redirect_matches(
            "http://127.0.0.1/cb",
            "http://127.0.0.1:53100/other"
        ));
        assert!(!redirect_matches(
            "http://127.0.0.1/cb",
            "http://localhost:53100/cb"
        ));
        assert!(!redirect_matches(
            "http://127.0.0.1/cb",
            "https://127.0.0.1:53100/cb"
        ));
    }

    #[test]
    fn metadata_document_urls_are_https_with_a_path() {
        assert!(metadata_document_url("https://app.example/oauth/client.json", false).is_some());
        assert!(metadata_document_url("https://app.example/", false).is_none());
        assert!(metadata_document_url("http://app.example/c.json", false).is_none());
        assert!(metadata_document_url("https://app.example/c.json#x", false).is_none());
        assert!(metadata_document_url("https://u:p@app.example/c.json", false).is_none());
        // Where a document may be fetched from is the outbound guard's (by address), not this.
        assert!(metadata_document_url("https://10.0.0.1/c.json", false).is_some());
        assert!(metadata_document_url("http://127.0.0.1:9/c.json", false).is_none());
        assert!(metadata_document_url("https://127.0.0.1:9/c.json", true).is_some());
        assert!(metadata_document_url("http://127.0.0.1:9/c.json", true).is_some());
        assert!(metadata_document_url("dcr_01abc", false).is_none());
    }
}
