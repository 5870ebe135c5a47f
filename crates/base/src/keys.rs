//! The storage key layout, in one place. Everything an org owns lives under `o/{org}/`; the few
//! global keys are identity indexes that must be read before an org is known (a token's hash, a
//! principal, the list of orgs).
//!
//! ```text
//! meta/local-owner              principal id of the local owner (`lore init`)
//! meta/local-org                the org `lore init` created
//! meta/request-state-key        the key that signs MRTR `requestState` (conformance fixtures)
//! org/{org}                     Org
//! principal/{id}                Principal
//! auth/token/{sha256}           TokenRecord (looked up by the presented secret's hash)
//! o/{org}/member/{principal}    Membership
//! o/{org}/token/{token id}      sha256 of that token (listing and revocation)
//! o/{org}/ev/{ulid}             Event
//! o/{org}/idem/{sha256(key)}    IdempotencyRecord of a save_memory call
//! o/{org}/do/{sha256(principal, key)}  the step journal of `do` runs with an idempotency key
//! o/{org}/meta/events-seq       the org's event sequence number (commit order)
//! o/{org}/evseq/{n:020}         ulid of the event with sequence number n
//! o/{org}/meta/records-version  changes with every entity or relationship write (SQL cache)
//! o/{org}/meta/auth-stamp  changes when access to the org may end or its record changes
//!                               (cached directory records are checked against it)
//! o/{org}/session/{id}          Session (legacy MCP sessions)
//! o/{org}/type/{name}           EntityType (template)
//! o/{org}/ent/{ulid}            Entity
//! o/{org}/ent-t/{type}/{ulid}   the same Entity, listed by type (written in the same batch)
//! o/{org}/rel/{ulid}            Relationship
//! o/{org}/rel-out/{from}/{ulid} the same Relationship, listed by source entity
//! o/{org}/rel-in/{to}/{ulid}    the same Relationship, listed by target entity
//! o/{org}/feed/{name}           Feed
//! o/{org}/conn/{name}           Connection (without its secret)
//! o/{org}/secret/{kind}/{name}  a connection's credential or a webhook feed's signing secret;
//!                               read only to sign or verify, never returned
//! o/{org}/origin/{feed}/{hash}  event id of a feed delivery (dedupe by delivery id)
//! o/{org}/op/{name}             Operation
//! o/{org}/beh/{name}            Behavior
//! o/{org}/act/{ulid}            Action (audit record)
//! o/{org}/metric/{name}         org-defined Metric
//! o/{org}/usage/{day}/{tool}/{instance}  usage counters flushed by one core instance
//! member-of/{principal}/{org}   the orgs a principal belongs to (organizations.list)
//! auth/password/{principal}     PasswordRecord: the argon2 hash of a local sign-in password
//! auth/sessions/{principal}     the principal's browser-session epoch: sessions signed in under
//!                               an older one are over (password change, sign out everywhere)
//! identity/{provider}/{sha256(subject)}  principal id of an upstream identity (GitHub, OIDC)
//! invite/{sha256(identity)}/{org}  Invite: a pending membership for a person not yet signed in
//! known/{sha256(identity)}      principal id last seen signing in with that identity
//! o/{org}/invite/{sha256(identity)}  the same Invite, listed under its org
//! oauth/client/{client id}      RegisteredClient (dynamic client registration, RFC 7591)
//! oauth/cimd/{sha256(url)}      CachedClientDocument: a fetched client ID metadata document
//! oauth/request/{id}            PendingAuthorization between /oauth/authorize and consent
//! oauth/session/{sha256}        BrowserSession of the sign-in, consent and token pages
//! oauth/code/{sha256}           AuthorizationCode (single use, kept marked after use)
//! oauth/grant/{id}              Grant: one consent's token family (revoking it ends them all)
//! oauth/refresh/{sha256}        RefreshToken of a grant (rotated; reuse revokes the grant)
//! oauth/user-grant/{principal}/{grant}  the grants a principal approved (token page)
//! exp/{ms:013}/{key}            the record at `key` ends at `ms` (`storage::expiring`)
//! ```
//!
//! Keys of the cache port (`Ports::cache`), a separate store holding copies, never the truth:
//!
//! ```text
//! cred/{sha256}                 a verified TokenRecord and its Principal, with the org and its
//!                               auth stamp they were verified under (tokens::verify_token)
//! route/{sha256}                the only org of a token, which never changes (Lore::home_org)
//! ```

