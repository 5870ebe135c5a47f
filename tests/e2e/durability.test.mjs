// Scenario 5: memories survive a SIGTERM and a restart on the same database.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';

import { startServer, tempDir, cleanupDir, onlyNative, assertFinds } from './lib/server.mjs';
import { connectV2, connectSdk1, save, search } from './lib/clients.mjs';

test('5. durability: save, kill -TERM, restart on the same db, the memory is still found', onlyNative('graceful shutdown on SIGTERM and reopening the SQLite file are the native process\'s; on Workers, D1 holds every acknowledged write'), async () => {
  const dir = await tempDir();
  const db = path.join(dir, 'lore.db');
  let first;
  let second;
  try {
    first = await startServer({ db });
    const token = first.ownerToken;
    assert.match(token ?? '', /^lore_/);

    const { client } = await connectV2(first.url, token, 'pin');
    let id;
    try {
      const saved = await save(client, { content: 'The axolotl backup job runs at 02:00 UTC.', kind: 'fact', idempotency_key: 'axolotl-1' });
      assert.equal(saved.isError, false, JSON.stringify(saved));
      id = saved.structuredContent.ids[0];
    } finally {
      await client.close();
    }

    const exit = await first.stop();
    assert.deepEqual(exit, { code: 0, signal: null }, `graceful exit on SIGTERM; stderr:\n${first.stderr}`);
    assert.match(first.stderr, /SIGTERM received/);

    second = await startServer({ db });
    assert.equal(second.ownerToken, null, 'no new owner token on an existing db');
    assert.doesNotMatch(second.stderr, /owner token/);

    // The old token still works, the memory is found by a different client.
    const sdk1 = await connectSdk1(second.url, token);
    try {
      const found = await search(sdk1.client, 'axolotl backup');
      assertFinds(found.structuredContent.results, 'axolotl', [id]);
      // The idempotency record survived too: a retry returns the first id.
      const retry = await save(sdk1.client, { content: 'The axolotl backup job runs at 02:00 UTC.', kind: 'fact', idempotency_key: 'axolotl-1' });
      assert.deepEqual(retry.structuredContent.ids, [id]);
      await sdk1.transport.terminateSession();
    } finally {
      await sdk1.client.close();
    }
    const exit2 = await second.stop();
    assert.equal(exit2.code, 0);
  } finally {
    if (first) await first.stop();
    if (second) await second.stop();
    await cleanupDir(dir);
  }
});

test('5b. durability: a saved memory survives SIGKILL (no graceful shutdown)', onlyNative('kill -9 of the serving process and fsync of the SQLite file are native concerns; a Worker isolate holds no data'), async () => {
  const dir = await tempDir();
  const db = path.join(dir, 'lore.db');
  let first;
  let second;
  try {
    first = await startServer({ db });
    const token = first.ownerToken;
    const { client } = await connectV2(first.url, token, 'pin');
    let id;
    try {
      const saved = await save(client, { content: 'The pangolin vault key is rotated after every incident.' });
      id = saved.structuredContent.ids[0];
    } finally {
      await client.close();
    }
    // The answer was sent, so the write must already be durable.
    first.child.kill('SIGKILL');
    const exit = await first.stop();
    assert.equal(exit.signal, 'SIGKILL');

    second = await startServer({ db });
    const again = await connectV2(second.url, token, 'pin');
    try {
      const found = await search(again.client, 'pangolin vault');
      assertFinds(found.structuredContent.results, 'pangolin', [id]);
    } finally {
      await again.client.close();
    }
  } finally {
    if (first) await first.stop();
    if (second) await second.stop();
    await cleanupDir(dir);
  }
});
