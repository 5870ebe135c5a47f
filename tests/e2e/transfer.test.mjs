// Moving an org between servers with `lore org export` and `lore org import` (natively on the
// server's database with --db, on Workers and Spin through the operator routes with --url):
// an org exported from one server is a lore database file that `lore restore` accepts and a
// local `lore` reads, and it imports whole into a fresh server: its tokens are issued anew
// there unless the operator carries them (`--carry-credentials`), importing it again is
// refused, and a forged page creates no credential outside its org.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdir } from 'node:fs/promises';
import path from 'node:path';

import { startServer, createOrg, raw2026, lore, loreJson, tempDir, cleanupDir } from './lib/server.mjs';

/** The CLI arguments that reach `server`'s data. */
function side(server) {
  return server.target === 'native' ? ['--db', server.db] : ['--url', server.base, '--operator-secret', server.operatorSecret];
}

async function search(server, org, token, query) {
  const r = await raw2026(`${server.url}/${org}`, token, 'tools/call', { name: 'search_memory', arguments: { query } });
  assert.equal(r.status, 200, r.text);
  assert.notEqual(r.json.result.isError, true, r.text);
  return r.json.result.structuredContent.results;
}

test('an org exported to a file restores natively and imports whole into a fresh server, once', { timeout: 300_000 }, async () => {
  const dir = await tempDir();
  const first = await startServer();
  let second;
  try {
    const org = await createOrg(first, 'travel');
    const saved = await raw2026(`${first.url}/travel`, org.token, 'tools/call', {
      name: 'save_memory', arguments: { content: 'The albatross survey moved to the autumn.', kind: 'decision' },
    });
    assert.equal(saved.status, 200, saved.text);
    const id = saved.json.result.structuredContent.ids[0];

    const file = path.join(dir, 'travel.db');
    const exported = await loreJson(['org', 'export', 'travel', file, ...side(first), '--json']);
    assert.equal(exported.org, 'travel');
    assert.ok(exported.entries > 5, JSON.stringify(exported));
    // One file to move: no WAL, shared memory or change counters left beside it.
    assert.deepEqual(await readdir(dir), ['travel.db']);
    const again = await lore(['org', 'export', 'travel', file, ...side(first)]);
    assert.notEqual(again.code, 0, 'an existing file is not replaced without --force');
    assert.match(again.stderr, /--force/);
    const forced = await lore(['org', 'export', 'travel', file, ...side(first), '--force']);
    assert.equal(forced.code, 0, forced.stderr + forced.stdout);
    assert.deepEqual(await readdir(dir), ['travel.db']);

    // The file is a lore database: `lore restore` takes it, and `lore serve` on it answers the
    // org's own token.
    const restored = path.join(dir, 'restored.db');
    const r = await lore(['restore', file, '--db', restored]);
    assert.equal(r.code, 0, r.stderr + r.stdout);
    const local = await startServer({ db: restored, native: true });
    try {
      const found = await search(local, 'travel', org.token, 'albatross survey');
      assert.equal(found[0]?.id, id, JSON.stringify(found));
    } finally {
      await local.stop();
    }

    // Into a fresh server of the same kind, credentials issued anew: the data is there, the
    // old token is not.
    const anew = await startServer();
    try {
      const imported = await loreJson(['org', 'import', file, 'travel', ...side(anew), '--json']);
      assert.ok(imported.credentials_left >= 1, JSON.stringify(imported));
      const r = await raw2026(`${anew.url}/travel`, org.token, 'tools/call', { name: 'search_memory', arguments: { query: 'albatross' } });
      assert.equal(r.status, 401, r.text);
    } finally {
      await anew.dispose();
    }
    // Carried by the operator: the org's own token works there.
    second = await startServer();
    const imported = await loreJson(['org', 'import', file, 'travel', ...side(second), '--carry-credentials', '--json']);
    assert.equal(imported.entries, exported.entries);
    const found = await search(second, 'travel', org.token, 'albatross survey');
    assert.equal(found[0]?.id, id, JSON.stringify(found));
    // The org is there now: a second import is refused and changes nothing.
    const twice = await lore(['org', 'import', file, 'travel', ...side(second), '--carry-credentials']);
    assert.notEqual(twice.code, 0);
    assert.match(twice.stderr, /already exists/);
    assert.equal((await search(second, 'travel', org.token, 'albatross survey'))[0]?.id, id);
  } finally {
    await first.dispose();
    if (second) await second.dispose();
    await cleanupDir(dir);
  }
});

test('a forged import page gives no token for another org and replaces no principal', { timeout: 120_000 }, async (t) => {
  const server = await startServer();
  try {
    if (server.target === 'native') {
      t.skip('natively an import reads a file (tests/it/transfer.rs forges those)');
      return;
    }
    const { createHash } = await import('node:crypto');
    const secret = `lore_forged_${Date.now()}`;
    const hash = createHash('sha256').update(secret).digest('hex');
    const b64 = (v) => Buffer.from(JSON.stringify(v)).toString('base64');
    const token = { id: 'tok_forged', principal: 'usr_mallory', orgs: ['default', 'heist'], scopes: { read: true, write: true }, created_at_ms: 0, expires_at_ms: null, revoked_at_ms: null, label: null };
    const entries = [
      ['org/heist', b64({ id: 'heist', created_at_ms: 0, owner: 'usr_mallory' })],
      ['principal/usr_mallory', b64({ id: 'usr_mallory', kind: 'user', name: 'm', created_at_ms: 0 })],
      ['o/heist/member/usr_mallory', b64({ principal: 'usr_mallory', role: 'owner', created_at_ms: 0 })],
      [`auth/token/${hash}`, b64(token)],
    ];
    await server.operator('org-import', { org: 'heist', entries, first: true, carry_credentials: true });
    // Carried, the token reaches the org of the file, and only it.
    const other = await raw2026(`${server.url}/default`, secret, 'tools/call', { name: 'search_memory', arguments: { query: 'x' } });
    assert.notEqual(other.status, 200, other.text);
    const own = await raw2026(`${server.url}/heist`, secret, 'tools/call', { name: 'search_memory', arguments: { query: 'x' } });
    assert.equal(own.status, 200, own.text);
  } finally {
    await server.dispose();
  }
});

