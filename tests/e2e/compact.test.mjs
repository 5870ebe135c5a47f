// Issue 10 end to end: the compact profile (`?profile=compact`: search, fetch, do) with the
// real TypeScript SDK client and the real Python client. Search finds a Noun, a Verb, a record
// and a doc; fetch returns each; `/$.d.ts` type-checks with `tsc --noEmit` together with the
// seed's program; a viewer's declarations have no write methods; `do` runs in each mode
// against a flaky local HTTP operation (fails twice, then succeeds), and a repeated
// idempotency key does not repeat side effects.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import path from 'node:path';

import {
  startServer, initDb, createOrg, createToken, tempDir, cleanupDir, runPython, apiPost,
  raw2026, toolText, lore, onlyNative, recordSecret, TARGET,
} from './lib/server.mjs';
import { connectSdk1, connectV2 } from './lib/clients.mjs';
import { typecheck as tscCheck } from './lib/tsc.mjs';

const ORG = 'shop';
/** The seed's input schemas, exactly (seeds/002). */
const SEED_SCHEMAS = {
  search: {
    type: 'object',
    properties: {
      query: { type: 'string', description: 'What to find.' },
      limit: { type: 'integer', minimum: 1, maximum: 100, default: 10 },
    },
    required: ['query'],
  },
  fetch: {
    type: 'object',
    properties: { id: { type: 'string', description: 'An api.sb id or path, such as /offers/offer_1 or /$.d.ts.' } },
    required: ['id'],
  },
  do: {
    type: 'object',
    properties: {
      code: { type: 'string', description: 'The body of an async function. `$` is in scope; return the result.' },
      mode: { type: 'string', enum: ['try', 'send', 'do'], description: 'The Mode for every call in the program. Defaults to each Verb default.' },
    },
    required: ['code'],
  },
};
/** The seed's example program. */
const SEED_PROGRAM = "const offer = await $.Offer.publish({ offer: 'offer_1' })\nreturn offer\n";
/** A marker in a program's source: script source must never reach the logs. */
const SOURCE_MARKER = `source-marker-${process.pid}-${Date.now()}`;
recordSecret(SOURCE_MARKER);

let dir;
let server;
let owner;
let viewer;
let flaky;
let url;

before(async () => {
  dir = await tempDir();
  if (TARGET !== 'native') {
    server = await startServer();
    owner = (await createOrg(server, ORG)).token;
  } else {
    const db = path.join(dir, 'lore.db');
    owner = (await initDb(db, ORG)).token;
    server = await startServer({ db });
  }
  viewer = await createToken(server, { org: ORG, role: 'viewer', scopes: 'mcp:read' });
  url = `${server.base}/mcp/${ORG}?profile=compact`;
  flaky = await startFlaky();
  await admin('manage_connections', { action: 'create', name: 'storefront', base_url: flaky.url });
  await admin('manage_templates', {
    action: 'create', name: 'offer', description: 'A priced offer we sell in the storefront.',
    schema: { type: 'object', properties: { price: { type: 'number' } } },
  });
  await admin('manage_operations', {
    action: 'create', name: 'publish', entity_type: 'offer', kind: 'http', connection: 'storefront',
    method: 'POST', path: '/offers/{offer}/publish', description: 'Publish an offer in the storefront.',
    args_schema: { type: 'object', properties: { offer: { type: 'string' } }, required: ['offer'] },
  });
});

after(async () => {
  if (server) await server.stop();
  if (flaky) await flaky.close();
  await cleanupDir(dir);
});

/** An admin tool through the REST surface as the owner; asserts 200. */
async function admin(name, body) {
  const res = await apiPost(server.base, ORG, name, owner, body);
  assert.equal(res.status, 200, `${name}: ${res.text}`);
  return res.json;
}

/**
 * A loopback server whose next `failNext` requests answer 503; then 200 with
 * `{published: <path>, n}`. `hits(path)` counts requests to a path.
 */
