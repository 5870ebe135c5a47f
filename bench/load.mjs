// The load driver behind bench/load.sh: `lore serve` on a temporary database with LOAD_ORGS orgs
// (4), LOAD_CLIENTS concurrent clients (64, spread over the orgs, each with its own member
// token) calling for LOAD_SECONDS (60) a mix of save_memory (30%), search_memory (30%),
// query_sql (20%) and run_sdk (20%, a script that saves a memory) over MCP (2026-07-28,
// stateless JSON). A 429 is a deliberate refusal: the client waits its Retry-After and goes on.
// Afterwards, with fresh tokens: every acknowledged write must be readable in its org
// (query_sql over `events`), and no org may see a row carrying another org's marker (each
// memory's text names its org). Prints per-tool counts, p50/p99 latency, errors and 429s as
// JSON; exit status 0 only when there were no unexpected errors, no lost writes and no
// cross-org rows.
//
// env: LORE_BIN (required), LOAD_SECONDS, LOAD_CLIENTS, LOAD_ORGS, LOAD_WORKERS (server
//      threads, default 2), LOAD_TOKEN_PER_MINUTE (600), LOAD_ORG_PER_MINUTE (0: none).
import { spawn, execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const LORE = process.env.LORE_BIN;
const SECONDS = Number(process.env.LOAD_SECONDS ?? 60);
const CLIENTS = Number(process.env.LOAD_CLIENTS ?? 64);
const ORGS = Number(process.env.LOAD_ORGS ?? 4);
const WORKERS = Number(process.env.LOAD_WORKERS ?? 2);
const TOKEN_RATE = process.env.LOAD_TOKEN_PER_MINUTE ?? '600';
const ORG_RATE = process.env.LOAD_ORG_PER_MINUTE ?? '0';
if (!LORE) throw new Error('LORE_BIN is not set');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const WORDS = ['heron', 'weir', 'invoice', 'billing', 'launch', 'roadmap', 'pricing', 'latency', 'onboarding', 'retention', 'migration', 'quarter'];
const pick = (xs) => xs[Math.floor(Math.random() * xs.length)];

async function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

const dir = await mkdtemp(path.join(tmpdir(), 'lore-load-'));
const db = path.join(dir, 'lore.db');
const port = await freePort();
const base = `http://127.0.0.1:${port}`;
const orgs = Array.from({ length: ORGS }, (_, i) => `load${i}`);

await run(LORE, ['init', '--db', db, '--org', orgs[0], '--json']);
for (const org of orgs.slice(1)) await run(LORE, ['org', 'create', org, '--db', db, '--json']);
async function memberToken(org) {
  const { stdout } = await run(LORE, ['token', 'create', '--db', db, '--org', org, '--role', 'member', '--scopes', 'mcp:read,mcp:write', '--json']);
  return JSON.parse(stdout).token;
}

const serverLog = [];
const server = spawn(LORE, ['serve', '--db', db, '--addr', `127.0.0.1:${port}`, '--workers', String(WORKERS),
  '--rate-token-per-minute', TOKEN_RATE, '--rate-org-per-minute', ORG_RATE], {
  stdio: ['ignore', 'ignore', 'pipe'],
  env: { ...process.env, RUST_LOG: 'warn', NO_COLOR: '1' },
});
server.stderr.setEncoding('utf8');
server.stderr.on('data', (d) => serverLog.push(d));
for (let deadline = Date.now() + 30_000; ;) {
  if (Date.now() > deadline) throw new Error(`lore serve did not come up:\n${serverLog.join('')}`);
  try {
    if ((await fetch(`${base}/healthz`)).ok) break;
  } catch { /* not yet */ }
  await sleep(20);
}

/** A stateless MCP tools/call: {status, retryAfter, result?, error?}. */
async function call(org, token, name, args) {
  const res = await fetch(`${base}/mcp/${org}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'tools/call',
      'mcp-name': name,
    },
    body: JSON.stringify({
      jsonrpc: '2.0', id: 1, method: 'tools/call',
      params: { name, arguments: args, _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} } },
    }),
    signal: AbortSignal.timeout(60_000),
  });
  const text = await res.text();
  let body = null;
  try { body = JSON.parse(text); } catch { /* reported below */ }
  return { status: res.status, retryAfter: Number(res.headers.get('retry-after') ?? 0), body, text };
}

const tools = ['save_memory', 'search_memory', 'query_sql', 'run_sdk'];
const stats = Object.fromEntries(tools.map((t) => [t, { ok: 0, errors: 0, limited: 0, latencies: [] }]));
const unexpected = [];
const acked = new Map(orgs.map((o) => [o, new Map()])); // org -> id -> content
const crossOrg = [];
const marker = (org) => `org-marker-${org}`;

function checkRows(org, texts, where) {
  for (const t of texts) {
    for (const other of orgs) {
      if (other !== org && String(t).includes(marker(other))) crossOrg.push(`${where}: ${org} saw ${other}'s row: ${String(t).slice(0, 120)}`);
    }
  }
}

