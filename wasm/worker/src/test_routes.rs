//! Routes of the test build only (feature `test-build`, never deployed): they run code that no
//! product request reaches yet against the real bindings of the host.
//!
//! - `GET /__test/storage-suite`: the names of the suite's cases.
//! - `POST /__test/storage-suite/{case}`: empties `lore_kv`, then runs one case of the shared
//!   storage suite (`lore::storage::suite`) on [`D1Storage`] over the Worker's own D1 binding.
//!   A failing case panics; the Worker then answers 500 and logs the assertion.
//! - `GET /__test/records-suite`, `POST /__test/records-suite/{case}`: the same for the shared
//!   records suite (`lore::records::suite`): the org data model through the SDK on D1.
//! - `POST /__test/embed` `{"texts": [...]}`: embeds through [`WorkersAiEmbedder`] and returns
//!   the model id and the vectors.
//! - `POST /__test/fetch` `{"method", "url", "headers": [[name, value]], "body"}`: one outbound
//!   request through the HTTP port ([`crate::WorkersFetch`]); returns status, headers and body.

use http::{Request, Response, StatusCode};
use lore::Lore;
use lore::storage::suite;
use serde_json::{Value, json};
use worker::Env;

use crate::{D1_BINDING, D1Storage};

const PREFIX: &str = "/__test/";

fn reply(status: StatusCode, body: Value) -> Response<Vec<u8>> {
    let mut response = Response::new(serde_json::to_vec(&body).unwrap_or_default());
    *response.status_mut() = status;
    response
}

pub async fn handle(
    lore: &Lore,
    env: &Env,
    request: &Request<Vec<u8>>,
) -> Option<Response<Vec<u8>>> {
    let route = request.uri().path().strip_prefix(PREFIX)?;
    Some(match route.split_once('/') {
        Some(("storage-suite", case)) => storage_case(env, case).await,
        None if route == "storage-suite" => reply(StatusCode::OK, json!({ "cases": suite::CASES })),
        Some(("records-suite", case)) => records_case(env, case).await,
        None if route == "records-suite" => reply(
            StatusCode::OK,
            json!({ "cases": lore::records::suite::CASES }),
        ),
        None if route == "embed" => embed(lore, request.body()).await,
        None if route == "fetch" => fetch(lore, request.body()).await,
        _ => reply(
            StatusCode::NOT_FOUND,
            json!({ "error": format!("no test route {route}") }),
        ),
    })
}

/// The Worker's D1 database, emptied, as storage for one suite case.
async fn empty_store(env: &Env) -> Result<D1Storage, Response<Vec<u8>>> {
    let failed = |e: worker::Error| {
        reply(
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({ "error": e.to_string() }),
        )
    };
    let db = env.d1(D1_BINDING).map_err(failed)?;
    db.prepare("DELETE FROM lore_kv")
        .run()
        .await
        .map_err(failed)?;
    Ok(D1Storage::new(db))
}

async fn storage_case(env: &Env, case: &str) -> Response<Vec<u8>> {
    let store = match empty_store(env).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    if !suite::run_case(case, &store).await {
        return reply(
            StatusCode::NOT_FOUND,
            json!({ "error": format!("no storage case {case}"), "cases": suite::CASES }),
        );
    }
    reply(StatusCode::OK, json!({ "case": case, "passed": true }))
}

async fn records_case(env: &Env, case: &str) -> Response<Vec<u8>> {
    let store = match empty_store(env).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let store: std::rc::Rc<dyn lore::storage::Storage> = std::rc::Rc::new(store);
    if !lore::records::suite::run_case(case, store).await {
        return reply(
            StatusCode::NOT_FOUND,
            json!({ "error": format!("no records case {case}"), "cases": lore::records::suite::CASES }),
        );
    }
    reply(StatusCode::OK, json!({ "case": case, "passed": true }))
}

async fn embed(lore: &Lore, body: &[u8]) -> Response<Vec<u8>> {
    let Some(embedder) = lore.ports.embedder.clone() else {
        return reply(
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({ "error": "no AI binding" }),
        );
    };
    let texts: Vec<String> = match serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| serde_json::from_value(v["texts"].clone()).ok())
    {
        Some(texts) => texts,
        None => {
            return reply(
                StatusCode::BAD_REQUEST,
                json!({ "error": "body must be {\"texts\": [...]}" }),
            );
        }
    };
    match embedder.embed(&texts).await {
        Ok(vectors) => reply(
            StatusCode::OK,
            json!({ "model": embedder.model_id(), "dimensions": embedder.dimensions(), "vectors": vectors }),
        ),
        Err(e) => reply(StatusCode::BAD_GATEWAY, json!({ "error": e.to_string() })),
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
        return reply(
            StatusCode::BAD_REQUEST,
            json!({ "error": "body must be {method, url, headers?, body?}" }),
        );
    };
    let Some(http) = lore.ports.http.clone() else {
        return reply(
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({ "error": "no HTTP port" }),
        );
    };
    let request = lore::ports::OutboundRequest {
        method: spec.method,
        url: spec.url,
        headers: spec.headers,
        body: spec.body.into_bytes(),
    };
    match http.send(request).await {
        Ok(r) => reply(
            StatusCode::OK,
            json!({ "status": r.status, "headers": r.headers, "body": String::from_utf8_lossy(&r.body) }),
        ),
        Err(e) => reply(StatusCode::BAD_GATEWAY, json!({ "error": e.to_string() })),
    }
}
