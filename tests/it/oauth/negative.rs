//! The refusals: every way a token, code, client or form can be wrong gets the right status and
//! RFC 6749 error, and nothing secret reaches the log. Each test runs under a subscriber that
//! captures every log line (TRACE and up) and is checked against every secret it saw.

use std::io::Write;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::harness::{AuthRequest, BASE, Harness, OWNER_PASSWORD, Reply, pkce, query};

const REDIRECT: &str = "http://127.0.0.1:9911/callback";

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs `body` with the log captured; fails if any secret it reports shows up in the log.
fn logged(body: impl FnOnce(&mut Vec<String>)) {
    let capture = Capture::default();
    let writer = capture.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let mut secrets = vec![OWNER_PASSWORD.to_string()];
    tracing::subscriber::with_default(subscriber, || body(&mut secrets));
    let log = String::from_utf8(capture.0.lock().unwrap().clone()).unwrap();
    assert!(!log.is_empty(), "the refusals are logged");
    for secret in secrets.iter().filter(|s| s.len() >= 8) {
        assert!(
            !log.contains(secret.as_str()),
            "the log shows a secret: {secret}\n{log}"
        );
    }
}

fn error_of(r: &Reply) -> (u16, String) {
    (
        r.status,
        r.json()["error"].as_str().unwrap_or("").to_string(),
    )
}

/// A signed-in harness with a registered public client.
fn setup() -> (Harness, String) {
    let h = Harness::new();
    h.set_owner_password();
    let client = h.register_public(REDIRECT);
    (h, client)
}

/// A full approval and code exchange; returns the token response.
fn tokens(
    h: &Harness,
    client: &str,
    seed: &str,
    scope: Option<&str>,
    resource: Option<&str>,
    org: &str,
) -> Value {
    let (verifier, challenge) = pkce(seed);
    let scopes: Vec<&str> = match scope {
        Some("mcp:read") => vec!["mcp:read"],
        _ => vec!["mcp:read", "mcp:write"],
    };
    let code = h.approve(
        &AuthRequest {
            client_id: client,
            redirect_uri: Some(REDIRECT),
            challenge: &challenge,
            state: "s",
            scope,
            resource,
        },
        org,
        &scopes,
    );
    let mut form = vec![
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", REDIRECT),
        ("code_verifier", verifier.as_str()),
        ("client_id", client),
    ];
    if let Some(r) = resource {
        form.push(("resource", r));
    }
    let r = h.token(&form);
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()
}

fn text(v: &Value, key: &str) -> String {
    v[key].as_str().unwrap().to_string()
}

#[test]
fn wrong_audience_is_refused_at_every_step() {
    logged(|secrets| {
        let (h, client) = setup();
        futures_executor::block_on(lore_directory::admin::create_org(h.lore.ports(), "acme"))
            .unwrap();
        let acme = format!("{BASE}/mcp/acme");
        let t = tokens(&h, &client, "aud", None, Some(&acme), "acme");
        let access = text(&t, "access_token");
        secrets.push(access.clone());
        secrets.push(text(&t, "refresh_token"));
        // Issued for /mcp/acme: refused at /mcp/default and /mcp.
        for path in ["/mcp/default", "/mcp"] {
            let r = h.call(&access, path, "search_memory", json!({"query": "x"}));
            assert_eq!(r.status, 401, "{path}");
            assert!(
                r.header("www-authenticate")
                    .contains("error=\"invalid_token\"")
            );
        }
        // Another server's resource cannot even be asked for.
        let (_, challenge) = pkce("aud2");
        let r = h.get(
            &AuthRequest {
                client_id: &client,
                redirect_uri: Some(REDIRECT),
                challenge: &challenge,
                state: "s",
                scope: None,
                resource: Some("https://evil.example/mcp"),
            }
            .path(),
        );
        assert_eq!(r.status, 303);
        assert_eq!(query(&r.location())["error"], "invalid_target");
        // Nor swapped at the token endpoint.
        let r = h.token(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", &text(&t, "refresh_token")),
            ("client_id", &client),
            ("resource", &format!("{BASE}/mcp/default")),
        ]);
        assert_eq!(error_of(&r), (400, "invalid_target".into()));
    });
}

#[test]
fn an_expired_access_token_is_refused() {
    logged(|secrets| {
        let (h, client) = setup();
        let t = tokens(&h, &client, "exp", None, None, "default");
        let access = text(&t, "access_token");
        secrets.push(access.clone());
        assert_eq!(
            h.call(&access, "/mcp", "search_memory", json!({"query": "x"}))
                .status,
            200
        );
        h.advance(3_600_000);
        let r = h.call(&access, "/mcp", "search_memory", json!({"query": "x"}));
        assert_eq!(r.status, 401);
        assert!(r.header("www-authenticate").contains("invalid_token"));
        assert!(r.text.contains("expired"), "{}", r.text);
    });
}

