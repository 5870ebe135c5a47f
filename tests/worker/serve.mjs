// Serves a built lore Worker under Miniflare (workerd, the Workers runtime) on a free loopback
// port, with a local D1 database and KV namespace persisted in a directory, the schema applied
// to D1 the way `wrangler d1 execute --file crates/base/src/storage/schema.sql` applies it, and the operator
// routes enabled with a secret. Prints one line when ready:
//
//   lore worker listening on http://127.0.0.1:PORT/mcp operator-secret=SECRET
//
// and serves until SIGTERM/SIGINT. Used by the end-to-end tests, the conformance run and the
// benchmarks (LORE_TARGET=worker).
//
//   node tests/worker/serve.mjs --build build --persist DIR [--var NAME=VALUE ...] [--no-operator]
//
// --no-operator leaves LORE_OPERATOR_SECRET unset (the operator routes are then off).
//
// Needs Node >= 22 and WORKER_NODE_MODULES (from scripts/worker-tools) for miniflare.
//
// Workers AI cannot run locally. The AI binding here is TEST-ONLY: a wrapped binding whose
// `run` checks the model name and input shape like Workers AI does and returns deterministic
// 384-d vectors of each text's hashed words. It is never part of a deployed Worker.
import { createRequire } from 'node:module';
import { readFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

function parseArgs(argv) {
  const out = { build: 'build', persist: null, vars: {}, operator: true };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--build') out.build = argv[++i];
    else if (a === '--persist') out.persist = argv[++i];
    else if (a === '--no-operator') out.operator = false;
    else if (a === '--var') {
      const [k, ...v] = argv[++i].split('=');
      out.vars[k] = v.join('=');
    } else throw new Error(`unknown argument ${a}`);
  }
  if (!out.persist) throw new Error('--persist DIR is required');
  return out;
}

/** The top-level string values of wrangler.toml that the local runtime must agree with. */
async function wranglerConfig() {
  const text = await readFile(path.join(REPO, 'wrangler.toml'), 'utf8');
  const top = text.split(/^\[/m)[0];
  const value = (key) => new RegExp(`^${key}\\s*=\\s*"([^"]*)"`, 'm').exec(top)?.[1];
  const vars = {};
  const varsSection = /^\[vars\]\s*$([\s\S]*?)(^\[|(?![\s\S]))/m.exec(text);
  if (varsSection) {
    for (const m of varsSection[1].matchAll(/^([A-Z_][A-Z0-9_]*)\s*=\s*"([^"]*)"/gm)) vars[m[1]] = m[2];
  }
  return { compatibilityDate: value('compatibility_date'), vars };
}

/** Statements of the shared schema, comments dropped. */
async function schemaStatements() {
  const sql = await readFile(path.join(REPO, 'crates', 'base', 'src', 'storage', 'schema.sql'), 'utf8');
  return sql
    .split('\n')
    .filter((line) => !line.trim().startsWith('--'))
    .join('\n')
    .split(';')
    .map((s) => s.trim())
    .filter(Boolean);
}

// TEST-ONLY stand-in for the Workers AI binding (see the header comment).
const TEST_AI_MODULE = `
class Ai {
  async run(model, input) {
    if (model !== '@cf/baai/bge-small-en-v1.5') throw new Error('test AI binding: unknown model ' + model);
    if (input === null || typeof input !== 'object' || input instanceof Map || !Array.isArray(input.text)) {
      throw new Error('test AI binding: input must be a plain object {text: string[]}, got ' + Object.prototype.toString.call(input));
    }
    // Hashed words (lowercased), as a model would place texts that share words near each
    // other; bytes by position made every pair of texts unrelated, which no model does.
    const data = input.text.map((text) => {
      const v = new Array(384).fill(0);
      for (const word of String(text).toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []) {
        let h = 2166136261;
        for (const c of word) h = Math.imul(h ^ c.codePointAt(0), 16777619) >>> 0;
        v[h % 384] += 1;
      }
      const norm = Math.sqrt(v.reduce((s, x) => s + x * x, 0)) || 1;
      return v.map((x) => x / norm);
    });
    return { shape: [data.length, 384], data };
  }
}
export default function () { return new Ai(); }
`;

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const nodeModules = process.env.WORKER_NODE_MODULES;
  if (!nodeModules) throw new Error('WORKER_NODE_MODULES is not set; source scripts/worker-tools');
  const require = createRequire(path.join(nodeModules, 'noop.js'));
  const { Miniflare } = await import(pathToFileURL(require.resolve('miniflare')).href);

  const build = path.resolve(REPO, args.build);
  const config = await wranglerConfig();
  const secret = args.operator ? randomBytes(24).toString('hex') : null;
  const mf = new Miniflare({
    host: '127.0.0.1',
    port: 0,
    d1Persist: path.join(args.persist, 'd1'),
    durableObjectsPersist: path.join(args.persist, 'objects'),
    workers: [
      {
        name: 'lore',
        modules: true,
        scriptPath: path.join(build, 'worker', 'shim.mjs'),
        modulesRules: [
          { type: 'ESModule', include: ['**/*.js', '**/*.mjs'] },
          { type: 'CompiledWasm', include: ['**/*.wasm'] },
        ],
        compatibilityDate: config.compatibilityDate,
        d1Databases: { DB: 'lore-local' },
        durableObjects: { LORE_ORG: { className: 'OrgObject', useSQLite: true } },
        bindings: { ...config.vars, ...args.vars, ...(secret ? { LORE_OPERATOR_SECRET: secret } : {}) },
        wrappedBindings: { AI: { scriptName: 'test-only-workers-ai' } },
      },
      {
        name: 'test-only-workers-ai',
        modules: [{ type: 'ESModule', path: 'test-only-workers-ai.mjs', contents: TEST_AI_MODULE }],
      },
    ],
  });
  const url = await mf.ready;
  const db = await mf.getD1Database('DB');
  const statements = await schemaStatements();
  await db.batch(statements.map((s) => db.prepare(s)));

  const base = url.href.replace(/\/$/, '');
  process.stdout.write(`lore worker listening on ${base}/mcp operator-secret=${secret ?? 'none'}\n`);

  let closing = false;
  const stop = async () => {
    if (closing) return;
    closing = true;
    await mf.dispose();
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch((e) => {
  process.stderr.write(`serve.mjs: ${e.stack ?? e}\n`);
  process.exit(1);
});
