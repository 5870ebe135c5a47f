// Cold and warm `search_memory` (and warm `tools/list`) by org size on the three platforms, side
// by side in one run:
// `lore serve` (release build, SQLite; cold = the first search of a fresh process), Workers (the
// product bundle under workerd with D1 through Miniflare; cold = the first search of a fresh
// workerd process, so a fresh isolate) and Spin (the component in the wasmtime dev host, which
// makes a fresh instance for every request, so every request is cold). Run through
// bench/cold.sh, which builds all three and sets the environment.
//
// For each org size N in SIZES (default "0 1000 10000"): each target starts on fresh data and is
// seeded with the same N memories (bench/seed.py); then ROUNDS restarts, each timing the first
// `search_memory`; then WARM sequential searches on the running server. Every query is new to
// the server (a word and a number no earlier query had), so no answer and no query embedding
// is cached. Every response is checked (HTTP 200, a result; hits when N > 0). The table shows
// each target's cold median beside its warm p50 and their ratio. The issue's bound for a fresh
// process or isolate is "cold within 2x of warm plus one snapshot load"; one snapshot load is
// measured as the first *filtered* search of a fresh process (a filter needs every document's
// metadata, so that search loads the org's whole index before it answers), over ROUNDS more
// restarts, and the table says whether cold <= 2 x warm p50 + load. TARGETS may add
// `worker-d1`: the Worker serving every org itself over D1, as before org objects (a test-build
// switch), beside `worker`; DELAY_MS=40 makes every Workers subrequest wait that long first.
// Loopback only; bounded loops.
import { spawn, execFile } from 'node:child_process';
import crypto from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..');
const LORE = process.env.LORE_RELEASE_BIN;
const HOST = process.env.SPIN_HOST;
const COMPONENT = process.env.SPIN_COMPONENT;
const SIZES = (process.env.SIZES ?? '0 1000 10000').split(/\s+/).filter(Boolean).map(Number);
const ROUNDS = Number(process.env.ROUNDS ?? 5);
const WARM = Number(process.env.WARM ?? 60);
const TARGETS = (process.env.TARGETS ?? 'native worker spin').split(/\s+/).filter(Boolean);
// A wait before every subrequest of the Workers test build (each D1 query, each call to an org
// object): a stand-in for the distance to a database primary or an object elsewhere. With it
// the Workers targets run the test build (build-test/), which honours LORE_TEST_DELAY_MS.
const DELAY_MS = Number(process.env.DELAY_MS ?? 0);
const META = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
// Words of the seeded sentences: each query is two of them and a number never asked before.
const WORDS = ['billing', 'postgres', 'kafka', 'runbook', 'stripe', 'timeout', 'renewal', 'credentials', 'latency',
  'migrate', 'dashboards', 'warehouse', 'invoice', 'oncall', 'deploy', 'compliance', 'onboarding', 'redis'];
let asked = 0;
function freshQuery() {
  const i = asked++;
  return `${WORDS[i % WORDS.length]} ${WORDS[(i * 7 + 3) % WORDS.length]} ${100000 + i}`;
}

function delay(ms) { return new Promise((r) => setTimeout(r, ms)); }

// Rate limits are off on every target (the seeding alone is more calls a minute than the
// default allows); nothing else differs from the defaults.
const NO_LIMITS = { LORE_RATE_TOKEN_PER_MINUTE: '0', LORE_RATE_ORG_PER_MINUTE: '0' };

function startProcess(cmd, args, pattern) {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], cwd: REPO, env: { ...process.env, ...NO_LIMITS, RUST_LOG: 'warn' } });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { out += d; });
  const exited = new Promise((r) => child.on('exit', r));
  return {
    async ready(timeoutMs = 120_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const m = pattern.exec(out);
        if (m) return m;
        if (child.exitCode !== null || Date.now() > deadline) throw new Error(`${cmd} did not start:\n${out}`);
        await delay(10);
      }
    },
    get output() { return out; },
    async stop() { child.kill('SIGTERM'); await exited; },
  };
}

async function operatorInit(base, secret) {
  const init = await (await fetch(`${base}/operator/init`, { method: 'POST', headers: { authorization: `Bearer ${secret}` }, body: '{}' })).json();
  return init.status === 'created' ? init.token : null;
}

