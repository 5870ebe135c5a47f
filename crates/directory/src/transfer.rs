//! Moving an org between servers: its keys read out in pages ([`export_page`]) and written into
//! another server's store ([`import_page`]), and an org's rows of a store it no longer lives in
//! copied into its own ([`move_in_page`], for a Workers deployment made before org objects).
//!
//! An export holds the org's own store (`o/{org}/…`: memories, records, indexes, usage) and the
//! directory entries that belong to it: its record, its members' principals, membership marks
//! and local sign-in passwords, its tokens, and its pending invites. What belongs to a server
//! rather than an org stays: OAuth clients and grants (a token issued through a grant is left
//! out; its client signs in again), upstream identities (a person who signs in with GitHub or
//! OIDC on the new server is linked again by an invite), and the local owner.

use lore_base::error::{LoreError, Result};
use lore_base::ids::OrgId;
use lore_base::keys::{self, OrgKeys};
use lore_base::model::{Membership, TokenIndexEntry, TokenRecord};
use lore_base::ports::Ports;
use lore_base::storage::{Batch, ScanPage, Storage};

/// The most keys of the org's store a page holds.
pub const MAX_PAGE: usize = 1_000;

/// About how many bytes (keys and values) an export page holds: it ends after the entry that
/// reaches this, so a page of large events stays well inside a request body (base64 in JSON).
pub const PAGE_BYTES: usize = 1 << 20;

/// The most bytes an import page may hold (a first page also carries the directory entries).
pub const MAX_IMPORT_BYTES: usize = 8 * PAGE_BYTES;

fn size(entries: &[(String, Vec<u8>)]) -> usize {
    entries.iter().map(|(k, v)| k.len() + v.len()).sum()
}

/// One page of entries, and where the next starts (`None`: this was the last).
#[derive(Debug, Default)]
pub struct Page {
    pub entries: Vec<(String, Vec<u8>)>,
    pub next: Option<String>,
}

/// One page of `org`'s export. The first (`after: None`) starts with the org's directory
/// entries; every page then holds up to `limit` keys of the org's store after `after`.
pub async fn export_page(
    ports: &Ports,
    org: &OrgId,
    after: Option<&str>,
    limit: usize,
) -> Result<Page> {
    let mut entries = Vec::new();
    if after.is_none() {
        if ports.storage.get(&keys::org(org)).await?.is_none() {
            return Err(LoreError::not_found(format!("org {org}")));
        }
        entries = directory_entries(ports, org).await?;
    }
    let page = ports
        .storage
        .scan(OrgKeys::new(org).root(), after, limit.clamp(1, MAX_PAGE))
        .await?;
    let next = fill(&mut entries, page);
    Ok(Page { entries, next })
}

/// Adds `page`'s entries to `entries` until they hold [`PAGE_BYTES`] (at least one entry);
/// returns where the next page starts.
fn fill(entries: &mut Vec<(String, Vec<u8>)>, page: ScanPage) -> Option<String> {
    let mut bytes = size(entries);
    let mut stored = page.entries.into_iter();
    for (key, value) in stored.by_ref() {
        bytes += key.len() + value.len();
        entries.push((key, value));
        if bytes >= PAGE_BYTES {
            break;
        }
    }
    if stored.len() > 0 {
        // Cut short by size: the next page starts after the last entry of this one.
        return entries.last().map(|(k, _)| k.clone());
    }
    page.cursor
}

/// The directory entries that belong to `org` (see the module's text).
async fn directory_entries(ports: &Ports, org: &OrgId) -> Result<Vec<(String, Vec<u8>)>> {
    let org_keys = OrgKeys::new(org);
    let mut wanted = vec![keys::org(org)];
    for (_, bytes) in ports.storage.scan_all(&org_keys.members()).await? {
        let m: Membership = serde_json::from_slice(&bytes)?;
        wanted.push(keys::principal(&m.principal));
        wanted.push(keys::member_of(&m.principal, org));
        wanted.push(keys::password(&m.principal));
    }
    for (key, _) in ports.storage.scan_all(&org_keys.invites()).await? {
        let hash = key.rsplit('/').next().unwrap_or_default();
        wanted.push(format!("invite/{hash}/{org}"));
    }
    let mut out = Vec::new();
    for (key, _) in ports.storage.scan_all(&org_keys.tokens()).await? {
        let Some(entry) = ports.record::<TokenIndexEntry>(&key).await? else {
            continue;
        };
        let token_key = keys::token_by_hash(&entry.hash);
        let Some(bytes) = ports.storage.get(&token_key).await? else {
            continue;
        };
        let token: TokenRecord = serde_json::from_slice(&bytes)?;
        if token.grant.is_none() {
            out.push((token_key, bytes));
        }
    }
    for (key, value) in wanted.iter().zip(ports.storage.get_many(&wanted).await?) {
        if let Some(value) = value {
            out.push((key.clone(), value));
        }
    }
    Ok(out)
}

