// The hostile-tenant bench behind bench/hostile.sh: one `lore serve` with ONE worker thread and
// rate limits off; a victim org with HOSTILE_MEMORIES memories whose member calls search_memory
// back to back (a fresh query each time), first alone, then while an attacker org's read-only
// (viewer) tokens run the worst scripts we know, each in a loop: a busy loop to the steps cap,
// super-linear regular expressions (polynomial and exponential backtracking, a back-reference,
// a look-ahead scanned from every position), memory to the memory cap, a heavy SQL join
// through the SDK, and sleeps that hold script slots. Prints the victim's p50/p99/max latency
// and throughput with and without the attacker, and what the attacker's calls ended with.
//
// env: LORE_BIN (required), HOSTILE_SECONDS (10 per phase), HOSTILE_MEMORIES (1000),
//      HOSTILE_TOKENS (attacker viewer tokens, 4), HOSTILE_PER_TOKEN (concurrent calls per
//      token, 2).
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
];

const lore = await startLore(LORE, {
  orgs: ['victim', 'attacker'],
  name: 'hostile',
  args: ['--workers', '1', '--rate-token-per-minute', '0', '--rate-org-per-minute', '0'],
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
  const loops = attackers.flatMap((t, i) => Array.from({ length: PER_TOKEN }, (_, j) => attack(t, i * PER_TOKEN + j)));
  await sleep(1000); // the attack is under way
  results.attacked = await victimLoop(SECONDS);
  stop = true;
  await Promise.all(loops);
  results.attacker_outcomes = outcomes;
  results.ratio_p50 = +(results.attacked.p50_ms / results.alone.p50_ms).toFixed(2);
  results.ratio_p99 = +(results.attacked.p99_ms / results.alone.p99_ms).toFixed(2);
} finally {
  await lore.stop();
}
console.log(JSON.stringify({ seconds: SECONDS, memories: MEMORIES, attacker_tokens: TOKENS, per_token: PER_TOKEN, ...results }, null, 2));
if (results.attacked.errors > 0) process.exitCode = 1;
