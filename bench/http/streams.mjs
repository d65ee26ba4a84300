// bench/http/streams.mjs — opens N concurrent SSE streams against one bench
// server (bench_http_beast or bench_http_httplib) and prints one JSON line:
// completed, errors, wall time, time-to-first-event p50/p99, event-gap p99,
// and the server's peak RSS (VmHWM), peak thread count and CPU seconds used
// during the run, from /proc/PID.
//
// Node.js 20, no npm packages. Every stream is its own connection
// (node:http Agent, keepAlive off, maxSockets Infinity), all started at once.
//
// Slow readers (--slow S): S raw sockets send the same POST (with
// --slow-query, e.g. k=2000&pad=1048576 so the server has lots to send) and
// never read a byte; the N normal streams start --slow-lead-ms later, and the
// slow sockets are destroyed once the normal ones are done. Compare the normal
// streams' first-event latency with a run without --slow.
//
// Usage: node streams.mjs --url http://127.0.0.1:PORT/stream --n N --pid PID
//          [--query k=24] [--timeout-s 60] [--slow S] [--slow-query Q]
//          [--slow-lead-ms 300] [--label TEXT]
import http from 'node:http';
import net from 'node:net';
import fs from 'node:fs';
import { performance } from 'node:perf_hooks';

function parse_args(argv) {
  const a = { url: '', n: 100, pid: 0, query: '', timeout_s: 60, slow: 0,
              slow_query: 'k=2000&pad=1048576', slow_lead_ms: 300, label: '' };
  for (let i = 2; i < argv.length; i += 2) {
    const k = argv[i].replace(/^--/, '').replace(/-/g, '_');
    if (!(k in a)) throw new Error(`streams.mjs: unknown flag ${argv[i]}`);
    a[k] = typeof a[k] === 'number' ? Number(argv[i + 1]) : argv[i + 1];
  }
  if (!a.url) throw new Error('streams.mjs: --url is required');
  return a;
}

function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.floor(p * (sorted.length - 1) + 0.5))];
}

