//! Fixture tools, prompts and resources for the MCP conformance suite
//! (`@modelcontextprotocol/conformance`, see `tests/conformance/`). Compiled only with the
//! `conformance-fixtures` feature; a release never contains them.
//!
//! Shared by both eras: the content tools, progress, the prompts, the `test://` resources and
//! completion. Legacy only: `test_tool_with_logging` and resource subscriptions. Current era
//! (2026-07-28) only: the capability, logging and streaming probes, and the multi round-trip
//! request (MRTR, SEP-2322) fixtures, whose `requestState` is HMAC-signed with a per-process
//! key so a tampered state is refused.
//!
//! Not implemented: the legacy server→client requests (sampling and elicitation sent over the
//! POST's SSE stream while the tool waits for the client's reply) — replies are buffered, not
//! streamed — and the 2026 `subscriptions/listen` stream.

use std::sync::OnceLock;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde_json::{Map, Value, json};
use sha2::Sha256;

use super::exchange::{Exchange, LogLevel};
use super::jsonrpc::{self, RpcError};

/// A 1×1 PNG.
const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A WAV header with one silent sample.
const WAV_B64: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

const TEMPLATE_PREFIX: &str = "test://template/";
const TEMPLATE_SUFFIX: &str = "/data";
/// How long an MRTR `requestState` stays valid.
const STATE_TTL_MS: i64 = 10 * 60 * 1000;

/// Which protocol era a fixture belongs to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Era {
    Both,
    Legacy,
    Current,
}

impl Era {
    fn includes(self, stateless: bool) -> bool {
        match self {
            Self::Both => true,
            Self::Legacy => !stateless,
            Self::Current => stateless,
        }
    }
}

struct FixtureTool {
    name: &'static str,
    description: &'static str,
    era: Era,
}

const fn tool(name: &'static str, description: &'static str, era: Era) -> FixtureTool {
    FixtureTool { name, description, era }
}

const JSON_SCHEMA_TOOL: &str = "json_schema_2020_12_tool";

static TOOLS: &[FixtureTool] = &[
    tool("test_simple_text", "Returns a simple text content block.", Era::Both),
    tool("test_image_content", "Returns an image content block (a 1x1 PNG).", Era::Both),
    tool("test_audio_content", "Returns an audio content block (a short WAV).", Era::Both),
    tool("test_embedded_resource", "Returns an embedded text resource.", Era::Both),
    tool("test_multiple_content_types", "Returns text, image and embedded resource content together.", Era::Both),
    tool("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100 before its result.", Era::Both),
    tool("test_error_handling", "Always fails with isError: true.", Era::Both),
    tool(JSON_SCHEMA_TOOL, "Tool with JSON Schema 2020-12 features in its input schema.", Era::Both),
    tool("test_tool_with_logging", "Sends three log notifications before its result.", Era::Legacy),
    tool("test_missing_capability", "Needs the client's sampling capability; refuses without it.", Era::Current),
    tool("test_streaming_elicitation", "Streams a progress notification, then its result; sends no requests.", Era::Current),
    tool("test_logging_tool", "Logs only when the request's _meta asks for a log level.", Era::Current),
    tool("test_input_required_result_elicitation", "MRTR: asks the user's name through an elicitation input request.", Era::Current),
    tool("test_input_required_result_sampling", "MRTR: asks the client's model through a sampling input request.", Era::Current),
    tool("test_input_required_result_list_roots", "MRTR: asks the client's roots through a roots/list input request.", Era::Current),
    tool("test_input_required_result_request_state", "MRTR: asks for confirmation and carries a signed requestState.", Era::Current),
    tool("test_input_required_result_multiple_inputs", "MRTR: asks for elicitation, sampling and roots at once.", Era::Current),
    tool("test_input_required_result_multi_round", "MRTR: asks two questions in two rounds.", Era::Current),
    tool("test_input_required_result_tampered_state", "MRTR: refuses a requestState that fails its integrity check.", Era::Current),
    tool("test_input_required_result_capabilities", "MRTR: asks only for inputs the client's capabilities allow.", Era::Current),
];

