// The crash-safety driver behind bench/crash.sh: `lore serve` on a temporary database, concurrent
// writers (save_memory with idempotency keys, and run_sdk scripts creating entities) that record
// every acknowledged write, a SIGKILL of the server every CRASH_INTERVAL seconds (restarted at
// once on the same database and port), and at the end, after one more SIGKILL and restart:
// every acknowledged write must be readable (query_sql over MCP), no idempotent save may have
// landed twice, and `lore doctor` must be clean. One online `lore backup` is taken mid-run.
//
// env: LORE_BIN (required), CRASH_SECONDS (60), CRASH_INTERVAL (10), CRASH_WRITERS (8),
//      CRASH_KEEP=1 keeps the temporary directory.
import { spawn, execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const LORE = process.env.LORE_BIN;
const SECONDS = Number(process.env.CRASH_SECONDS ?? 60);
const INTERVAL = Number(process.env.CRASH_INTERVAL ?? 10);
const WRITERS = Number(process.env.CRASH_WRITERS ?? 8);
const ORG = 'crash';
if (!LORE) throw new Error('LORE_BIN is not set');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

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

const dir = await mkdtemp(path.join(tmpdir(), 'lore-crash-'));
const db = path.join(dir, 'lore.db');
const port = await freePort();
const base = `http://127.0.0.1:${port}`;

let server = null;
const serverLog = [];

async function startServer() {
  const child = spawn(LORE, ['serve', '--db', db, '--addr', `127.0.0.1:${port}`, '--workers', '2'], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, RUST_LOG: 'warn', NO_COLOR: '1' },
  });
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (d) => serverLog.push(d));
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (Date.now() > deadline) throw new Error(`lore serve did not come up:\n${serverLog.join('')}`);
    try {
      const r = await fetch(`${base}/healthz`);
      if (r.ok) break;
    } catch { /* not yet */ }
    await sleep(20);
  }
  server = { child, exited };
}

async function killServer(signal = 'SIGKILL') {
  const { child, exited } = server;
  server = null;
  child.kill(signal);
  return exited;
}

const { stdout } = await run(LORE, ['init', '--db', db, '--org', ORG, '--json']);
const token = JSON.parse(stdout).token;

/** A stateless MCP tools/call; the tool result, or throws on a transport or protocol error. */
async function call(name, args) {
  const params = {
    name,
    arguments: args,
    _meta: {
      'io.modelcontextprotocol/protocolVersion': '2026-07-28',
      'io.modelcontextprotocol/clientCapabilities': {},
    },
  };
  const res = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'tools/call',
      'mcp-name': name,
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params }),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  const data = text.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).pop() ?? text;
  const body = JSON.parse(data);
  if (res.status !== 200 || !body.result) throw new Error(`HTTP ${res.status}: ${text.slice(0, 300)}`);
  return body.result;
}

await startServer();
const setup = await call('run_sdk', {
  code: "await client.templates.create({name: 'crashnote', schema: {type: 'object'}}); return 'ok'",
});
if (setup.isError) throw new Error(JSON.stringify(setup));

const memories = new Map(); // id -> content, acknowledged
const entities = new Map(); // id -> name, acknowledged
const stats = { attempts: 0, transportErrors: 0, toolErrors: 0, kills: 0, idempotentRetries: 0 };
let stopping = false;

async function writer(w) {
  for (let seq = 0; !stopping; seq++) {
    const sdk = seq % 4 === 3;
    const content = `crash writer ${w} write ${seq}: the heron count at weir ${w * 1000 + seq}`;
    const key = `w${w}-${seq}`;
    let tries = 0;
    for (;;) {
      stats.attempts++;
      tries++;
      try {
        if (sdk) {
          const name = `${key}-try${tries}`;
          const r = await call('run_sdk', {
            code: "const e = await client.entities.create({type: 'crashnote', name: ctx.args.name}); return e.id",
            args: { name },
          });
          if (r.isError) throw Object.assign(new Error(JSON.stringify(r.content)), { tool: true });
          entities.set(r.structuredContent.result, name);
        } else {
          const r = await call('save_memory', { content, idempotency_key: key });
          if (r.isError) throw Object.assign(new Error(JSON.stringify(r.content)), { tool: true });
          if (tries > 1) stats.idempotentRetries++;
          memories.set(r.structuredContent.ids[0], content);
        }
        break;
      } catch (e) {
        if (e.tool) stats.toolErrors++;
        else stats.transportErrors++;
        if (stopping && tries > 100) break;
        await sleep(25);
      }
    }
  }
}

