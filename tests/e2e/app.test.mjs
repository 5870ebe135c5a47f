// The org's web app (/app/{org}) in headless Chromium against lore serve with seeded memories:
// the owner signs in from an app page with the password and comes back to it, finds a memory by
// search and corrects it (the correction supersedes it, agents then find the new text); a
// memory whose text is a script tag shows as text and runs nothing; a GitHub user invited as a
// viewer reads but is offered no change and a forged post is refused; another org's app is
// "not found" for them. Every page is photographed at desktop and phone widths
// (LORE_APP_SHOTS, else a temporary folder; the path is printed).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { startServer, onlyNative, TARGET, apiPost, createOrg, recordSecret } from './lib/server.mjs';
import { launchBrowser } from './lib/oauth.mjs';
import { startIdp, idpEnv } from './lib/idp.mjs';

const PASSWORD = 'e2e owner password for the app';
recordSecret(PASSWORD);
const native = onlyNative('the owner password and the identity provider are set by environment on lore serve');
const SHOTS = process.env.LORE_APP_SHOTS || path.join(os.tmpdir(), 'lore-app-shots');
const DESKTOP = { width: 1280, height: 900 };
const PHONE = { width: 390, height: 844 };

let idp;
let server;
let browser;

before(async () => {
  if (TARGET !== 'native') return;
  idp = await startIdp();
  server = await startServer({ env: { LORE_OWNER_PASSWORD: PASSWORD, ...idpEnv(idp) } });
  browser = await launchBrowser();
  const seeded = await apiPost(server.base, 'default', 'memory.save', server.ownerToken, {
    memories: [
      { content: 'Deploys go out on Tuesdays after the standup', kind: 'decision' },
      { content: 'The billing service is written in Go and owned by the payments team', kind: 'fact' },
      { content: 'Customer Initech prefers invoices in EUR', kind: 'preference' },
      { content: '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"> is what the attacker saved', kind: 'note' },
      ...Array.from({ length: 60 }, (_, i) => ({ content: `Incident ${i}: the queue backed up and drained after a restart`, kind: 'observation' })),
    ],
  });
  assert.equal(seeded.status, 200, JSON.stringify(seeded.json));
  mkdirSync(SHOTS, { recursive: true });
  console.log(`app screenshots: ${SHOTS}`);
});

after(async () => {
  await browser?.close();
  await server?.dispose();
  await idp?.close();
});

/** Photographs the page at desktop width, then the same URL in the same session at phone width. */
async function shots(context, page, name) {
  await page.screenshot({ path: path.join(SHOTS, `${name}-desktop.png`), fullPage: true });
  const phone = await browser.newContext({ viewport: PHONE, storageState: await context.storageState() });
  try {
    const small = await phone.newPage();
    await small.goto(page.url());
    await small.screenshot({ path: path.join(SHOTS, `${name}-phone.png`), fullPage: true });
    const overflow = await small.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 1, `${name} fits a phone's width (overflows by ${overflow}px)`);
  } finally {
    await phone.close();
  }
}

