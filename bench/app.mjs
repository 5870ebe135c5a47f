// The web app's memory pages on an org of N memories (default 100,000) on `lore serve`, each
// page beside the SDK call it makes (the same arguments over REST with a token) in the same
// run: what a page costs on top of the data it shows (the browser session, the caller, the
// HTML), and whether it stays responsive at that size. `bash bench/app.sh` builds and runs it.
//
//   node bench/app.mjs <lore binary>        env: N (100000), ROUNDS (40)
//
// Seeds the memories through REST `memory.save` (batches of 100 one after the other, the
// built-in embedder so that seeding takes about a minute, rate limits off), signs in through the real sign-in page with the
// owner's password, then for each page alternates a page load and its SDK call, ROUNDS times,
// checking every answer.
import { startLore, run, percentile } from './lib.mjs';

const lore = process.argv[2];
const N = Number(process.env.N || 100_000);
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
  const rest = async (name, body) => {
    const r = await fetch(`${server.base}/api/bench/${name}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const json = await r.json();
    if (r.status !== 200) throw new Error(`${name}: ${r.status} ${JSON.stringify(json)}`);
    return json;
  };

  // Seed: one memory in a thousand is a decision (the rare filter below).
  const started = Date.now();
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
  const cases = [
    ['timeline, newest 50', '/app/bench/memory', `Note ${N - 1}:`, 'memory.list', { limit: 50, include_superseded: false }],
    ['timeline, 50 from the middle (cursor)', `/app/bench/memory?cursor=${deep}`, `Note ${Math.floor(N / 2) - 1}:`, 'memory.list', { limit: 50, include_superseded: false, cursor: deep }],
    ['a kind one memory in 1,000 has', '/app/bench/memory?kind=decision', 'decision', 'memory.list', { limit: 50, include_superseded: false, kinds: ['decision'] }],
    ['search, 20 best', '/app/bench/memory?q=payments+team+invoices', 'payments team', 'memory.search', { query: 'payments team invoices', limit: 20, include_superseded: false }],
    ['a memory with its 3 versions', `/app/bench/memory/${latest}`, 'third version', 'memory.versions', { id: latest }],
  ];
  const rows = [];
  for (const [name, path, expect, method, args] of cases) {
    for (let i = 0; i < 3; i++) {
      await page(path, expect);
      await rest(method, args);
    }
    const app = [];
    const sdk = [];
    for (let i = 0; i < ROUNDS; i++) {
      let t = performance.now();
      await page(path, expect);
      app.push(performance.now() - t);
      t = performance.now();
      await rest(method, args);
      sdk.push(performance.now() - t);
    }
    rows.push({ name, app, sdk });
  }
  console.log(JSON.stringify({ n: N, rounds: ROUNDS, seed_seconds: seedSeconds, rows: rows.map((r) => ({ name: r.name, app_p50: percentile(r.app, 50), app_p99: percentile(r.app, 99), sdk_p50: percentile(r.sdk, 50), sdk_p99: percentile(r.sdk, 99) })) }));
  console.log(`\n${N.toLocaleString('en')} memories (seeded in ${seedSeconds.toFixed(0)} s), ${ROUNDS} loads of each page, each beside its SDK call over REST:\n`);
  console.log('| page | app p50 | app p99 | its SDK call p50 | p99 | app / SDK (p50) |');
  console.log('|---|---:|---:|---:|---:|---:|');
  for (const r of rows) {
    const [a50, a99, s50, s99] = [percentile(r.app, 50), percentile(r.app, 99), percentile(r.sdk, 50), percentile(r.sdk, 99)];
    console.log(`| ${r.name} | ${a50.toFixed(2)} ms | ${a99.toFixed(2)} ms | ${s50.toFixed(2)} ms | ${s99.toFixed(2)} ms | ${(a50 / s50).toFixed(2)}× |`);
  }
} finally {
  await server.stop();
}
