//! Moving an org between servers (`lore_directory::transfer`): an export read in pages and
//! imported into another server brings the whole org (memories, records, members; tokens only
//! when the operator carries them); an import never lands on an org the server has, and a
//! forged file creates nothing outside its org (no token for another org, no password or
//! principal replaced); and a move-in copies an org's rows from the store it used to live in
//! (a Workers deployment's D1 before org objects) into its own.

use crate::common;

use std::rc::Rc;

use futures_executor::block_on;
use serde_json::json;

use common::Harness;
use lore_base::ids::OrgId;
use lore_base::model::{Role, Scopes};
use lore_base::ports::Ports;
use lore_base::storage::memory::MemoryStorage;
use lore_base::storage::split::SplitStorage;
use lore_base::storage::{Batch, Storage};
use lore_directory::admin::{self, TokenRequest};
use lore_directory::transfer;
use lore_testing::ports::{MemoryOrgs, step_ports as ports};

/// A server with org `acme`: a memory, a record, and a member's token besides the owner's.
fn source() -> (Harness, String) {
    let h = Harness::on(ports(Rc::new(MemoryStorage::new()), 3), "acme");
    h.save(
        &h.owner,
        json!({"content": "The heron migration starts in May."}),
    );
    let r = h.api(
        "acme",
        &h.owner,
        "manage_templates",
        json!({"action": "create", "name": "note"}),
    );
    assert_eq!(r.status, 200, "{}", r.json);
    let r = h.api(
        "acme",
        &h.owner,
        "entities.create",
        json!({"type": "note", "name": "heron"}),
    );
    assert_eq!(r.status, 200, "{}", r.json);
    let member = block_on(admin::create_token(
        h.lore.ports(),
        TokenRequest {
            org: "acme".into(),
            role: Some(Role::Member),
            scopes: Scopes::ALL,
            principal: None,
            name: Some("mover".into()),
            expires_at_ms: None,
        },
    ))
    .unwrap()
    .token;
    (h, member)
}

/// Every page of `org`'s export, `limit` keys of its store a page.
fn export(ports: &Ports, org: &OrgId, limit: usize) -> Vec<Vec<(String, Vec<u8>)>> {
    let mut pages = Vec::new();
    let mut after = None;
    loop {
        let page = block_on(transfer::export_page(ports, org, after.as_deref(), limit)).unwrap();
        pages.push(page.entries);
        match page.next {
            Some(next) => after = Some(next),
            None => return pages,
        }
    }
}

/// Imports every page of an export, the first as the first, carrying its credentials.
fn import(ports: &Ports, org: &OrgId, pages: &[Vec<(String, Vec<u8>)>]) {
    for (i, page) in pages.iter().enumerate() {
        block_on(transfer::import_page(
            ports,
            org,
            page.clone(),
            i == 0,
            transfer::Credentials::Carry,
        ))
        .unwrap();
    }
}

