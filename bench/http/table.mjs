// bench/http/table.mjs — turns the JSON lines of streams.mjs (label
// "scenario|server|rep") into one markdown table: a row per scenario and
// server, each cell listing the repetitions' values in run order, "a / b".
//
// Usage: node table.mjs results.jsonl
import fs from 'node:fs';

const rows = new Map();  // "scenario|server" -> records in run order
for (const line of fs.readFileSync(process.argv[2], 'utf8').split('\n')) {
  if (!line.trim()) continue;
  const r = JSON.parse(line);
  const [scenario, server] = r.label.split('|');
  const key = `${scenario}|${server}`;
  if (!rows.has(key)) rows.set(key, []);
  rows.get(key).push(r);
}

const fmt = (x) => (x === null || x === undefined ? '–' : String(x));
const cols = [
  ['completed', (r) => `${r.completed}/${r.n}`],
  ['errors', (r) => (r.errors ? `${r.errors} (${Object.entries(r.error_kinds).map(([k, v]) => `${k} ${v}`).join(', ')})` : '0')],
  ['wall s', (r) => fmt(r.wall_s)],
  ['TTFE p50 ms', (r) => fmt(r.ttfe_p50_ms)],
  ['TTFE p99 ms', (r) => fmt(r.ttfe_p99_ms)],
  ['gap p99 ms', (r) => fmt(r.gap_p99_ms)],
  ['server VmHWM MiB', (r) => fmt(r.server_hwm_mib)],
  ['server threads', (r) => fmt(r.server_threads_max)],
  ['server CPU s', (r) => fmt(r.server_cpu_s)],
];
console.log(`| scenario | server | ${cols.map((c) => c[0]).join(' | ')} |`);
console.log(`|---|---|${cols.map(() => '---').join('|')}|`);
for (const [key, recs] of rows) {
  const [scenario, server] = key.split('|');
  const cells = cols.map(([, f]) => recs.map(f).join(' / '));
  console.log(`| ${scenario} | ${server} | ${cells.join(' | ')} |`);
}
