//! `lore login`, `lore logout` and the stored credentials `lore memory run --url` reuses: the
//! OAuth authorization code + PKCE flow in the user's browser with a loopback redirect
//! (RFC 8252), the client registered dynamically, tokens kept in a user-only file under the
//! user's config folder and refreshed (with rotation) when they run out.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use oauth2::{
    AuthUrl, AuthorizationCode, ClientId, CsrfToken, PkceCodeChallenge, RedirectUrl, RefreshToken,
    Scope, TokenResponse, TokenUrl,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use lore_base::ports::{HttpClient, OutboundRequest};
use lore_front::oauth::client_http::PortHttp;

/// How long `lore login` waits for the browser to come back.
const LOGIN_TIMEOUT: Duration = Duration::from_secs(300);
/// Refresh an access token this long before it expires.
const REFRESH_MARGIN_MS: i64 = 60_000;

/// What `lore login` keeps for one server.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredLogin {
    pub issuer: String,
    pub resource: String,
    pub client_id: String,
    pub token_endpoint: String,
    #[serde(default)]
    pub revocation_endpoint: Option<String>,
    pub access_token: String,
    #[serde(default)]
    pub refresh_token: Option<String>,
    #[serde(default)]
    pub expires_at_ms: Option<i64>,
    #[serde(default)]
    pub scope: Option<String>,
}

/// The credentials file: one login per MCP URL.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Credentials {
    #[serde(default)]
    pub servers: BTreeMap<String, StoredLogin>,
}

/// `$XDG_CONFIG_HOME/lore/credentials.json`, else `~/.config/lore/credentials.json`, or the
/// file `LORE_CREDENTIALS` names.
pub fn credentials_path() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os("LORE_CREDENTIALS").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let config = match std::env::var_os("XDG_CONFIG_HOME").filter(|p| !p.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(
            std::env::var_os("HOME").context("HOME is not set; set LORE_CREDENTIALS")?,
        )
        .join(".config"),
    };
    Ok(config.join("lore").join("credentials.json"))
}

