// The hostile-tenant bench behind bench/hostile.sh: one `lore serve` with ONE worker thread and
// rate limits off; a victim org with HOSTILE_MEMORIES memories whose member calls search_memory
// back to back (a fresh query each time), first alone, then while an attacker org's read-only
// (viewer) tokens run the worst scripts we know, each in a loop: a busy loop to the steps cap,
// super-linear regular expressions (polynomial and exponential backtracking, a back-reference,
// a look-ahead scanned from every position), memory to the memory cap, a heavy SQL join
// through the SDK, and sleeps that hold script slots; and (round three) built-ins that loop or
// allocate natively past every checkpoint (an indexOf over 2^53 elements, JSON.stringify to
// gigabytes, flat, a sparse spread), a chain of SQL WITH tables, calls through a connection to
// an upstream that never answers, and unauthenticated sign-ins whose client document never
// arrives. The server runs with a 3 s script wall clock so that every attack ends within a
// phase. Prints the victim's p50/p99/max latency and throughput with and without the attacker,
// and what the attacker's calls ended with.
//
// env: LORE_BIN (required), HOSTILE_SECONDS (10 per phase), HOSTILE_MEMORIES (1000),
//      HOSTILE_TOKENS (attacker viewer tokens, 4), HOSTILE_PER_TOKEN (concurrent calls per
//      token, 2).
import net from 'node:net';

import { startLore, callTool, percentile, sleep } from './lib.mjs';

const LORE = process.env.LORE_BIN;
const SECONDS = Number(process.env.HOSTILE_SECONDS ?? 10);
const MEMORIES = Number(process.env.HOSTILE_MEMORIES ?? 1000);
const TOKENS = Number(process.env.HOSTILE_TOKENS ?? 4);
const PER_TOKEN = Number(process.env.HOSTILE_PER_TOKEN ?? 2);
if (!LORE) throw new Error('LORE_BIN is not set');

const WORDS = ['heron', 'weir', 'invoice', 'billing', 'launch', 'roadmap', 'pricing', 'latency', 'onboarding', 'retention', 'migration', 'quarter', 'audit', 'budget', 'vendor', 'renewal'];
const word = (i) => WORDS[i % WORDS.length];

// The worst scripts, all read-only (query_sdk with a viewer token).
const ATTACKS = [
  ['busy loop to the steps cap', 'let x = 0; for (;;) x++;'],
  ['polynomial regex', "return /a*a*a*a*a*a*a*b/.test('a'.repeat(200000))"],
  ['exponential regex', "return /(a+)+$/.test('a'.repeat(5000) + '!')"],
  ['back-reference regex', "return /(a*)*\\1b/.test('a'.repeat(5000))"],
  ['look-ahead from every start', "return /(?=.*x)y/.test('a'.repeat(400000))"],
  ['regex in a loop', "for (;;) /^(a|b)*c$/.test('ab'.repeat(5000))"],
  ['memory to the cap', 'const a = []; for (;;) a.push(new Array(100000).fill(1));'],
  ['heavy SQL join', "return (await client.sql({ sql: 'SELECT COUNT(*) FROM events a JOIN events b ON TRUE' })).rows"],
  ['sleep holding a slot', 'await ctx.sleep(5000); return 1'],
  // Round three: one native call past every checkpoint.
  ['indexOf over 2^53 elements', 'return Array.prototype.indexOf.call({length: 2 ** 53 - 1}, 1)'],
  ['JSON.stringify to gigabytes', "const a = new Array(100000).fill('x'.repeat(64)); return JSON.stringify([a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a]).length"],
  ['flat of 2^26 leaves', 'let a = [[1]]; for (let i = 0; i < 26; i++) a = [a, a]; return a.flat(Infinity).length'],
  ['spread of a sparse 2^28', 'const s = [,]; s.length = 2 ** 28; return [...s].length'],
  ['SQL WITH chain', "return (await client.sql.query({ sql: 'WITH a AS (SELECT REPEAT(content, 16) AS s FROM events), b AS (SELECT REPEAT(s, 16) AS s FROM a) SELECT LENGTH(s) FROM b' })).rows"],
];

// An upstream that accepts connections and never answers.
const held = [];
const silent = net.createServer((socket) => held.push(socket));
await new Promise((r) => silent.listen(0, '127.0.0.1', r));
const SILENT = `http://127.0.0.1:${silent.address().port}`;

