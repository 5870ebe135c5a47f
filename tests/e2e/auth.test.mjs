// Scenarios 6 and 7: org isolation, token scopes and roles.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import {
  startServer, createOrg, createToken, issueToken, revokeToken, rawLegacy, raw2026, toolText, runPython,
  assertFinds, assertAbsent,
} from './lib/server.mjs';
import { connectSdk1, connectV2, save, search } from './lib/clients.mjs';

let server;
before(async () => {
  server = await startServer();
});
after(async () => {
  if (server) await server.dispose();
});

function results(result) {
  assert.notEqual(result.isError, true, JSON.stringify(result));
  return result.structuredContent.results;
}

function ids(result) {
  return results(result).map((r) => r.id);
}

test('6. isolation: another org never sees default\'s memories, and tokens are refused on the other org\'s path', async () => {
  const owner = server.ownerToken;
  const other = await createOrg(server, 'other');
  assert.equal(other.org, 'other');
  assert.match(other.token, /^lore_/);

  // default saves a memory.
  const d = await connectV2(server.url, owner, 'pin');
  let defaultId;
  try {
    const saved = await save(d.client, { content: 'The ocelot merger closes in June.', kind: 'fact' });
    defaultId = saved.structuredContent.ids[0];
    assertFinds(results(await search(d.client, 'ocelot merger')), 'ocelot', [defaultId]);
  } finally {
    await d.client.close();
  }

  // other (on /mcp and on /mcp/other, with two different clients) sees nothing of it: other has
  // no memory yet, so its searches return nothing at all.
  for (const url of [server.url, `${server.url}/other`]) {
    const o = await connectV2(url, other.token, 'pin');
    try {
      assert.deepEqual(ids(await search(o.client, 'ocelot merger')), [], url);
      assert.deepEqual(ids(await search(o.client, { query: 'ocelot', include_superseded: true })), [], url);
    } finally {
      await o.client.close();
    }
  }
  const s = await connectSdk1(`${server.url}/other`, other.token);
  let otherId;
  try {
    assert.deepEqual(ids(await search(s.client, 'ocelot')), []);
    // other's own memory with the same word stays in other.
    otherId = (await save(s.client, { content: 'The ocelot mascot is orange.' })).structuredContent.ids[0];
    const theirs = results(await search(s.client, 'ocelot'));
    assertFinds(theirs, 'ocelot', [otherId]);
    assertAbsent(theirs, defaultId, 'other does not see default\'s memory:');
    // other cannot supersede default's memory by id: it does not exist there.
    const cross = await save(s.client, { content: 'hijack', supersedes_event_id: defaultId });
    assert.equal(cross.isError, true);
    assert.equal(toolText(cross).error.field, 'supersedes_event_id');
    await s.transport.terminateSession();
  } finally {
    await s.client.close();
  }
  const py = await runPython({ url: server.url, token: owner, steps: [{ op: 'search', args: { query: 'ocelot' } }] });
  const mine = py.steps[0].structuredContent.results;
  assertAbsent(mine, otherId, 'default does not see other\'s memory:');
  assertFinds(mine, 'ocelot', [defaultId]);

  // Wrong org in the path: 403, in both eras.
  for (const [token, org] of [[other.token, 'default'], [owner, 'other']]) {
    const url = `${server.url}/${org}`;
    const legacy = await rawLegacy(url, token, 'tools/call', { name: 'search_memory', arguments: { query: 'ocelot' } });
    assert.equal(legacy.status, 403, `${org}: ${legacy.text}`);
    assert.equal(legacy.json?.error?.code, -32003);
    const modern = await raw2026(url, token, 'tools/call', { name: 'search_memory', arguments: { query: 'ocelot' } });
    assert.equal(modern.status, 403, `${org}: ${modern.text}`);
    const init = await rawLegacy(url, token, 'initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '0' } });
    assert.equal(init.status, 403, `${org}: ${init.text}`);
    // The real clients fail to connect rather than falling back.
    await assert.rejects(connectV2(url, token, 'pin'), `v2 pinned on ${url}`);
    await assert.rejects(connectSdk1(url, token), `sdk1 on ${url}`);
  }
  // An unknown org is refused the same way.
  const nowhere = await raw2026(`${server.url}/nowhere`, owner, 'tools/list');
  assert.equal(nowhere.status, 403, nowhere.text);
});

test('7. scopes and roles: read-only token gets 403 insufficient_scope on save; viewer gets needs_write; both can search', async () => {
  const owner = server.ownerToken;
  const readOnly = await createToken(server, { scopes: 'mcp:read', name: 'reader' });
  const viewer = await createToken(server, { role: 'viewer', scopes: 'mcp:read,mcp:write', name: 'viewer' });

  const o = await connectV2(server.url, owner, 'pin');
  let id;
  try {
    id = (await save(o.client, { content: 'The gecko runbook lives in the ops wiki.' })).structuredContent.ids[0];
  } finally {
    await o.client.close();
  }

  // Read-only token: HTTP 403 + WWW-Authenticate insufficient_scope, in both eras.
  const args = { name: 'save_memory', arguments: { content: 'should not be saved: gecko' } };
  for (const res of [
    await rawLegacy(server.url, readOnly, 'tools/call', args),
    await raw2026(server.url, readOnly, 'tools/call', args),
  ]) {
    assert.equal(res.status, 403, res.text);
    assert.match(res.headers.get('www-authenticate') ?? '', /insufficient_scope/);
    assert.equal(res.json?.error?.code, -32003);
    assert.equal(res.json?.error?.data?.error, 'insufficient_scope');
    assert.equal(res.json?.id, 1);
  }
  // The real clients see the 403 as an error, and can still search.
  const r1 = await connectSdk1(server.url, readOnly);
  try {
    await assert.rejects(save(r1.client, { content: 'nope gecko' }), /403|insufficient_scope/);
    assertFinds(results(await search(r1.client, 'gecko runbook')), 'gecko', [id]);
    await r1.transport.terminateSession();
  } finally {
    await r1.client.close();
  }
  const r2 = await connectV2(server.url, readOnly, 'pin');
  try {
    await assert.rejects(save(r2.client, { content: 'nope gecko' }));
    assertFinds(results(await search(r2.client, 'gecko')), 'gecko', [id]);
  } finally {
    await r2.client.close();
  }
  const rpy = await runPython({ url: server.url, token: readOnly, steps: [{ op: 'save', args: { content: 'nope gecko' } }, { op: 'search', args: { query: 'gecko' } }] });
  assert.ok(rpy.steps[0].exception, `python save with a read-only token raised: ${JSON.stringify(rpy.steps[0])}`);
  assertFinds(rpy.steps[1].structuredContent.results, 'gecko', [id]);

  // Viewer with write scope: an in-band tool error with code needs_write.
  const v = await connectV2(server.url, viewer, 'pin');
  try {
    const denied = await save(v.client, { content: 'viewer wants to write about geckos' });
    assert.equal(denied.isError, true, JSON.stringify(denied));
    assert.equal(toolText(denied).error.code, 'needs_write');
    assertFinds(results(await search(v.client, 'gecko')), 'gecko', [id]);
  } finally {
    await v.client.close();
  }
  const vs = await connectSdk1(server.url, viewer);
  try {
    const denied = await save(vs.client, { content: 'viewer wants to write about geckos' });
    assert.equal(denied.isError, true);
    assert.equal(toolText(denied).error.code, 'needs_write');
    await vs.transport.terminateSession();
  } finally {
    await vs.client.close();
  }
  // Nothing of the refused writes was stored: each of them mentions gecko too.
  const check = await raw2026(server.url, owner, 'tools/call', { name: 'search_memory', arguments: { query: 'gecko', include_superseded: true, limit: 100 } });
  assert.equal(check.status, 200);
  assertFinds(check.json.result.structuredContent.results, 'gecko', [id]);
});

test('7b. a revoked token is refused at once (401) by the running server, for every client', async () => {
  const issued = await issueToken(server, { name: 'laptop' });
  assert.match(issued.token_id, /^tok_/);
  const v2 = await connectV2(server.url, issued.token, 'pin');
  try {
    assert.equal((await search(v2.client, 'anything')).isError, false);
    await revokeToken(server, issued.token_id);
    // The already-connected client's next call fails.
    await assert.rejects(search(v2.client, 'anything'), /401|revoked/);
  } finally {
    await v2.client.close();
  }
  const res = await raw2026(server.url, issued.token, 'tools/list');
  assert.equal(res.status, 401);
  assert.match(res.headers.get('www-authenticate') ?? '', /invalid_token/);
  assert.match(res.json.error.message, /revoked/);
  // New connections with it fail in every client; none silently falls back.
  await assert.rejects(connectSdk1(server.url, issued.token), (e) => e.code === 401 && /revoked/.test(e.message));
  await assert.rejects(connectV2(server.url, issued.token, 'pin'));
  await assert.rejects(connectV2(server.url, issued.token, 'auto'));
  await assert.rejects(runPython({ url: server.url, token: issued.token, steps: [] }));
  // Other tokens are unaffected.
  assert.equal((await raw2026(server.url, server.ownerToken, 'tools/list')).status, 200);
});
