// Checks of the Spin build that the client suite cannot make, in the wasmtime dev host: the
// shared storage and records suites on Spin SQLite (one request, so one fresh component
// instance, per case), state across host restarts, and the import allow-list.
//
//   LORE_TARGET=spin node --test tests/spin/   (scripts/test runs it after scripts/build-spin)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';

import { startSpin, SPIN_HOST, SPIN_COMPONENT, SPIN_TEST_COMPONENT } from '../e2e/lib/spin.mjs';

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

test('the product component has no test routes', async (t) => {
  const host = await startSpin();
  t.after(() => host.dispose());
  const res = await fetch(`${host.base}/__test/storage-suite`);
  assert.equal(res.status, 404);
  await res.text();
});

test('orgs and tokens persist across requests and host restarts', async (t) => {
  const first = await startSpin();
  const { db } = first;
  t.after(() => fs.rmSync(db, { force: true }));
  assert.ok(first.ownerToken, 'init issued an owner token');
  await first.operator('org-create', { name: 'acme' });
  await first.stop();
  const second = await startSpin({ db });
  t.after(() => second.stop());
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
});
