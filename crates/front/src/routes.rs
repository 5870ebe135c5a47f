//! The router: every HTTP request an adapter hands over ([`Lore::handle`]) starts its log
//! line here and goes to the operator routes, OAuth, the MCP endpoint, the REST admin surface,
//! the org's web app, webhook deliveries or `/healthz`.

use std::rc::Rc;

use http::{Method, Request, Response, StatusCode};
use serde_json::json;

use crate::instance::Lore;
use lore_base::ids::OrgId;
use lore_base::keys;
use lore_base::model::TokenRecord;

/// How long the cache port keeps the org a token routes to (see [`Lore::home_org`]).
const ROUTE_TTL_SECS: u32 = 3_600;

impl Lore {
    /// Serves one HTTP request.
    pub async fn handle(&self, request: Request<Vec<u8>>) -> Response<Vec<u8>> {
        self.serve(request, None).await
    }

    /// Serves one HTTP request, streaming the reply through `out` where the reply is long
    /// (a script's `tools/call` with a progress token, to a client that reads SSE: its
    /// progress goes out as it happens). If `out` was started, the response returned is only
    /// the rest of the body; otherwise it is the whole reply and `out` was not used.
    pub async fn handle_streaming(
        &self,
        request: Request<Vec<u8>>,
        out: Rc<dyn crate::mcp::reply::ReplyStream>,
    ) -> Response<Vec<u8>> {
        self.serve(request, Some(out)).await
    }

    /// The org whose data a request is about, where each org's data lives apart (on
    /// Cloudflare, in the org's Durable Object, which then serves the request): the org in an
    /// org-scoped path (`/mcp/{org}`, `/api/{org}/…`, `/hooks/{org}/…`, `/app/{org}/…`); for `/mcp`, the only
    /// org of the bearer token (one directory read, then kept in the cache port) or, without a token on a server that runs
    /// without auth, the org a tokenless caller reaches. `None` for everything else (OAuth,
    /// metadata, operator routes, a request that will be refused anyway): the front serves it
    /// over every org's store. Routing only: whoever serves the request authenticates it.
    pub async fn home_org(&self, request: &Request<Vec<u8>>) -> Option<OrgId> {
        let path = request.uri().path();
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        match segments.as_slice() {
            ["mcp", org] | ["api", org, _] | ["hooks", org, _] | ["app", org, ..] => {
                OrgId::parse(org).ok()
            }
            ["mcp"] => match crate::auth::bearer(request.headers()) {
                Some(secret) => {
                    let hash = keys::sha256_hex(secret.ok()?);
                    // A token's orgs never change, so the cache port may keep its route for
                    // long; whether the token still works is for the org's server to say.
                    let route = keys::token_route(&hash);
                    let cache = self.ports().cache.as_ref();
                    if let Some(bytes) = match cache {
                        Some(cache) => cache.get(&route).await,
                        None => None,
                    } {
                        return OrgId::parse(&String::from_utf8_lossy(&bytes)).ok();
                    }
                    let token: TokenRecord = self
                        .ports()
                        .record(&keys::token_by_hash(&hash))
                        .await
                        .ok()??;
                    let [only] = token.orgs.as_slice() else {
                        return None;
                    };
                    if let Some(cache) = cache {
                        cache
                            .put(&route, only.as_str().as_bytes().to_vec(), ROUTE_TTL_SECS)
                            .await;
                    }
                    Some(only.clone())
                }
                None if self.config.no_auth => Some(
                    self.tokenless_org()
                        .await
                        .unwrap_or_else(|_| self.config.default_org.clone()),
                ),
                None => None,
            },
            _ => None,
        }
    }

    async fn serve(
        &self,
        mut request: Request<Vec<u8>>,
        out: Option<Rc<dyn crate::mcp::reply::ReplyStream>>,
    ) -> Response<Vec<u8>> {
        let started = self.engine.ports.clock.now_ms();
        let log = crate::request_log::RequestLog::start(&request, || self.request_ids.fresh());
        request.extensions_mut().insert(log.clone());
        let method = request.method().to_string();
        let path: String = request.uri().path().chars().take(200).collect();
        let mut response = self.route(request, out).await;
        if let Ok(value) = http::HeaderValue::from_str(&log.id) {
            response
                .headers_mut()
                .insert(crate::request_log::REQUEST_ID_HEADER, value);
        }
        let duration_ms = self.engine.ports.clock.now_ms() - started;
        let line = log.emit(&method, &path, response.status().as_u16(), duration_ms);
        response.extensions_mut().insert(line);
        response
    }

