// The web playground served at / by `tern serve`, driven in headless Chromium.
//
//   cd tests/server && TERN_BIN=../../build/tools/tern/tern TERN_TEST_MODEL=model.gguf node --test
//
// TERN_TEST_OUT names the folder for playground.png (default: a new temp folder; the path is
// printed as a test diagnostic). Skips, saying why, without TERN_BIN / TERN_TEST_MODEL, without a
// `serve` command, or without /usr/bin/chromium. The assertions are about content, never timing.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { startServer, skipReason } from './live_server.mjs';

const kChromium = '/usr/bin/chromium';
const kChromiumArgs = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const kTimeoutMs = 120_000;
const skip = skipReason() ?? (fs.existsSync(kChromium) ? false : `${kChromium} is absent (apt install chromium)`);

const tmpDirs = [];
function tmpDir(prefix) {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  tmpDirs.push(d);
  return d;
}

// One browser on a fresh profile for all the tests.
let browser;
function browserContext() {
  browser ??= chromium.launchPersistentContext(tmpDir('tern-chromium-'), {
    executablePath: kChromium, headless: true, args: kChromiumArgs,
    viewport: { width: 1280, height: 860 }, colorScheme: 'light',
  });
  return browser;
}

// A page on `url` that records every request it makes and every script error.
async function openPlayground(url) {
  const page = await (await browserContext()).newPage();
  const requests = [], chatBodies = [], pageErrors = [];
  page.on('request', (r) => {
    requests.push(r.url());
    if (r.url().endsWith('/v1/chat/completions')) chatBodies.push(r.postDataJSON());
  });
  page.on('pageerror', (e) => pageErrors.push(e.message));
  const resp = await page.goto(`${url}/`);
  assert.equal(resp.status(), 200);
  return { page, requests, chatBodies, pageErrors };
}

// Counts the text changes of assistant replies from now on: one per streamed piece.
function countTextUpdates(page) {
  return page.evaluate(() => {
    window.__textUpdates = 0;
    new MutationObserver((records) => {
      for (const r of records) if (r.type === 'characterData') window.__textUpdates++;
    }).observe(document.getElementById('messages'), { subtree: true, characterData: true });
  });
}

// Sends `text` from the page and waits for the reply to finish; returns the reply's bubble.
// Fails with the page's message when an error is shown instead.
async function sendAndWait(page, text, { withEnter = false } = {}) {
  const replies = page.locator('#messages .msg.assistant'), errors = page.locator('#messages .msg.error');
  const [nReplies, nErrors] = [await replies.count(), await errors.count()];
  await page.fill('#prompt', text);
  if (withEnter) await page.press('#prompt', 'Enter');
  else await page.click('#send');
  const bubble = replies.nth(nReplies);
  await bubble.locator('.finish').or(errors.nth(nErrors)).waitFor({ timeout: 60_000 });
  if (await errors.count() > nErrors) assert.fail(`the page shows an error: ${await errors.nth(nErrors).innerText()}`);
  return bubble;
}

let srv, keyed, ui;
before(async () => {
  if (skip) return;
  srv = await startServer();
}, { timeout: kTimeoutMs });
after(async () => {
  if (browser) await (await browser).close();
  if (srv) assert.equal(await srv.stop(), 0, `tern serve did not exit 0:\n${srv.stderr()}`);
  if (keyed) await keyed.stop();
  for (const d of tmpDirs) fs.rmSync(d, { recursive: true, force: true });
});