const lore = await startLore(LORE, {
  orgs: ['victim', 'attacker'],
  name: 'hostile',
  args: ['--workers', '1', '--rate-token-per-minute', '0', '--rate-org-per-minute', '0',
    '--script-wall-ms', '3000', '--outbound-allow', '127.0.0.1'],
});
const results = {};
try {
  const victim = await lore.token('victim', 'member');
  const attackers = [];
  for (let i = 0; i < TOKENS; i++) attackers.push(await lore.token('attacker', 'viewer', 'mcp:read'));
  // The victim's memories, and a few in the attacker's org for its SQL join.
  for (let i = 0; i < MEMORIES; i += 100) {
    const memories = Array.from({ length: Math.min(100, MEMORIES - i) }, (_, j) => ({
      content: `Note ${i + j}: the ${word(i + j)} ${word((i + j) * 7 + 3)} review for ${word((i + j) * 13 + 5)} is due`,
    }));
    const r = await callTool(lore.base, 'victim', victim, 'save_memory', { memories });
    if (r.status !== 200 || r.body?.result?.isError) throw new Error(`seeding failed: ${r.text.slice(0, 300)}`);
  }
  const owner = await lore.token('attacker', 'admin');
  const notes = Array.from({ length: 300 }, (_, j) => ({ content: `attacker note ${j}` }));
  await callTool(lore.base, 'attacker', owner, 'save_memory', { memories: notes });
  const made = await callTool(lore.base, 'attacker', owner, 'run_sdk', { code: `return await client.connections.create({ name: 'silent', base_url: '${SILENT}' })` });
  if (made.status !== 200 || made.body?.result?.isError) throw new Error(`connection: ${made.text.slice(0, 300)}`);

  /** The victim's loop: fresh queries, back to back, for `seconds`. */
  async function victimLoop(seconds) {
    const latencies = [];
    let errors = 0;
    const until = Date.now() + seconds * 1000;
    for (let q = 0; Date.now() < until; q++) {
      const started = performance.now();
      const r = await callTool(lore.base, 'victim', victim, 'search_memory', { query: `${word(q)} ${word(q * 5 + 1)} ${q}`, limit: 5 });
      latencies.push(performance.now() - started);
      if (r.status !== 200 || r.body?.result?.isError) errors += 1;
    }
    return {
      calls: latencies.length,
      per_second: Math.round(latencies.length / seconds),
      p50_ms: +percentile(latencies, 50).toFixed(2),
      p99_ms: +percentile(latencies, 99).toFixed(2),
      max_ms: +Math.max(...latencies).toFixed(2),
      errors,
    };
  }

  // Warm the victim's index, then measure alone.
  await victimLoop(1);
  results.alone = await victimLoop(SECONDS);

  // The attacker: every token runs PER_TOKEN loops over the attacks.
  let stop = false;
  const outcomes = {};
  const attack = async (token, offset) => {
    for (let i = offset; !stop; i++) {
      const [name, code] = ATTACKS[i % ATTACKS.length];
      let outcome;
      try {
        const r = await callTool(lore.base, 'attacker', token, 'query_sdk', { code });
        const result = r.body?.result;
        if (r.status !== 200) outcome = `HTTP ${r.status}`;
        else if (result?.isError) {
          const e = JSON.parse(result.content?.[0]?.text ?? '{}').error ?? {};
          outcome = e.cap ? `cap ${e.cap}` : (e.code ?? 'error');
        } else outcome = 'ok';
      } catch (e) {
        outcome = `client: ${e.message}`;
      }
      outcomes[name] ??= {};
      outcomes[name][outcome] = (outcomes[name][outcome] ?? 0) + 1;
      if (outcome.startsWith('HTTP 503')) await sleep(200);
    }
  };
  // Calls through the connection to the silent upstream, and sign-ins whose client document
  // (on the same upstream) never arrives: each holds only its org's or address's share.
  const count = (name, outcome) => {
    outcomes[name] ??= {};
    outcomes[name][outcome] = (outcomes[name][outcome] ?? 0) + 1;
  };
  const outbound = async () => {
    while (!stop) {
      const r = await callTool(lore.base, 'attacker', owner, 'run_sdk', { code: "return await client.connections.call({ name: 'silent', path: '/x' })" });
      const e = r.body?.result?.isError ? (JSON.parse(r.body.result.content?.[0]?.text ?? '{}').error?.message ?? '') : 'ok';
      count('connection to a silent upstream', /overloaded/.test(e) ? 'overloaded' : /timed out|timeout/i.test(e) ? 'deadline' : e.slice(0, 40));
    }
  };
  const signIns = async () => {
    while (!stop) {
      const url = `${lore.base}/oauth/authorize?response_type=code&client_id=${encodeURIComponent(`${SILENT}/client.json`)}&redirect_uri=${encodeURIComponent('http://127.0.0.1:9/cb')}&code_challenge=${'a'.repeat(43)}&code_challenge_method=S256`;
      const r = await fetch(url).catch((e) => ({ status: `client: ${e.message}` }));
      if (r.text) await r.text();
      count('sign-in with a silent client document', `HTTP ${r.status}`);
    }
  };
  const loops = attackers.flatMap((t, i) => Array.from({ length: PER_TOKEN }, (_, j) => attack(t, i * PER_TOKEN + j)))
    .concat(Array.from({ length: PER_TOKEN }, outbound), Array.from({ length: PER_TOKEN }, signIns));
  await sleep(1000); // the attack is under way
  results.attacked = await victimLoop(SECONDS);
  stop = true;
  for (const socket of held) socket.destroy();
  silent.close();
  // Calls still waiting on the upstream end with it.
  const closer = setInterval(() => { for (const socket of held) socket.destroy(); }, 100);
  await Promise.all(loops);
  clearInterval(closer);
  results.attacker_outcomes = outcomes;
  results.ratio_p50 = +(results.attacked.p50_ms / results.alone.p50_ms).toFixed(2);
  results.ratio_p99 = +(results.attacked.p99_ms / results.alone.p99_ms).toFixed(2);
} finally {
  await lore.stop();
}
console.log(JSON.stringify({ seconds: SECONDS, memories: MEMORIES, attacker_tokens: TOKENS, per_token: PER_TOKEN, ...results }, null, 2));
if (results.attacked.errors > 0) process.exitCode = 1;
