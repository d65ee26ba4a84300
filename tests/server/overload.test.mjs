// Overload: requests arrive open-loop (on a clock, not when earlier ones finish) several times
// faster than `tern serve` can finish them, with a small queue (--max-queue). Every request must
// be answered 200 or 429 with Retry-After; the unfinished generations never exceed the bound; a
// refusal comes faster than a typical completion (it does not wait in the queue); and requests
// sent with a higher priority finish sooner than the rest (--policy priority: the queue is
// ordered by it, not first come).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from './http_client.mjs';
import { startServer, skipReason } from './live_server.mjs';

const why = skipReason();
const kRequests = 300;
const kRatePerS = 1000;  // far above what any machine finishes of 200-token requests four at a time
const kQueue = 24;

async function stats(port) {
  return JSON.parse((await request(port, 'GET', '/stats')).body);
}

const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];

test('overload: a bounded queue, fast 429s with Retry-After, priorities honoured', { skip: why ?? false, timeout: 300_000 }, async () => {
  const srv = await startServer({ args: ['--max-queue', String(kQueue), '--max-num-seqs', '4', '--policy', 'priority', '-t', '1'] });
  const port = srv.port;
  let maxPending = 0;
  const sampler = setInterval(() => {
    stats(port).then((s) => { maxPending = Math.max(maxPending, s.pending); }).catch(() => {});
  }, 20);
  const sent = [];
  for (let i = 0; i < kRequests; ++i) {
    const priority = i % 10 === 0 ? -10 : 0;  // lower = more urgent
    sent.push(request(port, 'POST', '/v1/completions', { prompt: `Once upon a time ${i}`, max_tokens: 200, ignore_eos: true, seed: i, priority })
      .then((r) => ({ ...r, retryAfter: r.headers['retry-after'], priority })));
    await new Promise((r) => setTimeout(r, 1000 / kRatePerS));
  }
  const answers = await Promise.all(sent);
  clearInterval(sampler);
  const ok = answers.filter((a) => a.status === 200);
  const refused = answers.filter((a) => a.status === 429);
  const figures = {
    requests: kRequests, ok: ok.length, refused: refused.length, max_pending_seen: maxPending,
    ok_median_ms: median(ok.map((a) => a.ms)), refused_median_ms: median(refused.map((a) => a.ms)),
    ok_high_priority_median_ms: median(ok.filter((a) => a.priority < 0).map((a) => a.ms)),
    ok_normal_median_ms: median(ok.filter((a) => a.priority === 0).map((a) => a.ms)),
  };
  console.log(JSON.stringify(figures));
  for (const a of answers) assert.ok(a.status === 200 || a.status === 429, `HTTP ${a.status}: ${a.body}`);
  assert.ok(refused.length > 0, 'the load never filled the queue');
  assert.ok(ok.length >= kQueue, `only ${ok.length} requests served`);
  for (const a of refused) assert.equal(a.retryAfter, '1', 'a 429 without Retry-After');
  assert.ok(maxPending <= kQueue, `${maxPending} unfinished generations with --max-queue ${kQueue}`);
  assert.ok(figures.refused_median_ms < figures.ok_median_ms / 2, 'refusals waited like served requests');
  assert.ok(figures.ok_high_priority_median_ms < figures.ok_normal_median_ms,
    'high-priority requests did not finish sooner than the rest');
  assert.equal(await srv.stop(), 0, srv.stderr().slice(-2000));
});
