// Scenarios 1-4: the real TypeScript and Python MCP clients against a real `lore serve`.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import {
  startServer, rawLegacy, rawPost, runPython, toolText, TARGET, WORKSPACE_TOOLS, mentioning, assertFinds, assertAbsent,
} from './lib/server.mjs';
import { connectSdk1, connectV2, save, search } from './lib/clients.mjs';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

let server;
before(async () => {
  server = await startServer();
  assert.match(server.ownerToken ?? '', /^lore_/, `owner token not found on stderr:\n${server.stderr}`);
});
after(async () => {
  if (server) await server.dispose();
});

/** `lore serve` issues legacy sessions; the Workers build serves the legacy eras statelessly. */
const STATEFUL = TARGET === 'native';

function assertToolsShape(tools) {
  assert.deepEqual(tools.map((t) => t.name).sort(), WORKSPACE_TOOLS,
    'the product lists exactly the workspace tools (was LORE_BIN built with --features conformance-fixtures?)');
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  const s = byName.search_memory;
  const w = byName.save_memory;
  const k = byName.search_sdk;
  assert.equal(s.annotations?.readOnlyHint, true);
  assert.equal(s.annotations?.destructiveHint, false);
  assert.equal(s.annotations?.idempotentHint, true);
  assert.equal(w.annotations?.readOnlyHint, false);
  assert.equal(w.annotations?.destructiveHint, false);
  assert.equal(w.annotations?.idempotentHint, false);
  assert.equal(k.annotations?.readOnlyHint, true);
  assert.equal(k.annotations?.destructiveHint, false);
  for (const t of tools) {
    assert.equal(t.inputSchema?.type, 'object', `${t.name} inputSchema`);
    assert.equal(t.outputSchema?.type, 'object', `${t.name} outputSchema`);
    assert.ok(typeof t.description === 'string' && t.description.length > 10, `${t.name} description`);
  }
  assert.deepEqual(s.inputSchema.required, ['query']);
  assert.ok(s.outputSchema.properties.results, 'search_memory outputSchema has results');
  assert.ok(w.outputSchema.properties.ids, 'save_memory outputSchema has ids');
  assert.ok(k.outputSchema.properties.methods, 'search_sdk outputSchema has methods');
}

function savedId(result) {
  assert.notEqual(result.isError, true, `save failed: ${JSON.stringify(result)}`);
  const ids = result.structuredContent?.ids;
  assert.ok(Array.isArray(ids) && ids.length === 1, `ids: ${JSON.stringify(result)}`);
  assert.match(ids[0], /^evt_/);
  return ids[0];
}

function results(result) {
  assert.notEqual(result.isError, true, `search failed: ${JSON.stringify(result)}`);
  const r = result.structuredContent?.results;
  assert.ok(Array.isArray(r), `results: ${JSON.stringify(result)}`);
  // The text block mirrors structuredContent.
  assert.deepEqual(toolText(result), result.structuredContent);
  return r;
}

test('1. sdk 1.32: initialize, listTools, save, search, terminateSession then 404 on the dead session', async () => {
  const { client, transport } = await connectSdk1(server.url, server.ownerToken);
  try {
    assert.equal(transport.protocolVersion, '2025-11-25');
    const sessionId = transport.sessionId;
    if (STATEFUL) assert.match(sessionId ?? '', /^[A-Za-z0-9]+$/, 'a session id was issued');
    else assert.equal(sessionId, undefined, 'the edge runs the legacy eras without sessions');
    assert.equal(client.getServerVersion()?.name, 'lore');
    assert.match(client.getInstructions() ?? '', /search_memory/);

    const { tools } = await client.listTools();
    assertToolsShape(tools);

    const id = savedId(await save(client, { content: 'The pelican team ships the billing service on Thursdays.', kind: 'fact' }));
    const found = results(await search(client, 'pelican billing'));
    assertFinds(found, 'pelican', [id]);
    assert.equal(found[0].kind, 'fact');
    assert.match(found[0].content, /pelican team/);
    assert.ok(found[0].score > 0);
    assert.match(found[0].author, /\S/);
    assert.match(found[0].created_at, /^\d{4}-\d{2}-\d{2}T/);

    await transport.terminateSession();
    assert.equal(transport.sessionId, undefined, 'the transport forgot the session');
    if (!STATEFUL) return;

    const dead = await rawLegacy(server.url, server.ownerToken, 'tools/list', undefined, {
      headers: { 'mcp-session-id': sessionId },
    });
    assert.equal(dead.status, 404, dead.text);
    assert.equal(dead.json?.error?.code, -32001, dead.text);
    assert.equal(dead.json?.id, 1);
  } finally {
    await client.close();
  }
});

