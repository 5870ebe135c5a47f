// Issue 3 end to end: org records, the SDK method registry, the REST admin surface
// (`POST /api/{org}/{tool-or-method}`, `GET /api/{org}/sdk.d.ts`), webhook deliveries
// (`POST /hooks/{org}/{feed}`), `search_sdk`, the generated TypeScript declarations (type-checked
// with the real `tsc`), `lore memory run` for admin tools, the audit log and usage metrics.
//
// One server (org `acme`, plus org `other` for isolation) serves most tests; the records they
// need come from memoized fixtures, so any test also runs alone (--test-name-pattern).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { createHmac, randomBytes } from 'node:crypto';
import path from 'node:path';

import {
  startServer, initDb, createOrg, tempDir, cleanupDir, lore, runPython, rawPost,
  apiPost, apiDeclarations, WORKSPACE_TOOLS, TARGET, onlyNative, assertFinds, recordSecret,
} from './lib/server.mjs';
import { connectSdk1, connectV2, search } from './lib/clients.mjs';
import { typecheck as tscCheck } from './lib/tsc.mjs';

const ORG = 'acme';
const ADMIN_TOOLS = [
  'manage_agents', 'manage_connections', 'manage_feeds', 'manage_operations', 'manage_behaviors',
  'manage_templates', 'manage_members', 'manage_tokens', 'manage_grants', 'query_metric', 'list_metrics',
  'list_organizations',
];
/** The connection's credential: it must never come back from lore. */
const SECRET = `sk_live_${randomBytes(12).toString('hex')}`;
recordSecret(SECRET);
const TICKET_SCHEMA = {
  type: 'object',
  properties: {
    title: { type: 'string' },
    priority: { enum: ['low', 'high'] },
    points: { type: 'integer' },
  },
  required: ['title'],
};

let dir;
let server;
/** The `lore init` result for acme: {org, principal, token}. */
let acme;
let stub;
/** Every response body lore sent this file (REST, MCP, hooks, CLI), for the secret check. */
const transcript = [];

before(async () => {
  dir = await tempDir();
  if (TARGET !== 'native') {
    // The Worker bootstraps through its operator routes: acme is a second org of the owner.
    server = await startServer();
    acme = await createOrg(server, ORG);
  } else {
    const db = path.join(dir, 'lore.db');
    acme = await initDb(db, ORG);
    server = await startServer({ db });
  }
  stub = await startStub();
});
after(async () => {
  if (server) await server.stop();
  if (stub) await stub.close();
  await cleanupDir(dir);
});

// ---------------------------------------------------------------------------------------------
// Helpers

/** Memoizes an async fixture: the first call runs it, later calls share its promise. */
function once(fn) {
  let p;
  return () => (p ??= fn());
}

/** POST /api/{org}/{name} on the shared server; the body is kept in the transcript. */
async function api(token, name, body = {}, { org = ORG, headers } = {}) {
  const res = await apiPost(server.base, org, name, token, body, { headers });
  transcript.push(res.text);
  return res;
}

/** Asserts a 200 JSON answer and returns it. */
function ok(res) {
  assert.equal(res.status, 200, res.text);
  assert.match(res.headers.get('content-type') ?? '', /application\/json/);
  return res.json;
}

/** Asserts an error answer `{error: {code, message}}` with this status and code; returns it. */
function refused(res, status, code) {
  assert.equal(res.status, status, res.text);
  assert.equal(res.json?.error?.code, code, res.text);
  assert.equal(typeof res.json.error.message, 'string');
  return res.json.error;
}

async function declarations(token, org = ORG) {
  const res = await apiDeclarations(server.base, org, token);
  transcript.push(res.text);
  return res;
}

/** Runs `fn(client)` with a `@modelcontextprotocol/client` 2.4 client pinned to 2026-07-28. */
async function withClient(url, token, fn) {
  const { client } = await connectV2(url, token, 'pin');
  try {
    return await fn(client);
  } finally {
    await client.close();
  }
}

/** Calls `search_sdk` through a real MCP client; returns its methods. */
async function searchSdk(client, args) {
  const result = await client.callTool({ name: 'search_sdk', arguments: args });
  transcript.push(JSON.stringify(result));
  assert.notEqual(result.isError, true, JSON.stringify(result));
  assert.ok(Array.isArray(result.structuredContent?.methods), JSON.stringify(result));
  return result.structuredContent.methods;
}

/** A loopback HTTP service standing in for an external API: it records every request and echoes it. */
function startStub() {
  const requests = [];
  const srv = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (d) => { body += d; });
    req.on('end', () => {
      requests.push({ method: req.method, url: req.url, headers: req.headers, body });
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ method: req.method, url: req.url, headers: req.headers, body }));
    });
  });
  return new Promise((resolve) => {
    srv.listen(0, '127.0.0.1', () => resolve({
      url: `http://127.0.0.1:${srv.address().port}`,
      requests,
      close: () => new Promise((r) => srv.close(r)),
    }));
  });
}

/** `X-Lore-Signature` value: hex HMAC-SHA256 of the body with the feed's secret. */
function sign(body, secret) {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

/** POSTs a webhook delivery (`body` is sent byte for byte). */
async function deliver(url, body, headers = {}) {
  const res = await rawPost(url, { body, headers: { accept: undefined, 'content-type': 'application/json', ...headers } });
  transcript.push(res.text);
  return res;
}

/** One request on a new TCP connection (the server hands connections round-robin to workers). */
function postOnFreshConnection(url, token, body) {
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(url, {
      method: 'POST',
      agent: false,
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(payload),
        connection: 'close',
      },
    }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode, json: JSON.parse(text), text }));
    });
    req.on('error', reject);
    req.end(payload);
  });
}

/** Runs the real `tsc` over the declarations and one script. */
function typecheck(dts, script) {
  return tscCheck({ 'sdk.d.ts': dts, 'script.ts': script });
}

/** `lore memory run TOOL ARGS ...flags`; the output is kept in the transcript. */
async function memoryRun(tool, args, flags) {
  const r = await lore(['memory', 'run', tool, JSON.stringify(args), ...flags]);
  transcript.push(r.stdout, r.stderr);
  return r;
}

function paths(methods) {
  return methods.map((m) => m.path);
}

// ---------------------------------------------------------------------------------------------
// Fixtures (memoized; each asserts what it creates)

const ensureTypes = once(async () => {
  const ticket = ok(await api(acme.token, 'manage_templates', {
    action: 'create', name: 'ticket', description: 'A support ticket.', schema: TICKET_SCHEMA,
  }));
  const customer = ok(await api(acme.token, 'manage_templates', {
    action: 'create', name: 'customer', description: 'A paying customer.',
  }));
  return { ticket, customer };
});

const ensureRecords = once(async () => {
  await ensureTypes();
  const owner = acme.token;
  const t1 = ok(await api(owner, 'entities.create', {
    type: 'ticket', name: 'Printer on fire', properties: { title: 'Printer on fire', priority: 'high', points: 5 },
  }));
  const t2 = ok(await api(owner, 'Ticket.create', {
    name: 'Toner low', properties: { title: 'Toner low', priority: 'low' },
  }));
  const c1 = ok(await api(owner, 'entities.create', { type: 'customer', name: 'Initech', properties: { tier: 'gold' } }));
  const link = ok(await api(owner, 'entities.link', { id: t1.id, to: c1.id, type: 'reported_by' }));
  const blocks = ok(await api(owner, 'relationships.create', { type: 'blocks', from: t1.id, to: t2.id, properties: { since: 'today' } }));
  return { t1, t2, c1, link, blocks };
});

