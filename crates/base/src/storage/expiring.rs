//! Records that end: each is written together with an entry in an index of the times records
//! end (`exp/{ms:013}/{key}`, [`crate::keys::expiry`]), and [`sweep`] deletes
//! those whose time has passed. What a request without credentials leaves in storage (a
//! browser session, a pending authorization, an unused client registration, a fetched client
//! document) is written only this way, so it goes away by itself whatever made it.
//!
//! A record may be written again under the same key with a later end (a session saved again),
//! or be kept for good (a registered client once used): the sweep deletes a record only while
//! its own `expires_at_ms` (a JSON field every such record carries; `null` or absent: it stays)
//! says it has ended, and otherwise only the index entry.

use super::{Batch, Storage, StorageError};
use crate::keys;

/// Adds `value` under `key` to `batch`, with its index entry: it ends at `expires_at_ms`, the
/// time its own `expires_at_ms` field holds.
pub fn put(batch: &mut Batch, key: &str, value: Vec<u8>, expires_at_ms: i64) {
    batch
        .put(key, value)
        .put(keys::expiry(expires_at_ms, key), Vec::new());
}

/// Whether the record `value` says it has ended by `now_ms`.
fn ended(value: &[u8], now_ms: i64) -> bool {
    #[derive(serde::Deserialize)]
    struct Ends {
        #[serde(default)]
        expires_at_ms: Option<i64>,
    }
    match serde_json::from_slice::<Ends>(value) {
        Ok(ends) => ends.expires_at_ms.is_some_and(|at| at <= now_ms),
        // Not a record that says when it ends: it was written only with an end.
        Err(_) => true,
    }
}

/// Deletes up to `max` records whose end has passed by `now_ms` (and their index entries);
/// returns how many index entries it went through. Runs in one scan and one batch: callers
/// that create expiring records sweep a few each time, so what has ended never piles up.
pub async fn sweep(storage: &dyn Storage, now_ms: i64, max: usize) -> Result<usize, StorageError> {
    let page = storage.scan(keys::EXPIRY_PREFIX, None, max.max(1)).await?;
    let due: Vec<(String, String)> = page
        .entries
        .into_iter()
        .filter_map(|(entry, _)| {
            let (at, key) = keys::parse_expiry(&entry)?;
            (at <= now_ms).then(|| (entry.clone(), key.to_string()))
        })
        .collect();
    if due.is_empty() {
        return Ok(0);
    }
    let records: Vec<String> = due.iter().map(|(_, key)| key.clone()).collect();
    let values = storage.get_many(&records).await?;
    let mut batch = Batch::new();
    for ((entry, key), value) in due.iter().zip(values) {
        batch.delete(entry);
        if let Some(value) = value
            && ended(&value, now_ms)
        {
            // Only as it was read: a record written again meanwhile stays.
            batch.require_equals(key, value).delete(key);
        }
    }
    match storage.commit(batch).await {
        // A record changed between the read and the commit: the next sweep sees it again.
        Ok(()) | Err(StorageError::Conflict { .. }) => Ok(due.len()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::memory::MemoryStorage;
    use futures_executor::block_on;

    fn record(expires_at_ms: Option<i64>) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({ "expires_at_ms": expires_at_ms })).unwrap()
    }

    #[test]
    fn ended_records_go_and_the_rest_stay() {
        let s = MemoryStorage::new();
        let mut batch = Batch::new();
        put(&mut batch, "oauth/session/a", record(Some(100)), 100);
        put(&mut batch, "oauth/session/b", record(Some(300)), 300);
        // Written again with a later end: the old index entry must not delete it.
        put(&mut batch, "oauth/client/c", record(Some(100)), 100);
        block_on(s.commit(batch)).unwrap();
        let mut batch = Batch::new();
        put(&mut batch, "oauth/client/c", record(None), 100);
        block_on(s.commit(batch)).unwrap();

        assert_eq!(block_on(sweep(&s, 50, 10)).unwrap(), 0);
        assert_eq!(block_on(sweep(&s, 200, 10)).unwrap(), 2);
        assert!(block_on(s.get("oauth/session/a")).unwrap().is_none());
        assert!(block_on(s.get("oauth/session/b")).unwrap().is_some());
        assert!(block_on(s.get("oauth/client/c")).unwrap().is_some());
        assert_eq!(block_on(sweep(&s, 400, 10)).unwrap(), 1);
        assert!(block_on(s.get("oauth/session/b")).unwrap().is_none());
        assert!(
            block_on(s.scan_all(keys::EXPIRY_PREFIX))
                .unwrap()
                .is_empty()
        );
    }
}