test('2a. client 2.4 pinned to 2026-07-28: discover, list, save, search', async () => {
  const { client } = await connectV2(server.url, server.ownerToken, 'pin');
  try {
    assert.equal(client.getNegotiatedProtocolVersion(), '2026-07-28');
    assert.equal(client.getProtocolEra(), 'modern');
    const discover = client.getDiscoverResult();
    assert.ok(discover?.supportedVersions?.includes('2026-07-28'), JSON.stringify(discover));
    assert.ok(discover?.capabilities?.tools, 'capabilities.tools is advertised');
    assert.equal(client.getServerVersion()?.name, 'lore');

    const { tools } = await client.listTools();
    assertToolsShape(tools);

    const id = savedId(await save(client, { content: 'Quokka deploys need a change ticket approved by Dana.', kind: 'decision' }));
    const found = results(await search(client, { query: 'quokka ticket', kinds: ['decision'] }));
    assertFinds(found, 'quokka', [id]);
    assert.deepEqual(found.filter((r) => r.kind !== 'decision'), [], 'the kinds filter applies to every result');
  } finally {
    await client.close();
  }
});

test('2b. client 2.4 in legacy mode: initialize, list, save, search, terminate', async () => {
  const { client, transport } = await connectV2(server.url, server.ownerToken, 'legacy');
  try {
    assert.equal(client.getNegotiatedProtocolVersion(), '2025-11-25');
    assert.equal(client.getProtocolEra(), 'legacy');
    if (STATEFUL) assert.match(transport.sessionId ?? '', /^[A-Za-z0-9]+$/);
    else assert.equal(transport.sessionId, undefined);

    const { tools } = await client.listTools();
    assertToolsShape(tools);

    // Memories attach to entities that exist: make one through the REST admin surface.
    const api = (name, body) => rawPost(`${server.base}/api/default/${name}`, { token: server.ownerToken, body });
    assert.equal((await api('manage_templates', { action: 'create', name: 'cluster' })).status, 200);
    const cluster = (await api('Cluster.create', { name: 'marmoset' })).json.id;
    assert.match(cluster, /^ent_/);
    const id = savedId(await save(client, { content: 'The marmoset cluster is retired in March.', entity_ids: [cluster] }));
    const found = results(await search(client, { query: 'marmoset', entity_ids: [cluster] }));
    assertFinds(found, 'marmoset', [id]);
    assert.deepEqual(found.filter((r) => !r.entity_ids.includes(cluster)), [], 'the entity_ids filter applies to every result');
    assert.deepEqual(found[0].entity_ids, [cluster]);
    assert.equal(found[0].kind, 'note', 'the default kind');
    await transport.terminateSession();
  } finally {
    await client.close();
  }
});

test('2c. client 2.4 in auto mode negotiates 2026-07-28', async () => {
  const { client } = await connectV2(server.url, server.ownerToken, 'auto');
  try {
    assert.equal(client.getNegotiatedProtocolVersion(), '2026-07-28');
    assert.equal(client.getProtocolEra(), 'modern');
    const found = results(await search(client, 'marmoset'));
    assert.equal(mentioning(found, 'marmoset').length, 1, JSON.stringify(found));
    assert.match(found[0].content, /marmoset/, 'the marmoset memory ranks first');
  } finally {
    await client.close();
  }
});

