// Starts a real `tern serve` for the live-server tests and stops it again.
//
//   import { startServer, skipReason } from './live_server.mjs';
//
//   const why = skipReason();            // a sentence when the tests cannot run, else null
//   if (why) return t.skip(why);
//   const srv = await startServer({ args: ['--api-key', 'k'] });
//   ... fetch(`${srv.url}/v1/models`) ...
//   assert.equal(await srv.stop(), 0);
//
// Environment:
//   TERN_BIN         the built `tern` binary (required)
//   TERN_TEST_MODEL  the GGUF model the server loads (required unless args hold -m/--model)
//
// startServer({args = [], env = {}} = {}) runs `TERN_BIN serve -m TERN_TEST_MODEL --port 0 ...args`
// with `env` added to this process's environment, reads the bound port from the line
// `tern serve: listening on http://HOST:PORT` on stderr, then polls GET /health until it
// answers 200 (the model loads after the port is bound). It resolves to
//   { url,        'http://127.0.0.1:PORT' (no trailing slash)
//     port,       the port number
//     proc,       the ChildProcess
//     stderr(),   everything the server wrote to stderr so far (for failure messages)
//     stop() }    SIGTERM, then resolves to the exit code once the process has exited
//                 (null if it died from a signal; SIGKILL after 60 s without an exit).
// It rejects, with the server's stderr in the message, when the server exits or does not
// become healthy within 60 s. Servers still running when node exits are killed.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';

const kStartTimeoutMs = 60_000;
const kStopTimeoutMs = 60_000;
const live = new Set();
process.on('exit', () => {
  for (const proc of live) proc.kill('SIGKILL');
});

// Why the live-server tests cannot run here (a sentence for t.skip), or null.
export function skipReason({ needModel = true } = {}) {
  const bin = process.env.TERN_BIN;
  if (!bin) return 'TERN_BIN is not set (the path of the built tern binary)';
  if (!fs.existsSync(bin)) return `TERN_BIN=${bin} does not exist`;
  const help = spawnSync(bin, ['serve', '--help'], { encoding: 'utf8', timeout: 20_000 });
  if (help.error) return `cannot run ${bin}: ${help.error.message}`;
  if (!/--port/.test(`${help.stdout}${help.stderr}`)) return `${bin} has no 'serve' command`;
  const model = process.env.TERN_TEST_MODEL;
  if (needModel && !model) return 'TERN_TEST_MODEL is not set (a GGUF model for the server)';
  if (needModel && !fs.existsSync(model)) return `TERN_TEST_MODEL=${model} does not exist`;
  return null;
}

export async function startServer({ args = [], env = {} } = {}) {
  const bin = process.env.TERN_BIN;
  if (!bin) throw new Error('TERN_BIN is not set');
  const hasModel = args.some((a) => a === '-m' || a === '--model' || a.startsWith('--model='));
  const model = process.env.TERN_TEST_MODEL;
  if (!hasModel && !model) throw new Error('TERN_TEST_MODEL is not set and args give no -m');
  const argv = ['serve', ...(hasModel ? [] : ['-m', model]), '--port', '0', ...args];
  const proc = spawn(bin, argv, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(proc);
  let err = '';
  proc.stdout.resume();  // drained so a chatty server never blocks on a full pipe
  proc.stderr.setEncoding('utf8');
  proc.stderr.on('data', (d) => { err += d; });
  const exited = new Promise((resolve) => {
    proc.on('exit', (code) => { live.delete(proc); resolve(code); });
  });
  let exitCode;
  exited.then((c) => { exitCode = c; });
  const stop = async () => {
    if (exitCode === undefined) {
      proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), kStopTimeoutMs);
      await exited;
      clearTimeout(timer);
    }
    return exitCode;
  };
  const fail = async (why) => {
    await stop();
    throw new Error(`tern ${argv.join(' ')}: ${why}\n--- stderr ---\n${err}`);
  };

  const deadline = Date.now() + kStartTimeoutMs;
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  let port = 0, host = '';
  while (!port) {
    const m = /listening on http:\/\/(\S+):(\d+)/.exec(err);
    if (m) { host = m[1]; port = Number(m[2]); break; }
    if (exitCode !== undefined) return fail(`exited with ${exitCode} before listening`);
    if (Date.now() > deadline) return fail('no "listening on" line within 60 s');
    await sleep(25);
  }
  if (host === '0.0.0.0' || host === '::' || host === '[::]') host = '127.0.0.1';
  const url = `http://${host}:${port}`;
  for (;;) {
    if (exitCode !== undefined) return fail(`exited with ${exitCode} while loading`);
    try {
      const resp = await fetch(`${url}/health`);
      await resp.arrayBuffer();
      if (resp.status === 200) break;
    } catch { /* not accepting yet */ }
    if (Date.now() > deadline) return fail('GET /health did not answer 200 within 60 s');
    await sleep(50);
  }
  return { url, port, proc, stderr: () => err, stop };
}
