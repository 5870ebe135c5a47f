//! One MCP request in flight: who asks, which era, and the notifications (progress, logs) it
//! sends before its result. Methods shared by both eras (`tools/list`, `tools/call`) live here.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use serde_json::{Map, Value, json};

use super::endpoint::Endpoint;
use super::jsonrpc::{self, RpcError};
use super::reply::Streamer;
use super::result::{ToolResult, tool_error};
use crate::instance::Lore;
use lore_base::error::LoreError;
use lore_directory::Caller;
use lore_engine::tools;
use lore_engine::{OrgRequest, Reach};

/// MCP log levels (RFC 5424 order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

impl LogLevel {
    pub const NAMES: &[&str] = &[
        "debug",
        "info",
        "notice",
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
    ];

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "debug" => Self::Debug,
            "info" => Self::Info,
            "notice" => Self::Notice,
            "warning" => Self::Warning,
            "error" => Self::Error,
            "critical" => Self::Critical,
            "alert" => Self::Alert,
            "emergency" => Self::Emergency,
            _ => return None,
        })
    }
    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

pub struct Exchange<'a> {
    pub lore: &'a Lore,
    pub caller: &'a Caller,
    /// The profile and base URL the request's endpoint chose.
    pub endpoint: &'a Endpoint,
    /// The 2026-07-28 era: results carry `resultType`, lists carry caching hints.
    pub stateless: bool,
    pub progress_token: Option<Value>,
    /// Lowest level of `notifications/message` the client asked for; `None` sends none.
    pub log_level: Option<LogLevel>,
    pub client_capabilities: Value,
    /// `params.inputResponses` (SEP-2322, 2026-07-28): the client's answers to the
    /// `inputRequests` of an earlier `input_required` result, exactly as sent.
    pub input_responses: Option<Value>,
    /// `params.requestState` (SEP-2322): the opaque state an earlier `input_required` result
    /// carried, echoed back by the client.
    pub request_state: Option<Value>,
    /// Where progress goes as it happens, when the adapter streams and the client reads SSE
    /// and sent a progress token; otherwise notifications wait for the result.
    pub stream: Option<Rc<Streamer>>,
    notifications: RefCell<Vec<Value>>,
    /// The last progress value sent (progress only increases).
    progress_sent: Cell<f64>,
}

impl<'a> Exchange<'a> {
    pub fn new(
        lore: &'a Lore,
        caller: &'a Caller,
        endpoint: &'a Endpoint,
        stateless: bool,
        params: &Map<String, Value>,
    ) -> Self {
        let progress_token = params
            .get("_meta")
            .and_then(|m| m.get("progressToken"))
            .filter(|t| t.is_string() || t.is_number())
            .cloned();
        Self {
            lore,
            caller,
            endpoint,
            stateless,
            progress_token,
            log_level: None,
            client_capabilities: json!({}),
            input_responses: params.get("inputResponses").cloned(),
            request_state: params.get("requestState").cloned(),
            stream: None,
            notifications: RefCell::new(Vec::new()),
            progress_sent: Cell::new(0.0),
        }
    }

    /// Streams progress through `stream` if this request asked for progress.
    pub fn stream_progress(&mut self, stream: Option<Rc<Streamer>>) {
        if self.progress_token.is_some() {
            self.stream = stream;
        }
    }

    /// Whether the reply's head has gone out (the rest must follow as SSE).
    pub fn streamed(&self) -> bool {
        self.stream.as_ref().is_some_and(|s| s.started())
    }

    /// The next progress step of a long tool call (a script's SDK call, sleep or heartbeat).
    fn progress_step(&self, message: &str) {
        let next = self.progress_sent.get() + 1.0;
        self.progress(next, None, Some(message));
    }

    pub fn log(&self, level: LogLevel, data: Value) {
        if self.log_level.is_some_and(|min| level >= min) {
            let params = json!({ "level": level.as_str(), "logger": "lore", "data": data });
            self.notifications
                .borrow_mut()
                .push(jsonrpc::notification("notifications/message", params));
        }
    }

    pub fn progress(&self, progress: f64, total: Option<f64>, message: Option<&str>) {
        let Some(token) = &self.progress_token else {
            return;
        };
        let mut params = json!({ "progressToken": token, "progress": progress });
        if let Some(total) = total {
            params["total"] = json!(total);
        }
        if let Some(message) = message {
            params["message"] = json!(message);
        }
        self.progress_sent.set(progress);
        let notification = jsonrpc::notification("notifications/progress", params);
        match &self.stream {
            Some(stream) => stream.send(&notification),
            None => self.notifications.borrow_mut().push(notification),
        }
    }

    /// Whether the request produced notifications (or streamed) that must go before its result.
    pub fn has_notifications(&self) -> bool {
        self.streamed() || !self.notifications.borrow().is_empty()
    }

    pub fn take_notifications(&self) -> Vec<Value> {
        std::mem::take(&mut self.notifications.borrow_mut())
    }

