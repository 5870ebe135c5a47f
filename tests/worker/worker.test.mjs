// Checks of the Workers adapter that the client suite cannot make, under workerd (Miniflare):
// the shared storage and records suites on D1 and on an org object's SQLite, the Workers AI embedder, and what only the test build has.
//
//   LORE_TARGET=worker node --test tests/worker/   (scripts/test runs it after building both)
//
// The test build (build-test/, feature test-build) runs each case of lore_testing::storage on
// D1Storage over the Worker's real D1 binding, one request per case, from a fresh table.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import http from 'node:http';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';

import { startWorker } from '../e2e/lib/worker.mjs';
import { initDb, lore, loreJson, raw2026, tempDir, cleanupDir } from '../e2e/lib/server.mjs';

const TEST_BUILD = process.env.LORE_WORKER_TEST_BUILD || 'build-test';
const PRODUCT_BUILD = process.env.LORE_WORKER_BUILD || 'build';

let testBuild;
before(async () => {
  testBuild = await startWorker({ build: TEST_BUILD });
});
after(async () => {
  if (testBuild) await testBuild.dispose();
});

// Each suite on each store the Worker uses: D1 (the directory) and an org object's own SQLite
// (every org's data), the latter run inside a Durable Object through /__test/object/….
for (const [store, prefix] of [['D1', '/__test/'], ['an org object', '/__test/object/']]) {
  for (const suite of ['storage-suite', 'records-suite']) {
    test(`the shared ${suite.replace('-', ' ')} passes on ${store}, every case`, async (t) => {
      // Its own Worker: every case starts by emptying the store.
      const suiteHost = await startWorker({ build: TEST_BUILD });
      t.after(() => suiteHost.dispose());
      const list = await fetch(`${suiteHost.base}${prefix}${suite}`);
      assert.equal(list.status, 200);
      const { cases } = await list.json();
      assert.ok(cases.length >= 9, `cases: ${cases}`);
      for (const name of cases) {
        await t.test(name, async () => {
          const res = await fetch(`${suiteHost.base}${prefix}${suite}/${name}`, { method: 'POST' });
          const text = await res.text();
          assert.equal(res.status, 200, `${name} failed on ${store} (a panic is a 500; its message is in the Worker log):\n${text}\n${suiteHost.stderr.slice(-4000)}`);
          assert.deepEqual(JSON.parse(text), { case: name, passed: true });
        });
      }
      // An unknown case is an error, not a silent pass.
      const unknown = await fetch(`${suiteHost.base}${prefix}${suite}/no_such_case`, { method: 'POST' });
      assert.equal(unknown.status, 404);
      await unknown.text();
    });
  }
}

test('the Workers AI embedder sends a plain object and returns one 384-d vector per text', async () => {
  // The AI binding in tests is the TEST-ONLY stand-in of tests/worker/serve.mjs: it refuses a
  // Map input (what json! would send) and answers deterministic vectors.
  const texts = ['The heron dashboard refreshes hourly.', 'Quokka deploys need a ticket.', 'The heron dashboard refreshes hourly.'];
  const res = await fetch(`${testBuild.base}/__test/embed`, { method: 'POST', body: JSON.stringify({ texts }) });
  const body = await res.json();
  assert.equal(res.status, 200, JSON.stringify(body));
  assert.equal(body.model, '@cf/baai/bge-small-en-v1.5');
  assert.equal(body.dimensions, 384);
  assert.equal(body.vectors.length, 3);
  for (const v of body.vectors) assert.equal(v.length, 384);
  assert.deepEqual(body.vectors[0], body.vectors[2], 'same text, same vector');
  assert.notDeepEqual(body.vectors[0], body.vectors[1]);
  const norm = Math.sqrt(body.vectors[1].reduce((s, x) => s + x * x, 0));
  assert.ok(Math.abs(norm - 1) < 1e-3, `unit vectors from the stand-in; norm ${norm}`);
});