fn empty_schema() -> Value {
    json!({ "type": "object", "properties": {} })
}

fn json_schema_2020_12() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": { "street": { "type": "string" }, "city": { "type": "string" } }
            }
        },
        "properties": {
            "name": { "type": "string" },
            "address": { "$ref": "#/$defs/address" },
            "contactMethod": { "type": "string", "enum": ["phone", "email"] },
            "phone": { "type": "string" },
            "email": { "type": "string" }
        },
        "allOf": [{ "anyOf": [{ "required": ["phone"] }, { "required": ["email"] }] }],
        "if": { "properties": { "contactMethod": { "const": "phone" } }, "required": ["contactMethod"] },
        "then": { "required": ["phone"] },
        "else": { "required": ["email"] },
        "additionalProperties": false
    })
}

/// Extra tool descriptors for `tools/list`.
pub fn tools(stateless: bool) -> Vec<Value> {
    TOOLS
        .iter()
        .filter(|t| t.era.includes(stateless))
        .map(|t| {
            let schema = if t.name == JSON_SCHEMA_TOOL { json_schema_2020_12() } else { empty_schema() };
            json!({ "name": t.name, "description": t.description, "inputSchema": schema })
        })
        .collect()
}

pub fn add_capabilities(caps: &mut Value, stateless: bool) {
    let Some(caps) = caps.as_object_mut() else { return };
    if stateless {
        // No listChanged or subscribe: this era has no `subscriptions/listen` stream here.
        caps.insert("prompts".into(), json!({}));
        caps.insert("resources".into(), json!({}));
    } else {
        caps.insert("prompts".into(), json!({ "listChanged": false }));
        caps.insert("resources".into(), json!({ "subscribe": true, "listChanged": false }));
    }
    caps.insert("completions".into(), json!({}));
}

fn text(s: impl Into<String>) -> Value {
    json!({ "type": "text", "text": s.into() })
}

fn image() -> Value {
    json!({ "type": "image", "data": PNG_B64, "mimeType": "image/png" })
}

fn content(items: Vec<Value>) -> Value {
    json!({ "content": items })
}

fn invalid(message: impl Into<String>) -> RpcError {
    RpcError::new(jsonrpc::INVALID_PARAMS, message, 200)
}

/// Runs a fixture tool; `None` when `name` is not one (in this era).
pub async fn call(ex: &Exchange<'_>, name: &str, args: &Value) -> Option<Result<Value, RpcError>> {
    let spec = TOOLS.iter().find(|t| t.name == name && t.era.includes(ex.stateless))?;
    Some(match spec.name {
        "test_simple_text" => Ok(content(vec![text("This is a simple text response for testing.")])),
        "test_image_content" => Ok(content(vec![image()])),
        "test_audio_content" => {
            Ok(content(vec![json!({ "type": "audio", "data": WAV_B64, "mimeType": "audio/wav" })]))
        }
        "test_embedded_resource" => Ok(content(vec![json!({
            "type": "resource",
            "resource": { "uri": "test://embedded-resource", "mimeType": "text/plain", "text": "This is an embedded resource content." }
        })])),
        "test_multiple_content_types" => Ok(content(vec![
            text("Multiple content types test:"),
            image(),
            json!({
                "type": "resource",
                "resource": { "uri": "test://mixed-content-resource", "mimeType": "application/json", "text": "{\"test\":\"data\",\"value\":123}" }
            }),
        ])),
        "test_tool_with_progress" => {
            for step in [0.0, 50.0, 100.0] {
                ex.progress(step, Some(100.0), None);
            }
            Ok(content(vec![text("Progress test completed.")]))
        }
        "test_error_handling" => Ok(json!({
            "isError": true,
            "content": [text("This tool intentionally returns an error for testing")]
        })),
        JSON_SCHEMA_TOOL => Ok(content(vec![text(format!("{JSON_SCHEMA_TOOL} called with {args}"))])),
        "test_tool_with_logging" => {
            for message in ["Tool execution started", "Tool processing data", "Tool execution completed"] {
                ex.log(LogLevel::Info, json!(message));
            }
            Ok(content(vec![text("Logging test completed.")]))
        }
        "test_missing_capability" => match require(ex, &["sampling"]) {
            Ok(()) => Ok(content(vec![text("The client declared sampling.")])),
            Err(e) => Err(e),
        },
        "test_streaming_elicitation" => {
            ex.progress(1.0, Some(1.0), Some("done"));
            Ok(content(vec![text("Streaming complete.")]))
        }
        "test_logging_tool" => {
            ex.log(LogLevel::Info, json!("test_logging_tool ran"));
            Ok(content(vec![text("Logging tool complete.")]))
        }
        mrtr => mrtr_tool(ex, mrtr),
    })
}

