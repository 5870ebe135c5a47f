// The org's web app (/app/{org}) in headless Chromium against the server of LORE_TARGET
// (lore serve, the Worker under Miniflare, the Spin component in the dev host), seeded:
// the owner signs in from an app page with the password and comes back to it, finds a memory by
// search and corrects it (the correction supersedes it, agents then find the new text); a
// memory whose text is a script tag shows as text and runs nothing; a GitHub user invited as a
// viewer reads but is offered no change and a forged post is refused; another org's app is
// "not found" for them. The owner reads the audit log (newest first, filtered by who and by
// status, one action's calls) and the usage charts, and revokes an agent's token on the access
// page: the agent's next MCP call is refused. The owner browses the records (types with their
// schemas, entities newest first and filtered, one entity's neighbourhood graph, whose nodes are
// links). The cross-org probes run against every app route. Every page is photographed at
// desktop and phone widths (LORE_APP_SHOTS, else a temporary folder, with a folder per edge
// target; the path is printed).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { startServer, TARGET, apiPost, createOrg, recordSecret, raw2026 } from './lib/server.mjs';
import { connectSdk1, search } from './lib/clients.mjs';
import { launchBrowser } from './lib/oauth.mjs';
import { startIdp, idpEnv } from './lib/idp.mjs';

const PASSWORD = 'e2e owner password for the app';
recordSecret(PASSWORD);
// Every target: natively the owner password and the identity provider come from the environment
// of lore serve; on Workers and Spin from the deployment's variables and the operator route.
const SHOTS = path.join(process.env.LORE_APP_SHOTS || path.join(os.tmpdir(), 'lore-app-shots'), TARGET === 'native' ? '' : TARGET);
const DESKTOP = { width: 1280, height: 900 };
const PHONE = { width: 390, height: 844 };

let idp;
let server;
let browser;

