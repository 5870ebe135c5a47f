//! The test builds' routes for the shared suites (the Worker's and Spin's `test-build` link this
//! crate; product builds do not): each platform's test build serves them over its own real
//! storage, so the suites run against D1 and Spin SQLite as they run in-process against SQLite
//! and memory.
//!
//! - `GET /__test/storage-suite`: the names of the storage suite's cases.
//! - `POST /__test/storage-suite/{case}`: runs one case of [`crate::storage`] on a store
//!   the platform has just emptied. A failing case panics; the host then answers 500 and logs
//!   the assertion.
//! - `GET /__test/records-suite`, `POST /__test/records-suite/{case}`: the same for
//!   [`crate::records`], the org data model through the SDK.
//!
//! The adapter serves its own platform-only test routes under the same prefix beside these.

use std::future::Future;
use std::rc::Rc;

use http::{Response, StatusCode};
use lore_base::storage::Storage;
use lore_front::json_response;
use serde_json::json;

/// The path prefix of every test route.
pub const PREFIX: &str = "/__test/";

/// The two suites a test build serves.
#[derive(Clone, Copy)]
enum Suite {
    Storage,
    Records,
}

impl Suite {
    fn named(name: &str) -> Option<Self> {
        match name {
            "storage-suite" => Some(Self::Storage),
            "records-suite" => Some(Self::Records),
            _ => None,
        }
    }

    fn cases(self) -> &'static [&'static str] {
        match self {
            Self::Storage => crate::storage::CASES,
            Self::Records => crate::records::CASES,
        }
    }

    async fn run(self, case: &str, store: Rc<dyn Storage>) -> bool {
        match self {
            Self::Storage => crate::storage::run_case(case, store.as_ref()).await,
            Self::Records => crate::records::run_case(case, store).await,
        }
    }
}

/// Serves `route` (the path after [`PREFIX`]) if it is one of the suites' routes;
/// `empty_store` gives the platform's store, emptied, for one case.
pub async fn handle<F, Fut>(route: &str, empty_store: F) -> Option<Response<Vec<u8>>>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<Rc<dyn Storage>, String>>,
{
    let (suite_name, case) = match route.split_once('/') {
        Some((name, case)) => (name, Some(case)),
        None => (route, None),
    };
    let suite = Suite::named(suite_name)?;
    let cases = suite.cases();
    let Some(case) = case else {
        return Some(json_response(StatusCode::OK, json!({ "cases": cases })));
    };
    if !cases.contains(&case) {
        return Some(json_response(
            StatusCode::NOT_FOUND,
            json!({ "error": format!("no {suite_name} case {case}"), "cases": cases }),
        ));
    }
    let store = match empty_store().await {
        Ok(store) => store,
        Err(e) => {
            return Some(json_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                json!({ "error": e }),
            ));
        }
    };
    let ran = suite.run(case, store).await;
    debug_assert!(ran, "{case} is one of the cases");
    Some(json_response(
        StatusCode::OK,
        json!({ "case": case, "passed": true }),
    ))
}

/// The texts of a platform's `POST /__test/embed` body, `{"texts": [...]}`, or the 400 answer
/// to anything else.
pub fn embed_texts(body: &[u8]) -> Result<Vec<String>, Box<Response<Vec<u8>>>> {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| serde_json::from_value(v["texts"].clone()).ok())
        .ok_or_else(|| {
            Box::new(json_response(
                StatusCode::BAD_REQUEST,
                json!({ "error": "the body must be {\"texts\": [\"...\"]}" }),
            ))
        })
}