/// Prompts, resources and completion; `None` for any other method (in this era).
pub async fn dispatch(ex: &Exchange<'_>, method: &str, params: &Map<String, Value>) -> Option<Result<Value, RpcError>> {
    let (result, cacheable) = match method {
        "prompts/list" => (Ok(prompts_list(ex.stateless)), true),
        "prompts/get" => (prompts_get(ex, params), false),
        "resources/list" => (Ok(json!({ "resources": resources() })), true),
        "resources/templates/list" => (Ok(json!({ "resourceTemplates": [template()] })), true),
        "resources/read" => (resources_read(params), true),
        "completion/complete" => (complete(params), false),
        "resources/subscribe" | "resources/unsubscribe" if !ex.stateless => (subscription(params), false),
        _ => return None,
    };
    Some(result.map(|r| ex.finish_result(r, cacheable)))
}

// ---------------------------------------------------------------------------------------------
// Prompts

const MRTR_PROMPT: &str = "test_input_required_result_prompt";

fn prompts_list(stateless: bool) -> Value {
    let mut prompts = vec![
        json!({ "name": "test_simple_prompt", "description": "A simple prompt without arguments." }),
        json!({
            "name": "test_prompt_with_arguments",
            "description": "A prompt with two required arguments.",
            "arguments": [
                { "name": "arg1", "description": "First argument", "required": true },
                { "name": "arg2", "description": "Second argument", "required": true }
            ]
        }),
        json!({
            "name": "test_prompt_with_embedded_resource",
            "description": "A prompt that embeds a resource.",
            "arguments": [{ "name": "resourceUri", "description": "URI of the resource to embed", "required": true }]
        }),
        json!({ "name": "test_prompt_with_image", "description": "A prompt with an image." }),
    ];
    if stateless {
        prompts.push(json!({ "name": MRTR_PROMPT, "description": "MRTR: a prompt that asks the user for context first." }));
    }
    json!({ "prompts": prompts })
}

fn prompt_arg<'a>(args: Option<&'a Map<String, Value>>, name: &str) -> Result<&'a str, RpcError> {
    args.and_then(|a| a.get(name)).and_then(Value::as_str).ok_or_else(|| {
        invalid(format!("missing required argument {name:?}")).with_data(json!({ "argument": name }))
    })
}

fn user(content: Value) -> Value {
    json!({ "role": "user", "content": content })
}

fn prompts_get(ex: &Exchange<'_>, params: &Map<String, Value>) -> Result<Value, RpcError> {
    let name = params.get("name").and_then(Value::as_str).ok_or_else(|| invalid("prompts/get needs params.name, a string"))?;
    let args = match params.get("arguments") {
        None | Some(Value::Null) => None,
        Some(Value::Object(a)) => Some(a),
        Some(_) => return Err(invalid("prompts/get arguments must be an object")),
    };
    let messages = match name {
        "test_simple_prompt" => vec![user(text("This is a simple prompt for testing."))],
        "test_prompt_with_arguments" => {
            let (a1, a2) = (prompt_arg(args, "arg1")?, prompt_arg(args, "arg2")?);
            vec![user(text(format!("Prompt with arguments: arg1='{a1}', arg2='{a2}'")))]
        }
        "test_prompt_with_embedded_resource" => {
            let uri = prompt_arg(args, "resourceUri")?;
            vec![
                user(json!({
                    "type": "resource",
                    "resource": { "uri": uri, "mimeType": "text/plain", "text": "Embedded resource content for testing." }
                })),
                user(text("Please process the embedded resource above.")),
            ]
        }
        "test_prompt_with_image" => vec![user(image()), user(text("Please analyze the image above."))],
        MRTR_PROMPT if ex.stateless => return mrtr_prompt(ex),
        other => return Err(invalid(format!("Unknown prompt: {other}")).with_data(json!({ "prompt": other }))),
    };
    Ok(json!({ "messages": messages }))
}

