// Slowloris against `tern serve`: TERN_SLOWLORIS_CONNS (default 500) connections trickle a
// request head one header line a second, and each one the server cuts (408 once the head is
// late) is opened again, for TERN_SLOWLORIS_SECONDS (default 15). Meanwhile normal requests (short
// completions, one connection each) must all be answered, as they were before the attack. The
// latencies of both phases are printed (the figures bench/http/slowloris.md records; timing is a
// benchmark, not asserted here) and, with TERN_SLOWLORIS_OUT=FILE, written as JSON.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { request } from './http_client.mjs';
import net from 'node:net';
import { startServer, skipReason } from './live_server.mjs';

const why = skipReason();
const kConns = Number(process.env.TERN_SLOWLORIS_CONNS ?? 500);
const kSeconds = Number(process.env.TERN_SLOWLORIS_SECONDS ?? 15);
const kHeaderTimeoutS = 5;

const completion = (port) =>
  request(port, 'POST', '/v1/completions', { prompt: 'Once upon a time', max_tokens: 8, temperature: 0 }, { timeoutMs: 60_000 });
const stats = async (port) => JSON.parse((await request(port, 'GET', '/stats')).body);

function pct(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

// Normal requests back to back for `seconds`; their latencies, sorted.
async function normalTraffic(port, seconds) {
  const ms = [];
  const end = performance.now() + seconds * 1000;
  while (performance.now() < end) {
    const r = await completion(port);
    assert.equal(r.status, 200, r.body);
    ms.push(r.ms);
  }
  return ms.sort((a, b) => a - b);
}

test(`slowloris: ${kConns} trickling connections, normal requests still served`, { skip: why ?? false, timeout: 300_000 }, async () => {
  const srv = await startServer({ args: ['--header-timeout', String(kHeaderTimeoutS), '-t', '2'] });
  const port = srv.port;
  await normalTraffic(port, 1);  // warm-up
  const before = await normalTraffic(port, kSeconds);

  let stop = false, opened = 0, cut = 0;
  const sockets = new Set();
  const trickle = () => {
    if (stop) return;
    const s = net.connect(port, '127.0.0.1');
    opened++;
    sockets.add(s);
    s.on('connect', () => s.write('GET /health HTTP/1.1\r\nHost: x\r\n'));
    s.on('data', () => {});
    s.on('error', () => {});
    s.on('close', () => {
      sockets.delete(s);
      cut++;
      setTimeout(trickle, 10);  // the attacker comes back
    });
  };
  for (let i = 0; i < kConns; ++i) trickle();
  const drip = setInterval(() => { for (const s of sockets) if (s.writable) s.write('X-Trickle: 1\r\n'); }, 1000);
  await new Promise((r) => setTimeout(r, 1000));
  const held = (await stats(port)).http_connections;
  const during = await normalTraffic(port, kSeconds);
  const heldLate = (await stats(port)).http_connections;
  const cutByServer = cut;
  stop = true;
  clearInterval(drip);
  for (const s of sockets) s.destroy();

  const figures = {
    trickling: kConns, header_timeout_s: kHeaderTimeoutS, seconds: kSeconds, server_connections: [held, heldLate],
    trickling_opened: opened, trickling_cut_by_server: cutByServer,
    before: { n: before.length, p50_ms: pct(before, 50), p99_ms: pct(before, 99) },
    during: { n: during.length, p50_ms: pct(during, 50), p99_ms: pct(during, 99) },
  };
  figures.p99_ratio = figures.during.p99_ms / figures.before.p99_ms;
  console.log(JSON.stringify(figures));
  if (process.env.TERN_SLOWLORIS_OUT) fs.writeFileSync(process.env.TERN_SLOWLORIS_OUT, `${JSON.stringify(figures, null, 2)}\n`);
  assert.ok(held >= kConns * 0.9, `only ${held} of ${kConns} trickling connections were held open`);
  assert.ok(cutByServer >= kConns * 0.9, `the server cut only ${cutByServer} late heads`);
  assert.ok(during.length > 0 && before.length > 0);
  assert.equal(await srv.stop(), 0, srv.stderr().slice(-2000));
});