function startFlaky() {
  const log = [];
  const state = { failNext: 0 };
  const srv = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      log.push(req.url);
      res.setHeader('content-type', 'application/json');
      if (state.failNext > 0) {
        state.failNext -= 1;
        res.statusCode = 503;
        res.end(JSON.stringify({ error: 'try later' }));
        return;
      }
      res.end(JSON.stringify({ published: req.url, n: log.length }));
    });
  });
  return new Promise((resolve) => {
    srv.listen(0, '127.0.0.1', () => resolve({
      url: `http://127.0.0.1:${srv.address().port}`,
      state,
      hits: (p) => log.filter((u) => u === p).length,
      close: () => new Promise((r) => srv.close(r)),
    }));
  });
}

/** Runs the real `tsc` over declarations and one program (the body of an async function). */
function typecheck(dts, program) {
  return tscCheck({ 'lore.d.ts': dts, 'program.ts': `export async function main() {\n${program}}\n` });
}

function ok(result) {
  assert.equal(result.isError, false, JSON.stringify(result));
  return result.structuredContent;
}

function failure(result) {
  assert.equal(result.isError, true, JSON.stringify(result));
  return toolText(result).error;
}

/** The actions log entry of a run, polled until `done(action)` (sends finish after the answer natively). */
async function actionWhen(id, done) {
  for (let i = 0; i < 100; i += 1) {
    const res = await apiPost(server.base, ORG, 'actions.get', owner, { id });
    assert.equal(res.status, 200, res.text);
    const action = res.json;
    if (done(action)) return action;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`action ${id} never finished its sends`);
}

test('TS client on ?profile=compact: tools/list is exactly search, fetch, do with the seed schemas', async () => {
  const { client } = await connectSdk1(url, owner);
  try {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name), ['search', 'fetch', 'do']);
    for (const t of tools) assert.deepEqual(t.inputSchema, SEED_SCHEMAS[t.name], t.name);
    assert.equal(tools.find((t) => t.name === 'do').annotations.readOnlyHint, false);
  } finally {
    await client.close();
  }
});

test('TS client: search finds a Noun, a Verb, a record and a doc, and fetch returns each', async () => {
  const { client } = await connectV2(url, owner);
  try {
    const made = ok(await client.callTool({
      name: 'do',
      arguments: {
        code: "const o = await $.Offer.create({ name: 'Harvest moon bundle', properties: { price: 30 } }); "
          + "const m = await $.memory.save({ content: 'The harvest moon bundle ships with a pumpkin candle.', kind: 'fact', entity_ids: [o.id] }); "
          + 'return { offer: o.id, memory: m.ids[0] }',
      },
    }));
    const { offer, memory } = made.result;
    const find = async (query, id) => {
      const r = ok(await client.callTool({ name: 'search', arguments: { query, limit: 20 } }));
      const hit = r.results.find((h) => h.id === id);
      assert.ok(hit, `search "${query}" finds ${id}: ${JSON.stringify(r.results.map((h) => h.id))}`);
      for (const field of ['id', 'title', 'url', 'kind', 'snippet']) assert.equal(typeof hit[field], 'string', field);
      return hit;
    };
    assert.equal((await find('Offer', '/types/Offer')).kind, 'noun');
    assert.equal((await find('publish an offer', '/verbs/Offer.publish')).kind, 'verb');
    assert.equal((await find('harvest moon bundle', `/entities/${offer}`)).kind, 'entity');
    assert.equal((await find('pumpkin candle', `/memory/${memory}`)).kind, 'memory');
    assert.equal((await find('modes try send do', '/docs/modes')).kind, 'doc');
    for (const id of ['/types/Offer', '/verbs/Offer.publish', `/entities/${offer}`, `/memory/${memory}`, '/docs/modes']) {
      const page = ok(await client.callTool({ name: 'fetch', arguments: { id } }));
      assert.equal(page.id, id);
      assert.ok(page.title && page.text && page.url, JSON.stringify(page));
    }
    const unknown = await client.callTool({ name: 'fetch', arguments: { id: '/types/Nope' } });
    assert.equal(unknown.isError, true);
    assert.match(JSON.stringify(unknown.content), /Offer/, 'the error names what exists');
  } finally {
    await client.close();
  }
});

