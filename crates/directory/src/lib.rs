//! lore's directory: who is who. Principals (people and agents), org records, memberships and
//! the [`Caller`] a verified credential resolves to, bearer tokens, the local owner's
//! password, invites and OAuth grants' standing. The front reads it to authenticate a request;
//! the org engine writes it for the members, agents and tokens of its own org. It knows no
//! request and no org's records.

pub mod admin;
pub mod caller;
pub mod callers;
pub mod grants;
pub mod invites;
pub mod password;
pub mod sessions;
pub mod stamp;
pub mod tokens;
pub mod transfer;

pub use caller::{Caller, Credential};