// The Worker under workerd: the product bundle, or the test build where a test variable is set
// (the delay; the Worker serving orgs over D1, `worker-d1`).
// The delay is left out while seeding (it would only make the seeding slow); every restart
// that is measured has it.
async function startWorker(dir, testVars, seeding) {
  const delayed = DELAY_MS && !seeding ? { LORE_TEST_DELAY_MS: String(DELAY_MS) } : {};
  const vars = { ...NO_LIMITS, ...testVars, ...delayed };
  const build = Object.keys(vars).some((k) => k.startsWith('LORE_TEST_')) ? 'build-test' : 'build';
  const p = startProcess(process.execPath, [path.join(REPO, 'tests', 'worker', 'serve.mjs'), '--build', build, '--persist', dir,
    ...Object.entries(vars).flatMap(([k, v]) => ['--var', `${k}=${v}`])],
    /lore worker listening on (http:\/\/127\.0\.0\.1:\d+)\/mcp operator-secret=(\w+)/);
  const [, base, secret] = await p.ready();
  return { p, base, token: await operatorInit(base, secret) };
}

const targets = {
  native: {
    label: 'lore serve (SQLite)',
    perRequest: false,
    async start(dir) {
      const p = startProcess(LORE, ['serve', '--addr', '127.0.0.1:0', '--db', path.join(dir, 'lore.db')], /lore listening on (http:\/\/127\.0\.0\.1:\d+)\/mcp/);
      const [, base] = await p.ready();
      const token = /owner token \(shown once\):\s+(lore_[A-Za-z0-9_-]+)/.exec(p.output)?.[1];
      return { p, base, token };
    },
  },
  worker: {
    label: `Workers, org objects${DELAY_MS ? ` (+${DELAY_MS} ms per subrequest)` : ''}`,
    perRequest: false,
    start: (dir, seeding) => startWorker(dir, {}, seeding),
  },
  'worker-d1': {
    label: `Workers over D1, before org objects${DELAY_MS ? ` (+${DELAY_MS} ms per subrequest)` : ''}`,
    perRequest: false,
    start: (dir, seeding) => startWorker(dir, { LORE_TEST_ORGS_IN_D1: '1' }, seeding),
  },
  spin: {
    label: 'Spin (dev host, instance per request)',
    perRequest: true,
    async start(dir) {
      const secret = crypto.randomBytes(24).toString('hex');
      const p = startProcess(HOST, [COMPONENT, '--addr', '127.0.0.1:0', '--db', path.join(dir, 'lore-spin.db'), '--var', `lore_operator_secret=${secret}`,
        ...Object.entries(NO_LIMITS).flatMap(([k, v]) => ['--var', `${k.toLowerCase()}=${v}`])],
        / on (http:\/\/127\.0\.0\.1:\d+) .*component loaded in (\d+) ms/);
      const [, base] = await p.ready();
      return { p, base, token: await operatorInit(base, secret) };
    },
  },
};

async function toolsList(s) {
  const headers = {
    'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28',
    'mcp-method': 'tools/list', authorization: `Bearer ${s.token}`,
  };
  const t0 = performance.now();
  const res = await fetch(`${s.base}/mcp`, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: META } }) });
  const body = await res.json();
  if (res.status !== 200 || !Array.isArray(body.result?.tools)) throw new Error(`tools/list: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
  return performance.now() - t0;
}

// Every kind bench/seed.py saves: the filter keeps every memory but makes the search load the
// org's index first.
const ALL_KINDS = ['fact', 'preference', 'decision', 'observation', 'note'];

async function search(s, expectHits, filtered = false) {
  const headers = {
    'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28',
    'mcp-method': 'tools/call', 'mcp-name': 'search_memory', authorization: `Bearer ${s.token}`,
  };
  const args = { query: freshQuery(), ...(filtered ? { kinds: ALL_KINDS } : {}) };
  const params = { name: 'search_memory', arguments: args, _meta: META };
  const t0 = performance.now();
  const res = await fetch(`${s.base}/mcp`, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params }) });
  const body = await res.json();
  const ms = performance.now() - t0;
  const results = body.result?.structuredContent?.results;
  if (res.status !== 200 || !Array.isArray(results) || (expectHits && results.length === 0)) {
    throw new Error(`search_memory: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
  }
  return ms;
}

function seed(s, n) {
  if (n === 0) return Promise.resolve('');
  return new Promise((resolve, reject) => {
    execFile('python3', [path.join(HERE, 'seed.py'), `${s.base}/mcp`, s.token, 'postgres backups|Acme renewal', String(n)], { maxBuffer: 16 << 20 },
      (e, stdout, stderr) => (e ? reject(new Error(`${e.message}\n${stderr}`)) : resolve(stdout)));
  });
}

function stats(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
  return { n: s.length, p50: q(0.5), p99: q(0.99), min: s[0], max: s[s.length - 1] };
}

const fmt = (x) => x.toFixed(1);

