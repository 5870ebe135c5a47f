//! The REST admin surface: `POST /api/{org}/{tool}` runs an admin tool (`manage_*`,
//! `query_metric`, `list_metrics`, `list_organizations`) or any SDK method by path
//! (`entities.list`, `Ticket.create`) with a JSON body; `GET /api/{org}/sdk.d.ts` returns the
//! caller's TypeScript declarations, `GET /api/{org}/tools` the admin tools with their
//! input schemas, and `GET /api/{org}/fetch?id={path}` the compact profile's `fetch`. Same auth as MCP, same schemas as the SDK, and JSON errors
//! `{error: {code, message, field?}}` with the stable codes and their HTTP statuses.

use http::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};

use lore_base::model::{Profile, Tier};
use lore_directory::Caller;
use lore_engine::tools;
use lore_engine::{OrgRequest, Reach};

use crate::instance::Lore;
use lore_base::error::LoreError;

/// The file name of the declarations route.
pub const DECLARATIONS: &str = "sdk.d.ts";

/// The compact profile's `fetch` as a route: `GET /api/{org}/fetch?id={path}`, the `url` of
/// every `search` hit and `fetch` answer.
pub const FETCH: &str = "fetch";

fn respond(status: u16, content_type: &str, body: Vec<u8>) -> Response<Vec<u8>> {
    let mut response = Response::new(body);
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_str(content_type).expect("static content types"),
    );
    response
}

fn ok(value: &Value) -> Response<Vec<u8>> {
    respond(
        200,
        "application/json",
        serde_json::to_vec(value).unwrap_or_default(),
    )
}

/// The JSON error response for `e`, with an OAuth challenge where one applies.
pub fn error_response(e: &LoreError) -> Response<Vec<u8>> {
    let mut body = e.to_json();
    let challenge = match e {
        LoreError::InsufficientScope(_) => {
            body["required_scope"] = json!("mcp:write");
            Some("Bearer error=\"insufficient_scope\", scope=\"mcp:read mcp:write\"".to_string())
        }
        LoreError::Unauthorized(m) => Some(format!(
            "Bearer realm=\"lore\", scope=\"mcp:read mcp:write\", error=\"invalid_token\", error_description=\"{}\"",
            m.replace('"', "'")
        )),
        _ => None,
    };
    if let LoreError::Internal(m)
    | LoreError::Storage(lore_base::storage::StorageError::Backend(m)) = e
    {
        tracing::error!(error = %m, "internal error on the REST surface");
    }
    let mut response = respond(
        e.http_status(),
        "application/json",
        serde_json::to_vec(&json!({ "error": body })).unwrap_or_default(),
    );
    if let Some(c) = challenge.and_then(|c| http::HeaderValue::from_str(&c).ok()) {
        response
            .headers_mut()
            .insert(http::header::WWW_AUTHENTICATE, c);
    }
    if let Some(secs) = e.retry_after_secs() {
        response
            .headers_mut()
            .insert(http::header::RETRY_AFTER, http::HeaderValue::from(secs));
    }
    response
}

pub async fn handle(
    lore: &Lore,
    request: &Request<Vec<u8>>,
    org: &str,
    name: &str,
) -> Response<Vec<u8>> {
    if let Err(reason) = lore.config.origins.check(request.headers()) {
        return error_response(&LoreError::Forbidden(reason));
    }
    if let Some(log) = crate::request_log::RequestLog::of(request) {
        log.tool(name);
    }
    let mut response = match *request.method() {
        Method::GET if name == DECLARATIONS => declarations(lore, request, org).await,
        Method::GET if name == FETCH => fetch(lore, request, org).await,
        Method::GET if name == "tools" => match caller_of(lore, request, org).await {
            Ok(_) => ok(&json!({ "tools": tools::admin_tools().map(|t| json!({
                "name": t.name,
                "description": t.description,
                "inputSchema": t.input_schema(),
            })).collect::<Vec<_>>() })),
            Err(e) => error_response(&e),
        },
        Method::POST => post(lore, request, org, name).await,
        _ => {
            let mut r = error_response(&LoreError::invalid(
                "method",
                format!(
                    "use POST /api/{{org}}/{{tool}} with a JSON body (or GET /api/{{org}}/{DECLARATIONS})"
                ),
            ));
            *r.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
            r.headers_mut()
                .insert(http::header::ALLOW, http::HeaderValue::from_static("POST"));
            r
        }
    };
    if let Some(origin) = crate::headers::get(request.headers(), "origin")
        && let Ok(v) = http::HeaderValue::from_str(origin)
    {
        response
            .headers_mut()
            .insert(http::header::ACCESS_CONTROL_ALLOW_ORIGIN, v);
        response
            .headers_mut()
            .insert(http::header::VARY, http::HeaderValue::from_static("Origin"));
    }
    response
}

