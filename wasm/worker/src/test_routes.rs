//! Routes of the test build only (feature `test-build`, never deployed): they run code that no
//! product request reaches yet against the real bindings of the host.
//!
//! - `/__test/storage-suite`, `/__test/records-suite`: the shared suites on [`D1Storage`] over
//!   the Worker's own D1 binding (`lore_testing::routes`, which empties `lore_kv` through
//!   [`empty_store`] before each case).
//! - `/__test/object/storage-suite`, `/__test/object/records-suite`: the same suites on an org
//!   object's own SQLite ([`crate::ObjectStorage`]), run inside a Durable Object of the
//!   `LORE_ORG` class set aside for them (`__suites`).
//! - `POST /__test/alarm/{org}` `{"at_ms"?}`: the org object's alarm time and the org it is
//!   armed for; with `at_ms`, first the alarm's run as at that time (`org_object`).
//! - `POST /__test/embed` `{"texts": [...]}`: embeds through [`crate::WorkersAiEmbedder`] and
//!   returns the model id and the vectors.
//! - `POST /__test/fetch` `{"method", "url", "headers": [[name, value]], "body"}`: one outbound
//!   request through the HTTP port ([`crate::WorkersFetch`]); returns status, headers and body.
//! - `POST /__test/d1-rows` `{"entries": [[key, base64 value]]}`: writes the entries as rows of
//!   D1 itself, as a deployment made before org objects held every org's keys (the test of
//!   `org-move-in`).

use std::rc::Rc;

use http::{Request, Response, StatusCode};
use lore_base::storage::Storage;
use lore_front::Lore;
use lore_front::json_response;
use lore_testing::routes;
use serde_json::json;
use worker::Env;

use crate::d1::D1Storage;
use crate::platform::D1_BINDING;

/// The object the suites run in: no org can have this name.
const SUITES_OBJECT: &str = "__suites";

pub async fn handle(
    lore: &Lore,
    env: &Env,
    url: &str,
    request: &Request<Vec<u8>>,
) -> Option<worker::Result<worker::Response>> {
    let route = request.uri().path().strip_prefix(routes::PREFIX)?;
    let uncounted = crate::ports::Subrequests::default();
    if route.starts_with("object/") {
        let url = url.replacen("/__test/object/", "/__test/", 1);
        return Some(crate::routing::forward(env, SUITES_OBJECT, &url, request, &uncounted).await);
    }
    if let Some(org) = route.strip_prefix("alarm/") {
        let url = url.replacen(&format!("/__test/alarm/{org}"), "/__test/alarm", 1);
        return Some(crate::routing::forward(env, org, &url, request, &uncounted).await);
    }
    Some(crate::platform::from_http(
        answer(lore, env, route, request).await,
    ))
}

async fn answer(
    lore: &Lore,
    env: &Env,
    route: &str,
    request: &Request<Vec<u8>>,
) -> Response<Vec<u8>> {
    if let Some(response) = routes::handle(route, || empty_store(env)).await {
        return response;
    }
    match route {
        "embed" => embed(lore, request.body()).await,
        "fetch" => fetch(lore, request.body()).await,
        "d1-rows" => d1_rows(env, request.body()).await,
        _ => json_response(
            StatusCode::NOT_FOUND,
            json!({ "error": format!("no test route {route}") }),
        ),
    }
}

/// The Worker's D1 database, emptied, as storage for one suite case.
async fn empty_store(env: &Env) -> Result<Rc<dyn Storage>, String> {
    let db = env.d1(D1_BINDING).map_err(|e| e.to_string())?;
    db.prepare("DELETE FROM lore_kv")
        .run()
        .await
        .map_err(|e| e.to_string())?;
    Ok(Rc::new(D1Storage::new(db)))
}

async fn embed(lore: &Lore, body: &[u8]) -> Response<Vec<u8>> {
    let Some(embedder) = lore.ports().embedder.clone() else {
        return json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({ "error": "no AI binding" }),
        );
    };
    let texts = match routes::embed_texts(body) {
        Ok(texts) => texts,
        Err(refused) => return *refused,
    };
    match embedder.embed(&texts).await {
        Ok(vectors) => json_response(
            StatusCode::OK,
            json!({ "model": embedder.model_id(), "dimensions": embedder.dimensions(), "vectors": vectors }),
        ),
        Err(e) => json_response(StatusCode::BAD_GATEWAY, json!({ "error": e.to_string() })),
    }
}

async fn fetch(lore: &Lore, body: &[u8]) -> Response<Vec<u8>> {
    #[derive(serde::Deserialize)]
    struct Spec {
        method: String,
        url: String,
        #[serde(default)]
        headers: Vec<(String, String)>,
        #[serde(default)]
        body: String,
    }
    let Ok(spec) = serde_json::from_slice::<Spec>(body) else {
        return json_response(
            StatusCode::BAD_REQUEST,
            json!({ "error": "body must be {method, url, headers?, body?}" }),
        );
    };
    let Some(http) = lore.ports().http.clone() else {
        return json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({ "error": "no HTTP port" }),
        );
    };
    let request = lore_base::ports::OutboundRequest {
        method: spec.method,
        url: spec.url,
        headers: spec.headers,
        body: spec.body.into_bytes(),
        // A URL the operator configured (or the CLI's user named).
        reach: lore_base::outbound::Reach::Configured,
        share: lore_base::outbound::Share::Server,
        timeout_ms: 10_000,
    };
    match http.send(request).await {
        Ok(r) => json_response(
            StatusCode::OK,
            json!({ "status": r.status, "headers": r.headers, "body": String::from_utf8_lossy(&r.body) }),
        ),
        Err(e) => json_response(StatusCode::BAD_GATEWAY, json!({ "error": e.to_string() })),
    }
}

async fn d1_rows(env: &Env, body: &[u8]) -> Response<Vec<u8>> {
    use base64::Engine as _;
    #[derive(serde::Deserialize)]
    struct Rows {
        entries: Vec<(String, String)>,
    }
    let Ok(rows) = serde_json::from_slice::<Rows>(body) else {
        return json_response(
            StatusCode::BAD_REQUEST,
            json!({ "error": "body must be {entries: [[key, base64]]}" }),
        );
    };
    let mut batch = lore_base::storage::Batch::new();
    for (key, value) in rows.entries {
        let Ok(value) = base64::engine::general_purpose::STANDARD.decode(value) else {
            return json_response(
                StatusCode::BAD_REQUEST,
                json!({ "error": format!("{key}: not base64") }),
            );
        };
        batch.put(key, value);
    }
    let written = batch.keys().count();
    let stored = match env.d1(D1_BINDING) {
        Ok(db) => D1Storage::new(db)
            .commit(batch)
            .await
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    match stored {
        Ok(()) => json_response(StatusCode::OK, json!({ "written": written })),
        Err(e) => json_response(StatusCode::INTERNAL_SERVER_ERROR, json!({ "error": e })),
    }
}