test('the owner signs in from the app, finds a memory by search and corrects it', native, async () => {
  const context = await browser.newContext({ viewport: DESKTOP });
  const page = await context.newPage();
  const dialogs = [];
  page.on('dialog', (d) => { dialogs.push(d.message()); d.dismiss(); });
  try {
    await page.goto(`${server.base}/app/default/memory`);
    await page.getByRole('heading', { name: 'Sign in to lore' }).waitFor();
    await page.getByLabel('Owner password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL((u) => u.pathname === '/app/default/memory');
    await page.getByRole('heading', { name: 'Memory' }).waitFor();
    await shots(context, page, 'memory-timeline');

    // The script-tag memory is text on the page and ran nothing.
    await page.goto(`${server.base}/app/default/memory?q=attacker`);
    await page.getByText('<script>window.__pwned = 1</script>', { exact: false }).first().waitFor();
    assert.equal(await page.evaluate(() => window.__pwned), undefined);
    assert.equal(await page.locator('main script, main img').count(), 0);
    await shots(context, page, 'memory-script-text');

    // Search.
    await page.getByLabel('Search').fill('Deploys Tuesdays');
    await page.getByRole('button', { name: 'Show' }).click();
    await page.waitForURL((u) => u.searchParams.get('q') === 'Deploys Tuesdays');
    const first = page.locator('ol.memories > li').first();
    assert.match(await first.textContent(), /Deploys go out on Tuesdays/);
    await shots(context, page, 'memory-search');

    // Its versions, and a correction.
    await first.getByRole('link', { name: /^Versions of / }).click();
    await page.getByRole('heading', { name: 'A memory and its versions' }).waitFor();
    await shots(context, page, 'memory-versions');
    await page.getByLabel('The memory as it should read').fill('Deploys go out on Wednesdays since March');
    await page.getByRole('button', { name: 'Save correction' }).click();
    await page.waitForURL((u) => u.searchParams.get('saved') === '1');
    await page.getByText('Saved: your correction').waitFor();
    const versions = await page.locator('ol.memories > li').allTextContents();
    assert.equal(versions.length, 2);
    assert.match(versions[0], /Tuesdays/);
    assert.match(versions[1], /Wednesdays/);
    await shots(context, page, 'memory-corrected');

    // Agents find the correction now; the old text is only in the history.
    const found = await apiPost(server.base, 'default', 'memory.search', server.ownerToken, { query: 'Deploys' });
    assert.match(found.json.results[0].content, /Wednesdays/);
    assert.ok(!found.json.results.some((m) => /Tuesdays/.test(m.content)));

    // Paging the timeline: 64 memories, 50 on the first page.
    await page.goto(`${server.base}/app/default/memory`);
    assert.equal(await page.locator('ol.memories > li').count(), 50);
    await page.getByRole('link', { name: 'Older memories' }).click();
    assert.equal(await page.locator('ol.memories > li').count(), 14);
    assert.deepEqual(dialogs, [], 'no script ran');
  } finally {
    await context.close();
  }
});

test('a viewer reads the memory, is offered no change, and cannot reach another org', native, async () => {
  const invited = await apiPost(server.base, 'default', 'members.invite', server.ownerToken, { identity: 'github:octocat', role: 'viewer' });
  assert.equal(invited.status, 200, JSON.stringify(invited.json));
  await createOrg(server, 'globex');
  const context = await browser.newContext({ viewport: DESKTOP });
  const page = await context.newPage();
  try {
    await page.goto(`${server.base}/app/default/memory?kind=preference`);
    await page.getByRole('button', { name: 'Continue with GitHub' }).click();
    await page.waitForURL((u) => u.pathname === '/app/default/memory');
    assert.equal(new URL(page.url()).searchParams.get('kind'), 'preference', 'back to the same page');
    assert.match(await page.textContent('header'), /The Octocat \(viewer\)/);
    const items = page.locator('ol.memories > li');
    assert.equal(await items.count(), 1);
    await items.first().getByRole('link', { name: /^Versions of / }).click();
    await page.getByRole('heading', { name: 'A memory and its versions' }).waitFor();
    assert.equal(await page.getByRole('button', { name: 'Save correction' }).count(), 0);
    await page.getByText('you can read its memory, not change it').waitFor();
    await shots(context, page, 'memory-viewer');

    // A post the page never offered, with the session's own form token: refused.
    const csrf = await page.locator('input[name=csrf]').first().inputValue();
    const forged = await page.request.post(page.url(), { form: { csrf, content: 'Initech pays in dollars' }, headers: { origin: server.base } });
    assert.equal(forged.status(), 403);
    const after = await apiPost(server.base, 'default', 'memory.search', server.ownerToken, { query: 'Initech' });
    assert.ok(!after.json.results.some((m) => /dollars/.test(m.content)));

    // Another org's app is "not found" for someone who is not its member.
    const other = await page.goto(`${server.base}/app/globex/memory`);
    assert.equal(other.status(), 404);
  } finally {
    await context.close();
  }
});