test('3. python mcp 2.3 in auto mode: negotiates 2026-07-28, save + search', async () => {
  const out = await runPython({
    url: server.url,
    token: server.ownerToken,
    mode: 'auto',
    steps: [
      { op: 'list_tools' },
      { op: 'save', args: { content: 'Wombat invoices are archived after seven years.', kind: 'preference' } },
      { op: 'search', args: { query: 'wombat invoice archive' } },
    ],
  });
  assert.equal(out.protocol_version, '2026-07-28');
  assert.equal(out.server_info?.name, 'lore');
  const [list, saved, searched] = out.steps;
  assert.deepEqual(list.tools.map((t) => t.name).sort(), WORKSPACE_TOOLS);
  assert.equal(saved.isError, false, JSON.stringify(saved));
  const id = saved.structuredContent.ids[0];
  assert.match(id, /^evt_/);
  assert.equal(searched.isError, false, JSON.stringify(searched));
  assertFinds(searched.structuredContent.results, 'wombat', [id]);
  assert.equal(searched.structuredContent.results[0].kind, 'preference');
});

test('3b. python mcp 2.3 in legacy mode also works', async () => {
  const out = await runPython({
    url: server.url,
    token: server.ownerToken,
    mode: 'legacy',
    steps: [{ op: 'search', args: { query: 'wombat' } }],
  });
  assert.equal(out.protocol_version, '2025-11-25');
  const found = out.steps[0].structuredContent.results;
  assert.equal(mentioning(found, 'wombat').length, 1, JSON.stringify(found));
  assert.match(found[0].content, /wombat/i, 'the wombat memory ranks first');
});

test('4. cross-client: saved by one client, found by the others; supersedes_event_id hides the old one', async () => {
  // Save with sdk 1.32 (legacy era).
  const sdk1 = await connectSdk1(server.url, server.ownerToken);
  let oldId;
  try {
    oldId = savedId(await save(sdk1.client, { content: 'The capybara office wifi password rotates monthly.', kind: 'fact' }));
  } finally {
    await sdk1.transport.terminateSession();
    await sdk1.client.close();
  }

  // Python (2026 era) finds it, and supersedes it.
  const py = await runPython({
    url: server.url,
    token: server.ownerToken,
    steps: [
      { op: 'search', args: { query: 'capybara wifi' } },
      { op: 'save', args: { content: 'The capybara office wifi password now rotates weekly.', kind: 'fact', supersedes_event_id: oldId } },
    ],
  });
  assert.equal(py.protocol_version, '2026-07-28');
  assertFinds(py.steps[0].structuredContent.results, 'capybara', [oldId]);
  assert.equal(py.steps[1].isError, false, JSON.stringify(py.steps[1]));
  const newId = py.steps[1].structuredContent.ids[0];
  assert.notEqual(newId, oldId);

  // client 2.4 pinned (2026 era) sees only the new one, unless it asks for superseded ones.
  const v2 = await connectV2(server.url, server.ownerToken, 'pin');
  try {
    const current = results(await search(v2.client, 'capybara wifi password'));
    assertAbsent(current, oldId, 'the superseded memory is hidden:');
    assertFinds(current, 'capybara', [newId]);
    assert.equal(current[0].supersedes_event_id, oldId);
    assert.equal(current[0].superseded_by, undefined);

    const all = results(await search(v2.client, { query: 'capybara wifi password', include_superseded: true }));
    assertFinds(all, 'capybara', [oldId, newId]);
    const old = all.find((r) => r.id === oldId);
    assert.equal(old.superseded_by, newId);
    assert.match(old.content, /monthly/);
  } finally {
    await v2.client.close();
  }

  // client 2.4 legacy agrees.
  const v2l = await connectV2(server.url, server.ownerToken, 'legacy');
  try {
    const legacy = results(await search(v2l.client, 'capybara'));
    assertAbsent(legacy, oldId, 'the superseded memory is hidden:');
    assertFinds(legacy, 'capybara', [newId]);
  } finally {
    await v2l.transport.terminateSession();
    await v2l.client.close();
  }
});

