// Preliminary latency of query_sdk through the real TypeScript MCP client against `lore serve`
// (LORE_BIN): 15 calls per script, p50 and max. Not the bench (cold run vs Node's
// esbuild + vm); a first look at the step budget and the concatenation guard.
// Run: LORE_BIN=<lore binary> node bench/sandbox_latency.mjs
import path from 'node:path';
import { startServer, initDb, tempDir, cleanupDir } from '../tests/e2e/lib/server.mjs';
import { connectSdk1 } from '../tests/e2e/lib/clients.mjs';
const dir = await tempDir();
const db = path.join(dir, 'lore.db');
const acme = await initDb(db, 'acme');
const server = await startServer({ db });
const { client } = await connectSdk1(`${server.base}/mcp/acme`, acme.token);
const res = {};
for (const [name, code] of [['steps', 'while (true) {}'], ['hot loop 1e6', 'let s = 0; for (let i = 0; i < 1e6; i++) s += i; return s'], ['return 1', 'return 1'], ['10 reads', 'const out = []; for (let i = 0; i < 10; i++) out.push(await client.templates.list({})); return out.length']]) {
  const times = [];
  for (let i = 0; i < 15; i++) {
    const t0 = performance.now();
    const r = await client.callTool({ name: 'query_sdk', arguments: { code } });
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  res[name] = { p50_ms: times[7].toFixed(1), max_ms: times[14].toFixed(1) };
}
console.log(JSON.stringify(res));
await client.close(); await server.stop(); await cleanupDir(dir);