use sha2::{Digest, Sha256};

use crate::ids::OrgId;

/// SHA-256 of `text`, lowercase hex: how secrets and caller-chosen keys enter the key space.
pub fn sha256_hex(text: &str) -> String {
    sha256_hex_bytes(text.as_bytes())
}

/// The SHA-256 of `bytes`, in lowercase hex (stored segments' and snapshots' checksums).
pub fn sha256_hex_bytes(bytes: &[u8]) -> String {
    to_hex(&Sha256::digest(bytes))
}

/// `bytes` as lowercase hexadecimal, for crates without their own `hex` dependency (token
/// hashes and request ids are made on every request, so it does not format byte by byte).
pub fn to_hex(bytes: &[u8]) -> String {
    hex::encode(bytes)
}

pub const LOCAL_OWNER: &str = "meta/local-owner";
/// The org `lore init` created: the local owner's org when none is named.
pub const LOCAL_ORG: &str = "meta/local-org";
pub const ORG_PREFIX: &str = "org/";
/// The HMAC key of the conformance fixtures' `requestState` (stored so any instance verifies).
pub const REQUEST_STATE_KEY: &str = "meta/request-state-key";

pub fn org(org: &OrgId) -> String {
    format!("org/{org}")
}
pub fn principal(id: &str) -> String {
    format!("principal/{id}")
}
/// The cache entry of a verified token (see `tokens::verify_token`), trusted while its org's
/// auth stamp is unchanged.
pub fn cached_credential(hash: &str) -> String {
    format!("cred/{hash}")
}
/// The index of orgs that have schedules (`sched/{org}`): the directory's list of which orgs
/// a pass over every org's due schedules visits. Its value is a random marker, so removing an
/// entry that a new schedule re-added in the meantime fails its precondition.
pub fn scheduled_org(org: &OrgId) -> String {
    format!("{SCHEDULED_ORGS}{org}")
}
pub const SCHEDULED_ORGS: &str = "sched/";
/// The cache entry of the org a token routes to (see `Lore::home_org`).
pub fn token_route(hash: &str) -> String {
    format!("route/{hash}")
}
pub fn token_by_hash(hash: &str) -> String {
    format!("auth/token/{hash}")
}
/// Marks `principal` as a member of `org`; written and deleted with the membership.
pub fn member_of(principal: &str, org: &OrgId) -> String {
    format!("member-of/{principal}/{org}")
}
pub fn member_of_all(principal: &str) -> String {
    format!("member-of/{principal}/")
}

/// The argon2 password hash of a principal who signs in locally (the local owner).
pub fn password(principal: &str) -> String {
    format!("auth/password/{principal}")
}
/// The principal an upstream identity (`github`, an OIDC issuer) maps to.
pub fn identity(provider: &str, subject: &str) -> String {
    format!("identity/{provider}/{}", sha256_hex(subject))
}
/// A pending invite of `identity` (e.g. `github:octocat`, `email:a@b.c`) to `org`.
pub fn invite(identity: &str, org: &OrgId) -> String {
    format!(
        "invite/{}/{org}",
        sha256_hex(&identity.to_ascii_lowercase())
    )
}
pub fn invites_of(identity: &str) -> String {
    format!("invite/{}/", sha256_hex(&identity.to_ascii_lowercase()))
}
/// The principal that signed in with `identity` (`github:login`, `email:address`).
pub fn known_identity(identity: &str) -> String {
    format!("known/{}", sha256_hex(&identity.to_ascii_lowercase()))
}
pub fn oauth_client(client_id: &str) -> String {
    format!("oauth/client/{client_id}")
}
/// Where the index of records that end starts (`storage::expiring`).
pub const EXPIRY_PREFIX: &str = "exp/";

/// The index entry saying the record at `key` ends at `at_ms` (sorted by time).
pub fn expiry(at_ms: i64, key: &str) -> String {
    format!("{EXPIRY_PREFIX}{:013}/{key}", at_ms.max(0))
}

