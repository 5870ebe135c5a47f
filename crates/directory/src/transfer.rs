//! Moving an org between servers: its keys read out in pages ([`export_page`]) and written into
//! another server's store ([`import_page`]), and an org's rows of a store it no longer lives in
//! copied into its own ([`move_in_page`], for a Workers deployment made before org objects).
//!
//! An export holds the org's own store (`o/{org}/…`: memories, records, indexes, usage) and the
//! directory entries that belong to it: its record, its members' principals, membership marks
//! and local sign-in passwords, its tokens, and its pending invites. What belongs to a server
//! rather than an org stays: OAuth clients and grants (a token issued through a grant is left
//! out; its client signs in again), upstream identities (a person who signs in with GitHub or
//! OIDC on the new server is linked again by an invite), and the local owner. An import trusts
//! none of it: see [`import_page`].

use lore_base::error::{LoreError, Result};
use lore_base::ids::OrgId;
use lore_base::keys::{self, OrgKeys};
use lore_base::model::{Membership, Org, Principal, PrincipalKind, TokenIndexEntry, TokenRecord};
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
    let own = OrgKeys::new(org);
    let mut page = ports
        .storage
        .scan(own.root(), after, limit.clamp(1, MAX_PAGE))
        .await?;
    // Who drains the embedding queue now is this server's business, not the org's: the queue
    // itself travels, and the importing server drains it.
    let lease = own.embed_lease();
    page.entries.retain(|(key, _)| *key != lease);
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

/// Whether an import carries the credentials an export holds (its tokens and local sign-in
/// passwords) or leaves them, so that they are issued anew on this server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Credentials {
    /// Tokens and passwords are left out (the default): the org's people sign in again and its
    /// agents get new tokens (`lore token create`).
    #[default]
    IssueAnew,
    /// The operator vouches for this file: a token is carried if it reaches the imported org
    /// (and only it, from then on) and belongs to a principal this import creates; a password
    /// only for a user this import creates. Neither ever replaces one already here.
    Carry,
}

/// What one page of an import did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Imported {
    /// Keys written.
    pub written: usize,
    /// Principals the file holds that this server already has, kept as they are here.
    pub kept: usize,
    /// Tokens and passwords the file holds that were not carried.
    pub credentials_left: usize,
}

/// What an entry of an import is, by what it names and holds (not by the shape of its key
/// alone): each kind has its own rule in [`import_page`].
enum Entry {
    /// A key of the org's own store.
    OrgData,
    /// Kept from the org's store only as this server rebuilds it (the token index, from the
    /// tokens carried; the auth stamp, renewed; legacy MCP sessions and the embedding queue's
    /// lease, never carried).
    Derived,
    OrgRecord,
    Principal(Principal),
    /// `member-of/{principal}/{org}` and `invite/{hash}/{org}`: marks of the org's own.
    Mark,
    Password {
        principal: String,
    },
    Token(TokenRecord),
}

fn refused(key: &str, org: &OrgId, why: &str) -> LoreError {
    LoreError::invalid(
        "entries",
        format!("{key:?} cannot be imported into org {org}: {why}"),
    )
}

/// What `key` (holding `value`) is in an import of `org`, or why it cannot be one.
fn classify(org: &OrgId, key: &str, value: &[u8]) -> Result<Entry> {
    let own = OrgKeys::new(org);
    if keys::org_of_key(key) == Some(org.as_str()) {
        let derived = [
            own.tokens(),
            own.auth_stamp(),
            own.session(""),
            own.embed_lease(),
        ];
        return Ok(if derived.iter().any(|p| key.starts_with(p.as_str())) {
            Entry::Derived
        } else {
            Entry::OrgData
        });
    }
    let parse_err = |what: &str| refused(key, org, &format!("its value is not {what}"));
    if key == keys::org(org) {
        let record: Org = serde_json::from_slice(value).map_err(|_| parse_err("an org record"))?;
        if record.id != *org {
            return Err(refused(key, org, "the record names another org"));
        }
        return Ok(Entry::OrgRecord);
    }
    let single = |rest: &str| !rest.is_empty() && !rest.contains('/');
    if let Some(id) = key.strip_prefix("principal/").filter(|id| single(id)) {
        let p: Principal = serde_json::from_slice(value).map_err(|_| parse_err("a principal"))?;
        if p.id != id {
            return Err(refused(key, org, "the record names another principal"));
        }
        if p.kind == PrincipalKind::Agent && p.org.as_ref() != Some(org) {
            return Err(refused(
                key,
                org,
                "an agent belongs to its own org, and this one to another",
            ));
        }
        return Ok(Entry::Principal(p));
    }
    for mark in ["member-of/", "invite/"] {
        if let Some((first, last)) = key.strip_prefix(mark).and_then(|r| r.split_once('/'))
            && single(first)
            && last == org.as_str()
        {
            return Ok(Entry::Mark);
        }
    }
    if let Some(id) = key.strip_prefix("auth/password/").filter(|id| single(id)) {
        return Ok(Entry::Password {
            principal: id.to_string(),
        });
    }
    if key.strip_prefix("auth/token/").is_some_and(single) {
        let t: TokenRecord = serde_json::from_slice(value).map_err(|_| parse_err("a token"))?;
        return Ok(Entry::Token(t));
    }
    Err(refused(
        key,
        org,
        "it is not a key an export of an org holds",
    ))
}

