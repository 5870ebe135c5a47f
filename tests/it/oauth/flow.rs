//! The authorization server's happy paths: metadata, registration (RFC 7591 and client ID
//! metadata documents), sign-in, consent, code + PKCE, refresh rotation, revocation, and the
//! token page.

use base64::Engine;
use serde_json::json;

use super::harness::{AuthRequest, BASE, Harness, pkce, query};

const REDIRECT: &str = "http://127.0.0.1:9911/callback";

#[test]
fn authorization_server_metadata_describes_the_endpoints() {
    let h = Harness::new();
    let r = h.get("/.well-known/oauth-authorization-server");
    assert_eq!(r.status, 200);
    let doc = r.json();
    assert_eq!(doc["issuer"], BASE);
    assert_eq!(
        doc["authorization_endpoint"],
        format!("{BASE}/oauth/authorize")
    );
    assert_eq!(doc["token_endpoint"], format!("{BASE}/oauth/token"));
    assert_eq!(
        doc["registration_endpoint"],
        format!("{BASE}/oauth/register")
    );
    assert_eq!(doc["revocation_endpoint"], format!("{BASE}/oauth/revoke"));
    assert_eq!(doc["code_challenge_methods_supported"], json!(["S256"]));
    assert_eq!(doc["response_types_supported"], json!(["code"]));
    assert_eq!(doc["client_id_metadata_document_supported"], true);
    assert_eq!(doc["authorization_response_iss_parameter_supported"], true);
    assert_eq!(r.header("access-control-allow-origin"), "*");
}

#[test]
fn a_registered_public_client_signs_in_calls_tools_refreshes_and_revokes() {
    let h = Harness::new();
    h.set_owner_password();
    let client = h.register_public(REDIRECT);
    let (verifier, challenge) = pkce("one");
    let request = AuthRequest {
        client_id: &client,
        redirect_uri: Some(REDIRECT),
        challenge: &challenge,
        state: "st-1",
        scope: Some("mcp:read mcp:write"),
        resource: Some(&format!("{BASE}/mcp")),
    };
    let consent = h.to_consent(&request.path());
    assert!(consent.text.contains("Test Client"), "{}", consent.text);
    assert!(consent.text.contains("value=\"default\""));
    let back = h.decide(&consent, "default", &["mcp:read", "mcp:write"], true);
    assert_eq!(back.as_str().split('?').next(), Some(REDIRECT));
    let q = query(&back);
    assert_eq!(q["state"], "st-1");
    assert_eq!(q["iss"], BASE);
    let r = h.token(&[
        ("grant_type", "authorization_code"),
        ("code", &q["code"]),
        ("redirect_uri", REDIRECT),
        ("code_verifier", &verifier),
        ("client_id", &client),
        ("resource", &format!("{BASE}/mcp")),
    ]);
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.header("cache-control"), "no-store");
    let tokens = r.json();
    assert_eq!(tokens["token_type"], "Bearer");
    assert_eq!(tokens["scope"], "mcp:read mcp:write");
    assert_eq!(tokens["expires_in"], 3600);
    let access = tokens["access_token"].as_str().unwrap().to_string();
    let refresh = tokens["refresh_token"].as_str().unwrap().to_string();
    assert!(access.starts_with("lore_at_") && refresh.starts_with("lore_rt_"));

    let saved = h.call(
        &access,
        "/mcp",
        "save_memory",
        json!({"content": "OAuth works"}),
    );
    assert_eq!(saved.status, 200, "{}", saved.text);
    let listed = h.call(
        &access,
        "/mcp/default",
        "search_memory",
        json!({"query": "OAuth"}),
    );
    assert_eq!(listed.status, 200, "{}", listed.text);
    assert!(listed.text.contains("OAuth works"));

    // Refresh: new tokens; both the new and (until it expires) the old access token work.
    let r = h.token(&[
        ("grant_type", "refresh_token"),
        ("refresh_token", &refresh),
        ("client_id", &client),
    ]);
    assert_eq!(r.status, 200, "{}", r.text);
    let access2 = r.json()["access_token"].as_str().unwrap().to_string();
    let refresh2 = r.json()["refresh_token"].as_str().unwrap().to_string();
    assert_ne!(refresh2, refresh);
    assert_eq!(
        h.call(&access2, "/mcp", "search_memory", json!({"query": "x"}))
            .status,
        200
    );
    // A narrower scope on refresh.
    let r = h.token(&[
        ("grant_type", "refresh_token"),
        ("refresh_token", &refresh2),
        ("client_id", &client),
        ("scope", "mcp:read"),
    ]);
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["scope"], "mcp:read");
    let reader = r.json()["access_token"].as_str().unwrap().to_string();
    let refresh3 = r.json()["refresh_token"].as_str().unwrap().to_string();
    assert_eq!(
        h.call(&reader, "/mcp", "save_memory", json!({"content": "no"}))
            .status,
        403
    );

    // Revoking the refresh token ends the grant: every access token of it stops working.
    let r = h.post_form(
        "/oauth/revoke",
        &[
            ("token", &refresh3),
            ("token_type_hint", "refresh_token"),
            ("client_id", &client),
        ],
        &[],
    );
    assert_eq!(r.status, 200, "{}", r.text);
    for token in [&access, &access2, &reader] {
        let r = h.call(token, "/mcp", "search_memory", json!({"query": "x"}));
        assert_eq!(r.status, 401, "{}", r.text);
        assert!(r.header("www-authenticate").contains("invalid_token"));
    }
    let r = h.token(&[
        ("grant_type", "refresh_token"),
        ("refresh_token", &refresh3),
        ("client_id", &client),
    ]);
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"], "invalid_grant");
    // Unknown tokens are answered 200 (RFC 7009).
    let r = h.post_form(
        "/oauth/revoke",
        &[("token", "lore_at_nothing"), ("client_id", &client)],
        &[],
    );
    assert_eq!(r.status, 200);
}