test('the HTTP port sends method, headers and body through fetch and returns the answer', async () => {
  // A loopback server on this machine stands in for a connection's API.
  const seen = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => { body += d; });
    req.on('end', () => {
      seen.push({ method: req.method, url: req.url, auth: req.headers.authorization, body });
      res.writeHead(201, { 'content-type': 'application/json', 'x-upstream': 'yes' });
      res.end(JSON.stringify({ echoed: body }));
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  try {
    const url = `http://127.0.0.1:${server.address().port}/v1/things?x=1`;
    const res = await fetch(`${testBuild.base}/__test/fetch`, {
      method: 'POST',
      body: JSON.stringify({ method: 'POST', url, headers: [['authorization', 'Bearer upstream-secret']], body: 'hello' }),
    });
    const out = await res.json();
    assert.equal(res.status, 200, JSON.stringify(out));
    assert.equal(out.status, 201);
    assert.deepEqual(JSON.parse(out.body), { echoed: 'hello' });
    assert.ok(out.headers.some(([k, v]) => k === 'x-upstream' && v === 'yes'), JSON.stringify(out.headers));
    assert.deepEqual(seen, [{ method: 'POST', url: '/v1/things?x=1', auth: 'Bearer upstream-secret', body: 'hello' }]);
    // A refused connection is a port error, not a crash.
    server.close();
    const down = await fetch(`${testBuild.base}/__test/fetch`, { method: 'POST', body: JSON.stringify({ method: 'GET', url }) });
    assert.equal(down.status, 502, await down.clone().text());
    assert.match((await down.json()).error, /HTTP GET .* failed/);
  } finally {
    server.close();
  }
});

test('the product build has no test routes and ignores LORE_NO_AUTH', async () => {
  const product = await startWorker({ build: PRODUCT_BUILD, vars: { LORE_NO_AUTH: '1' } });
  try {
    for (const route of ['/__test/storage-suite', '/__test/records-suite', '/__test/embed', '/__test/fetch']) {
      const res = await fetch(`${product.base}${route}`, { method: 'POST', body: '{}' });
      assert.equal(res.status, 404, route);
      await res.text();
    }
    const tokenless = await fetch(product.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    assert.equal(tokenless.status, 401, await tokenless.text());
  } finally {
    await product.dispose();
  }
});

test('without LORE_OPERATOR_SECRET the operator routes do not exist', async () => {
  const closed = await startWorker({ build: PRODUCT_BUILD, operator: false });
  try {
    for (const action of ['init', 'token-create', 'nope']) {
      const res = await fetch(`${closed.base}/operator/${action}`, { method: 'POST', headers: { authorization: 'Bearer x' }, body: '{}' });
      assert.equal(res.status, 404, action);
      await res.text();
    }
  } finally {
    await closed.dispose();
  }
});

test('operator routes: a wrong secret is refused, and they hand out working tokens', async () => {
  const wrong = await fetch(`${testBuild.base}/operator/org-list`, {
    method: 'POST', headers: { authorization: 'Bearer not-the-secret' }, body: '{}',
  });
  assert.equal(wrong.status, 401);
  await wrong.text();
  const again = await testBuild.operator('init', {});
  assert.equal(again.status, 'already_initialised');
  const { orgs } = await testBuild.operator('org-list');
  assert.deepEqual(orgs.map((o) => o.id), ['default']);
  const { tokens } = await testBuild.operator('token-list', { org: 'default' });
  assert.equal(tokens.length, 1);
  assert.equal(tokens[0].role, 'owner');
  assert.equal(JSON.stringify(tokens).includes(testBuild.ownerToken), false, 'secrets are never listed');
  const issued = await testBuild.operator('token-create', { org: 'default', role: 'viewer', scopes: 'mcp:read', name: 'probe' });
  const listed = await fetch(testBuild.url, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${issued.token}`, 'content-type': 'application/json',
      accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
  });
  assert.equal(listed.status, 200, await listed.clone().text());
  assert.equal((await listed.json()).result.tools.length > 0, true);
  const bad = await fetch(`${testBuild.base}/operator/token-create`, {
    method: 'POST', headers: { authorization: `Bearer ${testBuild.operatorSecret}` }, body: '{"org": "default", "role": "emperor"}',
  });
  assert.equal(bad.status, 400, 'an invalid role is a 400 naming the field');
  assert.match(await bad.text(), /role/);
});

test('a warm tools/call is one call from the Worker to the org object, which reads nothing from D1; a revocation holds at once', async () => {
  const call = (url, id, token = testBuild.ownerToken) => fetch(url, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`, 'content-type': 'application/json',
      accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'search_memory', arguments: { query: 'warm' } } }),
  });
  const counts = async (url) => {
    for (let i = 0; i < 2; i++) await (await call(url, i)).text(); // warm the object and its index
    const res = await call(url, 9);
    const body = await res.json();
    assert.equal(res.status, 200, JSON.stringify(body));
    assert.ok(body.result && !body.result.isError, JSON.stringify(body));
    return {
      worker: Number(res.headers.get('x-lore-test-worker-subrequests')),
      object: Number(res.headers.get('x-lore-test-object-subrequests')),
    };
  };
  // /mcp/{org}: the Worker sends nothing but the call to the org's object. The object has the
  // verified credential and the org record in memory, checked against the org's auth stamp in
  // its own SQLite: no read of the directory on D1.
  const scoped = await counts(`${testBuild.base}/mcp/default`);
  assert.deepEqual(scoped, { worker: 1, object: 0 });
  // /mcp: the Worker learned the token's org on the first call and keeps it (it never changes).
  const bare = await counts(`${testBuild.base}/mcp`);
  assert.deepEqual(bare, { worker: 1, object: 0 });

  // A token revoked through the Worker's operator route stops at the next call, although the
  // object had it cached: the revocation renewed the org's stamp in the object's store.
  const issued = await testBuild.operator('token-create', { org: 'default', role: 'member', scopes: 'mcp:read', name: 'revoked-warm' });
  for (const url of [`${testBuild.base}/mcp/default`, `${testBuild.base}/mcp`]) {
    for (let i = 0; i < 2; i++) {
      const res = await call(url, i, issued.token);
      const text = await res.text();
      assert.equal(res.status, 200, text);
    }
  }
  await testBuild.operator('token-revoke', { org: 'default', token_id: issued.token_id });
  for (const url of [`${testBuild.base}/mcp/default`, `${testBuild.base}/mcp`]) {
    const res = await call(url, 20, issued.token);
    const text = await res.text();
    assert.equal(res.status, 401, text);
    assert.match(text, /revoked/);
  }
});

