// After a full native e2e run (tests/e2e/run.sh): the logs of every `lore serve` it started
// must hold no secret the tests used. A log line is a JSON object on its own line (the servers
// ran with --log-format json); the one-time bootstrap text a fresh server prints for its
// operator (the owner token and password, "shown once") is not a log line and is skipped.
//
// Looked for in every log line: each secret the harness recorded (tokens from `lore init`,
// `lore token create`, `lore org create`, the printed owner token and password, connection
// and webhook secrets and script markers the tests registered), and anything shaped like a
// lore credential (`lore_…` tokens, `lore_at_`/`lore_rt_` OAuth tokens, `lore_cs_` client
// secrets, `whsec_…` webhook secrets). Also checked: each request has its structured line.
//
// Usage: node check_logs.mjs <dir>   (exit 1 on any finding)
import { readFileSync, readdirSync, existsSync } from 'node:fs';
import path from 'node:path';

const dir = process.argv[2];
if (!dir || !existsSync(dir)) {
  console.error('usage: node check_logs.mjs <LORE_E2E_LOGS dir>');
  process.exit(2);
}
const secrets = new Set(
  (existsSync(path.join(dir, 'secrets.txt')) ? readFileSync(path.join(dir, 'secrets.txt'), 'utf8') : '')
    .split('\n').map((s) => s.trim()).filter((s) => s.length >= 8),
);
const SHAPES = [/lore_(?:at_|rt_|cs_)?[A-Za-z0-9_-]{20,}/, /whsec_[0-9a-f]{16,}/];

const logs = readdirSync(dir).filter((f) => f.startsWith('serve-') && f.endsWith('.log'));
let lines = 0;
let requests = 0;
let withTool = 0;
const findings = [];
const malformed = [];
for (const file of logs) {
  for (const raw of readFileSync(path.join(dir, file), 'utf8').split('\n')) {
    if (!raw.startsWith('{')) continue;
    lines += 1;
    let entry;
    try {
      entry = JSON.parse(raw);
    } catch {
      malformed.push(`${file}: ${raw.slice(0, 200)}`);
      continue;
    }
    if (entry.target === 'lore::request') {
      requests += 1;
      if (entry.tool && entry.tool !== '-') withTool += 1;
      for (const field of ['request_id', 'method', 'path', 'status', 'duration_ms']) {
        if (entry[field] === undefined) malformed.push(`${file}: request line without ${field}: ${raw.slice(0, 200)}`);
      }
    }
    for (const s of secrets) {
      if (raw.includes(s)) findings.push(`${file}: a recorded secret (${s.slice(0, 6)}…) in: ${raw.slice(0, 300)}`);
    }
    for (const shape of SHAPES) {
      const m = shape.exec(raw);
      if (m) findings.push(`${file}: a credential-shaped string (${m[0].slice(0, 9)}…) in: ${raw.slice(0, 300)}`);
    }
  }
}
console.log(`[check_logs] ${logs.length} server logs, ${lines} log lines, ${requests} request lines (${withTool} naming a tool), ${secrets.size} secrets looked for`);
if (logs.length === 0 || requests === 0) findings.push('no request lines were logged: the check saw nothing');
for (const m of malformed) console.error(`[check_logs] malformed: ${m}`);
for (const f of findings) console.error(`[check_logs] LEAK: ${f}`);
process.exit(findings.length || malformed.length ? 1 : 0);
