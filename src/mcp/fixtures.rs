//! Fixture tools, prompts and resources for the MCP conformance suite
//! (`@modelcontextprotocol/conformance`, see `tests/conformance/`). Compiled only with the
//! `conformance-fixtures` feature; a release never contains them.
//!
//! Shared by both eras: the content tools, progress, the prompts, the `test://` resources and
//! completion. Legacy only: `test_tool_with_logging` and resource subscriptions. Current era
//! (2026-07-28) only: the capability, logging and streaming probes, and the multi round-trip
//! request (MRTR, SEP-2322) fixtures, whose `requestState` is HMAC-signed so a tampered state is
//! refused. The signing key is stored (`meta/request-state-key`), not held in memory: the next
//! round may reach another instance (another native worker thread, another isolate, or on Spin
//! a fresh instance for every request).
//!
//! Not implemented: the legacy server→client requests (sampling and elicitation sent over the
//! POST's SSE stream while the tool waits for the client's reply) — replies are buffered, not
//! streamed — and the 2026 `subscriptions/listen` stream.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde_json::{Map, Value, json};
use sha2::Sha256;

use super::exchange::{Exchange, LogLevel};
use super::jsonrpc::{self, RpcError};
use crate::keys;
use crate::storage::{Batch, StorageError};

/// A 1×1 PNG.
const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A WAV header (8 kHz, 16-bit mono) whose one-sample data chunk is cut off: enough for the suite.
const WAV_B64: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

const STATIC_TEXT: &str = "This is the content of the static text resource.";
const TEMPLATE_PREFIX: &str = "test://template/";
const TEMPLATE_SUFFIX: &str = "/data";
/// How long an MRTR `requestState` stays valid.
const STATE_TTL_MS: i64 = 10 * 60 * 1000;

/// Tools of both eras: (name, description).
#[rustfmt::skip]
static BOTH: &[(&str, &str)] = &[
    ("test_simple_text", "Returns a simple text content block."),
    ("test_image_content", "Returns an image content block (a 1x1 PNG)."),
    ("test_audio_content", "Returns an audio content block (a short WAV)."),
    ("test_embedded_resource", "Returns an embedded text resource."),
    ("test_multiple_content_types", "Returns text, image and resource content together."),
    ("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100 before its result."),
    ("test_error_handling", "Always fails with isError: true."),
    (JSON_SCHEMA_TOOL, "Has JSON Schema 2020-12 features in its input schema."),
];

/// Tools of the legacy era only.
static LEGACY: &[(&str, &str)] = &[(
    "test_tool_with_logging",
    "Logs three messages, then answers.",
)];

/// Tools of the 2026-07-28 era only.
#[rustfmt::skip]
static CURRENT: &[(&str, &str)] = &[
    ("test_missing_capability", "Needs the client's sampling capability."),
    ("test_streaming_elicitation", "Reports progress (when asked); never sends a request."),
    ("test_logging_tool", "Logs only when the request's _meta asks for a log level."),
    ("test_input_required_result_elicitation", "MRTR: asks the user's name."),
    ("test_input_required_result_sampling", "MRTR: asks the client's model."),
    ("test_input_required_result_list_roots", "MRTR: asks the client's roots."),
    ("test_input_required_result_request_state", "MRTR: confirms with a signed state."),
    ("test_input_required_result_multiple_inputs", "MRTR: asks three inputs at once."),
    ("test_input_required_result_multi_round", "MRTR: asks two questions in two rounds."),
    ("test_input_required_result_tampered_state", "MRTR: refuses a tampered state."),
    ("test_input_required_result_capabilities", "MRTR: asks only what the client supports."),
];

const JSON_SCHEMA_TOOL: &str = "json_schema_2020_12_tool";

fn era_tools(stateless: bool) -> impl Iterator<Item = &'static (&'static str, &'static str)> {
    let own = if stateless { CURRENT } else { LEGACY };
    BOTH.iter().chain(own)
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
        "if": {
            "properties": { "contactMethod": { "const": "phone" } },
            "required": ["contactMethod"]
        },
        "then": { "required": ["phone"] },
        "else": { "required": ["email"] },
        "additionalProperties": false
    })
}

/// Extra tool descriptors for `tools/list`.
pub fn tools(stateless: bool) -> Vec<Value> {
    era_tools(stateless)
        .map(|&(name, description)| {
            let schema = if name == JSON_SCHEMA_TOOL {
                json_schema_2020_12()
            } else {
                json!({ "type": "object", "properties": {} })
            };
            json!({ "name": name, "description": description, "inputSchema": schema })
        })
        .collect()
}