test('an org whose rows are in D1 (a deployment from before org objects) moves into its object with lore org move-in', async () => {
  const dir = await tempDir();
  try {
    // An org as the old Worker kept it: every key, the directory's and the org's, a row of D1.
    const db = path.join(dir, 'old.db');
    const created = await initDb(db, 'legacy');
    const saved = await loreJson(['memory', 'run', 'save_memory', JSON.stringify({ content: 'The kestrel cameras go live in spring.' }), '--db', db, '--org', 'legacy']);
    const id = saved.ids[0];
    const sqlite = new DatabaseSync(db, { readOnly: true });
    const rows = sqlite.prepare("SELECT k, v FROM lore_kv WHERE k NOT LIKE 'meta/%'").all();
    sqlite.close();
    const entries = rows.map(({ k, v }) => [k, Buffer.from(v).toString('base64')]);
    const put = await fetch(`${testBuild.base}/__test/d1-rows`, { method: 'POST', body: JSON.stringify({ entries }) });
    assert.equal(put.status, 200, await put.text());

    const call = () => raw2026(`${testBuild.url}/legacy`, created.token, 'tools/call', { name: 'search_memory', arguments: { query: 'kestrel cameras' } });
    // The org's object does not read D1's rows: before the move even its memberships are not
    // found there.
    const before = await call();
    assert.equal(before.status, 403, before.text);
    assert.match(before.text, /not a member/);
    const search = async () => {
      const r = await call();
      assert.equal(r.status, 200, r.text);
      return r.json.result.structuredContent.results;
    };
    const side = ['--url', testBuild.base, '--operator-secret', testBuild.operatorSecret];
    const moved = await loreJson(['org', 'move-in', 'legacy', ...side, '--json']);
    assert.equal(moved.entries, rows.filter((r) => r.k.startsWith('o/legacy/')).length, JSON.stringify(moved));
    assert.equal((await search())[0]?.id, id, 'found once moved, by the warm object too');
    // Its history is in the object now: a second move-in is refused.
    const again = await lore(['org', 'move-in', 'legacy', ...side]);
    assert.notEqual(again.code, 0);
    assert.match(again.stderr, /already has memories or records/);
  } finally {
    await cleanupDir(dir);
  }
});