    async fn route(
        &self,
        request: Request<Vec<u8>>,
        out: Option<Rc<dyn crate::mcp::reply::ReplyStream>>,
    ) -> Response<Vec<u8>> {
        let path = request.uri().path().to_string();
        if let Some(name) = crate::headers::repeated_singleton(request.headers()) {
            return crate::responses::json_response(
                StatusCode::BAD_REQUEST,
                json!({ "error": { "code": "invalid_request", "message": format!("the request has more than one {name} header; send it once") } }),
            );
        }
        let secret = self.config.operator_secret.as_deref();
        if let Some(response) = crate::operator::handle(self, secret, &request).await {
            return response;
        }
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        if let Some(response) = crate::oauth::handle(self, &request).await {
            return response;
        }
        match segments.as_slice() {
            ["mcp"] => crate::mcp::handle(self, request, None, out).await,
            ["mcp", org] => crate::mcp::handle(self, request, Some(org), out).await,
            ["api", org, name] => crate::api::handle(self, &request, org, name).await,
            ["hooks", org, feed] => crate::hooks::handle(self, &request, org, feed).await,
            ["app", org, rest @ ..] => crate::app::handle(self, &request, org, rest).await,
            ["healthz"] if request.method() == Method::GET => crate::responses::json_response(
                StatusCode::OK,
                json!({ "status": "ok", "version": lore_base::VERSION }),
            ),
            _ => crate::responses::json_response(
                StatusCode::NOT_FOUND,
                json!({ "error": { "code": "not_found", "message": format!("no route for {} {path}; MCP is served at /mcp", request.method()) } }),
            ),
        }
    }
}

/// Why a platform ended an org's instance before it answered, as it says in its error (a
/// Durable Object reset past its isolate's memory or CPU limit): the script cap it stands for.
fn cap_of_platform_error(cause: &str) -> Option<(&'static str, &'static str)> {
    let lower = cause.to_ascii_lowercase();
    if lower.contains("memory") {
        Some(("memory", "the platform's memory limit"))
    } else if lower.contains("cpu")
        || lower.contains("time limit")
        || lower.contains("exceeded time")
    {
        Some(("wall_clock", "the platform's CPU time limit"))
    } else {
        None
    }
}

impl Lore {
    /// The answer to `request` when the platform ended the instance that was serving it (on
    /// Cloudflare, the org's Durable Object reset past its isolate's memory or CPU limit: the
    /// hard bound of a script run there, as a script process's is natively). A `tools/call`
    /// gets the tool error a run ended at that cap gets anywhere (`cap_exceeded` with the
    /// cap); other requests, a 503 that says what happened. `cause` is the platform's error.
    pub fn stopped_by_platform(
        &self,
        request: &Request<Vec<u8>>,
        cause: &str,
    ) -> Response<Vec<u8>> {
        let error = match cap_of_platform_error(cause) {
            Some((cap, what)) => {
                lore_base::error::LoreError::Script(Box::new(lore_base::error::ScriptFailure {
                    code: "cap_exceeded",
                    message: format!(
                        "the run reached {what} and the platform ended it ({cause}); the script holds too much data or computes too long at once"
                    ),
                    line: None,
                    column: None,
                    cap: Some(cap),
                    limit: None,
                    calls_made: 0,
                    elapsed_ms: 0,
                    logs: Vec::new(),
                    action_id: None,
                    retryable: false,
                }))
            }
            None => lore_base::error::LoreError::Unavailable(format!(
                "the org's instance stopped before it answered ({cause}); try again"
            )),
        };
        let call: Option<serde_json::Value> = serde_json::from_slice(request.body()).ok();
        let tool_call = call
            .as_ref()
            .filter(|c| c["method"] == "tools/call" && c.get("id").is_some());
        match tool_call {
            Some(call) => {
                let mut result = crate::mcp::result::tool_error(&error);
                if crate::headers::get(request.headers(), "mcp-protocol-version")
                    == Some(crate::mcp::versions::VERSION_2026)
                {
                    result["resultType"] = json!("complete");
                }
                crate::json_response(
                    StatusCode::OK,
                    json!({ "jsonrpc": "2.0", "id": call["id"], "result": result }),
                )
            }
            None => crate::json_response(
                StatusCode::SERVICE_UNAVAILABLE,
                json!({ "error": error.to_json() }),
            ),
        }
    }
}

#[cfg(test)]
mod platform_tests {
    use super::*;

    #[test]
    fn a_platform_limit_is_the_script_cap_it_stands_for() {
        assert_eq!(
            cap_of_platform_error(
                "Durable Object's isolate exceeded its memory limit and was reset."
            )
            .map(|c| c.0),
            Some("memory")
        );
        assert_eq!(
            cap_of_platform_error("Worker exceeded CPU time limit.").map(|c| c.0),
            Some("wall_clock")
        );
        assert_eq!(cap_of_platform_error("Network connection lost."), None);
    }
}