/// Writes one page of an export of `org` into this server. The first page (`first`) is
/// refused unless the org is new here (no record, nothing in its store): an import never
/// mixes two copies of an org. Every key must be one an export of `org` holds; principals
/// already here are kept (they are never rewritten). The org's auth stamp is renewed, so no
/// copy of its record or credentials read before stays trusted.
pub async fn import_page(
    ports: &Ports,
    org: &OrgId,
    entries: Vec<(String, Vec<u8>)>,
    first: bool,
) -> Result<usize> {
    if size(&entries) > MAX_IMPORT_BYTES {
        return Err(LoreError::invalid(
            "entries",
            format!(
                "a page holds at most {MAX_IMPORT_BYTES} bytes of keys and values; send smaller pages"
            ),
        ));
    }
    if first {
        require_new(ports, org).await?;
    }
    for (key, _) in &entries {
        if !belongs_to(key, org) {
            return Err(LoreError::invalid(
                "entries",
                format!("{key:?} is not a key of an export of org {org}"),
            ));
        }
    }
    let principals: Vec<String> = entries
        .iter()
        .filter(|(k, _)| k.starts_with("principal/"))
        .map(|(k, _)| k.clone())
        .collect();
    let present = ports.storage.get_many(&principals).await?;
    let kept: Vec<&String> = principals
        .iter()
        .zip(present)
        .filter(|(_, v)| v.is_some())
        .map(|(k, _)| k)
        .collect();
    let mut batch = Batch::new();
    let mut written = 0;
    for (key, value) in entries {
        if kept.contains(&&key) {
            continue;
        }
        batch.put(key, value);
        written += 1;
    }
    crate::stamp::renew(ports, &mut batch, [org]);
    let scheduled = index_schedules(ports, &mut batch, org);
    ports.storage.commit(batch).await?;
    wake_scheduled(ports, org, scheduled);
    Ok(written)
}

/// Adds the org to the index of orgs with schedules when `batch` writes one of its
/// behaviors' next runs (`lore_engine::runs::schedules`); says whether it did.
fn index_schedules(ports: &Ports, batch: &mut Batch, org: &OrgId) -> bool {
    let prefix = OrgKeys::new(org).schedules();
    let any = batch.writes.iter().any(|w| match w {
        lore_base::storage::Write::Put(k, _) => k.starts_with(&prefix),
        lore_base::storage::Write::Delete(_) => false,
    });
    if any {
        batch.put(keys::scheduled_org(org), ports.random_hex(8).into_bytes());
    }
    any
}

/// Asks the host to run the org's schedules now (they come with their stored due times).
fn wake_scheduled(ports: &Ports, org: &OrgId, scheduled: bool) {
    if let (true, Some(background)) = (scheduled, &ports.background) {
        background.wake(org.as_str(), ports.clock.now_ms());
    }
}

/// Refuses an org that this server already has.
async fn require_new(ports: &Ports, org: &OrgId) -> Result<()> {
    let record = ports.storage.get(&keys::org(org)).await?;
    let stored = ports
        .storage
        .scan(OrgKeys::new(org).root(), None, 1)
        .await?;
    if record.is_some() || !stored.entries.is_empty() {
        return Err(LoreError::Conflict(format!(
            "org {org} already exists here; an import makes a new org (choose another server, or remove this one first)"
        )));
    }
    Ok(())
}

/// Whether `key` is one an export of `org` may hold.
fn belongs_to(key: &str, org: &OrgId) -> bool {
    let org = org.as_str();
    let own = |rest: &str| {
        rest.rsplit_once('/')
            .is_some_and(|(_, last)| last == org && !rest.is_empty())
    };
    if keys::org_of_key(key) == Some(org) {
        return true;
    }
    if let Some(rest) = key.strip_prefix("org/") {
        return rest == org;
    }
    if let Some(rest) = key.strip_prefix("member-of/") {
        return own(rest) && rest.matches('/').count() == 1;
    }
    if let Some(rest) = key.strip_prefix("invite/") {
        return own(rest) && rest.matches('/').count() == 1;
    }
    ["principal/", "auth/password/", "auth/token/"]
        .iter()
        .any(|p| {
            key.strip_prefix(p)
                .is_some_and(|id| !id.is_empty() && !id.contains('/'))
        })
}

/// Copies one page of `org`'s keys from `from` (a store the org no longer lives in) into its
/// own store, after `after`. The first page (`after: None`) is refused once the org's own
/// store holds memories or records (two histories would collide); what requests leave there
/// meanwhile (usage counts) is overwritten. The rows in `from` stay until the operator deletes
/// them.
pub async fn move_in_page(
    ports: &Ports,
    from: &dyn Storage,
    org: &OrgId,
    after: Option<&str>,
) -> Result<Page> {
    let root = OrgKeys::new(org).root().to_string();
    if after.is_none() {
        if ports.storage.get(&keys::org(org)).await?.is_none() {
            return Err(LoreError::not_found(format!("org {org}")));
        }
        let own = OrgKeys::new(org);
        let history = ports
            .storage
            .get_many(&[own.events_seq(), own.records_version()])
            .await?;
        if history.iter().any(Option::is_some) {
            return Err(LoreError::Conflict(format!(
                "org {org} already has memories or records in its own store (moved in, or used since the upgrade); its old rows are left as they are"
            )));
        }
    }
    let mut entries = Vec::new();
    let next = fill(&mut entries, from.scan(&root, after, MAX_PAGE).await?);
    let mut batch = Batch::new();
    for (key, value) in &entries {
        batch.put(key.clone(), value.clone());
    }
    if next.is_none() {
        crate::stamp::renew(ports, &mut batch, [org]);
    }
    let scheduled = index_schedules(ports, &mut batch, org);
    if !batch.is_empty() {
        ports.storage.commit(batch).await?;
    }
    wake_scheduled(ports, org, scheduled);
    Ok(Page { entries, next })
}
