//! Local sign-in passwords (the self-hosted owner's), hashed with Argon2id (`argon2` crate,
//! default parameters: 19 MiB, 2 passes). The salt comes from the randomness port, so hashing
//! works the same natively and at the edge.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use serde::{Deserialize, Serialize};

use lore_base::error::{LoreError, Result};
use lore_base::keys;
use lore_base::ports::Ports;

/// The shortest password accepted.
pub const MIN_PASSWORD_CHARS: usize = 12;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PasswordRecord {
    /// The PHC string (`$argon2id$v=19$m=…`).
    pub hash: String,
    pub set_at_ms: i64,
}

/// The PHC hash of `password` with a fresh salt.
pub fn hash(ports: &Ports, password: &str) -> Result<String> {
    let mut salt = [0u8; 16];
    ports.random.fill(&mut salt);
    let salt = SaltString::encode_b64(&salt)
        .map_err(|e| LoreError::Internal(format!("password salt: {e}")))?;
    argon2::Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| LoreError::Internal(format!("password hashing failed: {e}")))
}

/// Whether `password` matches the stored PHC hash.
pub fn verify(phc: &str, password: &str) -> bool {
    PasswordHash::new(phc).is_ok_and(|parsed| {
        argon2::Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok()
    })
}

/// Sets the sign-in password of `principal` and ends their browser sessions (whoever knew the
/// old password is signed out).
pub async fn set(ports: &Ports, principal: &str, password: &str) -> Result<()> {
    if password.chars().count() < MIN_PASSWORD_CHARS {
        return Err(LoreError::invalid(
            "password",
            format!("use at least {MIN_PASSWORD_CHARS} characters"),
        ));
    }
    let record = PasswordRecord {
        hash: hash(ports, password)?,
        set_at_ms: ports.clock.now_ms(),
    };
    let mut batch = lore_base::storage::Batch::new();
    batch.put(keys::password(principal), serde_json::to_vec(&record)?);
    crate::sessions::end_all_into(ports, principal, &mut batch).await?;
    ports.storage.commit(batch).await?;
    Ok(())
}

/// Checks `password` for `principal`; `false` when none is set.
pub async fn check(ports: &Ports, principal: &str, password: &str) -> Result<bool> {
    let record: Option<PasswordRecord> = ports.record(&keys::password(principal)).await?;
    Ok(record.is_some_and(|r| verify(&r.hash, password)))
}

/// Whether `principal` has a sign-in password.
pub async fn is_set(ports: &Ports, principal: &str) -> Result<bool> {
    Ok(ports
        .storage
        .get(&keys::password(principal))
        .await?
        .is_some())
}