async function measure(name, n) {
  const target = targets[name];
  const dir = await mkdtemp(path.join(tmpdir(), `lore-cold-${name}-`));
  try {
    let s = await target.start(dir, true);
    const token = s.token;
    const t0 = performance.now();
    await seed(s, n);
    process.stderr.write(`== ${name} N=${n}: seeded in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
    const cold = [];
    const first = [];
    const load = [];
    if (!target.perRequest) {
      // A fresh process or isolate on the same data; its first request pays for starting it
      // (the bundle's compile, the token's first check), so each search below comes after one.
      const restart = async () => {
        await s.p.stop();
        s = { ...(await target.start(dir, false)), token };
        return toolsList(s);
      };
      for (let r = 0; r < ROUNDS; r++) {
        first.push(await restart());
        cold.push(await search(s, n > 0));
      }
      for (let r = 0; r < ROUNDS; r++) {
        await restart();
        load.push(await search(s, n > 0, true));
      }
    }
    for (let i = 0; i < 5; i++) await search(s, n > 0);
    const warm = [];
    for (let i = 0; i < WARM; i++) warm.push(await search(s, n > 0));
    const list = [];
    for (let i = 0; i < WARM; i++) list.push(await toolsList(s));
    await s.p.stop();
    return {
      cold: cold.length ? stats(cold) : null, first: first.length ? stats(first) : null, load: load.length ? stats(load) : null, warm: stats(warm), list: stats(list),
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function main() {
  for (const name of TARGETS) {
    if (!targets[name]) throw new Error(`unknown target ${name}; targets: ${Object.keys(targets).join(', ')}`);
  }
  if (TARGETS.includes('native') && !LORE) throw new Error('LORE_RELEASE_BIN is not set; run bench/cold.sh');
  if (TARGETS.includes('spin') && !(HOST && COMPONENT)) throw new Error('SPIN_HOST and SPIN_COMPONENT are not set; run bench/cold.sh');
  const rows = [];
  for (const n of SIZES) {
    for (const name of TARGETS) {
      const row = { name, n, ...(await measure(name, n)) };
      rows.push(row);
      // Each row as it is measured, so that a later failure does not lose it.
      process.stderr.write(`== ${name} N=${n}: ${JSON.stringify({ first: row.first?.p50, cold: row.cold?.p50, load: row.load?.p50, warm: row.warm.p50, warm_p99: row.warm.p99, list: row.list.p50 })}\n`);
    }
  }
  console.log('\nrate limits off on every target (LORE_RATE_TOKEN_PER_MINUTE=0, LORE_RATE_ORG_PER_MINUTE=0)');
  if (DELAY_MS) console.log(`every Workers subrequest (D1 query, call to an org object) waits ${DELAY_MS} ms first (test build, LORE_TEST_DELAY_MS); lore serve and Spin have no delay`);
  console.log(`\nfirst request = a tools/list to a fresh process or isolate (it starts it); cold = the first search_memory after it (median of ${ROUNDS} restarts, min-max); Spin makes a fresh instance for every request, so its every request is cold; warm = ${WARM} sequential searches (p50 / p99). Every query is new to the server. ms\n`);
  console.log('one snapshot load = the first filtered search of a fresh process or isolate (it loads the whole index before answering; median of the same number of restarts); bound = 2 x warm p50 + load, met when cold <= bound.\n');
  console.log(`warm tools/list = ${WARM} sequential tools/list after the searches (p50 / p99).\n`);
  console.log('| target | memories | first request | cold search median | cold min-max | warm p50 | warm p99 | cold / warm p50 | one snapshot load | bound | cold within | warm tools/list p50 | p99 |');
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |');
  for (const r of rows) {
    const c = r.cold;
    const f = r.first;
    const l = r.load;
    const bound = l ? 2 * r.warm.p50 + l.p50 : null;
    const within = c && bound !== null ? (c.p50 <= bound ? 'yes' : '**no**') : '';
    console.log(`| ${targets[r.name].label} | ${r.n.toLocaleString('en')} | ${f ? fmt(f.p50) : ''} | ${c ? fmt(c.p50) : '(every request)'} | ${c ? `${fmt(c.min)}-${fmt(c.max)}` : ''} | ${fmt(r.warm.p50)} | ${fmt(r.warm.p99)} | ${c ? (c.p50 / r.warm.p50).toFixed(1) : ''} | ${l ? fmt(l.p50) : ''} | ${bound !== null ? fmt(bound) : ''} | ${within} | ${fmt(r.list.p50)} | ${fmt(r.list.p99)} |`);
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
