//! Identifier types. Record ids are ULIDs (time-ordered, so keys scan in creation order) with a
//! short prefix naming the record kind; org ids are human-chosen slugs.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::LoreError;
use crate::ports::Ports;

/// An organization's slug: `[a-z0-9][a-z0-9-]{0,62}`. It appears in URLs (`/mcp/{org}`) and is
/// the root of every org-scoped storage key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct OrgId(String);

impl OrgId {
    pub fn parse(s: &str) -> Result<Self, LoreError> {
        let ok = (1..=63).contains(&s.len())
            && s.bytes()
                .next()
                .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if ok {
            Ok(Self(s.to_string()))
        } else {
            Err(LoreError::invalid(
                "org",
                format!(
                    "{s:?} is not a valid org name: use 1-63 of a-z, 0-9 and '-', starting with a letter or digit"
                ),
            ))
        }
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for OrgId {
    type Error = LoreError;
    fn try_from(s: String) -> Result<Self, LoreError> {
        Self::parse(&s)
    }
}
impl From<OrgId> for String {
    fn from(o: OrgId) -> String {
        o.0
    }
}
impl fmt::Display for OrgId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A new ULID from the host's clock and randomness, lowercase.
pub fn new_ulid(ports: &Ports) -> String {
    let mut bytes = [0u8; 10];
    ports.random.fill(&mut bytes);
    let random = bytes
        .iter()
        .fold(0u128, |acc, b| (acc << 8) | u128::from(*b));
    let ms = u64::try_from(ports.clock.now_ms()).unwrap_or(0);
    ulid::Ulid::from_parts(ms, random)
        .to_string()
        .to_ascii_lowercase()
}

/// Checks the `{prefix}_{ulid}` shape of a record id so it can be placed in a storage key.
pub fn parse_record_id<'a>(id: &'a str, prefix: &str, field: &str) -> Result<&'a str, LoreError> {
    let ulid = id
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('_'))
        .filter(|u| u.len() == 26 && u.bytes().all(|b| b.is_ascii_alphanumeric()));
    ulid.ok_or_else(|| {
        LoreError::invalid(
            field,
            format!("{id:?} is not a {prefix}_ id; use an id lore returned"),
        )
    })
}