/// The time and key of an index entry made by [`expiry`].
pub fn parse_expiry(entry: &str) -> Option<(i64, &str)> {
    let (at, key) = entry.strip_prefix(EXPIRY_PREFIX)?.split_once('/')?;
    Some((at.parse().ok()?, key))
}

pub fn oauth_client_document(url: &str) -> String {
    format!("oauth/cimd/{}", sha256_hex(url))
}
pub fn oauth_request(id: &str) -> String {
    format!("oauth/request/{id}")
}
/// The browser-session epoch of a principal.
pub fn session_epoch(principal: &str) -> String {
    format!("auth/sessions/{principal}")
}
pub fn oauth_session(secret: &str) -> String {
    format!("oauth/session/{}", sha256_hex(secret))
}
pub fn oauth_code(code: &str) -> String {
    format!("oauth/code/{}", sha256_hex(code))
}
pub fn oauth_grant(id: &str) -> String {
    format!("oauth/grant/{id}")
}
pub fn oauth_refresh(token: &str) -> String {
    format!("oauth/refresh/{}", sha256_hex(token))
}
pub fn oauth_user_grant(principal: &str, grant: &str) -> String {
    format!("oauth/user-grant/{principal}/{grant}")
}
pub fn oauth_user_grants(principal: &str) -> String {
    format!("oauth/user-grant/{principal}/")
}

/// What a scan prefix covers: the directory (every key outside `o/`), one org's keys, or
/// the keys of several orgs (`""`, `"o"`, `"o/"`, a partial org name).
#[derive(Debug, PartialEq, Eq)]
pub enum OrgSpan<'a> {
    Directory,
    Org(&'a str),
    Several,
}

/// The org whose keys `key` is one of (`o/{org}/…`), or `None` for a directory key.
pub fn org_of_key(key: &str) -> Option<&str> {
    let rest = key.strip_prefix("o/")?;
    rest.split_once('/').map(|(org, _)| org)
}

/// Which stores a scan of `prefix` reads (see [`OrgSpan`]).
pub fn org_of_prefix(prefix: &str) -> OrgSpan<'_> {
    if let Some(org) = org_of_key(prefix) {
        return OrgSpan::Org(org);
    }
    if prefix.starts_with("o/") || "o/".starts_with(prefix) {
        OrgSpan::Several
    } else {
        OrgSpan::Directory
    }
}

/// Keys under one org. Built for an org a caller was authenticated for, or that an operator
/// or a stored record (a grant, an invite, a behavior) names: never from a request's own text.
#[derive(Debug, Clone)]
pub struct OrgKeys {
    root: String,
}

