// Cold and warm request latency of lore on Workers (the product bundle under workerd, D1 and KV
// through Miniflare) beside `lore serve` (release build, SQLite), in one run. Run through
// bench/worker.sh, which builds both and sets the environment.
//
// For each target: seed SEED_N memories (bench/seed.py, the same sentences for both), then
// ROUNDS times: restart the server on the same data and time its first `tools/list`; restart
// again and time its first `search_memory` (a cold instance: it loads the org's memory index
// from storage). Then WARM sequential requests of each on the running server.
// Every response is checked (HTTP 200, a result, search hits), and both targets must find as many
// memories for every query (limit 100), the same ones when the org holds no more than that. Their
// scores and order are not compared: the two embed differently (all-MiniLM-L6-v2 natively; under
// Miniflare the Workers AI binding is tests/worker/serve.mjs's stand-in of hashed words).
// Loopback only; bounded loops.
import { spawn, execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..');
const LORE = process.env.LORE_RELEASE_BIN;
const ROUNDS = Number(process.env.ROUNDS ?? 7);
const WARM = Number(process.env.WARM ?? 200);
const SEED_N = Number(process.env.SEED_N ?? 1000);
const QUERIES = ['stripe integration timeout', 'postgres backups', 'who owns the kafka runbook', 'billing team decided to migrate',
  'rotate credentials', 'Acme renewal', 'dark mode', 'latency regressed after the upgrade'];
const META = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };

// Latency, not limits: rate limits are off on both targets (said in the output).
const NO_LIMITS = { LORE_RATE_TOKEN_PER_MINUTE: '0', LORE_RATE_ORG_PER_MINUTE: '0' };

function delay(ms) { return new Promise((r) => setTimeout(r, ms)); }