pub fn add_capabilities(caps: &mut Value, stateless: bool) {
    // The 2026 era has no `subscriptions/listen` stream here: no listChanged, no subscribe.
    if stateless {
        caps["prompts"] = json!({});
        caps["resources"] = json!({});
    } else {
        caps["prompts"] = json!({ "listChanged": false });
        caps["resources"] = json!({ "subscribe": true, "listChanged": false });
    }
    caps["completions"] = json!({});
}

fn text(s: impl Into<String>) -> Value {
    json!({ "type": "text", "text": s.into() })
}

fn media(kind: &str, data: &str, mime: &str) -> Value {
    json!({ "type": kind, "data": data, "mimeType": mime })
}

fn image() -> Value {
    media("image", PNG_B64, "image/png")
}

fn content(items: Vec<Value>) -> Value {
    json!({ "content": items })
}

/// A tool result with one text block.
fn reply(s: impl Into<String>) -> Result<Value, RpcError> {
    Ok(content(vec![text(s)]))
}

fn embedded(uri: &str, mime: &str, text: &str) -> Value {
    json!({ "type": "resource", "resource": { "uri": uri, "mimeType": mime, "text": text } })
}

fn invalid(message: impl Into<String>) -> RpcError {
    RpcError::new(jsonrpc::INVALID_PARAMS, message, 200)
}

fn str_of(value: Option<&Value>) -> Option<&str> {
    value.and_then(Value::as_str)
}

/// Runs a fixture tool; `None` when `name` is not one (in this era).
pub async fn call(ex: &Exchange<'_>, name: &str, args: &Value) -> Option<Result<Value, RpcError>> {
    let &(name, _) = era_tools(ex.stateless).find(|(n, _)| *n == name)?;
    Some(match name {
        "test_simple_text" => reply("This is a simple text response for testing."),
        "test_image_content" => Ok(content(vec![image()])),
        "test_audio_content" => Ok(content(vec![media("audio", WAV_B64, "audio/wav")])),
        "test_embedded_resource" => Ok(content(vec![embedded(
            "test://embedded-resource",
            "text/plain",
            "This is an embedded resource content.",
        )])),
        "test_multiple_content_types" => Ok(content(vec![
            text("Multiple content types test:"),
            image(),
            embedded(
                "test://mixed-content-resource",
                "application/json",
                r#"{"test":"data","value":123}"#,
            ),
        ])),
        "test_tool_with_progress" => {
            for step in [0.0, 50.0, 100.0] {
                ex.progress(step, Some(100.0), None);
            }
            reply("Progress test completed.")
        }
        "test_error_handling" => Ok(json!({
            "isError": true,
            "content": [text("This tool intentionally returns an error for testing")]
        })),
        JSON_SCHEMA_TOOL => reply(format!("{JSON_SCHEMA_TOOL} called with {args}")),
        "test_tool_with_logging" => {
            for message in ["started", "processing data", "completed"] {
                ex.log(LogLevel::Info, json!(format!("Tool execution {message}")));
            }
            reply("Logging test completed.")
        }
        "test_missing_capability" => {
            require(ex, &["sampling"]).and_then(|()| reply("The client declared sampling."))
        }
        "test_streaming_elicitation" => {
            ex.progress(1.0, Some(1.0), Some("done"));
            reply("Streaming complete.")
        }
        "test_logging_tool" => {
            ex.log(LogLevel::Info, json!("test_logging_tool ran"));
            reply("Logging tool complete.")
        }
        mrtr => match state_key(ex).await {
            Ok(key) => mrtr_tool(&Signer { ex, key }, mrtr),
            Err(e) => Err(e),
        },
    })
}

/// Prompts, resources and completion; `None` for any other method (in this era).
pub async fn dispatch(
    ex: &Exchange<'_>,
    method: &str,
    params: &Map<String, Value>,
) -> Option<Result<Value, RpcError>> {
    let (result, cacheable) = match method {
        "prompts/list" => (Ok(prompts_list(ex.stateless)), true),
        "prompts/get" => (prompts_get(ex, params), false),
        "resources/list" => (Ok(json!({ "resources": resources() })), true),
        "resources/templates/list" => (Ok(json!({ "resourceTemplates": [template()] })), true),
        "resources/read" => (resources_read(params), true),
        "completion/complete" => (complete(params), false),
        "resources/subscribe" | "resources/unsubscribe" if !ex.stateless => {
            (subscription(params), false)
        }
        _ => return None,
    };
    Some(result.map(|r| ex.finish_result(r, cacheable)))
}

