//! What every app page runs with ([`App`]): the OAuth page context, the browser session, and
//! the signed-in person as a caller in the org.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::instance::Lore;
use crate::web::Cx;
use crate::web::form::Params;
use crate::web::session::Session;
use lore_base::error::LoreError;
use lore_directory::Caller;
use lore_engine::{OrgRequest, Reach};

/// One request to the app: the OAuth page context, the session, the caller in the org.
pub(crate) struct App<'a> {
    pub cx: Cx<'a>,
    pub session: Session,
    pub caller: Caller,
    /// The signed-in person's display name.
    pub user: String,
}

impl App<'_> {
    pub fn lore(&self) -> &Lore {
        self.cx.lore
    }

    pub fn org(&self) -> &str {
        self.caller.org().as_str()
    }

    /// Whether the person may change the org's memory (member or above).
    pub fn can_write(&self) -> bool {
        self.caller.role().can_write()
    }

    /// Whether the person administers the org (admin or owner).
    pub fn is_admin(&self) -> bool {
        self.caller.role().is_admin()
    }

    /// Calls SDK method `path` as the signed-in person.
    pub async fn call(&self, path: &str, args: Value) -> Result<Value, LoreError> {
        self.lore()
            .engine
            .call(OrgRequest::new(&self.caller, path, args, Reach::App)?)
            .await
    }

    /// The org's members by principal id: their names, for showing who did what. Empty when
    /// they cannot be read (the pages then show ids).
    pub async fn names(&self) -> HashMap<String, String> {
        self.call("members.list", json!({}))
            .await
            .ok()
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default()
            .into_iter()
            .filter_map(|m| {
                Some((
                    m["principal_id"].as_str()?.to_string(),
                    m["name"].as_str()?.to_string(),
                ))
            })
            .collect()
    }

    /// The query string's parameters.
    pub fn query(&self) -> Params {
        Params::query(self.cx.request.uri())
    }
}
