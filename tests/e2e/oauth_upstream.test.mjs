// Sign-in through an upstream identity provider, end to end: a small GitHub-like stub IdP
// (authorize, token with PKCE and client secret checks, /user) runs in this process; lore is
// configured for it with LORE_GITHUB_*; headless Chromium clicks "Continue with GitHub" on
// lore's sign-in page. The new user belongs to no org until an admin invites them.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { startServer, onlyNative, TARGET, apiPost } from './lib/server.mjs';
import { launchBrowser, SHOTS } from './lib/oauth.mjs';
import { startIdp, idpEnv, IDP_SECRET as SECRET } from './lib/idp.mjs';

const native = onlyNative('identity providers are configured by environment on lore serve');

let idp;
let server;
let browser;

before(async () => {
  if (TARGET !== 'native') return;
  idp = await startIdp();
  server = await startServer({ env: idpEnv(idp) });
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