#[test]
fn pkce_is_required_and_must_match() {
    logged(|secrets| {
        let (h, client) = setup();
        let (_, challenge) = pkce("pkce");
        let code = h.approve(
            &AuthRequest::plain(&client, REDIRECT, &challenge),
            "default",
            &["mcp:read", "mcp:write"],
        );
        secrets.push(code.clone());
        let (wrong, _) = pkce("another");
        let base = [
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("redirect_uri", REDIRECT),
            ("client_id", client.as_str()),
        ];
        let mut form = base.to_vec();
        form.push(("code_verifier", &wrong));
        assert_eq!(error_of(&h.token(&form)), (400, "invalid_grant".into()));
        assert_eq!(error_of(&h.token(&base)), (400, "invalid_request".into()));
        // An authorization request without a challenge, or with plain, goes back as an error.
        for (challenge, method) in [(None, None), (Some(challenge.as_str()), Some("plain"))] {
            let mut path = format!(
                "/oauth/authorize?response_type=code&client_id={client}&redirect_uri={}&state=z",
                url::form_urlencoded::byte_serialize(REDIRECT.as_bytes()).collect::<String>()
            );
            if let Some(c) = challenge {
                path.push_str(&format!("&code_challenge={c}"));
            }
            if let Some(m) = method {
                path.push_str(&format!("&code_challenge_method={m}"));
            }
            let r = h.get(&path);
            assert_eq!(r.status, 303, "{}", r.text);
            let q = query(&r.location());
            assert_eq!(q["error"], "invalid_request", "{q:?}");
            assert_eq!(q["state"], "z");
        }
    });
}

#[test]
fn redirect_uris_must_be_registered_and_repeated() {
    logged(|secrets| {
        let (h, client) = setup();
        let (verifier, challenge) = pkce("redir");
        // Unregistered redirect: shown, never redirected.
        for redirect in [
            "https://evil.example/callback",
            "http://127.0.0.1:9911/callback/other",
            "http://localhost:9911/callback",
        ] {
            let r = h.get(&AuthRequest::plain(&client, redirect, &challenge).path());
            assert_eq!(r.status, 400, "{redirect}");
            assert!(r.header("location").is_empty());
            assert!(
                r.text.contains("not one this application registered"),
                "{}",
                r.text
            );
        }
        let code = h.approve(
            &AuthRequest::plain(&client, REDIRECT, &challenge),
            "default",
            &["mcp:read"],
        );
        secrets.push(code.clone());
        let r = h.token(&[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", "http://127.0.0.1:9912/callback"),
            ("code_verifier", &verifier),
            ("client_id", &client),
        ]);
        assert_eq!(error_of(&r), (400, "invalid_grant".into()));
        let r = h.token(&[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("code_verifier", &verifier),
            ("client_id", &client),
        ]);
        assert_eq!(error_of(&r), (400, "invalid_request".into()));
        // Registration refuses redirect URIs that could leak a code.
        for bad in [
            "http://app.example/cb",
            "https://app.example/cb#frag",
            "javascript:alert(1)",
        ] {
            let r = h.post_json("/oauth/register", &json!({"redirect_uris": [bad]}));
            assert_eq!(error_of(&r), (400, "invalid_redirect_uri".into()), "{bad}");
        }
    });
}

#[test]
fn unregistered_clients_are_refused() {
    logged(|_| {
        let (h, _) = setup();
        let (verifier, challenge) = pkce("unreg");
        for client in [
            "dcr_01nosuchclient",
            "not-a-client",
            "https://missing.example/client.json",
        ] {
            let r = h.get(
                &AuthRequest {
                    client_id: client,
                    redirect_uri: Some(REDIRECT),
                    challenge: &challenge,
                    state: "s",
                    scope: None,
                    resource: None,
                }
                .path(),
            );
            assert_eq!(r.status, 400, "{client}: {}", r.text);
            assert!(r.header("location").is_empty());
            let r = h.token(&[
                ("grant_type", "authorization_code"),
                ("code", "whatever"),
                ("code_verifier", &verifier),
                ("client_id", client),
            ]);
            assert_eq!(error_of(&r), (401, "invalid_client".into()), "{client}");
        }
        // A metadata document that names another client_id is not that client.
        let url = "https://app.example/c.json";
        h.http.serve_json(
            url,
            &json!({"client_id": "https://other.example/c.json", "redirect_uris": [REDIRECT]}),
        );
        let r = h.get(
            &AuthRequest {
                client_id: url,
                redirect_uri: Some(REDIRECT),
                challenge: &challenge,
                state: "s",
                scope: None,
                resource: None,
            }
            .path(),
        );
        assert_eq!(r.status, 400);
        assert!(r.text.contains("names another client_id"), "{}", r.text);
    });
}

