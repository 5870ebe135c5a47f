//! lore as an OAuth 2.1 resource server and authorization server, driven in-process through
//! `Lore::handle`: discovery, challenges, audience binding, registration, the browser flow,
//! the token endpoint, refresh rotation and revocation, and the refusals a client can meet.

mod flow;
#[allow(dead_code)]
pub(crate) mod harness;
mod negative;
mod resource;
mod upstream;
