//! What a request to the MCP endpoint chose ([`Endpoint`]): its tool profile and the public
//! base URL, with the instructions each profile gives agents.

use http::Request;
use serde_json::json;

use lore_directory::Caller;

use super::jsonrpc::{self, RpcError};
use crate::instance::Lore;
use crate::request_log::RequestLog;

/// How lore tells agents to use it; returned by `initialize` and `server/discover`. It names
/// only tools that exist in this build.
pub const INSTRUCTIONS: &str = "lore is your organization's shared memory, the same for every agent in the org. \
Before answering a question about the org, its people, decisions or preferences, call search_memory. \
When you learn something worth keeping (a fact, decision, preference or observation), call save_memory with one \
self-contained sentence; pass supersedes_event_id to replace an outdated memory instead of contradicting it. \
The org's typed records (entities of its entity types, relationships, feeds, operations) are reached through the lore SDK: \
discover its methods and their TypeScript signatures with search_sdk, read with a short TypeScript script in query_sdk, \
and change data with run_sdk (dry_run: true previews the writes first). \
To count, filter, join or list records, call query_sql with one read-only SELECT over the org's tables (entities, events, one table per entity type, ...). \
Keep each call short and focused. Never invent ids or URLs: use only ids that lore returned.";

/// The compact profile's instructions (`search`, `fetch`, `do`).
pub const COMPACT_INSTRUCTIONS: &str = "lore is your organization's shared memory and records, the same for every agent in the org. \
Work in three steps: search, then fetch, then do. \
Call search with a few words to find records (entities, memories), Nouns (entity types), Verbs (what you can do, e.g. Offer.publish) and docs; \
before answering a question about the org, its people, decisions or preferences, search for it. \
Call fetch with a result's id to read it in full; fetch /$.d.ts for the TypeScript types of $ before you write a program. \
Call do with a short TypeScript program (the body of an async function; $ is in scope; return the result) to read or change data, \
e.g. `return await $.Offer.publish({ offer: 'offer_1' })`, and to save what you learn so the org's other agents share it: \
`await $.memory.save({ content: 'one self-contained sentence', kind: 'fact' })`. \
Keep each call short and focused. Never invent ids or URLs: use only ids that lore returned.";

/// What the request's URL and org choose for it: the tool profile (`?profile=`, else the
/// org's default) and the public base URL links point at.
pub struct Endpoint {
    pub profile: lore_base::model::Profile,
    pub base_url: Option<String>,
    /// The request's log line, for the method, tool and outcome.
    pub log: Option<std::sync::Arc<RequestLog>>,
}

impl Endpoint {
    pub(super) async fn of(
        lore: &Lore,
        request: &Request<Vec<u8>>,
        caller: &Caller,
    ) -> Result<Self, RpcError> {
        let params = crate::web::form::Params::query(request.uri());
        let asked = params.one("profile").map_err(|_| {
            RpcError::new(
                jsonrpc::INVALID_PARAMS,
                "give ?profile= once: workspace or compact",
                400,
            )
        })?;
        let profile = match asked {
            Some(p) => lore_base::model::Profile::parse(p).map_err(|e| {
                RpcError::new(jsonrpc::INVALID_PARAMS, e.to_string(), 400).with_data(
                    json!({ "profile": p, "profiles": lore_base::model::Profile::NAMES }),
                )
            })?,
            None => {
                // Checked against the org's auth stamp: a profile change through another
                // instance applies at once.
                let org = lore
                    .engine
                    .org_record(caller)
                    .await
                    .map_err(|e| RpcError::internal(e.to_string()))?;
                org.and_then(|o| o.default_profile).unwrap_or_default()
            }
        };
        Ok(Self {
            profile,
            base_url: lore.config.base_url(request.headers()),
            log: RequestLog::of(request).cloned(),
        })
    }

    /// The instructions `initialize` and `server/discover` give for this profile.
    pub fn instructions(&self) -> &'static str {
        match self.profile {
            lore_base::model::Profile::Workspace => INSTRUCTIONS,
            lore_base::model::Profile::Compact => COMPACT_INSTRUCTIONS,
        }
    }
}
