//! How a run ends badly before the engine adds positions and counts ([`Failure`]), what a
//! host call returns ([`OpFuture`]), and the machine's fixed numbers.

use std::future::Future;
use std::pin::Pin;

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
pub struct Failure {
    pub code: &'static str,
    pub message: String,
    pub js_position: Option<(u32, u32)>,
    pub ts_position: Option<strip::Position>,
    pub cap: Option<Cap>,
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

pub type OpFuture<'a> = Pin<Box<dyn Future<Output = Result<Value, LoreError>> + 'a>>;
