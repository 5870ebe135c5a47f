//! Routes of the test build only (feature `test-build`, never deployed): they run the shared
//! suites against the real Spin SQLite the host provides.
//!
//! - `GET /__test/storage-suite`: the names of the suite's cases.
//! - `POST /__test/storage-suite/{case}`: empties `lore_kv`, then runs one case of the shared
//!   storage suite (`lore::storage::suite`) on [`SpinSqliteStorage`]. A failing case panics,
//!   which traps the instance; the host then answers 500.
//! - `GET /__test/records-suite`, `POST /__test/records-suite/{case}`: the same for the shared
//!   records suite (`lore::records::suite`).
//! - `POST /__test/cache-suite`: the cache port's contract (`lore::ports::testing::cache_suite`)
//!   on [`SpinKvCache`] over the real Spin key-value store.

use std::rc::Rc;

use http::{Request, Response, StatusCode};
use lore::storage::suite;
use serde_json::{Value, json};

use crate::{DATABASE, KV_STORE, SpinClock, SpinKvCache, SpinSqliteStorage};

const PREFIX: &str = "/__test/";

fn reply(status: StatusCode, body: Value) -> Response<Vec<u8>> {
    let mut response = Response::new(serde_json::to_vec(&body).unwrap_or_default());
    *response.status_mut() = status;
    response
}

pub async fn handle(request: &Request<Vec<u8>>) -> Option<Response<Vec<u8>>> {
    let route = request.uri().path().strip_prefix(PREFIX)?;
    Some(match route.split_once('/') {
        Some(("storage-suite", case)) => storage_case(case).await,
        None if route == "storage-suite" => reply(StatusCode::OK, json!({ "cases": suite::CASES })),
        Some(("records-suite", case)) => records_case(case).await,
        None if route == "cache-suite" => cache_suite().await,
        None if route == "records-suite" => reply(
            StatusCode::OK,
            json!({ "cases": lore::records::suite::CASES }),
        ),
        _ => reply(
            StatusCode::NOT_FOUND,
            json!({ "error": format!("no test route {route}") }),
        ),
    })
}

async fn empty_store() -> Result<SpinSqliteStorage, Response<Vec<u8>>> {
    let fail = |e: lore::storage::StorageError| {
        reply(
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({ "error": e.to_string() }),
        )
    };
    let store = SpinSqliteStorage::open(DATABASE).await.map_err(fail)?;
    store.clear().await.map_err(fail)?;
    Ok(store)
}

async fn storage_case(case: &str) -> Response<Vec<u8>> {
    let store = match empty_store().await {
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

async fn records_case(case: &str) -> Response<Vec<u8>> {
    let store = match empty_store().await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let store: Rc<dyn lore::storage::Storage> = Rc::new(store);
    if !lore::records::suite::run_case(case, store).await {
        return reply(
            StatusCode::NOT_FOUND,
            json!({ "error": format!("no records case {case}"), "cases": lore::records::suite::CASES }),
        );
    }
    reply(StatusCode::OK, json!({ "case": case, "passed": true }))
}

async fn cache_suite() -> Response<Vec<u8>> {
    let clock = Rc::new(SpinClock);
    let cache = SpinKvCache::new(KV_STORE, clock.clone());
    lore::ports::testing::cache_suite(&cache, clock.as_ref()).await;
    reply(
        StatusCode::OK,
        json!({ "case": "cache-suite", "passed": true }),
    )
}
