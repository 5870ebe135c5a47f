// Scenario 8: malformed and hostile requests, sent raw. Each check asserts the HTTP status and
// the JSON-RPC error, then that the server still serves a well-formed request.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';

import { startServer, rawPost, rawLegacy, raw2026, toolText, META_2026, WORKSPACE_TOOLS, assertFinds } from './lib/server.mjs';

let server;
let token;
/** The one memory this file saves. */
let heronId;
before(async () => {
  server = await startServer();
  token = server.ownerToken;
  const saved = await raw2026(server.url, token, 'tools/call', { name: 'save_memory', arguments: { content: 'The heron dashboard refreshes hourly.' } });
  assert.equal(saved.status, 200, saved.text);
  heronId = saved.json.result.structuredContent.ids[0];
  assert.match(heronId ?? '', /^evt_/, saved.text);
});
after(async () => {
  if (server) await server.dispose();
});

/** The server is still up and answering correctly (both eras). */
async function stillServing() {
  const health = await fetch(`${server.base}/healthz`);
  assert.equal(health.status, 200);
  const modern = await raw2026(server.url, token, 'tools/call', { name: 'search_memory', arguments: { query: 'heron' } });
  assert.equal(modern.status, 200, modern.text);
  assertFinds(modern.json.result.structuredContent.results, 'heron', [heronId]);
  const legacy = await rawLegacy(server.url, token, 'tools/list');
  assert.equal(legacy.status, 200, legacy.text);
  assert.deepEqual(legacy.json.result.tools.map((t) => t.name).sort(), WORKSPACE_TOOLS);
}

function expectRpcError(res, status, code) {
  assert.equal(res.status, status, `HTTP status; body: ${res.text}`);
  assert.match(res.headers.get('content-type') ?? '', /application\/json/);
  assert.equal(res.json?.jsonrpc, '2.0', res.text);
  assert.equal(res.json?.error?.code, code, res.text);
  assert.equal(typeof res.json.error.message, 'string');
}

