// What the transformer embedder costs through MCP: `search_memory` p50/p99 with fresh queries
// (each a word pair and a number never asked before, so neither an answer nor a query vector
// is cached) on an org of N memories, on `lore serve` and on the Spin component in the dev host,
// over the same database: it is seeded once natively (bench/seed.py, 100 memories per call;
// the vectors are all-MiniLM-L6-v2's on both), then the dev host serves that file (Spin SQLite
// has the native schema). Also the save rate of one call of 100 memories on each (the
// embedder's texts per second through a whole request). Run through bench/embed_latency.sh.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { callTool, percentile, startLore } from './lib.mjs';
import { startSpin } from '../tests/e2e/lib/spin.mjs';

const run = promisify(execFile);
const [lore, seedPy] = process.argv.slice(2);
const N = Number(process.env.N ?? 10000);
const QUERIES = Number(process.env.QUERIES ?? 60);
const WORDS = ['billing', 'postgres', 'kafka', 'runbook', 'stripe', 'timeout', 'renewal', 'credentials', 'latency',
  'migrate', 'dashboards', 'warehouse', 'invoice', 'oncall', 'deploy', 'compliance', 'onboarding', 'redis'];
let asked = 0;
const fresh = () => { const i = asked++; return `${WORDS[i % WORDS.length]} ${WORDS[(i * 7 + 3) % WORDS.length]} ${100000 + i}`; };

async function searches(base, org, token) {
  const ms = [];
  for (let i = 0; i < QUERIES; i++) {
    const t = performance.now();
    const r = await callTool(base, org, token, 'search_memory', { query: fresh() });
    ms.push(performance.now() - t);
    if (r.status !== 200 || r.body?.result?.isError || !(r.body.result.structuredContent.results.length > 0)) {
      throw new Error(`search_memory: ${r.status} ${r.text.slice(0, 300)}`);
    }
  }
  return ms;
}

async function save100(base, org, token, tag) {
  const memories = Array.from({ length: 100 }, (_, i) => ({
    content: `${tag} note ${i}: the ${WORDS[i % WORDS.length]} runbook says to page the ${WORDS[(i * 5) % WORDS.length]} owner before a deploy`,
  }));
  const t = performance.now();
  const r = await callTool(base, org, token, 'save_memory', { memories });
  const s = (performance.now() - t) / 1e3;
  if (r.status !== 200 || r.body?.result?.isError) throw new Error(`save_memory: ${r.status} ${r.text.slice(0, 300)}`);
  return 100 / s;
}

const rows = [];
const native = await startLore(lore, { orgs: ['default'], args: ['--rate-token-per-minute', '0', '--rate-org-per-minute', '0'], name: 'embed-latency' });
let db;
try {
  const token = await native.token('default');
  const t = performance.now();
  await run('python3', [seedPy, `${native.base}/mcp/default`, token, 'postgres backups|Acme renewal', String(N)], { maxBuffer: 16 << 20 });
  process.stderr.write(`seeded ${N} in ${((performance.now() - t) / 1e3).toFixed(1)} s\n`);
  const ms = await searches(native.base, 'default', token);
  rows.push(['lore serve', percentile(ms, 50), percentile(ms, 99), await save100(native.base, 'default', token, 'native')]);
  db = native.db;
  // The dev host serves the same file once the server has let it go.
  await native.stop(true);
  const spin = await startSpin({ db });
  try {
    const sms = await searches(spin.base, 'default', token);
    rows.push(['Spin dev host (a fresh instance per request)', percentile(sms, 50), percentile(sms, 99), await save100(spin.base, 'default', token, 'spin')]);
  } finally {
    await spin.stop();
  }
} finally {
  await native.stop();
}
console.log(`\nsearch_memory through MCP, ${N} memories, ${QUERIES} fresh queries each; save_memory of 100 short memories in one call\n`);
console.log('| target | search p50 ms | search p99 ms | save, memories/s |\n| --- | --- | --- | --- |');
for (const [name, p50, p99, rate] of rows) console.log(`| ${name} | ${p50.toFixed(1)} | ${p99.toFixed(1)} | ${rate.toFixed(0)} |`);
