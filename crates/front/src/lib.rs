//! lore's front: the stateless part of a request's path, which any instance can run. An
//! adapter hands [`Lore::handle`] an HTTP request (`http::Request<Vec<u8>>`) and sends back the
//! response; here it is routed, its MCP envelope decoded (both protocol eras), its bearer token
//! verified against the directory (`lore-directory`) and rate-limited, and then it is one
//! call into the org engine (`lore-engine`). OAuth 2.1 (the authorization server and the
//! resource server's side), the REST admin surface, webhook deliveries and the operator routes
//! live here too. The front keeps no org's state.

mod api;
mod app;
mod auth;
pub mod config;
pub mod headers;
mod hooks;
mod instance;
pub mod mcp;
pub mod oauth;
mod operator;
pub mod outbound;
pub mod providers;
pub mod request_log;
mod responses;
mod routes;
mod web;

pub use config::{Config, DEFAULT_MAX_BODY};
pub use instance::{IndexWork, Lore};
pub use lore_base::VERSION;
pub use responses::json_response;
