//! Sign-in through an upstream identity provider (GitHub, or any OAuth/OIDC provider by
//! configuration). Not configured yet in this build: no provider is offered.

use crate::Lore;

/// The providers the sign-in page offers: `(id, label)`.
pub fn choices(_lore: &Lore) -> Vec<(String, String)> {
    Vec::new()
}
