// Issue 4 end to end: TypeScript scripts through `query_sdk` and `run_sdk`, driven by the real
// `@modelcontextprotocol/sdk` client against `lore serve` (or the Workers build): reads, writes
// that commit together, sleeps, Promise.all, a throw that writes nothing, dry runs, caps that
// name themselves, and a second org answered while hostile scripts run.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';

import { startServer, initDb, createOrg, tempDir, cleanupDir, TARGET, skipOn } from './lib/server.mjs';
import { connectSdk1 } from './lib/clients.mjs';

let dir;
let server;
let acme;
let other;
let client;

before(async () => {
  dir = await tempDir();
  if (TARGET === 'worker') {
    server = await startServer();
    acme = await createOrg(server, 'acme');
  } else {
    const db = path.join(dir, 'lore.db');
    acme = await initDb(db, 'acme');
    server = await startServer({ db });
  }
  other = await createOrg(server, 'globex');
  ({ client } = await connectSdk1(`${server.base}/mcp/acme`, acme.token));
  const made = await run(client, "await client.templates.create({name: 'ticket', schema: {type: 'object', properties: {points: {type: 'integer'}}}}); return 'ok'");
  assert.equal(made.structuredContent?.result, 'ok', JSON.stringify(made));
});
after(async () => {
  await client?.close();
  if (server) await server.stop();
  await cleanupDir(dir);
});

function run(c, code, extra = {}) {
  return c.callTool({ name: 'run_sdk', arguments: { code, ...extra } });
}
function query(c, code, extra = {}) {
  return c.callTool({ name: 'query_sdk', arguments: { code, ...extra } });
}
function ok(result) {
  assert.notEqual(result.isError, true, JSON.stringify(result));
  return result.structuredContent;
}
function failure(result) {
  assert.equal(result.isError, true, JSON.stringify(result));
  return JSON.parse(result.content[0].text).error;
}
async function ticketCount(c = client) {
  return ok(await query(c, "return (await client.entities.list({type: 'ticket'})).items.length")).result;
}

test('query_sdk and run_sdk are on tools/list with their schemas', async () => {
  const { tools } = await client.listTools();
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  assert.deepEqual(byName.query_sdk.inputSchema.required, ['code']);
  assert.equal(byName.query_sdk.annotations.readOnlyHint, true);
  assert.equal(byName.run_sdk.annotations.readOnlyHint, false);
  assert.equal(byName.run_sdk.annotations.destructiveHint, true);
  assert.ok(byName.run_sdk.inputSchema.properties.dry_run);
  assert.ok(byName.run_sdk.outputSchema.properties.side_effect_preview);
});

test('a TypeScript script reads, writes, sleeps and uses Promise.all', async () => {
  const wrote = ok(await run(client, `
    interface Ticket { id: string; name: string; properties: { points?: number } }
    const made: Ticket[] = [];
    for (const [name, points] of [['a', 1], ['b', 2]] as const) {
      made.push(await client.entities.create({ type: 'ticket', name, properties: { points } }));
    }
    await ctx.sleep(50);
    const [one, two] = await Promise.all(made.map((t) => client.entities.get({ id: t.id })));
    ctx.log('created', made.length);
    return { names: [one.name, two.name], points: one.properties.points + two.properties.points };
  `));
  assert.deepEqual(wrote.result, { names: ['a', 'b'], points: 3 });
  assert.deepEqual(wrote.logs, ['created 2']);
  assert.ok(wrote.elapsed_ms >= 50, `slept: ${wrote.elapsed_ms}`);
  assert.equal(await ticketCount(), 2);
});

test('a throw writes nothing and points at the TypeScript line', async () => {
  const before = await ticketCount();
  const e = failure(await run(client, "const n: number = 1;\nawait client.entities.create({type: 'ticket', name: 'doomed'});\nthrow new Error('no ' + n);"));
  assert.equal(e.code, 'script_error');
  assert.match(e.message, /no 1/);
  assert.equal(e.line, 3);
  assert.equal(e.calls_made, 1);
  assert.equal(await ticketCount(), before);
});

test('a dry run previews its writes and dispatches none', async () => {
  const before = await ticketCount();
  const out = ok(await run(client, "const t = await client.entities.create({type: 'ticket', name: 'maybe'}); return t.id", { dry_run: true }));
  assert.equal(out.result, 'dry_run_1');
  assert.equal(out.side_effect_preview.length, 1);
  assert.equal(out.side_effect_preview[0].method, 'entities.create');
  assert.equal(await ticketCount(), before);
});

test('query_sdk refuses writes with a stable code', async () => {
  const e = failure(await query(client, "await client.entities.create({type: 'ticket', name: 'x'})"));
  assert.equal(e.code, 'needs_write');
});

test('caps end scripts with an error that names the cap and limit', async () => {
  const cases = [
    ['while (true) {}', 'steps'],
    ['for (let i = 0; i < 201; i++) await client.templates.list({})', 'sdk_calls'],
    ['await ctx.sleep(31000)', 'sleep'],
    ["return 'x'.repeat(3000000)", 'output'],
    ["let s = 'x'; for (;;) s += s;", 'string_length'],
    ['await new Promise(() => {})', 'never_settles'],
    // The native stack and the heap, on every platform (the same cases run under workerd and Spin).
    ['const f = (n: number): number => f(n + 1); return f(0)', 'recursion'],
    [`return ${'('.repeat(300)}1${')'.repeat(300)}`, 'nesting'],
    ["return JSON.parse('['.repeat(100000) + ']'.repeat(100000))", 'value_depth'],
    ['let a: any[] = []; for (let i = 0; i < 100000; i++) a = [a]; return String(a)', 'recursion'],
    ['const a = []; for (;;) a.push(new Array(100000).fill(0));', 'memory'],
    ['while (true) await null', 'jobs'],
    ['return new Array(100000000).fill(0).length', 'array_length'],
    // A back-reference defeats the matcher's memo: backtracking counts against the steps.
    ["return /(a*)*\\1b/.test('a'.repeat(5000))", 'steps'],
  ];
  for (const [code, cap] of cases) {
    const e = failure(await query(client, code));
    assert.equal(e.code, 'cap_exceeded', `${code}: ${JSON.stringify(e)}`);
    assert.equal(e.cap, cap, code);
    assert.equal(typeof e.limit, 'number');
    assert.match(e.message, new RegExp(cap));
  }
  const e = failure(await run(client, "for (let i = 0; i < 300; i++) await client.entities.create({type: 'ticket', name: 'n' + i})"));
  assert.equal(e.cap, 'sdk_calls');
  assert.equal(e.limit, 200);
});

