// Sign-in through an upstream identity provider, end to end: a small GitHub-like stub IdP
// (authorize, token with PKCE and client secret checks, /user) runs in this process; lore is
// configured for it with LORE_GITHUB_*; headless Chromium clicks "Continue with GitHub" on
// lore's sign-in page. The new user belongs to no org until an admin invites them.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { createHash, randomBytes } from 'node:crypto';

import { startServer, onlyNative, TARGET, apiPost } from './lib/server.mjs';
import { launchBrowser, SHOTS } from './lib/oauth.mjs';

const native = onlyNative('identity providers are configured by environment on lore serve');
const SECRET = 'stub-idp-client-secret';

let idp;
let server;
let browser;

/** The stub IdP: remembers each code's PKCE challenge and checks it at the token endpoint. */
async function startIdp() {
  const codes = new Map();
  const calls = [];
  const srv = http.createServer(async (req, res) => {
    const url = new URL(req.url, 'http://idp');
    calls.push(`${req.method} ${url.pathname}`);
    if (url.pathname === '/login/oauth/authorize') {
      const code = randomBytes(12).toString('hex');
      codes.set(code, url.searchParams.get('code_challenge'));
      const back = new URL(url.searchParams.get('redirect_uri'));
      back.searchParams.set('code', code);
      back.searchParams.set('state', url.searchParams.get('state'));
      res.writeHead(302, { location: back.toString() });
      res.end();
      return;
    }
    if (url.pathname === '/login/oauth/access_token' && req.method === 'POST') {
      let body = '';
      for await (const chunk of req) body += chunk;
      const form = new URLSearchParams(body);
      const basic = Buffer.from((req.headers.authorization ?? '').replace(/^Basic /, ''), 'base64').toString();
      const challenge = codes.get(form.get('code'));
      const computed = createHash('sha256').update(form.get('code_verifier') ?? '').digest('base64url');
      res.setHeader('content-type', 'application/json');
      if (basic !== `gh-client:${SECRET}` || !challenge || challenge !== computed) {
        res.end(JSON.stringify({ error: 'bad_verification_code' }));
        return;
      }
      codes.delete(form.get('code'));
      res.end(JSON.stringify({ access_token: 'gho_stub', token_type: 'bearer', scope: 'read:user' }));
      return;
    }
    if (url.pathname === '/api/user' && req.headers.authorization === 'Bearer gho_stub') {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ id: 583231, login: 'octocat', name: 'The Octocat', email: null }));
      return;
    }
    res.writeHead(404);
    res.end();
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${srv.address().port}`;
  return { base, calls, close: () => new Promise((r) => srv.close(r)) };
}

before(async () => {
  if (TARGET !== 'native') return;
  idp = await startIdp();
  server = await startServer({
    env: {
      LORE_GITHUB_CLIENT_ID: 'gh-client',
      LORE_GITHUB_CLIENT_SECRET: SECRET,
      LORE_GITHUB_URL: idp.base,
      LORE_GITHUB_API_URL: `${idp.base}/api`,
    },
  });
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await server?.dispose();
  await idp?.close();
});

test('sign in with a GitHub-like provider: a new user joins no org until invited', native, async () => {
  const context = await browser.newContext({ viewport: { width: 900, height: 900 } });
  const page = await context.newPage();
  try {
    await page.goto(`${server.base}/oauth/signin`);
    await page.getByRole('heading', { name: 'Sign in to lore' }).waitFor();
    if (SHOTS) await page.screenshot({ path: `${SHOTS}/upstream-signin.png`, fullPage: true });
    await page.getByRole('button', { name: 'Continue with GitHub' }).click();
    await page.waitForURL((u) => u.pathname === '/oauth/tokens');
    assert.match(await page.textContent('main'), /Signed in as The Octocat/);
    assert.deepEqual(idp.calls, ['GET /login/oauth/authorize', 'POST /login/oauth/access_token', 'GET /api/user']);

    // An admin invites github:octocat, who signed in before: added at once.
    const invited = await apiPost(server.base, 'default', 'members.invite', server.ownerToken, { identity: 'github:octocat', role: 'member' });
    assert.equal(invited.status, 200, JSON.stringify(invited.json));
    assert.equal(invited.json.status, 'added');
    const members = await apiPost(server.base, 'default', 'members.list', server.ownerToken, {});
    assert.ok(members.json.some((m) => m.name === 'The Octocat' && m.role === 'member'), JSON.stringify(members.json));

    // Signing out and in again finds the same person.
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Signed out' }).waitFor();
    await page.goto(`${server.base}/oauth/signin`);
    await page.getByRole('button', { name: 'Continue with GitHub' }).click();
    await page.waitForURL((u) => u.pathname === '/oauth/tokens');
    const again = await apiPost(server.base, 'default', 'members.list', server.ownerToken, {});
    assert.equal(again.json.filter((m) => m.name === 'The Octocat').length, 1);
  } finally {
    await context.close();
  }
  assert.ok(!server.stderr.includes(SECRET), 'the client secret is not logged');
  assert.ok(!server.stderr.includes('gho_stub'), 'the upstream token is not logged');
});
