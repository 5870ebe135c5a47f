//! Reaching an org's object: its stub, addressed by `idFromName(org)` in the namespace of the
//! org's jurisdiction and created near its location hint (the org record's `placement`,
//! chosen when the org is created), and a request forwarded to it.
//!
//! An org's placement never changes, so an isolate reads it once per org (one D1 query, on
//! the first request for that org) and keeps it. An org without a record (one not created
//! yet, or the suites' object) is placed by default and its placement not kept.

use std::cell::RefCell;
use std::collections::HashMap;

use lore_base::model::{Org, Placement};
use lore_base::storage::Storage;
use wasm_bindgen::JsCast;
use worker::{Env, Method, ObjectNamespace, Request, RequestInit, RequestRedirect, Response};

use crate::ports::Subrequests;

/// The binding of the org objects.
pub const BINDING: &str = "LORE_ORG";
/// The header naming the org a request to an org object is for.
pub const ORG_HEADER: &str = "x-lore-org";
/// The URL requests to an object are made on (the host is never resolved).
pub const OBJECT_URL: &str = "https://org-object.lore.internal";
/// Placements an isolate keeps at most (it forgets them all past that).
const KEPT: usize = 10_000;

thread_local! {
    static PLACEMENTS: RefCell<HashMap<String, Placement>> = RefCell::default();
}

/// `org`'s placement: kept by the isolate, or read from its record in D1.
pub async fn placement(
    env: &Env,
    org: &str,
    subrequests: &Subrequests,
) -> worker::Result<Placement> {
    if let Some(found) = PLACEMENTS.with(|p| p.borrow().get(org).cloned()) {
        return Ok(found);
    }
    let directory =
        crate::d1::D1Storage::counted(env.d1(crate::platform::D1_BINDING)?, subrequests.clone());
    let key = format!("{}{org}", lore_base::keys::ORG_PREFIX);
    let record = directory
        .get(&key)
        .await
        .map_err(|e| worker::Error::RustError(format!("the record of org {org}: {e}")))?;
    let Some(bytes) = record else {
        return Ok(Placement::default());
    };
    let record: Org = serde_json::from_slice(&bytes)
        .map_err(|e| worker::Error::RustError(format!("the record of org {org}: {e}")))?;
    PLACEMENTS.with(|p| {
        let mut p = p.borrow_mut();
        if p.len() >= KEPT {
            p.clear();
        }
        p.insert(org.to_string(), record.placement.clone());
    });
    Ok(record.placement)
}

/// The namespace of `jurisdiction` (`LORE_ORG.jurisdiction("eu")`), which workers-rs does not
/// wrap yet.
fn namespace(env: &Env, jurisdiction: Option<&str>) -> worker::Result<ObjectNamespace> {
    let all = env.durable_object(BINDING)?;
    let Some(jurisdiction) = jurisdiction else {
        return Ok(all);
    };
    let method = js_sys::Reflect::get(all.as_ref(), &"jurisdiction".into())?
        .dyn_into::<js_sys::Function>()
        .map_err(|_| worker::Error::RustError("this runtime has no jurisdictions".into()))?;
    Ok(method
        .call1(all.as_ref(), &jurisdiction.into())?
        .unchecked_into())
}

/// The stub of `org`'s object, where its placement puts it.
pub async fn stub(env: &Env, org: &str, subrequests: &Subrequests) -> worker::Result<worker::Stub> {
    let placement = placement(env, org, subrequests).await?;
    let namespace = namespace(env, placement.jurisdiction.as_deref())?;
    match &placement.location_hint {
        Some(hint) => namespace.get_by_name_with_location_hint(org, hint),
        None => namespace.get_by_name(org),
    }
}

/// Sends `request` (the Worker's, already read) to `org`'s object and returns its answer,
/// streamed through as the object sends it.
pub async fn forward(
    env: &Env,
    org: &str,
    url: &str,
    request: &http::Request<Vec<u8>>,
    subrequests: &Subrequests,
) -> worker::Result<Response> {
    let stub = stub(env, org, subrequests).await?;
    subrequests.made().await;
    let headers = crate::platform::worker_headers(request.headers())?;
    // Replaces any the client sent.
    headers.set(ORG_HEADER, org)?;
    let mut init = RequestInit::new();
    // The object's redirects (a saved form's 303) go back to the client as they are: a
    // stub's fetch would otherwise follow them itself and answer the POST with the next page.
    init.with_method(Method::from(request.method().to_string()))
        .with_headers(headers)
        .with_redirect(RequestRedirect::Manual);
    if !request.body().is_empty() {
        init.with_body(Some(
            js_sys::Uint8Array::from(request.body().as_slice()).into(),
        ));
    }
    let outbound = Request::new_with_init(url, &init)?;
    stub.fetch_with_request(outbound).await
}
