// Scenario 9: `lore memory run` against a local database (--db) and a remote server (--url --token).
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { startServer, lore, onlyNative, assertFinds } from './lib/server.mjs';

async function run(args) {
  const r = await lore(['memory', 'run', ...args]);
  assert.equal(r.code, 0, `lore memory run ${args.join(' ')}:\n${r.stderr}${r.stdout}`);
  return JSON.parse(r.stdout);
}

test('9. lore memory run: local (--db) and remote (--url --token) both save and search', onlyNative('the CLI opens the server\'s SQLite file with --db; a Worker\'s D1 has no local file'), async () => {
  const server = await startServer();
  try {
    const token = server.ownerToken;
    // Local save, as the local owner, straight into the database the server uses.
    const local = await run(['save_memory', JSON.stringify({ content: 'Narwhal releases are frozen during audits.', kind: 'decision' }), '--db', server.db]);
    assert.match(local.ids?.[0] ?? '', /^evt_/);
    // Remote save through the running server.
    const remote = await run(['save_memory', JSON.stringify({ content: 'Narwhal audits happen every quarter.' }), '--url', server.url, '--token', token]);
    assert.equal(remote.resultType, 'complete', 'remote calls use the 2026-07-28 era');
    assert.equal(remote.isError, false, JSON.stringify(remote));
    const remoteId = remote.structuredContent.ids[0];

    // Each side finds both.
    const viaUrl = await run(['search_memory', JSON.stringify({ query: 'narwhal audits' }), '--url', server.url, '--token', token]);
    assertFinds(viaUrl.structuredContent.results, 'narwhal', [local.ids[0], remoteId]);
    const viaDb = await run(['search_memory', JSON.stringify({ query: 'narwhal audits' }), '--db', server.db]);
    assertFinds(viaDb.results, 'narwhal', [local.ids[0], remoteId]);

    // Org-scoped URL works too.
    const viaOrgUrl = await run(['search_memory', JSON.stringify({ query: 'narwhal', kinds: ['decision'] }), '--url', `${server.url}/default`, '--token', token]);
    assertFinds(viaOrgUrl.structuredContent.results, 'narwhal', [local.ids[0]]);
    assert.deepEqual(viaOrgUrl.structuredContent.results.filter((r) => r.kind !== 'decision'), [], 'the kinds filter applies to every result');

    // Errors: invalid arguments locally, bad token remotely, both exit non-zero.
    const bad = await lore(['memory', 'run', 'search_memory', '{"query":"x","limit":0}', '--db', server.db]);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /invalid_argument/);
    assert.match(bad.stderr, /limit/);
    const unauth = await lore(['memory', 'run', 'search_memory', '{"query":"x"}', '--url', server.url, '--token', 'lore_nope']);
    assert.notEqual(unauth.code, 0);
    assert.match(unauth.stderr, /401/);
  } finally {
    await server.dispose();
  }
});
