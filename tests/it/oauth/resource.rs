//! The resource server: protected resource metadata, 401/403 challenges, audience binding.

use serde_json::json;

use lore_base::keys;
use lore_base::model::{Scopes, TokenRecord};

use super::harness::{BASE, Harness};

#[test]
fn protected_resource_metadata_for_mcp_and_org_paths() {
    let h = Harness::new();
    for (path, resource) in [
        (
            "/.well-known/oauth-protected-resource",
            format!("{BASE}/mcp"),
        ),
        (
            "/.well-known/oauth-protected-resource/mcp",
            format!("{BASE}/mcp"),
        ),
        (
            "/.well-known/oauth-protected-resource/mcp/acme",
            format!("{BASE}/mcp/acme"),
        ),
    ] {
        let r = h.get(path);
        assert_eq!(r.status, 200, "{path}: {}", r.text);
        assert_eq!(r.header("content-type"), "application/json");
        let doc = r.json();
        assert_eq!(doc["resource"], json!(resource), "{path}");
        assert_eq!(doc["authorization_servers"], json!([BASE]));
        assert_eq!(doc["scopes_supported"], json!(["mcp:read", "mcp:write"]));
        assert_eq!(doc["bearer_methods_supported"], json!(["header"]));
    }
    assert_eq!(
        h.get("/.well-known/oauth-protected-resource/api").status,
        404
    );
    assert_eq!(
        h.get("/.well-known/oauth-protected-resource/mcp/Not%20An%20Org")
            .status,
        404
    );
}

#[test]
fn the_issuer_follows_the_configured_public_url() {
    let mut h = Harness::new();
    h.lore.config.public_url = Some("https://lore.example.com".into());
    let doc = h.get("/.well-known/oauth-authorization-server").json();
    assert_eq!(doc["issuer"], "https://lore.example.com");
    assert_eq!(
        doc["token_endpoint"],
        "https://lore.example.com/oauth/token"
    );
    let prm = h.get("/.well-known/oauth-protected-resource/mcp").json();
    assert_eq!(prm["resource"], "https://lore.example.com/mcp");
}

#[test]
fn a_request_without_a_token_gets_a_challenge_that_points_at_the_metadata() {
    let h = Harness::new();
    for (path, metadata) in [
        (
            "/mcp",
            format!("{BASE}/.well-known/oauth-protected-resource/mcp"),
        ),
        (
            "/mcp/default",
            format!("{BASE}/.well-known/oauth-protected-resource/mcp/default"),
        ),
    ] {
        let r = h.request(
            "POST",
            path,
            &[
                ("content-type", "application/json"),
                ("accept", "application/json"),
            ],
            br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#.to_vec(),
        );
        assert_eq!(r.status, 401);
        let challenge = r.header("www-authenticate");
        assert!(challenge.starts_with("Bearer "), "{challenge}");
        assert!(
            challenge.contains(&format!("resource_metadata=\"{metadata}\"")),
            "{challenge}"
        );
        assert!(
            challenge.contains("scope=\"mcp:read mcp:write\""),
            "{challenge}"
        );
        assert!(
            !challenge.contains("error="),
            "no error without a token: {challenge}"
        );
    }
}

#[test]
fn a_token_in_the_query_string_is_ignored() {
    let h = Harness::new();
    let path = format!("/mcp?access_token={}", h.owner_token);
    let r = h.request(
        "POST",
        &path,
        &[
            ("content-type", "application/json"),
            ("accept", "application/json"),
        ],
        br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#.to_vec(),
    );
    assert_eq!(r.status, 401);
}

#[test]
fn a_read_only_token_writing_gets_403_insufficient_scope_with_the_scopes_needed() {
    let h = Harness::new();
    let reader = block_on_token(&h, "mcp:read");
    let r = h.call(&reader, "/mcp", "save_memory", json!({"content": "nope"}));
    assert_eq!(r.status, 403, "{}", r.text);
    let challenge = r.header("www-authenticate");
    assert!(
        challenge.contains("error=\"insufficient_scope\""),
        "{challenge}"
    );
    assert!(
        challenge.contains("scope=\"mcp:read mcp:write\""),
        "{challenge}"
    );
    assert!(
        challenge.contains(&format!(
            "resource_metadata=\"{BASE}/.well-known/oauth-protected-resource/mcp\""
        )),
        "{challenge}"
    );
}

fn block_on_token(h: &Harness, scopes: &str) -> String {
    futures_executor::block_on(lore_directory::admin::create_token(
        h.lore.ports(),
        lore_directory::admin::TokenRequest {
            org: "default".into(),
            role: None,
            scopes: Scopes::parse(scopes).unwrap(),
            principal: None,
            name: None,
            expires_at_ms: None,
        },
    ))
    .unwrap()
    .token
}

/// Stores an access token bound to `audience`, as the token endpoint would.
fn token_for(h: &Harness, audience: &str) -> String {
    let owner = String::from_utf8(
        futures_executor::block_on(h.lore.ports().storage.get(keys::LOCAL_OWNER))
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    let secret = format!("lore_at_{}", &keys::sha256_hex(audience)[..32]);
    let record = TokenRecord {
        id: "tok_audience".into(),
        principal: owner,
        orgs: vec![lore_base::ids::OrgId::parse("default").unwrap()],
        scopes: Scopes::ALL,
        created_at_ms: 0,
        expires_at_ms: None,
        revoked_at_ms: None,
        label: None,
        audience: Some(audience.into()),
        client_id: Some("test".into()),
        grant: None,
    };
    futures_executor::block_on(h.lore.ports().storage.put(
        &keys::token_by_hash(&keys::sha256_hex(&secret)),
        serde_json::to_vec(&record).unwrap(),
    ))
    .unwrap();
    secret
}

#[test]
fn tokens_are_accepted_only_at_the_resource_they_were_issued_for() {
    let h = Harness::new();
    let whole = token_for(&h, &format!("{BASE}/mcp"));
    for path in ["/mcp", "/mcp/default"] {
        let r = h.call(&whole, path, "search_memory", json!({"query": "x"}));
        assert_eq!(r.status, 200, "{path}: {}", r.text);
    }
    let pinned = token_for(&h, &format!("{BASE}/mcp/default"));
    assert_eq!(
        h.call(
            &pinned,
            "/mcp/default",
            "search_memory",
            json!({"query": "x"})
        )
        .status,
        200
    );
    let r = h.call(&pinned, "/mcp", "search_memory", json!({"query": "x"}));
    assert_eq!(r.status, 401, "an org's token is not the whole server's");
    assert!(
        r.header("www-authenticate")
            .contains("error=\"invalid_token\"")
    );

    let elsewhere = token_for(&h, "https://other.example/mcp");
    for path in ["/mcp", "/mcp/default"] {
        let r = h.call(&elsewhere, path, "search_memory", json!({"query": "x"}));
        assert_eq!(r.status, 401, "{path}");
        let challenge = r.header("www-authenticate");
        assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
        assert!(challenge.contains("resource_metadata="), "{challenge}");
    }
    // The REST surface checks the audience the same way.
    let r = h.post_json_as(&elsewhere, "/api/default/list_organizations", &json!({}));
    assert_eq!(r.status, 401, "{}", r.text);
    let r = h.post_json_as(&whole, "/api/default/list_organizations", &json!({}));
    assert_eq!(r.status, 200, "{}", r.text);
}
