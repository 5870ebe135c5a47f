//! An in-process OAuth harness: a `Lore` on the in-memory store with a clock the test moves, a
//! stub of the HTTP port that serves client metadata documents, a cookie jar, and helpers that
//! walk the browser flow (authorize → sign in → consent → code) and the token endpoint.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use async_trait::async_trait;
use futures_executor::block_on;
use serde_json::{Value, json};

use lore_base::ports::{HttpClient, OutboundRequest, OutboundResponse, PortError, Ports};
use lore_base::storage::memory::MemoryStorage;
use lore_directory::admin::{self, InitOutcome};
use lore_front::{Config, Lore};
use lore_testing::ports::{SeqRandom, StepClock};

pub const BASE: &str = "http://127.0.0.1:8787";
pub use crate::common::START_MS;

/// A canned response: status, headers, body.
pub type Canned = (u16, Vec<(String, String)>, Vec<u8>);

/// Serves fixed responses by URL and records every request.
#[derive(Default)]
pub struct StubHttp {
    pub routes: RefCell<HashMap<String, Canned>>,
    pub requests: RefCell<Vec<OutboundRequest>>,
}

impl StubHttp {
    pub fn serve_json(&self, url: &str, body: &Value) {
        self.routes.borrow_mut().insert(
            url.to_string(),
            (
                200,
                vec![("content-type".into(), "application/json".into())],
                serde_json::to_vec(body).unwrap(),
            ),
        );
    }
    pub fn count(&self, url: &str) -> usize {
        self.requests
            .borrow()
            .iter()
            .filter(|r| r.url == url)
            .count()
    }
}

#[async_trait(?Send)]
impl HttpClient for StubHttp {
    async fn send(&self, request: OutboundRequest) -> Result<OutboundResponse, PortError> {
        self.requests.borrow_mut().push(request.clone());
        match self.routes.borrow().get(&request.url) {
            Some((status, headers, body)) => Ok(OutboundResponse {
                status: *status,
                headers: headers.clone(),
                body: body.clone(),
            }),
            None => Err(PortError(format!("connection refused: {}", request.url))),
        }
    }
}

pub struct Reply {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub text: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or(Value::Null)
    }
    pub fn header(&self, name: &str) -> String {
        self.headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default()
    }
    /// The `Location` of a redirect, parsed.
    pub fn location(&self) -> url::Url {
        let loc = self.header("location");
        url::Url::parse(&loc)
            .or_else(|_| url::Url::parse(BASE).unwrap().join(&loc))
            .unwrap_or_else(|e| panic!("{e}: location {loc:?} of {} {}", self.status, self.text))
    }
    /// The value of a hidden or text input in an HTML form.
    pub fn input(&self, name: &str) -> String {
        let marker = format!("name=\"{name}\" value=\"");
        let start = self
            .text
            .find(&marker)
            .unwrap_or_else(|| panic!("no input {name} in {}", self.text))
            + marker.len();
        let end = self.text[start..].find('"').unwrap() + start;
        self.text[start..end].replace("&amp;", "&")
    }
}

pub struct Harness {
    pub lore: Lore,
    pub owner_token: String,
    pub clock: Rc<StepClock>,
    pub http: Rc<StubHttp>,
    pub cookies: RefCell<HashMap<String, String>>,
}

pub const OWNER_PASSWORD: &str = "correct horse battery staple";

impl Harness {
    pub fn new() -> Self {
        let clock = Rc::new(StepClock::starting_at(START_MS));
        let http = Rc::new(StubHttp::default());
        let ports = Ports {
            storage: Rc::new(MemoryStorage::new()),
            clock: clock.clone(),
            random: Rc::new(SeqRandom::seeded(11)),
            http: Some(http.clone()),
            embedder: None,
            // As natively: verified credentials cached, so every revocation path is proven
            // against a warm cache.
            cache: Some(Rc::new(lore_base::cache::MemoryCache::new(clock.clone()))),
            background: None,
        };
        let lore = Lore::new(ports, Config::default());
        let owner_token = match block_on(admin::init(lore.ports(), "default")).unwrap() {
            InitOutcome::Created(t) => t.token,
            other => panic!("{other:?}"),
        };
        Self {
            lore,
            owner_token,
            clock,
            http,
            cookies: RefCell::new(HashMap::new()),
        }
    }

