//! lore as an OAuth 2.1 resource server and authorization server, driven in-process through
//! `Lore::handle`: discovery, challenges, audience binding, registration, the browser flow,
//! the token endpoint, refresh rotation and revocation, and the refusals a client can meet.

#[path = "oauth/flow.rs"]
mod flow;
#[path = "oauth/harness.rs"]
#[allow(dead_code)]
mod harness;
#[path = "oauth/negative.rs"]
mod negative;
#[path = "oauth/resource.rs"]
mod resource;
#[path = "oauth/upstream.rs"]
mod upstream;
