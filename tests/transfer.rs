//! Moving an org between servers (`lore_directory::transfer`): an export read in pages and
//! imported into another server brings the whole org (memories, records, members, tokens); an
//! import never lands on an org the server has; and a move-in copies an org's rows from the
//! store it used to live in (a Workers deployment's D1 before org objects) into its own.

mod common;

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

/// Imports every page of an export, the first as the first.
fn import(ports: &Ports, org: &OrgId, pages: &[Vec<(String, Vec<u8>)>]) {
    for (i, page) in pages.iter().enumerate() {
        block_on(transfer::import_page(ports, org, page.clone(), i == 0)).unwrap();
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
        let refused =
            block_on(transfer::import_page(c.lore.ports(), &acme, page, true)).unwrap_err();
        assert_eq!(refused.code(), "invalid_argument", "{stray}");
    }
    assert!(
        block_on(c.lore.ports().storage.get("org/acme"))
            .unwrap()
            .is_none()
    );
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