// ---------------------------------------------------------------------------------------------
// Prompts

const MRTR_PROMPT: &str = "test_input_required_result_prompt";

fn prompts_list(stateless: bool) -> Value {
    let mut prompts = vec![
        json!({ "name": "test_simple_prompt", "description": "A prompt without arguments." }),
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
            "arguments": [
                { "name": "resourceUri", "description": "URI of the resource to embed", "required": true }
            ]
        }),
        json!({ "name": "test_prompt_with_image", "description": "A prompt with an image." }),
    ];
    if stateless {
        prompts.push(
            json!({ "name": MRTR_PROMPT, "description": "MRTR: asks the user for context first." }),
        );
    }
    json!({ "prompts": prompts })
}

fn user(content: Value) -> Value {
    json!({ "role": "user", "content": content })
}

fn prompts_get(ex: &Exchange<'_>, params: &Map<String, Value>) -> Result<Value, RpcError> {
    let name = str_of(params.get("name")).ok_or_else(|| invalid("params.name must be a string"))?;
    let args = match params.get("arguments") {
        None | Some(Value::Null) => None,
        Some(Value::Object(a)) => Some(a),
        Some(_) => return Err(invalid("prompts/get arguments must be an object")),
    };
    let arg = |key: &str| {
        str_of(args.and_then(|a| a.get(key))).ok_or_else(|| {
            invalid(format!("missing required argument {key:?}"))
                .with_data(json!({ "argument": key }))
        })
    };
    let messages = match name {
        "test_simple_prompt" => vec![user(text("This is a simple prompt for testing."))],
        "test_prompt_with_arguments" => {
            let (a1, a2) = (arg("arg1")?, arg("arg2")?);
            let prompt = format!("Prompt with arguments: arg1='{a1}', arg2='{a2}'");
            vec![user(text(prompt))]
        }
        "test_prompt_with_embedded_resource" => {
            let body = "Embedded resource content for testing.";
            vec![
                user(embedded(arg("resourceUri")?, "text/plain", body)),
                user(text("Please process the embedded resource above.")),
            ]
        }
        "test_prompt_with_image" => {
            vec![user(image()), user(text("Please analyze the image above."))]
        }
        MRTR_PROMPT if ex.stateless => return mrtr_prompt(ex),
        other => {
            let e = invalid(format!("Unknown prompt: {other}"));
            return Err(e.with_data(json!({ "prompt": other })));
        }
    };
    Ok(json!({ "messages": messages }))
}

// ---------------------------------------------------------------------------------------------
// Resources

fn resources() -> Vec<Value> {
    let resource = |name: &str, mime: &str, description: &str| {
        let uri = format!("test://{name}");
        json!({ "uri": uri, "name": name, "description": description, "mimeType": mime })
    };
    vec![
        resource("static-text", "text/plain", "A static text resource."),
        resource("static-binary", "image/png", "A 1x1 PNG."),
        resource(
            "watched-resource",
            "text/plain",
            "A resource to subscribe to.",
        ),
    ]
}

fn template() -> Value {
    json!({
        "uriTemplate": format!("{TEMPLATE_PREFIX}{{id}}{TEMPLATE_SUFFIX}"),
        "name": "template",
        "description": "A resource template with an {id} parameter.",
        "mimeType": "application/json"
    })
}

/// The `{id}` of a URI that matches the template.
fn template_id(uri: &str) -> Option<&str> {
    let id = uri.strip_prefix(TEMPLATE_PREFIX)?;
    let id = id.strip_suffix(TEMPLATE_SUFFIX)?;
    (!id.is_empty() && !id.contains('/')).then_some(id)
}

fn read_uri(params: &Map<String, Value>) -> Result<&str, RpcError> {
    str_of(params.get("uri")).ok_or_else(|| invalid("params.uri must be a string"))
}

fn not_found(uri: &str) -> RpcError {
    invalid(format!("Resource not found: {uri}")).with_data(json!({ "uri": uri }))
}