test('the page streams a reply, keeps the conversation, shows the live stats; screenshot', { skip, timeout: kTimeoutMs }, async (t) => {
  ui = await openPlayground(srv.url);
  const { page, requests, chatBodies, pageErrors } = ui;
  for (const id of ['prompt', 'send', 'stop', 'messages', 'stats-running', 'stats-waiting', 'stats-kv', 'stats-tps'])
    assert.equal(await page.locator(`#${id}`).count(), 1, `#${id} is on the page`);
  await page.locator('#model').filter({ hasText: /\S{2}/ }).waitFor();
  assert.ok(await page.locator('#stop').isDisabled(), 'Stop is disabled while idle');

  // Greedy, so the page's text can be compared with the API's.
  await page.fill('#temperature', '0');
  await page.fill('#max_tokens', '48');
  await countTextUpdates(page);
  const reply = await sendAndWait(page, 'Once upon a time');
  const text1 = await reply.locator('.text').innerText();
  assert.ok(text1.trim().length > 0, 'the reply has text');
  assert.ok(await page.evaluate(() => window.__textUpdates) > 1, 'the reply arrived in several pieces');
  assert.match(await reply.locator('.finish').innerText(), /finish: (stop|length)/);
  assert.match(await reply.locator('.tokens').innerText(), /^[1-9]\d* tokens?$/);
  assert.match(await reply.locator('.ttft').innerText(), /^TTFT \d+ ms$/);
  assert.ok(!(await page.locator('#send').isDisabled()) && await page.locator('#stop').isDisabled());

  // The request was the OpenAI streaming request with the controls' values, and its text
  // is what the API gives for the same request without streaming.
  const body1 = chatBodies[0];
  assert.equal(body1.stream, true);
  assert.deepEqual(body1.stream_options, { include_usage: true });
  assert.equal(body1.temperature, 0);
  assert.equal(body1.max_tokens, 48);
  assert.deepEqual(body1.messages, [{ role: 'user', content: 'Once upon a time' }]);
  const plain = await fetch(`${srv.url}/v1/chat/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ ...body1, stream: false, stream_options: undefined }),
  });
  assert.equal(plain.status, 200);
  assert.equal(text1, (await plain.json()).choices[0].message.content);

  // Shift+Enter adds a line; Enter sends the whole conversation with the system prompt.
  await page.fill('#system', 'You tell short stories.');
  await page.fill('#prompt', 'And then');
  await page.press('#prompt', 'Shift+Enter');
  await page.locator('#prompt').pressSequentially('the cat came');
  assert.equal(await page.inputValue('#prompt'), 'And then\nthe cat came');
  assert.equal(chatBodies.length, 1, 'Shift+Enter did not send');
  const reply2 = await sendAndWait(page, 'And then\nthe cat came', { withEnter: true });
  assert.ok((await reply2.locator('.text').innerText()).trim().length > 0);
  assert.deepEqual(chatBodies[1].messages, [
    { role: 'system', content: 'You tell short stories.' },
    { role: 'user', content: 'Once upon a time' },
    { role: 'assistant', content: text1 },
    { role: 'user', content: 'And then\nthe cat came' },
  ]);

  // The live panel shows the engine's figures.
  await page.waitForFunction(() => /^\d+$/.test(document.getElementById('stats-running').textContent));
  assert.match(await page.locator('#stats-waiting').innerText(), /^\d+$/);
  assert.match(await page.locator('#stats-tps').innerText(), /^\d+\.\d$/);
  assert.match(await page.locator('#stats-kv').innerText(), /^\d+\.\d%$/);
  assert.match(await page.locator('#stats-prefix').innerText(), /^\d+\.\d%$/);
  assert.match(await page.locator('#conn').getAttribute('aria-label'), /connected/);

  const out = process.env.TERN_TEST_OUT || tmpDir('tern-playground-');
  if (out !== tmpDirs.at(-1)) fs.mkdirSync(out, { recursive: true });
  else tmpDirs.pop();  // keep the default folder: it holds the screenshot
  const shot = path.join(out, 'playground.png');
  await page.screenshot({ path: shot });
  t.diagnostic(`screenshot: ${shot}`);

  // Nothing but the server itself was asked for anything.
  const origin = new URL(srv.url).origin;
  assert.deepEqual(requests.filter((u) => !u.startsWith(`${origin}/`) && !u.startsWith('data:')), []);
  assert.deepEqual(pageErrors, []);
});

test('Stop aborts the reply; server errors are shown in the page', { skip, timeout: kTimeoutMs }, async () => {
  ui ??= await openPlayground(srv.url);
  const { page, chatBodies } = ui;
  const n = await page.locator('#messages .msg.assistant').count();
  await page.fill('#max_tokens', '200');
  await page.fill('#prompt', 'A long story');
  // Stop right after Send: the reply ends "stopped" with nothing in it, so the turn stays out
  // of the conversation and its text goes back into the box.
  await page.evaluate(() => { document.getElementById('send').click(); document.getElementById('stop').click(); });
  const stopped = page.locator('#messages .msg.assistant').nth(n);
  await stopped.locator('.finish').waitFor();
  assert.equal(await stopped.getAttribute('data-finish'), 'stopped');
  assert.equal(await page.inputValue('#prompt'), 'A long story');
  assert.ok(!(await page.locator('#send').isDisabled()) && await page.locator('#stop').isDisabled());
  // The server cancelled it: nothing is left running.
  for (let i = 0; ; ++i) {
    const s = await (await fetch(`${srv.url}/stats`)).json();
    if (s.n_running === 0 && s.n_waiting === 0 && s.pending === 0) break;
    assert.ok(i < 200, `the aborted request is still in the engine: ${JSON.stringify(s)}`);
    await new Promise((r) => setTimeout(r, 50));
  }

  // Stop as soon as the first piece is shown: the reply keeps what came, ends "stopped",
  // and is part of the conversation sent with the next turn.
  await page.evaluate(() => {
    const observer = new MutationObserver(() => {
      observer.disconnect();
      document.getElementById('stop').click();
    });
    observer.observe(document.getElementById('messages'), { subtree: true, characterData: true });
  });
  const m = await page.locator('#messages .msg.assistant').count();
  const partial = await sendAndWait(page, 'A long story');
  assert.equal(await partial.getAttribute('data-finish'), 'stopped');
  const partialText = await partial.locator('.text').innerText();
  assert.ok(partialText.length > 0, 'the stopped reply keeps its text');
  assert.equal(m + 1, await page.locator('#messages .msg.assistant').count());

  // A value the server refuses: its error message appears in the page.
  await page.fill('#max_tokens', '16');
  await page.fill('#temperature', '5');
  await page.fill('#prompt', 'Hello');
  await page.click('#send');
  const error = page.locator('#messages .msg.error').last();
  await error.waitFor();
  assert.match(await error.innerText(), /400.*temperature/s);
  await page.fill('#temperature', '0');
  const next = chatBodies.length;
  await sendAndWait(page, 'Hello');
  assert.deepEqual(chatBodies[next].messages.slice(-3), [
    { role: 'user', content: 'A long story' },
    { role: 'assistant', content: partialText },
    { role: 'user', content: 'Hello' },
  ]);
});

test('a JSON schema in the page makes the reply JSON that matches it', { skip, timeout: kTimeoutMs }, async () => {
  ui ??= await openPlayground(srv.url);
  const { page, chatBodies } = ui;
  const schema = { type: 'object', properties: { hero: { type: 'string', maxLength: 12 }, age: { type: 'integer', minimum: 1, maximum: 9 } },
    required: ['hero', 'age'] };
  await page.fill('#max_tokens', '80');
  await page.fill('#temperature', '0.8');
  await page.fill('#json-schema', JSON.stringify(schema));
  const next = chatBodies.length;
  const bubble = await sendAndWait(page, 'Tell me about a hero');
  assert.deepEqual(chatBodies[next].response_format, { type: 'json_schema', json_schema: { name: 'playground', schema } });
  const reply = JSON.parse(await bubble.locator('.text').innerText());
  assert.deepEqual(Object.keys(reply), ['hero', 'age']);
  assert.ok(Number.isInteger(reply.age) && reply.age >= 1 && reply.age <= 9);
  // Text that is not JSON is refused in the page, before anything is sent.
  await page.fill('#json-schema', '{"type": ');
  await page.fill('#prompt', 'Again');
  await page.click('#send');
  await page.locator('#messages .msg.error').last().waitFor();
  assert.match(await page.locator('#messages .msg.error').last().innerText(), /JSON schema is not valid JSON/);
  await page.fill('#json-schema', '');
  await page.fill('#temperature', '0');
});

test('tools in the page: a reply that calls one is shown as a call, and the next message is its result', { skip, timeout: kTimeoutMs }, async () => {
  ui ??= await openPlayground(srv.url);
  const { page, chatBodies } = ui;
  await page.click('#clear');  // stories260K's context is short: start over
  const tools = [{ type: 'function', function: { name: 'wx', parameters: { type: 'object', properties: { c: { type: 'string', maxLength: 4 } }, required: ['c'] } } }];
  await page.fill('#tools', JSON.stringify(tools));
  await page.selectOption('#tool-choice', 'required');
  await page.fill('#max_tokens', '85');
  await page.fill('#temperature', '0');
  let next = chatBodies.length;
  const bubble = await sendAndWait(page, 'Hi');
  assert.deepEqual(chatBodies[next].tools, tools);
  assert.equal(chatBodies[next].tool_choice, 'required');
  assert.equal(chatBodies[next].parallel_tool_calls, false);
  assert.match(await bubble.locator('.finish').innerText(), /finish: tool_calls/);
  const call = await bubble.locator('.toolcall').innerText();
  assert.match(call, /wx\(\{\s*"c"\s*:\s*".{0,4}"\s*\}\)/);  // the arguments as generated (the grammar allows blanks)
  // The result goes back as a tool message answering that call, after the assistant's call.
  await page.selectOption('#tool-choice', 'none');
  await page.fill('#max_tokens', '8');
  next = chatBodies.length;
  await sendAndWait(page, '21C');
  const msgs = chatBodies[next].messages;
  const [asked, answer] = msgs.slice(-2);
  assert.equal(asked.role, 'assistant');
  assert.equal(asked.tool_calls[0].function.name, 'wx');
  assert.deepEqual(answer, { role: 'tool', tool_call_id: asked.tool_calls[0].id, content: '21C' });
  assert.match(await page.locator('#messages .msg.user').last().locator('.who').innerText(), /tool result/i);
  await page.fill('#tools', '[not json');
  await page.fill('#prompt', 'x');
  await page.click('#send');
  await page.locator('#messages .msg.error').last().waitFor();
  assert.match(await page.locator('#messages .msg.error').last().innerText(), /tools are not valid JSON/);
  await page.fill('#tools', '');
  await page.selectOption('#tool-choice', 'auto');
  await page.click('#clear');
});

test('with --api-key the page asks for the key and sends the one typed in', { skip, timeout: kTimeoutMs }, async () => {
  keyed = await startServer({ args: ['--api-key', 'playground-secret'] });
  const { page } = await openPlayground(keyed.url);
  await page.locator('#stats-note').filter({ hasText: /API key/ }).waitFor();
  await page.fill('#max_tokens', '16');
  await page.fill('#prompt', 'Hello');
  await page.click('#send');
  const error = page.locator('#messages .msg.error').last();
  await error.waitFor();
  assert.match(await error.innerText(), /^401/m);

  await page.fill('#api-key', 'playground-secret');
  await page.waitForFunction(() => document.getElementById('conn').getAttribute('aria-label').includes('connected'));
  const reply = await sendAndWait(page, 'Hello');
  assert.match(await reply.getAttribute('data-finish'), /^(stop|length)$/);
  // The key is remembered by the page.
  await page.reload();
  assert.equal(await page.inputValue('#api-key'), 'playground-secret');
  assert.equal(await keyed.stop(), 0);
  keyed = null;
});

// An SSE body written a few bytes at a time: events and UTF-8 characters split across reads.
async function dribble(res, events) {
  res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
  const bytes = Buffer.from(events.join(''));
  for (let i = 0; i < bytes.length; i += 3) {
    res.write(bytes.subarray(i, i + 3));
    await new Promise((r) => setTimeout(r, 2));
  }
  res.end();
}

test('the page reads SSE split anywhere, with CRLF, comments and a mid-stream error', { skip, timeout: kTimeoutMs }, async () => {
  // The page as tern serves it, in front of scripted streams.
  const html = await (await fetch(`${srv.url}/`)).text();
  const chunk = (delta, finish = null) => 'data: ' + JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk',
    created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: finish }] }) + '\r\n\r\n';
  const streams = [
    [': keep-alive\r\n\r\n', chunk({ role: 'assistant' }), chunk({ content: 'Héllo' }), ': ping\n\n',
      chunk({ content: ' wörld ✓ ' }), chunk({ content: '🐦' }), chunk({}, 'stop'),
      'data: ' + JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [],
        usage: { prompt_tokens: 5, completion_tokens: 4, total_tokens: 9 } }) + '\n\n', 'data: [DONE]\n\n'],
    [chunk({ role: 'assistant' }), chunk({ content: 'Half' }),
      'data: ' + JSON.stringify({ error: { message: 'scripted failure', type: 'server_error', param: null, code: null } }) + '\n\n'],
  ];
  const fake = http.createServer(async (req, res) => {
    if (req.url === '/') return res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' }).end(html);
    if (req.url === '/v1/chat/completions') {
      for await (const _ of req);  // eslint-disable-line no-unused-vars
      return dribble(res, streams.shift());
    }
    const upstream = await fetch(`${srv.url}${req.url}`);  // /stats, /v1/models
    res.writeHead(upstream.status, { 'Content-Type': 'application/json' }).end(await upstream.text());
  });
  await new Promise((r) => fake.listen(0, '127.0.0.1', r));
  let page;
  try {
    page = await (await browserContext()).newPage();
    await page.goto(`http://127.0.0.1:${fake.address().port}/`);
    const reply = await sendAndWait(page, 'Hi');
    assert.equal(await reply.locator('.text').innerText(), 'Héllo wörld ✓ 🐦');
    assert.equal(await reply.getAttribute('data-finish'), 'stop');
    assert.equal(await reply.locator('.tokens').innerText(), '4 tokens');

    await page.fill('#prompt', 'Again');
    await page.click('#send');
    const error = page.locator('#messages .msg.error');
    await error.waitFor();
    assert.match(await error.innerText(), /scripted failure/);
    const failed = page.locator('#messages .msg.assistant').nth(1);
    assert.equal(await failed.locator('.text').innerText(), 'Half');
    assert.equal(await failed.getAttribute('data-finish'), 'error');
  } finally {
    await page?.close();
    fake.close();
  }
});