test('8. bad input is refused with the right status and code, and the server keeps serving', async (t) => {
  await t.test('malformed JSON -> 400 / -32700', async () => {
    const res = await rawPost(server.url, { token, body: '{"jsonrpc":"2.0","id":1,"method":' });
    expectRpcError(res, 400, -32700);
    assert.equal(res.json.id, null);
    await stillServing();
  });

  await t.test('non-object, missing jsonrpc, null id -> 400 / -32600', async () => {
    for (const body of ['42', '"tools/list"', 'null', 'true']) {
      expectRpcError(await rawPost(server.url, { token, body }), 400, -32600);
    }
    const noVersion = await rawPost(server.url, { token, body: { id: 7, method: 'tools/list' } });
    expectRpcError(noVersion, 400, -32600);
    assert.equal(noVersion.json.id, 7, 'the id is echoed when usable');
    const wrongVersion = await rawPost(server.url, { token, body: { jsonrpc: '1.0', id: 8, method: 'tools/list' } });
    expectRpcError(wrongVersion, 400, -32600);
    const nullId = await rawPost(server.url, { token, body: { jsonrpc: '2.0', id: null, method: 'tools/list' } });
    expectRpcError(nullId, 400, -32600);
    assert.equal(nullId.json.id, null);
    const noMethod = await rawPost(server.url, { token, body: { jsonrpc: '2.0', id: 9 } });
    expectRpcError(noMethod, 400, -32600);
    // The same checks apply to 2026-era requests.
    const nullId2026 = await rawPost(server.url, {
      token,
      headers: { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/list' },
      body: { jsonrpc: '2.0', id: null, method: 'tools/list', params: { _meta: META_2026() } },
    });
    expectRpcError(nullId2026, 400, -32600);
    await stillServing();
  });

  await t.test('unknown method (legacy) -> JSON-RPC -32601', async () => {
    const res = await rawLegacy(server.url, token, 'memories/forget', {}, { id: 'abc' });
    expectRpcError(res, 200, -32601);
    assert.equal(res.json.id, 'abc');
    await stillServing();
  });

  await t.test('unknown tool -> -32602 (both eras)', async () => {
    const legacy = await rawLegacy(server.url, token, 'tools/call', { name: 'delete_everything', arguments: {} });
    expectRpcError(legacy, 200, -32602);
    assert.match(legacy.json.error.message, /delete_everything/);
    const modern = await raw2026(server.url, token, 'tools/call', { name: 'delete_everything', arguments: {} });
    assert.equal(modern.json?.error?.code, -32602, modern.text);
    await stillServing();
  });

  await t.test('invalid arguments -> tool result isError naming the field', async () => {
    const cases = [
      ['save_memory', { content: 'x', kind: 'rumour' }, 'kind'],
      ['search_memory', { query: 'heron', limit: 0 }, 'limit'],
      ['search_memory', { query: 'heron', limit: 101 }, 'limit'],
      ['search_memory', { query: 'heron', since: 'yesterday-ish' }, 'since'],
      ['save_memory', { content: 'x', colour: 'blue' }, null],
    ];
    for (const [name, args, field] of cases) {
      for (const res of [
        await rawLegacy(server.url, token, 'tools/call', { name, arguments: args }),
        await raw2026(server.url, token, 'tools/call', { name, arguments: args }),
      ]) {
        assert.equal(res.status, 200, res.text);
        assert.equal(res.json.result?.isError, true, `${name} ${JSON.stringify(args)}: ${res.text}`);
        const err = toolText(res.json.result).error;
        assert.equal(err.code, 'invalid_argument', res.text);
        if (field) assert.equal(err.field, field, res.text);
        assert.match(err.message, field ? new RegExp(field) : /\S/);
      }
    }
    // Nothing was saved by the failed calls: the org still holds only the heron memory (a
    // semantic search lists every memory of so small an org, whatever the query).
    const check = await raw2026(server.url, token, 'tools/call', { name: 'search_memory', arguments: { query: 'x', include_superseded: true, limit: 100 } });
    assert.deepEqual(check.json.result.structuredContent.results.filter((r) => r.id !== heronId), [], check.text);
    await stillServing();
  });

  await t.test('body over 4 MiB -> 413', async () => {
    const big = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'save_memory', arguments: { content: 'a'.repeat((4 << 20) + 16) } } });
    const res = await rawPost(server.url, { token, body: big });
    assert.equal(res.status, 413, res.text.slice(0, 300));
    // Just over the limit (4 MiB + 1 byte) too, via the helper's fetch.
    const exact = Buffer.alloc((4 << 20) + 1, 0x20);
    const res2 = await rawPost(server.url, { token, body: exact });
    assert.equal(res2.status, 413);
    await stillServing();
  });

  await t.test('bad or missing bearer token -> 401 with WWW-Authenticate', async () => {
    const body = { jsonrpc: '2.0', id: 1, method: 'tools/list' };
    const missing = await rawPost(server.url, { body });
    expectRpcError(missing, 401, -32005);
    assert.match(missing.headers.get('www-authenticate') ?? '', /^Bearer /);
    for (const authorization of ['Bearer lore_notarealtoken', 'Bearer not-a-lore-token', 'Basic dXNlcjpwYXNz', `Bearer ${token}x`]) {
      const res = await rawPost(server.url, { body, headers: { authorization } });
      expectRpcError(res, 401, -32005);
      assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer .*error="invalid_token"/, authorization);
    }
    // 2026-era requests likewise.
    const modern = await raw2026(server.url, 'lore_bogus', 'server/discover');
    assert.equal(modern.status, 401);
    assert.match(modern.headers.get('www-authenticate') ?? '', /Bearer/);
    await stillServing();
  });

  await t.test('bad Origin -> 403', async () => {
    const res = await rawLegacy(server.url, token, 'tools/list', undefined, { headers: { origin: 'http://evil.example' } });
    assert.equal(res.status, 403, res.text);
    assert.match(res.text, /Origin/);
    const nullOrigin = await rawLegacy(server.url, token, 'tools/list', undefined, { headers: { origin: 'null' } });
    assert.equal(nullOrigin.status, 403);
    // A loopback origin is fine.
    const ok = await rawLegacy(server.url, token, 'tools/list', undefined, { headers: { origin: server.base } });
    assert.equal(ok.status, 200, ok.text);
    await stillServing();
  });

  await t.test('bad Host (DNS rebinding) -> 403', async () => {
    const port = new URL(server.base).port;
    const res = await new Promise((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, path: '/mcp', method: 'POST', headers: {
        host: `evil.example:${port}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream',
        authorization: `Bearer ${token}`,
      } }, (r) => { r.resume(); r.on('end', () => resolve(r.statusCode)); });
      req.on('error', reject);
      req.end(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }));
    });
    assert.equal(res, 403);
    await stillServing();
  });

  await t.test('unsupported MCP-Protocol-Version header -> 400', async () => {
    for (const version of ['1999-01-01', '2024-11-05', 'banana']) {
      const res = await rawLegacy(server.url, token, 'tools/list', undefined, { version });
      expectRpcError(res, 400, -32022);
      assert.ok(res.json.error.data?.supported?.includes('2025-11-25'), res.text);
    }
    await stillServing();
  });

  await t.test('GET /mcp -> 405', async () => {
    for (const accept of ['text/event-stream', 'application/json, text/event-stream']) {
      const res = await fetch(server.url, { headers: { authorization: `Bearer ${token}`, accept } });
      assert.equal(res.status, 405);
      assert.match(res.headers.get('allow') ?? '', /POST/);
      await res.text();
    }
    await stillServing();
  });

  await t.test('batch: 400 under 2025-06-18, works under 2025-03-26', async () => {
    const batch = [
      { jsonrpc: '2.0', id: 1, method: 'tools/list' },
      { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'search_memory', arguments: { query: 'heron' } } },
      { jsonrpc: '2.0', method: 'notifications/initialized' },
    ];
    const refused = await rawPost(server.url, { token, headers: { 'mcp-protocol-version': '2025-06-18' }, body: batch });
    expectRpcError(refused, 400, -32600);
    const refused2 = await rawPost(server.url, { token, headers: { 'mcp-protocol-version': '2025-11-25' }, body: batch });
    assert.equal(refused2.status, 400);
    const ok = await rawPost(server.url, { token, headers: { 'mcp-protocol-version': '2025-03-26' }, body: batch });
    assert.equal(ok.status, 200, ok.text);
    assert.ok(Array.isArray(ok.json), ok.text);
    assert.equal(ok.json.length, 2, 'no response for the notification');
    const byId = Object.fromEntries(ok.json.map((m) => [m.id, m]));
    assert.deepEqual(byId[1].result.tools.map((t) => t.name).sort(), WORKSPACE_TOOLS);
    assertFinds(byId[2].result.structuredContent.results, 'heron', [heronId]);
    await stillServing();
  });

  await t.test('2026: header/_meta version mismatch -> 400 / -32020', async () => {
    const res = await raw2026(server.url, token, 'tools/list', {}, { headers: { 'mcp-protocol-version': '2025-11-25' } });
    expectRpcError(res, 400, -32020);
    const missing = await raw2026(server.url, token, 'tools/list', {}, { headers: { 'mcp-protocol-version': undefined } });
    expectRpcError(missing, 400, -32020);
    await stillServing();
  });

  await t.test('2026: unsupported version -> 400 / -32022 with data.supported', async () => {
    const future = '2027-01-01';
    const res = await raw2026(server.url, token, 'server/discover', {}, {
      headers: { 'mcp-protocol-version': future },
      meta: { 'io.modelcontextprotocol/protocolVersion': future },
    });
    expectRpcError(res, 400, -32022);
    assert.ok(Array.isArray(res.json.error.data?.supported), res.text);
    assert.ok(res.json.error.data.supported.includes('2026-07-28'), res.text);
    assert.equal(res.json.error.data.requested, future);
    await stillServing();
  });

  await t.test('2026: Mcp-Method / Mcp-Name mismatch -> 400 / -32020', async () => {
    const method = await raw2026(server.url, token, 'tools/list', {}, { headers: { 'mcp-method': 'tools/call' } });
    expectRpcError(method, 400, -32020);
    const noMethod = await raw2026(server.url, token, 'tools/list', {}, { headers: { 'mcp-method': undefined } });
    expectRpcError(noMethod, 400, -32020);
    const name = await raw2026(server.url, token, 'tools/call', { name: 'search_memory', arguments: { query: 'heron' } }, { headers: { 'mcp-name': 'save_memory' } });
    expectRpcError(name, 400, -32020);
    // The base64 sentinel form of the right name is accepted.
    const b64 = `=?base64?${Buffer.from('search_memory').toString('base64')}?=`;
    const sentinel = await raw2026(server.url, token, 'tools/call', { name: 'search_memory', arguments: { query: 'heron' } }, { headers: { 'mcp-name': b64 } });
    assert.equal(sentinel.status, 200, sentinel.text);
    await stillServing();
  });

  await t.test('2026: unknown method -> 404 / -32601', async () => {
    const res = await raw2026(server.url, token, 'memories/forget');
    expectRpcError(res, 404, -32601);
    // initialize is not a 2026-era method.
    const init = await raw2026(server.url, token, 'initialize', { protocolVersion: '2026-07-28', capabilities: {}, clientInfo: { name: 'x', version: '0' } });
    expectRpcError(init, 404, -32601);
    await stillServing();
  });

  await t.test('wrong Content-Type -> 415, Accept without JSON -> 406', async () => {
    const ct = await rawPost(server.url, { token, headers: { 'content-type': 'text/plain' }, body: { jsonrpc: '2.0', id: 1, method: 'tools/list' } });
    assert.equal(ct.status, 415, ct.text);
    const acc = await rawPost(server.url, { token, headers: { accept: 'text/html' }, body: { jsonrpc: '2.0', id: 1, method: 'tools/list' } });
    assert.equal(acc.status, 406, acc.text);
    await stillServing();
  });

  await t.test('unknown or malformed session id -> 404', async () => {
    for (const sid of ['0123456789abcdef0123456789abcdef', 'not a session!']) {
      const res = await rawLegacy(server.url, token, 'tools/list', undefined, { headers: { 'mcp-session-id': sid } });
      expectRpcError(res, 404, -32001);
    }
    await stillServing();
  });

  await t.test('unknown path -> 404', async () => {
    const res = await fetch(`${server.base}/nope`);
    assert.equal(res.status, 404);
    await res.text();
    await stillServing();
  });

  // After all of the above, the process is alive and printed no panic.
  assert.equal(server.exitInfo, null);
  assert.doesNotMatch(server.stderr, /panicked/);
});