function startProcess(cmd, args, pattern) {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], cwd: REPO, env: { ...process.env, RUST_LOG: 'warn', ...NO_LIMITS } });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { out += d; });
  const exited = new Promise((r) => child.on('exit', r));
  return {
    child,
    exited,
    async ready(timeoutMs = 60_000) {
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

const targets = {
  native: {
    async start(dir) {
      const p = startProcess(LORE, ['serve', '--addr', '127.0.0.1:0', '--db', path.join(dir, 'lore.db')], /lore listening on (http:\/\/127\.0\.0\.1:\d+)\/mcp/);
      const [, base] = await p.ready();
      const token = /owner token \(shown once\):\s+(lore_[A-Za-z0-9_-]+)/.exec(p.output)?.[1];
      return { p, base, token };
    },
  },
  worker: {
    async start(dir) {
      const p = startProcess(process.execPath, [path.join(REPO, 'tests', 'worker', 'serve.mjs'), '--build', 'build', '--persist', dir,
        ...Object.entries(NO_LIMITS).flatMap(([k, v]) => ['--var', `${k}=${v}`])],
        /lore worker listening on (http:\/\/127\.0\.0\.1:\d+)\/mcp operator-secret=(\w+)/);
      const [, base, secret] = await p.ready();
      const init = await (await fetch(`${base}/operator/init`, { method: 'POST', headers: { authorization: `Bearer ${secret}` }, body: '{}' })).json();
      return { p, base, token: init.status === 'created' ? init.token : null };
    },
  },
};

async function rpc(base, token, method, params) {
  const headers = {
    'content-type': 'application/json', accept: 'application/json, text/event-stream',
    'mcp-protocol-version': '2026-07-28', 'mcp-method': method, authorization: `Bearer ${token}`,
  };
  if (method === 'tools/call') headers['mcp-name'] = params.name;
  const t0 = performance.now();
  const res = await fetch(`${base}/mcp`, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: { ...params, _meta: META } }) });
  const body = await res.json();
  const ms = performance.now() - t0;
  if (res.status !== 200 || !body.result) throw new Error(`${method}: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
  if (method === 'tools/list' && !body.result.tools.some((t) => t.name === 'search_memory')) throw new Error('tools/list: no search_memory');
  if (method === 'tools/call' && !(body.result.structuredContent?.results?.length > 0)) throw new Error(`search found nothing: ${JSON.stringify(body).slice(0, 300)}`);
  return ms;
}

async function answers(s) {
  // What each query finds (limit 100), as sorted texts.
  const out = {};
  for (const query of QUERIES) {
    const res = await fetch(`${s.base}/mcp`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json', accept: 'application/json', 'mcp-protocol-version': '2026-07-28',
        'mcp-method': 'tools/call', 'mcp-name': 'search_memory', authorization: `Bearer ${s.token}`,
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'search_memory', arguments: { query, limit: 100 }, _meta: META } }),
    });
    out[query] = (await res.json()).result.structuredContent.results.map((r) => r.content).sort();
  }
  return out;
}

const list = (s) => rpc(s.base, s.token, 'tools/list', {});
const search = (s, i) => rpc(s.base, s.token, 'tools/call', { name: 'search_memory', arguments: { query: QUERIES[i % QUERIES.length] } });

function seed(base, token) {
  return new Promise((resolve, reject) => {
    execFile('python3', [path.join(HERE, 'seed.py'), `${base}/mcp`, token, QUERIES.join('|'), String(SEED_N)], { maxBuffer: 16 << 20 },
      (e, stdout, stderr) => (e ? reject(new Error(`${e.message}\n${stderr}`)) : resolve(stdout)));
  });
}

function stats(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
  return { n: s.length, p50: q(0.5), p99: q(0.99), min: s[0], max: s[s.length - 1] };
}

const fmt = (x) => x.toFixed(2);

async function main() {
  if (!LORE) throw new Error('LORE_RELEASE_BIN is not set; run bench/worker.sh');
  const results = {};
  for (const [name, target] of Object.entries(targets)) {
    const dir = await mkdtemp(path.join(tmpdir(), `lore-bench-${name}-`));
    try {
      let s = await target.start(dir);
      const token = s.token;
      process.stderr.write(`== ${name}: seeding ${SEED_N} memories\n`);
      await seed(s.base, token);
      const cold = { list: [], search: [] };
      for (let r = 0; r < ROUNDS; r++) {
        for (const kind of ['list', 'search']) {
          await s.p.stop();
          s = { ...(await target.start(dir)), token };
          cold[kind].push(kind === 'list' ? await list(s) : await search(s, r));
        }
      }
      // Warm: the same running instance, sequential requests.
      for (let i = 0; i < 20; i++) { await list(s); await search(s, i); }
      const warm = { list: [], search: [] };
      for (let i = 0; i < WARM; i++) warm.list.push(await list(s));
      for (let i = 0; i < WARM; i++) warm.search.push(await search(s, i));
      const found = await answers(s);
      await s.p.stop();
      results[name] = { answers: found, cold: { list: stats(cold.list), search: stats(cold.search) }, warm: { list: stats(warm.list), search: stats(warm.search) } };
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }
  for (const query of QUERIES) {
    const [a, b] = [results.native.answers[query], results.worker.answers[query]];
    if (a.length !== b.length || (SEED_N <= 100 && JSON.stringify(a) !== JSON.stringify(b))) {
      throw new Error(`targets disagree on ${JSON.stringify(query)}: native ${a.length} results, worker ${b.length}${a.length === b.length ? ', not the same memories' : ''}`);
    }
  }
  console.log(`\n${SEED_N} memories in the org; cold = first request of a fresh process/isolate (median of ${ROUNDS}, min-max), warm = ${WARM} sequential requests (p50 / p99), ms; rate limits off on both\n`);
  console.log('| target | request | cold median | cold min-max | warm p50 | warm p99 |');
  console.log('| --- | --- | ---: | ---: | ---: | ---: |');
  for (const [name, r] of Object.entries(results)) {
    for (const [req, label] of [['list', 'tools/list'], ['search', 'search_memory']]) {
      const c = r.cold[req];
      const w = r.warm[req];
      console.log(`| ${name === 'native' ? 'lore serve (SQLite)' : 'Workers (workerd, D1)'} | ${label} | ${fmt(c.p50)} | ${fmt(c.min)}-${fmt(c.max)} | ${fmt(w.p50)} | ${fmt(w.p99)} |`);
    }
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
