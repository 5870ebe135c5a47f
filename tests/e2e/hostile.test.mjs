// Hostile tenants, rounds two and three, against the running server on every platform
// (native, Workers, Spin): regular expressions that backtrack and ways around lore's matcher,
// values SQL could build past its bounds (a chain of WITH tables too), connection paths that
// leave their base in any spelling and credentials echoed in encodings or sent somewhere new,
// outbound requests to addresses members may not reach, a silent upstream, an admin's edit of
// an owner's behavior, records made without credentials, nesting past the stored limit, saves
// that must not vanish, another org's agent, un-awaited writes, lone surrogates and a second
// Authorization header. The in-process suites (tests/*.rs) try more shapes of each; these
// prove the same code holds at the edge.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';

import { startServer, raw2026, apiPost, createOrg, issueToken, TARGET } from './lib/server.mjs';

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

// Round three.

test('SQL: a chain of WITH tables, or derived tables, each multiplying a value is bounded as a whole', async () => {
  for (const sql of [
    "WITH a AS (SELECT REPEAT(content, 16) AS s FROM events), b AS (SELECT REPEAT(s, 16) AS s FROM a) SELECT LENGTH(s) FROM b",
    "WITH a AS (SELECT content || content AS s FROM events), b AS (SELECT s || s AS s FROM a), c AS (SELECT s || s AS s FROM b), d AS (SELECT s || s AS s FROM c), e AS (SELECT s || s AS s FROM d) SELECT LENGTH(s) FROM e",
    "SELECT LENGTH(REPEAT(d.s, 16)) FROM (SELECT REPEAT(content, 16) AS s FROM events) d",
  ]) {
    const e = error(await tool('query_sql', { sql }));
    assert.match(JSON.stringify(e), /copies of the data/, sql);
  }
});

test('connections: a path in any spelling a lenient server reads as a dot segment is refused, and nothing is sent', async () => {
  const owner = server.ownerToken;
  let hits = 0;
  const counted = http.createServer((req, res) => { hits += 1; res.end('{}'); });
  await new Promise((r) => counted.listen(0, '127.0.0.1', r));
  try {
    const made = await apiPost(server.base, 'default', 'connections.create', owner, { name: 'counted', base_url: `http://127.0.0.1:${counted.address().port}/v1`, secret: SECRET });
    assert.equal(made.status, 200, made.text);
    for (const path of ['/%u002e%u002e/admin', '/%C0%AE%C0%AE/admin', '/%EF%BC%8E%EF%BC%8E/admin', '/..%20/admin', '/%25252e%25252e/admin', '/%2e%2e/admin', '/%E2%80%A4%E2%80%A4/admin']) {
      const r = await apiPost(server.base, 'default', 'connections.call', owner, { name: 'counted', path });
      assert.equal(r.status, 400, `${path}: ${r.text}`);
    }
    assert.equal(hits, 0, 'no refused path reached the upstream');
    // The credential goes only where it was stored for: moving the base needs it again.
    const moved = await apiPost(server.base, 'default', 'connections.update', owner, { name: 'counted', base_url: 'https://collector.example.net' });
    assert.equal(moved.status, 400, moved.text);
    assert.equal(moved.json.error.field, 'secret', moved.text);
  } finally {
    counted.close();
  }
});

test('outbound: a member\'s connection reaches no address members may not reach, however it is written', async () => {
  const owner = server.ownerToken;
  for (const [i, base] of ['http://169.254.169.254', 'http://[::ffff:169.254.169.254]', 'http://0xa9fea9fe', 'http://10.0.0.1:9', 'http://[fd00::1]:9'].entries()) {
    const made = await apiPost(server.base, 'default', 'connections.create', owner, { name: `private${i}`, base_url: base.startsWith('https') ? base : base.replace('http://', 'https://') });
    assert.equal(made.status, 200, made.text);
    const r = await apiPost(server.base, 'default', 'connections.call', owner, { name: `private${i}`, path: '/latest/meta-data' });
    assert.notEqual(r.status, 200, `${base}: ${r.text}`);
    assert.match(r.text, /does not reach/, `${base}: ${r.text}`);
  }
});