#[test]
fn a_replayed_code_is_refused_and_revokes_what_it_issued() {
    logged(|secrets| {
        let (h, client) = setup();
        let (verifier, challenge) = pkce("replay");
        let code = h.approve(
            &AuthRequest::plain(&client, REDIRECT, &challenge),
            "default",
            &["mcp:read", "mcp:write"],
        );
        secrets.push(code.clone());
        let form = [
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("redirect_uri", REDIRECT),
            ("code_verifier", verifier.as_str()),
            ("client_id", client.as_str()),
        ];
        let first = h.token(&form);
        assert_eq!(first.status, 200);
        let access = text(&first.json(), "access_token");
        secrets.push(access.clone());
        secrets.push(text(&first.json(), "refresh_token"));
        assert_eq!(
            h.call(&access, "/mcp", "search_memory", json!({"query": "x"}))
                .status,
            200
        );
        let again = h.token(&form);
        assert_eq!(error_of(&again), (400, "invalid_grant".into()));
        assert_eq!(
            h.call(&access, "/mcp", "search_memory", json!({"query": "x"}))
                .status,
            401
        );
        // An expired code is refused too.
        let (verifier, challenge) = pkce("late");
        let code = h.approve(
            &AuthRequest::plain(&client, REDIRECT, &challenge),
            "default",
            &["mcp:read"],
        );
        h.advance(10 * 60_000);
        let r = h.token(&[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", REDIRECT),
            ("code_verifier", &verifier),
            ("client_id", &client),
        ]);
        assert_eq!(error_of(&r), (400, "invalid_grant".into()));
    });
}

#[test]
fn a_reused_refresh_token_revokes_the_whole_grant() {
    logged(|secrets| {
        let (h, client) = setup();
        let t = tokens(&h, &client, "reuse", None, None, "default");
        let old = text(&t, "refresh_token");
        secrets.push(old.clone());
        let r = h.token(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", &old),
            ("client_id", &client),
        ]);
        assert_eq!(r.status, 200);
        let newest_access = text(&r.json(), "access_token");
        let newest_refresh = text(&r.json(), "refresh_token");
        secrets.push(newest_access.clone());
        secrets.push(newest_refresh.clone());
        // The old one again: refused, and the family is gone.
        let r = h.token(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", &old),
            ("client_id", &client),
        ]);
        assert_eq!(error_of(&r), (400, "invalid_grant".into()));
        assert_eq!(
            h.call(
                &newest_access,
                "/mcp",
                "search_memory",
                json!({"query": "x"})
            )
            .status,
            401
        );
        let r = h.token(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", &newest_refresh),
            ("client_id", &client),
        ]);
        assert_eq!(error_of(&r), (400, "invalid_grant".into()));
        // A refresh token is bound to its client.
        let other = h.register_public(REDIRECT);
        let t = tokens(&h, &client, "bound", None, None, "default");
        let r = h.token(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", &text(&t, "refresh_token")),
            ("client_id", &other),
        ]);
        assert_eq!(error_of(&r), (400, "invalid_grant".into()));
    });
}

#[test]
fn a_read_token_cannot_write() {
    logged(|secrets| {
        let (h, client) = setup();
        let t = tokens(&h, &client, "read", Some("mcp:read"), None, "default");
        let access = text(&t, "access_token");
        secrets.push(access.clone());
        assert_eq!(t["scope"], "mcp:read");
        let r = h.call(&access, "/mcp", "save_memory", json!({"content": "nope"}));
        assert_eq!(r.status, 403);
        let challenge = r.header("www-authenticate");
        assert!(
            challenge.contains("error=\"insufficient_scope\""),
            "{challenge}"
        );
        assert!(
            challenge.contains("scope=\"mcp:read mcp:write\""),
            "{challenge}"
        );
        // Nor widen itself on refresh.
        let r = h.token(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", &text(&t, "refresh_token")),
            ("client_id", &client),
            ("scope", "mcp:read mcp:write"),
        ]);
        assert_eq!(error_of(&r), (400, "invalid_scope".into()));
    });
}

#[test]
fn a_token_for_one_org_is_refused_on_another_orgs_path() {
    logged(|secrets| {
        let (h, client) = setup();
        futures_executor::block_on(lore_directory::admin::create_org(h.lore.ports(), "acme"))
            .unwrap();
        let t = tokens(&h, &client, "org", None, None, "default");
        let access = text(&t, "access_token");
        secrets.push(access.clone());
        assert_eq!(
            h.call(
                &access,
                "/mcp/default",
                "search_memory",
                json!({"query": "x"})
            )
            .status,
            200
        );
        let r = h.call(&access, "/mcp/acme", "search_memory", json!({"query": "x"}));
        assert_eq!(r.status, 403, "{}", r.text);
        assert!(r.text.contains("not valid for org acme"), "{}", r.text);
    });
}