const ensureConnection = once(async () => ok(await api(acme.token, 'manage_connections', {
  action: 'create', name: 'helpdesk', description: 'The helpdesk API.', base_url: `${stub.url}/v1`, secret: SECRET,
})));

/** An agent of acme with this role and a token for it (via manage_agents + manage_tokens). */
async function agentWithToken(name, role, scopes) {
  const agent = ok(await api(acme.token, 'manage_agents', { action: 'create', name, role }));
  const issued = ok(await api(acme.token, 'manage_tokens', {
    action: 'create', principal_id: agent.principal_id, ...(scopes ? { scopes } : {}),
  }));
  return { id: agent.principal_id, role: agent.role, token: issued.token };
}

const ensurePeople = once(async () => {
  const member = await agentWithToken('support-bot', 'member');
  const viewer = await agentWithToken('dashboard', 'viewer');
  // The member's second token, with only mcp:read.
  const readOnly = ok(await api(acme.token, 'manage_tokens', {
    action: 'create', principal_id: member.id, scopes: 'mcp:read', label: 'read-only',
  }));
  return { member, viewer, readOnly: readOnly.token };
});

const ensureOther = once(async () => createOrg(server, 'other'));

const OPERATION = {
  action: 'create',
  name: 'escalate',
  description: 'Escalate a ticket in the helpdesk.',
  entity_type: 'ticket',
  kind: 'http',
  connection: 'helpdesk',
  method: 'POST',
  path: '/tickets/{id}/escalate',
  access: 'write',
  args_schema: { type: 'object', properties: { id: { type: 'string' }, reason: { type: 'string' } }, required: ['id'] },
};

const ensureOperation = once(async () => {
  await ensureTypes();
  await ensureConnection();
  return ok(await api(acme.token, 'manage_operations', OPERATION));
});

// ---------------------------------------------------------------------------------------------
// 1. A realistic session

test('session: the owner defines types, entities, relationships, a connection and a metric over REST', async () => {
  const { ticket, customer } = await ensureTypes();
  assert.equal(ticket.name, 'ticket');
  assert.equal(ticket.noun, 'Ticket');
  assert.deepEqual(ticket.schema, TICKET_SCHEMA);
  assert.equal(ticket.version, 1);
  assert.equal(customer.noun, 'Customer');
  const listed = ok(await api(acme.token, 'manage_templates', { action: 'list' }));
  assert.deepEqual(listed.map((t) => t.name).sort(), ['customer', 'ticket']);

  const { t1, t2, c1, link, blocks } = await ensureRecords();
  for (const e of [t1, t2, c1]) {
    assert.match(e.id, /^ent_/);
    assert.equal(e.version, 1);
    assert.equal(e.author, acme.principal);
  }
  assert.equal(t1.type, 'ticket');
  assert.equal(t2.type, 'ticket', 'Ticket.create makes a ticket');
  assert.deepEqual(t2.properties, { title: 'Toner low', priority: 'low' });
  assert.equal(c1.type, 'customer');
  assert.match(link.id, /^rel_/);
  assert.deepEqual([link.type, link.from, link.to], ['reported_by', t1.id, c1.id]);
  assert.deepEqual([blocks.type, blocks.from, blocks.to], ['blocks', t1.id, t2.id]);
  assert.deepEqual(blocks.properties, { since: 'today' });

  // A connection with a write-only secret: never returned, injected on outbound calls.
  const conn = await ensureConnection();
  assert.equal(conn.name, 'helpdesk');
  assert.equal(conn.has_secret, true);
  assert.equal(conn.auth, 'bearer');
  assert.equal('secret' in conn, false);
  assert.deepEqual(ok(await api(acme.token, 'connections.get', { name: 'helpdesk' })), conn);
  assert.deepEqual(ok(await api(acme.token, 'connections.list', {})), [conn]);
  const before = stub.requests.length;
  const called = ok(await api(acme.token, 'manage_connections', { action: 'call', name: 'helpdesk', path: '/ping?x=1' }));
  assert.equal(stub.requests.length, before + 1, 'the stub was called once');
  const received = stub.requests.at(-1);
  assert.equal(received.url, '/v1/ping?x=1');
  assert.equal(received.headers.authorization, `Bearer ${SECRET}`, 'lore sent the secret as a bearer token');
  assert.equal(called.status, 200);
  assert.equal(called.body.url, '/v1/ping?x=1');
  assert.equal(called.body.headers.authorization, '[redacted]', 'the echoed header (and the secret in it) is redacted');

  // An org metric.
  const metric = ok(await api(acme.token, 'metrics.define', {
    name: 'open_tickets', description: 'Tickets not closed.', sql: "SELECT count(*) AS value FROM entities WHERE type = 'ticket'",
  }));
  assert.equal(metric.name, 'open_tickets');
  assert.equal(metric.value_column, 'value');
  const metrics = ok(await api(acme.token, 'list_metrics', {}));
  assert.deepEqual(metrics.find((m) => m.name === 'open_tickets'), { name: 'open_tickets', kind: 'sql', description: 'Tickets not closed.' });

  assert.equal(transcript.some((t) => t.includes(SECRET)), false, 'no response so far shows the secret');
});

test('session: a member reads the records (entities.list, Ticket.get, relationships.list) and writes data, not configuration', async () => {
  const { t1, t2, c1, link, blocks } = await ensureRecords();
  const { member } = await ensurePeople();
  assert.equal(member.role, 'member');
  assert.match(member.id, /^agt_/);

  const tickets = ok(await api(member.token, 'entities.list', { type: 'ticket' }));
  assert.ok(tickets.items.some((e) => e.id === t1.id) && tickets.items.some((e) => e.id === t2.id), JSON.stringify(tickets));
  assert.ok(tickets.items.every((e) => e.type === 'ticket'));
  const high = ok(await api(member.token, 'entities.list', { type: 'ticket', where: { priority: 'high' } }));
  assert.deepEqual(high.items.map((e) => e.id), [t1.id]);
  assert.deepEqual(ok(await api(member.token, 'Ticket.get', { id: t1.id })), t1);
  refused(await api(member.token, 'Ticket.get', { id: c1.id }), 404, 'not_found'); // a customer is no Ticket
  const edges = ok(await api(member.token, 'relationships.list', { entity_id: t1.id }));
  assert.deepEqual(edges.items.map((r) => r.id).sort(), [link.id, blocks.id].sort());
  const incoming = ok(await api(member.token, 'relationships.list', { entity_id: t2.id, direction: 'in' }));
  assert.deepEqual(incoming.items.map((r) => r.id), [blocks.id]);
  assert.deepEqual(ok(await api(member.token, 'templates.list', {})).map((t) => t.name).sort(), ['customer', 'ticket']);

  // Members write data...
  const mine = ok(await api(member.token, 'Ticket.create', { name: 'Paper jam', properties: { title: 'Paper jam' } }));
  assert.equal(mine.author, member.id);
  // ...but not the org's configuration, nor read its tokens.
  refused(await api(member.token, 'manage_templates', { action: 'create', name: 'invoice' }), 403, 'needs_admin');
  refused(await api(member.token, 'manage_tokens', { action: 'list' }), 403, 'needs_admin');
  refused(await api(member.token, 'metrics.define', { name: 'x', sql: 'SELECT 1 AS value' }), 403, 'needs_admin');
});

