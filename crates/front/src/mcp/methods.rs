//! The methods both protocol eras answer the same way, `tools/list` and `tools/call`: the
//! product's tools (the exchange), and in a test build the conformance suite's fixture tools
//! beside them.

use serde_json::{Map, Value};

use super::exchange::Exchange;
use super::jsonrpc::RpcError;

/// `tools/list`.
pub fn tools_list(ex: &Exchange<'_>) -> Value {
    #[allow(unused_mut)]
    let mut tools = ex.tools();
    #[cfg(feature = "conformance-fixtures")]
    tools.extend(super::fixtures::tools(ex.stateless));
    ex.finish_result(serde_json::json!({ "tools": tools }), true)
}

/// `tools/call`.
pub async fn tools_call(ex: &Exchange<'_>, params: &Map<String, Value>) -> Result<Value, RpcError> {
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
            return result.map(|r| ex.finish_result(r, false));
        }
    }
    ex.tools_call(params).await
}
