//! The storage key layout, in one place. Everything an org owns lives under `o/{org}/`; the few
//! global keys are identity indexes that must be read before an org is known (a token's hash, a
//! principal, the list of orgs).
//!
//! ```text
//! meta/local-owner              principal id of the local owner (`lore init`)
//! org/{org}                     Org
//! principal/{id}                Principal
//! auth/token/{sha256}           TokenRecord (looked up by the presented secret's hash)
//! o/{org}/member/{principal}    Membership
//! o/{org}/token/{token id}      sha256 of that token (listing and revocation)
//! o/{org}/ev/{ulid}             Event
//! o/{org}/idem/{sha256(key)}    IdempotencyRecord of a save_memory call
//! o/{org}/meta/events-seq       the org's event sequence number (commit order)
//! o/{org}/evseq/{n:020}         ulid of the event with sequence number n
//! o/{org}/session/{id}          Session (legacy MCP sessions)
//! ```

use sha2::{Digest, Sha256};

use crate::ids::OrgId;

/// SHA-256 of `text`, lowercase hex: how secrets and caller-chosen keys enter the key space.
pub fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub const LOCAL_OWNER: &str = "meta/local-owner";
pub const ORG_PREFIX: &str = "org/";

pub fn org(org: &OrgId) -> String {
    format!("org/{org}")
}
pub fn principal(id: &str) -> String {
    format!("principal/{id}")
}
pub fn token_by_hash(hash: &str) -> String {
    format!("auth/token/{hash}")
}

/// Keys under one org. Only [`crate::auth::Caller`] and the operator functions build one, so
/// the org always comes from an authenticated principal or the local operator.
#[derive(Debug, Clone)]
pub struct OrgKeys {
    root: String,
}

impl OrgKeys {
    pub(crate) fn new(org: &OrgId) -> Self {
        Self {
            root: format!("o/{org}/"),
        }
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
    pub fn idempotency(&self, key_hash: &str) -> String {
        format!("{}idem/{key_hash}", self.root)
    }
    pub fn session(&self, id: &str) -> String {
        format!("{}session/{id}", self.root)
    }
}
