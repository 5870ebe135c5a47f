// Checks of the Spin build that the client suite cannot make, in the wasmtime dev host: the
// shared storage and records suites on Spin SQLite (one request, so one fresh component
// instance, per case), the cache port's contract on Spin key-value, revocation while a token's
// credential is cached, state across host restarts, the import allow-list, and the platform's
// embeddings (`fermyon:spin/llm`) against `lore serve`'s encoder (LORE_BIN: the lore binary).
//
//   LORE_TARGET=spin node --test tests/spin/   (scripts/test runs it after scripts/build-spin)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { DatabaseSync } from 'node:sqlite';

import { startSpin, SPIN_HOST, SPIN_COMPONENT, SPIN_TEST_COMPONENT } from '../e2e/lib/spin.mjs';
import { raw2026 } from '../e2e/lib/server.mjs';

/** Whether the dev host's key-value file holds the cached credential of `token`. */
function credentialCached(host, token) {
  const key = `cred/${crypto.createHash('sha256').update(token).digest('hex')}`;
  const db = new DatabaseSync(host.kv, { readOnly: true });
  try {
    return db.prepare('SELECT 1 FROM spin_key_value WHERE store = ? AND key = ?').get('default', key) !== undefined;
  } finally {
    db.close();
  }
}

for (const suite of ['storage', 'records']) {
  test(`the shared ${suite} suite passes on Spin SQLite, every case`, async (t) => {
    const host = await startSpin({ component: SPIN_TEST_COMPONENT, operator: false });
    t.after(() => host.dispose());
    const list = await fetch(`${host.base}/__test/${suite}-suite`);
    assert.equal(list.status, 200);
    const { cases } = await list.json();
    assert.ok(cases.length >= 9, `cases: ${cases}`);
    for (const name of cases) {
      await t.test(name, async () => {
        const res = await fetch(`${host.base}/__test/${suite}-suite/${name}`, { method: 'POST' });
        const text = await res.text();
        assert.equal(res.status, 200, `${name} failed on Spin SQLite (a panic traps the instance: 500, message in the host log):\n${text}\n${host.stderr.slice(-4000)}`);
        assert.deepEqual(JSON.parse(text), { case: name, passed: true });
      });
    }
    const unknown = await fetch(`${host.base}/__test/${suite}-suite/no_such_case`, { method: 'POST' });
    assert.equal(unknown.status, 404);
    await unknown.text();
  });
}

test('the cache port passes its contract on Spin key-value (misses, overwrites, deletes, expiry)', async (t) => {
  const host = await startSpin({ component: SPIN_TEST_COMPONENT, operator: false });
  t.after(() => host.dispose());
  const res = await fetch(`${host.base}/__test/cache-suite`, { method: 'POST' });
  const text = await res.text();
  assert.equal(res.status, 200, `${text}\n${host.stderr.slice(-4000)}`);
  assert.deepEqual(JSON.parse(text), { case: 'cache-suite', passed: true });
});

test('a revoked token is refused at once although its credential is still cached (operator and SDK revocation)', async (t) => {
  const host = await startSpin();
  t.after(() => host.dispose());
  const list = (token) => raw2026(host.url, token, 'tools/list');

  // Revoked through the operator route (what `lore token revoke` is on the edge).
  const a = await host.operator('token-create', { org: 'default', role: 'member', scopes: 'mcp:read,mcp:write' });
  assert.equal(credentialCached(host, a.token), false);
  assert.equal((await list(a.token)).status, 200);
  assert.ok(credentialCached(host, a.token), 'the first request cached the verified credential');
  assert.equal((await list(a.token)).status, 200, 'a later instance serves it from the cache');
  await host.operator('token-revoke', { org: 'default', token_id: a.token_id });
  assert.ok(credentialCached(host, a.token), 'the copy stays; it is no longer trusted (the org\'s auth stamp changed)');
  const refused = await list(a.token);
  assert.equal(refused.status, 401);
  assert.match(refused.json.error.message, /revoked/);

  // Revoked through the SDK (`tokens.revoke` over REST) by the owner.
  const b = await host.operator('token-create', { org: 'default', role: 'member', scopes: 'mcp:read,mcp:write' });
  assert.equal((await list(b.token)).status, 200);
  assert.ok(credentialCached(host, b.token));
  const res = await fetch(`${host.base}/api/default/tokens.revoke`, {
    method: 'POST',
    headers: { authorization: `Bearer ${host.ownerToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ id: b.token_id }),
  });
  assert.equal(res.status, 200, await res.text());
  assert.ok(credentialCached(host, b.token));
  assert.equal((await list(b.token)).status, 401);
  assert.equal((await list(host.ownerToken)).status, 200, 'other tokens are unaffected');
});

test('usage counts from per-request instances are exact and stay in a bounded set of keys', async (t) => {
  const host = await startSpin();
  t.after(() => host.dispose());
  const calls = 40;
  for (let i = 0; i < calls; i++) {
    const res = await raw2026(host.url, host.ownerToken, 'tools/call', { name: 'search_sdk', arguments: { query: 'entities' } });
    assert.equal(res.status, 200, res.text);
  }
  const metric = await fetch(`${host.base}/api/default/query_metric`, {
    method: 'POST',
    headers: { authorization: `Bearer ${host.ownerToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'tool_calls', tool: 'search_sdk' }),
  });
  const body = await metric.json();
  assert.equal(metric.status, 200, JSON.stringify(body));
  assert.equal(body.value, calls, JSON.stringify(body));
  // Every instance flushed its count, into one of 16 shared counter keys, not one key per call.
  const db = new DatabaseSync(host.db, { readOnly: true });
  try {
    const { n } = db.prepare("SELECT count(*) AS n FROM lore_kv WHERE k GLOB 'o/default/usage/*/search_sdk/*'").get();
    assert.ok(n >= 1 && n <= 16, `${n} usage keys for ${calls} calls`);
  } finally {
    db.close();
  }
});

