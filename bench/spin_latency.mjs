// Per-request latency of the lore Spin component in the wasmtime dev host (wasm/host: a fresh
// component instance for every request, as Spin runs it) beside `lore serve` (release build,
// SQLite), in the same run. Run through bench/spin.sh, which builds everything and sets the
// environment.
//
// For each org size N in SIZES (default "0 1000"): start both servers on fresh data, seed N
// memories into each (bench/seed.py, the same sentences), warm both up, then REQS rounds of
// `tools/list` and `search_memory`, alternating the targets request by request so that drift on
// a busy machine hits both alike. The dev host reports per request how long instantiating the
// component took and how long the component ran (its `server-timing` header): the cost of a
// fresh instance, and what the core loads into it (for `search_memory`, the org's memory index,
// rebuilt from SQLite on every request). `lore serve` keeps its index warm; its cold cost is
// the first `search_memory` after a restart (median of ROUNDS restarts).
// Then the dev host's own start: loading the component with and without wasmtime's compile
// cache (START_ROUNDS, default 3, times each; 0 leaves it out). Rate limits are off on both
// targets (latency, not limits; REQS rounds are more requests a minute than the default allows).
// WARMUP (20) warm-up rounds precede the measured ones. Every response is checked (HTTP 200, a result; search hits when N > 0), and at N > 0
// both targets must rank every query alike. Loopback only; bounded loops.
import { spawn, execFile } from 'node:child_process';
import crypto from 'node:crypto';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..');
const LORE = process.env.LORE_RELEASE_BIN;
const HOST = process.env.SPIN_HOST;
const COMPONENT = process.env.SPIN_COMPONENT;
const SIZES = (process.env.SIZES ?? '0 1000').split(/\s+/).filter(Boolean).map(Number);
const REQS = Number(process.env.REQS ?? 300);
const ROUNDS = Number(process.env.ROUNDS ?? 7);
const WARMUP = Number(process.env.WARMUP ?? 20);
const START_ROUNDS = Number(process.env.START_ROUNDS ?? 3);
const NO_LIMITS = { LORE_RATE_TOKEN_PER_MINUTE: '0', LORE_RATE_ORG_PER_MINUTE: '0' };
const QUERIES = ['stripe integration timeout', 'postgres backups', 'who owns the kafka runbook', 'billing team decided to migrate',
  'rotate credentials', 'Acme renewal', 'dark mode', 'latency regressed after the upgrade'];
const META = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };

function delay(ms) { return new Promise((r) => setTimeout(r, ms)); }