/// The org answers on `h` as it did where it came from: the member's token, its memory, its
/// record.
fn answers_whole(h: &Harness, member: &str) {
    let (status, reply) = h.rpc(
        "/mcp/acme",
        member,
        "tools/call",
        json!({"name": "search_memory", "arguments": {"query": "heron migration"}}),
    );
    assert_eq!(status, 200, "{reply}");
    let results = &reply["result"]["structuredContent"]["results"];
    assert_eq!(
        results[0]["content"], "The heron migration starts in May.",
        "{reply}"
    );
    let listed = h.api("acme", member, "entities.list", json!({}));
    assert_eq!(listed.status, 200, "{}", listed.json);
    let names: Vec<&str> = listed.json["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["heron"]);
}

#[test]
fn an_org_exported_in_pages_imports_into_a_new_server_whole_and_only_once() {
    let (a, member) = source();
    let acme = OrgId::parse("acme").unwrap();
    let pages = export(a.lore.ports(), &acme, 5);
    assert!(pages.len() > 2, "small pages: {}", pages.len());
    let b = Harness::on(ports(Rc::new(MemoryStorage::new()), 4), "default");
    import(b.lore.ports(), &acme, &pages);
    answers_whole(&b, &member);
    // The server's own org is untouched, and the source's owner (a different local owner) is
    // a principal here too, with its token.
    assert_eq!(
        b.status(&b.owner, "search_memory", json!({"query": "heron"})),
        200
    );
    let (status, _) = b.rpc("/mcp/acme", &a.owner, "tools/list", json!({}));
    assert_eq!(status, 200);

    // Again: the org exists here now.
    let again = block_on(transfer::import_page(
        b.lore.ports(),
        &acme,
        pages[0].clone(),
        true,
        transfer::Credentials::Carry,
    ));
    assert_eq!(again.unwrap_err().code(), "conflict");
    // A key that is not one of acme's export is refused, and nothing of the page is written.
    let c = Harness::on(ports(Rc::new(MemoryStorage::new()), 5), "default");
    for stray in [
        "o/default/ev/x",
        "org/default",
        "member-of/usr_x/default",
        "oauth/client/x",
        "meta/local-owner",
    ] {
        let mut page = pages[0].clone();
        page.push((stray.to_string(), b"{}".to_vec()));
        let refused = block_on(transfer::import_page(
            c.lore.ports(),
            &acme,
            page,
            true,
            transfer::Credentials::Carry,
        ))
        .unwrap_err();
        assert_eq!(refused.code(), "invalid_argument", "{stray}");
    }
    assert!(
        block_on(c.lore.ports().storage.get("org/acme"))
            .unwrap()
            .is_none()
    );
}

/// The token (`lore_…` secret) `h` holds as its owner, and that owner's principal id.
fn owner_principal(h: &Harness) -> String {
    let r = h.api("default", &h.owner, "members.list", json!({}));
    r.json.as_array().unwrap()[0]["principal_id"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn an_import_leaves_credentials_unless_carried_and_carries_none_for_another_org() {
    let (a, member) = source();
    let acme = OrgId::parse("acme").unwrap();
    let pages = export(a.lore.ports(), &acme, 1_000);
    // Issued anew by default: the org's data arrives, its tokens and passwords do not.
    let b = Harness::on(ports(Rc::new(MemoryStorage::new()), 8), "default");
    let mut left = 0;
    for (i, page) in pages.iter().enumerate() {
        let done = block_on(transfer::import_page(
            b.lore.ports(),
            &acme,
            page.clone(),
            i == 0,
            transfer::Credentials::IssueAnew,
        ))
        .unwrap();
        left += done.credentials_left;
    }
    assert!(
        left >= 2,
        "the owner's and the member's tokens are left: {left}"
    );
    let (status, _) = b.rpc("/mcp/acme", &member, "tools/list", json!({}));
    assert_eq!(status, 401, "a token not carried does not work");
    let (status, reply) = b.rpc(
        "/mcp/acme",
        &b.owner,
        "tools/call",
        json!({"name": "search_memory", "arguments": {"query": "heron"}}),
    );
    assert_eq!(
        status, 403,
        "the importing server's owner is no member of acme: {reply}"
    );
}

#[test]
fn a_forged_import_file_creates_nothing_outside_its_org() {
    // The victim server: its own org and owner, with a sign-in password.
    let victim = Harness::on(ports(Rc::new(MemoryStorage::new()), 9), "default");
    let owner_id = owner_principal(&victim);
    let password_key = lore_base::keys::password(&owner_id);
    let password_before = block_on(victim.lore.ports().storage.get(&password_key)).unwrap();
    let principal_before = block_on(
        victim
            .lore
            .ports()
            .storage
            .get(&lore_base::keys::principal(&owner_id)),
    )
    .unwrap();
    let default = OrgId::parse("default").unwrap();
    let acme = OrgId::parse("acme").unwrap();
    let token = |id: &str, principal: &str, orgs: Vec<OrgId>| {
        serde_json::to_vec(&lore_base::model::TokenRecord {
            id: id.into(),
            principal: principal.into(),
            orgs,
            scopes: Scopes::ALL,
            created_at_ms: 0,
            expires_at_ms: None,
            revoked_at_ms: None,
            label: None,
            audience: None,
            client_id: None,
            grant: None,
        })
        .unwrap()
    };
    let forged_secret = "lore_forged_secret_that_the_attacker_knows";
    let forged_hash = lore_base::keys::sha256_hex(forged_secret);
    let org_record = json!({"id": "acme", "created_at_ms": 0, "owner": "usr_mallory"});
    let mallory = json!({"id": "usr_mallory", "kind": "user", "name": "m", "created_at_ms": 0});
    let page = |extra: Vec<(String, Vec<u8>)>| {
        let mut page = vec![
            (
                "org/acme".to_string(),
                serde_json::to_vec(&org_record).unwrap(),
            ),
            (
                "principal/usr_mallory".to_string(),
                serde_json::to_vec(&mallory).unwrap(),
            ),
            (
                "o/acme/member/usr_mallory".to_string(),
                serde_json::to_vec(
                    &json!({"principal": "usr_mallory", "role": "owner", "created_at_ms": 0}),
                )
                .unwrap(),
            ),
        ];
        page.extend(extra);
        page
    };
    // Each forged entry, carried or not, writes nothing that reaches past the org.
    type Entries = Vec<(String, Vec<u8>)>;
    let shapes: Vec<(&str, Entries)> = vec![
        // A token for the victim org, and one for acme and the victim org at once.
        (
            "a token for another org",
            vec![(
                format!("auth/token/{forged_hash}"),
                token("tok_forged", "usr_mallory", vec![default.clone()]),
            )],
        ),
        (
            "a token for the victim's owner",
            vec![(
                format!("auth/token/{forged_hash}"),
                token("tok_forged", &owner_id, vec![acme.clone()]),
            )],
        ),
        (
            "the victim owner's password",
            vec![(
                password_key.clone(),
                b"{\"hash\":\"$argon2id$forged\"}".to_vec(),
            )],
        ),
        (
            "the victim owner's principal",
            vec![(
                lore_base::keys::principal(&owner_id),
                serde_json::to_vec(
                    &json!({"id": owner_id, "kind": "user", "name": "pwned", "created_at_ms": 0}),
                )
                .unwrap(),
            )],
        ),
        (
            "an index entry that points at another org's token",
            vec![(
                "o/acme/token/tok_owner".to_string(),
                serde_json::to_vec(&json!({"hash": lore_base::keys::sha256_hex(&victim.owner)}))
                    .unwrap(),
            )],
        ),
    ];
    for (what, extra) in shapes {
        for credentials in [
            transfer::Credentials::IssueAnew,
            transfer::Credentials::Carry,
        ] {
            let store = victim.lore.ports();
            // A fresh copy of the org each time: remove what an earlier shape imported.
            for (key, _) in block_on(store.storage.scan_all("o/acme/")).unwrap() {
                block_on(store.storage.delete(&key)).unwrap();
            }
            block_on(store.storage.delete("org/acme")).unwrap();
            block_on(store.storage.delete("principal/usr_mallory")).unwrap();
            let _ = block_on(transfer::import_page(
                store,
                &acme,
                page(extra.clone()),
                true,
                credentials,
            ));
            let (status, _) = victim.rpc("/mcp/default", forged_secret, "tools/list", json!({}));
            assert_eq!(
                status, 401,
                "{what} ({credentials:?}): the forged token reaches no org"
            );
            let (status, _) = victim.rpc("/mcp/acme", forged_secret, "tools/list", json!({}));
            assert_eq!(status, 401, "{what} ({credentials:?}): nor acme");
            assert_eq!(
                block_on(store.storage.get(&password_key)).unwrap(),
                password_before,
                "{what} ({credentials:?}): the owner's password is unchanged"
            );
            assert_eq!(
                block_on(store.storage.get(&lore_base::keys::principal(&owner_id))).unwrap(),
                principal_before,
                "{what} ({credentials:?}): the owner's principal is unchanged"
            );
            // acme's token index holds only what this import rebuilt from tokens it carried.
            assert!(
                block_on(store.storage.get("o/acme/token/tok_owner"))
                    .unwrap()
                    .is_none(),
                "{what} ({credentials:?})"
            );
            assert_eq!(
                victim.status(&victim.owner, "search_memory", json!({"query": "x"})),
                200
            );
        }
    }
    // An org record for another org, and an agent of another org, are refused outright.
    for (key, value) in [
        (
            "org/acme",
            json!({"id": "default", "created_at_ms": 0, "owner": "usr_mallory"}),
        ),
        (
            "principal/agt_x",
            json!({"id": "agt_x", "kind": "agent", "name": "x", "created_at_ms": 0, "org": "default"}),
        ),
    ] {
        let c = Harness::on(ports(Rc::new(MemoryStorage::new()), 10), "default");
        let refused = block_on(transfer::import_page(
            c.lore.ports(),
            &acme,
            vec![(key.to_string(), serde_json::to_vec(&value).unwrap())],
            true,
            transfer::Credentials::Carry,
        ))
        .unwrap_err();
        assert_eq!(refused.code(), "invalid_argument", "{key}");
    }
}

#[test]
fn a_move_in_copies_an_org_from_the_store_it_lived_in_into_its_own() {
    let (old, member) = source();
    let acme = OrgId::parse("acme").unwrap();
    // The new layout: the directory keeps its keys; acme's store starts empty.
    let directory = Rc::new(MemoryStorage::new());
    let mut batch = Batch::new();
    for (key, value) in block_on(old.lore.ports().storage.scan_all("")).unwrap() {
        if !key.starts_with("o/") {
            batch.put(key, value);
        }
    }
    block_on(directory.commit(batch)).unwrap();
    let split = Rc::new(SplitStorage::new(directory, Rc::new(MemoryOrgs::default())));
    let new = Harness::on(ports(split, 6), "acme");
    assert_ne!(
        new.status(&member, "search_memory", json!({"query": "heron"})),
        500,
        "before the move the org answers, empty"
    );
    let former = old.lore.ports().storage.clone();
    let mut after = None;
    let mut moved = 0;
    loop {
        let page = block_on(transfer::move_in_page(
            new.lore.ports(),
            former.as_ref(),
            &acme,
            after.as_deref(),
        ))
        .unwrap();
        moved += page.entries.len();
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert!(moved > 10, "{moved}");
    answers_whole(&new, &member);
    // Once the org has its history in its own store, a second move-in is refused.
    let again = block_on(transfer::move_in_page(
        new.lore.ports(),
        former.as_ref(),
        &acme,
        None,
    ));
    assert_eq!(again.unwrap_err().code(), "conflict");
}

#[test]
fn export_pages_are_bounded_by_bytes_and_still_carry_the_whole_org() {
    let (a, member) = source();
    let acme = OrgId::parse("acme").unwrap();
    // About 2 MB of memories: more than one page's bytes, fewer keys than one page's count.
    let filler = "lorem ipsum dolor sit amet ".repeat(700);
    for i in 0..100 {
        a.save(&member, json!({"content": format!("Note {i}: {filler}")}));
    }
    let pages = export(a.lore.ports(), &acme, transfer::MAX_PAGE);
    assert!(pages.len() >= 2, "{} pages", pages.len());
    for page in &pages {
        let bytes: usize = page.iter().map(|(k, v)| k.len() + v.len()).sum();
        let largest = page
            .iter()
            .map(|(k, v)| k.len() + v.len())
            .max()
            .unwrap_or(0);
        assert!(bytes < transfer::PAGE_BYTES + largest, "{bytes} bytes");
    }
    let b = Harness::on(ports(Rc::new(MemoryStorage::new()), 7), "default");
    import(b.lore.ports(), &acme, &pages);
    // Every key of the org's store arrived, as it was (the stamp is renewed on the way in).
    let stamp = lore_base::keys::OrgKeys::new(&acme).auth_stamp();
    let rows = |h: &Harness| {
        block_on(h.lore.ports().storage.scan_all("o/acme/"))
            .unwrap()
            .into_iter()
            .filter(|(k, _)| *k != stamp)
            .collect::<Vec<_>>()
    };
    assert!(rows(&b) == rows(&a), "the stores differ");
    answers_whole(&b, &member);
}