fn resources_read(params: &Map<String, Value>) -> Result<Value, RpcError> {
    let uri = read_uri(params)?;
    let (mime, text) = match uri {
        "test://static-text" => ("text/plain", STATIC_TEXT),
        "test://watched-resource" => ("text/plain", "Watched resource content"),
        "test://static-binary" => {
            let blob = json!({ "uri": uri, "mimeType": "image/png", "blob": PNG_B64 });
            return Ok(json!({ "contents": [blob] }));
        }
        _ => {
            let id = template_id(uri).ok_or_else(|| not_found(uri))?;
            let data = format!("Data for ID: {id}");
            let body = json!({ "id": id, "templateTest": true, "data": data }).to_string();
            let contents = json!({ "uri": uri, "mimeType": "application/json", "text": body });
            return Ok(json!({ "contents": [contents] }));
        }
    };
    Ok(json!({ "contents": [{ "uri": uri, "mimeType": mime, "text": text }] }))
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
    let (Some(reference), Some(argument)) = (params.get("ref"), params.get("argument")) else {
        return Err(invalid("params.ref and params.argument are required"));
    };
    let arg_name = str_of(argument.get("name")).unwrap_or_default();
    let prefix = str_of(argument.get("value")).unwrap_or_default();
    let prompt = str_of(reference.get("name"));
    let candidates: &[&str] = match (str_of(reference.get("type")), arg_name) {
        (Some("ref/prompt"), "arg1" | "arg2") if prompt == Some("test_prompt_with_arguments") => {
            &["testValue1", "testValue2", "example", "sample"]
        }
        (Some("ref/prompt"), "resourceUri") => &["test://static-text", "test://example-resource"],
        (Some("ref/resource"), "id") => &["1", "2", "3", "123"],
        (Some("ref/prompt" | "ref/resource"), _) => &[],
        _ => {
            return Err(invalid(
                "params.ref.type must be ref/prompt or ref/resource",
            ));
        }
    };
    let values: Vec<&&str> = candidates
        .iter()
        .filter(|c| c.starts_with(prefix))
        .collect();
    Ok(json!({ "completion": { "values": values, "total": values.len(), "hasMore": false } }))
}

// ---------------------------------------------------------------------------------------------
// Client capabilities (2026-07-28)

fn has_capability(ex: &Exchange<'_>, name: &str) -> bool {
    ex.client_capabilities
        .get(name)
        .is_some_and(Value::is_object)
}

/// -32021 (HTTP 400) naming every capability in `names` the client did not declare.
fn require(ex: &Exchange<'_>, names: &[&str]) -> Result<(), RpcError> {
    let missing: Map<String, Value> = names
        .iter()
        .filter(|n| !has_capability(ex, n))
        .map(|n| (n.to_string(), json!({})))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let list: Vec<&String> = missing.keys().collect();
    let message = format!("this request needs the client capabilities {list:?}");
    let e = RpcError::new(jsonrpc::MISSING_CLIENT_CAPABILITY, message, 400);
    Err(e.with_data(json!({ "requiredCapabilities": missing })))
}

// ---------------------------------------------------------------------------------------------
// Multi round-trip requests (SEP-2322)

fn elicit_request(message: &str, field: &str, kind: &str) -> Value {
    let properties = json!({ field: { "type": kind } });
    let schema = json!({ "type": "object", "properties": properties, "required": [field] });
    let params = json!({ "message": message, "requestedSchema": schema });
    json!({ "method": "elicitation/create", "params": params })
}

fn sampling_request(prompt: &str, max_tokens: u32) -> Value {
    let params = json!({ "messages": [user(text(prompt))], "maxTokens": max_tokens });
    json!({ "method": "sampling/createMessage", "params": params })
}

fn roots_request() -> Value {
    json!({ "method": "roots/list", "params": {} })
}

/// An `input_required` result asking `asks` (key, request), with an optional signed state.
fn input_required(asks: Vec<(&str, Value)>, state: Option<String>) -> Result<Value, RpcError> {
    let asks: Map<String, Value> = asks.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    let mut result = json!({ "resultType": "input_required", "inputRequests": asks });
    if let Some(state) = state {
        result["requestState"] = json!(state);
    }
    Ok(result)
}

type Responses<'a> = Option<&'a Map<String, Value>>;

/// `params.inputResponses`: absent, or an object (anything else is a protocol error).
fn input_responses<'a>(ex: &'a Exchange<'_>) -> Result<Responses<'a>, RpcError> {
    match &ex.input_responses {
        None => Ok(None),
        Some(Value::Object(map)) => Ok(Some(map)),
        Some(_) => Err(invalid(
            "params.inputResponses must be an object of results",
        )),
    }
}