// ---------------------------------------------------------------------------------------------
// Resources

fn resources() -> Vec<Value> {
    vec![
        json!({ "uri": "test://static-text", "name": "static-text", "title": "Static Text Resource", "description": "A static text resource for testing.", "mimeType": "text/plain" }),
        json!({ "uri": "test://static-binary", "name": "static-binary", "title": "Static Binary Resource", "description": "A static binary resource (a 1x1 PNG) for testing.", "mimeType": "image/png" }),
        json!({ "uri": "test://watched-resource", "name": "watched-resource", "title": "Watched Resource", "description": "A resource clients can subscribe to.", "mimeType": "text/plain" }),
    ]
}

fn template() -> Value {
    json!({
        "uriTemplate": format!("{TEMPLATE_PREFIX}{{id}}{TEMPLATE_SUFFIX}"),
        "name": "template",
        "title": "Template Resource",
        "description": "A resource template with an {id} parameter.",
        "mimeType": "application/json"
    })
}

/// The `{id}` of a URI that matches the template.
fn template_id(uri: &str) -> Option<&str> {
    let id = uri.strip_prefix(TEMPLATE_PREFIX)?.strip_suffix(TEMPLATE_SUFFIX)?;
    (!id.is_empty() && !id.contains('/')).then_some(id)
}

fn read_uri(params: &Map<String, Value>) -> Result<&str, RpcError> {
    params.get("uri").and_then(Value::as_str).ok_or_else(|| invalid("params.uri is required and must be a string"))
}

fn not_found(uri: &str) -> RpcError {
    invalid(format!("Resource not found: {uri}")).with_data(json!({ "uri": uri }))
}

fn resources_read(params: &Map<String, Value>) -> Result<Value, RpcError> {
    let uri = read_uri(params)?;
    let contents = match uri {
        "test://static-text" => {
            json!({ "uri": uri, "mimeType": "text/plain", "text": "This is the content of the static text resource." })
        }
        "test://static-binary" => json!({ "uri": uri, "mimeType": "image/png", "blob": PNG_B64 }),
        "test://watched-resource" => json!({ "uri": uri, "mimeType": "text/plain", "text": "Watched resource content" }),
        _ => match template_id(uri) {
            Some(id) => {
                let body = json!({ "id": id, "templateTest": true, "data": format!("Data for ID: {id}") });
                json!({ "uri": uri, "mimeType": "application/json", "text": body.to_string() })
            }
            None => return Err(not_found(uri)),
        },
    };
    Ok(json!({ "contents": [contents] }))
}

fn subscription(params: &Map<String, Value>) -> Result<Value, RpcError> {
    let uri = read_uri(params)?;
    if !resources().iter().any(|r| r["uri"] == uri) && template_id(uri).is_none() {
        return Err(not_found(uri));
    }
    // The fixture resources never change, so there is nothing to remember or notify.
    Ok(json!({}))
}

// ---------------------------------------------------------------------------------------------
// Completion

