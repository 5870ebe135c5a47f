// The web app's pages on an org of N memories and E entities (default 100,000 each) and an
// audit log of about A + N/100 + E/500 actions (A default 20,000) on `lore serve`, each page
// beside the SDK calls it makes (the same arguments over REST with a token) in the same run:
// what a page costs on top of the data it shows (the browser session, the caller, the HTML),
// and whether it stays responsive at that size. `bash bench/app.sh` builds and runs it.
//
//   node bench/app.mjs <lore binary>        env: N (100000), E (100000), A (20000), ROUNDS (40)
//
// Seeds the memories through REST `memory.save` (batches of 100 one after the other, the
// built-in embedder so that seeding takes about a minute, rate limits off), the entities through
// `entities.create_many` (500 a call; one in 1,000 of team `rare`) with one hub entity related
// to 20 of them, and A single saves (16 at a time; one in 1,000 by a second member) for the
// audit log (saved first); signs in through the real sign-in page with the owner's password, then for each
// page alternates a page load and its SDK calls, ROUNDS times, checking every answer.
import { startLore, run, percentile } from './lib.mjs';

const lore = process.argv[2];
const N = Number(process.env.N || 100_000);
const E = Number(process.env.E || 100_000);
const A = Number(process.env.A || 20_000);
const ROUNDS = Number(process.env.ROUNDS || 40);
const PASSWORD = 'bench owner password for the app';
const TEAMS = ['payments', 'search', 'billing', 'platform', 'mobile', 'growth', 'infra', 'support'];
const TOPICS = ['deploys', 'invoices', 'latency', 'onboarding', 'alerts', 'migrations', 'pricing', 'backups'];