#[test]
fn forms_without_the_sessions_csrf_token_or_from_another_origin_are_refused() {
    logged(|secrets| {
        let (h, client) = setup();
        let (_, challenge) = pkce("csrf");
        let consent = h.to_consent(&AuthRequest::plain(&client, REDIRECT, &challenge).path());
        let csrf = consent.input("csrf");
        let request = consent.input("request");
        secrets.push(csrf.clone());
        for (form_csrf, origin) in [
            ("", BASE),
            ("forged", BASE),
            (csrf.as_str(), "https://evil.example"),
        ] {
            let r = h.post_form(
                "/oauth/consent",
                &[
                    ("csrf", form_csrf),
                    ("request", &request),
                    ("org", "default"),
                    ("decision", "approve"),
                    ("scope", "mcp:read"),
                ],
                &[("origin", origin)],
            );
            assert_eq!(r.status, 403, "{form_csrf} {origin}");
            assert!(r.header("location").is_empty());
        }
        for (name, value) in h.cookies.borrow().iter() {
            secrets.push(format!("{name}={value}"));
        }
        // The right form still works afterwards.
        let back = h.decide(&consent, "default", &["mcp:read"], true);
        assert!(query(&back).contains_key("code"));
    });
}

#[test]
fn a_wrong_owner_password_is_refused() {
    logged(|secrets| {
        let (h, client) = setup();
        let (_, challenge) = pkce("pw");
        let r = h.get(&AuthRequest::plain(&client, REDIRECT, &challenge).path());
        let signin = h.get(&format!("/oauth/signin?{}", r.location().query().unwrap()));
        let wrong = "not the owner password at all";
        secrets.push(wrong.into());
        let r = h.post_form(
            "/oauth/signin",
            &[
                ("csrf", &signin.input("csrf")),
                ("then", &signin.input("then")),
                ("password", wrong),
            ],
            &[("origin", BASE)],
        );
        assert_eq!(r.status, 401);
        assert!(r.text.contains("That password is not right"));
        assert!(h.get("/oauth/tokens").status == 303, "still signed out");
    });
}

#[test]
fn malformed_token_requests_get_rfc_6749_errors() {
    logged(|_| {
        let (h, client) = setup();
        let r = h.token(&[("grant_type", "password"), ("client_id", &client)]);
        assert_eq!(error_of(&r), (400, "unsupported_grant_type".into()));
        let r = h.token(&[("grant_type", "client_credentials"), ("client_id", &client)]);
        assert_eq!(error_of(&r), (400, "unsupported_grant_type".into()));
        let r = h.token(&[("client_id", &client)]);
        assert_eq!(error_of(&r), (400, "invalid_request".into()));
        let r = h.token(&[
            ("grant_type", "authorization_code"),
            ("grant_type", "authorization_code"),
            ("client_id", &client),
        ]);
        assert_eq!(error_of(&r), (400, "invalid_request".into()));
        let r = h.post_json("/oauth/token", &json!({"grant_type": "authorization_code"}));
        assert_eq!(error_of(&r), (400, "invalid_request".into()));
        let r = h.token(&[
            ("grant_type", "authorization_code"),
            ("code", "nope"),
            ("code_verifier", "x"),
        ]);
        assert_eq!(error_of(&r), (401, "invalid_client".into()));
        let r = h.token(&[
            ("grant_type", "authorization_code"),
            ("code", "nope"),
            ("client_id", &client),
            ("code_verifier", &pkce("x").0),
        ]);
        assert_eq!(error_of(&r), (400, "invalid_grant".into()));
        // A public client presenting a secret is not that client.
        let r = h.token(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", "lore_rt_x"),
            ("client_id", &client),
            ("client_secret", "guess"),
        ]);
        assert_eq!(error_of(&r), (401, "invalid_client".into()));
        // Unknown scopes only: invalid_scope back to the client.
        let (_, challenge) = pkce("scope");
        let r = h.get(
            &AuthRequest {
                client_id: &client,
                redirect_uri: Some(REDIRECT),
                challenge: &challenge,
                state: "s",
                scope: Some("admin:everything"),
                resource: None,
            }
            .path(),
        );
        assert_eq!(query(&r.location())["error"], "invalid_scope");
        let r = h.get(&format!(
            "/oauth/authorize?response_type=token&client_id={client}&redirect_uri={}&code_challenge={challenge}&code_challenge_method=S256",
            url::form_urlencoded::byte_serialize(REDIRECT.as_bytes()).collect::<String>()
        ));
        assert_eq!(query(&r.location())["error"], "unsupported_response_type");
    });
}