test('session: a viewer reads but is refused every write with 403 needs_write', async () => {
  const { t1, c1 } = await ensureRecords();
  const { viewer } = await ensurePeople();
  const count = async () => ok(await api(acme.token, 'entities.list', { limit: 500 })).items.length;
  const before = await count();

  assert.deepEqual(ok(await api(viewer.token, 'Ticket.get', { id: t1.id })).id, t1.id);
  for (const [name, body] of [
    ['entities.create', { type: 'customer', name: 'Viewer Co' }],
    ['Ticket.create', { name: 'x', properties: { title: 'x' } }],
    ['entities.update', { id: t1.id, properties: { points: 1 } }],
    ['Ticket.delete', { id: t1.id }],
    ['entities.link', { id: t1.id, to: c1.id, type: 'likes' }],
    ['memory.save', { content: 'viewers cannot save' }],
  ]) {
    const e = refused(await api(viewer.token, name, body), 403, 'needs_write');
    assert.match(e.message, /viewer/, name);
  }
  refused(await api(viewer.token, 'manage_templates', { action: 'create', name: 'invoice' }), 403, 'needs_admin');
  assert.equal(await count(), before, 'nothing was written');
  assert.equal(ok(await api(acme.token, 'Ticket.get', { id: t1.id })).version, t1.version);
});

test('session: a token with only mcp:read is refused writes with 403 insufficient_scope and a WWW-Authenticate challenge', async () => {
  const { t1 } = await ensureRecords();
  const { readOnly } = await ensurePeople();
  for (const [name, body] of [
    ['entities.create', { type: 'customer', name: 'Scoped Co' }],
    ['Ticket.update', { id: t1.id, properties: { points: 2 } }],
  ]) {
    const res = await api(readOnly, name, body);
    refused(res, 403, 'insufficient_scope');
    assert.match(res.headers.get('www-authenticate') ?? '', /insufficient_scope/, name);
  }
  // The same token still reads, as the member it belongs to.
  assert.equal(ok(await api(readOnly, 'Ticket.get', { id: t1.id })).id, t1.id);
});

test('session: another org sees none of it through any route', async () => {
  const { t1 } = await ensureRecords();
  await ensureConnection();
  const other = await ensureOther();
  const tok = other.token;

  // Its token on acme's routes: 403, whatever the route.
  for (const [name, body] of [
    ['entities.list', {}], ['Ticket.get', { id: t1.id }], ['manage_templates', { action: 'list' }],
    ['relationships.list', {}], ['list_metrics', {}], ['connections.list', {}],
  ]) {
    refused(await api(tok, name, body), 403, 'forbidden');
  }
  assert.equal((await declarations(tok, ORG)).status, 403);
  await assert.rejects(connectV2(`${server.url}/${ORG}`, tok, 'pin'), 'MCP on /mcp/acme is refused');

  // Its own org is empty.
  assert.deepEqual(ok(await api(tok, 'entities.list', {}, { org: 'other' })).items, []);
  assert.deepEqual(ok(await api(tok, 'relationships.list', {}, { org: 'other' })).items, []);
  assert.deepEqual(ok(await api(tok, 'manage_templates', { action: 'list' }, { org: 'other' })), []);
  assert.deepEqual(ok(await api(tok, 'connections.list', {}, { org: 'other' })), []);
  assert.equal(ok(await api(tok, 'list_metrics', {}, { org: 'other' })).some((m) => m.name === 'open_tickets'), false);
  refused(await api(tok, 'entities.get', { id: t1.id }, { org: 'other' }), 404, 'not_found');
  refused(await api(tok, 'Ticket.list', {}, { org: 'other' }), 404, 'not_found');
  refused(await api(tok, 'connections.call', { name: 'helpdesk' }, { org: 'other' }), 404, 'not_found');
  const theirActions = ok(await api(tok, 'actions.list', { limit: 500 }, { org: 'other' })).items;
  assert.equal(theirActions.some((a) => a.steps.some((st) => /^(entities|Ticket|relationships|metrics)\./.test(st.method))), false,
    JSON.stringify(theirActions.map((a) => a.steps)));
  const dts = await declarations(tok, 'other');
  assert.equal(dts.status, 200, dts.text);
  assert.doesNotMatch(dts.text, /interface (Ticket|Customer)\b|\n {2}(Ticket|Customer): \{|"ticket"|"customer"/);
  assert.match(dts.text, /\n {2}entities: \{/, 'the declarations themselves are there');

  // Over MCP, search_sdk shows no Ticket verbs.
  await withClient(`${server.url}/other`, tok, async (client) => {
    assert.deepEqual(await searchSdk(client, { namespace: 'Ticket' }), []);
    const found = await searchSdk(client, { query: 'ticket', limit: 100 });
    assert.equal(found.some((m) => /^(Ticket|Customer)\./.test(m.path)), false, JSON.stringify(paths(found)));
  });
});

test('session: list_organizations through a token bound to another org does not reveal acme', async () => {
  await ensureTypes();
  const other = await ensureOther();
  const orgs = ok(await api(other.token, 'list_organizations', {}, { org: 'other' }));
  assert.deepEqual(orgs.map((o) => o.id), ['other']);
  assert.deepEqual(ok(await api(other.token, 'organizations.list', {}, { org: 'other' })).map((o) => o.id), ['other']);
});

test('session: an HTTP operation bound to ticket is a custom verb that calls the connection with its secret', async () => {
  const { t1 } = await ensureRecords();
  const { member, viewer } = await ensurePeople();
  const op = await ensureOperation();
  assert.equal(op.name, 'escalate');
  assert.equal(op.entity_type, 'ticket');
  assert.equal(op.kind, 'http');
  assert.equal(op.access, 'write');

  const before = stub.requests.length;
  const r = ok(await api(member.token, 'Ticket.escalate', { id: t1.id, reason: 'customer is angry' }));
  assert.equal(stub.requests.length, before + 1);
  const received = stub.requests.at(-1);
  assert.equal(received.method, 'POST');
  assert.equal(received.url, `/v1/tickets/${t1.id}/escalate`);
  assert.equal(received.headers.authorization, `Bearer ${SECRET}`);
  assert.deepEqual(JSON.parse(received.body), { reason: 'customer is angry' });
  assert.equal(r.status, 200);
  assert.equal(r.body.headers.authorization, '[redacted]');

  assert.equal(ok(await api(member.token, 'operations.run', { name: 'escalate', args: { id: t1.id } })).status, 200);
  refused(await api(viewer.token, 'Ticket.escalate', { id: t1.id }), 403, 'needs_write');
  refused(await api(member.token, 'Ticket.escalate', { reason: 'no id' }), 400, 'invalid_argument');
});

// ---------------------------------------------------------------------------------------------
// 2. Validation and optimistic concurrency

test('properties that break the type\'s schema are refused with 400 invalid_argument naming the JSON pointer', async () => {
  const { t1 } = await ensureRecords();
  const cases = [
    ['entities.create', { type: 'ticket', name: 'x', properties: { title: 'x', priority: 'urgent' } }, 'properties/priority'],
    ['Ticket.create', { name: 'x', properties: { title: 'x', points: 'many' } }, 'properties/points'],
    ['Ticket.create', { name: 'x', properties: { title: 'x', points: 1.5 } }, 'properties/points'],
    ['Ticket.create', { name: 'x', properties: { priority: 'low' } }, 'properties/title'],
    ['entities.update', { id: t1.id, properties: { priority: 'urgent' } }, 'properties/priority'],
    ['entities.create_many', { type: 'ticket', items: [{ name: 'a', properties: { title: 'a' } }, { name: 'b', properties: { title: 'b', priority: 'meh' } }] }, 'items/1/properties/priority'],
  ];
  const count = async () => ok(await api(acme.token, 'entities.list', { type: 'ticket', limit: 500 })).items.length;
  const before = await count();
  for (const [name, body, field] of cases) {
    const e = refused(await api(acme.token, name, body), 400, 'invalid_argument');
    assert.equal(e.field, field, `${name}: ${e.message}`);
  }
  assert.equal(await count(), before, 'nothing was written (create_many is all or none)');
  assert.deepEqual(ok(await api(acme.token, 'entities.get', { id: t1.id })).properties, t1.properties);
  // An unknown type is an invalid argument too.
  assert.equal(refused(await api(acme.token, 'entities.create', { type: 'nope', name: 'x' }), 400, 'invalid_argument').field, 'type');
});

test('entities.update with a stale version is refused with 409 conflict; the current version succeeds', async () => {
  await ensureTypes();
  const e = ok(await api(acme.token, 'Ticket.create', { name: 'Versioned', properties: { title: 'Versioned', points: 1 } }));
  const v2 = ok(await api(acme.token, 'entities.update', { id: e.id, version: 1, properties: { points: 2 } }));
  assert.equal(v2.version, 2);
  assert.deepEqual(v2.properties, { title: 'Versioned', points: 2 });
  refused(await api(acme.token, 'entities.update', { id: e.id, version: 1, properties: { points: 3 } }), 409, 'conflict');
  refused(await api(acme.token, 'Ticket.update', { id: e.id, version: 1, name: 'stale' }), 409, 'conflict');
  refused(await api(acme.token, 'Ticket.delete', { id: e.id, version: 1 }), 409, 'conflict');
  const now = ok(await api(acme.token, 'entities.get', { id: e.id }));
  assert.equal(now.version, 2);
  assert.equal(now.properties.points, 2);
  assert.equal(now.name, 'Versioned');
});

// ---------------------------------------------------------------------------------------------
// 3. tools/list and the REST surface

test('tools/list over the real clients shows only the workspace tools; admin tools are not callable over MCP', async () => {
  const url = `${server.url}/${ORG}`;
  const s1 = await connectSdk1(url, acme.token);
  try {
    const { tools } = await s1.client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), WORKSPACE_TOOLS);
    await assert.rejects(s1.client.callTool({ name: 'manage_templates', arguments: { action: 'list' } }), /manage_templates/);
    await s1.transport.terminateSession();
  } finally {
    await s1.client.close();
  }
  await withClient(url, acme.token, async (client) => {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), WORKSPACE_TOOLS);
    await assert.rejects(client.callTool({ name: 'manage_templates', arguments: { action: 'list' } }), /manage_templates/);
    await assert.rejects(client.callTool({ name: 'entities.list', arguments: {} }));
  });
  const py = await runPython({
    url,
    token: acme.token,
    steps: [{ op: 'list_tools' }, { op: 'call', name: 'manage_templates', args: { action: 'list' } }],
  });
  transcript.push(JSON.stringify(py));
  assert.deepEqual(py.steps[0].tools.map((t) => t.name).sort(), WORKSPACE_TOOLS);
  const callResult = py.steps[1];
  assert.ok(callResult.exception || callResult.isError === true, `python manage_templates call failed: ${JSON.stringify(callResult)}`);
  for (const name of ADMIN_TOOLS) {
    assert.equal(WORKSPACE_TOOLS.includes(name), false, name);
  }
});

