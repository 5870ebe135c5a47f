// Shared helpers for the end-to-end tests: start and stop a real `lore serve` on a free
// loopback port with a fresh temporary database, run the `lore` CLI, and send raw HTTP.
import assert from 'node:assert/strict';
import { spawn, execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { existsSync, appendFileSync, writeFileSync } from 'node:fs';
import { tmpdir, homedir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const E2E_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const REPO_ROOT = path.resolve(E2E_DIR, '..', '..');

const targetDir = process.env.CARGO_TARGET_DIR || path.join(homedir(), '.cache', 'lore-target');
/** The `lore` binary under test. */
export const LORE_BIN = process.env.LORE_BIN || path.join(targetDir, 'debug', 'lore');
/** The Python interpreter of the venv that has `mcp==2.3.0`. */
export const LORE_PY = process.env.LORE_PY || path.join(REPO_ROOT, '.tools', 'venv', 'bin', 'python');

/** The tools of the workspace profile on `tools/list`, sorted by name. */
export const WORKSPACE_TOOLS = ['query_sdk', 'query_sql', 'run_sdk', 'save_memory', 'search_memory', 'search_sdk'];

/**
 * What the tests run against: `native` (`lore serve`, the default) or `worker` (the Workers
 * build under workerd with D1 and KV; see lib/worker.mjs). Tests that only make sense for one
 * of them say so with `onlyNative(reason)`.
 */
export const TARGET = process.env.LORE_TARGET || 'native';
if (!['native', 'worker', 'spin'].includes(TARGET)) throw new Error(`LORE_TARGET=${TARGET}: expected native, worker or spin`);

/**
 * Where a full run keeps every `lore serve` log and the secrets the tests used (run.sh sets
 * it; check_logs.mjs reads it). Empty: nothing is kept.
 */
export const LOG_DIR = process.env.LORE_E2E_LOGS || '';

/** Notes secrets this run used, so the log check can look for them. */
export function recordSecret(...values) {
  if (!LOG_DIR) return;
  const lines = values.filter((v) => typeof v === 'string' && v.length >= 8).map((v) => `${v}\n`).join('');
  if (lines) appendFileSync(path.join(LOG_DIR, 'secrets.txt'), lines);
}

/** `{skip: reason}` on the worker target: for tests of what only the native server has. */
export function onlyNative(reason) {
  return TARGET === 'native' ? {} : { skip: `native only: ${reason}` };
}

/** Test options that skip a test on `target` (one of `TARGET`'s values), saying why. */
export function skipOn(target, reason) {
  return TARGET === target ? { skip: `not on ${target}: ${reason}` } : {};
}

if (TARGET === 'native' && !existsSync(LORE_BIN)) {
  throw new Error(`lore binary not found at ${LORE_BIN}; run \`cargo build\` or set LORE_BIN`);
}

const live = new Set();
// Last resort: never leave a server behind, even if a test forgets to stop it.
process.on('exit', () => {
  for (const child of live) {
    try { child.kill('SIGKILL'); } catch { /* already gone */ }
  }
});

/** A fresh temporary directory; removed by `cleanupDir`. */
export async function tempDir() {
  return mkdtemp(path.join(tmpdir(), 'lore-e2e-'));
}

export async function cleanupDir(dir) {
  if (dir) await rm(dir, { recursive: true, force: true });
}

function delay(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Starts `lore serve` on 127.0.0.1 with an OS-chosen port (the server prints the bound
 * address), waits until /healthz answers, and returns a handle.
 *
 * opts.db: database file (default: <new temp dir>/lore.db); opts.args: extra CLI args;
 * opts.workers: worker threads (default 2); opts.env: extra environment variables.
 */
export async function startServer(opts = {}) {
  if (opts.native) return startNative(opts);
  if (TARGET === 'worker') {
    const { startWorker } = await import('./worker.mjs');
    return startWorker(opts);
  }
  if (TARGET === 'spin') {
    const { startSpin } = await import('./spin.mjs');
    return startSpin(opts);
  }
  return startNative(opts);
}

/** `lore serve` (startServer's native target; `opts.native` asks for it on any target). */
async function startNative(opts) {
  const ownDir = opts.db ? null : await tempDir();
  const db = opts.db ?? path.join(ownDir, 'lore.db');
  const args = ['serve', '--addr', '127.0.0.1:0', '--db', db, '--workers', String(opts.workers ?? 2), ...(opts.args ?? [])];
  // In a full run, logs are JSON (one object per line) with lore's debug events, and kept.
  const logEnv = LOG_DIR ? { LORE_LOG_FORMAT: 'json', RUST_LOG: process.env.RUST_LOG ?? 'info,lore=debug,lore_front=debug,lore_engine=debug,lore_directory=debug,lore_sandbox=debug' } : {};
  // The suites call fast from few tokens; limits.test.mjs checks the limits themselves.
  // Their upstreams (connections, client documents) listen on loopback, which members and
  // outsiders may not reach by default.
  const rateEnv = {
    LORE_RATE_TOKEN_PER_MINUTE: '1000000',
    LORE_RATE_ORG_PER_MINUTE: '0',
    LORE_RATE_ANONYMOUS_PER_MINUTE: '1000000',
    LORE_OUTBOUND_ALLOW: '127.0.0.0/8,::1',
  };
  const child = spawn(LORE_BIN, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, RUST_LOG: process.env.RUST_LOG ?? 'info', NO_COLOR: '1', ...logEnv, ...rateEnv, ...(opts.env ?? {}) },
  });
  live.add(child);
  let stderr = '';
  let stdout = '';
  child.stderr.setEncoding('utf8');
  child.stdout.setEncoding('utf8');
  child.stderr.on('data', (d) => { stderr += d; });
  child.stdout.on('data', (d) => { stdout += d; });
  const exited = new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      live.delete(child);
      if (LOG_DIR) writeFileSync(path.join(LOG_DIR, `serve-${process.pid}-${child.pid}.log`), stderr);
      resolve({ code, signal });
    });
  });
  let exitInfo = null;
  exited.then((info) => { exitInfo = info; });

  const deadline = Date.now() + 20_000;
  let base = null;
  while (!base) {
    if (exitInfo) throw new Error(`lore serve exited early (${JSON.stringify(exitInfo)}):\n${stderr}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`lore serve did not print its address in time:\n${stderr}`);
    }
    const m = /lore listening on (http:\/\/127\.0\.0\.1:\d+)\/mcp/.exec(stderr);
    if (m) base = m[1];
    else await delay(25);
  }
  // Wait for /healthz (the listener is bound before the address is printed, so this is quick).
  for (;;) {
    try {
      const res = await fetch(`${base}/healthz`);
      if (res.ok) break;
    } catch { /* not yet */ }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`lore serve /healthz did not answer in time:\n${stderr}`);
    }
    await delay(25);
  }
  const tokenMatch = /owner token \(shown once\):\s+(lore_[A-Za-z0-9_-]+)/.exec(stderr);
  if (tokenMatch) recordSecret(tokenMatch[1]);
  const passwordMatch = /sign-in page \(shown once[^)]*\):\s+(\S+)/.exec(stderr);
  if (passwordMatch) recordSecret(passwordMatch[1]);

  const server = {
    target: 'native',
    child,
    db,
    dir: ownDir ?? path.dirname(db),
    base,
    url: `${base}/mcp`,
    /** The owner token printed on a fresh db (null when the db already existed). */
    ownerToken: tokenMatch ? tokenMatch[1] : null,
    get stderr() { return stderr; },
    get stdout() { return stdout; },
    get exitInfo() { return exitInfo; },
    /** SIGTERM, then wait for the process to exit (SIGKILL after `timeoutMs`). */
    async stop(timeoutMs = 15_000) {
      if (exitInfo) return exitInfo;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      const info = await exited;
      clearTimeout(timer);
      return info;
    },
    /** Stops the server and removes its temp dir (if this helper created it). */
    async dispose() {
      await server.stop();
      if (ownDir) await cleanupDir(ownDir);
    },
  };
  return server;
}

/** Runs the `lore` CLI; resolves {code, stdout, stderr} (never rejects on a non-zero exit). */
export function lore(args, { timeoutMs = 30_000 } = {}) {
  return new Promise((resolve, reject) => {
    execFile(LORE_BIN, args, { timeout: timeoutMs, env: { ...process.env, RUST_LOG: 'warn', NO_COLOR: '1' } },
      (error, stdout, stderr) => {
        if (error && typeof error.code !== 'number') return reject(error);
        resolve({ code: error ? error.code : 0, stdout, stderr });
      });
  });
}

/** Runs the `lore` CLI, expects success, and parses its stdout as JSON. */
export async function loreJson(args) {
  const r = await lore(args);
  if (r.code !== 0) throw new Error(`lore ${args.join(' ')} failed (${r.code}):\n${r.stderr}${r.stdout}`);
  return JSON.parse(r.stdout);
}

// Operator actions: the `lore` CLI on the server's database (native), or the Worker's operator
// routes (worker). Each takes the server handle.

/** `lore token create`: returns {org, token, token_id, principal}. */
export async function issueToken(server, { org = 'default', role, scopes = 'mcp:read,mcp:write', name } = {}) {
  if (server.target !== 'native') return server.operator('token-create', { org, role, scopes, name });
  const args = ['token', 'create', '--db', server.db, '--org', org, '--scopes', scopes, '--json'];
  if (role) args.push('--role', role);
  if (name) args.push('--name', name);
  const issued = await loreJson(args);
  recordSecret(issued.token);
  return issued;
}

/** `lore token create` with role member by default: returns the token secret. */
export async function createToken(server, { role = 'member', ...opts } = {}) {
  return (await issueToken(server, { role, ...opts })).token;
}

/** `lore token revoke`. */
export async function revokeToken(server, tokenId, org = 'default') {
  if (server.target !== 'native') {
    await server.operator('token-revoke', { org, token_id: tokenId });
    return;
  }
  const r = await lore(['token', 'revoke', tokenId, '--db', server.db, '--org', org]);
  if (r.code !== 0) throw new Error(`lore token revoke failed (${r.code}):\n${r.stderr}`);
}

/** `lore org create`: returns {org, token}. */
export async function createOrg(server, name) {
  if (server.target !== 'native') return server.operator('org-create', { name });
  const created = await loreJson(['org', 'create', name, '--db', server.db, '--json']);
  recordSecret(created.token);
  return created;
}

/**
 * Sends one raw HTTP request to the MCP endpoint. `body` may be an object (JSON-encoded), a
 * string or a Buffer (sent as is). Default headers are those of a well-behaved client.
 * Resolves {status, headers, text, json}.
 */
export async function rawPost(url, { token, body, headers = {}, method = 'POST' } = {}) {
  const h = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    ...(token ? { authorization: `Bearer ${token}` } : {}),
    ...headers,
  };
  for (const [k, v] of Object.entries(h)) if (v === undefined || v === null) delete h[k];
  const payload = body === undefined ? undefined
    : (typeof body === 'string' || Buffer.isBuffer(body)) ? body : JSON.stringify(body);
  const res = await fetch(url, { method, headers: h, body: payload });
  const text = await res.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
  return { status: res.status, headers: res.headers, text, json };
}

export const META_2026 = (extra = {}) => ({
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientCapabilities': {},
  'io.modelcontextprotocol/clientInfo': { name: 'lore-e2e-raw', version: '0' },
  ...extra,
});

/** Raw 2026-07-28 request with correct headers and _meta (override any part via opts). */
export function raw2026(url, token, method, params = {}, { id = 1, headers = {}, meta = {} } = {}) {
  const h = { 'mcp-protocol-version': '2026-07-28', 'mcp-method': method, ...headers };
  if (method === 'tools/call' && params.name !== undefined && !('mcp-name' in headers)) h['mcp-name'] = params.name;
  return rawPost(url, {
    token,
    headers: h,
    body: { jsonrpc: '2.0', id, method, params: { ...params, _meta: META_2026(meta) } },
  });
}

/** Raw legacy (2025-era, session-less) request. */
export function rawLegacy(url, token, method, params, { id = 1, version = '2025-11-25', headers = {} } = {}) {
  const body = { jsonrpc: '2.0', id, method };
  if (params !== undefined) body.params = params;
  return rawPost(url, { token, headers: { 'mcp-protocol-version': version, ...headers }, body });
}

/** Parses the JSON of a tool result's first text block. */
export function toolText(result) {
  const block = (result.content ?? []).find((c) => c.type === 'text');
  return block ? JSON.parse(block.text) : null;
}

// Search results. `search_memory` (MCP) and `memory.search` (SDK/REST) are hybrid semantic
// searches: vector similarity fused with BM25. Like any semantic search they return up to `limit`
// nearest memories of the org even when those share no word with the query; the memories that
// contain the query's words rank first. So "the search finds exactly X" means: X is the top
// result, and X is the only result that mentions the test's unique word. Isolation and
// supersession checks look at the whole result list instead: a forbidden id appears nowhere.

/** The results whose `content` mentions `word` (case-insensitive substring). */
export function mentioning(results, word) {
  const needle = word.toLowerCase();
  return results.filter((r) => String(r.content ?? '').toLowerCase().includes(needle));
}

/**
 * Asserts that a search found exactly the memories `ids` for `word`: they are the top
 * `ids.length` results (in any order), and no other result mentions `word`.
 */
export function assertFinds(results, word, ids, message = '') {
  const want = [...ids].sort();
  const shown = JSON.stringify(results.map((r) => [r.id, r.content]));
  assert.deepEqual(results.slice(0, want.length).map((r) => r.id).sort(), want,
    `${message} the top results for "${word}" are ${JSON.stringify(want)}: ${shown}`.trim());
  assert.deepEqual(mentioning(results, word).map((r) => r.id).sort(), want,
    `${message} the results mentioning "${word}" are ${JSON.stringify(want)}: ${shown}`.trim());
}

/** Asserts that the memory `id` is nowhere in the results (isolation, supersession). */
export function assertAbsent(results, id, message = '') {
  assert.equal(results.some((r) => r.id === id), false,
    `${message} ${id} must not be among ${JSON.stringify(results.map((r) => r.id))}`.trim());
}

/**
 * Runs tests/e2e/py_client.py with the venv python and a JSON spec; resolves its parsed JSON
 * output (the script prints exactly one JSON document on stdout).
 */
export function runPython(spec, { timeoutMs = 60_000 } = {}) {
  return new Promise((resolve, reject) => {
    const script = path.join(E2E_DIR, 'py_client.py');
    execFile(LORE_PY, [script, JSON.stringify(spec)], { timeout: timeoutMs, maxBuffer: 16 << 20 },
      (error, stdout, stderr) => {
        if (error) {
          return reject(new Error(`py_client.py failed (${error.code ?? error.signal}):\n${stderr}\n${stdout}`));
        }
        try {
          resolve(JSON.parse(stdout));
        } catch (e) {
          reject(new Error(`py_client.py printed non-JSON: ${e.message}\n${stdout}\n${stderr}`));
        }
      });
  });
}

/** `lore init --org ORG` on a new database: resolves {org, principal, token, token_id}. */
export async function initDb(db, org = 'default') {
  const created = await loreJson(['init', '--db', db, '--org', org, '--json']);
  recordSecret(created.token, created.password);
  return created;
}

/**
 * `POST {base}/api/{org}/{name}` (an admin tool or SDK method) with a JSON body. Resolves
 * {status, headers, text, json} like `rawPost`.
 */
export function apiPost(base, org, name, token, body = {}, { headers = {} } = {}) {
  return rawPost(`${base}/api/${org}/${name}`, { token, body, headers: { accept: 'application/json', ...headers } });
}

/** `GET {base}/api/{org}/sdk.d.ts`: resolves {status, headers, text}. */
export async function apiDeclarations(base, org, token) {
  const res = await fetch(`${base}/api/${org}/sdk.d.ts`, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  return { status: res.status, headers: res.headers, text: await res.text() };
}
