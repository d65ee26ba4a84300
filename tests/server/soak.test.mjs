// A soak: mixed traffic against one `tern serve` for TERN_SOAK_SECONDS (default 120; the suite sets 30,
// a smoke) — streaming and not, n > 1, long prompts, cancellations mid-stream, clients that vanish
// before their answer, bad requests — with a KV pool small enough that sequences are preempted.
// The server's RSS, open descriptors, threads and KV blocks are sampled every second. At the end,
// once the server is idle again: no KV block held, no descriptor more than before the load, no
// thread more than after the warm-up, and RSS at most 64 MiB over its level at the end of the warm-up (the first 5 minutes,
// or the first fifth of a shorter run). Every request must have been answered as its kind
// expects. TERN_SOAK_OUT=DIR also writes DIR/soak.csv and DIR/soak.svg (the curves).
// scripts/soak.sh MINUTES runs it for longer.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { request } from './http_client.mjs';
import { startServer, skipReason } from './live_server.mjs';

const why = skipReason();
const kSeconds = Number(process.env.TERN_SOAK_SECONDS ?? 120);
const kWarmupSeconds = Math.min(300, kSeconds / 5);
const kWorkers = 12;
const kRssGrowthMiB = 64;

function procStatus(pid, field) {
  const m = new RegExp(`${field}:\\s+(\\d+)`).exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : NaN;
}

async function metric(port, name, labels = '') {
  const { body } = await request(port, 'GET', '/metrics');
  const line = body.split('\n').find((l) => l.startsWith(name) && l.includes(labels) && !l.startsWith('#'));
  return line ? Number(line.split(' ').pop()) : NaN;
}

const story = 'Once upon a time, there was a little girl named Lily. She loved to play outside in the park. ';

// The kinds of request, each checking its own answer. i: a running number (seeds, prompts).
const kinds = {
  async stream(port, i) {
    const r = await request(port, 'POST', '/v1/chat/completions', {
      messages: [{ role: 'user', content: `Tell story ${i}` }], stream: true, max_tokens: 32, seed: i, temperature: 0.9,
    });
    assert.equal(r.status, 200, r.body);
    assert.ok(r.body.trimEnd().endsWith('data: [DONE]'), r.body.slice(-200));
  },
  async choices(port, i) {
    const r = await request(port, 'POST', '/v1/completions', { prompt: 'Once upon a time', n: 3, max_tokens: 24, seed: i });
    assert.equal(r.status, 200, r.body);
    assert.equal(JSON.parse(r.body).choices.length, 3);
  },
  async long(port, i) {
    const r = await request(port, 'POST', '/v1/completions', { prompt: story.repeat(12) + ` ${i}`, max_tokens: 96, ignore_eos: true });
    assert.equal(r.status, 200, r.body);
    assert.equal(JSON.parse(r.body).usage.completion_tokens, 96);
  },
  async cancel(port, i) {
    // Goes away after the first few events: the server must cancel and free it.
    const r = await request(port, 'POST', '/v1/completions', { prompt: 'Once', stream: true, max_tokens: 200, ignore_eos: true, seed: i },
      { onData: (text) => text.split('data: ').length > 4 });
    assert.ok(r.aborted || r.status === 200, r.body);
  },
  async vanish(port, i) {
    // Sends a whole request and closes at once, before any answer.
    await new Promise((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => {
        const body = JSON.stringify({ prompt: `Lily ${i}`, max_tokens: 50 });
        s.end(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
        s.destroy();
        resolve();
      });
      s.on('error', resolve);
    });
  },
  async bad(port) {
    const r = await request(port, 'POST', '/v1/chat/completions', { messages: 'not a list' });
    assert.equal(r.status, 400, r.body);
  },
};
const mix = ['stream', 'stream', 'choices', 'long', 'long', 'long', 'cancel', 'vanish', 'bad'];

function svg(samples) {
  const W = 720, H = 180, pad = 40;
  const series = [['rss_mib', 'RSS (MiB)'], ['fds', 'open files'], ['threads', 'threads'], ['kv_used', 'KV blocks used']];
  const t1 = samples[samples.length - 1].t || 1;
  let out = `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${(H + 20) * series.length}" font-family="sans-serif" font-size="11">\n`;
  series.forEach(([key, label], k) => {
    const y0 = k * (H + 20);
    const vmax = Math.max(1, ...samples.map((s) => s[key]));
    const pts = samples.map((s) => `${(pad + (s.t / t1) * (W - 2 * pad)).toFixed(1)},${(y0 + H - 10 - (s[key] / vmax) * (H - 30)).toFixed(1)}`);
    out += `<text x="${pad}" y="${y0 + 14}">${label}: max ${vmax.toFixed(1)}, over ${t1.toFixed(0)} s</text>\n`;
    out += `<line x1="${pad}" y1="${y0 + H - 10}" x2="${W - pad}" y2="${y0 + H - 10}" stroke="#999"/>\n`;
    out += `<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="${pts.join(' ')}"/>\n`;
  });
  return `${out}</svg>\n`;
}

