// Concurrent single saves through MCP: SAVES_CLIENTS clients (32) each calling save_memory with
// one memory per call, back to back, for SAVES_SECONDS (10) against `lore serve` on a fresh database
// (rate limits off, synchronous=FULL as shipped), then every acknowledged save is read back
// (query_sql over `events`). With LORE_BASELINE_BIN, the same against that binary (an earlier
// lore, one fsync per commit) in the same run, as the peer.
//
// Then the time until every memory has its vectors (`waitForVectors` in lib.mjs), from the end
// of the saves.
//
// usage: node bench/saves.mjs <lore> [baseline lore]
// env: SAVES_CLIENTS, SAVES_SECONDS, EMBEDDER (`default`: lore serve's own, all-MiniLM-L6-v2,
//      whose vectors follow the answer; `builtin`: the static table, stored with the save)
import { closeSync, fsyncSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startLore, callTool, percentile, waitForVectors } from './lib.mjs';

/** This disk's fsync: the median of 200 writes of 4 KiB, each synced, in the temp dir. */
function fsyncMs() {
  const dir = mkdtempSync(path.join(tmpdir(), 'lore-fsync-'));
  const fd = openSync(path.join(dir, 'probe'), 'w');
  const page = Buffer.alloc(4096, 1);
  const times = [];
  for (let i = 0; i < 200; i++) {
    const t = performance.now();
    writeSync(fd, page);
    fsyncSync(fd);
    times.push(performance.now() - t);
  }
  closeSync(fd);
  rmSync(dir, { recursive: true, force: true });
  return percentile(times, 50);
}

const [lore, baseline] = process.argv.slice(2);
if (!lore) throw new Error('usage: node bench/saves.mjs <lore> [baseline lore]');
const CLIENTS = Number(process.env.SAVES_CLIENTS ?? 32);
const SECONDS = Number(process.env.SAVES_SECONDS ?? 10);
const EMBEDDER = process.env.EMBEDDER ?? 'default';

async function measure(bin, label) {
  const server = await startLore(bin, {
    orgs: ['saves'],
    args: ['--rate-token-per-minute', '0', '--rate-org-per-minute', '0',
      ...(EMBEDDER === 'default' ? [] : ['--embedder', EMBEDDER])],
    name: 'saves',
  });
  try {
    const token = await server.token('saves');
    const acked = [];
    const latencies = [];
    const end = performance.now() + SECONDS * 1e3;
    let failures = 0;
    let firstFailure = '';
    await Promise.all(Array.from({ length: CLIENTS }, async (_, c) => {
      for (let i = 0; performance.now() < end; i++) {
        const content = `client ${c} note ${i}: the deploy of service ${(c * 7919 + i) % 997} finished`;
        const started = performance.now();
        const r = await callTool(server.base, 'saves', token, 'save_memory', { content });
        latencies.push(performance.now() - started);
        const id = r.body?.result?.structuredContent?.ids?.[0];
        if (r.status !== 200 || r.body?.result?.isError || !id) {
          failures++;
          firstFailure ||= `${r.status} ${r.text.slice(0, 200)}`;
          continue;
        }
        acked.push(id);
      }
    }));
    const seconds = SECONDS;
    // The time until no memory waits for its vectors.
    const saved = performance.now();
    await waitForVectors(server.base, 'saves', token);
    const embeddedAfter = (performance.now() - saved) / 1e3;
    // Every acknowledged save is there.
    const found = new Set();
    let cursor;
    do {
      const r = await callTool(server.base, 'saves', token, 'query_sql', {
        sql: 'SELECT id FROM events ORDER BY id', limit: 1000, ...(cursor ? { cursor } : {}),
      });
      const sc = r.body?.result?.structuredContent;
      if (r.status !== 200 || !sc) throw new Error(`query_sql: ${r.status} ${r.text.slice(0, 300)}`);
      for (const row of sc.rows) found.add(Array.isArray(row) ? row[0] : row.id);
      cursor = sc.next_cursor;
    } while (cursor);
    const missing = acked.filter((id) => !found.has(id));
    if (failures || missing.length) {
      throw new Error(`${label}: ${failures} failed saves (first: ${firstFailure}), ${missing.length} acknowledged saves missing`);
    }
    return { label, saves: acked.length, perSecond: acked.length / seconds, p50: percentile(latencies, 50), p99: percentile(latencies, 99), embeddedAfter };
  } finally {
    await server.stop();
  }
}

const rows = [await measure(lore, 'lore (group commit)')];
if (baseline) rows.push(await measure(baseline, 'peer: LORE_BASELINE_BIN'));
console.log(`${CLIENTS} clients, one memory per save_memory call, ${SECONDS} s, embedder ${EMBEDDER}, rate limits off, synchronous=FULL; every acknowledged save read back; this disk's fsync of 4 KiB: ${fsyncMs().toFixed(2)} ms (median)`);
console.log('| server | saves acknowledged | saves/s | p50 ms | p99 ms | every vector stored, s after the last save |');
console.log('|---|---:|---:|---:|---:|---:|');
for (const r of rows) {
  console.log(`| ${r.label} | ${r.saves} | ${r.perSecond.toFixed(0)} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ${r.embeddedAfter.toFixed(1)} |`);
}
if (rows.length === 2) console.log(`ratio: ${(rows[0].perSecond / rows[1].perSecond).toFixed(2)}× the peer`);
