// Loading an org's history through MCP: INGEST_SHORT short memories (10,000; a chat turn each,
// 10 to 30 words) and INGEST_LONG long ones (1,000; 120 to 240 words, several windows each),
// saved with save_memory in batches of 100 by 4 clients, each set into an org of its own on
// `lore serve` (a fresh database, rate limits off). For each set: the seconds until every save
// was acknowledged (durable, found by keywords), and until every memory had its vectors
// (`waitForVectors` in lib.mjs), from the first save.
//
// usage: node bench/ingest.mjs <lore>
// env: INGEST_SHORT, INGEST_LONG, EMBEDDER (`default`: lore serve's own; or `builtin`)
import { startLore, callTool, waitForVectors } from './lib.mjs';

const [lore] = process.argv.slice(2);
if (!lore) throw new Error('usage: node bench/ingest.mjs <lore>');
const SHORT = Number(process.env.INGEST_SHORT ?? 10_000);
const LONG = Number(process.env.INGEST_LONG ?? 1_000);
const EMBEDDER = process.env.EMBEDDER ?? 'default';
const BATCH = 100;
const CLIENTS = 4;

const WORDS = (
  'the a team deploy service billing database migration review customer ticket release plan ' +
  'meeting notes decided agreed tomorrow yesterday week sprint roadmap incident outage latency ' +
  'dashboard alert oncall rotation budget vendor contract renewal kids dinner weekend trip ' +
  'hiking museum concert birthday gift recipe garden painting book novel chapter draft editor ' +
  'friend sister brother mother father colleague manager design prototype feedback launch ' +
  'partner invoice payment refund shipping warehouse inventory forecast quarter revenue'
).split(' ');
const NAMES = ['Ana', 'Ben', 'Caro', 'Dev', 'Eli', 'Fay', 'Gus', 'Hana'];

/** A seeded generator (mulberry32), so every run saves the same texts. */
function random(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function texts(count, minWords, maxWords, seed) {
  const rnd = random(seed);
  return Array.from({ length: count }, (_, i) => {
    const n = minWords + Math.floor(rnd() * (maxWords - minWords + 1));
    const words = Array.from({ length: n }, () => WORDS[Math.floor(rnd() * WORDS.length)]);
    const day = String(1 + (i % 28)).padStart(2, '0');
    return `[2026-03-${day}] ${NAMES[i % NAMES.length]}: ${words.join(' ')}.`;
  });
}

async function load(server, org, all) {
  const token = await server.token(org);
  const started = performance.now();
  let next = 0;
  await Promise.all(Array.from({ length: CLIENTS }, async () => {
    while (next < all.length) {
      const batch = all.slice(next, next + BATCH);
      next += BATCH;
      const r = await callTool(server.base, org, token, 'save_memory', {
        memories: batch.map((content) => ({ content })),
      });
      const ids = r.body?.result?.structuredContent?.ids;
      if (r.status !== 200 || r.body?.result?.isError || ids?.length !== batch.length) {
        throw new Error(`save_memory: ${r.status} ${r.text.slice(0, 300)}`);
      }
    }
  }));
  const durable = (performance.now() - started) / 1e3;
  await waitForVectors(server.base, org, token);
  const embedded = (performance.now() - started) / 1e3;
  return { durable, embedded };
}

const server = await startLore(lore, {
  orgs: ['short', 'long'],
  args: ['--rate-token-per-minute', '0', '--rate-org-per-minute', '0',
    ...(EMBEDDER === 'default' ? [] : ['--embedder', EMBEDDER])],
  name: 'ingest',
});
try {
  const rows = [
    ['short', SHORT, '10–30 words', await load(server, 'short', texts(SHORT, 10, 30, 1))],
    ['long', LONG, '120–240 words', await load(server, 'long', texts(LONG, 120, 240, 2))],
  ];
  console.log(`save_memory in batches of ${BATCH}, ${CLIENTS} clients, embedder ${EMBEDDER}, rate limits off; seconds from the first save`);
  console.log('| memories | count | length | every save acknowledged, s | per s | every vector stored, s | per s |');
  console.log('|---|---:|---|---:|---:|---:|---:|');
  for (const [name, count, length, r] of rows) {
    console.log(`| ${name} | ${count} | ${length} | ${r.durable.toFixed(1)} | ${(count / r.durable).toFixed(0)} | ${r.embedded.toFixed(1)} | ${(count / r.embedded).toFixed(0)} |`);
  }
} finally {
  await server.stop();
}
