// OAuth 2.1 end to end: the official TypeScript SDK's OAuth client (@modelcontextprotocol/sdk
// auth provider) discovers lore from a 401, registers (client ID metadata document served over
// HTTPS, and dynamic client registration), and completes the code + PKCE flow by driving lore's
// real sign-in and consent pages in headless Chromium; then it lists and calls tools, refreshes,
// and a revoked grant stops working. The server log never shows a token, code or password.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFile } from 'node:child_process';
import { readFileSync, writeFileSync, statSync } from 'node:fs';
import path from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';

import { startServer, tempDir, cleanupDir, onlyNative, TARGET, WORKSPACE_TOOLS, LORE_BIN, recordSecret } from './lib/server.mjs';
import { launchBrowser, signInAndConsent, startCallbackServer, startHttpsServer, MemoryProvider } from './lib/oauth.mjs';

const PASSWORD = 'e2e owner password, long enough';
recordSecret(PASSWORD);
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

/** Runs the lore CLI with `env`; resolves {code, stdout, stderr}. */
function cli(args, env) {
  return new Promise((resolve) => {
    execFile(LORE_BIN, args, { env, timeout: 60_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr });
    });
  });
}

test('lore login runs the same code + PKCE flow with a loopback redirect; memory run reuses and refreshes the token; lore logout revokes it', native, async () => {
  const home = await tempDir();
  try {
    const env = { ...process.env, XDG_CONFIG_HOME: home, RUST_LOG: 'warn', NO_COLOR: '1', LORE_TOKEN: '' };
    const child = spawn(LORE_BIN, ['login', '--url', server.url, '--no-browser'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (d) => { stderr += d; });
    const exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
    const deadline = Date.now() + 20_000;
    let url = null;
    while (!url) {
      url = /(http:\/\/\S+\/oauth\/authorize\?\S+)/.exec(stderr)?.[1];
      if (!url) {
        assert.ok(Date.now() < deadline, `lore login printed no sign-in URL:\n${stderr}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    const authorization = new URL(url);
    const redirect = authorization.searchParams.get('redirect_uri');
    assert.match(redirect, /^http:\/\/127\.0\.0\.1:\d+\/callback$/, 'a loopback redirect');
    assert.equal(authorization.searchParams.get('code_challenge_method'), 'S256');
    await signInAndConsent(browser, authorization, { password: PASSWORD, callbackPrefix: redirect });
    assert.equal(await exited, 0, stderr);
    assert.match(stderr, /Signed in to/);

    // The token sits in a file only the user can read.
    const file = path.join(home, 'lore', 'credentials.json');
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.equal(statSync(path.dirname(file)).mode & 0o777, 0o700);
    const stored = JSON.parse(readFileSync(file, 'utf8')).servers[server.url];
    assert.match(stored.access_token, /^lore_at_/);
    secrets.push(stored.access_token, stored.refresh_token);

    // lore memory run --url uses it, for MCP tools and the REST admin tools.
    const saved = await cli(['memory', 'run', 'save_memory', '{"content": "The CLI signed in with OAuth"}', '--url', server.url], env);
    assert.equal(saved.code, 0, saved.stderr);
    const found = await cli(['memory', 'run', 'search_memory', '{"query": "CLI signed in"}', '--url', server.url], env);
    assert.equal(found.code, 0, found.stderr);
    assert.match(found.stdout, /The CLI signed in with OAuth/);
    const orgs = await cli(['memory', 'run', 'list_organizations', '{}', '--url', `${server.url}/default`], env);
    assert.equal(orgs.code, 0, orgs.stderr);

    // An expired token is refreshed (and the refresh token rotated) before the call.
    const credentials = JSON.parse(readFileSync(file, 'utf8'));
    credentials.servers[server.url].expires_at_ms = 0;
    writeFileSync(file, JSON.stringify(credentials));
    const again = await cli(['memory', 'run', 'search_memory', '{"query": "CLI"}', '--url', server.url], env);
    assert.equal(again.code, 0, again.stderr);
    const refreshed = JSON.parse(readFileSync(file, 'utf8')).servers[server.url];
    assert.notEqual(refreshed.access_token, stored.access_token);
    assert.notEqual(refreshed.refresh_token, stored.refresh_token);
    secrets.push(refreshed.access_token, refreshed.refresh_token);

    // lore logout revokes the grant and forgets it.
    const out = await cli(['logout', '--url', server.url], env);
    assert.equal(out.code, 0, out.stderr);
    assert.match(out.stderr, /revoked and forgotten/);
    assert.equal(JSON.parse(readFileSync(file, 'utf8')).servers[server.url], undefined);
    const revoked = await fetch(server.url, {
      method: 'POST',
      headers: { authorization: `Bearer ${refreshed.access_token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
    });
    assert.equal(revoked.status, 401);
    const after = await cli(['memory', 'run', 'search_memory', '{"query": "CLI"}', '--url', server.url], env);
    assert.notEqual(after.code, 0);
    assert.match(after.stderr, /401/);
  } finally {
    await cleanupDir(home);
  }
});

test('the server log shows no token, code or password', native, async () => {
  assert.ok(secrets.length > 5, 'the journeys ran first');
  for (const secret of secrets) {
    assert.ok(!server.stderr.includes(secret), `the log shows a secret (${secret.slice(0, 8)}…)`);
  }
  assert.match(server.stderr, /authorization approved/);
});
