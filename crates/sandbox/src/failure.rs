//! How a run ends badly before the engine adds positions and counts ([`Failure`]), what a
//! host call returns ([`OpFuture`], failing with an [`SdkError`]), and the machine's fixed
//! numbers.

use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::caps::{Cap, ScriptCaps};
use crate::strip;
use lore_base::error::LoreError;

/// The native stack a thread that runs scripts needs. The caps bound every path by which a
/// script recurses natively (nested calls through built-ins, source nesting, value depth);
/// the hostile-script suite checks that each stays within this much stack. Reserved, not
/// committed: pages are touched only as deep as a run goes.
pub const STACK_BYTES: usize = 256 << 20;

/// The longest a run goes without telling its progress sink (if it has one) that it is alive.
pub const PROGRESS_EVERY_MS: u64 = 10_000;

/// What a failure is before positions and counts are added.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    pub code: &'static str,
    pub message: String,
    pub js_position: Option<(u32, u32)>,
    pub ts_position: Option<strip::Position>,
    pub cap: Option<Cap>,
}

/// An SDK call's failure as the script sees it: an `Error` with `code` (and `field`, or the
/// upstream `status`), whose message is the host's error text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SdkError {
    pub code: &'static str,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
}

impl From<LoreError> for SdkError {
    fn from(e: LoreError) -> Self {
        let field = match &e {
            LoreError::InvalidArgument { field, .. } => Some(field.clone()),
            _ => None,
        };
        let status = match &e {
            LoreError::Upstream { status, .. } => *status,
            _ => None,
        };
        Self {
            code: e.code(),
            message: e.to_string(),
            field,
            status,
        }
    }
}

impl SdkError {
    /// A failure of the host itself (not of the call).
    pub fn unavailable(message: impl Into<String>) -> Self {
        LoreError::Unavailable(message.into()).into()
    }
}

impl std::fmt::Display for SdkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// The stable codes a failure can carry, as `&'static str` again when one comes back over a
/// wire (`crate::wire`): a code lore does not know reads as `script_error`.
pub mod code {
    /// Every code an SDK error or a run's failure has.
    pub const CODES: &[&str] = &[
        "invalid_argument",
        "not_found",
        "forbidden",
        "needs_write",
        "needs_admin",
        "insufficient_scope",
        "unavailable",
        "unauthorized",
        "conflict",
        "upstream_error",
        "internal",
        "rate_limited",
        "overloaded",
        "cap_exceeded",
        "syntax_error",
        "script_error",
    ];

    /// `code` as the static string it is, else `script_error`.
    pub fn known(code: &str) -> &'static str {
        CODES
            .iter()
            .find(|c| **c == code)
            .copied()
            .unwrap_or("script_error")
    }

    /// The code of an error a script threw and did not catch: an SDK error's own code (the
    /// first eleven of [`CODES`]), else `script_error` (a script cannot pose as a cap).
    pub fn thrown(code: &str) -> &'static str {
        CODES[..11]
            .iter()
            .find(|c| **c == code)
            .copied()
            .unwrap_or("script_error")
    }
}

impl<'de> Deserialize<'de> for Failure {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        wire::Failure::deserialize(d).map(Into::into)
    }
}

impl<'de> Deserialize<'de> for SdkError {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        wire::SdkError::deserialize(d).map(Into::into)
    }
}

/// [`Failure`] and [`SdkError`] as they are read back, with owned codes (made static again).
mod wire {
    use serde::Deserialize;

    #[derive(Deserialize)]
    pub struct Failure {
        code: String,
        message: String,
        js_position: Option<(u32, u32)>,
        ts_position: Option<crate::strip::Position>,
        cap: Option<crate::caps::Cap>,
    }

    impl From<Failure> for super::Failure {
        fn from(f: Failure) -> Self {
            Self {
                code: super::code::known(&f.code),
                message: f.message,
                js_position: f.js_position,
                ts_position: f.ts_position,
                cap: f.cap,
            }
        }
    }

    #[derive(Deserialize)]
    pub struct SdkError {
        code: String,
        message: String,
        #[serde(default)]
        field: Option<String>,
        #[serde(default)]
        status: Option<u16>,
    }

    impl From<SdkError> for super::SdkError {
        fn from(e: SdkError) -> Self {
            Self {
                code: super::code::known(&e.code),
                message: e.message,
                field: e.field,
                status: e.status,
            }
        }
    }
}

impl Failure {
    pub fn cap(cap: Cap, caps: &ScriptCaps) -> Self {
        Self {
            code: "cap_exceeded",
            message: format!("the script reached {}: {}", cap.named(caps), cap.hint()),
            js_position: None,
            ts_position: None,
            cap: Some(cap),
        }
    }
    pub fn plain(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            js_position: None,
            ts_position: None,
            cap: None,
        }
    }
}

pub type OpFuture<'a> = Pin<Box<dyn Future<Output = Result<Value, SdkError>> + 'a>>;