async fn caller_of(
    lore: &Lore,
    request: &Request<Vec<u8>>,
    org: &str,
) -> Result<Caller, LoreError> {
    let caller = lore
        .authenticate(request.headers(), Some(org))
        .await
        .map_err(|(e, _)| e)?;
    if let Some(log) = crate::request_log::RequestLog::of(request) {
        log.caller(&caller);
    }
    Ok(caller)
}

async fn declarations(lore: &Lore, request: &Request<Vec<u8>>, org: &str) -> Response<Vec<u8>> {
    let caller = match caller_of(lore, request, org).await {
        Ok(c) => c,
        Err(e) => return error_response(&e),
    };
    match lore.engine.declarations(&caller, Tier::Admin).await {
        Ok(text) => respond(200, "text/plain; charset=utf-8", text.into_bytes()),
        Err(e) => error_response(&e),
    }
}

async fn fetch(lore: &Lore, request: &Request<Vec<u8>>, org: &str) -> Response<Vec<u8>> {
    let caller = match caller_of(lore, request, org).await {
        Ok(c) => c,
        Err(e) => return error_response(&e),
    };
    let id = request.uri().query().and_then(|q| {
        url::form_urlencoded::parse(q.as_bytes())
            .find(|(k, _)| k == "id")
            .map(|(_, v)| v.into_owned())
    });
    let Some(id) = id else {
        return error_response(&LoreError::invalid(
            "id",
            format!(
                "give ?id= with a path such as /types or /$.d.ts ({})",
                lore_engine::compact_profile::FORMS
            ),
        ));
    };
    let base = lore.config.base_url(request.headers());
    let request = OrgRequest::new(
        &caller,
        tools::FETCH,
        json!({ "id": id }),
        Reach::Listed(Profile::Compact),
    );
    let outcome = match request {
        Ok(mut request) => {
            request.base_url = base.as_deref();
            lore.engine.call(request).await
        }
        Err(e) => Err(e),
    };
    match outcome {
        Ok(v) => ok(&v),
        Err(e) => error_response(&e),
    }
}

async fn post(lore: &Lore, request: &Request<Vec<u8>>, org: &str, name: &str) -> Response<Vec<u8>> {
    if request.body().len() > lore.config.max_body_bytes {
        let mut r = error_response(&LoreError::invalid(
            "body",
            format!(
                "the request body is larger than the {} KiB limit",
                lore.config.max_body_bytes / 1024
            ),
        ));
        *r.status_mut() = StatusCode::PAYLOAD_TOO_LARGE;
        return r;
    }
    let caller = match caller_of(lore, request, org).await {
        Ok(c) => c,
        Err(e) => return error_response(&e),
    };
    let args: Value = if request.body().iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        let json_type = crate::headers::get(request.headers(), "content-type").is_some_and(|ct| {
            ct.split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
        });
        if !json_type {
            let mut r = error_response(&LoreError::invalid(
                "content-type",
                "send the arguments as application/json",
            ));
            *r.status_mut() = StatusCode::UNSUPPORTED_MEDIA_TYPE;
            return r;
        }
        match serde_json::from_slice(request.body()) {
            Ok(v) => v,
            Err(e) => {
                return error_response(&LoreError::invalid("body", format!("not valid JSON: {e}")));
            }
        }
    };
    let outcome = match OrgRequest::new(&caller, name, args, Reach::Rest) {
        Ok(request) => lore.engine.reply(request).await,
        Err(e) => Err(e),
    };
    match outcome {
        Ok(reply) => respond(
            200,
            "application/json",
            reply.json().into_owned().into_bytes(),
        ),
        Err(e) => {
            if let Some(log) = crate::request_log::RequestLog::of(request) {
                log.error(&e);
            }
            error_response(&e)
        }
    }
}