fn malformed(key: &str, kind: &str) -> RpcError {
    invalid(format!("inputResponses.{key} must be a {kind} object"))
}

/// The answer to the `elicitation/create` input request `key`.
enum Elicited<'a> {
    Missing,
    Accepted(&'a Map<String, Value>),
    /// `decline` or `cancel`.
    Refused(&'a str),
}

impl Elicited<'_> {
    fn field_value(&self, name: &str) -> Option<&Value> {
        match self {
            Self::Accepted(c) => c.get(name),
            _ => None,
        }
    }

    fn field(&self, name: &str) -> Option<String> {
        str_of(self.field_value(name)).map(str::to_string)
    }
}

fn elicited<'a>(responses: Responses<'a>, key: &str) -> Result<Elicited<'a>, RpcError> {
    let Some(value) = responses.and_then(|r| r.get(key)) else {
        return Ok(Elicited::Missing);
    };
    match (str_of(value.get("action")), value.get("content")) {
        (Some("accept"), Some(Value::Object(c))) => Ok(Elicited::Accepted(c)),
        (Some(action @ ("decline" | "cancel")), _) => Ok(Elicited::Refused(action)),
        _ => Err(malformed(key, "ElicitResult")),
    }
}

/// The text of the `sampling/createMessage` result `key`, if answered.
fn sampled(responses: Responses<'_>, key: &str) -> Result<Option<String>, RpcError> {
    let Some(value) = responses.and_then(|r| r.get(key)) else {
        return Ok(None);
    };
    let blocks: Vec<&Value> = match value.get("content") {
        Some(Value::Array(items)) => items.iter().collect(),
        Some(block @ Value::Object(_)) => vec![block],
        _ => return Err(malformed(key, "CreateMessageResult")),
    };
    let texts: Vec<&str> = blocks
        .iter()
        .filter_map(|b| str_of(b.get("text")))
        .collect();
    Ok(Some(texts.join(" ")))
}

/// The root URIs of the `roots/list` result `key`, if answered.
fn listed_roots(responses: Responses<'_>, key: &str) -> Result<Option<Vec<String>>, RpcError> {
    let Some(value) = responses.and_then(|r| r.get(key)) else {
        return Ok(None);
    };
    let bad = || malformed(key, "ListRootsResult");
    let roots = value
        .get("roots")
        .and_then(Value::as_array)
        .ok_or_else(bad)?;
    let uris = roots
        .iter()
        .map(|r| str_of(r.get("uri")).map(str::to_string).ok_or_else(bad));
    uris.collect::<Result<_, _>>().map(Some)
}

/// The key that signs `requestState`, created on first use. A lost race to create it reads the
/// winner's.
async fn state_key(ex: &Exchange<'_>) -> Result<[u8; 32], RpcError> {
    let ports = &ex.lore.ports;
    let failed = |e: StorageError| {
        RpcError::new(
            jsonrpc::INTERNAL_ERROR,
            format!("requestState key: {e}"),
            500,
        )
    };
    for _ in 0..2 {
        let stored = ports.storage.get(keys::REQUEST_STATE_KEY).await;
        if let Some(key) = stored.map_err(failed)? {
            return <[u8; 32]>::try_from(key.as_slice()).map_err(|_| {
                failed(StorageError::Backend(
                    "the stored requestState key is not 32 bytes".into(),
                ))
            });
        }
        let mut key = [0u8; 32];
        ports.random.fill(&mut key);
        let mut batch = Batch::new();
        batch
            .require_absent(keys::REQUEST_STATE_KEY)
            .put(keys::REQUEST_STATE_KEY, key.to_vec());
        match ports.storage.commit(batch).await {
            Ok(()) => return Ok(key),
            Err(StorageError::Conflict { .. }) => continue,
            Err(e) => return Err(failed(e)),
        }
    }
    Err(failed(StorageError::Backend(
        "the requestState key could not be created".into(),
    )))
}

/// An exchange of an MRTR fixture with the key that signs and verifies its `requestState`.
struct Signer<'a, 'b> {
    ex: &'a Exchange<'b>,
    key: [u8; 32],
}

/// The HMAC over `payload` with the stored key that signs `requestState`.
fn state_mac(s: &Signer<'_, '_>, payload: &str) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(&s.key).expect("HMAC takes keys of any length");
    mac.update(payload.as_bytes());
    mac
}

