// Hostile tenants, round two, against the running server on every platform (native, Workers,
// Spin): regular expressions that backtrack and ways around lore's matcher, values SQL could
// build past its bounds, connection paths that leave their base and credentials echoed in
// encodings, nesting past the stored limit, saves that must not vanish, another org's agent,
// un-awaited writes, lone surrogates and a second Authorization header. The in-process suites
// (tests/*.rs) try more shapes of each; these prove the same code holds at the edge.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';

import { startServer, raw2026, apiPost, createOrg, TARGET } from './lib/server.mjs';

let server;
let echo;
let echoBase;
const SECRET = 'hostile-s3cr3t/value+tok=';

before(async () => {
  server = await startServer();
  // An upstream that answers with the credential it got, in several encodings.
  echo = http.createServer((req, res) => {
    const auth = req.headers.authorization ?? '';
    const secret = auth.replace(/^Bearer /, '');
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({
      path: req.url,
      plain: auth,
      base64: Buffer.from(auth).toString('base64'),
      base64_secret: Buffer.from(secret).toString('base64url'),
      percent: encodeURIComponent(secret),
      hex: Buffer.from(secret).toString('hex'),
    }));
  });
  await new Promise((r) => echo.listen(0, '127.0.0.1', r));
  echoBase = `http://127.0.0.1:${echo.address().port}`;
});
after(async () => {
  if (server) await server.dispose();
  if (echo) echo.close();
});

async function tool(name, args, token = server.ownerToken) {
  const res = await raw2026(server.url, token, 'tools/call', { name, arguments: args });
  assert.equal(res.status, 200, res.text);
  return res.json.result;
}

function error(result) {
  assert.equal(result.isError, true, JSON.stringify(result));
  const parsed = JSON.parse(result.content[0].text);
  return parsed.error ?? parsed;
}

test('regular expressions: backtracking ends at the steps cap or in linear time, and nothing reaches the engine\'s matcher', async () => {
  const steps = error(await tool('query_sdk', { code: "return /(a*)*\\1b/.test('a'.repeat(5000))" }));
  assert.equal(steps.cap, 'steps', JSON.stringify(steps));
  const linear = await tool('query_sdk', { code: "return [/(a+)+$/.test('a'.repeat(5000) + '!'), /a*a*a*a*a*b/.test('a'.repeat(50000)), ('x'.repeat(3000) + '!').match('(x|xx)+$') === null, 'x'.repeat(3000).match('(x|xx)+$') !== null]" });
  assert.deepEqual(linear.structuredContent.result, [false, false, true, true], JSON.stringify(linear));
  for (const code of [
    "const r = /(a+)+$/; Object.defineProperty(r, 'exec', { value: undefined }); return r.test('a'.repeat(40) + 'b')",
    "const r = /(a+)+$/; Object.setPrototypeOf(r, null); return RegExp.prototype.test.call(r, 'a'.repeat(40) + 'b')",
    "class X extends RegExp {} return new X('(a+)+$').test('a')",
  ]) {
    const e = error(await tool('query_sdk', { code }));
    assert.equal(e.code, 'script_error', `${code}: ${JSON.stringify(e)}`);
  }
});

test('SQL: a value nested past its bound is refused before the query runs, naming the limit', async () => {
  for (const sql of [
    "SELECT REPEAT(REPEAT('x', 65536), 65536)",
    "SELECT LPAD(LPAD('x', 60000), 9000000)",
    "SELECT REPLACE(REPLACE(REPLACE(content, 'a', 'aaaaaaaa'), 'a', 'aaaaaaaa'), 'a', 'aaaaaaaa') FROM events",
  ]) {
    const e = error(await tool('query_sql', { sql }));
    assert.equal(e.code ?? 'invalid_argument', 'invalid_argument', JSON.stringify(e));
    assert.match(JSON.stringify(e), /copies of the data/, sql);
  }
});

