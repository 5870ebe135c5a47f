//! The org's web app (`/app/{org}`) in-process through `Lore::handle`, signed in through the
//! real browser session of the OAuth pages (the owner's password, a GitHub user through the
//! stubbed provider): a member finds a memory and corrects it, a viewer reads and cannot
//! change, another org's data never shows, memory text is shown as text, and forms without the
//! session's token change nothing. The timeline and versions (`memory.list`,
//! `memory.versions`) are checked through the REST surface too.

use crate::oauth::harness;

use futures_executor::block_on;
use serde_json::{Value, json};

use harness::{BASE, Harness, OWNER_PASSWORD, Reply, query};

/// Where a page redirects to: its path and query.
fn target(r: &Reply) -> String {
    let url = r.location();
    match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_string(),
    }
}

fn save(h: &Harness, token: &str, args: Value) -> String {
    let r = h.call(token, "/mcp/default", "save_memory", args);
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    assert_eq!(v["result"]["isError"], false, "{v}");
    v["result"]["structuredContent"]["ids"][0]
        .as_str()
        .unwrap()
        .to_string()
}

fn search(h: &Harness, token: &str, q: &str) -> Vec<Value> {
    let r = h.call(
        token,
        "/mcp/default",
        "search_memory",
        json!({"query": q, "limit": 20}),
    );
    r.json()["result"]["structuredContent"]["results"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Opens `page` signed out, follows the app to the sign-in page and signs in as the owner
/// with the password; returns where the sign-in sent the browser.
fn owner_signs_in_at(h: &Harness, page: &str) -> String {
    h.set_owner_password();
    owner_signs_in_again_at(h, page)
}

/// [`owner_signs_in_at`] with the password as it is.
fn owner_signs_in_again_at(h: &Harness, page: &str) -> String {
    let r = h.get(page);
    assert_eq!(
        r.status, 303,
        "signed out, the app sends to sign-in: {}",
        r.text
    );
    let signin = h.get(&target(&r));
    assert_eq!(signin.status, 200, "{}", signin.text);
    assert_eq!(signin.input("then"), page);
    let r = h.post_form(
        "/oauth/signin",
        &[
            ("csrf", &signin.input("csrf")),
            ("then", &signin.input("then")),
            ("password", OWNER_PASSWORD),
        ],
        &[("origin", BASE)],
    );
    assert_eq!(r.status, 303, "{}", r.text);
    target(&r)
}

/// Opens `page` signed out and signs in with GitHub; returns where the sign-in sent the browser.
fn github_user_signs_in_at(h: &Harness, page: &str) -> String {
    let r = h.get(page);
    assert_eq!(r.status, 303, "{}", r.text);
    let signin = h.get(&target(&r));
    let r = h.post_form(
        "/oauth/upstream/start",
        &[
            ("csrf", &signin.input("csrf")),
            ("then", &signin.input("then")),
            ("provider", "github"),
        ],
        &[("origin", BASE)],
    );
    assert_eq!(r.status, 303, "{}", r.text);
    let q = query(&r.location());
    let back = h.get(&format!(
        "/oauth/upstream/callback?code=upstream-code&state={}",
        url::form_urlencoded::byte_serialize(q["state"].as_bytes()).collect::<String>()
    ));
    assert_eq!(back.status, 303, "{}", back.text);
    target(&back)
}

#[test]
fn a_member_finds_a_memory_by_search_and_corrects_it() {
    let h = Harness::new();
    let owner = h.owner_token.clone();
    let old = save(
        &h,
        &owner,
        json!({"content": "Deploys go out on Tuesdays after the standup", "kind": "decision"}),
    );
    save(
        &h,
        &owner,
        json!({"content": "The billing service is written in Go"}),
    );
    let landed = owner_signs_in_at(&h, "/app/default/memory");
    assert_eq!(
        landed, "/app/default/memory",
        "back where the person started"
    );

    // The timeline: both, newest first.
    let page = h.get("/app/default/memory");
    assert_eq!(page.status, 200, "{}", page.text);
    let (go, tuesday) = (
        page.text.find("written in Go").unwrap(),
        page.text.find("on Tuesdays").unwrap(),
    );
    assert!(go < tuesday, "newest first");
    assert!(
        page.text.contains("<span>by <span title=\"usr_")
            && page.text.contains(">local owner</span>"),
        "authors by name: {}",
        page.text
    );
    // The author filter offers the members by name and keeps the one chosen.
    let owner_id = h
        .post_json_as(&owner, "/api/default/members.list", &json!({}))
        .json()[0]["principal_id"]
        .as_str()
        .unwrap()
        .to_string();
    let mine = h.get(&format!("/app/default/memory?author={owner_id}"));
    assert!(
        mine.text.contains(&format!(
            "<option value=\"{owner_id}\" selected>local owner</option>"
        )),
        "{}",
        mine.text
    );
    assert!(mine.text.contains("on Tuesdays"));

    // Search finds the deploy decision first.
    let found = h.get("/app/default/memory?q=Deploys+Tuesdays");
    assert_eq!(found.status, 200);
    let first = found.text.find("<li").unwrap();
    assert!(
        found.text[first..].starts_with(&format!("<li class=\"\" id=\"{old}\"")),
        "{}",
        found.text
    );
    // The kind filter.
    let facts = h.get("/app/default/memory?kind=decision");
    assert!(facts.text.contains("on Tuesdays") && !facts.text.contains("written in Go"));

    // Its page offers the correction form; the correction supersedes it.
    let one = h.get(&format!("/app/default/memory/{old}"));
    assert_eq!(one.status, 200);
    assert!(one.text.contains("Save correction"), "{}", one.text);
    let r = h.post_form(
        &format!("/app/default/memory/{old}"),
        &[
            ("csrf", &one.input("csrf")),
            ("content", "Deploys go out on Wednesdays since March"),
            ("kind", "decision"),
        ],
        &[("origin", BASE)],
    );
    assert_eq!(r.status, 303, "{}", r.text);
    let next = target(&r);
    let new = next
        .strip_prefix("/app/default/memory/")
        .and_then(|s| s.strip_suffix("?saved=1"))
        .unwrap_or_else(|| panic!("{next}"))
        .to_string();
    assert_ne!(new, old);
    let shown = h.get(&next);
    assert!(shown.text.contains("Saved: your correction"));
    let (was, is) = (
        shown.text.find("on Tuesdays").unwrap(),
        shown.text.find("on Wednesdays").unwrap(),
    );
    assert!(was < is, "versions oldest first");

    // Agents now find the correction, not the old text; the old one stays in its history.
    let hits = search(&h, &owner, "Deploys");
    assert!(hits[0]["content"].as_str().unwrap().contains("Wednesdays"));
    assert!(!hits.iter().any(|m| m["id"] == old.as_str()));
    let versions = h.post_json_as(&owner, "/api/default/memory.versions", &json!({"id": old}));
    let versions = versions.json()["versions"].as_array().unwrap().clone();
    assert_eq!(versions.len(), 2);
    assert_eq!(versions[0]["superseded_by"], new.as_str());
    // Recorded as the person, from the app.
    let actions = h.post_json_as(&owner, "/api/default/actions.list", &json!({}));
    let actions = actions.json()["items"].as_array().unwrap().clone();
    assert!(
        actions
            .iter()
            .any(|a| a["source"] == "app" && a["steps"][0]["method"] == "memory.save"),
        "{actions:?}"
    );
    // The timeline hides the replaced version unless asked.
    let page = h.get("/app/default/memory");
    assert!(!page.text.contains("on Tuesdays"));
    let page = h.get("/app/default/memory?superseded=1");
    assert!(page.text.contains("on Tuesdays") && page.text.contains("replaced by"));
}

#[test]
fn a_viewer_sees_the_memory_and_cannot_change_it() {
    let mut h = Harness::new();
    h.with_providers();
    let owner = h.owner_token.clone();
    let id = save(
        &h,
        &owner,
        json!({"content": "Customer Acme renews in June"}),
    );
    let r = h.post_json_as(
        &owner,
        "/api/default/members.invite",
        &json!({"identity": "github:octocat", "role": "viewer"}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let landed = github_user_signs_in_at(&h, &format!("/app/default/memory/{id}"));
    assert_eq!(landed, format!("/app/default/memory/{id}"));
    let one = h.get(&landed);
    assert_eq!(one.status, 200, "{}", one.text);
    assert!(one.text.contains("Customer Acme renews in June"));
    assert!(one.text.contains("Mona Lisa Octocat (viewer)"));
    assert!(!one.text.contains("Save correction"));
    assert!(one.text.contains("you can read its memory, not change it"));
    // A post the page never offered is refused, with the session's own token.
    let r = h.post_form(
        &format!("/app/default/memory/{id}"),
        &[("csrf", &one.input("csrf")), ("content", "renews never")],
        &[("origin", BASE)],
    );
    assert_eq!(r.status, 403, "{}", r.text);
    assert!(
        search(&h, &owner, "renews never")
            .iter()
            .all(|m| m["content"] != "renews never")
    );
    let versions = h.post_json_as(&owner, "/api/default/memory.versions", &json!({"id": id}));
    assert_eq!(versions.json()["versions"].as_array().unwrap().len(), 1);
}

#[test]
fn another_orgs_memory_never_shows_and_its_app_is_not_found() {
    let mut h = Harness::new();
    h.with_providers();
    let other = block_on(lore_directory::admin::create_org(h.lore.ports(), "globex"))
        .unwrap()
        .token;
    let r = h.call(
        &other,
        "/mcp/globex",
        "save_memory",
        json!({"content": "Globex merger codename Bluebird"}),
    );
    let theirs = r.json()["result"]["structuredContent"]["ids"][0]
        .as_str()
        .unwrap()
        .to_string();
    save(
        &h,
        &h.owner_token.clone(),
        json!({"content": "Our own plans"}),
    );
    // A member of default only (the local owner owns every org this server made).
    let r = h.post_json_as(
        &h.owner_token,
        "/api/default/members.invite",
        &json!({"identity": "github:octocat", "role": "member"}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    github_user_signs_in_at(&h, "/app/default/memory");
    for path in [
        "/app/globex".to_string(),
        "/app/globex/memory".to_string(),
        format!("/app/globex/memory/{theirs}"),
        format!("/app/default/memory/{theirs}"),
        "/app/nosuchorg/memory".to_string(),
        "/app/Not%20An%20Org/memory".to_string(),
        "/app/default/nothing-here".to_string(),
    ] {
        let r = h.get(&path);
        assert_eq!(r.status, 404, "{path}: {}", r.text);
        assert!(!r.text.contains("Bluebird"), "{path}");
    }
    for page in [
        "/app/default/memory",
        "/app/default/memory?q=merger+codename+Bluebird",
        "/app/default/memory?superseded=1",
    ] {
        let r = h.get(page);
        assert_eq!(r.status, 200);
        assert!(!r.text.contains("Globex merger codename"), "{page}");
    }
    // A correction aimed at the other org's memory through this org's path.
    let own = h.get("/app/default/memory");
    let r = h.post_form(
        &format!("/app/default/memory/{theirs}"),
        &[("csrf", &own.input("csrf")), ("content", "hijacked")],
        &[("origin", BASE)],
    );
    assert_eq!(r.status, 404, "{}", r.text);
    let r = h.post_form(
        &format!("/app/globex/memory/{theirs}"),
        &[("csrf", &own.input("csrf")), ("content", "hijacked")],
        &[("origin", BASE)],
    );
    assert_eq!(r.status, 404, "{}", r.text);
    let r = h.call(
        &other,
        "/mcp/globex",
        "search_memory",
        json!({"query": "hijacked Bluebird"}),
    );
    assert!(!r.text.contains("hijacked"));
}

#[test]
fn memory_text_shows_as_text_and_every_page_sends_its_headers() {
    let h = Harness::new();
    let owner = h.owner_token.clone();
    let id = save(
        &h,
        &owner,
        json!({"content": "<script>alert('x')</script><img src=x onerror=alert(1)> \"quoted\" & <b>more</b>"}),
    );
    owner_signs_in_at(&h, "/app/default/memory");
    for page in [
        "/app/default/memory".to_string(),
        format!("/app/default/memory/{id}"),
        "/app/default/memory?q=%3Cscript%3E&author=%22%3E%3Cscript%3E".to_string(),
    ] {
        let r = h.get(&page);
        assert_eq!(r.status, 200, "{page}: {}", r.text);
        assert!(!r.text.contains("<script"), "{page}: {}", r.text);
        assert!(!r.text.contains("<img"), "{page}");
        assert!(!r.text.contains("<b>more"), "{page}");
        let csp = r.header("content-security-policy");
        assert!(
            csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"),
            "{csp}"
        );
        assert_eq!(r.header("x-frame-options"), "DENY");
        assert_eq!(r.header("cache-control"), "no-store");
    }
    let r = h.get(&format!("/app/default/memory/{id}"));
    assert!(r.text.contains("&lt;script&gt;alert('x')&lt;/script&gt;"));
}

#[test]
fn a_form_without_the_sessions_token_or_from_another_site_changes_nothing() {
    let h = Harness::new();
    let owner = h.owner_token.clone();
    let id = save(&h, &owner, json!({"content": "The office opens at nine"}));
    owner_signs_in_at(&h, "/app/default/memory");
    let one = h.get(&format!("/app/default/memory/{id}"));
    let csrf = one.input("csrf");
    let path = format!("/app/default/memory/{id}");
    for (form, headers) in [
        (vec![("content", "opens at ten")], vec![("origin", BASE)]),
        (
            vec![("csrf", "not-the-token"), ("content", "opens at ten")],
            vec![("origin", BASE)],
        ),
        (
            vec![("csrf", csrf.as_str()), ("content", "opens at ten")],
            vec![("origin", "https://evil.example")],
        ),
    ] {
        let r = h.post_form(&path, &form, &headers);
        assert_eq!(r.status, 403, "{form:?} {headers:?}: {}", r.text);
    }
    // Signed out, a post goes nowhere either.
    let jar = h.cookies.replace(Default::default());
    let r = h.post_form(
        &path,
        &[("csrf", &csrf), ("content", "opens at ten")],
        &[("origin", BASE)],
    );
    assert_eq!(r.status, 403);
    h.cookies.replace(jar);
    let versions = h.post_json_as(&owner, "/api/default/memory.versions", &json!({"id": id}));
    assert_eq!(versions.json()["versions"].as_array().unwrap().len(), 1);
    // An empty correction is refused with the reason, and the draft kept.
    let r = h.post_form(
        &path,
        &[("csrf", &csrf), ("content", "  "), ("kind", "fact")],
        &[("origin", BASE)],
    );
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(r.text.contains("role=\"alert\""), "{}", r.text);
}

#[test]
fn the_timeline_pages_through_every_memory_newest_first_under_filters() {
    let h = Harness::new();
    let owner = h.owner_token.clone();
    let memories: Vec<Value> = (0..120)
        .map(|i| {
            json!({"content": format!("numbered memory {i}"),
                   "kind": if i % 3 == 0 { "fact" } else { "note" }})
        })
        .collect();
    for half in memories.chunks(60) {
        let r = h.call(
            &owner,
            "/mcp/default",
            "save_memory",
            json!({"memories": half}),
        );
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.json()["result"]["isError"], false, "{}", r.text);
    }
    let list = |args: Value| {
        let r = h.post_json_as(&owner, "/api/default/memory.list", &args);
        assert_eq!(r.status, 200, "{}", r.text);
        r.json()
    };
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut args = json!({"limit": 50});
        if let Some(c) = &cursor {
            args["cursor"] = json!(c);
        }
        let page = list(args);
        for m in page["items"].as_array().unwrap() {
            seen.push(m["content"].as_str().unwrap().to_string());
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    let want: Vec<String> = (0..120)
        .rev()
        .map(|i| format!("numbered memory {i}"))
        .collect();
    assert_eq!(seen, want);
    let facts = list(json!({"kinds": ["fact"], "limit": 100}));
    let facts = facts["items"].as_array().unwrap();
    assert_eq!(facts.len(), 40);
    assert!(facts.iter().all(|m| m["kind"] == "fact"));
    let bad = h.post_json_as(
        &owner,
        "/api/default/memory.list",
        &json!({"cursor": "evt_nope"}),
    );
    assert_eq!(bad.status, 400, "{}", bad.text);
    assert!(bad.text.contains("cursor"));
}

/// An agent's API token and an application's OAuth access token of org default, both working.
fn an_agent_token_and_an_application(h: &Harness) -> (String, String) {
    let owner = h.owner_token.clone();
    let agent = h.post_json_as(
        &owner,
        "/api/default/agents.create",
        &json!({"name": "ci-bot", "role": "member"}),
    );
    assert_eq!(agent.status, 200, "{}", agent.text);
    let token = h.post_json_as(
        &owner,
        "/api/default/tokens.create",
        &json!({"principal_id": agent.json()["principal_id"], "label": "ci deploy"}),
    );
    assert_eq!(token.status, 200, "{}", token.text);
    let token = token.json()["token"].as_str().unwrap().to_string();
    let (_, tokens) = h.authorized_client("http://127.0.0.1:9911/callback", "app-access");
    let access = tokens["access_token"].as_str().unwrap().to_string();
    assert_eq!(mcp_status(h, &token), 200);
    assert_eq!(mcp_status(h, &access), 200);
    (token, access)
}

/// The status of one `search_memory` call with `token` at org default's endpoint.
fn mcp_status(h: &Harness, token: &str) -> u16 {
    h.call(
        token,
        "/mcp/default",
        "search_memory",
        json!({"query": "x"}),
    )
    .status
}

/// The value of the hidden `name` input of the form whose row holds `marker`.
fn input_near(page: &Reply, marker: &str, name: &str) -> String {
    let at = page
        .text
        .find(marker)
        .unwrap_or_else(|| panic!("{marker} not in {}", page.text));
    let row = &page.text[at..];
    let row = &row[..row.find("</tr>").unwrap_or(row.len())];
    let key = format!("name=\"{name}\" value=\"");
    let start = row
        .find(&key)
        .unwrap_or_else(|| panic!("no {name} in {row}"))
        + key.len();
    row[start..start + row[start..].find('"').unwrap()].to_string()
}

#[test]
fn an_admin_revokes_a_token_and_an_application_and_their_next_calls_are_refused() {
    let h = Harness::new();
    h.set_owner_password();
    // Approving the application signs the owner in (the consent page's session).
    let (token, access) = an_agent_token_and_an_application(&h);
    let page = h.get("/app/default/access");
    assert_eq!(page.status, 200, "{}", page.text);
    for shown in [
        "ci-bot",
        "ci deploy",
        "Test Client",
        "API tokens",
        "Applications",
    ] {
        assert!(page.text.contains(shown), "{shown}: {}", page.text);
    }
    let token_id = input_near(&page, "ci deploy", "token");
    let grant_id = input_near(&page, "Test Client", "grant");
    let csrf = page.input("csrf");

    // Forms without the session's token, or from another origin, revoke nothing.
    for (form, headers) in [
        (vec![("token", token_id.as_str())], vec![("origin", BASE)]),
        (
            vec![("token", token_id.as_str()), ("csrf", "forged")],
            vec![("origin", BASE)],
        ),
        (
            vec![("token", token_id.as_str()), ("csrf", csrf.as_str())],
            vec![("origin", "https://evil.example")],
        ),
    ] {
        let r = h.post_form("/app/default/access/revoke", &form, &headers);
        assert_eq!(r.status, 403, "{form:?} {headers:?}: {}", r.text);
    }
    assert_eq!(mcp_status(&h, &token), 200);

    let r = h.post_form(
        "/app/default/access/revoke",
        &[("csrf", &csrf), ("token", &token_id)],
        &[("origin", BASE)],
    );
    assert_eq!(r.status, 303, "{}", r.text);
    assert_eq!(
        target(&r),
        format!("/app/default/access?revoked={token_id}")
    );
    assert_eq!(mcp_status(&h, &token), 401, "the revoked token's next call");
    assert_eq!(mcp_status(&h, &access), 200, "the application is untouched");

    let r = h.post_form(
        "/app/default/access/revoke",
        &[("csrf", &csrf), ("grant", &grant_id)],
        &[("origin", BASE)],
    );
    assert_eq!(r.status, 303, "{}", r.text);
    assert_eq!(mcp_status(&h, &access), 401, "the revoked grant's token");

    let page = h.get(&target(&r));
    assert!(page.text.contains("access is revoked"), "{}", page.text);
    assert!(
        page.text.contains("revoked 20"),
        "the grant shows when it was revoked"
    );
    assert!(
        !page.text.contains(&format!("value=\"{token_id}\"")),
        "no revoke button for a revoked token"
    );
    let grants = h.post_json_as(&h.owner_token, "/api/default/grants.list", &json!({}));
    let reason = grants.json()[0]["revoked_reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(reason.starts_with("revoked by usr_"), "{reason}");
}

#[test]
fn no_one_revokes_another_orgs_token_or_application_and_non_admins_revoke_nothing() {
    let mut h = Harness::new();
    h.with_providers();
    h.set_owner_password();
    let other = block_on(lore_directory::admin::create_org(h.lore.ports(), "globex")).unwrap();
    let globex = |token: &str| {
        h.call(token, "/mcp/globex", "search_memory", json!({"query": "x"}))
            .status
    };
    assert_eq!(globex(&other.token), 200);
    let (token, _access) = an_agent_token_and_an_application(&h);
    // The owner (admin of default) aims this org's form at globex's token: not found.
    let page = h.get("/app/default/access");
    let csrf = page.input("csrf");
    let r = h.post_form(
        "/app/default/access/revoke",
        &[("csrf", &csrf), ("token", &other.token_id)],
        &[("origin", BASE)],
    );
    assert_eq!(r.status, 404, "{}", r.text);
    assert_eq!(globex(&other.token), 200);
    for bad in ["grt_../../x", "grt_", "tok_", "", "a\u{0}b"] {
        let r = h.post_form(
            "/app/default/access/revoke",
            &[("csrf", &csrf), ("grant", bad)],
            &[("origin", BASE)],
        );
        assert!(
            matches!(r.status, 400 | 404),
            "{bad:?}: {} {}",
            r.status,
            r.text
        );
    }
    // A viewer and a member see the members, no tokens, and cannot revoke.
    let r = h.post_json_as(
        &h.owner_token,
        "/api/default/members.invite",
        &json!({"identity": "github:octocat", "role": "viewer"}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    h.cookies.borrow_mut().clear();
    let landed = github_user_signs_in_at(&h, "/app/default/access");
    assert_eq!(landed, "/app/default/access");
    let page = h.get(&landed);
    assert_eq!(page.status, 200, "{}", page.text);
    assert!(page.text.contains("ci-bot") && page.text.contains("Mona Lisa Octocat"));
    assert!(!page.text.contains("ci deploy") && !page.text.contains("Test Client"));
    assert!(!page.text.contains("Revoke"));
    let token_id = h
        .post_json_as(&h.owner_token, "/api/default/tokens.list", &json!({}))
        .json()
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["label"] == "ci deploy")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = h.post_form(
        "/app/default/access/revoke",
        &[("csrf", &page.input("csrf")), ("token", &token_id)],
        &[("origin", BASE)],
    );
    assert_eq!(r.status, 403, "{}", r.text);
    assert_eq!(mcp_status(&h, &token), 200);
    // Nor does anyone reach globex's access page.
    assert_eq!(h.get("/app/globex/access").status, 404);
}

#[test]
fn the_audit_log_shows_newest_first_filters_and_pages_and_shows_each_call() {
    let mut h = Harness::new();
    h.with_providers();
    h.set_owner_password();
    let owner = h.owner_token.clone();
    let (agent_token, _) = an_agent_token_and_an_application(&h);
    for i in 0..55 {
        let r = h.post_json_as(
            &owner,
            "/api/default/memory.save",
            &json!({"content": format!("note {i}")}),
        );
        assert_eq!(r.status, 200, "{}", r.text);
    }
    let r = h.post_json_as(
        &agent_token,
        "/api/default/memory.save",
        &json!({"content": "the agent's note"}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let r = h.call(
        &owner,
        "/mcp/default",
        "run_sdk",
        json!({"code": "await client.memory.save({content: 'half'}); throw new Error('boom <script>alert(1)</script>');"}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let all = h.post_json_as(
        &owner,
        "/api/default/actions.list",
        &json!({"newest_first": true, "limit": 500}),
    );
    let all = all.json()["items"].as_array().unwrap().clone();
    assert!(all.len() >= 57, "{}", all.len());
    let failed = all[0].clone();
    assert_eq!(failed["status"], "error", "{failed}");
    assert_eq!(failed["source"], "run_sdk");
    let agent_action = all[1].clone();
    let agent_id = agent_action["principal"].as_str().unwrap().to_string();
    assert!(agent_id.starts_with("agt_"), "{agent_action}");

    // Page one: the newest 50, newest first, with who acted by name.
    let page = h.get("/app/default/actions");
    assert_eq!(page.status, 200, "{}", page.text);
    let ids = |text: &str| -> Vec<String> {
        text.match_indices("/app/default/actions/act_")
            .map(|(at, _)| text[at + 21..at + 21 + 30].to_string())
            .collect()
    };
    let first = ids(&page.text);
    assert_eq!(first.len(), 50, "{}", page.text);
    let expected: Vec<String> = all
        .iter()
        .map(|a| a["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(first, expected[..50], "newest first");
    assert!(page.text.contains("ci-bot"));
    assert!(
        !page.text.contains("<script>alert"),
        "nothing of the error runs"
    );
    // The next page continues without a gap or a repeat.
    let at = page.text.find("rel=\"next\"").expect("an older page");
    let href = &page.text[page.text[..at].rfind("href=\"?").unwrap() + 6..at - 2];
    let older = h.get(&format!(
        "/app/default/actions{}",
        href.replace("&amp;", "&")
    ));
    assert_eq!(older.status, 200, "{}", older.text);
    let second = ids(&older.text);
    assert_eq!(second, expected[50..], "{href}");

    // Filters: by status, by who.
    let errors = h.get("/app/default/actions?status=error");
    assert_eq!(ids(&errors.text), [failed["id"].as_str().unwrap()]);
    let agents = h.get(&format!("/app/default/actions?agent={agent_id}"));
    assert_eq!(ids(&agents.text), [agent_action["id"].as_str().unwrap()]);
    let both = h.get(&format!(
        "/app/default/actions?agent={agent_id}&status=error"
    ));
    assert!(ids(&both.text).is_empty() && both.text.contains("No actions here."));

    // One action: each call, and the error as text.
    let one = h.get(&format!(
        "/app/default/actions/{}",
        failed["id"].as_str().unwrap()
    ));
    assert_eq!(one.status, 200, "{}", one.text);
    assert!(one.text.contains("memory.save"), "{}", one.text);
    assert!(one.text.contains("boom &lt;script&gt;"), "{}", one.text);
    // What the run used of its caps: one SDK call of 200, one buffered write, some steps.
    assert!(one.text.contains("<h2>Caps used</h2>"), "{}", one.text);
    assert!(
        one.text
            .contains("<tr><td>SDK calls</td><td>1</td><td>200</td>"),
        "{}",
        one.text
    );
    assert!(!one.text.contains("reached"), "no cap was reached");
    assert!(!one.text.contains("<script>alert"));
    for bad in [
        "act_",
        "act_00000000000000000000000000",
        "evt_01",
        "..%2F..",
        "act_%00",
    ] {
        let r = h.get(&format!("/app/default/actions/{bad}"));
        assert_eq!(r.status, 404, "{bad}: {}", r.text);
    }
    let r = h.get("/app/default/actions?cursor=%2F..%2F&status=%3Cb%3E");
    assert!(matches!(r.status, 200), "{}", r.text);
    assert!(!r.text.contains("<b>"));

    // A viewer sees only their own actions (none), with no filter by who.
    let r = h.post_json_as(
        &owner,
        "/api/default/members.invite",
        &json!({"identity": "github:octocat", "role": "viewer"}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    h.cookies.borrow_mut().clear();
    github_user_signs_in_at(&h, "/app/default/actions");
    let page = h.get("/app/default/actions");
    assert_eq!(page.status, 200, "{}", page.text);
    assert!(ids(&page.text).is_empty(), "{}", page.text);
    assert!(!page.text.contains("id=\"agent\""));
    let r = h.get(&format!(
        "/app/default/actions/{}",
        failed["id"].as_str().unwrap()
    ));
    assert_eq!(r.status, 404, "another person's action");
}

#[test]
fn usage_shows_the_orgs_calls_per_day_and_tool_with_their_errors() {
    let h = Harness::new();
    let owner = h.owner_token.clone();
    for i in 0..3 {
        save(&h, &owner, json!({"content": format!("day one {i}")}));
    }
    // One error: a memory that does not exist.
    let r = h.post_json_as(
        &owner,
        "/api/default/memory.get",
        &json!({"id": "evt_01J00000000000000000000000"}),
    );
    assert_eq!(r.status, 404, "{}", r.text);
    h.advance(86_400_000);
    save(&h, &owner, json!({"content": "day two"}));
    // One cap hit: a script whose value is over the output cap.
    let r = h.call(
        &owner,
        "/mcp/default",
        "run_sdk",
        json!({"code": "return 'x'.repeat(2_000_000);"}),
    );
    assert!(r.text.contains("cap_exceeded"), "{}", r.text);
    owner_signs_in_at(&h, "/app/default/usage");
    let page = h.get("/app/default/usage");
    assert_eq!(page.status, 200, "{}", page.text);
    assert!(page.text.contains("<svg class=\"chart\""), "{}", page.text);
    // Four saves over two days, one failed read.
    assert!(
        page.text
            .contains("<code>save_memory</code></td><td>4</td><td>0</td>"),
        "{}",
        page.text
    );
    assert!(
        page.text
            .contains("<code>memory.get</code></td><td>1</td><td>1</td>"),
        "{}",
        page.text
    );
    assert!(
        page.text
            .contains("<code>run_sdk</code></td><td>1</td><td>1</td><td>1</td>"),
        "{}",
        page.text
    );
    assert!(
        page.text.contains(": 4 calls, 1 errors, 0 cap hits"),
        "{}",
        page.text
    );
    assert!(
        page.text.contains(": 2 calls, 1 errors, 1 cap hits"),
        "{}",
        page.text
    );
    // The run's action shows the cap it reached and what it used of the others.
    let capped = h.post_json_as(
        &owner,
        "/api/default/actions.list",
        &json!({"newest_first": true, "limit": 1}),
    );
    let capped = capped.json()["items"][0].clone();
    assert_eq!(capped["error"]["cap"], "output", "{capped}");
    let used: Vec<&str> = capped["caps_used"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["cap"].as_str().unwrap())
        .collect();
    assert_eq!(
        used,
        [
            "steps",
            "memory",
            "sdk_calls",
            "output",
            "wall_clock",
            "buffered_writes"
        ]
    );
    assert!(capped["caps_used"][0]["used"].as_u64().unwrap() > 0);
    let one = h.get(&format!(
        "/app/default/actions/{}",
        capped["id"].as_str().unwrap()
    ));
    assert!(
        one.text
            .contains("<td>output <span class=\"tag bad\">reached</span></td>"),
        "{}",
        one.text
    );
    // Another period, and nonsense for one, still answer.
    for q in ["?days=7", "?days=9999", "?days=%3Cscript%3E", "?days=-1"] {
        let r = h.get(&format!("/app/default/usage{q}"));
        assert_eq!(r.status, 200, "{q}: {}", r.text);
        assert!(!r.text.contains("<script"));
    }
    // metrics.query groups by day and tool for agents too.
    let r = h.post_json_as(
        &owner,
        "/api/default/metrics.query",
        &json!({"name": "tool_calls", "group_by": "day_and_tool", "tool": "save_memory"}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let series = r.json()["series"].as_array().unwrap().clone();
    assert_eq!(series.len(), 2, "{series:?}");
    assert_eq!(series[0]["value"], 3.0);
    assert!(series[0]["key"].as_str().unwrap().ends_with("/save_memory"));
}

#[test]
fn records_show_types_entities_newest_first_and_an_entitys_neighbourhood() {
    let h = Harness::new();
    let owner = h.owner_token.clone();
    let api = |name: &str, body: Value| {
        let r = h.post_json_as(&owner, &format!("/api/default/{name}"), &body);
        assert_eq!(r.status, 200, "{name}: {}", r.text);
        r.json()
    };
    api(
        "templates.create",
        json!({"name": "service", "description": "A deployed service",
               "schema": {"type": "object", "properties": {
                   "team": {"type": "string", "description": "Who owns it"},
                   "tier": {"type": "integer"}}, "required": ["team"]}}),
    );
    let mut ids = Vec::new();
    for i in 0..120 {
        let e = api(
            "entities.create",
            json!({"type": "service", "name": format!("svc-{i:03}"),
                   "properties": {"team": if i % 40 == 0 { "payments" } else { "platform" }, "tier": i % 3}}),
        );
        ids.push(e["id"].as_str().unwrap().to_string());
    }
    let hub = api(
        "entities.create",
        json!({"type": "service", "name": "<script>alert(1)</script> gateway",
               "properties": {"team": "<img src=x onerror=alert(2)>", "tier": 1}}),
    )["id"]
        .as_str()
        .unwrap()
        .to_string();
    for (to, kind) in [
        (&ids[0], "calls"),
        (&ids[1], "calls"),
        (&ids[2], "depends_on"),
    ] {
        api(
            "relationships.create",
            json!({"type": kind, "from": hub, "to": to}),
        );
    }
    api(
        "relationships.create",
        json!({"type": "monitors", "from": ids[3], "to": hub}),
    );
    save(
        &h,
        &owner,
        json!({"content": "The gateway was rate limited during the sale", "entity_ids": [hub]}),
    );
    owner_signs_in_at(&h, "/app/default/records");

    let page = h.get("/app/default/records");
    assert_eq!(page.status, 200, "{}", page.text);
    for shown in [
        "A deployed service",
        "<code>team</code>",
        "required",
        "Who owns it",
        "integer",
        "Newest entities",
    ] {
        assert!(page.text.contains(shown), "{shown}: {}", page.text);
    }
    assert!(!page.text.contains("<script>alert") && !page.text.contains("<img src=x"));

    // The type's entities, newest first, 50 a page, without gaps or repeats.
    let entity_ids = |text: &str| -> Vec<String> {
        text.match_indices("href=\"/app/default/entities/ent_")
            .map(|(at, _)| text[at + 28..at + 28 + 30].to_string())
            .collect()
    };
    let mut expected: Vec<String> = ids.clone();
    expected.push(hub.clone());
    expected.reverse();
    let mut seen = Vec::new();
    let mut next = "/app/default/records/service".to_string();
    loop {
        let page = h.get(&next);
        assert_eq!(page.status, 200, "{next}: {}", page.text);
        seen.extend(entity_ids(&page.text));
        let Some(at) = page.text.find("rel=\"next\"") else {
            break;
        };
        let href = &page.text[page.text[..at].rfind("href=\"?").unwrap() + 6..at - 2];
        next = format!("/app/default/records/service{}", href.replace("&amp;", "&"));
    }
    assert_eq!(seen, expected);
    // Filtered by a property, a string and a number.
    let payments = h.get("/app/default/records/service?prop=team&value=payments");
    assert_eq!(entity_ids(&payments.text).len(), 3, "{}", payments.text);
    let tier = h.get("/app/default/records/service?prop=tier&value=2");
    assert_eq!(entity_ids(&tier.text).len(), 40);

    // One entity: escaped, its relationships by name, its graph, its memories.
    let one = h.get(&format!("/app/default/entities/{hub}"));
    assert_eq!(one.status, 200, "{}", one.text);
    assert!(!one.text.contains("<script>alert") && !one.text.contains("<img src=x"));
    assert!(one.text.contains("&lt;img src=x onerror=alert(2)&gt;"));
    assert!(one.text.contains("<svg class=\"graph\""));
    for neighbour in &ids[..4] {
        assert!(
            one.text
                .contains(&format!("<a href=\"/app/default/entities/{neighbour}\">")),
            "{neighbour}"
        );
    }
    for shown in [
        "svc-000",
        "svc-003",
        "depends_on",
        "monitors",
        "4 relationships.",
        "rate limited during the sale",
    ] {
        assert!(one.text.contains(shown), "{shown}: {}", one.text);
    }

    // Not found: an unknown type, ids that are not this org's entities.
    let other = block_on(lore_directory::admin::create_org(h.lore.ports(), "globex")).unwrap();
    let r = h.post_json_as(
        &other.token,
        "/api/globex/templates.create",
        &json!({"name": "service", "schema": {"type": "object"}}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let r = h.post_json_as(
        &other.token,
        "/api/globex/entities.create",
        &json!({"type": "service", "name": "Globex secret"}),
    );
    let theirs = r.json()["id"].as_str().unwrap().to_string();
    for path in [
        "/app/default/records/nosuchtype".to_string(),
        format!("/app/default/entities/{theirs}"),
        "/app/default/entities/ent_".to_string(),
        "/app/default/entities/..%2F..".to_string(),
        format!("/app/default/entities/{}", ids[0].replace("ent_", "rel_")),
    ] {
        let r = h.get(&path);
        assert_eq!(r.status, 404, "{path}: {}", r.text);
        assert!(!r.text.contains("Globex secret"));
    }
    let r = h.get("/app/default/records/service?prop=%3Cb%3E&value=%22&cursor=%2F..%2F");
    assert!(!r.text.contains("<b>"), "{}", r.text);
}

#[test]
fn a_correction_of_a_replaced_version_is_refused_and_the_versions_page_stays_bounded() {
    let h = Harness::new();
    let owner = h.owner_token.clone();
    let first = save(&h, &owner, json!({"content": "The office opens at 9"}));
    let mut latest = first.clone();
    for i in 0..60 {
        latest = save(
            &h,
            &owner,
            json!({"content": format!("The office opens at {i} {}", "long text ".repeat(400)), "supersedes_event_id": latest}),
        );
    }
    owner_signs_in_at(&h, &format!("/app/default/memory/{first}"));
    // A form aimed at a replaced version (a stale page, a second editor): 409, nothing saved.
    let page = h.get(&format!("/app/default/memory/{first}"));
    assert_eq!(page.status, 200, "{}", page.text);
    let r = h.post_form(
        &format!("/app/default/memory/{first}"),
        &[
            ("csrf", &page.input("csrf")),
            ("content", "The office opens at 10"),
        ],
        &[("origin", BASE)],
    );
    assert_eq!(r.status, 409, "{}", r.text);
    assert!(r.text.contains("already replaced by"), "{}", r.text);
    let versions = h.post_json_as(
        &owner,
        "/api/default/memory.versions",
        &json!({"id": first}),
    );
    let versions = versions.json()["versions"].as_array().unwrap().clone();
    assert_eq!(versions.len(), 61, "no fork was saved");
    // The same through the SDK.
    let r = h.post_json_as(
        &owner,
        "/api/default/memory.save",
        &json!({"content": "fork", "supersedes_event_id": first}),
    );
    assert_eq!(r.status, 409, "{}", r.text);
    // 61 versions: the page shows 50 around the one asked for, the others' text cut.
    let page = h.get(&format!("/app/default/memory/{first}"));
    assert_eq!(
        page.text.matches("<li class=").count(),
        50,
        "{}",
        page.text.len()
    );
    assert!(page.text.contains("11 newer versions are not shown"));
    assert!(page.text.len() < 200_000, "{} bytes", page.text.len());
    let page = h.get(&format!("/app/default/memory/{latest}"));
    assert_eq!(page.text.matches("<li class=").count(), 50);
    assert!(page.text.contains("11 older versions are not shown"));
}

#[test]
fn the_app_takes_from_the_same_rate_limits_as_mcp() {
    let mut h = Harness::new();
    h.set_owner_password();
    owner_signs_in_at(&h, "/app/default/memory");
    let config = lore_front::Config {
        rate_limits: lore_base::ratelimit::RateLimits {
            token_per_minute: 60,
            org_per_minute: 0,
        },
        ..lore_front::Config::default()
    };
    h.lore = lore_front::Lore::new(h.lore.ports().clone(), config).with_rate_limiter(
        std::rc::Rc::new(lore_base::ratelimit::MemoryLimiter::default()),
    );
    let statuses: Vec<u16> = (0..40)
        .map(|_| h.get("/app/default/memory").status)
        .collect();
    assert_eq!(statuses[0], 200);
    let refused = statuses
        .iter()
        .position(|s| *s == 429)
        .expect("a burst is refused");
    let r = h.get("/app/default/memory");
    assert_eq!(r.status, 429, "{}", r.text);
    assert!(r.header("retry-after").parse::<u64>().unwrap() >= 1);
    assert!(
        refused >= 5,
        "the burst allowance comes first: {statuses:?}"
    );
    // The refusals show in the org's usage as cap hits.
    let r = h.post_json_as(
        &h.owner_token.clone(),
        "/api/default/metrics.query",
        &json!({"name": "cap_hits", "tool": "rate_limited"}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let refusals = statuses.iter().filter(|s| **s == 429).count() + 1;
    assert_eq!(r.json()["value"], refusals as f64, "{}", r.text);
    h.advance(60_000);
    assert_eq!(
        h.get("/app/default/memory").status,
        200,
        "the bucket refills"
    );
}

#[test]
fn signing_out_everywhere_or_a_password_change_ends_every_browser_session() {
    let mut h = Harness::new();
    h.with_providers();
    h.set_owner_password();
    let page = "/app/default/access";
    let browser = |h: &Harness| h.cookies.borrow().clone();
    let switch_to = |h: &Harness, jar: &std::collections::HashMap<String, String>| {
        *h.cookies.borrow_mut() = jar.clone();
    };
    let r = h.post_json_as(
        &h.owner_token.clone(),
        "/api/default/members.invite",
        &json!({"identity": "github:octocat", "role": "member"}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    github_user_signs_in_at(&h, page);
    let other = browser(&h);
    assert_eq!(h.get(page).status, 200);
    h.cookies.borrow_mut().clear();
    owner_signs_in_again_at(&h, page);
    let a = browser(&h);
    h.cookies.borrow_mut().clear();
    owner_signs_in_again_at(&h, page);
    let b = browser(&h);
    assert_eq!(h.get(page).status, 200, "two browsers signed in at once");

    // Browser A signs out everywhere: B is signed out too.
    switch_to(&h, &a);
    let access = h.get(page);
    assert_eq!(access.status, 200, "{}", access.text);
    assert!(
        access.text.contains("Sign out everywhere"),
        "{}",
        access.text
    );
    let r = h.post_form(
        "/oauth/signout",
        &[("csrf", &access.input("csrf")), ("everywhere", "1")],
        &[("origin", BASE)],
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.text.contains("in every browser"), "{}", r.text);
    for jar in [&a, &b] {
        switch_to(&h, jar);
        let r = h.get(page);
        assert_eq!(r.status, 303, "the session is over: {}", r.text);
        assert!(target(&r).starts_with("/oauth/signin"), "{}", target(&r));
    }
    // A forged sign-out everywhere (no session token) ends nothing.
    h.cookies.borrow_mut().clear();
    owner_signs_in_again_at(&h, page);
    let c = browser(&h);
    let r = h.post_form(
        "/oauth/signout",
        &[("csrf", "forged"), ("everywhere", "1")],
        &[("origin", BASE)],
    );
    assert_ne!(r.status, 200, "{}", r.text);
    switch_to(&h, &c);
    assert_eq!(h.get(page).status, 200, "a new sign-in works and survives");

    // A password change ends every session signed in with the old one.
    h.set_owner_password();
    let r = h.get(page);
    assert_eq!(r.status, 303, "{}", r.text);
    owner_signs_in_again_at(&h, page);
    assert_eq!(h.get(page).status, 200);
    // Another person's session outlived all of the owner's.
    switch_to(&h, &other);
    assert_eq!(h.get(page).status, 200, "another person's session goes on");
}