    /// Moves the clock forward.
    pub fn advance(&self, ms: i64) {
        self.clock.0.set(self.clock.0.get() + ms);
    }

    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Reply {
        let mut req = http::Request::builder()
            .method(method)
            .uri(path)
            .header("host", "127.0.0.1:8787");
        let jar: Vec<String> = self
            .cookies
            .borrow()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        if !jar.is_empty() {
            req = req.header("cookie", jar.join("; "));
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let response = block_on(self.lore.handle(req.body(body).unwrap()));
        for value in response.headers().get_all("set-cookie") {
            let text = value.to_str().unwrap();
            let pair = text.split(';').next().unwrap();
            let (k, v) = pair.split_once('=').unwrap();
            if v.is_empty() || text.contains("Max-Age=0") {
                self.cookies.borrow_mut().remove(k);
            } else {
                self.cookies.borrow_mut().insert(k.into(), v.into());
            }
        }
        Reply {
            status: response.status().as_u16(),
            headers: response.headers().clone(),
            text: String::from_utf8_lossy(response.body()).into_owned(),
        }
    }

    pub fn get(&self, path: &str) -> Reply {
        self.request("GET", path, &[], Vec::new())
    }

    pub fn post_form(&self, path: &str, form: &[(&str, &str)], headers: &[(&str, &str)]) -> Reply {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        let mut h = vec![("content-type", "application/x-www-form-urlencoded")];
        h.extend_from_slice(headers);
        self.request("POST", path, &h, body.into_bytes())
    }

    pub fn post_json(&self, path: &str, body: &Value) -> Reply {
        self.request(
            "POST",
            path,
            &[("content-type", "application/json")],
            serde_json::to_vec(body).unwrap(),
        )
    }

    pub fn post_json_as(&self, token: &str, path: &str, body: &Value) -> Reply {
        let auth = format!("Bearer {token}");
        self.request(
            "POST",
            path,
            &[
                ("content-type", "application/json"),
                ("authorization", auth.as_str()),
            ],
            serde_json::to_vec(body).unwrap(),
        )
    }

    /// A stateless (2026-07-28) `tools/call` on `path` with `token`.
    pub fn call(&self, token: &str, path: &str, tool: &str, args: Value) -> Reply {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": tool, "arguments": args, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}
        }}});
        let auth = format!("Bearer {token}");
        self.request(
            "POST",
            path,
            &[
                ("authorization", auth.as_str()),
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/call"),
                ("mcp-name", tool),
            ],
            serde_json::to_vec(&body).unwrap(),
        )
    }
}

/// A PKCE pair: (verifier, S256 challenge).
pub fn pkce(seed: &str) -> (String, String) {
    use base64::Engine;
    use sha2::Digest;
    let verifier = format!("{seed}-{}", "v".repeat(50));
    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(sha2::Sha256::digest(verifier.as_bytes()));
    (verifier, challenge)
}

/// Query parameters of a URL as a map (first value of each).
pub fn query(url: &url::Url) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for (k, v) in url.query_pairs() {
        out.entry(k.into_owned()).or_insert(v.into_owned());
    }
    out
}

/// What an authorization request asks for.
pub struct AuthRequest<'a> {
    pub client_id: &'a str,
    pub redirect_uri: Option<&'a str>,
    pub challenge: &'a str,
    pub state: &'a str,
    pub scope: Option<&'a str>,
    pub resource: Option<&'a str>,
}

impl<'a> AuthRequest<'a> {
    /// A request for `client_id` to `redirect_uri` with state `s`, no scope and no resource.
    pub fn plain(client_id: &'a str, redirect_uri: &'a str, challenge: &'a str) -> Self {
        Self {
            client_id,
            redirect_uri: Some(redirect_uri),
            challenge,
            state: "s",
            scope: None,
            resource: None,
        }
    }

    pub fn path(&self) -> String {
        let mut s = url::form_urlencoded::Serializer::new(String::new());
        s.append_pair("response_type", "code")
            .append_pair("client_id", self.client_id)
            .append_pair("code_challenge", self.challenge)
            .append_pair("code_challenge_method", "S256")
            .append_pair("state", self.state);
        if let Some(r) = self.redirect_uri {
            s.append_pair("redirect_uri", r);
        }
        if let Some(scope) = self.scope {
            s.append_pair("scope", scope);
        }
        if let Some(r) = self.resource {
            s.append_pair("resource", r);
        }
        format!("/oauth/authorize?{}", s.finish())
    }
}