// The process's user+system CPU seconds so far (/proc/PID/stat fields 14, 15;
// clock ticks of 1/100 s on Linux).
function cpu_seconds(pid) {
  try {
    const text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch { return 0; }
}

// Samples /proc/PID/status every 50 ms: peak Threads and the last VmHWM;
// and the CPU seconds the process used between start and stop().
function start_proc_sampler(pid) {
  const peak = { threads: 0, hwm_kib: 0, rss_kib: 0, cpu_s: 0 };
  if (!pid) return { peak, stop() {} };
  const cpu0 = cpu_seconds(pid);
  const sample = () => {
    let text;
    try { text = fs.readFileSync(`/proc/${pid}/status`, 'utf8'); } catch { return; }
    const field = (name) => Number((text.match(new RegExp(`^${name}:\\s+(\\d+)`, 'm')) || [])[1] || 0);
    peak.threads = Math.max(peak.threads, field('Threads'));
    peak.hwm_kib = Math.max(peak.hwm_kib, field('VmHWM'));
    peak.rss_kib = Math.max(peak.rss_kib, field('VmRSS'));
  };
  sample();
  const timer = setInterval(sample, 50);
  return { peak, stop() { clearInterval(timer); sample(); peak.cpu_s = cpu_seconds(pid) - cpu0; } };
}

// One normal stream: { promise, abort }. The promise resolves with the
// stream's record and never rejects; abort() ends it as a 'timeout' error.
function run_stream(url, agent, query) {
  let abort = () => {};
  const promise = new Promise((resolve) => {
    const rec = { ok: false, error: null, ttfe_ms: null, gaps_ms: [], n_events: 0 };
    const t0 = performance.now();
    let t_last = 0;
    let carry = '';
    let done = false;
    const finish = (error) => {
      if (done) return;
      done = true;
      rec.error = error;
      rec.ok = !error;
      resolve(rec);
    };
    const target = query ? `${url}?${query}` : url;
    const req = http.request(target, { method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
      if (res.statusCode !== 200) { res.resume(); finish(`http_${res.statusCode}`); return; }
      res.setEncoding('utf8');
      let saw_done = false;
      res.on('data', (chunk) => {
        const now = performance.now();
        carry += chunk;
        let idx;
        while ((idx = carry.indexOf('\n\n')) >= 0) {
          const ev = carry.slice(0, idx);
          carry = carry.slice(idx + 2);
          if (ev === 'data: [DONE]') { saw_done = true; continue; }
          if (rec.n_events === 0) rec.ttfe_ms = now - t0;
          else rec.gaps_ms.push(now - t_last);
          t_last = now;
          rec.n_events++;
        }
      });
      res.on('end', () => finish(saw_done ? null : 'no_done'));
      res.on('error', (e) => finish(e.code || 'res_error'));
      res.on('aborted', () => finish('aborted'));
    });
    req.on('error', (e) => finish(e.code || 'req_error'));
    abort = () => { finish('timeout'); req.destroy(); };
    req.end('{}');
  });
  return { promise, abort };
}

// A client that sends its request and then never reads.
function open_slow_reader(url, query) {
  const u = new URL(url);
  const sock = net.connect({ host: u.hostname, port: Number(u.port) });
  sock.on('error', () => {});
  sock.on('connect', () => sock.pause());
  const path = query ? `${u.pathname}?${query}` : u.pathname;
  sock.write(`POST ${path} HTTP/1.1\r\nHost: ${u.host}\r\nContent-Type: application/json\r\n` +
             `Content-Length: 2\r\nConnection: close\r\n\r\n{}`);
  sock.pause();
  return sock;
}

async function main() {
  const a = parse_args(process.argv);
  const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
  const sampler = start_proc_sampler(a.pid);

  const slow = [];
  for (let i = 0; i < a.slow; i++) slow.push(open_slow_reader(a.url, a.slow_query));
  if (a.slow > 0) await new Promise((r) => setTimeout(r, a.slow_lead_ms));

  const t0 = performance.now();
  const streams = [];
  for (let i = 0; i < a.n; i++) streams.push(run_stream(a.url, agent, a.query));
  // Streams that outlive --timeout-s are aborted and counted as errors.
  const timer = setTimeout(() => { for (const s of streams) s.abort(); }, a.timeout_s * 1000);
  const records = await Promise.all(streams.map((s) => s.promise));
  clearTimeout(timer);
  const wall_s = (performance.now() - t0) / 1000;
  for (const s of slow) s.destroy();
  sampler.stop();

  const ok = records.filter((r) => r.ok);
  const ttfe = ok.map((r) => r.ttfe_ms).filter((x) => x !== null).sort((x, y) => x - y);
  const gaps = ok.flatMap((r) => r.gaps_ms).sort((x, y) => x - y);
  const errors = {};
  for (const r of records) if (!r.ok) errors[r.error] = (errors[r.error] || 0) + 1;
  const round = (x) => (x === null ? null : Math.round(x * 10) / 10);
  console.log(JSON.stringify({
    label: a.label, n: a.n, slow: a.slow,
    completed: ok.length, errors: records.length - ok.length, error_kinds: errors,
    wall_s: round(wall_s),
    ttfe_p50_ms: round(percentile(ttfe, 0.5)), ttfe_p99_ms: round(percentile(ttfe, 0.99)),
    gap_p50_ms: round(percentile(gaps, 0.5)), gap_p99_ms: round(percentile(gaps, 0.99)),
    server_hwm_mib: round(sampler.peak.hwm_kib / 1024), server_threads_max: sampler.peak.threads,
    server_cpu_s: round(sampler.peak.cpu_s),
  }));
  agent.destroy();
}

main().catch((e) => { console.error(e.stack || String(e)); process.exit(2); });
