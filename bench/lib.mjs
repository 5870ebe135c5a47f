// What the Node bench drivers share: a free loopback port, `lore serve` on a fresh database
// (started, waited for, stopped), tokens made with the CLI, and one stateless MCP tools/call.
import { spawn, execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

export const run = promisify(execFile);
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/**
 * `lore serve` on a new database with `orgs` (the first made by `lore init`), with `args`
 * added to the command line. Returns {base, db, token(org, role), stop()}.
 */
export async function startLore(lore, { orgs, args = [], name = 'bench' }) {
  const dir = await mkdtemp(path.join(tmpdir(), `lore-${name}-`));
  const db = path.join(dir, 'lore.db');
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  await run(lore, ['init', '--db', db, '--org', orgs[0], '--json']);
  for (const org of orgs.slice(1)) await run(lore, ['org', 'create', org, '--db', db, '--json']);
  const log = [];
  const server = spawn(lore, ['serve', '--db', db, '--addr', `127.0.0.1:${port}`, ...args], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, RUST_LOG: 'warn', NO_COLOR: '1' },
  });
  server.stderr.setEncoding('utf8');
  server.stderr.on('data', (d) => log.push(d));
  for (let deadline = Date.now() + 30_000; ;) {
    if (Date.now() > deadline) throw new Error(`lore serve did not come up:\n${log.join('')}`);
    try {
      if ((await fetch(`${base}/healthz`)).ok) break;
    } catch { /* not yet */ }
    await sleep(20);
  }
  return {
    base,
    db,
    log,
    async token(org, role = 'member', scopes = 'mcp:read,mcp:write') {
      const { stdout } = await run(lore, ['token', 'create', '--db', db, '--org', org, '--role', role, '--scopes', scopes, '--json']);
      return JSON.parse(stdout).token;
    },
    /** Stops the server; its database stays when `keep` (then `remove()` deletes it). */
    async stop(keep = false) {
      if (server.exitCode === null && server.signalCode === null) {
        server.kill('SIGTERM');
        await new Promise((r) => server.once('exit', r));
      }
      if (!keep) await rm(dir, { recursive: true, force: true });
    },
    async remove() {
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** A stateless (2026-07-28) MCP tools/call: {status, retryAfter, body, text}. */
export async function callTool(base, org, token, name, args, timeoutMs = 200_000) {
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
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await res.text();
  let body = null;
  try { body = JSON.parse(text); } catch { /* the caller reports it */ }
  return { status: res.status, retryAfter: Number(res.headers.get('retry-after') ?? 0), body, text };
}

/** The p-th percentile (0-100) of `xs`, in its units. */
export function percentile(xs, p) {
  if (xs.length === 0) return NaN;
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/**
 * Waits until `org`'s memories all have their vectors: `search_memory` polled every 250 ms until
 * three answers in a row name no `pending_vectors` (a worker's first answer comes from the stored
 * segments and names none, so one is not enough). Polling `lore doctor` instead would take a core
 * from the background embedder.
 */
export async function waitForVectors(base, org, token) {
  for (let clean = 0; clean < 3;) {
    const r = await callTool(base, org, token, 'search_memory', { query: 'the', limit: 1 });
    if (r.status !== 200 || r.body?.result?.isError) throw new Error(`search_memory: ${r.status} ${r.text.slice(0, 300)}`);
    clean = r.body.result.structuredContent.pending_vectors ? 0 : clean + 1;
    await sleep(250);
  }
}
