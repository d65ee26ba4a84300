// One HTTP request on its own connection (no keep-alive, so every descriptor the server opened
// for it is closed again) for the live-server tests that count connections and latencies.
//
//   import { request } from './http_client.mjs';
//   const r = await request(port, 'POST', '/v1/completions', { prompt: 'x' });
//   // r: { status, headers, body, ms, aborted }
//
// `body` (an object) is sent as JSON. `onData(textSoFar)` sees the body as it arrives and may
// return true to drop the connection there (a client going away): the promise then resolves with
// aborted: true. A request without an answer in `timeoutMs` (120 s) rejects.
import http from 'node:http';

export function request(port, method, path, body, { onData, timeoutMs = 120_000 } = {}) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const t0 = performance.now();
    const req = http.request({
      host: '127.0.0.1', port, method, path, agent: false,
      headers: { 'Content-Type': 'application/json', Connection: 'close', ...(data ? { 'Content-Length': Buffer.byteLength(data) } : {}) },
    }, (res) => {
      let text = '';
      const done = (aborted) => resolve({ status: res.statusCode, headers: res.headers, body: text, ms: performance.now() - t0, aborted });
      res.setEncoding('utf8');
      res.on('data', (d) => {
        text += d;
        if (onData && onData(text)) {
          req.destroy();
          done(true);
        }
      });
      res.on('end', () => done(false));
      res.on('error', () => done(true));
    });
    req.on('error', (e) => (req.destroyed ? null : reject(e)));
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer in ${timeoutMs / 1000} s`)));
    req.end(data);
  });
}