test('another org is answered while hostile scripts run', async () => {
  const { client: theirs } = await connectSdk1(`${server.base}/mcp/globex`, other.token, 'lore-e2e-globex');
  try {
    const hostile = [
      'while (true) {}',
      "let s = 'x'; for (;;) s += s;",
      "return /(a*)*\\1b/.test('a'.repeat(5000))",
      'let o = {}; for (let i = 0; i < 100000; i++) o = {o}; return JSON.stringify(o)',
    ].map((code) => query(client, code));
    const answers = [];
    for (let i = 0; i < 5; i++) {
      answers.push(ok(await query(theirs, 'return (await client.organizations.get({})).id')).result);
    }
    assert.deepEqual(answers, Array(5).fill('globex'));
    for (const r of await Promise.all(hostile)) assert.equal(failure(r).code, 'cap_exceeded');
    const crossOrg = failure(await query(theirs, "return (await client.entities.list({type: 'ticket'})).items"));
    assert.notEqual(crossOrg.code, undefined);
  } finally {
    await theirs.close();
  }
});

test('every run is an Action readable through the SDK', async () => {
  const out = ok(await query(client, 'return 42'));
  const action = ok(await query(client, `return await client.actions.get({id: '${out.action_id}'})`)).result;
  assert.equal(action.source, 'query_sdk');
  assert.equal(action.status, 'ok');
  assert.match(action.code_hash, /^[0-9a-f]{64}$/);
});

test('a long script streams progress over SSE, so a short client timeout keeps waiting', skipOn('spin', 'a Spin component answers when its request is done, so notifications come with the result'), async () => {
  // Four 1.5 s sleeps (6 s) against a 2 s request timeout that each progress notification resets.
  const code = "for (let i = 0; i < 4; i++) await ctx.sleep(1500); return 'slept';";
  const started = Date.now();
  const seen = [];
  const result = await client.callTool({ name: 'query_sdk', arguments: { code } }, undefined, {
    timeout: 2000,
    resetTimeoutOnProgress: true,
    onprogress: (p) => seen.push({ ...p, at: Date.now() - started }),
  });
  const elapsed = Date.now() - started;
  assert.equal(ok(result).result, 'slept');
  assert.ok(elapsed >= 6000, `took ${elapsed} ms`);
  const sleeps = seen.filter((p) => p.message === 'ctx.sleep(1500)');
  assert.equal(sleeps.length, 4, JSON.stringify(seen));
  // Streamed, not buffered: the first progress arrived long before the result.
  assert.ok(seen[0].at < 1000, JSON.stringify(seen));
  for (let i = 1; i < seen.length; i++) assert.ok(seen[i].progress > seen[i - 1].progress, JSON.stringify(seen));
  assert.equal(seen.at(-1).message, 'done');
  // Without resetting on progress, the same 2 s timeout ends the call.
  await assert.rejects(
    client.callTool({ name: 'query_sdk', arguments: { code } }, undefined, { timeout: 2000, onprogress: () => {} }),
    /timed out|timeout/i,
  );
});

test("a behavior's reaction runs after a matching save, as its own Action", async () => {
  ok(await run(client, 'return await client.behaviors.create(ctx.args)', {
    args: {
      name: 'file_incidents',
      trigger: { event_kinds: ['observation'] },
      code: "await ctx.sleep(1500); await client.entities.create({type: 'ticket', name: 'seen: ' + ctx.args.event.content}); return ctx.args.event.id",
    },
  }));
  const t0 = Date.now();
  const saved = await client.callTool({ name: 'save_memory', arguments: { content: 'the build is red', kind: 'observation' } });
  const saveMs = Date.now() - t0;
  assert.notEqual(saved.isError, true, JSON.stringify(saved));
  // lore serve answers before the reaction (which sleeps 1.5 s) runs; the edge runs it first.
  if (TARGET === 'native') assert.ok(saveMs < 1000, `save took ${saveMs} ms`);
  const [id] = saved.structuredContent.ids;
  // Natively the reaction runs after the save is answered: wait for it.
  let action;
  for (let i = 0; i < 100 && !action; i++) {
    const acts = ok(await query(client, "return (await client.actions.list({limit: 500})).items.filter((a: any) => a.source === 'behavior')")).result;
    action = acts.find((a) => a.trigger_event === id);
    if (!action) await new Promise((r) => setTimeout(r, 50));
  }
  assert.ok(action, 'the reaction ran');
  assert.equal(action.status, 'ok', JSON.stringify(action));
  assert.equal(action.behavior, 'file_incidents');
  const names = ok(await query(client, "return (await client.entities.list({type: 'ticket'})).items.map((t: any) => t.name)")).result;
  assert.ok(names.includes('seen: the build is red'), JSON.stringify(names));
  ok(await run(client, "return await client.behaviors.delete({name: 'file_incidents'})"));
});