before(async () => {
  idp = await startIdp();
  if (TARGET === 'native') {
    server = await startServer({ env: { LORE_OWNER_PASSWORD: PASSWORD, ...idpEnv(idp) } });
  } else {
    // Spin spells its variables in lower case.
    const vars = Object.fromEntries(Object.entries(idpEnv(idp)).map(([k, v]) => [TARGET === 'spin' ? k.toLowerCase() : k, v]));
    server = await startServer({ vars });
    await server.operator('init', { org: 'default', password: PASSWORD });
  }
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

test('the owner signs in from the app, finds a memory by search and corrects it', async () => {
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

test('a viewer reads the memory, is offered no change, and cannot reach another org', async () => {
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

/** Signs the owner in with the password in a new desktop context, at `pathname`. */
async function ownerAt(pathname) {
  const context = await browser.newContext({ viewport: DESKTOP });
  const page = await context.newPage();
  await page.goto(`${server.base}${pathname}`);
  await page.getByLabel('Owner password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL((u) => u.pathname === pathname);
  return { context, page };
}

test('an admin reads the audit log and usage, revokes a token, and its next MCP call is refused', async () => {
  const agent = await apiPost(server.base, 'default', 'agents.create', server.ownerToken, { name: 'release-bot', role: 'member' });
  assert.equal(agent.status, 200, JSON.stringify(agent.json));
  const issued = await apiPost(server.base, 'default', 'tokens.create', server.ownerToken, { principal_id: agent.json.principal_id, label: 'release pipeline' });
  assert.equal(issued.status, 200, JSON.stringify(issued.json));
  const token = issued.json.token;
  recordSecret(token);
  // The agent works through a real MCP client: a save (an action of its own) and a search.
  const { client } = await connectSdk1(`${server.base}/mcp/default`, token);
  const saved = await apiPost(server.base, 'default', 'memory.save', token, { content: 'Release 4.2 shipped to production' });
  assert.equal(saved.status, 200, JSON.stringify(saved.json));
  const found = await search(client, { query: 'Release shipped' });
  assert.ok(JSON.stringify(found).includes('Release 4.2'), JSON.stringify(found));
  // An action that ended in an error, from a script.
  const failed = await raw2026(`${server.base}/mcp/default`, server.ownerToken, 'tools/call', {
    name: 'run_sdk', arguments: { code: "throw new Error('migration <b>halted</b>')" },
  });
  assert.equal(failed.status, 200, failed.text);

  const { context, page } = await ownerAt('/app/default/actions');
  try {
    await page.getByRole('heading', { name: 'Actions' }).waitFor();
    const rows = page.locator('main tbody tr');
    assert.ok(await rows.count() >= 3);
    assert.match(await rows.first().textContent(), /run_sdk/);
    assert.match(await rows.first().textContent(), /error/);
    assert.match(await rows.nth(1).textContent(), /release-bot/);
    await shots(context, page, 'actions');
    // Filters: by who, then by status.
    await page.getByLabel('Who').selectOption({ label: 'release-bot' });
    await page.getByRole('button', { name: 'Show' }).click();
    await page.waitForURL((u) => u.searchParams.get('agent') === agent.json.principal_id);
    assert.equal(await rows.count(), 1);
    await page.goto(`${server.base}/app/default/actions?status=error`);
    assert.equal(await rows.count(), 1);
    await rows.first().getByRole('link').click();
    await page.getByRole('heading', { name: 'An action' }).waitFor();
    await page.getByText('migration <b>halted</b>', { exact: false }).waitFor();
    // What the run used of its caps, each against its limit.
    await page.getByRole('heading', { name: 'Caps used' }).waitFor();
    assert.equal(await page.getByRole('row', { name: /^SDK calls 0 200/ }).count(), 1);
    await shots(context, page, 'action');

    await page.getByRole('link', { name: 'Usage' }).click();
    await page.getByRole('heading', { name: 'Calls per day' }).waitFor();
    assert.equal(await page.locator('svg.chart').count(), 1);
    assert.match(await page.locator('main').textContent(), /memory\.save/);
    await shots(context, page, 'usage');

    await page.getByRole('link', { name: 'Access' }).click();
    await page.getByRole('heading', { name: 'API tokens' }).waitFor();
    await shots(context, page, 'access');
    const before = await raw2026(`${server.base}/mcp/default`, token, 'tools/call', { name: 'search_memory', arguments: { query: 'Release' } });
    assert.equal(before.status, 200, before.text);
    await page.getByRole('button', { name: 'Revoke release pipeline' }).click();
    await page.waitForURL((u) => u.searchParams.has('revoked'));
    await page.getByText('That token is revoked').waitFor();
    assert.equal(await page.getByRole('button', { name: 'Revoke release pipeline' }).count(), 0);
    // The agent's connected client: its next call is refused, and so is a fresh request.
    await assert.rejects(search(client, { query: 'Release shipped' }), /401|nauthori[sz]ed|invalid_token/i);
    const next = await raw2026(`${server.base}/mcp/default`, token, 'tools/call', { name: 'search_memory', arguments: { query: 'Release' } });
    assert.equal(next.status, 401, `the revoked token's next MCP call: ${next.text}`);
    const stillOwner = await raw2026(`${server.base}/mcp/default`, server.ownerToken, 'tools/call', { name: 'search_memory', arguments: { query: 'Release' } });
    assert.equal(stillOwner.status, 200);
  } finally {
    await context.close();
    await client.close().catch(() => {});
  }
});

test('the owner browses the records: types and schemas, entities newest first, a neighbourhood graph', async () => {
  const post = async (name, body) => {
    const r = await apiPost(server.base, 'default', name, server.ownerToken, body);
    assert.equal(r.status, 200, `${name}: ${JSON.stringify(r.json)}`);
    return r.json;
  };
  await post('templates.create', {
    name: 'service', description: 'A service we deploy',
    schema: { type: 'object', properties: { team: { type: 'string', description: 'The owning team' }, tier: { type: 'integer' } }, required: ['team'] },
  });
  const made = await post('entities.create_many', {
    type: 'service',
    items: Array.from({ length: 70 }, (_, i) => ({ name: `svc-${String(i).padStart(2, '0')}`, properties: { team: ['payments', 'search', 'platform'][i % 3], tier: i % 3 } })),
  });
  const ids = made.items.map((e) => e.id);
  const hub = (await post('entities.create', { type: 'service', name: 'checkout-gateway', properties: { team: 'payments', tier: 0 } })).id;
  for (const [to, type] of [[ids[0], 'calls'], [ids[1], 'calls'], [ids[2], 'depends_on'], [ids[3], 'publishes_to']]) {
    await post('relationships.create', { type, from: hub, to });
  }
  await post('relationships.create', { type: 'monitors', from: ids[4], to: hub });
  await post('memory.save', { content: 'checkout-gateway timed out during the spring sale', entity_ids: [hub] });

  const { context, page } = await ownerAt('/app/default/records');
  try {
    await page.getByRole('heading', { name: 'Entity types' }).waitFor();
    await page.getByText('The owning team').waitFor();
    await shots(context, page, 'records');
    await page.getByRole('link', { name: 'service', exact: true }).click();
    await page.waitForURL((u) => u.pathname === '/app/default/records/service');
    const rows = page.locator('main tbody tr');
    assert.equal(await rows.count(), 50);
    assert.match(await rows.first().textContent(), /checkout-gateway/, 'newest first');
    await shots(context, page, 'records-type');
    await page.getByRole('link', { name: 'Older entities' }).click();
    assert.equal(await rows.count(), 21);
    await page.goto(`${server.base}/app/default/records/service?prop=team&value=search`);
    assert.equal(await rows.count(), 23);

    await page.goto(`${server.base}/app/default/entities/${hub}`);
    await page.getByRole('heading', { name: 'checkout-gateway' }).waitFor();
    assert.equal(await page.locator('svg.graph a').count(), 5);
    await page.getByText('timed out during the spring sale').waitFor();
    await shots(context, page, 'records-entity');
    // A neighbour in the graph is a link to its own page.
    await page.locator(`svg.graph a[href$="${ids[4]}"]`).click();
    await page.waitForURL((u) => u.pathname.endsWith(ids[4]));
    await page.getByRole('heading', { name: 'svc-04' }).waitFor();
    assert.match(await page.locator('main').textContent(), /monitors/);
  } finally {
    await context.close();
  }
});

test('the cross-org probes: a member of one org reaches nothing of another through any app route', async () => {
  const initech = await createOrg(server, 'initech');
  const theirs = await apiPost(server.base, 'initech', 'memory.save', initech.token, { content: 'Initech layoffs codename Swingline' });
  assert.equal(theirs.status, 200, JSON.stringify(theirs.json));
  const memoryId = theirs.json.ids[0];
  const actions = await apiPost(server.base, 'initech', 'actions.list', initech.token, { newest_first: true });
  const actionId = actions.json.items[0].id;
  const tokens = await apiPost(server.base, 'initech', 'tokens.list', initech.token, {});
  assert.equal((await apiPost(server.base, 'initech', 'templates.create', initech.token, { name: 'project', schema: { type: 'object' } })).status, 200);
  const entity = await apiPost(server.base, 'initech', 'entities.create', initech.token, { type: 'project', name: 'Swingline relaunch' });
  const entityId = entity.json.id;
  const tokenId = tokens.json[0].id;
  // The GitHub viewer of default (invited above) signs in.
  const context = await browser.newContext({ viewport: DESKTOP });
  const page = await context.newPage();
  try {
    await page.goto(`${server.base}/app/default/memory`);
    await page.getByRole('button', { name: 'Continue with GitHub' }).click();
    await page.waitForURL((u) => u.pathname === '/app/default/memory');
    const csrf = await page.locator('input[name=csrf]').first().inputValue();
    for (const route of [
      '/app/initech', '/app/initech/memory', '/app/initech/actions', '/app/initech/usage', '/app/initech/access',
      '/app/initech/records', '/app/initech/records/project', `/app/initech/entities/${entityId}`,
      '/app/default/records/project', `/app/default/entities/${entityId}`,
      `/app/initech/memory/${memoryId}`, `/app/initech/actions/${actionId}`,
      `/app/default/memory/${memoryId}`, `/app/default/actions/${actionId}`,
      '/app/INITECH/memory', '/app/initech%2F../default/memory', '/app/default/../initech/memory',
    ]) {
      const r = await page.request.get(`${server.base}${route}`, { maxRedirects: 0 });
      assert.ok([404, 400].includes(r.status()), `${route}: ${r.status()}`);
      assert.ok(!(await r.text()).includes('Swingline'), route);
    }
    for (const [route, form] of [
      [`/app/initech/memory/${memoryId}`, { csrf, content: 'hijacked' }],
      [`/app/default/memory/${memoryId}`, { csrf, content: 'hijacked' }],
      ['/app/initech/access/revoke', { csrf, token: tokenId }],
      ['/app/default/access/revoke', { csrf, token: tokenId }],
    ]) {
      const r = await page.request.post(`${server.base}${route}`, { form, headers: { origin: server.base }, maxRedirects: 0 });
      assert.ok([403, 404].includes(r.status()), `${route}: ${r.status()}`);
    }
    for (const q of ['Swingline', 'layoffs codename']) {
      const r = await page.request.get(`${server.base}/app/default/memory?q=${encodeURIComponent(q)}`);
      assert.equal(r.status(), 200);
      assert.ok(!(await r.text()).includes('Swingline layoffs'), q);
    }
    const usage = await page.request.get(`${server.base}/app/default/usage`);
    assert.equal(usage.status(), 200);
    // initech's token still works and its memory is unchanged.
    const still = await apiPost(server.base, 'initech', 'memory.search', initech.token, { query: 'Swingline' });
    assert.equal(still.status, 200);
    assert.equal(still.json.results[0].content, 'Initech layoffs codename Swingline');
  } finally {
    await context.close();
  }
});