test('every admin tool answers on POST /api/{org}/{tool} for the owner; admin-only ones refuse a member', async () => {
  const { member } = await ensurePeople();
  const args = {
    query_metric: { name: 'tool_calls' }, list_metrics: {}, list_organizations: {},
  };
  for (const name of ADMIN_TOOLS) {
    const body = args[name] ?? { action: 'list' };
    const out = ok(await api(acme.token, name, body));
    assert.ok(out !== null && typeof out === 'object', `${name}: ${JSON.stringify(out)}`);
  }
  const orgs = ok(await api(acme.token, 'list_organizations', {}));
  assert.deepEqual(orgs.find((o) => o.id === ORG)?.role, 'owner', JSON.stringify(orgs));
  const members = ok(await api(acme.token, 'manage_members', { action: 'list' }));
  assert.ok(members.some((m) => m.principal_id === member.id && m.role === 'member'), JSON.stringify(members));
  const tokens = ok(await api(acme.token, 'manage_tokens', { action: 'list' }));
  assert.equal(JSON.stringify(tokens).includes(member.token), false, 'token lists never show secrets');
  // Reads through manage_* work for members; admin-only namespaces do not.
  ok(await api(member.token, 'manage_templates', { action: 'list' }));
  refused(await api(member.token, 'manage_tokens', { action: 'list' }), 403, 'needs_admin');
  refused(await api(member.token, 'manage_agents', { action: 'create', name: 'sneaky' }), 403, 'needs_admin');
});

test('REST errors: stable codes and HTTP statuses', async () => {
  await ensureTypes();
  const base = `${server.base}/api/${ORG}`;
  const noToken = await rawPost(`${base}/entities.list`, { body: {} });
  assert.equal(noToken.status, 401, noToken.text);
  assert.equal(noToken.json.error.code, 'unauthorized');
  assert.match(noToken.headers.get('www-authenticate') ?? '', /Bearer/);
  const badToken = await rawPost(`${base}/entities.list`, { token: 'lore_nope', body: {} });
  assert.equal(badToken.status, 401);
  assert.match(badToken.headers.get('www-authenticate') ?? '', /invalid_token/);

  refused(await api(acme.token, 'no_such_tool', {}), 404, 'not_found');
  refused(await api(acme.token, 'entities.nope', {}), 404, 'not_found');
  refused(await api(acme.token, 'Invoice.list', {}), 404, 'not_found');
  assert.equal(refused(await api(acme.token, 'manage_templates', { action: 'explode' }), 400, 'invalid_argument').field, 'action');
  assert.equal(refused(await api(acme.token, 'manage_templates', {}), 400, 'invalid_argument').field, 'action');
  refused(await api(acme.token, 'entities.list', { limit: 0 }), 400, 'invalid_argument');
  refused(await api(acme.token, 'entities.list', { bogus: 1 }), 400, 'invalid_argument');
  refused(await api(acme.token, 'entities.get', { id: 'ent_01m8nbc1ch1660q440a0535s8v' }), 404, 'not_found');
  refused(await api(acme.token, 'manage_templates', { action: 'create', name: 'ticket' }), 409, 'conflict');
  const notJson = await rawPost(`${base}/entities.list`, { token: acme.token, body: '{"limit":', headers: { accept: 'application/json' } });
  assert.equal(notJson.status, 400, notJson.text);
  assert.equal(notJson.json.error.code, 'invalid_argument');
  const textBody = await rawPost(`${base}/entities.list`, { token: acme.token, body: '{}', headers: { 'content-type': 'text/plain' } });
  assert.equal(textBody.status, 415, textBody.text);
  const get = await fetch(`${base}/entities.list`, { headers: { authorization: `Bearer ${acme.token}` } });
  assert.equal(get.status, 405);
  assert.equal(get.headers.get('allow'), 'POST');
});

