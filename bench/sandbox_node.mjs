// Node's peer for lore's cold script run (bench/sandbox.sh; BENCHMARKS.md, "Script sandbox"):
// the same TypeScript, against the same SQLite database lore's bench seeded, through the
// pipeline a Node-based sandbox would use: esbuild's transform (TypeScript to JavaScript), a
// fresh `vm` context per run, and an async `client.entities.get` that reads the entity's row
// with node:sqlite and parses its JSON, as lore's storage port does.
//   node bench/sandbox_node.mjs <bench json written by examples/sandbox_bench.rs> [runs]
import fs from 'node:fs';
import vm from 'node:vm';
import { DatabaseSync } from 'node:sqlite';
// esbuild as pinned for the Workers build (scripts/worker-tools): ESBUILD_MODULE is its main file.
const { transform } = await import(process.env.ESBUILD_MODULE || 'esbuild');

const spec = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const runs = Number(process.argv[3] || 200);
const db = new DatabaseSync(spec.db, { readOnly: true });
const byId = new Map(spec.ids.map((id, i) => [id, spec.keys[i]]));
const select = db.prepare('SELECT v FROM lore_kv WHERE k = ?');

const makeClient = () => ({
  entities: {
    get: async ({ id }) => {
      const key = byId.get(id);
      const row = key && select.get(key);
      if (!row) throw Object.assign(new Error(`no entity ${id}`), { code: 'not_found' });
      return JSON.parse(Buffer.from(row.v).toString('utf8'));
    },
  },
});

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.round((s.length - 1) * p)];
};

async function once(source, args) {
  const { code } = await transform(`(async (ctx, client) => {\n${source}\n})`, { loader: 'ts' });
  const context = vm.createContext({ ctx: { args }, client: makeClient() });
  const fn = new vm.Script(code, { filename: 'script.ts' }).runInContext(context);
  return fn(context.ctx, context.client);
}

async function time(source, args, want) {
  const times = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    const r = await once(source, args);
    times.push(performance.now() - t);
    if (r !== want) throw new Error(`got ${r}, want ${want}`);
  }
  return { p50: pct(times, 0.5), p99: pct(times, 0.99) };
}

const ten = await time(spec.script, { ids: spec.ids }, spec.expected);
const one = await time('return 1', {}, 1);
const hot = await time('let s = 0; for (let i = 0; i < 1000000; i++) { s += i; } return s;', {}, 499999500000);
console.log(JSON.stringify({ runs, node: process.version, ten_reads_ms: ten, return_1_ms: one, hot_loop_ms: hot }));
