//! Sign-in through an upstream identity provider (the provider's endpoints stubbed on the HTTP
//! port), and invites: a first sign-in joins no org; an invite by identity adds the person.

use serde_json::json;

use super::harness::{AuthRequest, BASE, Harness, pkce, query};

const REDIRECT: &str = "http://127.0.0.1:9911/callback";

/// Starts an authorization and signs in with `provider`; returns the consent page.
fn sign_in_upstream(
    h: &Harness,
    provider: &str,
    client: &str,
    challenge: &str,
) -> super::harness::Reply {
    let r = h.get(
        &AuthRequest {
            client_id: client,
            redirect_uri: Some(REDIRECT),
            challenge,
            state: "s",
            scope: None,
            resource: None,
        }
        .path(),
    );
    let signin = h.get(&format!("/oauth/signin?{}", r.location().query().unwrap()));
    assert!(
        signin.text.contains("Continue with GitHub"),
        "{}",
        signin.text
    );
    assert!(signin.text.contains("Continue with Example SSO"));
    let r = h.post_form(
        "/oauth/upstream/start",
        &[
            ("csrf", &signin.input("csrf")),
            ("then", &signin.input("then")),
            ("provider", provider),
        ],
        &[("origin", BASE)],
    );
    assert_eq!(r.status, 303, "{}", r.text);
    let to_idp = r.location();
    let q = query(&to_idp);
    assert_eq!(q["redirect_uri"], format!("{BASE}/oauth/upstream/callback"));
    assert_eq!(q["code_challenge_method"], "S256");
    // A callback with another state is refused.
    let bad = h.get("/oauth/upstream/callback?code=c&state=forged");
    assert_eq!(bad.status, 403);
    // The provider sends the browser back.
    let back = h.get(&format!(
        "/oauth/upstream/callback?code=upstream-code&state={}",
        url::form_urlencoded::byte_serialize(q["state"].as_bytes()).collect::<String>()
    ));
    assert_eq!(back.status, 303, "{}", back.text);
    let next = back.location();
    assert_eq!(next.path(), "/oauth/consent");
    h.get(&format!("/oauth/consent?{}", next.query().unwrap()))
}

#[test]
fn a_github_user_joins_no_org_until_invited() {
    let mut h = Harness::new();
    h.with_providers();
    let client = h.register_public(REDIRECT);
    let (verifier, challenge) = pkce("gh");
    let consent = sign_in_upstream(&h, "github", &client, &challenge);
    assert_eq!(consent.status, 200);
    assert!(consent.text.contains("Mona Lisa Octocat"));
    assert!(
        consent.text.contains("not a member of any org"),
        "{}",
        consent.text
    );
    assert!(!consent.text.contains("value=\"approve\""));
    // The code was traded with the client secret and the PKCE verifier.
    let token_call = h
        .http
        .requests
        .borrow()
        .iter()
        .find(|r| r.url == "http://idp.test/login/oauth/access_token")
        .cloned()
        .unwrap();
    let body = String::from_utf8(token_call.body.clone()).unwrap();
    assert!(
        body.contains("code=upstream-code") && body.contains("code_verifier="),
        "{body}"
    );
    assert!(
        token_call
            .headers
            .iter()
            .any(|(k, v)| k.eq_ignore_ascii_case("authorization") && v.starts_with("Basic "))
    );

    // An admin invites github:octocat: they signed in before, so they are added now.
    let r = h.post_json_as(
        &h.owner_token,
        "/api/default/members.invite",
        &json!({"identity": "github:OctoCat", "role": "member"}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["status"], "added");
    let principal = r.json()["principal_id"].as_str().unwrap().to_string();

    // Connecting again: the org is offered, and the token acts as the new member.
    let consent = h.to_consent(&AuthRequest::plain(&client, REDIRECT, &challenge).path());
    assert!(
        consent.text.contains("value=\"default\""),
        "{}",
        consent.text
    );
    assert!(consent.text.contains("your role: member"));
    let back = h.decide(&consent, "default", &["mcp:read", "mcp:write"], true);
    let r = h.token(&[
        ("grant_type", "authorization_code"),
        ("code", &query(&back)["code"]),
        ("redirect_uri", REDIRECT),
        ("code_verifier", &verifier),
        ("client_id", &client),
    ]);
    assert_eq!(r.status, 200, "{}", r.text);
    let access = r.json()["access_token"].as_str().unwrap().to_string();
    let saved = h.call(
        &access,
        "/mcp",
        "save_memory",
        json!({"content": "Mona was here"}),
    );
    assert_eq!(saved.status, 200);
    assert!(saved.text.contains("\"isError\":false"), "{}", saved.text);
    let found = h.call(
        &h.owner_token,
        "/mcp",
        "search_memory",
        json!({"query": "Mona"}),
    );
    assert!(
        found.text.contains(&principal),
        "authored by the new member: {}",
        found.text
    );
}

#[test]
fn a_pending_invite_is_accepted_at_the_first_oidc_sign_in() {
    let mut h = Harness::new();
    h.with_providers();
    let client = h.register_public(REDIRECT);
    let r = h.post_json_as(
        &h.owner_token,
        "/api/default/members.invite",
        &json!({"identity": "email:ann@example.com", "role": "viewer"}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["status"], "pending");
    let listed = h.post_json_as(&h.owner_token, "/api/default/members.invites", &json!({}));
    assert!(
        listed.text.contains("email:ann@example.com"),
        "{}",
        listed.text
    );
    // Bad identities and roles are refused.
    for bad in [
        json!({"identity": "octocat"}),
        json!({"identity": "email:nope"}),
        json!({"identity": "github:a", "role": "king"}),
    ] {
        let r = h.post_json_as(&h.owner_token, "/api/default/members.invite", &bad);
        assert_eq!(r.status, 400, "{bad}: {}", r.text);
    }
    let (_, challenge) = pkce("oidc");
    let consent = sign_in_upstream(&h, "oidc", &client, &challenge);
    assert!(consent.text.contains("Ann Example"));
    assert!(
        consent.text.contains("your role: viewer"),
        "{}",
        consent.text
    );
    let listed = h.post_json_as(&h.owner_token, "/api/default/members.invites", &json!({}));
    assert_eq!(listed.json(), json!([]), "the invite was used");
}