// ---------------------------------------------------------------------------------------------
// 4. search_sdk

test('search_sdk finds entities.create from "create a record"; mode "read" hides it and every non-read method', async () => {
  await withClient(`${server.url}/${ORG}`, acme.token, async (client) => {
    const found = await searchSdk(client, { query: 'create a record' });
    assert.ok(found.length > 0);
    const [first] = found;
    assert.equal(first.path, 'entities.create', JSON.stringify(paths(found)));
    assert.equal(first.access, 'write');
    assert.match(first.signature, /^entities\.create\(args: \{/);
    assert.match(first.signature, /Promise<Entity>$/);
    assert.match(first.description, /record/);

    const read = await searchSdk(client, { query: 'create a record', mode: 'read' });
    assert.ok(read.length > 0, 'read methods still match');
    assert.deepEqual([...new Set(read.map((m) => m.access))], ['read'], JSON.stringify(read.map((m) => [m.path, m.access])));
    assert.equal(paths(read).includes('entities.create'), false);
    const allRead = await searchSdk(client, { mode: 'read', limit: 100 });
    assert.deepEqual([...new Set(allRead.map((m) => m.access))], ['read']);

    const exact = await searchSdk(client, { query: 'entities.list' });
    assert.equal(exact[0].path, 'entities.list');
    const ns = await searchSdk(client, { namespace: 'entities', limit: 100 });
    assert.ok(ns.length >= 6 && ns.every((m) => m.path.startsWith('entities.')), JSON.stringify(paths(ns)));
    const admin = await searchSdk(client, { query: 'issue an API token' });
    assert.ok(admin.some((m) => m.path === 'tokens.create' && m.access === 'admin'), JSON.stringify(paths(admin)));
  });
});

test('search_sdk lists only what the caller may call: a viewer sees no write or admin methods, a member no admin ones', async () => {
  await ensureTypes();
  const { member, viewer } = await ensurePeople();
  await withClient(`${server.url}/${ORG}`, viewer.token, async (client) => {
    const all = await searchSdk(client, { limit: 100 });
    assert.ok(all.length > 10);
    assert.deepEqual([...new Set(all.map((m) => m.access))], ['read'], JSON.stringify(all.map((m) => [m.path, m.access])));
    assert.ok(paths(all).includes('entities.get'));
    const create = await searchSdk(client, { query: 'create a record' });
    assert.equal(create.some((m) => m.access !== 'read'), false, JSON.stringify(paths(create)));
    assert.equal(paths(create).includes('entities.create'), false);
    assert.deepEqual(paths(await searchSdk(client, { namespace: 'Ticket' })).sort(), ['Ticket.get', 'Ticket.list']);
  });
  await withClient(`${server.url}/${ORG}`, member.token, async (client) => {
    const all = await searchSdk(client, { limit: 100 });
    const tiers = new Set(all.map((m) => m.access));
    assert.ok(tiers.has('write') && !tiers.has('admin'), JSON.stringify([...tiers]));
    assert.equal(paths(all).includes('tokens.create'), false);
  });
});

test('search_sdk with namespace "Ticket" lists the Noun\'s built-in verbs with typed signatures', async () => {
  await ensureTypes();
  await withClient(`${server.url}/${ORG}`, acme.token, async (client) => {
    const verbs = await searchSdk(client, { namespace: 'Ticket' });
    const byPath = Object.fromEntries(verbs.map((m) => [m.path, m]));
    for (const verb of ['get', 'list', 'create', 'update', 'delete', 'link']) {
      assert.ok(byPath[`Ticket.${verb}`], `Ticket.${verb} in ${JSON.stringify(Object.keys(byPath))}`);
    }
    assert.ok(verbs.every((m) => m.path.startsWith('Ticket.')));
    assert.equal(byPath['Ticket.get'].access, 'read');
    assert.equal(byPath['Ticket.create'].access, 'write');
    assert.match(byPath['Ticket.create'].signature, /Ticket\["properties"\]/);
    assert.match(byPath['Ticket.get'].signature, /Promise<Ticket>/);
  });
});

test('search_sdk and sdk.d.ts show a custom verb bound to ticket', async () => {
  await ensureOperation();
  await withClient(`${server.url}/${ORG}`, acme.token, async (client) => {
    const verbs = await searchSdk(client, { namespace: 'Ticket' });
    const escalate = verbs.find((m) => m.path === 'Ticket.escalate');
    assert.ok(escalate, JSON.stringify(paths(verbs)));
    assert.equal(escalate.access, 'write');
    assert.equal(escalate.description, OPERATION.description);
    assert.match(escalate.signature, /id: string/);
    assert.match(escalate.signature, /reason\?: string/);
  });
  const { viewer } = await ensurePeople();
  await withClient(`${server.url}/${ORG}`, viewer.token, async (client) => {
    assert.equal(paths(await searchSdk(client, { namespace: 'Ticket' })).includes('Ticket.escalate'), false);
  });
  const dts = await declarations(acme.token);
  assert.match(dts.text, /escalate\(args: \{/);
});

// ---------------------------------------------------------------------------------------------
// 5. TypeScript declarations, type-checked with tsc

const GOOD_SCRIPT = `
async function main(): Promise<void> {
  const t = await $.Ticket.create({ name: 'Printer on fire', properties: { title: 'x', priority: 'high', points: 3 } });
  const priority: 'low' | 'high' | undefined = t.properties.priority;
  const title: string = t.properties.title;
  const kind: 'ticket' = t.type;
  const customers = await $.entities.list({ type: 'customer' });
  const page: Page<Entity> = customers;
  const c = await $.Customer.get({ id: customers.items[0].id });
  const edge = await client.entities.link({ id: t.id, to: c.id, type: 'reported_by' });
  const high = await $.Ticket.list({ where: { priority: 'high' }, limit: 10 });
  const updated = await $.Ticket.update({ id: t.id, version: t.version, properties: { priority: 'low' } });
  const found = await $.memory.search({ query: 'printer', limit: 5 });
  const ops = await $.operations.list();
  const op = await $.operations.get({ name: ops[0].name });
  ctx.log(priority, title, kind, page.next_cursor, edge.from, high.items.map((x) => x.properties.points));
  ctx.log(updated.version, found.results[0]?.content, op.name, op.access, op.entity_type);
  ctx.log(ctx.now(), ctx.args);
  await ctx.sleep(10);
  await $.operations.create({ name: 'close', entity_type: 'ticket', kind: 'http', connection: 'helpdesk', method: 'POST', path: '/tickets/{id}/close' });
}
void main;
`;

const BAD_SCRIPT = `
async function main(): Promise<void> {
  await $.Ticket.create({ name: 'x', properties: { title: 'x', priority: 'urgent' } });
  await $.entities.frobnicate({});
  await $.Ticket.create({ name: 'x', properties: { priority: 'low' } });
}
void main;
`;

const VIEWER_WRITE_SCRIPT = `
async function main(): Promise<void> {
  await $.entities.create({ type: 'customer', name: 'x' });
}
void main;
`;

test('sdk.d.ts declares both Nouns from their schemas, and a viewer\'s declares no write method', async () => {
  await ensureTypes();
  const { viewer } = await ensurePeople();
  const owner = await declarations(acme.token);
  assert.equal(owner.status, 200, owner.text);
  assert.match(owner.headers.get('content-type') ?? '', /^text\/plain/);
  assert.match(owner.text, /interface Ticket extends Entity \{\n {2}type: "ticket";/);
  assert.match(owner.text, /priority\?: "low" \| "high";/);
  assert.match(owner.text, /title: string;/);
  assert.match(owner.text, /points\?: number;/);
  assert.match(owner.text, /interface Customer extends Entity/);
  assert.match(owner.text, /declare const \$: LoreSdk;/);
  assert.match(owner.text, /declare const ctx: LoreCtx;/);
  assert.match(owner.text, /\n {2}entities: \{[^]*?\n {4}create\(/);
  assert.match(owner.text, /\n {2}tokens: \{/);

  const v = await declarations(viewer.token);
  assert.equal(v.status, 200, v.text);
  assert.match(v.text, /\n {2}entities: \{/);
  assert.match(v.text, /\n {2}Ticket: \{/);
  assert.doesNotMatch(v.text, /^\s+(create|create_many|update|delete|link|save)\(/m, 'a viewer gets no write verbs');
  assert.doesNotMatch(v.text, /\n {2}tokens: \{/, 'nor admin namespaces');
});

test('sdk.d.ts type-checks with tsc: a correct script using Nouns, entities, operations and ctx passes', async () => {
  await ensureTypes();
  const dts = await declarations(acme.token);
  assert.equal(dts.status, 200);
  const { code, output } = await typecheck(dts.text, GOOD_SCRIPT);
  assert.equal(output.trim(), '', 'tsc reports nothing');
  assert.equal(code, 0);
});

test('sdk.d.ts type-checks with tsc: a wrong property value, a missing property or an unknown method fails, naming it', async () => {
  await ensureTypes();
  const { viewer } = await ensurePeople();
  const dts = await declarations(acme.token);
  const bad = await typecheck(dts.text, BAD_SCRIPT);
  assert.notEqual(bad.code, 0);
  assert.doesNotMatch(bad.output, /sdk\.d\.ts\(/, 'the declarations themselves are clean');
  assert.match(bad.output, /script\.ts\(3,\d+\): error TS\d+: .*"urgent"/);
  assert.match(bad.output, /script\.ts\(4,\d+\): error TS\d+: .*'frobnicate'/);
  assert.match(bad.output, /script\.ts\(5,\d+\): error TS\d+: .*'title'/);

  const v = await declarations(viewer.token);
  const refusedByTsc = await typecheck(v.text, VIEWER_WRITE_SCRIPT);
  assert.notEqual(refusedByTsc.code, 0);
  assert.doesNotMatch(refusedByTsc.output, /sdk\.d\.ts\(/);
  assert.match(refusedByTsc.output, /script\.ts\(3,\d+\): error TS2339: Property 'create' does not exist/);
});

// ---------------------------------------------------------------------------------------------
// 6. Webhooks

const ensureWebhook = once(async () => {
  const feed = ok(await api(acme.token, 'manage_feeds', { action: 'create', name: 'github', kind: 'webhook' }));
  return { ...feed, href: new URL(feed.url, server.base).href };
});

test('webhook: a signed JSON delivery is accepted once (202), deduplicated, and findable with search_memory', async () => {
  const feed = await ensureWebhook();
  assert.equal(feed.kind, 'webhook');
  assert.equal(feed.auth, 'hmac');
  assert.equal(feed.url, `/hooks/${ORG}/github`);
  assert.ok(typeof feed.secret === 'string' && feed.secret.length >= 16, JSON.stringify(feed));
  recordSecret(feed.secret);
  // The secret is shown once: never by get or list.
  const got = ok(await api(acme.token, 'feeds.get', { name: 'github' }));
  assert.equal('secret' in got, false);
  assert.equal((await api(acme.token, 'manage_feeds', { action: 'list' })).text.includes(feed.secret), false);

  const body = JSON.stringify({ action: 'opened', issue: { title: 'Zeppelinquark overheats in the staging rack' } });
  const first = await deliver(feed.href, body, { 'x-lore-signature': sign(body, feed.secret), 'x-lore-delivery': 'delivery-1' });
  assert.equal(first.status, 202, first.text);
  assert.match(first.json.id, /^evt_/);
  assert.equal(first.json.duplicate, false);
  const again = await deliver(feed.href, body, { 'x-lore-signature': sign(body, feed.secret), 'x-lore-delivery': 'delivery-1' });
  assert.equal(again.status, 202, again.text);
  assert.deepEqual(again.json, { id: first.json.id, duplicate: true });

  // Without a delivery id, the body's hash dedupes; GitHub's header name works too.
  const other = JSON.stringify({ action: 'closed', number: 7 });
  const a = await deliver(feed.href, other, { 'x-hub-signature-256': sign(other, feed.secret) });
  const b = await deliver(feed.href, other, { 'x-hub-signature-256': sign(other, feed.secret) });
  assert.equal(a.status, 202, a.text);
  assert.deepEqual(b.json, { id: a.json.id, duplicate: true });
  assert.notEqual(a.json.id, first.json.id);

  await withClient(`${server.url}/${ORG}`, acme.token, async (client) => {
    const result = await search(client, { query: 'zeppelinquark' });
    transcript.push(JSON.stringify(result));
    assert.notEqual(result.isError, true, JSON.stringify(result));
    const hits = result.structuredContent.results;
    assertFinds(hits, 'zeppelinquark', [first.json.id], 'one event for two deliveries:');
    assert.equal(hits[0].kind, 'feed_item');
    assert.equal(hits[0].author, 'feed:github');
    assert.match(hits[0].content, /Zeppelinquark overheats/);
  });
});

test('webhook: bad or missing signatures get 401; non-JSON gets 400; a body over 256 KiB gets 413', async () => {
  const feed = await ensureWebhook();
  const body = JSON.stringify({ hello: 'world' });
  for (const headers of [
    {},
    { 'x-lore-signature': sign(body, 'not-the-secret-at-all') },
    { 'x-lore-signature': sign(`${body} `, feed.secret) },
    { 'x-lore-signature': 'sha256=zz' },
    { authorization: `Bearer ${feed.secret}` },
  ]) {
    const res = await deliver(feed.href, body, headers);
    assert.equal(res.status, 401, `${JSON.stringify(headers)}: ${res.text}`);
    assert.equal(res.json.error.code, 'unauthorized');
  }
  const text = 'hello';
  const plain = await deliver(feed.href, text, { 'content-type': 'text/plain', 'x-lore-signature': sign(text, feed.secret) });
  assert.equal(plain.status, 400, plain.text);
  const broken = '{"hello": ';
  const invalid = await deliver(feed.href, broken, { 'x-lore-signature': sign(broken, feed.secret) });
  assert.equal(invalid.status, 400, invalid.text);
  assert.equal(invalid.json.error.code, 'invalid_argument');
  const big = JSON.stringify({ pad: 'x'.repeat(257 * 1024) });
  const tooBig = await deliver(feed.href, big, { 'x-lore-signature': sign(big, feed.secret) });
  assert.equal(tooBig.status, 413, tooBig.text);
  const justUnder = JSON.stringify({ pad: 'y'.repeat(255 * 1024) });
  assert.equal((await deliver(feed.href, justUnder, { 'x-lore-signature': sign(justUnder, feed.secret) })).status, 202);
  const get = await fetch(feed.href);
  assert.equal(get.status, 405);
});

test('webhook: a bearer feed accepts its secret as Authorization: Bearer and refuses a wrong one', async () => {
  const feed = ok(await api(acme.token, 'manage_feeds', { action: 'create', name: 'alerts', kind: 'webhook', auth: 'bearer', event_kind: 'alert' }));
  assert.equal(feed.auth, 'bearer');
  const href = new URL(feed.url, server.base).href;
  const body = JSON.stringify({ alert: 'disk almost full on quasarbox' });
  const good = await deliver(href, body, { authorization: `Bearer ${feed.secret}` });
  assert.equal(good.status, 202, good.text);
  assert.equal(good.json.duplicate, false);
  assert.equal((await deliver(href, body, { authorization: `Bearer ${feed.secret}x` })).status, 401);
  assert.equal((await deliver(href, body, { authorization: 'Bearer whsec_wrong' })).status, 401);
  assert.equal((await deliver(href, body, { 'x-lore-signature': sign(body, feed.secret) })).status, 401);
  const hit = ok(await api(acme.token, 'memory.search', { query: 'quasarbox' }));
  assertFinds(hit.results, 'quasarbox', [good.json.id], 'the refused deliveries stored nothing:');
  assert.equal(hit.results[0].kind, 'alert');
});

test('webhook: an unknown feed, a non-webhook name or another org\'s path is 404; the other org\'s own feed refuses acme\'s secret', async () => {
  const feed = await ensureWebhook();
  const other = await ensureOther();
  const body = JSON.stringify({ x: 1 });
  const signed = { 'x-lore-signature': sign(body, feed.secret) };
  for (const p of ['/hooks/acme/nope', '/hooks/other/github', '/hooks/nowhere/github', '/hooks/acme/Bad%20Name']) {
    const res = await deliver(`${server.base}${p}`, body, signed);
    assert.equal(res.status, 404, `${p}: ${res.text}`);
    assert.equal(res.json.error.code, 'not_found');
  }
  const theirs = ok(await api(other.token, 'manage_feeds', { action: 'create', name: 'github', kind: 'webhook' }, { org: 'other' }));
  assert.notEqual(theirs.secret, feed.secret);
  assert.equal((await deliver(new URL(theirs.url, server.base).href, body, signed)).status, 401);
  // Nothing acme received is visible to other: other holds no memory, so it finds nothing at all.
  assert.deepEqual(ok(await api(other.token, 'memory.search', { query: 'zeppelinquark' }, { org: 'other' })).results, []);
});

// ---------------------------------------------------------------------------------------------
// 7. CLI

test('CLI: lore memory run runs admin tools and SDK methods locally (--db) and remotely (--url --token)', onlyNative('the CLI opens the local database'), async () => {
  const { t1 } = await ensureRecords();
  const { viewer } = await ensurePeople();
  const local = await memoryRun('manage_templates', { action: 'list' }, ['--db', server.db, '--org', ORG]);
  assert.equal(local.code, 0, local.stderr);
  assert.deepEqual(JSON.parse(local.stdout).map((t) => t.name).sort(), ['customer', 'ticket']);
  const localGet = await memoryRun('Ticket.get', { id: t1.id }, ['--db', server.db, '--org', ORG]);
  assert.equal(localGet.code, 0, localGet.stderr);
  assert.equal(JSON.parse(localGet.stdout).name, t1.name);

  const url = `${server.url}/${ORG}`;
  const remote = await memoryRun('entities.list', {}, ['--url', url, '--token', acme.token]);
  assert.equal(remote.code, 0, remote.stderr);
  assert.ok(JSON.parse(remote.stdout).items.some((e) => e.id === t1.id), remote.stdout);
  const remoteTool = await memoryRun('manage_templates', { action: 'get', name: 'ticket' }, ['--url', url, '--token', acme.token]);
  assert.equal(remoteTool.code, 0, remoteTool.stderr);
  assert.deepEqual(JSON.parse(remoteTool.stdout).schema, TICKET_SCHEMA);
  // An MCP URL without an org needs --org for admin tools.
  const noOrg = await memoryRun('entities.list', {}, ['--url', server.url, '--token', acme.token]);
  assert.notEqual(noOrg.code, 0);
  assert.match(noOrg.stderr, /org/);
  const withOrg = await memoryRun('entities.list', { type: 'customer' }, ['--url', server.url, '--org', ORG, '--token', acme.token]);
  assert.equal(withOrg.code, 0, withOrg.stderr);
  // Refusals exit non-zero with the status and code.
  const denied = await memoryRun('entities.create', { type: 'customer', name: 'cli' }, ['--url', url, '--token', viewer.token]);
  assert.notEqual(denied.code, 0);
  assert.match(denied.stderr, /403/);
  assert.match(denied.stderr, /needs_write/);
});

test('CLI: lore memory run --db without --org uses the org lore init created', onlyNative('the CLI opens the local database'), async () => {
  await ensureTypes();
  const r = await memoryRun('manage_templates', { action: 'list' }, ['--db', server.db]);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout).map((t) => t.name).sort(), ['customer', 'ticket']);
});

// ---------------------------------------------------------------------------------------------
// 8. Audit log

test('actions: REST writes are audited with source "api" and the method as the step; a member sees only their own', async () => {
  await ensureTypes();
  const { member, viewer } = await ensurePeople();
  const created = ok(await api(acme.token, 'entities.create', { type: 'customer', name: 'Audit Co' }));
  ok(await api(acme.token, 'Customer.update', { id: created.id, version: 1, properties: { tier: 'silver' } }));
  refused(await api(acme.token, 'Customer.update', { id: created.id, version: 1, name: 'stale' }), 409, 'conflict');
  ok(await api(member.token, 'Ticket.create', { name: 'Audit me', properties: { title: 'Audit me' } }));

  const all = ok(await api(acme.token, 'actions.list', { limit: 500 })).items;
  assert.ok(all.every((a) => /^act_/.test(a.id) && a.source === 'api'), JSON.stringify(all.slice(0, 3)));
  const methods = all.map((a) => a.steps.map((s) => s.method).join(','));
  for (const m of ['templates.create', 'entities.create', 'Customer.update', 'Ticket.create']) {
    assert.ok(methods.includes(m), `${m} in ${JSON.stringify([...new Set(methods)])}`);
  }
  const mine = all.find((a) => a.steps[0].method === 'entities.create' && a.principal === acme.principal);
  assert.equal(mine.status, 'ok');
  assert.equal(mine.steps[0].ok, true);
  const stale = all.find((a) => a.steps[0].method === 'Customer.update' && a.status === 'error');
  assert.ok(stale, 'the conflicting update is audited as an error');
  assert.equal(stale.steps[0].error_code, 'conflict');
  assert.equal(stale.error.code, 'conflict');
  // Reads are not audited.
  assert.equal(methods.some((m) => /^(entities\.list|entities\.get|Ticket\.get|actions\.list)$/.test(m)), false);

  const theirs = ok(await api(member.token, 'actions.list', {})).items;
  assert.ok(theirs.length >= 1);
  assert.ok(theirs.every((a) => a.principal === member.id), JSON.stringify(theirs.map((a) => a.principal)));
  assert.ok(theirs.some((a) => a.steps[0].method === 'Ticket.create'));
  // A member cannot widen the view, nor read someone else's action.
  const widened = ok(await api(member.token, 'actions.list', { principal: acme.principal })).items;
  assert.ok(widened.every((a) => a.principal === member.id));
  refused(await api(member.token, 'actions.get', { id: mine.id }), 404, 'not_found');
  const filtered = ok(await api(acme.token, 'actions.list', { principal: member.id, limit: 500 })).items;
  assert.deepEqual(filtered.map((a) => a.id), theirs.map((a) => a.id));
  // Refused writes (a viewer's) are not recorded as actions.
  refused(await api(viewer.token, 'entities.create', { type: 'customer', name: 'nope' }), 403, 'needs_write');
  assert.deepEqual(ok(await api(viewer.token, 'actions.list', {})).items, []);
});

test('actions: a manage_* call is audited under the method it ran, not just the tool name', async () => {
  await ensureTypes();
  ok(await api(acme.token, 'manage_templates', { action: 'create', name: 'scratch' }));
  ok(await api(acme.token, 'manage_templates', { action: 'delete', name: 'scratch' }));
  const methods = ok(await api(acme.token, 'actions.list', { limit: 500 })).items.flatMap((a) => a.steps.map((st) => st.method));
  assert.ok(methods.some((m) => /templates\.create$/.test(m)), JSON.stringify([...new Set(methods)]));
  assert.ok(methods.some((m) => /templates\.delete$/.test(m)), JSON.stringify([...new Set(methods)]));
});

test('actions: reads through manage_* (list, get) are not audited, like the same methods called by path', async () => {
  await ensureTypes();
  const auditor = await agentWithToken('auditor', 'viewer');
  ok(await api(auditor.token, 'templates.list', {}));
  assert.deepEqual(ok(await api(auditor.token, 'actions.list', {})).items, [], 'a read by path is not audited');
  ok(await api(auditor.token, 'manage_templates', { action: 'list' }));
  ok(await api(auditor.token, 'manage_templates', { action: 'get', name: 'ticket' }));
  assert.deepEqual(ok(await api(auditor.token, 'actions.list', {})).items, [], 'nor through manage_templates');
});

// ---------------------------------------------------------------------------------------------
// 9. Usage metrics (own servers, so the counts are exact)

test('metrics: query_metric counts REST calls per tool and method (tool_calls, tool_errors, cap_hits)', async () => {
  const s = await startServer({ workers: 1 });
  try {
    const post = (name, body) => apiPost(s.base, 'default', name, s.ownerToken, body);
    assert.equal((await post('manage_templates', { action: 'create', name: 'note' })).status, 200);
    assert.equal((await post('entities.create', { type: 'note', name: 'a' })).status, 200);
    assert.equal((await post('entities.create', { type: 'note', name: 'b' })).status, 200);
    assert.equal((await post('entities.create', { type: 'nope', name: 'c' })).status, 400);
    assert.equal((await post('Note.list', {})).status, 200);
    // A script over its output cap: an error and a cap hit.
    await withClient(`${s.base}/mcp/default`, s.ownerToken, async (client) => {
      const capped = await client.callTool({ name: 'run_sdk', arguments: { code: "return 'x'.repeat(2_000_000);" } });
      assert.equal(capped.isError, true, JSON.stringify(capped));
      assert.match(JSON.stringify(capped.content), /cap_exceeded/);
    });

    const calls = await post('query_metric', { name: 'tool_calls', group_by: 'tool' });
    assert.equal(calls.status, 200, calls.text);
    const byTool = Object.fromEntries(calls.json.series.map((s) => [s.key, s.value]));
    assert.equal(byTool['entities.create'], 3, JSON.stringify(byTool));
    assert.equal(byTool.manage_templates, 1);
    assert.equal(byTool['Note.list'], 1);
    assert.equal(calls.json.value, Object.values(byTool).reduce((a, b) => a + b, 0));
    const errors = (await post('query_metric', { name: 'tool_errors', group_by: 'tool' })).json;
    assert.deepEqual(errors.series.filter((x) => x.value > 0), [
      { key: 'entities.create', value: 1 },
      { key: 'run_sdk', value: 1 },
    ]);
    assert.equal(errors.value, 2);
    const caps = (await post('query_metric', { name: 'cap_hits', group_by: 'tool' })).json;
    assert.deepEqual(caps.series.filter((x) => x.value > 0), [{ key: 'run_sdk', value: 1 }]);
    const one = (await post('query_metric', { name: 'tool_calls', tool: 'entities.create' })).json;
    assert.equal(one.value, 3);
    const today = new Date().toISOString().slice(0, 10);
    const byDay = (await post('query_metric', { name: 'tool_calls', group_by: 'day', since: today })).json;
    assert.deepEqual(byDay.series.map((x) => x.key), [today]);
    assert.equal((await post('query_metric', { name: 'nope' })).status, 404);
    const list = (await post('list_metrics', {})).json;
    assert.deepEqual(list.filter((m) => m.kind === 'builtin').map((m) => m.name).sort(), ['cap_hits', 'tool_calls', 'tool_errors']);
  } finally {
    await s.dispose();
  }
});

test('metrics: query_metric counts calls served by every worker thread within the flush interval', async () => {
  const s = await startServer({ workers: 2 });
  try {
    const url = (name) => `${s.base}/api/default/${name}`;
    assert.equal((await postOnFreshConnection(url('manage_templates'), s.ownerToken, { action: 'create', name: 'note' })).status, 200);
    for (let i = 0; i < 4; i++) {
      const r = await postOnFreshConnection(url('entities.create'), s.ownerToken, { type: 'note', name: `n${i}` });
      assert.equal(r.status, 200, r.text);
    }
    // Each worker buffers its counts and writes them every 2 s, idle or not.
    let q;
    for (const deadline = Date.now() + 8000; Date.now() < deadline;) {
      q = await postOnFreshConnection(url('query_metric'), s.ownerToken, { name: 'tool_calls', tool: 'entities.create' });
      assert.equal(q.status, 200, q.text);
      if (q.json.value === 4) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    assert.equal(q.json.value, 4, 'every call is counted, whichever worker served it');
  } finally {
    await s.dispose();
  }
});

// ---------------------------------------------------------------------------------------------
// The connection's secret never comes back (runs last: it checks everything this file received)

test('the connection secret appears in no response body and no server log line', async () => {
  await ensureConnection();
  // One more path that could echo it: an error calling an unreachable host through the
  // connection (moving it needs the secret again: a credential goes only where it was given).
  const moved = await api(acme.token, 'manage_connections', { action: 'update', name: 'helpdesk', base_url: 'http://127.0.0.1:9/v1' });
  assert.equal(moved.status, 400, moved.text);
  ok(await api(acme.token, 'manage_connections', { action: 'update', name: 'helpdesk', base_url: 'http://127.0.0.1:9/v1', secret: SECRET }));
  const failed = await api(acme.token, 'connections.call', { name: 'helpdesk', path: `/x?k=${SECRET}` });
  assert.notEqual(failed.status, 200, failed.text);
  ok(await api(acme.token, 'manage_connections', { action: 'update', name: 'helpdesk', base_url: `${stub.url}/v1`, secret: SECRET }));

  assert.ok(transcript.length > 20, `checked ${transcript.length} responses`);
  const leaks = transcript.filter((t) => t.includes(SECRET));
  assert.deepEqual(leaks, [], 'no response shows the secret');
  assert.equal(server.stderr.includes(SECRET), false, 'no log line shows the secret');
});
