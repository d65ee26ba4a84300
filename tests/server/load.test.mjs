// A bounded load test: TERN_LOAD_CLIENTS (default 1000) simultaneous streaming
// chat requests on loopback against one `tern serve`. Every stream must finish
// with the right number of tokens and [DONE], with zero errors, and the
// server's peak resident memory must stay bounded. Prints the figures.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { startServer, skipReason } from './live_server.mjs';

const why = skipReason();
const kClients = Number(process.env.TERN_LOAD_CLIENTS ?? 1000);
const kTokens = 24;
const kTimeLimitMs = 240_000;
const kRssLimitMiB = 1024;

function rssMiB(pid, field) {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(status);
  return m ? Number(m[1]) / 1024 : NaN;
}

function percentile(sorted, p) {
  if (!sorted.length) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

// One streaming request read with fetch; resolves to its figures or throws.
async function oneStream(url, i, t0) {
  const body = {
    model: 'stories260K', stream: true, stream_options: { include_usage: true }, max_tokens: kTokens, ignore_eos: true, temperature: 0.8, seed: i,
    messages: [{ role: 'user', content: `Tell story number ${i}` }],
  };
  const start = performance.now();
  const resp = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  });
  if (resp.status !== 200) throw new Error(`HTTP ${resp.status}: ${await resp.text()}`);
  const decoder = new TextDecoder();
  let buf = '', content = 0, ttft = null, done = false, finish = null, usage = null;
  for await (const part of resp.body) {
    buf += decoder.decode(part, { stream: true });
    let cut;
    while ((cut = buf.indexOf('\n\n')) >= 0) {
      const event = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      if (!event.startsWith('data: ')) continue;
      const data = event.slice(6);
      if (data === '[DONE]') { done = true; continue; }
      const j = JSON.parse(data);
      if (j.error) throw new Error(`stream error: ${j.error.message}`);
      if (j.usage) usage = j.usage;
      const c = j.choices[0];
      if (c?.delta?.content) {
        content++;
        if (ttft === null) ttft = performance.now() - start;
      }
      if (c?.finish_reason) finish = c.finish_reason;
    }
  }
  if (!done) throw new Error('stream ended without [DONE]');
  return { content, ttft, finish, usage, e2e: performance.now() - start, end: performance.now() - t0 };
}

test(`${kClients} simultaneous streaming clients`, { skip: why ?? false, timeout: kTimeLimitMs + 60_000 }, async () => {
  const srv = await startServer({ args: ['--max-num-seqs', '64', '--kv-memory', '256M'] });
  try {
    const pid = srv.proc.pid;
    const rssBefore = rssMiB(pid, 'VmRSS');
    const t0 = performance.now();
    const results = await Promise.allSettled(
      Array.from({ length: kClients }, (_, i) => oneStream(srv.url, i, t0)));
    const wall = (performance.now() - t0) / 1000;
    const errors = results.filter((r) => r.status === 'rejected');
    const ok = results.filter((r) => r.status === 'fulfilled').map((r) => r.value);
    const hwm = rssMiB(pid, 'VmHWM');
    const ttft = ok.map((r) => r.ttft).sort((a, b) => a - b);
    const e2e = ok.map((r) => r.e2e).sort((a, b) => a - b);
    const tokens = ok.reduce((s, r) => s + (r.usage?.completion_tokens ?? 0), 0);
    const stats = await (await fetch(`${srv.url}/stats`)).json();
    console.log(JSON.stringify({
      clients: kClients, completed: ok.length, errors: errors.length, wall_s: +wall.toFixed(2),
      output_tok_s: +(tokens / wall).toFixed(1), req_s: +(ok.length / wall).toFixed(1),
      ttft_ms: { p50: +percentile(ttft, 50).toFixed(1), p99: +percentile(ttft, 99).toFixed(1) },
      e2e_ms: { p50: +percentile(e2e, 50).toFixed(1), p99: +percentile(e2e, 99).toFixed(1) },
      server_rss_mib: { before: +rssBefore.toFixed(1), peak: +hwm.toFixed(1) },
      kv_blocks_used_after: stats.kv_blocks_used,
    }));
    assert.equal(errors.length, 0, errors.slice(0, 3).map((e) => String(e.reason)).join('\n'));
    for (const r of ok) {
      assert.equal(r.usage?.completion_tokens, kTokens);
      assert.ok(r.content >= 1 && r.content <= kTokens, `content chunks ${r.content}`);
      assert.equal(r.finish, 'length');
    }
    assert.ok(wall * 1000 < kTimeLimitMs, `took ${wall} s`);
    assert.ok(hwm < kRssLimitMiB, `server peak RSS ${hwm} MiB`);
    assert.equal(stats.pending, 0);
  } finally {
    assert.equal(await srv.stop(), 0);
  }
});
