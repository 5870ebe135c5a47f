//! Routes of the test build only (feature `test-build`, never deployed): they run the shared
//! suites against the real Spin SQLite and key-value the host provides.
//!
//! - `/__test/storage-suite`, `/__test/records-suite`: the shared suites on
//!   [`SpinSqliteStorage`] (`lore_testing::routes`, emptied through [`empty_store`] before each
//!   case). A failing case panics, which traps the instance; the host then answers 500.
//! - `POST /__test/cache-suite`: the cache port's contract (`lore_testing::ports::cache_suite`)
//!   on [`SpinKvCache`] over the real Spin key-value store.
//! - `POST /__test/embed` `{texts}`: the platform's all-MiniLM-L6-v2 vector of each text, as
//!   the component's embedder asks for it (`llm.rs`), `{model, vectors}`.

use std::rc::Rc;

use http::{Request, Response, StatusCode};
use lore_base::storage::Storage;
use lore_front::json_response;
use lore_testing::routes;
use serde_json::json;

use crate::{DATABASE, KV_STORE, SpinClock, SpinKvCache, SpinSqliteStorage};

pub async fn handle(request: &Request<Vec<u8>>) -> Option<Response<Vec<u8>>> {
    let route = request.uri().path().strip_prefix(routes::PREFIX)?;
    if let Some(response) = routes::handle(route, empty_store).await {
        return Some(response);
    }
    Some(match route {
        "cache-suite" => cache_suite().await,
        "embed" => embed(request.body()),
        _ => json_response(
            StatusCode::NOT_FOUND,
            json!({ "error": format!("no test route {route}") }),
        ),
    })
}

/// The component's Spin SQLite database, emptied, as storage for one suite case.
async fn empty_store() -> Result<Rc<dyn Storage>, String> {
    let store = SpinSqliteStorage::open(DATABASE)
        .await
        .map_err(|e| e.to_string())?;
    store.clear().await.map_err(|e| e.to_string())?;
    Ok(Rc::new(store))
}

async fn cache_suite() -> Response<Vec<u8>> {
    let clock = Rc::new(SpinClock);
    let cache = SpinKvCache::new(KV_STORE, clock.clone());
    lore_testing::ports::cache_suite(&cache, clock.as_ref()).await;
    json_response(
        StatusCode::OK,
        json!({ "case": "cache-suite", "passed": true }),
    )
}

fn embed(body: &[u8]) -> Response<Vec<u8>> {
    let texts = match routes::embed_texts(body) {
        Ok(texts) => texts,
        Err(refused) => return *refused,
    };
    match texts
        .iter()
        .map(|t| crate::llm::embed_one(t))
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(vectors) => json_response(
            StatusCode::OK,
            json!({ "model": lore_embed::MINILM_MODEL_ID, "vectors": vectors }),
        ),
        Err(e) => json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({ "error": e.to_string() }),
        ),
    }
}
