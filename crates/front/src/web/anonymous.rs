//! What a request may leave in storage before anyone is signed in: a browser session, a
//! pending authorization, a registered client, a fetched client document. Each of these is
//! written only through [`store`], which makes it a record that ends
//! (`lore_base::storage::expiring`: it and its index entry in one batch) and first sweeps a
//! few records whose end has passed; and each request that makes one passes [`admit`] first,
//! which takes one from the asking client's bucket (its address, an IPv6 client's /64:
//! `Config::anonymous_per_minute`). So what outsiders can make is bounded by their rate and the
//! records' lifetimes, whatever route or shape they use.

use lore_base::storage::{Batch, expiring};

use super::form::OAuthError;
use crate::instance::Lore;

/// Ended records swept each time one is stored: more than one, so what has ended never piles
/// up behind what is made.
const SWEEP: usize = 8;

/// The key of `request`'s client: its address (an IPv6 client's /64), or `unknown` for every
/// client whose adapter did not say (`ClientAddr`).
pub fn client_key<B>(request: &http::Request<B>) -> String {
    request
        .extensions()
        .get::<lore_base::ports::ClientAddr>()
        .map_or_else(|| "unknown".to_string(), |a| a.share_key())
}

/// Takes one record from the asking client's share; refuses with 429 past its rate.
pub(crate) async fn admit<B>(lore: &Lore, request: &http::Request<B>) -> Result<(), OAuthError> {
    let per_minute = lore.config.anonymous_per_minute;
    let Some(limiter) = lore.limiter.as_ref().filter(|_| per_minute > 0) else {
        return Ok(());
    };
    let key = format!("anon/{}", client_key(request));
    let now = lore.ports().clock.now_ms();
    let decision = limiter.take("anonymous", &[(key, per_minute)], now).await;
    match decision.refused {
        None => Ok(()),
        Some((_, wait_ms)) => Err(OAuthError::slow_down(
            format!(
                "this address made more than {per_minute} sign-in records (sessions, authorizations, registrations) in a minute; try again in {} s",
                wait_ms.div_ceil(1000)
            ),
            wait_ms.div_ceil(1000),
        )),
    }
}

/// Writes `value` (a record whose `expires_at_ms` field says when it ends) under `key`, ending
/// at `expires_at_ms`, with `batch`'s other writes and checks; sweeps a few ended records first.
pub(crate) async fn store(
    lore: &Lore,
    mut batch: Batch,
    key: &str,
    value: Vec<u8>,
    expires_at_ms: i64,
) -> Result<(), OAuthError> {
    let storage = &lore.ports().storage;
    if let Err(e) = expiring::sweep(storage.as_ref(), lore.ports().clock.now_ms(), SWEEP).await {
        // A failed sweep leaves records for the next one; the write still goes on.
        tracing::warn!(error = %e, "could not sweep ended records");
    }
    expiring::put(&mut batch, key, value, expires_at_ms);
    storage.commit(batch).await?;
    Ok(())
}