impl Credentials {
    pub fn load() -> anyhow::Result<Self> {
        let path = credentials_path()?;
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .with_context(|| format!("{} is not a lore credentials file", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    /// Writes the file readable by the user only (0600, in a 0700 folder), atomically.
    pub fn save(&self) -> anyhow::Result<PathBuf> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
        let path = credentials_path()?;
        let dir = path
            .parent()
            .context("the credentials path has no folder")?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("creating {}", dir.display()))?;
        let tmp = path.with_extension("json.tmp");
        let _ = std::fs::remove_file(&tmp);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .with_context(|| format!("writing {}", tmp.display()))?;
        file.write_all(&serde_json::to_vec_pretty(self)?)?;
        file.sync_all()?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
        std::fs::rename(&tmp, &path)?;
        Ok(path)
    }
}

/// The MCP URL as stored: no trailing slash.
pub fn normalize(url: &str) -> String {
    url.trim().trim_end_matches('/').to_string()
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

async fn get_json(http: &dyn HttpClient, url: &str) -> anyhow::Result<Option<Value>> {
    let response = http
        .send(OutboundRequest {
            method: "GET".into(),
            url: url.to_string(),
            headers: vec![("accept".into(), "application/json".into())],
            body: Vec::new(),
            // A URL the operator configured (or the CLI's user named).
            reach: lore_base::outbound::Reach::Configured,
            share: lore_base::outbound::Share::Server,
            timeout_ms: 60_000,
        })
        .await?;
    if response.status != 200 {
        return Ok(None);
    }
    Ok(serde_json::from_slice(&response.body).ok())
}

/// The server's protected resource metadata and its authorization server's metadata.
async fn discover(http: &dyn HttpClient, mcp_url: &str) -> anyhow::Result<(Value, Value)> {
    let url = url::Url::parse(mcp_url).with_context(|| format!("{mcp_url} is not a URL"))?;
    let origin = url.origin().ascii_serialization();
    let path = url.path().trim_end_matches('/');
    let mut resource = None;
    for candidate in [
        format!("{origin}/.well-known/oauth-protected-resource{path}"),
        format!("{origin}/.well-known/oauth-protected-resource"),
    ] {
        if let Some(doc) = get_json(http, &candidate).await? {
            resource = Some(doc);
            break;
        }
    }
    let resource = resource.with_context(|| {
        format!("{mcp_url} publishes no OAuth protected resource metadata; use --token instead")
    })?;
    let issuer = resource["authorization_servers"][0]
        .as_str()
        .context("the resource names no authorization server")?
        .trim_end_matches('/')
        .to_string();
    let issuer_url = url::Url::parse(&issuer)?;
    let issuer_path = issuer_url.path().trim_end_matches('/');
    let as_url = format!(
        "{}/.well-known/oauth-authorization-server{issuer_path}",
        issuer_url.origin().ascii_serialization()
    );
    let metadata = get_json(http, &as_url)
        .await?
        .with_context(|| format!("no authorization server metadata at {as_url}"))?;
    if metadata["issuer"].as_str().map(|i| i.trim_end_matches('/')) != Some(issuer.as_str()) {
        bail!("the authorization server metadata at {as_url} names another issuer");
    }
    Ok((resource, metadata))
}

/// Registers the CLI as a public client whose loopback redirect takes any port.
async fn register(http: &dyn HttpClient, endpoint: &str) -> anyhow::Result<String> {
    let body = json!({
        "client_name": "lore CLI",
        "redirect_uris": ["http://127.0.0.1/callback"],
        "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
    });
    let response = http
        .send(OutboundRequest {
            method: "POST".into(),
            url: endpoint.to_string(),
            headers: vec![("content-type".into(), "application/json".into())],
            body: serde_json::to_vec(&body)?,
            // A URL the operator configured (or the CLI's user named).
            reach: lore_base::outbound::Reach::Configured,
            share: lore_base::outbound::Share::Server,
            timeout_ms: 60_000,
        })
        .await?;
    let answer: Value = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
    match answer["client_id"].as_str() {
        Some(id) if response.status == 201 || response.status == 200 => Ok(id.to_string()),
        _ => bail!(
            "client registration failed: HTTP {} {answer}",
            response.status
        ),
    }
}

/// Waits for the browser's redirect on `listener`; returns the callback's query pairs.
fn wait_for_callback(listener: &TcpListener) -> anyhow::Result<BTreeMap<String, String>> {
    listener.set_nonblocking(true)?;
    let deadline = Instant::now() + LOGIN_TIMEOUT;
    loop {
        let (mut stream, _) = match listener.accept() {
            Ok(conn) => conn,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() > deadline {
                    bail!("no answer from the browser within 5 minutes");
                }
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        stream.set_nonblocking(false)?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        let mut buf = [0u8; 8192];
        let n = stream.read(&mut buf).unwrap_or(0);
        let head = String::from_utf8_lossy(&buf[..n]);
        let target = head
            .lines()
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .unwrap_or("");
        let Some(query) = target.strip_prefix("/callback?") else {
            let _ = stream.write_all(
                b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            );
            continue;
        };
        let params: BTreeMap<String, String> = url::form_urlencoded::parse(query.as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        let (heading, next) = if params.contains_key("code") {
            (
                "Signed in",
                "You can close this tab and return to the terminal.",
            )
        } else {
            ("Sign-in did not complete", "See the terminal.")
        };
        let page = maud::html! {
            (maud::DOCTYPE)
            html lang="en" { title { "lore" } h1 { (heading) } p { (next) } }
        }
        .into_string();
        let _ = write!(
            stream,
            "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
            page.len()
        );
        return Ok(params);
    }
}

fn open_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let _ = std::process::Command::new(std::env::var("BROWSER").unwrap_or(opener.to_string()))
        .arg(url)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
}

/// `lore login --url URL`: signs in through the browser and stores the tokens.
pub async fn login(http: &dyn HttpClient, mcp_url: &str, open: bool) -> anyhow::Result<PathBuf> {
    let mcp_url = normalize(mcp_url);
    let (resource_doc, metadata) = discover(http, &mcp_url).await?;
    let resource = resource_doc["resource"]
        .as_str()
        .unwrap_or(&mcp_url)
        .to_string();
    let issuer = metadata["issuer"].as_str().unwrap_or_default().to_string();
    let field = |name: &str| -> anyhow::Result<String> {
        metadata[name]
            .as_str()
            .map(str::to_string)
            .with_context(|| format!("the authorization server metadata has no {name}"))
    };
    let (authorize, token) = (field("authorization_endpoint")?, field("token_endpoint")?);
    let registration = field("registration_endpoint")?;
    let revocation = metadata["revocation_endpoint"].as_str().map(str::to_string);
    let client_id = register(http, &registration).await?;

    let listener = TcpListener::bind("127.0.0.1:0").context("opening a loopback port")?;
    let redirect = format!(
        "http://127.0.0.1:{}/callback",
        listener.local_addr()?.port()
    );
    let client = oauth2::basic::BasicClient::new(ClientId::new(client_id.clone()))
        .set_auth_uri(AuthUrl::new(authorize)?)
        .set_token_uri(TokenUrl::new(token.clone())?)
        .set_redirect_uri(RedirectUrl::new(redirect)?);
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let mut request = client
        .authorize_url(CsrfToken::new_random)
        .set_pkce_challenge(challenge)
        .add_extra_param("resource", resource.clone());
    if let Some(scopes) = resource_doc["scopes_supported"].as_array() {
        for s in scopes.iter().filter_map(Value::as_str) {
            request = request.add_scope(Scope::new(s.to_string()));
        }
    }
    let (auth_url, state) = request.url();
    eprintln!("Sign in to {mcp_url} in your browser:\n\n  {auth_url}\n");
    if open {
        open_browser(auth_url.as_str());
    }
    let params = wait_for_callback(&listener)?;
    if let Some(error) = params.get("error") {
        bail!(
            "sign-in failed: {error}{}",
            params
                .get("error_description")
                .map(|d| format!(" ({d})"))
                .unwrap_or_default()
        );
    }
    if params.get("state").map(String::as_str) != Some(state.secret().as_str()) {
        bail!("the browser came back with another sign-in's state; try again");
    }
    match params.get("iss") {
        Some(iss) if iss.trim_end_matches('/') != issuer.trim_end_matches('/') => {
            bail!("the authorization response came from another issuer ({iss})")
        }
        None if metadata["authorization_response_iss_parameter_supported"] == true => {
            bail!("the authorization response is missing iss")
        }
        _ => {}
    }
    let code = params
        .get("code")
        .context("the browser came back without a code")?;
    let tokens = client
        .exchange_code(AuthorizationCode::new(code.clone()))
        .set_pkce_verifier(verifier)
        .add_extra_param("resource", resource.clone())
        .request_async(&PortHttp(http, lore_base::outbound::Share::Server))
        .await
        .map_err(|e| anyhow::anyhow!("exchanging the code failed: {}", describe(&e)))?;
    let stored = StoredLogin {
        issuer,
        resource,
        client_id,
        token_endpoint: token,
        revocation_endpoint: revocation,
        access_token: tokens.access_token().secret().clone(),
        refresh_token: tokens.refresh_token().map(|t| t.secret().clone()),
        expires_at_ms: tokens.expires_in().map(|d| now_ms() + d.as_millis() as i64),
        scope: tokens
            .scopes()
            .map(|s| s.iter().map(|x| x.as_str()).collect::<Vec<_>>().join(" ")),
    };
    let mut credentials = Credentials::load()?;
    credentials.servers.insert(mcp_url, stored);
    credentials.save()
}

/// An `oauth2` request error, without the token material a response could hold.
fn describe<E, R>(e: &oauth2::RequestTokenError<E, R>) -> String
where
    E: std::error::Error + 'static,
    R: oauth2::ErrorResponse + std::fmt::Display + 'static,
{
    match e {
        oauth2::RequestTokenError::ServerResponse(r) => r.to_string(),
        oauth2::RequestTokenError::Request(e) => format!("request failed: {e}"),
        oauth2::RequestTokenError::Parse(e, _) => format!("unreadable response: {e}"),
        oauth2::RequestTokenError::Other(e) => e.clone(),
    }
}

/// The stored login that serves `mcp_url`: its own, or for an org's `…/mcp/{org}` the
/// server's `…/mcp` (whose token reaches every org it was granted).
fn login_for(credentials: &Credentials, mcp_url: &str) -> Option<(String, StoredLogin)> {
    let key = normalize(mcp_url);
    let server = key
        .rsplit_once('/')
        .filter(|(base, _)| base.ends_with("/mcp"))
        .map(|(base, _)| base.to_string());
    [Some(key), server]
        .into_iter()
        .flatten()
        .find_map(|k| credentials.servers.get(&k).cloned().map(|l| (k, l)))
}

/// The stored access token for `mcp_url`, refreshed first when it is about to expire.
pub async fn token_for(http: &dyn HttpClient, mcp_url: &str) -> anyhow::Result<Option<String>> {
    let mut credentials = Credentials::load()?;
    let Some((key, login)) = login_for(&credentials, mcp_url) else {
        return Ok(None);
    };
    let fresh = login
        .expires_at_ms
        .is_none_or(|at| at - REFRESH_MARGIN_MS > now_ms());
    if fresh {
        return Ok(Some(login.access_token));
    }
    let Some(refresh) = login.refresh_token.clone() else {
        bail!("the stored token for {key} has expired; run `lore login --url {key}` again");
    };
    let client = oauth2::basic::BasicClient::new(ClientId::new(login.client_id.clone()))
        .set_token_uri(TokenUrl::new(login.token_endpoint.clone())?);
    let tokens = client
        .exchange_refresh_token(&RefreshToken::new(refresh))
        .add_extra_param("resource", login.resource.clone())
        .request_async(&PortHttp(http, lore_base::outbound::Share::Server))
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "refreshing the stored token failed ({}); run `lore login --url {key}` again",
                describe(&e)
            )
        })?;
    let mut updated = login;
    updated.access_token = tokens.access_token().secret().clone();
    if let Some(r) = tokens.refresh_token() {
        updated.refresh_token = Some(r.secret().clone());
    }
    updated.expires_at_ms = tokens.expires_in().map(|d| now_ms() + d.as_millis() as i64);
    let token = updated.access_token.clone();
    credentials.servers.insert(key, updated);
    credentials.save()?;
    Ok(Some(token))
}

