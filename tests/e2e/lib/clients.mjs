// Connect the real, unmodified TypeScript MCP clients to a lore server.
import { Client as Sdk1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as Sdk1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client as V2Client, StreamableHTTPClientTransport as V2Transport } from '@modelcontextprotocol/client';

/** `@modelcontextprotocol/sdk` 1.32.2: legacy `initialize` handshake with a session. */
export async function connectSdk1(url, token, name = 'lore-e2e-sdk1') {
  const transport = new Sdk1Transport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const client = new Sdk1Client({ name, version: '0.0.1' }, { capabilities: {} });
  await client.connect(transport);
  return { client, transport };
}

/**
 * `@modelcontextprotocol/client` 2.4.0. mode: 'pin' (2026-07-28, server/discover only),
 * 'legacy' (initialize) or 'auto' (probe, then fall back).
 */
export async function connectV2(url, token, mode = 'pin', name = 'lore-e2e-v2') {
  const transport = new V2Transport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const negotiation = mode === 'pin' ? { mode: { pin: '2026-07-28' } } : { mode };
  const client = new V2Client({ name: `${name}-${mode}`, version: '0.0.1' }, { capabilities: {}, versionNegotiation: negotiation });
  await client.connect(transport);
  return { client, transport };
}

export async function save(client, args) {
  return client.callTool({ name: 'save_memory', arguments: args });
}

export async function search(client, args) {
  return client.callTool({ name: 'search_memory', arguments: typeof args === 'string' ? { query: args } : args });
}
