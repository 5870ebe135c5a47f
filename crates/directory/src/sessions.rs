//! Ending all of a person's browser sessions at once: each principal has a session epoch, a
//! number every browser session records when it signs in. A password change or "sign out
//! everywhere" moves the epoch on, and a session signed in under an older one is over at its
//! next request, wherever it is stored. A counter rather than a time, so a sign-in in the same
//! millisecond as the change is not ended by it.

use lore_base::error::Result;
use lore_base::keys;
use lore_base::ports::Ports;
use lore_base::storage::Batch;

/// The principal's current session epoch (0 until first moved on).
pub async fn epoch(ports: &Ports, principal: &str) -> Result<u64> {
    Ok(ports
        .record::<u64>(&keys::session_epoch(principal))
        .await?
        .unwrap_or(0))
}

/// Adds to `batch` the write that ends every browser session of `principal` signed in so far.
pub async fn end_all_into(ports: &Ports, principal: &str, batch: &mut Batch) -> Result<()> {
    let next = epoch(ports, principal).await?.saturating_add(1);
    batch.put(
        keys::session_epoch(principal),
        next.to_string().into_bytes(),
    );
    Ok(())
}

/// Ends every browser session of `principal` signed in so far.
pub async fn end_all(ports: &Ports, principal: &str) -> Result<()> {
    let mut batch = Batch::new();
    end_all_into(ports, principal, &mut batch).await?;
    ports.storage.commit(batch).await?;
    Ok(())
}