async function backupMidRun() {
  const file = path.join(dir, 'mid-run-backup.db');
  const { stdout } = await run(LORE, ['backup', file, '--db', db, '--json']);
  const copied = JSON.parse(stdout);
  const doctor = await run(LORE, ['doctor', '--db', file, '--json']).catch((e) => e);
  const report = JSON.parse(doctor.stdout);
  // A backup is a rollback-journal file; every other check must pass.
  const failed = report.checks.filter((c) => !c.ok && c.check !== 'journal_mode').map((c) => c.check);
  return { keys: copied.keys, failed };
}

const started = Date.now();
const writers = Array.from({ length: WRITERS }, (_, w) => writer(w));
// Half an interval after the middle, so it does not coincide with a kill.
let backup = null;
const backupDone = sleep((SECONDS * 1000) / 2 + (INTERVAL * 1000) / 2).then(async () => {
  backup = await backupMidRun();
});
for (;;) {
  const left = SECONDS * 1000 - (Date.now() - started);
  if (left <= 0) break;
  await sleep(Math.min(INTERVAL * 1000, left));
  if (Date.now() - started >= SECONDS * 1000) break;
  const exit = await killServer('SIGKILL');
  if (exit.signal !== 'SIGKILL') throw new Error(`server exited ${JSON.stringify(exit)} before the kill`);
  stats.kills++;
  await startServer();
}
stopping = true;
await Promise.all(writers);
if ((SECONDS * 1000) / 2 + (INTERVAL * 1000) / 2 < SECONDS * 1000) await backupDone;

// The last state is also a crash: kill, restart, then read everything back.
await killServer('SIGKILL');
stats.kills++;
await startServer();

async function allRows(sql) {
  const rows = [];
  let cursor;
  do {
    const r = await call('query_sql', { sql, limit: 1000, ...(cursor ? { cursor } : {}) });
    if (r.isError) throw new Error(JSON.stringify(r.content));
    rows.push(...r.structuredContent.rows);
    cursor = r.structuredContent.next_cursor;
  } while (cursor);
  return rows;
}

const events = new Map((await allRows('SELECT id, content FROM events')).map(([id, c]) => [id, c]));
const stored = new Map((await allRows('SELECT id, name FROM entities')).map(([id, n]) => [id, n]));
let lost = 0;
for (const [id, content] of memories) if (events.get(id) !== content) lost++;
for (const [id, name] of entities) if (stored.get(id) !== name) lost++;
const contents = [...events.values()].filter((c) => c?.startsWith('crash writer '));
const duplicates = contents.length - new Set(contents).size;

const exit = await killServer('SIGTERM');
const doctor = await run(LORE, ['doctor', '--db', db, '--json']).catch((e) => e);
const report = JSON.parse(doctor.stdout);

const out = {
  seconds: SECONDS,
  interval: INTERVAL,
  writers: WRITERS,
  kills: stats.kills,
  attempts: stats.attempts,
  acknowledged: memories.size + entities.size,
  acknowledged_memories: memories.size,
  acknowledged_entities: entities.size,
  lost,
  duplicate_memories: duplicates,
  failed_attempts: { transport: stats.transportErrors, tool: stats.toolErrors },
  idempotent_retries: stats.idempotentRetries,
  mid_run_backup: backup,
  final_shutdown: exit,
  integrity: report.checks.find((c) => c.check === 'integrity')?.detail,
  doctor_ok: report.ok,
  stored_keys: report.stats?.keys,
};
console.log(JSON.stringify(out, null, 2));
if (process.env.CRASH_KEEP) console.error(`kept ${dir}`);
else await rm(dir, { recursive: true, force: true });
const ok = lost === 0 && duplicates === 0 && report.ok && (!backup || backup.failed.length === 0);
console.log(ok ? 'PASS: every acknowledged write survived, doctor clean' : 'FAIL');
process.exit(ok ? 0 : 1);
