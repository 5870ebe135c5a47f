// Scenario 9: `lore memory run` against a local database (--db) and a remote server (--url --token).
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { spawnSync } from 'node:child_process';

import { startServer, lore, onlyNative, assertFinds, LORE_BIN } from './lib/server.mjs';

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
    // A remote call prints the tool's structured result, as a local one does; --raw prints the
    // whole tools/call result.
    const remote = await run(['save_memory', JSON.stringify({ content: 'Narwhal audits happen every quarter.' }), '--url', server.url, '--token', token]);
    assert.match(remote.ids?.[0] ?? '', /^evt_/, JSON.stringify(remote));
    assert.equal(remote.deduplicated, false);
    const remoteId = remote.ids[0];
    const envelope = await run(['save_memory', JSON.stringify({ content: 'Narwhal audits happen every quarter.' }), '--url', server.url, '--token', token, '--raw']);
    assert.equal(envelope.resultType, 'complete', 'remote calls use the 2026-07-28 era');
    assert.equal(envelope.isError, false, JSON.stringify(envelope));
    assert.deepEqual(envelope.structuredContent.ids, [remoteId], 'the same save again is deduplicated');
    assert.equal(envelope.structuredContent.deduplicated, true);

    // Each side finds both.
    const viaUrl = await run(['search_memory', JSON.stringify({ query: 'narwhal audits' }), '--url', server.url, '--token', token]);
    assertFinds(viaUrl.results, 'narwhal', [local.ids[0], remoteId]);
    const viaDb = await run(['search_memory', JSON.stringify({ query: 'narwhal audits' }), '--db', server.db]);
    assertFinds(viaDb.results, 'narwhal', [local.ids[0], remoteId]);

    // Org-scoped URL works too.
    const viaOrgUrl = await run(['search_memory', JSON.stringify({ query: 'narwhal', kinds: ['decision'] }), '--url', `${server.url}/default`, '--token', token]);
    assertFinds(viaOrgUrl.results, 'narwhal', [local.ids[0]]);
    assert.deepEqual(viaOrgUrl.results.filter((r) => r.kind !== 'decision'), [], 'the kinds filter applies to every result');

    // Output into a pipe whose reader is gone (`| head` that stopped reading) ends quietly with
    // success: no panic, no backtrace.
    for (const where of [['--db', server.db], ['--url', server.url, '--token', token]]) {
      const piped = spawnSync('bash', ['-c', `"$0" memory run search_memory '{"query":"narwhal"}' "$@" | true; echo "status \${PIPESTATUS[0]}"`, LORE_BIN, ...where], { encoding: 'utf8' });
      assert.equal(piped.stdout.trim(), 'status 0', piped.stderr);
      assert.doesNotMatch(piped.stderr, /panicked|backtrace|Broken pipe/, piped.stderr);
    }

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

test('lore reindex --embeddings embeds an org again under the transformer, with the memories saved under the static table', onlyNative('the CLI opens the server\'s SQLite file with --db'), async () => {
  const server = await startServer({ env: { LORE_EMBEDDER: 'builtin' } });
  // More than a search embeds itself (16), so that they wait for the re-embedding.
  const texts = ['The billing database moved to Postgres 17 in May.', 'Standups are at 9:30 on weekdays.', 'Invoices go out on the first business day.'];
  for (let i = 0; i < 30; i++) texts.push(`Runbook step ${i}: check the ${['queue', 'cache', 'disk'][i % 3]} on host ${i}.`);
  try {
    await run(['save_memory', JSON.stringify({ memories: texts.map((content) => ({ content })) }), '--url', server.url, '--token', server.ownerToken]);
  } finally {
    await server.stop();
  }
  const r = await lore(['reindex', '--embeddings', '--db', server.db], { timeoutMs: 300_000 });
  assert.equal(r.code, 0, r.stderr + r.stdout);
  assert.match(r.stderr, /^33 memories to embed/m, r.stderr);
  const report = await lore(['doctor', '--db', server.db, '--json'], { timeoutMs: 300_000 });
  assert.equal(report.code, 0, report.stderr + report.stdout);
  const org = JSON.parse(report.stdout).memory_index.orgs[0];
  assert.equal(org.vectors.model, 'all-minilm-l6-v2-mean-256', JSON.stringify(org));
  assert.equal(org.vectors.queued, 0, JSON.stringify(org));
  // Found by meaning with the new model's vectors, none left to keywords.
  const found = await run(['search_memory', JSON.stringify({ query: 'when are invoices sent' }), '--db', server.db]);
  assert.equal(found.results[0].content, texts[2], JSON.stringify(found));
  assert.equal(found.pending_vectors, undefined, JSON.stringify(found));
  // Nothing is left to queue.
  const again = await lore(['reindex', '--embeddings', '--db', server.db, '--json'], { timeoutMs: 300_000 });
  assert.equal(again.code, 0, again.stderr + again.stdout);
  assert.equal(JSON.parse(again.stdout).orgs[0].vectors.queued, 0);
});