test('a behavior\'s schedule arms its org object\'s alarm; the alarm runs it once per due time and re-arms', async () => {
  const created = await testBuild.operator('org-create', { name: 'alarmed' });
  const token = created.token;
  const sdk = async (code, args) => {
    const r = await raw2026(`${testBuild.url}/alarmed`, token, 'tools/call', { name: 'run_sdk', arguments: { code, args } });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.result.isError, false, r.text);
    return r.json.result.structuredContent.result;
  };
  const alarm = async (body = {}) => {
    const res = await fetch(`${testBuild.base}/__test/alarm/alarmed`, { method: 'POST', body: JSON.stringify(body) });
    const text = await res.text();
    assert.equal(res.status, 200, text);
    return JSON.parse(text);
  };
  assert.equal((await alarm()).alarm, null, 'no alarm before a schedule');
  const before = Date.now();
  await sdk('return await client.behaviors.create(ctx.args)', {
    name: 'heartbeat', trigger: { schedule: 'every 1m' },
    code: "await client.memory.save({content: 'heartbeat at ' + ctx.args.schedule.due_at}); return ctx.args.schedule.seconds",
  });
  const after = Date.now();
  // The wake runs after the answer (waitUntil): wait for it.
  let armed;
  for (let i = 0; i < 50 && !(armed = await alarm()).alarm; i++) await new Promise((r) => setTimeout(r, 100));
  assert.ok(armed.alarm >= before + 60_000 && armed.alarm <= after + 61_000, JSON.stringify({ armed, before, after }));
  assert.equal(armed.org, 'alarmed', 'the object keeps its org for alarms, which come without a request');

  // The alarm's run, as at its time (a test does not wait a minute).
  const ran = await alarm({ at_ms: armed.alarm });
  assert.deepEqual([ran.fired, ran.next_at_ms, ran.alarm], [1, armed.alarm + 60_000, armed.alarm + 60_000], JSON.stringify(ran));
  const again = await alarm({ at_ms: armed.alarm + 1_000 });
  assert.equal(again.fired, 0, 'a due time fires once');
  const actions = await sdk("return (await client.actions.list({limit: 50})).items.filter((a: any) => a.source === 'behavior')");
  assert.equal(actions.length, 1, JSON.stringify(actions));
  assert.equal(actions[0].status, 'ok', JSON.stringify(actions[0]));
  assert.equal(actions[0].behavior, 'heartbeat');

  // Disabled: the next alarm finds nothing to run and arms nothing more.
  await sdk('return await client.behaviors.update({name: "heartbeat", enabled: false})');
  const idle = await alarm({ at_ms: armed.alarm + 120_000 });
  assert.deepEqual([idle.fired, idle.next_at_ms], [0, null], JSON.stringify(idle));
});

test('an org created with a location hint is served from its object; a jurisdiction is asked of the runtime', async () => {
  const orgCreate = (body) => fetch(`${testBuild.base}/operator/org-create`, {
    method: 'POST',
    headers: { authorization: `Bearer ${testBuild.operatorSecret}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  for (const bad of [{ name: 'nowhere', jurisdiction: 'mars' }, { name: 'nowhere', location_hint: 'moon' }]) {
    const refused = await orgCreate(bad);
    assert.equal(refused.status, 400);
    assert.match(await refused.text(), /is not one of/);
  }
  const { orgs: before } = await testBuild.operator('org-list');
  assert.ok(!before.some((o) => o.id === 'nowhere'), 'a refused placement writes nothing');

  const created = await testBuild.operator('org-create', { name: 'placed', location_hint: 'weur' });
  const { orgs } = await testBuild.operator('org-list');
  assert.deepEqual(orgs.find((o) => o.id === 'placed').placement, { location_hint: 'weur' });
  const save = await raw2026(`${testBuild.url}/placed`, created.token, 'tools/call', { name: 'save_memory', arguments: { content: 'The archive stays in Frankfurt.' } });
  assert.equal(save.status, 200, save.text);
  const found = await raw2026(`${testBuild.url}/placed`, created.token, 'tools/call', { name: 'search_memory', arguments: { query: 'archive' } });
  assert.equal(found.status, 200, found.text);
  assert.match(JSON.stringify(found.json.result.structuredContent.results), /Frankfurt/);

  // workerd has no jurisdictions: the object is asked for in the jurisdiction's namespace, and
  // the runtime says so (on Cloudflare it is created there).
  const eu = await orgCreate({ name: 'placed-eu', jurisdiction: 'eu' });
  const text = await eu.text();
  assert.equal(eu.status, 500, text);
  assert.match(text, /Jurisdiction restrictions are not implemented in workerd/);
});