test('the product component has no test routes', async (t) => {
  const host = await startSpin();
  t.after(() => host.dispose());
  const res = await fetch(`${host.base}/__test/storage-suite`);
  assert.equal(res.status, 404);
  await res.text();
});

test('orgs, tokens and the key-value cache persist across requests and host restarts', async (t) => {
  const first = await startSpin();
  const { db } = first;
  t.after(() => fs.rmSync(first.dir, { recursive: true, force: true }));
  assert.ok(first.ownerToken, 'init issued an owner token');
  await first.operator('org-create', { name: 'acme' });
  assert.equal((await raw2026(first.url, first.ownerToken, 'tools/list')).status, 200);
  assert.ok(credentialCached(first, first.ownerToken));
  await first.stop();
  const second = await startSpin({ db });
  t.after(() => second.stop());
  assert.equal(second.kv, first.kv);
  // Spin key-value persisted: the credential cached before the restart is still there.
  assert.ok(credentialCached(second, first.ownerToken), 'the cached credential survived the restart');
  const { orgs } = await second.operator('org-list');
  const names = orgs.map((o) => o.name ?? o.org ?? o.id);
  assert.ok(JSON.stringify(orgs).includes('acme'), `orgs after restart: ${JSON.stringify(names)}`);
  // The owner token from the first run still authenticates.
  const res = await fetch(second.url, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${first.ownerToken}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-06-18',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
  });
  assert.equal(res.status, 200, await res.clone().text());
  const body = await res.json();
  assert.ok(body.result.tools.length > 0);
});

test('the host serves only components whose imports it provides', () => {
  // The product component passes the allow-list (the host's own unit test covers refusal).
  const ok = spawnSync(SPIN_HOST, ['--check-imports', SPIN_COMPONENT], { encoding: 'utf8' });
  assert.equal(ok.status, 0, ok.stderr);
  assert.match(ok.stdout, /spin:sqlite\/sqlite@3\.1\.0/);
  assert.match(ok.stdout, /spin:key-value\/key-value@3\.0\.0/);
});

test('behaviors\' schedules run from the operator route a cron calls, once per due time', async (t) => {
  const host = await startSpin({ component: SPIN_TEST_COMPONENT });
  t.after(() => host.dispose());
  const sdk = async (code, args) => {
    const r = await raw2026(host.url, host.ownerToken, 'tools/call', { name: 'run_sdk', arguments: { code, args } });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.result.isError, false, r.text);
    return r.json.result.structuredContent.result;
  };
  await sdk('return await client.behaviors.create(ctx.args)', {
    name: 'heartbeat', trigger: { schedule: 'every 1m' },
    code: "await client.memory.save({content: 'heartbeat at ' + ctx.args.schedule.due_at}); return 1",
  });
  const now = await host.operator('schedules', {});
  assert.deepEqual([now.orgs, now.fired, now.errors], [1, 0, []], JSON.stringify(now));
  const at = Date.now() + 61_000;
  const ran = await host.operator('schedules', { at_ms: at });
  assert.deepEqual([ran.orgs, ran.fired], [1, 1], JSON.stringify(ran));
  const again = await host.operator('schedules', { at_ms: at + 1_000 });
  assert.equal(again.fired, 0, 'a due time fires once');
  const actions = await sdk("return (await client.actions.list({limit: 50})).items.filter((a: any) => a.source === 'behavior')");
  assert.equal(actions.length, 1, JSON.stringify(actions));
  assert.equal(actions[0].status, 'ok', JSON.stringify(actions[0]));
});

test("the component embeds through the platform's all-MiniLM-L6-v2, with lore serve's vectors for the same text", async (t) => {
  const host = await startSpin({ component: SPIN_TEST_COMPONENT, operator: false });
  t.after(() => host.dispose());
  const texts = [
    'who owns billing?',
    "Dana Okafor's squad is responsible for the invoicing and payments code.",
    // Past the model's 256 word pieces: both cut it there.
    'the deploy pipeline runs integration tests before every release '.repeat(60),
  ];
  const res = await fetch(`${host.base}/__test/embed`, { method: 'POST', body: JSON.stringify({ texts }) });
  const text = await res.text();
  assert.equal(res.status, 200, `${text}\n${host.stderr.slice(-4000)}`);
  const spin = JSON.parse(text);
  const lore = process.env.LORE_BIN;
  assert.ok(lore, 'LORE_BIN names the lore binary');
  const native = spawnSync(lore, ['model', ...texts.flatMap((t) => ['--embed', t])], { encoding: 'utf8', maxBuffer: 1 << 26 });
  assert.equal(native.status, 0, native.stderr);
  const served = JSON.parse(native.stdout);
  assert.equal(spin.model, served.model);
  assert.equal(spin.vectors.length, texts.length);
  for (const [i, v] of spin.vectors.entries()) {
    assert.equal(v.length, 384);
    assert.deepEqual(v, served.vectors[i], `text ${i}: the same vector on Spin and natively`);
  }
});
