//! The methods both protocol eras answer the same way, `tools/list` and `tools/call`: the
//! product's tools (the exchange), and in a test build the conformance suite's fixture tools
//! beside them.

use std::rc::Rc;

use serde_json::{Map, Value};

use super::exchange::Exchange;
use super::jsonrpc::RpcError;
use super::result::ToolResult;

/// `tools/list`.
pub fn tools_list(ex: &Exchange<'_>) -> Value {
    #[allow(unused_mut)]
    let mut tools = ex.tools();
    #[cfg(feature = "conformance-fixtures")]
    tools.extend(super::fixtures::tools(ex.stateless));
    ex.finish_result(serde_json::json!({ "tools": tools }), true)
}

/// The `tools/list` result as JSON bytes: built and serialized once per instance, profile and
/// era (it depends on nothing else), so a list costs a copy. The 2026-07-28 era sends it as
/// is (`McpReply::raw_result`).
pub fn tools_list_bytes(ex: &Exchange<'_>) -> Rc<[u8]> {
    let key = (ex.endpoint.profile, ex.stateless);
    if let Some((_, bytes)) = ex.lore.listed.borrow().iter().find(|(k, _)| *k == key) {
        return bytes.clone();
    }
    let bytes: Rc<[u8]> = serde_json::to_vec(&tools_list(ex))
        .expect("a tool list serializes")
        .into();
    ex.lore.listed.borrow_mut().push((key, bytes.clone()));
    bytes
}

/// `tools/call`, marked for its era.
pub async fn tools_call(ex: &Exchange<'_>, params: &Map<String, Value>) -> Result<Value, RpcError> {
    let result = call_tool(ex, params).await?;
    Ok(ex.finish_result(result.into_value(), false))
}

/// `tools/call`'s result, before it is marked for its era.
pub async fn call_tool(
    ex: &Exchange<'_>,
    params: &Map<String, Value>,
) -> Result<ToolResult, RpcError> {
    #[cfg(feature = "conformance-fixtures")]
    if let Some(Value::String(name)) = params.get("name") {
        let args = match params.get("arguments") {
            None | Some(Value::Null) => Some(Value::Object(Map::new())),
            Some(v @ Value::Object(_)) => Some(v.clone()),
            Some(_) => None,
        };
        if let Some(args) = args
            && let Some(result) = super::fixtures::call(ex, name, &args).await
        {
            return result.map(ToolResult::Whole);
        }
    }
    ex.tools_call(params).await
}