fn complete(params: &Map<String, Value>) -> Result<Value, RpcError> {
    let reference = params.get("ref").and_then(Value::as_object).ok_or_else(|| invalid("params.ref must be an object"))?;
    let argument =
        params.get("argument").and_then(Value::as_object).ok_or_else(|| invalid("params.argument must be an object"))?;
    let arg_name = argument.get("name").and_then(Value::as_str).unwrap_or_default();
    let prefix = argument.get("value").and_then(Value::as_str).unwrap_or_default();
    let candidates: &[&str] = match (reference.get("type").and_then(Value::as_str), arg_name) {
        (Some("ref/prompt"), "arg1" | "arg2") if reference.get("name") == Some(&json!("test_prompt_with_arguments")) => {
            &["testValue1", "testValue2", "example", "sample"]
        }
        (Some("ref/prompt"), "resourceUri") => &["test://static-text", "test://static-binary", "test://example-resource"],
        (Some("ref/resource"), "id") => &["1", "2", "3", "123"],
        (Some("ref/prompt" | "ref/resource"), _) => &[],
        _ => return Err(invalid("params.ref.type must be ref/prompt or ref/resource")),
    };
    let values: Vec<&str> = candidates.iter().copied().filter(|c| c.starts_with(prefix)).collect();
    Ok(json!({ "completion": { "values": values, "total": values.len(), "hasMore": false } }))
}

// ---------------------------------------------------------------------------------------------
// Client capabilities (2026-07-28)

fn has_capability(ex: &Exchange<'_>, name: &str) -> bool {
    ex.client_capabilities.get(name).is_some_and(Value::is_object)
}

/// -32021 (HTTP 400) naming every capability in `names` the client did not declare.
fn require(ex: &Exchange<'_>, names: &[&str]) -> Result<(), RpcError> {
    let missing: Map<String, Value> =
        names.iter().filter(|n| !has_capability(ex, n)).map(|n| (n.to_string(), json!({}))).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let list: Vec<&String> = missing.keys().collect();
    Err(RpcError::new(
        jsonrpc::MISSING_CLIENT_CAPABILITY,
        format!("this request needs the client capabilities {list:?}, which the request's _meta does not declare"),
        400,
    )
    .with_data(json!({ "requiredCapabilities": missing })))
}

// ---------------------------------------------------------------------------------------------
// Multi round-trip requests (SEP-2322)

fn elicit_request(message: &str, field: &str, kind: &str) -> Value {
    json!({
        "method": "elicitation/create",
        "params": {
            "message": message,
            "requestedSchema": { "type": "object", "properties": { field: { "type": kind } }, "required": [field] }
        }
    })
}

fn sampling_request(prompt: &str, max_tokens: u32) -> Value {
    json!({
        "method": "sampling/createMessage",
        "params": { "messages": [user(text(prompt))], "maxTokens": max_tokens }
    })
}

fn roots_request() -> Value {
    json!({ "method": "roots/list", "params": {} })
}

fn input_required(requests: Map<String, Value>, state: Option<String>) -> Value {
    let mut result = json!({ "resultType": "input_required", "inputRequests": requests });
    if let Some(state) = state {
        result["requestState"] = json!(state);
    }
    result
}

/// `params.inputResponses`: absent, or an object (anything else is a protocol error).
fn input_responses<'a>(ex: &'a Exchange<'_>) -> Result<Option<&'a Map<String, Value>>, RpcError> {
    match &ex.input_responses {
        None => Ok(None),
        Some(Value::Object(map)) => Ok(Some(map)),
        Some(_) => Err(invalid("params.inputResponses must be an object mapping input request keys to results")),
    }
}

/// The user's answer to an `elicitation/create` input request.
enum Elicited<'a> {
    Accepted(&'a Map<String, Value>),
    /// `decline` or `cancel`.
    Refused(&'a str),
}

fn elicit_result<'a>(key: &str, value: &'a Value) -> Result<Elicited<'a>, RpcError> {
    let bad = || invalid(format!("inputResponses.{key} must be an ElicitResult object ({{action, content?}})"));
    let obj = value.as_object().ok_or_else(bad)?;
    match obj.get("action").and_then(Value::as_str) {
        Some("accept") => match obj.get("content") {
            Some(Value::Object(c)) => Ok(Elicited::Accepted(c)),
            _ => Err(bad()),
        },
        Some(action @ ("decline" | "cancel")) => Ok(Elicited::Refused(action)),
        _ => Err(bad()),
    }
}

