// OAuth 2.1 end to end: the official TypeScript SDK's OAuth client (@modelcontextprotocol/sdk
// auth provider) discovers lore from a 401, registers (client ID metadata document served over
// HTTPS, and dynamic client registration), and completes the code + PKCE flow by driving lore's
// real sign-in and consent pages in headless Chromium; then it lists and calls tools, refreshes,
// and a revoked grant stops working. The server log never shows a token, code or password.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';

import { startServer, tempDir, cleanupDir, onlyNative, TARGET, WORKSPACE_TOOLS } from './lib/server.mjs';
import { launchBrowser, signInAndConsent, startCallbackServer, startHttpsServer, MemoryProvider } from './lib/oauth.mjs';

const PASSWORD = 'e2e owner password, long enough';
const native = onlyNative('the owner password is set by lore serve on a new database');

let server;
let browser;
let cimdHost;
let callback;
let dir;
const secrets = [PASSWORD];

before(async () => {
  if (TARGET !== 'native') return;
  dir = await tempDir();
  cimdHost = await startHttpsServer(dir);
  callback = await startCallbackServer();
  server = await startServer({ env: { LORE_OWNER_PASSWORD: PASSWORD, LORE_TLS_CA_FILE: cimdHost.certFile } });
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await server?.dispose();
  await cimdHost?.close();
  await callback?.close();
  await cleanupDir(dir);
});

function newClient(provider, name) {
  const transport = new StreamableHTTPClientTransport(new URL(server.url), { authProvider: provider });
  const client = new Client({ name, version: '0.0.1' }, { capabilities: {} });
  return { client, transport };
}

/** The whole journey for one provider; returns what it saw. */
async function journey(provider, label) {
  let landed = null;
  provider._onRedirect = async (url) => {
    assert.equal(url.origin, server.base, 'the authorization endpoint is lore');
    assert.equal(url.searchParams.get('code_challenge_method'), 'S256');
    assert.equal(url.searchParams.get('resource'), `${server.base}/mcp`);
    landed = await signInAndConsent(browser, url, { password: PASSWORD, callbackPrefix: callback.url, shotPrefix: `${label}-` });
  };

  // 1. The first connection meets a 401, discovers lore, registers, and sends the user to sign in.
  const first = newClient(provider, `${label}-first`);
  await assert.rejects(first.client.connect(first.transport), UnauthorizedError);
  assert.ok(landed, 'the browser reached the callback');
  assert.equal(landed.searchParams.get('iss'), server.base, 'RFC 9207 iss');
  const code = landed.searchParams.get('code');
  assert.ok(code);
  secrets.push(code);
  await first.transport.finishAuth(code);
  const tokens = provider.tokens();
  assert.match(tokens.access_token, /^lore_at_/);
  assert.match(tokens.refresh_token, /^lore_rt_/);
  assert.equal(tokens.scope, 'mcp:read mcp:write');
  secrets.push(tokens.access_token, tokens.refresh_token);

  // 2. Connected: list and call tools.
  const second = newClient(provider, `${label}-second`);
  await second.client.connect(second.transport);
  const { tools } = await second.client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), WORKSPACE_TOOLS);
  const saved = await second.client.callTool({ name: 'save_memory', arguments: { content: `${label}: signed in with OAuth` } });
  assert.notEqual(saved.isError, true, JSON.stringify(saved));
  const found = await second.client.callTool({ name: 'search_memory', arguments: { query: `${label} signed in` } });
  assert.ok(found.structuredContent.results.some((r) => r.content.includes(label)), JSON.stringify(found));

  // 3. Refresh: with a dead access token the SDK trades the refresh token, which rotates.
  provider.saveTokens({ ...tokens, access_token: 'lore_at_no-longer-valid' });
  const again = await second.client.callTool({ name: 'search_memory', arguments: { query: label } });
  assert.notEqual(again.isError, true);
  const refreshed = provider.tokens();
  assert.notEqual(refreshed.access_token, tokens.access_token);
  assert.notEqual(refreshed.refresh_token, tokens.refresh_token, 'the refresh token rotates');
  secrets.push(refreshed.access_token, refreshed.refresh_token);
  await second.client.close();

  // 4. Revoked: the grant ends; the SDK's refresh fails and it cannot get in without a user.
  const revoke = await fetch(`${server.base}/oauth/revoke`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ token: refreshed.refresh_token, token_type_hint: 'refresh_token', client_id: provider.clientInformation().client_id }),
  });
  assert.equal(revoke.status, 200);
  const direct = await fetch(server.url, {
    method: 'POST',
    headers: { authorization: `Bearer ${refreshed.access_token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
  });
  assert.equal(direct.status, 401);
  assert.match(direct.headers.get('www-authenticate') ?? '', /invalid_token/);
  provider._onRedirect = async () => {};
  const third = newClient(provider, `${label}-third`);
  await assert.rejects(third.client.connect(third.transport), UnauthorizedError);
  return provider;
}

test('OAuth with a client ID metadata document: discovery, HTTPS metadata fetch, browser sign-in and consent, tools, refresh, revocation', native, async () => {
  const metadataUrl = `${cimdHost.base}/oauth/client.json`;
  const provider = new MemoryProvider({ redirectUrl: callback.url, clientMetadataUrl: metadataUrl, name: 'lore e2e (metadata document)' });
  cimdHost.routes.set('/oauth/client.json', {
    client_id: metadataUrl,
    client_name: 'lore e2e (metadata document)',
    redirect_uris: [callback.url],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
  });
  await journey(provider, 'cimd');
  assert.equal(provider.clientInformation().client_id, metadataUrl, 'the client id is the document URL');
  assert.ok((cimdHost.hits.get('/oauth/client.json') ?? 0) >= 1, 'lore fetched the document');
});

test('OAuth with dynamic client registration: discovery, registration, browser sign-in and consent, tools, refresh, revocation', native, async () => {
  const provider = new MemoryProvider({ redirectUrl: callback.url, name: 'lore e2e (registered)' });
  await journey(provider, 'dcr');
  assert.match(provider.clientInformation().client_id, /^dcr_/);
});

test('the server log shows no token, code or password', native, async () => {
  assert.ok(secrets.length > 5, 'the journeys ran first');
  for (const secret of secrets) {
    assert.ok(!server.stderr.includes(secret), `the log shows a secret (${secret.slice(0, 8)}…)`);
  }
  assert.match(server.stderr, /authorization approved/);
});