function startProcess(cmd, args, pattern) {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], cwd: REPO, env: { ...process.env, ...NO_LIMITS, RUST_LOG: 'warn' } });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { out += d; });
  const exited = new Promise((r) => child.on('exit', r));
  return {
    child,
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

const targets = {
  native: {
    label: 'lore serve (SQLite)',
    async start(dir) {
      const p = startProcess(LORE, ['serve', '--addr', '127.0.0.1:0', '--db', path.join(dir, 'lore.db')], /lore listening on (http:\/\/127\.0\.0\.1:\d+)\/mcp/);
      const [, base] = await p.ready();
      const token = /owner token \(shown once\):\s+(lore_[A-Za-z0-9_-]+)/.exec(p.output)?.[1];
      return { p, base, token };
    },
  },
  spin: {
    label: 'Spin component, dev host',
    async start(dir, extra = []) {
      const secret = crypto.randomBytes(24).toString('hex');
      const p = startProcess(HOST, [COMPONENT, '--addr', '127.0.0.1:0', '--db', path.join(dir, 'lore-spin.db'),
        '--var', `lore_operator_secret=${secret}`, ...Object.entries(NO_LIMITS).flatMap(([k, v]) => ['--var', `${k.toLowerCase()}=${v}`]), ...extra],
      / on (http:\/\/127\.0\.0\.1:\d+) .*component loaded in (\d+) ms/);
      const [, base, loadedMs] = await p.ready();
      const init = await (await fetch(`${base}/operator/init`, { method: 'POST', headers: { authorization: `Bearer ${secret}` }, body: '{}' })).json();
      return { p, base, token: init.status === 'created' ? init.token : null, loadedMs: Number(loadedMs) };
    },
  },
};

/** One request; resolves {ms, instantiate, component} (the last two from the dev host only). */
async function rpc(s, method, params, expectHits) {
  const headers = {
    'content-type': 'application/json', accept: 'application/json, text/event-stream',
    'mcp-protocol-version': '2026-07-28', 'mcp-method': method, authorization: `Bearer ${s.token}`,
  };
  if (method === 'tools/call') headers['mcp-name'] = params.name;
  const t0 = performance.now();
  const res = await fetch(`${s.base}/mcp`, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: { ...params, _meta: META } }) });
  const body = await res.json();
  const ms = performance.now() - t0;
  if (res.status !== 200 || !body.result) throw new Error(`${method}: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
  if (method === 'tools/list' && !body.result.tools.some((t) => t.name === 'search_memory')) throw new Error(`tools/list: no search_memory in ${JSON.stringify(body.result.tools.map((t) => t.name))}`);
  if (method === 'tools/call') {
    const results = body.result.structuredContent?.results;
    if (!Array.isArray(results) || (expectHits && results.length === 0)) throw new Error(`search: ${JSON.stringify(body).slice(0, 300)}`);
  }
  const timing = res.headers.get('server-timing') ?? '';
  const dur = (name) => Number(new RegExp(`${name};dur=([0-9.]+)`).exec(timing)?.[1] ?? NaN);
  return { ms, instantiate: dur('instantiate'), component: dur('component'), results: body.result.structuredContent?.results };
}

const list = (s) => rpc(s, 'tools/list', {}, false);
const search = (s, i, hits) => rpc(s, 'tools/call', { name: 'search_memory', arguments: { query: QUERIES[i % QUERIES.length] } }, hits);

async function answers(s) {
  // The contents each query finds (limit 100). Memories whose vectors or keyword scores tie
  // are ordered by their random ids, which differ between the two targets, and reciprocal rank
  // fusion turns a swapped tie into different scores; so compare what was found, not scores.
  const out = {};
  for (const query of QUERIES) {
    const r = await rpc(s, 'tools/call', { name: 'search_memory', arguments: { query, limit: 100 } }, true);
    out[query] = r.results.map((x) => x.content);
  }
  return out;
}

/** The share of `a`'s results that `b` also returned. */
function overlap(a, b) {
  const bs = new Set(b);
  return a.length ? a.filter((x) => bs.has(x)).length / a.length : 1;
}

function seed(s, n) {
  return new Promise((resolve, reject) => {
    execFile('python3', [path.join(HERE, 'seed.py'), `${s.base}/mcp`, s.token, QUERIES.join('|'), String(n)], { maxBuffer: 16 << 20 },
      (e, stdout, stderr) => (e ? reject(new Error(`${e.message}\n${stderr}`)) : resolve(stdout)));
  });
}

function stats(xs) {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (!s.length) return null;
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
  return { n: s.length, p50: q(0.5), p99: q(0.99), min: s[0], max: s[s.length - 1] };
}

const fmt = (x) => (x === undefined || x === null || !Number.isFinite(x) ? '-' : x.toFixed(2));

async function main() {
  if (!LORE || !HOST || !COMPONENT) throw new Error('LORE_RELEASE_BIN, SPIN_HOST and SPIN_COMPONENT must be set; run bench/spin.sh');
  const rows = [];
  const cold = {};
  for (const n of SIZES) {
    const dirs = {};
    const s = {};
    try {
      for (const name of Object.keys(targets)) {
        dirs[name] = await mkdtemp(path.join(tmpdir(), `lore-bench-spin-${name}-`));
        s[name] = await targets[name].start(dirs[name]);
        if (n > 0) {
          process.stderr.write(`== N=${n}: seeding ${name}\n`);
          await seed(s[name], n);
        }
      }
      if (n > 0) {
        const [a, b] = [await answers(s.native), await answers(s.spin)];
        for (const query of QUERIES) {
          const share = overlap(a[query], b[query]);
          if (a[query].length !== b[query].length || share < 0.9) {
            throw new Error(`targets disagree on ${JSON.stringify(query)}: ${a[query].length} vs ${b[query].length} results, ${(share * 100).toFixed(0)}% shared`);
          }
        }
      }
      for (let i = 0; i < WARMUP; i++) {
        for (const name of Object.keys(targets)) { await list(s[name]); await search(s[name], i, n > 0); }
      }
      process.stderr.write(`== N=${n}: ${REQS} rounds, alternating targets\n`);
      const m = {};
      for (const name of Object.keys(targets)) m[name] = { list: [], search: [] };
      for (let i = 0; i < REQS; i++) {
        for (const name of Object.keys(targets)) m[name].list.push(await list(s[name]));
        for (const name of Object.keys(targets)) m[name].search.push(await search(s[name], i, n > 0));
      }
      for (const name of Object.keys(targets)) {
        for (const [req, label] of [['list', 'tools/list'], ['search', 'search_memory']]) {
          const xs = m[name][req];
          rows.push({
            n, target: targets[name].label, label,
            total: stats(xs.map((x) => x.ms)),
            instantiate: stats(xs.map((x) => x.instantiate)),
            component: stats(xs.map((x) => x.component)),
          });
        }
      }
      // lore serve's cold search: the first search_memory of a fresh process.
      const firsts = [];
      for (let r = 0; r < ROUNDS; r++) {
        await s.native.p.stop();
        s.native = { ...(await targets.native.start(dirs.native)), token: s.native.token };
        firsts.push((await search(s.native, r, n > 0)).ms);
      }
      cold[n] = stats(firsts);
    } finally {
      for (const name of Object.keys(s)) await s[name].p.stop();
      for (const dir of Object.values(dirs)) await rm(dir, { recursive: true, force: true });
    }
  }

  // The dev host's start: the component compiled by Cranelift, or loaded from the compile cache.
  const loads = { compiled: [], cached: [] };
  const cacheDir = await mkdtemp(path.join(tmpdir(), 'lore-bench-spin-cache-'));
  try {
    for (let r = 0; r < START_ROUNDS; r++) {
      for (const [kind, extra] of [['compiled', ['--no-compile-cache']], ['cached', ['--compile-cache', cacheDir]]]) {
        const dir = await mkdtemp(path.join(tmpdir(), 'lore-bench-spin-start-'));
        const h = await targets.spin.start(dir, extra);
        // The first cached start fills the cache: it compiles.
        if (!(kind === 'cached' && r === 0)) loads[kind].push(h.loadedMs);
        await h.p.stop();
        await rm(dir, { recursive: true, force: true });
      }
    }
  } finally {
    await rm(cacheDir, { recursive: true, force: true });
  }

  const size = (await stat(COMPONENT)).size;
  console.log(`\ncomponent ${path.basename(COMPONENT)}: ${size} bytes`);
  if (START_ROUNDS > 0) console.log(`dev host start, component loaded: compiled by Cranelift ${loads.compiled.join(' / ')} ms; from the compile cache ${loads.cached.join(' / ')} ms`);
  else console.log('dev host start: not measured (START_ROUNDS=0)');
  console.log('rate limits off on both targets (LORE_RATE_TOKEN_PER_MINUTE=0, LORE_RATE_ORG_PER_MINUTE=0)');
  console.log(`\n${REQS} requests per row, targets alternating; ms, p50 / p99. The dev host runs every request on a fresh instance: "instantiate" and "component" are its server-timing.\n`);
  console.log('| memories | target | request | total p50 | total p99 | instantiate p50 | component p50 | component p99 |');
  console.log('| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: |');
  for (const r of rows) {
    console.log(`| ${r.n} | ${r.target} | ${r.label} | ${fmt(r.total.p50)} | ${fmt(r.total.p99)} | ${fmt(r.instantiate?.p50)} | ${fmt(r.component?.p50)} | ${fmt(r.component?.p99)} |`);
  }
  console.log(`\nlore serve, first search_memory after a restart (index built from SQLite), median of ${ROUNDS} (min-max), ms:`);
  for (const [n, c] of Object.entries(cold)) console.log(`  ${n} memories: ${fmt(c.p50)} (${fmt(c.min)}-${fmt(c.max)})`);
}

main().catch((e) => { console.error(e); process.exit(1); });