/// The text a `sampling/createMessage` result carries.
fn sampling_text(key: &str, value: &Value) -> Result<String, RpcError> {
    let bad = || invalid(format!("inputResponses.{key} must be a CreateMessageResult object ({{role, content, model}})"));
    let obj = value.as_object().ok_or_else(bad)?;
    let blocks = match obj.get("content") {
        Some(Value::Array(items)) => items.iter().collect::<Vec<_>>(),
        Some(block @ Value::Object(_)) => vec![block],
        _ => return Err(bad()),
    };
    Ok(blocks.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join(" "))
}

/// The root URIs a `roots/list` result carries.
fn roots(key: &str, value: &Value) -> Result<Vec<String>, RpcError> {
    let bad = || invalid(format!("inputResponses.{key} must be a ListRootsResult object ({{roots: [...]}})"));
    let list = value.get("roots").and_then(Value::as_array).ok_or_else(bad)?;
    list.iter().map(|r| r.get("uri").and_then(Value::as_str).map(str::to_string).ok_or_else(bad)).collect()
}

/// The per-process key that signs `requestState`.
fn state_key(ex: &Exchange<'_>) -> &'static [u8; 32] {
    static KEY: OnceLock<[u8; 32]> = OnceLock::new();
    KEY.get_or_init(|| {
        let mut key = [0u8; 32];
        ex.lore.ports.random.fill(&mut key);
        key
    })
}

fn state_mac(ex: &Exchange<'_>) -> Hmac<Sha256> {
    Hmac::<Sha256>::new_from_slice(state_key(ex)).expect("HMAC takes keys of any length")
}

/// Signs `data` for the request `target` (method and name) as an opaque `requestState`:
/// `base64url(payload).base64url(HMAC-SHA256(payload))`.
fn sign_state(ex: &Exchange<'_>, target: &str, data: Value) -> String {
    let payload = json!({
        "target": target,
        "issuedAtMs": ex.lore.ports.clock.now_ms(),
        "nonce": ex.lore.ports.random_hex(8),
        "data": data,
    });
    let payload = URL_SAFE_NO_PAD.encode(payload.to_string());
    let mut mac = state_mac(ex);
    mac.update(payload.as_bytes());
    format!("{payload}.{}", URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes()))
}

/// Verifies the echoed `requestState`, if any, and returns the data it was signed with. Any
/// failure (tampering, another request's state, expiry) is a JSON-RPC error.
fn verify_state(ex: &Exchange<'_>, target: &str) -> Result<Option<Value>, RpcError> {
    let raw = match &ex.request_state {
        None => return Ok(None),
        Some(Value::String(s)) => s,
        Some(_) => return Err(invalid("params.requestState must be a string")),
    };
    let rejected = || invalid("requestState integrity check failed").with_data(json!({ "requestState": raw }));
    let (payload, tag) = raw.split_once('.').ok_or_else(rejected)?;
    let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| rejected())?;
    let mut mac = state_mac(ex);
    mac.update(payload.as_bytes());
    mac.verify_slice(&tag).map_err(|_| rejected())?;
    let bytes = URL_SAFE_NO_PAD.decode(payload).map_err(|_| rejected())?;
    let state: Value = serde_json::from_slice(&bytes).map_err(|_| rejected())?;
    if state.get("target").and_then(Value::as_str) != Some(target) {
        return Err(invalid(format!("requestState was issued for another request, not {target}")));
    }
    let issued = state.get("issuedAtMs").and_then(Value::as_i64).unwrap_or(i64::MIN);
    if ex.lore.ports.clock.now_ms().saturating_sub(issued) > STATE_TTL_MS {
        return Err(invalid("requestState has expired; call again without it"));
    }
    Ok(Some(state.get("data").cloned().unwrap_or(Value::Null)))
}