/// Writes one page of an export of `org` into this server. The first page (`first`) is
/// refused unless the org is new here (no record, nothing in its store): an import never
/// mixes two copies of an org.
///
/// An import file is not trusted: it creates only the imported org's data. Every entry is
/// classified by what it names and holds (`classify`): the org's store and records naming
/// `org`; principals only where this server has none of that id (existing ones are never
/// rewritten; an agent only of this org); marks of this org. Credentials are issued anew
/// unless the operator says [`Credentials::Carry`] for the file, and even then a token is
/// carried only if it reaches `org` (narrowed to it), belongs to a principal this page creates
/// and replaces none here, and a password only for a user this page creates. The org's token
/// index is rebuilt from the tokens carried, and its auth stamp renewed, so no copy of its
/// record or credentials read before stays trusted.
pub async fn import_page(
    ports: &Ports,
    org: &OrgId,
    entries: Vec<(String, Vec<u8>)>,
    first: bool,
    credentials: Credentials,
) -> Result<Imported> {
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
    let mut classified = Vec::with_capacity(entries.len());
    for (key, value) in entries {
        let entry = classify(org, &key, &value)?;
        classified.push((key, value, entry));
    }
    // Principals this page would create: those this server does not have yet.
    let principal_keys: Vec<String> = classified
        .iter()
        .filter(|(_, _, e)| matches!(e, Entry::Principal(_)))
        .map(|(k, _, _)| k.clone())
        .collect();
    let present = ports.storage.get_many(&principal_keys).await?;
    let created: Vec<&Principal> = classified
        .iter()
        .filter_map(|(_, _, e)| match e {
            Entry::Principal(p) => Some(p),
            _ => None,
        })
        .zip(&present)
        .filter(|(_, here)| here.is_none())
        .map(|(p, _)| p)
        .collect();
    let mut outcome = Imported::default();
    let creates = |id: &str, user_only: bool| {
        created
            .iter()
            .any(|p| p.id == id && (!user_only || p.kind == PrincipalKind::User))
    };
    let mut batch = Batch::new();
    for (key, value, entry) in &classified {
        match entry {
            Entry::OrgData | Entry::OrgRecord | Entry::Mark => {
                batch.put(key.clone(), value.clone());
                outcome.written += 1;
            }
            Entry::Derived => {}
            Entry::Principal(p) => {
                if creates(&p.id, false) {
                    batch
                        .require_absent(key.clone())
                        .put(key.clone(), value.clone());
                    outcome.written += 1;
                } else {
                    outcome.kept += 1;
                }
            }
            Entry::Password { principal } => {
                if credentials == Credentials::Carry && creates(principal, true) {
                    batch
                        .require_absent(key.clone())
                        .put(key.clone(), value.clone());
                    outcome.written += 1;
                } else {
                    outcome.credentials_left += 1;
                }
            }
            Entry::Token(t) => {
                let carried = credentials == Credentials::Carry
                    && t.orgs.contains(org)
                    && t.grant.is_none()
                    && creates(&t.principal, false);
                if !carried {
                    outcome.credentials_left += 1;
                    continue;
                }
                let hash = key.strip_prefix("auth/token/").unwrap_or_default();
                let mut narrowed = t.clone();
                narrowed.orgs = vec![org.clone()];
                batch
                    .require_absent(key.clone())
                    .put(key.clone(), serde_json::to_vec(&narrowed)?)
                    .require_absent(OrgKeys::new(org).token(&t.id))
                    .put(
                        OrgKeys::new(org).token(&t.id),
                        serde_json::to_vec(&TokenIndexEntry {
                            hash: hash.to_string(),
                        })?,
                    );
                outcome.written += 1;
            }
        }
    }
    crate::stamp::renew(ports, &mut batch, [org]);
    let scheduled = index_schedules(ports, &mut batch, org);
    ports.storage.commit(batch).await.map_err(|e| match e {
        lore_base::storage::StorageError::Conflict { .. } => LoreError::Conflict(
            "the import would replace a principal, token or password this server already has; nothing of this page was written".into(),
        ),
        other => other.into(),
    })?;
    wake_scheduled(ports, org, scheduled);
    Ok(outcome)
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
