//! A minimal MCP client for `lore memory run --url`: one stateless (2026-07-28) `tools/call`.

use serde_json::{Value, json};

use lore_base::ports::{HttpClient, OutboundRequest};
use lore_front::mcp::versions::{META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, VERSION_2026};

/// Calls `tool` on the server at `url` and returns the `tools/call` result.
pub async fn call_remote_tool(
    http: &dyn HttpClient,
    url: &str,
    token: Option<&str>,
    tool: &str,
    args: Value,
) -> anyhow::Result<Value> {
    let body = json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": tool,
            "arguments": args,
            "_meta": {
                META_PROTOCOL_VERSION: VERSION_2026,
                META_CLIENT_CAPABILITIES: {},
                "io.modelcontextprotocol/clientInfo": { "name": "lore-cli", "version": lore_base::VERSION },
            }
        }
    });
    let mut headers = vec![
        ("content-type".to_string(), "application/json".to_string()),
        (
            "accept".to_string(),
            "application/json, text/event-stream".to_string(),
        ),
        ("mcp-protocol-version".to_string(), VERSION_2026.to_string()),
        ("mcp-method".to_string(), "tools/call".to_string()),
        ("mcp-name".to_string(), tool.to_string()),
    ];
    if let Some(token) = token {
        headers.push(("authorization".to_string(), format!("Bearer {token}")));
    }
    let request = OutboundRequest {
        method: "POST".into(),
        url: url.to_string(),
        headers,
        body: serde_json::to_vec(&body)?,
        // A URL the operator configured (or the CLI's user named).
        reach: lore_base::outbound::Reach::Configured,
        share: lore_base::outbound::Share::Server,
        timeout_ms: 60_000,
    };
    let response = http.send(request).await?;
    let text = String::from_utf8_lossy(&response.body);
    let message: Value = serde_json::from_str(&text).map_err(|_| {
        anyhow::anyhow!(
            "HTTP {} from {url}: {}",
            response.status,
            text.chars().take(500).collect::<String>()
        )
    })?;
    if let Some(error) = message.get("error") {
        anyhow::bail!("HTTP {}: {}", response.status, error);
    }
    message
        .get("result")
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("the server answered without a result: {text}"))
}

/// The REST URL of an admin tool or SDK method, from the server's MCP URL
/// (`https://host/mcp/{org}` → `https://host/api/{org}/{tool}`); `org` is needed when the MCP
/// URL names none.
pub fn admin_url(mcp_url: &str, org: Option<&str>, tool: &str) -> anyhow::Result<String> {
    let trimmed = mcp_url.trim_end_matches('/');
    let (base, path_org) = match trimmed.rsplit_once("/mcp") {
        Some((base, "")) => (base, None),
        Some((base, rest)) if rest.starts_with('/') && !rest[1..].contains('/') => {
            (base, Some(&rest[1..]))
        }
        _ => anyhow::bail!("{mcp_url} is not a lore MCP URL (…/mcp or …/mcp/{{org}})"),
    };
    let org = path_org.or(org).ok_or_else(|| {
        anyhow::anyhow!("admin tools need an org: use the …/mcp/{{org}} URL or pass --org")
    })?;
    Ok(format!("{base}/api/{org}/{tool}"))
}

/// Calls an admin tool or SDK method on the REST surface; returns its JSON result.
pub async fn call_remote_admin(
    http: &dyn HttpClient,
    url: &str,
    token: Option<&str>,
    args: Value,
) -> anyhow::Result<Value> {
    let mut headers = vec![("content-type".to_string(), "application/json".to_string())];
    if let Some(token) = token {
        headers.push(("authorization".to_string(), format!("Bearer {token}")));
    }
    let response = http
        .send(OutboundRequest {
            method: "POST".into(),
            url: url.to_string(),
            headers,
            body: serde_json::to_vec(&args)?,
            // A URL the operator configured (or the CLI's user named).
            reach: lore_base::outbound::Reach::Configured,
            share: lore_base::outbound::Share::Server,
            timeout_ms: 60_000,
        })
        .await?;
    let text = String::from_utf8_lossy(&response.body);
    let value: Value = serde_json::from_str(&text).map_err(|_| {
        anyhow::anyhow!(
            "HTTP {} from {url}: {}",
            response.status,
            text.chars().take(500).collect::<String>()
        )
    })?;
    if !(200..300).contains(&response.status) {
        anyhow::bail!(
            "HTTP {}: {}",
            response.status,
            value.get("error").unwrap_or(&value)
        );
    }
    Ok(value)
}