test(`soak: ${kSeconds} s of mixed traffic, nothing leaks`, { skip: why ?? false, timeout: (kSeconds + 300) * 1000 }, async () => {
  const srv = await startServer({ args: ['--kv-memory', '768K', '--max-num-seqs', '16', '-t', '2'] });
  const pid = srv.proc.pid;
  const port = srv.port;
  const t0 = performance.now();
  const samples = [];
  const sample = async () => {
    samples.push({
      t: (performance.now() - t0) / 1000,
      rss_mib: procStatus(pid, 'VmRSS') / 1024,
      fds: fs.readdirSync(`/proc/${pid}/fd`).length,
      threads: procStatus(pid, 'Threads'),
      kv_used: await metric(port, 'tern_kv_cache_blocks', 'state="used"'),
    });
  };
  await sample();
  const sampler = setInterval(() => { sample().catch(() => {}); }, 1000);
  const counts = {};
  const failures = [];
  let next = 0;
  const deadline = t0 + kSeconds * 1000;
  const worker = async () => {
    while (performance.now() < deadline) {
      const i = next++;
      const kind = mix[i % mix.length];
      try {
        await kinds[kind](port, i);
        counts[kind] = (counts[kind] ?? 0) + 1;
      } catch (e) {
        failures.push(`${kind} #${i}: ${e.message}`);
      }
    }
  };
  await Promise.all(Array.from({ length: kWorkers }, worker));
  // Idle again: nothing running or waiting, every connection gone.
  for (let k = 0; k < 300; ++k) {
    const running = await metric(port, 'tern_num_requests_running');
    const waiting = await metric(port, 'tern_num_requests_waiting');
    const conns = await metric(port, 'tern_http_connections');
    if (running === 0 && waiting === 0 && conns <= 1) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  clearInterval(sampler);
  await new Promise((r) => setTimeout(r, 300));  // a sample in flight finishes (its connection closes)
  await sample();
  const end = samples[samples.length - 1];
  const warm = samples.filter((s) => s.t >= kWarmupSeconds)[0] ?? end;
  const preemptions = await metric(port, 'tern_num_preemptions_total');
  const peakRss = Math.max(...samples.filter((s) => s.t >= warm.t).map((s) => s.rss_mib));
  const summary = {
    seconds: kSeconds, requests: counts, failures: failures.length, preemptions,
    rss_mib: { start: samples[0].rss_mib, after_warmup: warm.rss_mib, peak_after_warmup: peakRss, end: end.rss_mib },
    fds: { start: samples[0].fds, end: end.fds }, threads: { after_warmup: warm.threads, end: end.threads },
    kv_used_end: end.kv_used,
  };
  console.log(JSON.stringify(summary));
  if (process.env.TERN_SOAK_OUT) {
    fs.mkdirSync(process.env.TERN_SOAK_OUT, { recursive: true });
    const csv = ['t_s,rss_mib,fds,threads,kv_used', ...samples.map((s) => `${s.t.toFixed(1)},${s.rss_mib.toFixed(1)},${s.fds},${s.threads},${s.kv_used}`)];
    fs.writeFileSync(path.join(process.env.TERN_SOAK_OUT, 'soak.csv'), `${csv.join('\n')}\n`);
    fs.writeFileSync(path.join(process.env.TERN_SOAK_OUT, 'soak.svg'), svg(samples));
    fs.writeFileSync(path.join(process.env.TERN_SOAK_OUT, 'soak.json'), `${JSON.stringify(summary, null, 2)}\n`);
  }
  assert.deepEqual(failures.slice(0, 5), [], `${failures.length} requests failed`);
  for (const kind of Object.keys(kinds)) assert.ok(counts[kind] > 0, `no ${kind} request ran`);
  assert.ok(preemptions > 0, 'the KV pool never ran out: no preemption pressure');
  assert.equal(end.kv_used, 0, 'KV blocks still held by finished requests');
  assert.ok(end.fds <= samples[0].fds, `descriptors: ${samples[0].fds} before the load, ${end.fds} after it`);
  assert.ok(end.threads <= warm.threads, `threads: ${warm.threads} after the warm-up, ${end.threads} at the end`);
  // Under a sanitizer RSS measures its quarantine and shadow memory, not the server: not bounded there.
  if (process.env.TERN_SANITIZED !== '1')
    assert.ok(peakRss - warm.rss_mib <= kRssGrowthMiB, `RSS grew ${(peakRss - warm.rss_mib).toFixed(1)} MiB after the warm-up`);
  assert.equal(await srv.stop(), 0, srv.stderr().slice(-2000));
});