/// `lore logout --url URL`: revokes the stored grant and forgets it. Returns whether there was
/// one.
pub async fn logout(http: &dyn HttpClient, mcp_url: &str) -> anyhow::Result<bool> {
    let key = normalize(mcp_url);
    let mut credentials = Credentials::load()?;
    let Some(login) = credentials.servers.remove(&key) else {
        return Ok(false);
    };
    if let Some(endpoint) = &login.revocation_endpoint {
        // By hand rather than with oauth2's revoke_token, which refuses a plain-http endpoint
        // (a server on loopback has one).
        let (token, hint) = match &login.refresh_token {
            Some(r) => (r.as_str(), "refresh_token"),
            None => (login.access_token.as_str(), "access_token"),
        };
        let body = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("token", token)
            .append_pair("token_type_hint", hint)
            .append_pair("client_id", &login.client_id)
            .finish();
        let outcome = http
            .send(OutboundRequest {
                method: "POST".into(),
                url: endpoint.clone(),
                headers: vec![(
                    "content-type".into(),
                    "application/x-www-form-urlencoded".into(),
                )],
                body: body.into_bytes(),
                // A URL the operator configured (or the CLI's user named).
                reach: lore_base::outbound::Reach::Configured,
                share: lore_base::outbound::Share::Server,
                timeout_ms: 60_000,
            })
            .await;
        match outcome {
            Ok(r) if r.status == 200 => {}
            Ok(r) => eprintln!(
                "warning: the server refused the revocation (HTTP {}): {}",
                r.status,
                String::from_utf8_lossy(&r.body)
            ),
            Err(e) => eprintln!("warning: could not reach the revocation endpoint: {e}"),
        }
    }
    credentials.save()?;
    Ok(true)
}