test('connections: a path that leaves the base is refused in every encoding, and an echoed credential comes back redacted', async () => {
  const owner = server.ownerToken;
  const made = await apiPost(server.base, 'default', 'manage_connections', owner, { action: 'create', name: 'echo', base_url: `${echoBase}/v1`, secret: SECRET });
  assert.equal(made.status, 200, made.text);
  for (const path of ['/../admin', '/%2e%2e/admin', '/%252e%252e/admin', '/..%2fadmin', '/..\\admin', '/..;/admin']) {
    const r = await apiPost(server.base, 'default', 'connections.call', owner, { name: 'echo', path });
    assert.equal(r.status, 400, `${path}: ${r.text}`);
  }
  const r = await apiPost(server.base, 'default', 'connections.call', owner, { name: 'echo', path: '/items' });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.body.path, '/v1/items');
  for (const [field, value] of Object.entries(r.json.body)) {
    if (field !== 'path') assert.equal(value.includes('[redacted]'), true, `${field}: ${value}`);
  }
  assert.doesNotMatch(r.text, new RegExp(Buffer.from(SECRET).toString('hex')));
  assert.ok(!r.text.includes(SECRET));
});

test('memory: dedupe only against current equal memories, said; a reverted decision is a memory again', async () => {
  const save = async (args) => (await tool('save_memory', args)).structuredContent;
  const text = `Deploys freeze on Fridays ${TARGET} ${Date.now()}`;
  const a = await save({ content: text, kind: 'decision' });
  const again = await save({ content: text, kind: 'decision' });
  assert.deepEqual([again.ids[0], again.deduplicated], [a.ids[0], true]);
  const other = await save({ content: text, kind: 'observation' });
  assert.equal(other.deduplicated, false);
  assert.notEqual(other.ids[0], a.ids[0]);
  const b = await save({ content: `No freeze ${Date.now()}`, kind: 'decision', supersedes_event_id: a.ids[0] });
  const reverted = await save({ content: text, kind: 'decision' });
  assert.equal(reverted.deduplicated, false, 'the superseded memory is not current');
  assert.notEqual(reverted.ids[0], a.ids[0]);
  assert.ok(b.ids[0]);
  const deep = JSON.parse('{"a":'.repeat(40) + '1' + '}'.repeat(40));
  const e = error(await tool('save_memory', { content: 'deep', payload: deep }));
  assert.match(JSON.stringify(e), /at most 32 levels/);
});

test('scripts: an un-awaited write is made, a lone surrogate is refused, the wall clock and read-only refusals say what they are', async () => {
  const marker = `unawaited-${Date.now()}`;
  const r = await tool('run_sdk', { code: `client.memory.save({ content: '${marker}' }); return 'done'` });
  assert.equal(r.isError, false, JSON.stringify(r));
  assert.ok(r.structuredContent.writes > 0, JSON.stringify(r));
  const found = await tool('search_memory', { query: marker });
  assert.ok(found.structuredContent.results.some((m) => m.content === marker), JSON.stringify(found));
  const lone = error(await tool('query_sdk', { code: "return 'x\\uD800'" }));
  assert.match(lone.message, /lone surrogate/);
  const readOnly = error(await tool('query_sdk', { code: "await client.memory.save({ content: 'x' })" }));
  assert.match(readOnly.message, /query_sdk may only read/);
});

test('people: another org\'s agent is answered as an unknown id', async () => {
  const other = await createOrg(server, `rival${Date.now() % 100000}`);
  const agent = await apiPost(server.base, other.org, 'agents.create', other.token, { name: 'their-bot' });
  assert.equal(agent.status, 200, agent.text);
  const id = agent.json.principal_id;
  const foreign = await apiPost(server.base, 'default', 'members.add', server.ownerToken, { principal_id: id, role: 'member' });
  const unknown = `agt_${'0'.repeat(26)}`;
  const nobody = await apiPost(server.base, 'default', 'members.add', server.ownerToken, { principal_id: unknown, role: 'member' });
  assert.equal(foreign.status, 400, foreign.text);
  assert.equal(
    foreign.json.error.message.replace(id, '<id>'),
    nobody.json.error.message.replace(unknown, '<id>'),
  );
});

test('a second Authorization header is refused, however the platform passes it on', async () => {
  const url = new URL(server.url);
  const status = await new Promise((resolve, reject) => {
    const req = http.request({
      host: url.hostname,
      port: url.port,
      path: url.pathname,
      method: 'POST',
      headers: [
        ['content-type', 'application/json'],
        ['accept', 'application/json, text/event-stream'],
        ['mcp-protocol-version', '2026-07-28'],
        ['mcp-method', 'tools/list'],
        ['authorization', `Bearer ${server.ownerToken}`],
        ['authorization', 'Bearer lore_someone_else'],
      ],
    }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('error', reject);
    req.end(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} } } }));
  });
  assert.equal(status, 400);
});