async function client(c, org, token, until) {
  for (let seq = 0; Date.now() < until; seq++) {
    const r = Math.random();
    const tool = r < 0.3 ? 'save_memory' : r < 0.6 ? 'search_memory' : r < 0.8 ? 'query_sql' : 'run_sdk';
    const content = `${marker(org)} client ${c} note ${seq}: the ${pick(WORDS)} ${pick(WORDS)} ${pick(WORDS)} review`;
    const args = {
      save_memory: { content, kind: 'note' },
      search_memory: { query: `${pick(WORDS)} ${pick(WORDS)}`, limit: 10 },
      query_sql: { sql: 'SELECT id, content FROM events ORDER BY created_at DESC', limit: 20 },
      run_sdk: { code: 'const r = await client.memory.save({ content: ctx.args.content, kind: "observation" }); return r.ids[0]', args: { content } },
    }[tool];
    const started = performance.now();
    let res;
    try {
      res = await call(org, token, tool, args);
    } catch (e) {
      stats[tool].errors += 1;
      unexpected.push(`${tool}: ${e.message}`);
      continue;
    }
    const ms = performance.now() - started;
    const s = stats[tool];
    if (res.status === 429) {
      s.limited += 1;
      await sleep(Math.max(1, res.retryAfter) * 1000);
      continue;
    }
    const result = res.body?.result;
    if (res.status !== 200 || !result || result.isError) {
      s.errors += 1;
      unexpected.push(`${tool} HTTP ${res.status}: ${res.text.slice(0, 300)}`);
      continue;
    }
    s.ok += 1;
    s.latencies.push(ms);
    const out = result.structuredContent;
    if (tool === 'save_memory') acked.get(org).set(out.ids[0], content);
    if (tool === 'run_sdk') acked.get(org).set(out.result, content);
    if (tool === 'search_memory') checkRows(org, out.results.map((x) => x.content), 'search_memory');
    if (tool === 'query_sql') checkRows(org, out.rows.map((row) => row[1]), 'query_sql');
  }
}

const tokens = [];
for (let c = 0; c < CLIENTS; c++) tokens.push(await memberToken(orgs[c % ORGS]));
const started = Date.now();
const until = started + SECONDS * 1000;
await Promise.all(tokens.map((t, c) => client(c, orgs[c % ORGS], t, until)));
const elapsed = (Date.now() - started) / 1000;

// Every acknowledged write is readable in its org; no org sees another's rows.
let lost = 0;
let readBack = 0;
for (const org of orgs) {
  const token = await memberToken(org);
  const seen = new Set();
  let cursor = null;
  do {
    const res = await call(org, token, 'query_sql', { sql: 'SELECT id, content FROM events', limit: 1000, ...(cursor ? { cursor } : {}) });
    const out = res.body?.result?.structuredContent;
    if (!out) throw new Error(`read-back failed: HTTP ${res.status} ${res.text.slice(0, 300)}`);
    for (const [id, content] of out.rows) seen.add(id);
    checkRows(org, out.rows.map((row) => row[1]), 'read-back');
    cursor = out.next_cursor;
  } while (cursor);
  for (const id of acked.get(org).keys()) {
    readBack += 1;
    if (!seen.has(id)) lost += 1;
  }
}
server.kill('SIGTERM');
await new Promise((r) => server.on('exit', r));
if (!process.env.LOAD_KEEP) await rm(dir, { recursive: true, force: true });

const pct = (xs, p) => {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  return Math.round(s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] * 10) / 10;
};
const report = {
  seconds: Math.round(elapsed), clients: CLIENTS, orgs: ORGS, server_workers: WORKERS,
  token_per_minute: Number(TOKEN_RATE), org_per_minute: Number(ORG_RATE),
  tools: Object.fromEntries(tools.map((t) => [t, {
    ok: stats[t].ok, rate_limited: stats[t].limited, errors: stats[t].errors,
    p50_ms: pct(stats[t].latencies, 50), p99_ms: pct(stats[t].latencies, 99),
  }])),
  requests_per_second: Math.round(tools.reduce((n, t) => n + stats[t].ok + stats[t].limited, 0) / elapsed),
  acknowledged_writes: readBack, lost_writes: lost, cross_org_rows: crossOrg.length,
  unexpected_errors: unexpected.length,
};
console.log(JSON.stringify(report, null, 2));
for (const u of unexpected.slice(0, 10)) console.error(`unexpected: ${u}`);
for (const x of crossOrg.slice(0, 10)) console.error(`cross-org: ${x}`);
process.exit(unexpected.length || lost || crossOrg.length ? 1 : 0);
