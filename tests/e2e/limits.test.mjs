// Rate limits end to end: a token over its limit gets HTTP 429 with Retry-After and a JSON-RPC
// error naming the limit, from MCP (a raw client and the real TypeScript client) and REST; the
// org's own lower limit applies; another org is not affected.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { startServer, createOrg, tempDir, cleanupDir, apiPost, raw2026, TARGET } from './lib/server.mjs';
import { connectSdk1 } from './lib/clients.mjs';

let server;
let owner;
let rival;
let dir;

before(async () => {
  dir = await tempDir();
  // 30 requests a minute per token: a burst of 5. Natively flags (env), at the edge variables.
  const limits = {
    native: { env: { LORE_RATE_TOKEN_PER_MINUTE: '30', LORE_RATE_ORG_PER_MINUTE: '600' } },
    worker: { vars: { LORE_RATE_TOKEN_PER_MINUTE: '30', LORE_RATE_ORG_PER_MINUTE: '600' } },
    spin: { vars: { lore_rate_token_per_minute: '30', lore_rate_org_per_minute: '600' } },
  };
  server = await startServer(limits[TARGET]);
  owner = (await createOrg(server, 'limited')).token;
  rival = (await createOrg(server, 'unlimited')).token;
});
after(async () => {
  if (server) await server.stop();
  if (dir) await cleanupDir(dir);
});

test('a token over its limit gets 429, Retry-After and an error naming the limit', async () => {
  const url = `${server.base}/mcp/limited`;
  const statuses = [];
  let refused;
  for (let i = 0; i < 8; i += 1) {
    const res = await raw2026(url, owner, 'tools/list');
    statuses.push(res.status);
    if (res.status === 429) refused ??= res;
  }
  assert.deepEqual(statuses.slice(0, 5), [200, 200, 200, 200, 200], statuses.join(','));
  assert.ok(refused, `a request past the burst is refused: ${statuses}`);
  assert.match(refused.headers.get('retry-after'), /^[1-9]\d*$/);
  assert.equal(refused.json.error.code, -32029);
  assert.equal(refused.json.error.data.limit, 'token');
  assert.equal(refused.json.error.data.per_minute, 30);
  const rest = await apiPost(server.base, 'limited', 'organizations.get', owner, {});
  assert.equal(rest.status, 429);
  assert.equal(rest.json.error.code, 'rate_limited');
  assert.ok(rest.headers.get('retry-after'));
  // Another org's token is not affected.
  assert.equal((await raw2026(`${server.base}/mcp/unlimited`, rival, 'tools/list')).status, 200);
  // The real client surfaces the refusal as an error, not a hang.
  await assert.rejects(async () => {
    const { client } = await connectSdk1(url, owner);
    await client.listTools();
  });
});
