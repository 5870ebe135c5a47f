// Regression tests for server bugs the end-to-end suite found (CORS for allowed origins, legacy
// versions named in _meta, invalid-argument errors that echoed huge values).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { startServer, rawPost, raw2026, WORKSPACE_TOOLS } from './lib/server.mjs';

let server;
before(async () => {
  server = await startServer({ args: ['--allowed-origin', 'http://app.example'] });
});
after(async () => {
  if (server) await server.dispose();
});

test('regression: no CORS, so an --allowed-origin browser app cannot call the server', async () => {
  // A browser's preflight for POST with Authorization and JSON.
  const pre = await fetch(server.url, {
    method: 'OPTIONS',
    headers: {
      origin: 'http://app.example',
      'access-control-request-method': 'POST',
      'access-control-request-headers': 'authorization, content-type, mcp-protocol-version, mcp-session-id',
    },
  });
  await pre.text();
  assert.ok(pre.status === 200 || pre.status === 204, `preflight status ${pre.status}`);
  assert.equal(pre.headers.get('access-control-allow-origin'), 'http://app.example');
  assert.match(pre.headers.get('access-control-allow-headers') ?? '', /authorization/i);
  assert.match(pre.headers.get('access-control-allow-methods') ?? '', /POST/);
  // The actual request: readable by the page, session header exposed.
  const res = await rawPost(server.url, {
    token: server.ownerToken,
    headers: { origin: 'http://app.example' },
    body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'web', version: '0' } } },
  });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('access-control-allow-origin'), 'http://app.example');
  assert.match(res.headers.get('access-control-expose-headers') ?? '', /mcp-session-id/i);
});

test('regression: a 2025-era request whose _meta names its (supported) version is refused as unsupported', async () => {
  const res = await rawPost(server.url, {
    token: server.ownerToken,
    headers: { 'mcp-protocol-version': '2025-11-25' },
    body: {
      jsonrpc: '2.0', id: 1, method: 'tools/list',
      params: { _meta: { 'io.modelcontextprotocol/protocolVersion': '2025-11-25', 'io.modelcontextprotocol/clientCapabilities': {} } },
    },
  });
  // Either served as legacy, or refused with an error that does not contradict itself.
  if (res.status !== 200) {
    assert.notEqual(res.json?.error?.code, -32022, `refused as unsupported: ${res.text}`);
  } else {
    assert.deepEqual(res.json.result.tools.map((t) => t.name).sort(), WORKSPACE_TOOLS);
  }
});

test('regression: an invalid-argument error echoes the whole offending value', async () => {
  const content = 'x'.repeat(4_000_000);
  const res = await raw2026(server.url, server.ownerToken, 'tools/call', { name: 'save_memory', arguments: { content } });
  assert.equal(res.status, 200);
  assert.equal(res.json.result.isError, true);
  const error = JSON.parse(res.json.result.content[0].text).error;
  assert.equal(error.field, 'content');
  assert.ok(error.message.length < 1000, `error message is ${error.message.length} characters`);
  assert.ok(res.text.length < 10_000, `response is ${res.text.length} bytes`);
});
