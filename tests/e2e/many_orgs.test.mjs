// Many orgs at once (on Workers: one Durable Object each, in one workerd run): every org is
// created and used concurrently with the others, and the cross-org probes of the isolation
// tests hold across all of them: an org's searches, SQL and records show only its own data,
// and its token is refused on every other org's paths.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { startServer, createOrg, raw2026, rawLegacy, apiPost, recordSecret, mentioning } from './lib/server.mjs';

const ORGS = Number(process.env.LORE_MANY_ORGS || 200);
const AT_ONCE = 16;

let server;
before(async () => {
  server = await startServer();
});
after(async () => {
  if (server) await server.dispose();
});

/** Runs `work` over `items`, `width` at a time; resolves the results in order. */
async function pool(items, width, work) {
  const out = new Array(items.length);
  let next = 0;
  const lanes = Array.from({ length: width }, async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await work(items[i], i);
    }
  });
  await Promise.all(lanes);
  return out;
}

async function call(org, token, name, args) {
  const r = await raw2026(`${server.url}/${org}`, token, 'tools/call', { name, arguments: args });
  assert.equal(r.status, 200, `${org} ${name}: ${r.text}`);
  const result = r.json.result;
  assert.notEqual(result.isError, true, `${org} ${name}: ${r.text}`);
  return result.structuredContent;
}

test(`${ORGS} orgs created and used at once; each sees only its own data and its token is refused on the others' paths`, { timeout: 900_000 }, async () => {
  const names = Array.from({ length: ORGS }, (_, i) => `many${i}`);
  // A word only org i's memory and record hold ("quokka1z" is no part of "quokka12z").
  const word = (i) => `quokka${i}z`;
  const orgs = await pool(names, AT_ONCE, async (name) => {
    const created = await createOrg(server, name);
    recordSecret(created.token);
    return { name, token: created.token };
  });

  // Every org writes at once: a memory and a record with its word.
  const saved = await pool(orgs, AT_ONCE, async ({ name, token }, i) => {
    const memory = await call(name, token, 'save_memory', { content: `The ${word(i)} ledger belongs to ${name}.`, kind: 'fact' });
    const type = await apiPost(server.base, name, 'manage_templates', token, { action: 'create', name: 'note' });
    assert.equal(type.status, 200, `${name} manage_templates: ${type.text}`);
    const entity = await apiPost(server.base, name, 'entities.create', token, { type: 'note', name: word(i) });
    assert.equal(entity.status, 200, `${name} entities.create: ${entity.text}`);
    return { memory: memory.ids[0], entity: entity.json.id };
  });

  // Then every org reads at once, and probes its neighbours.
  await pool(orgs, AT_ONCE, async ({ name, token }, i) => {
    const j = (i + 1) % ORGS;
    const k = (i + ORGS - 1) % ORGS;
    const neighbour = orgs[j].name;
    // Its own memory is found; a neighbour's word finds nothing that mentions it.
    const mine = (await call(name, token, 'search_memory', { query: word(i) })).results;
    assert.equal(mine[0]?.id, saved[i].memory, `${name}: ${JSON.stringify(mine)}`);
    for (const other of [j, k]) {
      const theirs = (await call(name, token, 'search_memory', { query: word(other) })).results;
      assert.deepEqual(mentioning(theirs, word(other)), [], `${name} searching ${word(other)}`);
      assert.equal(theirs.some((r) => r.id === saved[other].memory), false, name);
    }
    // SQL shows its own rows only.
    const rows = (await call(name, token, 'query_sql', { sql: 'SELECT content FROM events' })).rows;
    assert.deepEqual(rows, [[`The ${word(i)} ledger belongs to ${name}.`]], name);
    const names = (await call(name, token, 'query_sql', { sql: 'SELECT name FROM entities' })).rows;
    assert.deepEqual(names, [[word(i)]], name);
    // Its records: one note, its own; a neighbour's id is unknown here.
    const listed = await apiPost(server.base, name, 'entities.list', token, {});
    assert.equal(listed.status, 200, listed.text);
    assert.deepEqual(listed.json.items.map((e) => e.id), [saved[i].entity], name);
    const foreign = await apiPost(server.base, name, 'entities.get', token, { id: saved[j].entity });
    assert.equal(foreign.status, 404, `${name} reading ${neighbour}'s entity: ${foreign.text}`);
    // Its token on the neighbour's paths: refused in both eras and over REST.
    const modern = await raw2026(`${server.url}/${neighbour}`, token, 'tools/call', { name: 'search_memory', arguments: { query: word(j) } });
    assert.equal(modern.status, 403, `${name} on /mcp/${neighbour}: ${modern.text}`);
    const legacy = await rawLegacy(`${server.url}/${neighbour}`, token, 'tools/call', { name: 'search_memory', arguments: { query: word(j) } });
    assert.equal(legacy.status, 403, `${name} on /mcp/${neighbour} (legacy): ${legacy.text}`);
    const rest = await apiPost(server.base, neighbour, 'entities.list', token, {});
    assert.equal(rest.status, 403, `${name} on /api/${neighbour}: ${rest.text}`);
    // On /mcp its token reaches its own org only.
    const bare = await raw2026(server.url, token, 'tools/call', { name: 'search_memory', arguments: { query: word(j) } });
    assert.equal(bare.status, 200, bare.text);
    assert.deepEqual(mentioning(bare.json.result.structuredContent.results, word(j)), [], `${name} on /mcp`);
  });
});