test('/$.d.ts type-checks with tsc together with the seed program; a viewer has no write methods', async () => {
  const { client } = await connectSdk1(url, owner);
  let dts;
  try {
    dts = ok(await client.callTool({ name: 'fetch', arguments: { id: '/$.d.ts' } })).text;
  } finally {
    await client.close();
  }
  assert.match(dts, /publish\(/);
  const good = await typecheck(dts, SEED_PROGRAM);
  assert.equal(good.output.trim(), '', 'tsc reports nothing for the seed program');
  assert.equal(good.code, 0);
  const bad = await typecheck(dts, "return await $.Offer.publish({ offr: 'offer_1' })\n");
  assert.notEqual(bad.code, 0, 'a misspelt argument fails the type check');

  const v = await connectSdk1(url, viewer);
  try {
    const theirs = ok(await v.client.callTool({ name: 'fetch', arguments: { id: '/$.d.ts' } })).text;
    assert.doesNotMatch(theirs, /publish\(|create\(|update\(|delete\(|save\(/, 'a viewer sees no write methods');
    assert.match(theirs, /list\(/);
    const refused = await typecheck(theirs, SEED_PROGRAM);
    assert.notEqual(refused.code, 0, "the seed program does not type-check against a viewer's $");
    const e = failure(await v.client.callTool({ name: 'do', arguments: { code: SEED_PROGRAM } }));
    assert.ok(['insufficient_scope', 'needs_write'].includes(e.code), JSON.stringify(e));
  } finally {
    await v.client.close();
  }
});

test('do, mode try: one attempt, and the failure throws into the program', async () => {
  const { client } = await connectSdk1(url, owner);
  try {
    const before = flaky.hits('/offers/try_1/publish');
    flaky.state.failNext = 2;
    const e = failure(await client.callTool({ name: 'do', arguments: { code: "return await $.Offer.publish({ offer: 'try_1' })", mode: 'try' } }));
    assert.equal(e.code, 'upstream_error', JSON.stringify(e));
    assert.equal(flaky.hits('/offers/try_1/publish'), before + 1);
    const caught = ok(await client.callTool({
      name: 'do',
      arguments: { code: "try { await $.Offer.publish({ offer: 'try_1' }) } catch (e) { return e.status }", mode: 'try' },
    }));
    assert.equal(caught.result, 503);
    flaky.state.failNext = 0;
  } finally {
    await client.close();
  }
});

test('do, mode do: transient failures are retried with backoff until the call succeeds', async () => {
  const { client } = await connectV2(url, owner);
  try {
    flaky.state.failNext = 2;
    const out = ok(await client.callTool({ name: 'do', arguments: { code: `// ${SOURCE_MARKER}\nreturn await $.Offer.publish({ offer: 'do_1' })`, mode: 'do' } }));
    assert.equal(out.result.status, 200);
    assert.equal(flaky.hits('/offers/do_1/publish'), 3, 'two failures, then success');
    assert.equal(out.calls[0].attempts, 3);
  } finally {
    await client.close();
  }
});

test('do, mode send: a receipt now, the call after the program, the outcome in the actions log', async () => {
  const { client } = await connectSdk1(url, owner);
  try {
    flaky.state.failNext = 2;
    const out = ok(await client.callTool({ name: 'do', arguments: { code: "return await $.Offer.publish({ offer: 'send_1' })", mode: 'send' } }));
    assert.equal(out.result.status, 'queued');
    assert.match(out.result.id, /^snd_/);
    const action = await actionWhen(out.action_id, (a) => a.sends?.[0]?.status !== 'queued');
    assert.equal(action.sends[0].id, out.result.id);
    assert.equal(action.sends[0].status, 'ok', JSON.stringify(action));
    assert.equal(action.sends[0].attempts, 3);
    assert.equal(flaky.hits('/offers/send_1/publish'), 3);
  } finally {
    await client.close();
  }
});

test('do with a repeated idempotency_key (TS client _meta) replays instead of repeating side effects', async () => {
  const { client } = await connectSdk1(url, owner);
  try {
    const code = "const p = await $.Offer.publish({ offer: 'idem_1' }); "
      + "const o = await $.Offer.create({ name: 'Idempotent offer', properties: { price: 1 } }); "
      + 'return { n: p.body.n, offer: o.id }';
    const call = () => client.callTool({ name: 'do', arguments: { code, mode: 'do' }, _meta: { 'io.lore/idempotency_key': 'e2e-idem-1' } });
    flaky.state.failNext = 1;
    const first = ok(await call());
    const second = ok(await call());
    assert.deepEqual(second.result, first.result);
    assert.equal(second.replayed, 2);
    assert.equal(flaky.hits('/offers/idem_1/publish'), 2, 'one failure and one success, nothing more');
    const rows = await apiPost(server.base, ORG, 'sql.query', owner, { sql: "SELECT COUNT(*) FROM offer WHERE name = 'Idempotent offer'" });
    assert.equal(rows.json.rows[0][0], 1, 'the offer was created once');
  } finally {
    await client.close();
  }
});

test('Python client on ?profile=compact: search, fetch, do, and the ChatGPT connector shape', async () => {
  const out = await runPython({
    url,
    token: owner,
    steps: [
      { op: 'list_tools' },
      { op: 'call', name: 'search', args: { query: 'Offer' } },
      { op: 'call', name: 'fetch', args: { id: '/types/Offer' } },
      { op: 'call', name: 'fetch', args: { id: '/$.d.ts' } },
      { op: 'call', name: 'do', args: { code: "return await $.Offer.publish({ offer: 'py_1' })", mode: 'do', idempotency_key: 'py-1' } },
      { op: 'call', name: 'do', args: { code: "return await $.Offer.publish({ offer: 'py_1' })", mode: 'do' }, meta: { 'io.lore/idempotency_key': 'py-1' } },
    ],
  });
  const [list, found, noun, dts, first, again] = out.steps;
  assert.deepEqual(list.tools.map((t) => t.name), ['search', 'fetch', 'do']);
  // ChatGPT's connector contract: one text item holding {results: [{id, title, url}]} ...
  const shape = JSON.parse(found.content[0].text);
  assert.ok(shape.results.length > 0);
  for (const r of shape.results) for (const f of ['id', 'title', 'url']) assert.equal(typeof r[f], 'string', f);
  assert.ok(shape.results.some((r) => r.id === '/types/Offer'));
  // ... and fetch's {id, title, text, url, metadata}.
  const doc = JSON.parse(noun.content[0].text);
  for (const f of ['id', 'title', 'text', 'url']) assert.equal(typeof doc[f], 'string', f);
  assert.equal(typeof doc.metadata, 'object');
  assert.match(JSON.parse(dts.content[0].text).text, /declare const \$/);
  assert.equal(first.isError, false, JSON.stringify(first));
  assert.equal(again.structuredContent.replayed, 1, JSON.stringify(again));
  assert.deepEqual(again.structuredContent.result, first.structuredContent.result);
  assert.equal(flaky.hits('/offers/py_1/publish'), 1);
});

test('the profile can be the org default, and a raw 2026-07-28 call sees the compact set', async () => {
  const base = `${server.base}/mcp/${ORG}`;
  const listed = async (u) => (await raw2026(u, owner, 'tools/list')).json.result.tools.map((t) => t.name);
  assert.ok((await listed(base)).includes('run_sdk'));
  await admin('organizations.update', { default_profile: 'compact' });
  try {
    assert.deepEqual(await listed(base), ['search', 'fetch', 'do']);
    assert.ok((await listed(`${base}?profile=workspace`)).includes('query_sql'));
  } finally {
    await admin('organizations.update', { default_profile: 'workspace' });
  }
  const bad = await raw2026(`${base}?profile=nano`, owner, 'tools/list');
  assert.equal(bad.status, 400);
});

test('lore memory run takes the compact tools, locally and remotely', onlyNative('the CLI opens the local database'), async () => {
  const remote = await lore(['memory', 'run', 'fetch', '{"id":"/docs/modes"}', '--url', `${server.base}/mcp/${ORG}`, '--token', owner]);
  assert.equal(remote.code, 0, remote.stderr);
  const printed = JSON.parse(remote.stdout);
  assert.match((printed.structuredContent ?? printed).text, /idempotency/, remote.stdout.slice(0, 500));
  const local = await lore(['memory', 'run', 'do', '{"code":"return (await $.Offer.list()).items.length > 0"}', '--db', server.db, '--org', ORG]);
  assert.equal(local.code, 0, local.stderr);
  assert.equal(JSON.parse(local.stdout).result, true);
});
