//! Errors of the core, each with a stable machine-readable code that every surface (MCP tool
//! results, REST, CLI) shows unchanged.

use serde::Serialize;

use crate::storage::StorageError;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LoreError {
    /// The input is wrong; `field` is a JSON pointer or field name.
    #[error("invalid argument `{field}`: {message}")]
    InvalidArgument { field: String, message: String },
    #[error("{what} not found")]
    NotFound { what: String },
    /// The caller may not do this at all (wrong org, no membership).
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// The caller's role or token scopes allow reads only.
    #[error("this needs write access: {0}")]
    NeedsWrite(String),
    #[error("this needs the admin or owner role: {0}")]
    NeedsAdmin(String),
    /// The token's scopes do not cover the call (OAuth `insufficient_scope`), whatever the role.
    #[error("insufficient_scope: {0}")]
    InsufficientScope(String),
    /// The feature exists in the model but this build cannot run it yet.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// Missing, unknown, expired or revoked credentials.
    #[error("unauthorized: {0}")]
    Unauthorized(String),
    #[error("conflict: {0}")]
    Conflict(String),
    /// A call out through a connection failed: no answer (`status` none), or an answer whose
    /// status says it failed.
    #[error("upstream error: {message}")]
    Upstream {
        status: Option<u16>,
        message: String,
    },
    /// Over a rate limit (`limit`: `token` or `org`); try again after `retry_after_ms`.
    #[error(
        "rate_limited: over the {limit} limit of {per_minute} requests per minute; retry after {retry_after_ms} ms"
    )]
    RateLimited {
        limit: &'static str,
        per_minute: u32,
        retry_after_ms: u64,
    },
    /// The server is at a capacity limit (e.g. scripts running at once); retry shortly.
    #[error("overloaded: {0}")]
    Overloaded(String),
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("internal error: {0}")]
    Internal(String),
    /// A `query_sdk`/`run_sdk` script failed: thrown, reached a cap, or did not parse.
    #[error("script failed: {0}")]
    Script(Box<ScriptFailure>),
}

impl LoreError {
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::InvalidArgument {
            field: field.into(),
            message: message.into(),
        }
    }

    pub fn not_found(what: impl Into<String>) -> Self {
        Self::NotFound { what: what.into() }
    }

    /// The stable code clients can match on.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidArgument { .. } => "invalid_argument",
            Self::NotFound { .. } => "not_found",
            Self::Forbidden(_) => "forbidden",
            Self::NeedsWrite(_) => "needs_write",
            Self::NeedsAdmin(_) => "needs_admin",
            Self::InsufficientScope(_) => "insufficient_scope",
            Self::Unavailable(_) => "unavailable",
            Self::Unauthorized(_) => "unauthorized",
            Self::Conflict(_) => "conflict",
            Self::Upstream { .. } => "upstream_error",
            Self::RateLimited { .. } => "rate_limited",
            Self::Overloaded(_) => "overloaded",
            Self::Storage(StorageError::Conflict { .. }) => "conflict",
            Self::Storage(_) | Self::Internal(_) => "internal",
            Self::Script(f) => f.code,
        }
    }

    /// The HTTP status a REST caller gets for this error.
    pub fn http_status(&self) -> u16 {
        match self.code() {
            "invalid_argument" => 400,
            "unauthorized" => 401,
            "forbidden" | "needs_write" | "needs_admin" | "insufficient_scope" => 403,
            "not_found" => 404,
            "conflict" => 409,
            "unavailable" => 501,
            "upstream_error" => 502,
            "rate_limited" => 429,
            "overloaded" => 503,
            "cap_exceeded" | "syntax_error" | "script_error" => 422,
            _ => 500,
        }
    }

    /// The error as a JSON object: `{code, message, field?}`.
    pub fn to_json(&self) -> serde_json::Value {
        if let Self::Script(failure) = self {
            return serde_json::to_value(failure).unwrap_or_default();
        }
        let mut v = serde_json::json!({ "code": self.code(), "message": self.to_string() });
        if let Self::InvalidArgument { field, .. } = self {
            v["field"] = serde_json::Value::String(field.clone());
        }
        if let Self::Upstream {
            status: Some(status),
            ..
        } = self
        {
            v["status"] = serde_json::Value::from(*status);
        }
        if let Self::RateLimited {
            limit,
            per_minute,
            retry_after_ms,
        } = self
        {
            v["limit"] = serde_json::Value::from(*limit);
            v["per_minute"] = serde_json::Value::from(*per_minute);
            v["retry_after_ms"] = serde_json::Value::from(*retry_after_ms);
        }
        v
    }

    /// `Retry-After` in whole seconds (at least 1) for a rate-limited request.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            Self::RateLimited { retry_after_ms, .. } => Some(retry_after_ms.div_ceil(1000).max(1)),
            Self::Overloaded(_) => Some(1),
            _ => None,
        }
    }

    /// Whether trying again later may succeed: no answer from upstream, or its 408, 429 or
    /// 5xx.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Upstream { status, .. } => {
                status.is_none_or(|s| s == 408 || s == 429 || s >= 500)
            }
            _ => false,
        }
    }
}

impl From<serde_json::Error> for LoreError {
    fn from(e: serde_json::Error) -> Self {
        Self::Internal(format!("stored record is not valid JSON: {e}"))
    }
}

pub type Result<T, E = LoreError> = std::result::Result<T, E>;

/// A script that failed: the tool result's structured error (SPEC 4.2).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScriptFailure {
    /// `cap_exceeded`, `syntax_error`, `script_error`, `conflict`, or the code of the SDK
    /// error the script did not catch (`needs_write`, `not_found`, ...).
    pub code: &'static str,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cap: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    pub calls_made: usize,
    pub elapsed_ms: u64,
    pub logs: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action_id: Option<String>,
    /// The run lost its commit to a concurrent writer and nothing outside lore saw it: it may
    /// run again from the start.
    #[serde(skip)]
    pub retryable: bool,
}

impl std::fmt::Display for ScriptFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.message)?;
        if let Some(line) = self.line {
            write!(f, " (line {line}")?;
            if let Some(col) = self.column {
                write!(f, ", column {col}")?;
            }
            write!(f, ")")?;
        }
        Ok(())
    }
}
