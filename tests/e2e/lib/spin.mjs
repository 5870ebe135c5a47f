// The Spin target of the end-to-end tests: the lore Spin component in the wasmtime dev host
// (wasm/host, the local stand-in for `spin up`) with Spin SQLite and Spin key-value on files,
// behind the same handle as a native `lore serve`.
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import os from 'node:os';
import path from 'node:path';

import { operatorClient, initOrStop } from './operator.mjs';
import { REPO_ROOT, tempDir, cleanupDir } from './server.mjs';

const TARGET_DIR = process.env.CARGO_TARGET_DIR || path.join(os.homedir(), '.cache', 'lore-target');
/** The dev host binary (scripts/build-spin puts it beside the components). */
export const SPIN_HOST = process.env.LORE_SPIN_HOST || path.join(TARGET_DIR, 'spin', 'lore-spin-host');
/** The component served: the product unless LORE_SPIN_COMPONENT names another (scripts/build-spin). */
export const SPIN_COMPONENT = process.env.LORE_SPIN_COMPONENT || path.join(TARGET_DIR, 'spin', 'lore_spin.wasm');
export const SPIN_TEST_COMPONENT = process.env.LORE_SPIN_TEST_COMPONENT || path.join(TARGET_DIR, 'spin', 'lore_spin_test.wasm');

const live = new Set();
process.on('exit', () => {
  for (const child of live) {
    try { child.kill('SIGKILL'); } catch { /* already gone */ }
  }
});

/** `lore serve` flags the tests use, as Spin variables. */
function varsFor(args) {
  // The suites call fast from few tokens; limits.test.mjs checks the limits themselves.
  // The suites' upstreams listen on loopback, which members may not reach by default.
  const vars = {
    lore_allowed_hosts: '127.0.0.1,localhost',
    lore_rate_token_per_minute: '1000000',
    lore_rate_org_per_minute: '0',
    lore_rate_anonymous_per_minute: '1000000',
    lore_outbound_allow: '127.0.0.0/8,::1',
  };
  const origins = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--allowed-origin') origins.push(args[++i]);
    else if (args[i] === '--no-auth') vars.lore_no_auth = '1';
    else throw new Error(`the spin target has no equivalent of ${args[i]}`);
  }
  if (origins.length) vars.lore_allowed_origins = origins.join(',');
  return vars;
}

/**
 * Starts the dev host on a fresh SQLite file and bootstraps it (operator `init`).
 * opts.args: `lore serve` flags (see varsFor); opts.component: the .wasm (default
 * SPIN_COMPONENT); opts.db: the SQLite file (to restart on the same data); opts.vars: more
 * variables; opts.operator: false leaves the operator secret unset.
 */
export async function startSpin(opts = {}) {
  const ownDir = opts.db ? null : await tempDir();
  const db = opts.db ?? path.join(ownDir, 'lore-spin.db');
  // The host's default key-value file: beside the database, "-kv" added to its name.
  const kv = db.replace(/(\.[^./]*)?$/, (ext) => `-kv${ext}`);
  const secret = crypto.randomBytes(24).toString('hex');
  const vars = { ...varsFor(opts.args ?? []), ...(opts.vars ?? {}) };
  if (opts.operator !== false) vars.lore_operator_secret = secret;
  const argv = [opts.component ?? SPIN_COMPONENT, '--addr', '127.0.0.1:0', '--db', db];
  for (const [k, v] of Object.entries(vars)) argv.push('--var', `${k}=${v}`);
  const child = spawn(SPIN_HOST, argv, { stdio: ['ignore', 'pipe', 'pipe'], cwd: REPO_ROOT });
  live.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8');
  child.stderr.setEncoding('utf8');
  child.stdout.on('data', (d) => { stdout += d; });
  child.stderr.on('data', (d) => { stderr += d; });
  let exitInfo = null;
  const exited = new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      live.delete(child);
      exitInfo = { code, signal };
      resolve(exitInfo);
    });
  });

  const deadline = Date.now() + 60_000;
  let m = null;
  while (!m) {
    if (exitInfo) throw new Error(`the spin host exited early (${JSON.stringify(exitInfo)}):\n${stderr}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`the spin host did not start in time:\n${stderr}`);
    }
    m = / on (http:\/\/127\.0\.0\.1:\d+) /.exec(stderr);
    if (!m) await new Promise((r) => setTimeout(r, 25));
  }
  const [, base] = m;

  const operator = operatorClient(base, secret, 'spin host', () => stderr);
  const init = opts.operator === false ? {} : await initOrStop(operator, child, exited);
  const server = {
    target: 'spin',
    child,
    db,
    kv,
    dir: ownDir ?? path.dirname(db),
    base,
    url: `${base}/mcp`,
    ownerToken: init.status === 'created' ? init.token : null,
    operator,
    operatorSecret: secret,
    get stderr() { return stderr; },
    get stdout() { return stdout; },
    get exitInfo() { return exitInfo; },
    async stop(timeoutMs = 15_000) {
      if (exitInfo) return exitInfo;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      const info = await exited;
      clearTimeout(timer);
      return info;
    },
    async dispose() {
      await server.stop();
      if (ownDir) await cleanupDir(ownDir);
    },
  };
  return server;
}