impl OrgKeys {
    pub fn new(org: &OrgId) -> Self {
        Self {
            root: format!("o/{org}/"),
        }
    }
    /// The prefix of every key of the org (`o/{org}/`): names the org in per-org state.
    pub fn root(&self) -> &str {
        &self.root
    }
    pub fn member(&self, principal: &str) -> String {
        format!("{}member/{principal}", self.root)
    }
    pub fn members(&self) -> String {
        format!("{}member/", self.root)
    }
    pub fn token(&self, token_id: &str) -> String {
        format!("{}token/{token_id}", self.root)
    }
    pub fn tokens(&self) -> String {
        format!("{}token/", self.root)
    }
    pub fn event(&self, ulid: &str) -> String {
        format!("{}ev/{ulid}", self.root)
    }
    pub fn events(&self) -> String {
        format!("{}ev/", self.root)
    }
    /// The number of events ever added to the org; bumped, with a precondition, in the same
    /// batch as the events, so it orders them by commit.
    pub fn events_seq(&self) -> String {
        format!("{}meta/events-seq", self.root)
    }
    /// The event with sequence number `n` (zero-padded so keys sort numerically).
    pub fn event_seq(&self, n: u64) -> String {
        format!("{}evseq/{n:020}", self.root)
    }
    pub fn event_seqs(&self) -> String {
        format!("{}evseq/", self.root)
    }
    /// The stored embedding of event `ulid` by the model whose id hashes to `model`.
    pub fn vector(&self, model: &str, ulid: &str) -> String {
        format!("{}vec/{model}/{ulid}", self.root)
    }
    pub fn vectors(&self, model: &str) -> String {
        format!("{}vec/{model}/", self.root)
    }
    /// A memory saved without its vectors: the background embedder's queue (written in the
    /// save's batch, deleted in the batch that stores the vectors), so a pending embedding
    /// outlives a crash.
    pub fn embed_queued(&self, ulid: &str) -> String {
        format!("{}embq/{ulid}", self.root)
    }
    pub fn embed_queue(&self) -> String {
        format!("{}embq/", self.root)
    }
    /// Who is working the org's embedding queue, and until when (one drain at a time, across
    /// threads, processes and instances).
    pub fn embed_lease(&self) -> String {
        format!("{}meta/embed-lease", self.root)
    }
    /// Every vector index snapshot earlier versions stored (`lore reindex` deletes them).
    pub fn old_vector_snapshots(&self) -> String {
        format!("{}vsnap/", self.root)
    }
    /// The keyword index's segment manifest: which stored segments make the index, in order.
    pub fn keyword_manifest(&self) -> String {
        format!("{}kidx/manifest", self.root)
    }
    /// Every part of every keyword index segment.
    pub fn keyword_parts(&self) -> String {
        format!("{}kidx/p/", self.root)
    }
    /// The parts that loading the keyword index reads, every segment's document pages and
    /// postings (one scan reads them all; not the sketches and id pages, which only a
    /// per-request search reads).
    pub fn keyword_load_parts(&self) -> String {
        format!("{}kidx/p/k/", self.root)
    }
    /// Page `page` of segment `segment`'s documents (their ids, metadata and lengths).
    pub fn keyword_doc_page(&self, segment: &str, page: u32) -> String {
        format!("{}kidx/p/k/d/{segment}/{page:05}", self.root)
    }
    /// Chunk `chunk` of segment `segment`'s postings of the terms in bucket `bucket` (a
    /// bucket of a large segment is stored in several).
    pub fn keyword_bucket(&self, bucket: u32, segment: &str, chunk: u32) -> String {
        format!("{}kidx/p/k/t/{bucket:02}/{segment}/{chunk:05}", self.root)
    }
    /// Page `page` of segment `segment`'s document ids alone (a per-request search reads
    /// its candidates' ids from these).
    pub fn keyword_id_page(&self, segment: &str, page: u32) -> String {
        format!("{}kidx/p/i/{segment}/{page:05}", self.root)
    }
    /// Chunk `chunk` of segment `segment`'s binary sketches of its documents' vectors under
    /// model `model` (a large segment's: the directory of its clusters).
    pub fn keyword_sketch(&self, model: &str, segment: &str, chunk: u32) -> String {
        format!("{}kidx/p/v/{model}/d/{segment}/{chunk:05}", self.root)
    }
    /// Cluster `cluster` of segment `segment`'s sketches under model `model`: a large
    /// segment's sketch holds only its clusters' centroids, and a per-request search reads the
    /// clusters nearest its query (one stored value each).
    pub fn keyword_sketch_cluster(&self, model: &str, segment: &str, cluster: u32) -> String {
        format!("{}kidx/p/v/{model}/c/{segment}/{cluster:05}", self.root)
    }
    /// Every segment's sketches under model `model`, without their clusters (one scan reads
    /// them all).
    pub fn keyword_sketches(&self, model: &str) -> String {
        format!("{}kidx/p/v/{model}/d/", self.root)
    }
    /// Every segment's sketches under model `model` with their clusters (one scan).
    pub fn keyword_sketches_and_clusters(&self, model: &str) -> String {
        format!("{}kidx/p/v/{model}/", self.root)
    }
    /// Every segment's postings in bucket `bucket` (one scan reads a term's lists).
    pub fn keyword_bucket_parts(&self, bucket: u32) -> String {
        format!("{}kidx/p/k/t/{bucket:02}/", self.root)
    }
    /// The current event equivalent to a save (its normalized text, entity set, kind, payload
    /// and author hash to `text_hash`): a duplicate save returns it.
    pub fn duplicate(&self, text_hash: &str) -> String {
        format!("{}dup/{text_hash}", self.root)
    }
    /// Set when event `ulid` is superseded; its value is the id of the event that replaced it.
    pub fn superseded(&self, ulid: &str) -> String {
        format!("{}superseded/{ulid}", self.root)
    }
    pub fn idempotency(&self, key_hash: &str) -> String {
        format!("{}idem/{key_hash}", self.root)
    }
    pub fn do_journal(&self, key_hash: &str) -> String {
        format!("{}do/{key_hash}", self.root)
    }
    pub fn session(&self, id: &str) -> String {
        format!("{}session/{id}", self.root)
    }
    pub fn entity_type(&self, name: &str) -> String {
        format!("{}type/{name}", self.root)
    }
    pub fn entity_types(&self) -> String {
        format!("{}type/", self.root)
    }
    /// A value that changes with every write of an entity or a relationship (put in the same
    /// batch, never reused): what the SQL table cache checks its copies against.
    pub fn records_version(&self) -> String {
        format!("{}meta/records-version", self.root)
    }
    pub fn entity(&self, ulid: &str) -> String {
        format!("{}ent/{ulid}", self.root)
    }
    pub fn entities(&self) -> String {
        format!("{}ent/", self.root)
    }
    pub fn entity_by_type(&self, type_name: &str, ulid: &str) -> String {
        format!("{}ent-t/{type_name}/{ulid}", self.root)
    }
    pub fn entities_of_type(&self, type_name: &str) -> String {
        format!("{}ent-t/{type_name}/", self.root)
    }
    pub fn relationship(&self, ulid: &str) -> String {
        format!("{}rel/{ulid}", self.root)
    }
    pub fn relationships(&self) -> String {
        format!("{}rel/", self.root)
    }
    /// `dir` is `out` (by source entity) or `in` (by target entity).
    pub fn relationship_by(&self, dir: &str, entity: &str, ulid: &str) -> String {
        format!("{}rel-{dir}/{entity}/{ulid}", self.root)
    }
    pub fn relationships_by(&self, dir: &str, entity: &str) -> String {
        format!("{}rel-{dir}/{entity}/", self.root)
    }
    /// A named record of one kind: `feed`, `conn`, `op`, `beh`, `metric`.
    pub fn named(&self, kind: &str, name: &str) -> String {
        format!("{}{kind}/{name}", self.root)
    }
    pub fn all_named(&self, kind: &str) -> String {
        format!("{}{kind}/", self.root)
    }
    /// A behavior's next scheduled run (`lore_engine::runs::schedules`).
    pub fn schedule(&self, behavior: &str) -> String {
        self.named("sched", behavior)
    }
    pub fn schedules(&self) -> String {
        self.all_named("sched")
    }
    /// A write-only secret (`conn` credentials, `feed` signing secrets).
    pub fn secret(&self, kind: &str, name: &str) -> String {
        format!("{}secret/{kind}/{name}", self.root)
    }
    pub fn origin(&self, feed: &str, hash: &str) -> String {
        format!("{}origin/{feed}/{hash}", self.root)
    }
    pub fn action(&self, ulid: &str) -> String {
        format!("{}act/{ulid}", self.root)
    }
    pub fn actions(&self) -> String {
        format!("{}act/", self.root)
    }
    pub fn usage(&self, day: &str, tool: &str, instance: &str) -> String {
        format!("{}usage/{day}/{tool}/{instance}", self.root)
    }
    pub fn usage_all(&self) -> String {
        format!("{}usage/", self.root)
    }
    /// A pending invite of an identity (by its hash) to this org.
    pub fn invite(&self, identity: &str) -> String {
        format!(
            "{}invite/{}",
            self.root,
            sha256_hex(&identity.to_ascii_lowercase())
        )
    }
    pub fn invites(&self) -> String {
        format!("{}invite/", self.root)
    }
    /// The org's auth stamp (`lore_directory::stamp`).
    pub fn auth_stamp(&self) -> String {
        format!("{}meta/auth-stamp", self.root)
    }
    pub fn settings(&self) -> String {
        format!("{}settings", self.root)
    }
}