impl Harness {
    /// GitHub and an OpenID Connect provider as upstream identity providers, their endpoints
    /// stubbed on the HTTP port (the GitHub user is Octocat, "Mona Lisa Octocat").
    pub fn with_providers(&mut self) {
        let vars = [
            ("LORE_GITHUB_CLIENT_ID", "gh-client"),
            ("LORE_GITHUB_CLIENT_SECRET", "gh-secret-value"),
            ("LORE_GITHUB_URL", "http://idp.test"),
            ("LORE_GITHUB_API_URL", "http://api.idp.test"),
            ("LORE_OIDC_CLIENT_ID", "oidc-client"),
            ("LORE_OIDC_AUTH_URL", "http://sso.test/authorize"),
            ("LORE_OIDC_TOKEN_URL", "http://sso.test/token"),
            ("LORE_OIDC_USERINFO_URL", "http://sso.test/userinfo"),
            ("LORE_OIDC_NAME", "Example SSO"),
        ];
        self.lore.config.upstream = lore_front::providers::from_vars(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        })
        .unwrap();
        self.http.serve_json(
            "http://idp.test/login/oauth/access_token",
            &json!({"access_token": "gho_upstream_token", "token_type": "bearer", "scope": "read:user"}),
        );
        self.http.serve_json(
            "http://api.idp.test/user",
            &json!({"id": 4242, "login": "Octocat", "name": "Mona Lisa Octocat", "email": null}),
        );
        self.http.serve_json(
            "http://sso.test/token",
            &json!({"access_token": "sso_upstream_token", "token_type": "Bearer", "expires_in": 300}),
        );
        self.http.serve_json(
            "http://sso.test/userinfo",
            &json!({"sub": "ann-1", "email": "Ann@Example.com", "email_verified": true, "name": "Ann Example"}),
        );
    }

    /// Gives the local owner a sign-in password.
    pub fn set_owner_password(&self) {
        block_on(lore_directory::admin::set_owner_password(
            self.lore.ports(),
            OWNER_PASSWORD,
        ))
        .unwrap();
    }

    /// Registers a public client (RFC 7591) and returns its id.
    pub fn register_public(&self, redirect_uri: &str) -> String {
        let r = self.post_json(
            "/oauth/register",
            &json!({
                "client_name": "Test Client",
                "redirect_uris": [redirect_uri],
                "token_endpoint_auth_method": "none",
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
            }),
        );
        assert_eq!(r.status, 201, "{}", r.text);
        r.json()["client_id"].as_str().unwrap().to_string()
    }

    /// Follows the authorization request through sign-in (if needed) to the consent page.
    pub fn to_consent(&self, authorize_path: &str) -> Reply {
        let r = self.get(authorize_path);
        assert_eq!(r.status, 303, "{}", r.text);
        let next = r.location();
        let mut page = self.get(&format!("{}?{}", next.path(), next.query().unwrap_or("")));
        if next.path() == "/oauth/signin" {
            assert_eq!(page.status, 200, "{}", page.text);
            let csrf = page.input("csrf");
            let then = page.input("then");
            let r = self.post_form(
                "/oauth/signin",
                &[
                    ("csrf", &csrf),
                    ("then", &then),
                    ("password", OWNER_PASSWORD),
                ],
                &[("origin", BASE)],
            );
            assert_eq!(r.status, 303, "{}", r.text);
            let next = r.location();
            page = self.get(&format!("{}?{}", next.path(), next.query().unwrap_or("")));
        }
        assert_eq!(page.status, 200, "{}", page.text);
        page
    }

    /// Approves (or denies) on the consent page; returns the redirect to the client.
    pub fn decide(&self, consent: &Reply, org: &str, scopes: &[&str], approve: bool) -> url::Url {
        let csrf = consent.input("csrf");
        let request = consent.input("request");
        let mut form = vec![
            ("csrf", csrf.as_str()),
            ("request", request.as_str()),
            ("org", org),
            ("decision", if approve { "approve" } else { "deny" }),
        ];
        for s in scopes {
            form.push(("scope", s));
        }
        let r = self.post_form("/oauth/consent", &form, &[("origin", BASE)]);
        assert_eq!(r.status, 303, "{}", r.text);
        r.location()
    }

    /// The code of a whole approval for `client_id`.
    pub fn approve(&self, request: &AuthRequest, org: &str, scopes: &[&str]) -> String {
        let consent = self.to_consent(&request.path());
        let back = self.decide(&consent, org, scopes, true);
        let q = query(&back);
        assert_eq!(q.get("state").map(String::as_str), Some(request.state));
        assert_eq!(q.get("iss").map(String::as_str), Some(BASE));
        q.get("code")
            .cloned()
            .unwrap_or_else(|| panic!("no code in {back}"))
    }

    pub fn token(&self, form: &[(&str, &str)]) -> Reply {
        self.post_form("/oauth/token", form, &[])
    }

    /// A public client registered for `redirect`, allowed by the owner into org default with
    /// read and write (PKCE from `seed`), and its code exchanged: the client id and the token
    /// response.
    pub fn authorized_client(&self, redirect: &str, seed: &str) -> (String, Value) {
        let client = self.register_public(redirect);
        let (verifier, challenge) = pkce(seed);
        let code = self.approve(
            &AuthRequest::plain(&client, redirect, &challenge),
            "default",
            &["mcp:read", "mcp:write"],
        );
        let r = self.token(&[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", redirect),
            ("code_verifier", &verifier),
            ("client_id", &client),
        ]);
        assert_eq!(r.status, 200, "{}", r.text);
        (client, r.json())
    }
}