test('outbound: a silent upstream holds its org\'s call, never another org\'s request', async () => {
  const held = [];
  const silent = net.createServer((socket) => held.push(socket));
  await new Promise((r) => silent.listen(0, '127.0.0.1', r));
  const rival = await createOrg(server, `quiet${Date.now() % 100000}`);
  try {
    const made = await apiPost(server.base, 'default', 'connections.create', server.ownerToken, { name: 'silent', base_url: `http://127.0.0.1:${silent.address().port}` });
    assert.equal(made.status, 200, made.text);
    let settled = false;
    const call = apiPost(server.base, 'default', 'connections.call', server.ownerToken, { name: 'silent', path: '/x' })
      .finally(() => { settled = true; });
    for (let i = 0; i < 200 && held.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    assert.ok(held.length > 0, 'the call reached the upstream');
    const other = await raw2026(`${server.url}/${rival.org}`, rival.token, 'tools/call', { name: 'search_memory', arguments: { query: 'anything' } });
    assert.equal(other.status, 200, other.text);
    assert.equal(settled, false, 'the other org was answered while the silent call waited');
    for (const socket of held) socket.destroy();
    const answered = await call;
    assert.notEqual(answered.status, 200, answered.text);
  } finally {
    silent.close();
  }
});

test('people: an admin\'s edit of an owner\'s behavior runs with the admin\'s rights, and an admin touches no owner', async () => {
  const owner = server.ownerToken;
  const agent = await apiPost(server.base, 'default', 'agents.create', owner, { name: `admin-${Date.now()}`, role: 'admin' });
  assert.equal(agent.status, 200, agent.text);
  const adminId = agent.json.principal_id;
  const issued = await apiPost(server.base, 'default', 'tokens.create', owner, { principal_id: adminId });
  assert.equal(issued.status, 200, issued.text);
  const admin = issued.json.token;
  const kind = `ping${Date.now() % 100000}`;
  const made = await apiPost(server.base, 'default', 'behaviors.create', owner, { name: kind, trigger: { event_kinds: ['preference'] }, code: 'return 1' });
  assert.equal(made.status, 200, made.text);
  const escalate = `let r = 'none'; try { await client.members.update({principal_id: '${adminId}', role: 'owner'}); r = 'owner'; } catch (e) { r = e.code; } return r;`;
  const edited = await apiPost(server.base, 'default', 'behaviors.update', admin, { name: kind, code: escalate });
  assert.equal(edited.status, 200, edited.text);
  const saved = await tool('save_memory', { content: `trigger ${kind}`, kind: 'preference' });
  assert.equal(saved.isError, false, JSON.stringify(saved));
  // The reaction runs after the answer; wait for its Action.
  let action;
  for (let i = 0; i < 100 && !action; i++) {
    const acts = await apiPost(server.base, 'default', 'actions.list', owner, { limit: 50, newest_first: true });
    action = acts.json.items?.find((a) => a.behavior === kind);
    if (!action) await new Promise((r) => setTimeout(r, 50));
  }
  assert.ok(action, 'the reaction ran');
  assert.equal(action.principal, adminId, JSON.stringify(action));
  const members = await apiPost(server.base, 'default', 'members.list', owner, {});
  assert.equal(members.json.find((m) => m.principal_id === adminId)?.role, 'admin', members.text);
  // Nor can the admin end the owner's credentials directly.
  const tokens = await apiPost(server.base, 'default', 'tokens.list', owner, {});
  const ownerId = members.json.find((m) => m.role === 'owner').principal_id;
  const ownerToken = tokens.json.find((t) => t.principal === ownerId && !t.revoked);
  if (ownerToken) {
    const revoke = await apiPost(server.base, 'default', 'tokens.revoke', admin, { id: ownerToken.id });
    assert.equal(revoke.status, 403, revoke.text);
  }
  await apiPost(server.base, 'default', 'behaviors.delete', owner, { name: kind });
});

test('records made without credentials are limited per client address', async () => {
  const limited = await startServer({
    env: { LORE_RATE_ANONYMOUS_PER_MINUTE: '6' },
    vars: TARGET === 'spin' ? { lore_rate_anonymous_per_minute: '6' } : { LORE_RATE_ANONYMOUS_PER_MINUTE: '6' },
  });
  try {
    const statuses = [];
    for (let i = 0; i < 30; i++) {
      const r = await fetch(`${limited.base}/oauth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ redirect_uris: ['http://127.0.0.1:9/cb'], token_endpoint_auth_method: 'none' }),
      });
      await r.text();
      statuses.push(r.status);
      if (r.status === 429) assert.ok(r.headers.get('retry-after'), 'Retry-After');
    }
    const made = statuses.filter((s) => s === 201).length;
    assert.ok(made >= 1 && made <= 6, `${made} registrations of 30: ${statuses}`);
    assert.ok(statuses.every((s) => s === 201 || s === 429), `${statuses}`);
  } finally {
    await limited.dispose();
  }
});