/// Signs `data` for the request `target` (method and name) as an opaque `requestState`:
/// `base64url(payload).base64url(HMAC-SHA256(payload))`.
fn sign_state(s: &Signer<'_, '_>, target: &str, data: Value) -> Option<String> {
    let ports = &s.ex.lore.ports;
    let payload = json!({
        "target": target,
        "issuedAtMs": ports.clock.now_ms(),
        "nonce": ports.random_hex(8),
        "data": data,
    });
    let payload = URL_SAFE_NO_PAD.encode(payload.to_string());
    let tag = URL_SAFE_NO_PAD.encode(state_mac(s, &payload).finalize().into_bytes());
    Some(format!("{payload}.{tag}"))
}

/// Verifies the echoed `requestState`, if any, and returns the data it was signed with. Any
/// failure (tampering, another request's state, expiry) is a JSON-RPC error.
fn verify_state(s: &Signer<'_, '_>, target: &str) -> Result<Option<Value>, RpcError> {
    let ex = s.ex;
    let raw = match &ex.request_state {
        None => return Ok(None),
        Some(Value::String(s)) => s,
        Some(_) => return Err(invalid("params.requestState must be a string")),
    };
    let rejected = || {
        let e = invalid("requestState integrity check failed");
        e.with_data(json!({ "requestState": raw }))
    };
    let (payload, tag) = raw.split_once('.').ok_or_else(rejected)?;
    let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| rejected())?;
    state_mac(s, payload)
        .verify_slice(&tag)
        .map_err(|_| rejected())?;
    let bytes = URL_SAFE_NO_PAD.decode(payload).map_err(|_| rejected())?;
    let state: Value = serde_json::from_slice(&bytes).map_err(|_| rejected())?;
    if str_of(state.get("target")) != Some(target) {
        let message = format!("requestState was issued for another request, not {target}");
        return Err(invalid(message));
    }
    let issued = state
        .get("issuedAtMs")
        .and_then(Value::as_i64)
        .unwrap_or(i64::MIN);
    if ex.lore.ports.clock.now_ms().saturating_sub(issued) > STATE_TTL_MS {
        return Err(invalid("requestState has expired; call again without it"));
    }
    Ok(Some(state.get("data").cloned().unwrap_or(Value::Null)))
}

fn mrtr_tool(signer: &Signer<'_, '_>, name: &str) -> Result<Value, RpcError> {
    let ex = signer.ex;
    let target = format!("tools/call:{name}");
    let responses = input_responses(ex)?;
    match name {
        "test_input_required_result_elicitation" => match elicited(responses, "user_name")? {
            Elicited::Refused(action) => reply(format!("No name given (the user chose {action}).")),
            answer => match answer.field("name") {
                Some(name) => reply(format!("Hello, {name}!")),
                None => {
                    require(ex, &["elicitation"])?;
                    let ask = elicit_request("What is your name?", "name", "string");
                    input_required(vec![("user_name", ask)], None)
                }
            },
        },
        "test_input_required_result_sampling" => match sampled(responses, "sample_request")? {
            Some(answer) => reply(format!("Sampling result: {answer}")),
            None => {
                require(ex, &["sampling"])?;
                let ask = sampling_request("What is the capital of France?", 100);
                input_required(vec![("sample_request", ask)], None)
            }
        },
        "test_input_required_result_list_roots" => {
            match listed_roots(responses, "roots_request")? {
                Some(uris) => reply(format!("Found {} root(s): {}", uris.len(), uris.join(", "))),
                None => {
                    require(ex, &["roots"])?;
                    input_required(vec![("roots_request", roots_request())], None)
                }
            }
        }
        "test_input_required_result_request_state"
        | "test_input_required_result_tampered_state" => {
            let state = verify_state(signer, &target)?;
            match elicited(responses, "confirm")? {
                Elicited::Missing => {}
                _ if state.is_none() => {}
                answer => {
                    let ok = answer.field_value("ok") == Some(&json!(true));
                    let verdict = if ok { "confirmed" } else { "not confirmed" };
                    return reply(format!("state-ok: requestState verified; {verdict}"));
                }
            }
            require(ex, &["elicitation"])?;
            let ask = elicit_request("Please confirm", "ok", "boolean");
            input_required(
                vec![("confirm", ask)],
                sign_state(signer, &target, json!({})),
            )
        }
        "test_input_required_result_multiple_inputs" => multiple_inputs(signer, &target, responses),
        "test_input_required_result_multi_round" => multi_round(signer, &target, responses),
        "test_input_required_result_capabilities" => {
            let state = verify_state(signer, &target)?;
            if let (Some(_), Some(answers)) = (state, responses.filter(|r| !r.is_empty())) {
                let keys: Vec<&str> = answers.keys().map(String::as_str).collect();
                return reply(format!("capabilities-ok: received {}", keys.join(", ")));
            }
            let mut asks = Vec::new();
            if has_capability(ex, "elicitation") {
                let ask = elicit_request("Elicitation input", "value", "string");
                asks.push(("elicit_input", ask));
            }
            if has_capability(ex, "sampling") {
                asks.push(("sample_input", sampling_request("Sample request", 50)));
            }
            if has_capability(ex, "roots") {
                asks.push(("roots_input", roots_request()));
            }
            if asks.is_empty() {
                return reply("The client declared no capability this tool can ask through.");
            }
            input_required(asks, sign_state(signer, &target, json!({})))
        }
        other => Err(invalid(format!("Unknown tool: {other}"))),
    }
}

