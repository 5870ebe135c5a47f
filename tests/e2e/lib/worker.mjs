// The Workers target of the end-to-end tests: the built lore Worker under Miniflare (workerd)
// with D1 and KV (tests/worker/serve.mjs), behind the same handle as a native `lore serve`.
import { spawn } from 'node:child_process';
import path from 'node:path';

import { operatorClient, initOrStop } from './operator.mjs';
import { REPO_ROOT, tempDir, cleanupDir } from './server.mjs';

/** The build served: `build` (the product) unless LORE_WORKER_BUILD names another. */
const BUILD = process.env.LORE_WORKER_BUILD || 'build';
/** Node >= 22 for Miniflare (scripts/worker-tools exports it). */
const NODE = process.env.WORKER_NODE || process.execPath;

const live = new Set();
process.on('exit', () => {
  for (const child of live) {
    try { child.kill('SIGKILL'); } catch { /* already gone */ }
  }
});

/** `lore serve` flags the tests use, as the Worker's variables. */
function varsFor(args) {
  const vars = {
    // Loopback only, like a native server bound to 127.0.0.1 (the DNS-rebinding checks).
    LORE_ALLOWED_HOSTS: '127.0.0.1,localhost',
    // The suites call fast from few tokens; limits.test.mjs checks the limits themselves.
    LORE_RATE_TOKEN_PER_MINUTE: '1000000',
    LORE_RATE_ORG_PER_MINUTE: '0',
    LORE_RATE_ANONYMOUS_PER_MINUTE: '1000000',
    // The suites' upstreams listen on loopback, which members may not reach by default.
    LORE_OUTBOUND_ALLOW: '127.0.0.0/8,::1',
  };
  const origins = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--allowed-origin') origins.push(args[++i]);
    else if (args[i] === '--no-auth') vars.LORE_NO_AUTH = '1';
    else throw new Error(`the worker target has no equivalent of ${args[i]}`);
  }
  if (origins.length) vars.LORE_ALLOWED_ORIGINS = origins.join(',');
  return vars;
}

/**
 * Starts the Worker with a fresh D1/KV directory and bootstraps it (operator `init`).
 * opts.args: `lore serve` flags (see varsFor); opts.build: the build directory (default
 * LORE_WORKER_BUILD or build); opts.vars: more Worker variables; opts.operator: false leaves
 * the operator secret unset (no bootstrap, no owner token).
 */
export async function startWorker(opts = {}) {
  const ownDir = await tempDir();
  const persist = opts.persist ?? ownDir;
  const argv = [path.join(REPO_ROOT, 'tests', 'worker', 'serve.mjs'), '--build', opts.build ?? BUILD, '--persist', persist];
  const vars = { ...varsFor(opts.args ?? []), ...(opts.vars ?? {}) };
  for (const [k, v] of Object.entries(vars)) argv.push('--var', `${k}=${v}`);
  if (opts.operator === false) argv.push('--no-operator');
  const child = spawn(NODE, argv, { stdio: ['ignore', 'pipe', 'pipe'], cwd: REPO_ROOT });
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
    if (exitInfo) throw new Error(`the worker exited early (${JSON.stringify(exitInfo)}):\n${stderr}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`the worker did not start in time:\n${stderr}`);
    }
    m = /lore worker listening on (http:\/\/127\.0\.0\.1:\d+)\/mcp operator-secret=(\w+)/.exec(stdout);
    if (!m) await new Promise((r) => setTimeout(r, 25));
  }
  const [, base, secret] = m;

  const operator = operatorClient(base, secret, 'worker', () => stderr);
  const init = opts.operator === false ? {} : await initOrStop(operator, child, exited);
  const server = {
    target: 'worker',
    child,
    db: null,
    dir: persist,
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
      await cleanupDir(ownDir);
    },
  };
  return server;
}