    /// Marks a result for the 2026-07-28 era (`resultType`, and caching hints on lists).
    pub fn finish_result(&self, mut result: Value, cacheable: bool) -> Value {
        if self.stateless
            && let Some(obj) = result.as_object_mut()
        {
            obj.entry("resultType").or_insert(json!("complete"));
            if cacheable {
                // Tool lists depend on who asks (scopes today, roles and orgs later): private, and
                // not cached, so a token change shows at once.
                obj.entry("ttlMs").or_insert(json!(0));
                obj.entry("cacheScope").or_insert(json!("private"));
            }
            let meta = obj.entry("_meta").or_insert_with(|| json!({}));
            if let Some(meta) = meta.as_object_mut() {
                meta.insert(super::result::SERVER_INFO.into(), self.lore.server_info());
            }
        }
        result
    }

    /// The product's tools on this endpoint's `tools/list`.
    pub fn tools(&self) -> Vec<Value> {
        tools::descriptors(self.endpoint.profile).to_vec()
    }

    /// `tools/call`. Protocol errors (unknown tool, missing scope) are `Err`; tool failures are
    /// results with `isError: true`. The caller marks the result for its era
    /// ([`Exchange::finish_result`], or [`ToolResult::bytes`]).
    pub async fn tools_call(&self, params: &Map<String, Value>) -> Result<ToolResult, RpcError> {
        let name = match params.get("name") {
            Some(Value::String(n)) => n.as_str(),
            _ => {
                return Err(RpcError::new(
                    jsonrpc::INVALID_PARAMS,
                    "tools/call needs params.name, a string",
                    200,
                ));
            }
        };
        let args = match params.get("arguments") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(v @ Value::Object(_)) => v.clone(),
            Some(_) => {
                return Err(RpcError::new(
                    jsonrpc::INVALID_PARAMS,
                    "tools/call arguments must be an object",
                    200,
                ));
            }
        };
        if let Some(log) = &self.endpoint.log {
            log.tool(name);
        }
        let profile = self.endpoint.profile;
        let mut request =
            match OrgRequest::new(self.caller, name, args, Reach::Listed(profile)) {
                Ok(request) => request,
                Err(e) => {
                    let message = match e {
                        LoreError::InvalidArgument { message, .. } => message,
                        other => other.to_string(),
                    };
                    let known: Vec<&str> = tools::listed(profile).map(|t| t.name).collect();
                    return Err(RpcError::new(jsonrpc::INVALID_PARAMS, message, 200).with_data(
                        json!({ "tool": name, "available": known, "profile": profile.as_str() }),
                    ));
                }
            };
        let spec = request
            .spec()
            .expect("a listed request calls a tool of the table");
        // Scripts report each SDK call and sleep, and a heartbeat, as they run.
        let step = |message: &str| self.progress_step(message);
        // Progress goes out only for a call the engine admitted (its scope checked and its
        // arguments validated, once, there).
        let announced = std::cell::Cell::new(false);
        let announce = || {
            announced.set(true);
            let total = (!spec.runs_script).then_some(1.0);
            self.progress(0.0, total, Some("started"));
        };
        if self.progress_token.is_some() {
            request.progress = spec.runs_script.then_some(&step as &dyn Fn(&str));
            request.admitted = Some(&announce as &dyn Fn());
        }
        request.meta = params.get("_meta");
        request.base_url = self.endpoint.base_url.as_deref();
        let outcome = self.lore.engine.reply(request).await;
        if announced.get() {
            let last = if spec.runs_script {
                self.progress_sent.get() + 1.0
            } else {
                1.0
            };
            self.progress(last, Some(last), Some("done"));
        }
        if let Err(LoreError::InsufficientScope(_)) = outcome {
            return Err(insufficient_scope(name));
        }
        Ok(match outcome {
            Ok(value) if spec.untrusted_rows => ToolResult::Untrusted(value),
            Ok(value) => ToolResult::Success(value),
            Err(e) => {
                if let Some(log) = &self.endpoint.log {
                    log.error(&e);
                }
                self.log(
                    LogLevel::Warning,
                    json!({ "tool": name, "error": e.to_json() }),
                );
                ToolResult::Whole(tool_error(&e))
            }
        })
    }
}

/// 403 for a token whose scopes lack what the tool needs (RFC 6750 `insufficient_scope`).
pub fn insufficient_scope(tool: &str) -> RpcError {
    RpcError::new(
        jsonrpc::FORBIDDEN,
        format!("insufficient_scope: {tool} writes, and this token lacks the mcp:write scope"),
        403,
    )
    .with_data(
        json!({ "error": "insufficient_scope", "required_scope": "mcp:write", "tool": tool }),
    )
    .with_header(
        "www-authenticate",
        crate::oauth::metadata::insufficient_scope_challenge(
            None,
            "this tool needs the mcp:write scope",
        ),
    )
}