test('4b. streamed responses: progress notifications (SSE) reach sdk 1.32 and client 2.4; session log level reaches sdk 1.32', async () => {
  const sdk1 = await connectSdk1(server.url, server.ownerToken);
  let lynxId;
  try {
    const progress = [];
    const saved = await sdk1.client.callTool(
      { name: 'save_memory', arguments: { content: 'The lynx pipeline streams progress.' } },
      undefined,
      { onprogress: (p) => progress.push(p) },
    );
    lynxId = savedId(saved);
    assert.deepEqual(progress.map((p) => p.progress), [0, 1]);
    assert.equal(progress[1].total, 1);

    // The log level lives in the session, so only a stateful server can keep it between calls.
    if (STATEFUL) {
      const logs = [];
      sdk1.client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => { logs.push(n.params); });
      await sdk1.client.setLoggingLevel('warning');
      const bad = await save(sdk1.client, { content: 'x', kind: 'rumour' });
      assert.equal(bad.isError, true);
      assert.equal(logs.length, 1, JSON.stringify(logs));
      assert.equal(logs[0].level, 'warning');
      assert.equal(logs[0].data.error.field, 'kind');
    }
    await sdk1.transport.terminateSession();
  } finally {
    await sdk1.client.close();
  }

  const v2 = await connectV2(server.url, server.ownerToken, 'pin');
  try {
    const progress = [];
    const found = await v2.client.callTool({ name: 'search_memory', arguments: { query: 'lynx' } }, { onprogress: (p) => progress.push(p) });
    assertFinds(results(found), 'lynx', [lynxId]);
    assert.deepEqual(progress.map((p) => p.progress), [0, 1]);
  } finally {
    await v2.client.close();
  }
});

test('4c. batch save and idempotent retries agree across clients', async () => {
  const v2 = await connectV2(server.url, server.ownerToken, 'pin');
  let ids;
  try {
    const saved = await save(v2.client, { memories: [
      { content: 'The tapir service owns invoices.', kind: 'fact', idempotency_key: 'tapir-1' },
      { content: 'The tapir service prefers Postgres.', kind: 'preference' },
    ] });
    assert.equal(saved.isError, false, JSON.stringify(saved));
    ids = saved.structuredContent.ids;
    assert.equal(ids.length, 2);
  } finally {
    await v2.client.close();
  }
  const py = await runPython({
    url: server.url,
    token: server.ownerToken,
    steps: [
      { op: 'save', args: { content: 'The tapir service owns invoices.', kind: 'fact', idempotency_key: 'tapir-1' } },
      { op: 'save', args: { content: 'Something else entirely.', idempotency_key: 'tapir-1' } },
      { op: 'search', args: { query: 'tapir', kinds: ['fact', 'preference'] } },
    ],
  });
  assert.deepEqual(py.steps[0].structuredContent.ids, [ids[0]], 'the retry returns the first id');
  assert.equal(py.steps[1].isError, true, 'a reused key with different content is refused');
  assert.match(py.steps[1].content[0].text, /idempotency_key/);
  const found = py.steps[2].structuredContent.results;
  assertFinds(found, 'tapir', ids);
  assert.deepEqual(found.filter((r) => !['fact', 'preference'].includes(r.kind)), [], 'the kinds filter applies to every result');
});

test('4d. concurrent saves from several clients at once all land', async () => {
  const clients = await Promise.all([
    connectSdk1(server.url, server.ownerToken),
    connectV2(server.url, server.ownerToken, 'pin'),
    connectV2(server.url, server.ownerToken, 'legacy'),
  ]);
  try {
    const saves = [];
    for (let i = 0; i < 30; i++) {
      const { client } = clients[i % clients.length];
      saves.push(save(client, { content: `Parallel dingo report number ${i}.` }));
    }
    const done = await Promise.all(saves);
    const ids = done.map(savedId);
    assert.equal(new Set(ids).size, 30);
    // The same idempotency key from all clients at once: exactly one memory.
    const same = await Promise.all(clients.flatMap(({ client }) => [1, 2, 3].map(() =>
      save(client, { content: 'Single dingo census.', idempotency_key: 'dingo-census' }))));
    assert.equal(new Set(same.map(savedId)).size, 1);
    const found = results(await search(clients[1].client, { query: 'dingo', limit: 100 }));
    const dingos = mentioning(found, 'dingo').map((r) => r.id);
    assert.equal(dingos.length, 31, JSON.stringify(found.map((r) => r.content)));
    for (const id of ids) assert.ok(dingos.includes(id), `${id} is found`);
  } finally {
    for (const { client, transport } of clients) {
      if (transport.sessionId) await transport.terminateSession();
      await client.close();
    }
  }
});