const server = await startLore(lore, {
  orgs: ['bench'],
  args: ['--embedder', 'builtin', '--rate-token-per-minute', '0', '--rate-org-per-minute', '0'],
  name: 'app',
});
try {
  await run(lore, ['password', '--db', server.db], { env: { ...process.env, LORE_OWNER_PASSWORD: PASSWORD } });
  const token = await server.token('bench', 'admin');
  const { stdout: issued } = await run(lore, ['token', 'create', '--db', server.db, '--org', 'bench', '--role', 'member', '--json']);
  const other = JSON.parse(issued);
  const rest = async (name, body, as = token) => {
    const r = await fetch(`${server.base}/api/bench/${name}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${as}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const json = await r.json();
    if (r.status !== 200) throw new Error(`${name}: ${r.status} ${JSON.stringify(json)}`);
    return json;
  };

  // Seed: one memory in a thousand is a decision (the rare filter below).
  const started = Date.now();
  // The audit log first (the memory pages below show the newest memories): A single saves,
  // 16 at a time; one in 1,000 by the second member.
  let next = 0;
  await Promise.all(Array.from({ length: 16 }, async () => {
    while (next < A) {
      const i = next++;
      await rest('memory.save', { content: `Audit note ${i}` }, i % 1000 === 7 ? other.token : token);
    }
  }));
  const ids = [];
  for (let from = 0; from < N; from += 100) {
    const memories = [];
    for (let i = from; i < Math.min(N, from + 100); i++) {
      memories.push({
        content: `Note ${i}: the ${TEAMS[i % 8]} team looked at ${TOPICS[(i >> 3) % 8]} and wrote down item ${i % 977}`,
        kind: i % 1000 === 7 ? 'decision' : 'observation',
      });
    }
    ids.push(...(await rest('memory.save', { memories })).ids);
  }
  if (ids.length !== N) throw new Error(`seeded ${ids.length} of ${N}`);
  // Entities: one in 1,000 of team `rare` (the rare filter), and a hub with 20 neighbours.
  await rest('templates.create', {
    name: 'service',
    schema: { type: 'object', properties: { team: { type: 'string' }, tier: { type: 'integer' } }, required: ['team'] },
  });
  const entityIds = [];
  for (let from = 0; from < E; from += 500) {
    const items = [];
    for (let i = from; i < Math.min(E, from + 500); i++) {
      items.push({ name: `svc-${i}`, properties: { team: i % 1000 === 7 ? 'rare' : TEAMS[i % 8], tier: i % 3 } });
    }
    entityIds.push(...(await rest('entities.create_many', { type: 'service', items })).items.map((e) => e.id));
  }
  if (entityIds.length !== E) throw new Error(`seeded ${entityIds.length} of ${E} entities`);
  const hub = (await rest('entities.create', { type: 'service', name: 'hub', properties: { team: 'platform', tier: 0 } })).id;
  for (let i = 0; i < 20; i++) {
    await rest('relationships.create', { type: i % 2 ? 'calls' : 'depends_on', from: hub, to: entityIds[(i * 7919) % E] });
  }
  const seedSeconds = (Date.now() - started) / 1000;
  // A memory with three versions, for the versions page.
  let latest = ids[Math.floor(N / 3)];
  for (const text of ['second version', 'third version']) {
    latest = (await rest('memory.save', { content: `Corrected: ${text}`, supersedes_event_id: latest })).ids[0];
  }

  // Sign in through the page, as a browser does.
  const signin = await fetch(`${server.base}/oauth/signin?request=%2Fapp%2Fbench%2Fmemory`);
  const cookie = signin.headers.get('set-cookie').split(';')[0];
  const html = await signin.text();
  const csrf = html.match(/name="csrf" value="([^"]+)"/)[1];
  const posted = await fetch(`${server.base}/oauth/signin`, {
    method: 'POST',
    redirect: 'manual',
    headers: { cookie, 'content-type': 'application/x-www-form-urlencoded', origin: server.base },
    body: new URLSearchParams({ csrf, then: '/app/bench/memory', password: PASSWORD }),
  });
  if (posted.status !== 303) throw new Error(`sign-in: ${posted.status} ${await posted.text()}`);
  const session = posted.headers.get('set-cookie').split(';')[0];

  const page = async (path, expect) => {
    const r = await fetch(`${server.base}${path}`, { headers: { cookie: session } });
    const text = await r.text();
    if (r.status !== 200 || !text.includes(expect)) throw new Error(`${path}: ${r.status}, no ${JSON.stringify(expect)}:\n${text.slice(0, 2000)}`);
  };
  const deep = ids[Math.floor(N / 2)];
  const newest = await rest('actions.list', { newest_first: true, limit: 1 });
  const actionId = newest.items[0].id;
  const entityDeep = entityIds[Math.floor(E / 2)].slice(4);
  const sdk = (...calls) => async () => { for (const [method, args] of calls) await rest(method, args); };
  const cases = [
    ['memory: timeline, newest 50', '/app/bench/memory', `Note ${N - 1}:`, sdk(['memory.list', { limit: 50, include_superseded: false }])],
    ['memory: timeline, 50 from the middle (cursor)', `/app/bench/memory?cursor=${deep}`, `Note ${Math.floor(N / 2) - 1}:`, sdk(['memory.list', { limit: 50, include_superseded: false, cursor: deep }])],
    ['memory: a kind one memory in 1,000 has', '/app/bench/memory?kind=decision', 'decision', sdk(['memory.list', { limit: 50, include_superseded: false, kinds: ['decision'] }])],
    ['memory: search, 20 best', '/app/bench/memory?q=payments+team+invoices', 'payments team', sdk(['memory.search', { query: 'payments team invoices', limit: 20, include_superseded: false }])],
    ['memory: one with its 3 versions', `/app/bench/memory/${latest}`, 'third version', sdk(['memory.versions', { id: latest }])],
    ['records: types and the newest 20', '/app/bench/records', 'Newest entities', sdk(['templates.list', {}], ['entities.list', { newest_first: true, limit: 20 }])],
    ['records: a type, newest 50', '/app/bench/records/service', '50 entities, newest first.', sdk(['entities.list', { type: 'service', newest_first: true, limit: 50 }])],
    ['records: 50 from the middle (cursor)', `/app/bench/records/service?cursor=${entityDeep}`, '50 entities, newest first.', sdk(['entities.list', { type: 'service', newest_first: true, limit: 50, cursor: entityDeep }])],
    ['records: a property one entity in 1,000 has', '/app/bench/records/service?prop=team&value=rare', '<b>team</b> rare', sdk(['entities.list', { type: 'service', newest_first: true, limit: 50, where: { team: 'rare' } }])],
    ['records: an entity with 20 neighbours', `/app/bench/entities/${hub}`, '20 relationships.', sdk(['entities.get', { id: hub }], ['relationships.list', { entity_id: hub, limit: 200 }])],
    ['actions: newest 50', '/app/bench/actions', 'newest first', sdk(['actions.list', { newest_first: true, limit: 50 }])],
    ['actions: one member in 1,000 acts', `/app/bench/actions?agent=${other.principal}`, 'newest first', sdk(['actions.list', { newest_first: true, limit: 50, principal: other.principal }])],
    ['actions: one action', `/app/bench/actions/${actionId}`, 'memory.save', sdk(['actions.get', { id: actionId }])],
    ['usage: 30 days by day and tool', '/app/bench/usage', 'Calls per day', sdk(['metrics.query', { name: 'tool_calls', group_by: 'day_and_tool' }], ['metrics.query', { name: 'tool_errors', group_by: 'day_and_tool' }], ['metrics.query', { name: 'cap_hits', group_by: 'day_and_tool' }])],
    ['access: members, tokens, grants', '/app/bench/access', 'API tokens', sdk(['members.list', {}], ['tokens.list', {}], ['grants.list', {}])],
  ];
  const rows = [];
  for (const [name, path, expect, calls] of cases) {
    for (let i = 0; i < 3; i++) {
      await page(path, expect);
      await calls();
    }
    const app = [];
    const sdks = [];
    for (let i = 0; i < ROUNDS; i++) {
      let t = performance.now();
      await page(path, expect);
      app.push(performance.now() - t);
      t = performance.now();
      await calls();
      sdks.push(performance.now() - t);
    }
    rows.push({ name, app, sdk: sdks });
  }
  console.log(JSON.stringify({ n: N, e: E, a: A, rounds: ROUNDS, seed_seconds: seedSeconds, rows: rows.map((r) => ({ name: r.name, app_p50: percentile(r.app, 50), app_p99: percentile(r.app, 99), sdk_p50: percentile(r.sdk, 50), sdk_p99: percentile(r.sdk, 99) })) }));
  console.log(`\n${N.toLocaleString('en')} memories, ${E.toLocaleString('en')} entities, ${(A + Math.ceil(N / 100) + Math.ceil(E / 500)).toLocaleString('en')} actions (seeded in ${seedSeconds.toFixed(0)} s), ${ROUNDS} loads of each page, each beside its SDK calls over REST:\n`);
  console.log('| page | app p50 | app p99 | its SDK calls p50 | p99 | app / SDK (p50) |');
  console.log('|---|---:|---:|---:|---:|---:|');
  for (const r of rows) {
    const [a50, a99, s50, s99] = [percentile(r.app, 50), percentile(r.app, 99), percentile(r.sdk, 50), percentile(r.sdk, 99)];
    console.log(`| ${r.name} | ${a50.toFixed(2)} ms | ${a99.toFixed(2)} ms | ${s50.toFixed(2)} ms | ${s99.toFixed(2)} ms | ${(a50 / s50).toFixed(2)}× |`);
  }
} finally {
  await server.stop();
}