fn requests(entries: Vec<(&str, Value)>) -> Map<String, Value> {
    entries.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

fn mrtr_tool(ex: &Exchange<'_>, name: &str) -> Result<Value, RpcError> {
    let target = format!("tools/call:{name}");
    let responses = input_responses(ex)?;
    let answer = |key: &str| responses.and_then(|r| r.get(key));
    match name {
        "test_input_required_result_elicitation" => match answer("user_name") {
            Some(v) => match elicit_result("user_name", v)? {
                Elicited::Accepted(c) => match c.get("name").and_then(Value::as_str) {
                    Some(n) => Ok(content(vec![text(format!("Hello, {n}!"))])),
                    None => ask_name(ex),
                },
                Elicited::Refused(action) => Ok(content(vec![text(format!("No name given (the user chose {action}).")) ])),
            },
            None => ask_name(ex),
        },
        "test_input_required_result_sampling" => match answer("sample_request") {
            Some(v) => Ok(content(vec![text(format!("Sampling result: {}", sampling_text("sample_request", v)?))])),
            None => {
                require(ex, &["sampling"])?;
                let ask = sampling_request("What is the capital of France?", 100);
                Ok(input_required(requests(vec![("sample_request", ask)]), None))
            }
        },
        "test_input_required_result_list_roots" => match answer("roots_request") {
            Some(v) => {
                let uris = roots("roots_request", v)?;
                Ok(content(vec![text(format!("Found {} root(s): {}", uris.len(), uris.join(", ")))]))
            }
            None => {
                require(ex, &["roots"])?;
                Ok(input_required(requests(vec![("roots_request", roots_request())]), None))
            }
        },
        "test_input_required_result_request_state" | "test_input_required_result_tampered_state" => {
            let state = verify_state(ex, &target)?;
            if state.is_some()
                && let Some(v) = answer("confirm")
            {
                let confirmed = match elicit_result("confirm", v)? {
                    Elicited::Accepted(c) => c.get("ok") == Some(&json!(true)),
                    Elicited::Refused(_) => false,
                };
                let verdict = if confirmed { "confirmed" } else { "not confirmed" };
                return Ok(content(vec![text(format!("state-ok: requestState verified; {verdict}"))]));
            }
            require(ex, &["elicitation"])?;
            let ask = elicit_request("Please confirm", "ok", "boolean");
            Ok(input_required(requests(vec![("confirm", ask)]), Some(sign_state(ex, &target, json!({})))))
        }
        "test_input_required_result_multiple_inputs" => multiple_inputs(ex, &target, responses),
        "test_input_required_result_multi_round" => multi_round(ex, &target, responses),
        "test_input_required_result_capabilities" => {
            let state = verify_state(ex, &target)?;
            if state.is_some() && responses.is_some_and(|r| !r.is_empty()) {
                let keys: Vec<&str> = responses.into_iter().flat_map(|r| r.keys()).map(String::as_str).collect();
                return Ok(content(vec![text(format!("capabilities-ok: received {}", keys.join(", ")))]));
            }
            let mut asks = Vec::new();
            if has_capability(ex, "elicitation") {
                asks.push(("elicit_input", elicit_request("Elicitation input", "value", "string")));
            }
            if has_capability(ex, "sampling") {
                asks.push(("sample_input", sampling_request("Sample request", 50)));
            }
            if has_capability(ex, "roots") {
                asks.push(("roots_input", roots_request()));
            }
            if asks.is_empty() {
                return Ok(content(vec![text("The client declared no capability this tool can ask through.")]));
            }
            Ok(input_required(requests(asks), Some(sign_state(ex, &target, json!({})))))
        }
        other => Err(invalid(format!("Unknown tool: {other}"))),
    }
}

fn ask_name(ex: &Exchange<'_>) -> Result<Value, RpcError> {
    require(ex, &["elicitation"])?;
    let ask = elicit_request("What is your name?", "name", "string");
    Ok(input_required(requests(vec![("user_name", ask)]), None))
}

/// Elicitation, sampling and roots in one round. Answers already received travel in the signed
/// state, so a partial reply only asks again for what is missing.
fn multiple_inputs(ex: &Exchange<'_>, target: &str, responses: Option<&Map<String, Value>>) -> Result<Value, RpcError> {
    let mut got = match verify_state(ex, target)? {
        Some(Value::Object(data)) => data,
        _ => Map::new(),
    };
    if let Some(responses) = responses {
        if let Some(v) = responses.get("user_name")
            && let Elicited::Accepted(c) = elicit_result("user_name", v)?
            && let Some(name) = c.get("name").and_then(Value::as_str)
        {
            got.insert("name".into(), json!(name));
        }
        if let Some(v) = responses.get("greeting") {
            got.insert("greeting".into(), json!(sampling_text("greeting", v)?));
        }
        if let Some(v) = responses.get("client_roots") {
            got.insert("roots".into(), json!(roots("client_roots", v)?));
        }
    }
    let mut asks = Vec::new();
    let mut needed = Vec::new();
    if !got.contains_key("name") {
        needed.push("elicitation");
        asks.push(("user_name", elicit_request("What is your name?", "name", "string")));
    }
    if !got.contains_key("greeting") {
        needed.push("sampling");
        asks.push(("greeting", sampling_request("Generate a greeting", 50)));
    }
    if !got.contains_key("roots") {
        needed.push("roots");
        asks.push(("client_roots", roots_request()));
    }
    if asks.is_empty() {
        let roots = got["roots"].as_array().map_or(0, Vec::len);
        return Ok(content(vec![text(format!(
            "Name: {}; Greeting: {}; Roots: {roots}",
            got["name"].as_str().unwrap_or_default(),
            got["greeting"].as_str().unwrap_or_default()
        ))]));
    }
    require(ex, &needed)?;
    Ok(input_required(requests(asks), Some(sign_state(ex, target, Value::Object(got)))))
}

/// Two questions in two rounds; the round and the first answer travel in the signed state.
fn multi_round(ex: &Exchange<'_>, target: &str, responses: Option<&Map<String, Value>>) -> Result<Value, RpcError> {
    let state = verify_state(ex, target)?;
    let round = state.as_ref().and_then(|s| s.get("round")).and_then(Value::as_u64).unwrap_or(0);
    let accepted = |key: &str, field: &str| -> Result<Option<String>, RpcError> {
        match responses.and_then(|r| r.get(key)) {
            Some(v) => match elicit_result(key, v)? {
                Elicited::Accepted(c) => Ok(c.get(field).and_then(Value::as_str).map(str::to_string)),
                Elicited::Refused(_) => Ok(None),
            },
            None => Ok(None),
        }
    };
    let ask_color = |name: &str| {
        require(ex, &["elicitation"])?;
        let ask = elicit_request("Step 2: What is your favorite color?", "color", "string");
        Ok(input_required(requests(vec![("step2", ask)]), Some(sign_state(ex, target, json!({ "round": 2, "name": name })))))
    };
    match round {
        1 => match accepted("step1", "name")? {
            Some(name) => ask_color(&name),
            None => ask_step1(ex, target),
        },
        2 => {
            let name = state.as_ref().and_then(|s| s.get("name")).and_then(Value::as_str).unwrap_or("friend").to_string();
            match accepted("step2", "color")? {
                Some(color) => Ok(content(vec![text(format!("Multi-round complete for {name} who likes {color}"))])),
                None => ask_color(&name),
            }
        }
        _ => ask_step1(ex, target),
    }
}

fn ask_step1(ex: &Exchange<'_>, target: &str) -> Result<Value, RpcError> {
    require(ex, &["elicitation"])?;
    let ask = elicit_request("Step 1: What is your name?", "name", "string");
    Ok(input_required(requests(vec![("step1", ask)]), Some(sign_state(ex, target, json!({ "round": 1 })))))
}

fn mrtr_prompt(ex: &Exchange<'_>) -> Result<Value, RpcError> {
    let responses = input_responses(ex)?;
    if let Some(v) = responses.and_then(|r| r.get("user_context"))
        && let Elicited::Accepted(c) = elicit_result("user_context", v)?
        && let Some(context) = c.get("context").and_then(Value::as_str)
    {
        return Ok(json!({ "messages": [user(text(format!("Prompt with context: {context}")))] }));
    }
    require(ex, &["elicitation"])?;
    let ask = elicit_request("What context should the prompt use?", "context", "string");
    Ok(input_required(requests(vec![("user_context", ask)]), None))
}