#[test]
fn revoking_an_access_token_leaves_the_grant() {
    let h = Harness::new();
    h.set_owner_password();
    let (client, tokens) = h.authorized_client(REDIRECT, "two");
    let access = tokens["access_token"].as_str().unwrap();
    let r = h.post_form(
        "/oauth/revoke",
        &[("token", access), ("client_id", &client)],
        &[],
    );
    assert_eq!(r.status, 200);
    assert_eq!(
        h.call(access, "/mcp", "search_memory", json!({"query": "x"}))
            .status,
        401
    );
    let r = h.token(&[
        ("grant_type", "refresh_token"),
        ("refresh_token", tokens["refresh_token"].as_str().unwrap()),
        ("client_id", &client),
    ]);
    assert_eq!(r.status, 200, "{}", r.text);
}

#[test]
fn a_confidential_client_authenticates_with_basic_or_in_the_body() {
    let h = Harness::new();
    h.set_owner_password();
    let r = h.post_json(
        "/oauth/register",
        &json!({"client_name": "Server App", "redirect_uris": ["https://app.example/cb"]}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let reg = r.json();
    assert_eq!(reg["token_endpoint_auth_method"], "client_secret_basic");
    let id = reg["client_id"].as_str().unwrap().to_string();
    let secret = reg["client_secret"].as_str().unwrap().to_string();
    let (verifier, challenge) = pkce("conf");
    let code = h.approve(
        &AuthRequest {
            client_id: &id,
            redirect_uri: None,
            challenge: &challenge,
            state: "s",
            scope: Some("mcp:read"),
            resource: None,
        },
        "default",
        &["mcp:read"],
    );
    // Without the secret: invalid_client.
    let r = h.token(&[
        ("grant_type", "authorization_code"),
        ("code", &code),
        ("code_verifier", &verifier),
        ("client_id", &id),
    ]);
    assert_eq!(r.status, 401, "{}", r.text);
    assert_eq!(r.json()["error"], "invalid_client");
    let basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{id}:{secret}"))
    );
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs([
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("code_verifier", verifier.as_str()),
        ])
        .finish();
    let r = h.request(
        "POST",
        "/oauth/token",
        &[
            ("content-type", "application/x-www-form-urlencoded"),
            ("authorization", &basic),
        ],
        body.into_bytes(),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["scope"], "mcp:read");
    let refresh = r.json()["refresh_token"].as_str().unwrap().to_string();
    let r = h.token(&[
        ("grant_type", "refresh_token"),
        ("refresh_token", &refresh),
        ("client_id", &id),
        ("client_secret", &secret),
    ]);
    assert_eq!(r.status, 200, "{}", r.text);
}

#[test]
fn a_client_id_metadata_document_is_fetched_validated_and_cached() {
    let h = Harness::new();
    h.set_owner_password();
    let url = "https://app.example/oauth/client.json";
    h.http.serve_json(
        url,
        &json!({
            "client_id": url,
            "client_name": "Metadata App",
            "redirect_uris": ["http://127.0.0.1/callback"],
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
        }),
    );
    // A loopback redirect matches whatever port the app listens on (RFC 8252).
    let redirect = "http://127.0.0.1:50123/callback";
    let (verifier, challenge) = pkce("cimd");
    let request = AuthRequest {
        client_id: url,
        redirect_uri: Some(redirect),
        challenge: &challenge,
        state: "s",
        scope: None,
        resource: None,
    };
    let consent = h.to_consent(&request.path());
    assert!(consent.text.contains("Metadata App"));
    let back = h.decide(&consent, "default", &["mcp:read", "mcp:write"], true);
    assert!(back.as_str().starts_with(redirect), "{back}");
    let code = query(&back)["code"].clone();
    let r = h.token(&[
        ("grant_type", "authorization_code"),
        ("code", &code),
        ("redirect_uri", redirect),
        ("code_verifier", &verifier),
        ("client_id", url),
    ]);
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(h.http.count(url), 1, "the document is cached");
    h.advance(2 * 3_600_000);
    assert_eq!(h.get(&request.path()).status, 303);
    assert_eq!(h.http.count(url), 2, "and fetched again once stale");
}

#[test]
fn a_resource_for_one_org_pins_the_token_to_it() {
    let h = Harness::new();
    h.set_owner_password();
    futures_executor::block_on(lore_directory::admin::create_org(h.lore.ports(), "acme")).unwrap();
    let client = h.register_public(REDIRECT);
    let (verifier, challenge) = pkce("pin");
    let resource = format!("{BASE}/mcp/acme");
    let consent = h.to_consent(
        &AuthRequest {
            client_id: &client,
            redirect_uri: Some(REDIRECT),
            challenge: &challenge,
            state: "s",
            scope: None,
            resource: Some(&resource),
        }
        .path(),
    );
    assert!(consent.text.contains("value=\"acme\""));
    assert!(
        !consent.text.contains("value=\"default\""),
        "only the pinned org is offered"
    );
    let back = h.decide(&consent, "acme", &["mcp:read", "mcp:write"], true);
    let r = h.token(&[
        ("grant_type", "authorization_code"),
        ("code", &query(&back)["code"]),
        ("redirect_uri", REDIRECT),
        ("code_verifier", &verifier),
        ("client_id", &client),
        ("resource", &resource),
    ]);
    assert_eq!(r.status, 200, "{}", r.text);
    let access = r.json()["access_token"].as_str().unwrap().to_string();
    assert_eq!(
        h.call(&access, "/mcp/acme", "search_memory", json!({"query": "x"}))
            .status,
        200
    );
    assert_eq!(
        h.call(&access, "/mcp", "search_memory", json!({"query": "x"}))
            .status,
        401
    );
}

#[test]
fn denying_consent_sends_access_denied_back() {
    let h = Harness::new();
    h.set_owner_password();
    let client = h.register_public(REDIRECT);
    let (_, challenge) = pkce("deny");
    let consent = h.to_consent(
        &AuthRequest {
            client_id: &client,
            redirect_uri: Some(REDIRECT),
            challenge: &challenge,
            state: "st",
            scope: None,
            resource: None,
        }
        .path(),
    );
    let back = h.decide(&consent, "default", &[], false);
    let q = query(&back);
    assert_eq!(q["error"], "access_denied");
    assert_eq!(q["state"], "st");
    assert_eq!(q["iss"], BASE);
    assert!(!q.contains_key("code"));
}

#[test]
fn the_token_page_lists_and_revokes_grants() {
    let h = Harness::new();
    h.set_owner_password();
    let (_, tokens) = h.authorized_client(REDIRECT, "page");
    let access = tokens["access_token"].as_str().unwrap().to_string();
    let page = h.get("/oauth/tokens");
    assert_eq!(page.status, 200, "{}", page.text);
    assert!(page.text.contains("Test Client"));
    let grant = page.input("grant");
    let csrf = page.input("csrf");
    // A forged form (no CSRF token) changes nothing.
    let r = h.post_form(
        "/oauth/tokens/revoke",
        &[("grant", &grant)],
        &[("origin", BASE)],
    );
    assert_eq!(r.status, 403);
    assert_eq!(
        h.call(&access, "/mcp", "search_memory", json!({"query": "x"}))
            .status,
        200
    );
    let r = h.post_form(
        "/oauth/tokens/revoke",
        &[("grant", &grant), ("csrf", &csrf)],
        &[("origin", BASE)],
    );
    assert_eq!(r.status, 303, "{}", r.text);
    assert_eq!(
        h.call(&access, "/mcp", "search_memory", json!({"query": "x"}))
            .status,
        401
    );
    let page = h.get("/oauth/tokens?revoked=1");
    assert!(!page.text.contains("Test Client"));
    assert!(page.text.contains("Access revoked"));
}