/// Elicitation, sampling and roots in one round. Answers already received travel in the signed
/// state, so a partial reply only asks again for what is missing.
fn multiple_inputs(
    signer: &Signer<'_, '_>,
    target: &str,
    responses: Responses<'_>,
) -> Result<Value, RpcError> {
    let ex = signer.ex;
    let mut got = match verify_state(signer, target)? {
        Some(Value::Object(data)) => data,
        _ => Map::new(),
    };
    if let Some(name) = elicited(responses, "user_name")?.field("name") {
        got.insert("name".into(), json!(name));
    }
    if let Some(greeting) = sampled(responses, "greeting")? {
        got.insert("greeting".into(), json!(greeting));
    }
    if let Some(roots) = listed_roots(responses, "client_roots")? {
        got.insert("roots".into(), json!(roots));
    }
    let mut asks = Vec::new();
    let mut needed = Vec::new();
    if !got.contains_key("name") {
        needed.push("elicitation");
        let ask = elicit_request("What is your name?", "name", "string");
        asks.push(("user_name", ask));
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
        let name = str_of(got.get("name")).unwrap_or_default();
        let greeting = str_of(got.get("greeting")).unwrap_or_default();
        let roots = got["roots"].as_array().map_or(0, Vec::len);
        return reply(format!(
            "Name: {name}; Greeting: {greeting}; Roots: {roots}"
        ));
    }
    require(ex, &needed)?;
    input_required(asks, sign_state(signer, target, Value::Object(got)))
}

/// Two questions in two rounds; the round and the first answer travel in the signed state.
fn multi_round(
    signer: &Signer<'_, '_>,
    target: &str,
    responses: Responses<'_>,
) -> Result<Value, RpcError> {
    let ex = signer.ex;
    let state = verify_state(signer, target)?.unwrap_or(Value::Null);
    let (key, next) = match state.get("round").and_then(Value::as_u64) {
        Some(1) => match elicited(responses, "step1")?.field("name") {
            Some(name) => ("step2", json!({ "round": 2, "name": name })),
            None => ("step1", state.clone()),
        },
        Some(2) => {
            let name = str_of(state.get("name")).unwrap_or("friend");
            if let Some(color) = elicited(responses, "step2")?.field("color") {
                return reply(format!("Multi-round complete for {name} who likes {color}"));
            }
            ("step2", state.clone())
        }
        _ => ("step1", json!({ "round": 1 })),
    };
    let (message, field) = match key {
        "step1" => ("Step 1: What is your name?", "name"),
        _ => ("Step 2: What is your favorite color?", "color"),
    };
    require(ex, &["elicitation"])?;
    let ask = elicit_request(message, field, "string");
    input_required(vec![(key, ask)], sign_state(signer, target, next))
}

fn mrtr_prompt(ex: &Exchange<'_>) -> Result<Value, RpcError> {
    let responses = input_responses(ex)?;
    if let Some(context) = elicited(responses, "user_context")?.field("context") {
        let message = user(text(format!("Prompt with context: {context}")));
        return Ok(json!({ "messages": [message] }));
    }
    require(ex, &["elicitation"])?;
    let ask = elicit_request("What context should the prompt use?", "context", "string");
    input_required(vec![("user_context", ask)], None)
}
