//! An org's auth stamp: a random value in the org's own store that changes whenever access to
//! the org may end or narrow (one of its tokens revoked, an OAuth grant to it withdrawn, a
//! member's role changed or the member removed) or its record changes. Copies of directory records kept beside an org (a verified credential in the cache
//! port, the org record an engine instance holds) are trusted only while the stamp they were
//! read under is still the org's. The stamp is in the org's store, so the server of an org (on
//! Cloudflare, its Durable Object) checks a copy without reaching the directory, and a change
//! made anywhere (another instance, the CLI in another process) holds at the next request.
//!
//! Readers read the stamp before the records it vouches for: a change that lands between the
//! two leaves the copy under the old stamp, which no longer matches.

use lore_base::error::Result;
use lore_base::ids::OrgId;
use lore_base::keys::OrgKeys;
use lore_base::ports::Ports;
use lore_base::storage::Batch;

/// The org's current stamp (`None` until its first change).
pub async fn read(ports: &Ports, org: &OrgId) -> Result<Option<Vec<u8>>> {
    Ok(ports.storage.get(&OrgKeys::new(org).auth_stamp()).await?)
}

/// Adds a new stamp for each of `orgs` to `batch`, which also holds the change it announces.
pub fn renew<'a>(ports: &Ports, batch: &mut Batch, orgs: impl IntoIterator<Item = &'a OrgId>) {
    for org in orgs {
        batch.put(OrgKeys::new(org).auth_stamp(), ports.random_hex(16));
    }
}
