// The official `openai` npm client against a live `tern serve` (stories260K):
// chat and completions, streaming and not, n > 1, stop, seeds, logprobs, usage,
// structured output (zod), tool calls round-tripped with the SDK's helpers, typed errors, client-side aborts, Prometheus' own checker on /metrics, and a
// clean exit on SIGTERM.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import OpenAI from 'openai';
import { zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';
import { startServer, skipReason } from './live_server.mjs';

const why = skipReason();
let srv, client;

before(async () => {
  if (why) return;
  srv = await startServer();
  client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'unused', maxRetries: 0 });
});

after(async () => {
  if (srv) assert.equal(await srv.stop(), 0, 'tern serve exits 0 on SIGTERM');
});

const greedy = { model: 'stories260K', temperature: 0 };
const messages = [{ role: 'user', content: 'Once upon a time' }];

async function stats() {
  return (await fetch(`${srv.url}/stats`)).json();
}

async function waitIdle() {
  for (let i = 0; i < 500; i++) {
    const s = await stats();
    if (s.pending === 0 && s.n_running === 0 && s.kv_blocks_used === 0) return s;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.fail('the server did not become idle');
}

test('models.list names the served model', { skip: why ?? false }, async () => {
  const models = await client.models.list();
  assert.equal(models.data.length, 1);
  assert.equal(models.data[0].id, 'stories260K');
  assert.equal(models.data[0].object, 'model');
});

test('chat completion: message, finish reason and usage', { skip: why ?? false }, async () => {
  const r = await client.chat.completions.create({ ...greedy, messages, max_tokens: 12 });
  assert.equal(r.object, 'chat.completion');
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.ok(r.choices[0].message.content.length > 0);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 12);
  assert.ok(r.usage.prompt_tokens > 0);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 12);
  // max_completion_tokens is the newer name of the same limit.
  const r2 = await client.chat.completions.create({ ...greedy, messages, max_completion_tokens: 5 });
  assert.equal(r2.usage.completion_tokens, 5);
});

test('chat streaming gives the same text as non-streaming, then usage', { skip: why ?? false }, async () => {
  const whole = await client.chat.completions.create({ ...greedy, messages, max_tokens: 16 });
  const stream = await client.chat.completions.create({
    ...greedy, messages, max_tokens: 16, stream: true, stream_options: { include_usage: true },
  });
  let text = '', role = null, finish = null, usage = null, n = 0;
  const ids = new Set();
  for await (const chunk of stream) {
    ids.add(chunk.id);
    n++;
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta.role) role = c.delta.role;
      if (c.delta.content) text += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(ids.size, 1, 'one id for every chunk');
  assert.ok(n >= 3);
  assert.equal(role, 'assistant');
  assert.equal(finish, 'length');
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(usage.completion_tokens, 16);
  assert.equal(usage.prompt_tokens, whole.usage.prompt_tokens);
});

test('completions: string and list prompts, streaming, echo', { skip: why ?? false }, async () => {
  const one = await client.completions.create({ ...greedy, prompt: 'Once upon a time', max_tokens: 10 });
  assert.equal(one.object, 'text_completion');
  assert.equal(one.usage.completion_tokens, 10);
  const two = await client.completions.create({ ...greedy, prompt: ['Once upon a time', 'The dog'], max_tokens: 4 });
  assert.deepEqual(two.choices.map((c) => c.index), [0, 1]);
  assert.equal(two.choices[0].text, one.choices[0].text.slice(0, two.choices[0].text.length));
  const stream = await client.completions.create({ ...greedy, prompt: 'Once upon a time', max_tokens: 10, stream: true });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
  assert.equal(text, one.choices[0].text);
  const echo = await client.completions.create({ ...greedy, prompt: 'Once upon a time', max_tokens: 3, echo: true });
  assert.ok(echo.choices[0].text.startsWith('Once upon a time'));
});

test('n > 1 and seed reproducibility', { skip: why ?? false }, async () => {
  const req = { model: 'stories260K', messages, max_tokens: 20, n: 3, seed: 1234, temperature: 1.0 };
  const a = await client.chat.completions.create(req);
  const b = await client.chat.completions.create(req);
  assert.equal(a.choices.length, 3);
  assert.deepEqual(a.choices.map((c) => c.message.content), b.choices.map((c) => c.message.content));
  assert.equal(a.usage.completion_tokens, 60);
  const c = await client.chat.completions.create({ ...req, seed: 99 });
  assert.notDeepEqual(c.choices.map((x) => x.message.content), a.choices.map((x) => x.message.content));
});

test('stop strings end the choice before the match', { skip: why ?? false }, async () => {
  const free = await client.completions.create({ ...greedy, prompt: 'Once upon a time', max_tokens: 20 });
  const text = free.choices[0].text;
  const stop = text.slice(8, 12);
  const r = await client.completions.create({ ...greedy, prompt: 'Once upon a time', max_tokens: 20, stop: [stop] });
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.ok(text.startsWith(r.choices[0].text));
  assert.ok(!r.choices[0].text.includes(stop));
});

test('logprobs and top_logprobs', { skip: why ?? false }, async () => {
  const r = await client.chat.completions.create({ ...greedy, messages, max_tokens: 5, logprobs: true, top_logprobs: 2 });
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, 5);
  for (const e of content) {
    assert.equal(e.top_logprobs.length, 2);
    assert.ok(e.logprob <= 0);
    assert.equal(e.logprob, e.top_logprobs[0].logprob, 'greedy picks the most likely token');
    assert.deepEqual(e.bytes, [...Buffer.from(e.token, 'utf8')]);
  }
  assert.equal(content.map((e) => e.token).join(''), r.choices[0].message.content);
});

test('prompt log-probabilities: echo + logprobs scores the prompt as generation scored the same tokens', { skip: why ?? false }, async () => {
  const gen = await client.completions.create({ ...greedy, prompt: 'Once upon a time', max_tokens: 8, logprobs: 1 });
  const text = 'Once upon a time' + gen.choices[0].text;
  for (const stream of [false, true]) {
    let lp;
    let prompt_logprobs;
    if (stream) {
      const s = await client.completions.create({ ...greedy, prompt: text, max_tokens: 0, echo: true, logprobs: 1, prompt_logprobs: 1, stream: true });
      lp = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
      for await (const chunk of s) {
        const c = chunk.choices[0];
        if (c?.prompt_logprobs) prompt_logprobs = c.prompt_logprobs;
        if (c?.logprobs) for (const k of Object.keys(lp)) lp[k].push(...c.logprobs[k]);
      }
    } else {
      const r = await client.completions.create({ ...greedy, prompt: text, max_tokens: 0, echo: true, logprobs: 1, prompt_logprobs: 1 });
      assert.equal(r.choices[0].text, text);
      assert.equal(r.choices[0].finish_reason, 'length');
      assert.equal(r.usage.completion_tokens, 0);
      lp = r.choices[0].logprobs;
      prompt_logprobs = r.choices[0].prompt_logprobs;
    }
    assert.equal(lp.token_logprobs[0], null);  // nothing predicts the first token
    assert.equal(lp.tokens.length, lp.token_logprobs.length);
    assert.equal(prompt_logprobs.length, lp.tokens.length);
    assert.equal(prompt_logprobs[0], null);
    // The generated tokens, scored as prompt: the values generation reported for them.
    const n = gen.choices[0].logprobs.tokens.length;
    assert.deepEqual(lp.tokens.slice(-n), gen.choices[0].logprobs.tokens);
    const scored = lp.token_logprobs.slice(-n);
    gen.choices[0].logprobs.token_logprobs.forEach((v, i) => assert.ok(Math.abs(v - scored[i]) < 1e-3, `${v} vs ${scored[i]}`));
    // vLLM's shape: each position holds the prompt's token with its rank (1 here: greedy chose it).
    for (const at of prompt_logprobs.slice(-n)) assert.ok(Object.values(at).some((e) => e.rank === 1 && e.logprob <= 0));
  }
  await waitIdle();
});

test('embeddings: shape, unit length, batches equal single inputs, base64 equals float', { skip: why ?? false }, async () => {
  const inputs = ['Once upon a time', 'The cat sat on the mat.', 'Lily'];
  // The SDK asks for base64 by default and decodes it to floats.
  const batch = await client.embeddings.create({ model: 'stories260K', input: inputs });
  assert.equal(batch.object, 'list');
  assert.equal(batch.data.length, 3);
  assert.ok(batch.usage.prompt_tokens > 0);
  assert.equal(batch.usage.total_tokens, batch.usage.prompt_tokens);
  const floats = await client.embeddings.create({ model: 'stories260K', input: inputs, encoding_format: 'float' });
  for (let i = 0; i < inputs.length; i++) {
    const v = batch.data[i].embedding;
    assert.equal(batch.data[i].index, i);
    assert.equal(v.length, 64);  // stories260K's width
    const norm = Math.sqrt(v.reduce((a, x) => a + x * x, 0));
    assert.ok(Math.abs(norm - 1) < 1e-5, `norm ${norm}`);
    const f = floats.data[i].embedding;
    v.forEach((x, j) => assert.ok(Math.abs(x - f[j]) < 1e-7));
    const one = (await client.embeddings.create({ model: 'stories260K', input: inputs[i], encoding_format: 'float' })).data[0].embedding;
    one.forEach((x, j) => assert.ok(Math.abs(x - f[j]) < 1e-5, `input ${i}, dim ${j}: ${x} vs ${f[j]}`));
  }
  // Different texts, different vectors; token-id input is the same as its text's tokens.
  assert.notDeepEqual(floats.data[0].embedding, floats.data[1].embedding);
  const tokens = (await (await fetch(`${srv.url}/tokenize`, { method: 'POST', body: JSON.stringify({ prompt: inputs[2] }) })).json()).tokens;
  const byIds = await client.embeddings.create({ model: 'stories260K', input: [tokens], encoding_format: 'float' });
  byIds.data[0].embedding.forEach((x, j) => assert.ok(Math.abs(x - floats.data[2].embedding[j]) < 1e-5));
  // Errors name the field.
  for (const [body, param] of [[{ input: [] }, 'input'], [{ input: 'x', dimensions: 8 }, 'dimensions'],
    [{ input: 'x', encoding_format: 'int8' }, 'encoding_format'], [{ input: [[1, 99999]] }, 'input'], [{ input: 'x', pooling: 'max' }, 'pooling']]) {
    await assert.rejects(client.embeddings.create({ model: 'stories260K', ...body }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === param, JSON.stringify(body));
  }
  await waitIdle();
});

// The per-request `streaming` extension: generation past the model's 512
// positions in constant KV memory; without it the same request is a context error.
test('streaming requests run past the context', { skip: why ?? false }, async () => {
  const long = { ...greedy, prompt: 'Once upon a time', max_tokens: 900, ignore_eos: true };
  const r = await client.completions.create({ ...long, streaming: '4,252' });
  assert.equal(r.usage.completion_tokens, 900);
  assert.equal(r.choices[0].finish_reason, 'length');
  const shift = await client.completions.create({ ...long, streaming: { shift: true, sinks: 4 } });
  assert.equal(shift.usage.completion_tokens, 900);
  await assert.rejects(client.completions.create(long),
    (e) => e instanceof OpenAI.BadRequestError && e.code === 'context_length_exceeded');
  for (const bad of ['4', { sinks: 4 }, 7, '4,9999'])
    await assert.rejects(client.completions.create({ ...long, streaming: bad }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === 'streaming' || e.status === 400, JSON.stringify(bad));
  await waitIdle();
});

test('errors surface as the SDK typed errors', { skip: why ?? false }, async () => {
  await assert.rejects(client.chat.completions.create({ ...greedy, messages, temperature: 5 }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'temperature');
  await assert.rejects(client.chat.completions.create({ ...greedy, messages: [] }), OpenAI.BadRequestError);
  await assert.rejects(client.chat.completions.create({ ...greedy, model: 'gpt-4o', messages }),
    (e) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found');
  const long = 'Once upon a time there was a cat. '.repeat(100);
  await assert.rejects(client.completions.create({ ...greedy, prompt: long, max_tokens: 4 }),
    (e) => e instanceof OpenAI.BadRequestError && /maximum context length is 512/.test(e.message));
});

test('authentication and a full queue map to typed errors', { skip: why ?? false }, async () => {
  const keyed = await startServer({ args: ['--api-key', 'sk-right', '--max-queue', '2', '--max-num-seqs', '1'] });
  try {
    const wrong = new OpenAI({ baseURL: `${keyed.url}/v1`, apiKey: 'sk-wrong', maxRetries: 0 });
    await assert.rejects(wrong.models.list(), OpenAI.AuthenticationError);
    const right = new OpenAI({ baseURL: `${keyed.url}/v1`, apiKey: 'sk-right', maxRetries: 0 });
    assert.equal((await right.models.list()).data[0].id, 'stories260K');
    // Two long generations fill the queue (one at a time runs); a third is refused.
    const ac = new AbortController();
    const stream = await right.completions.create(
      { model: 'stories260K', prompt: 'Once', max_tokens: 480, n: 2, ignore_eos: true, stream: true },
      { signal: ac.signal });
    const it = stream[Symbol.asyncIterator]();
    await it.next();
    await assert.rejects(right.completions.create({ model: 'stories260K', prompt: 'x', max_tokens: 2 }),
      (e) => e instanceof OpenAI.RateLimitError && e.status === 429);
    ac.abort();
  } finally {
    assert.equal(await keyed.stop(), 0);
  }
});

test('a client abort mid-stream cancels the request and frees its KV blocks', { skip: why ?? false }, async () => {
  const before = (await waitIdle()).tokens_generated;
  const ac = new AbortController();
  const stream = await client.completions.create(
    { model: 'stories260K', prompt: 'Once upon a time', max_tokens: 480, n: 8, ignore_eos: true, stream: true },
    { signal: ac.signal });
  let chunks = 0;
  try {
    for await (const _ of stream) {
      if (++chunks === 3) {
        ac.abort();
        break;
      }
    }
  } catch (e) {
    assert.ok(e instanceof OpenAI.APIUserAbortError || e.name === 'AbortError', String(e));
  }
  assert.equal(chunks, 3);
  const s = await waitIdle();
  assert.equal(s.kv_blocks_used, 0);
  assert.ok(s.tokens_generated - before < 8 * 480, 'the generation was cut short');
});

test('grammar-constrained output: a GBNF extension field, streaming and not, and response_format', { skip: why ?? false }, async () => {
  // stories260K writes stories; the grammar makes it write this record.
  const grammar = 'root ::= "{\\"name\\": \\"" [A-Za-z ]{1,16} "\\", \\"age\\": " ("0" | [1-9] [0-9]?) "}"';
  for (const seed of [1, 2, 3]) {
    const r = await client.completions.create({ model: 'stories260K', prompt: 'Once', max_tokens: 60, temperature: 1.2, seed, grammar });
    assert.equal(r.choices[0].finish_reason, 'stop');
    const obj = JSON.parse(r.choices[0].text);
    assert.equal(typeof obj.name, 'string');
    assert.ok(Number.isInteger(obj.age));
  }
  const body = { ...greedy, messages, max_tokens: 60, grammar };
  const whole = await client.chat.completions.create(body);
  const stream = await client.chat.completions.create({ ...body, stream: true });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  assert.equal(text, whole.choices[0].message.content);
  JSON.parse(text);
  // response_format json_object: the reply starts as a JSON object.
  const j = await client.chat.completions.create({ ...greedy, messages, max_tokens: 30, response_format: { type: 'json_object' } });
  assert.match(j.choices[0].message.content, /^\s*\{/);
  // response_format json_schema (strict, as SDKs send it): the reply parses and has the fields.
  const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 10 }, age: { type: 'integer', minimum: 1, maximum: 99 } },
    required: ['name', 'age'], additionalProperties: false };
  for (const seed of [1, 2]) {
    const s = await client.chat.completions.create({ model: 'stories260K', messages, max_tokens: 80, temperature: 1.0, seed,
      response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema } } });
    assert.equal(s.choices[0].finish_reason, 'stop');
    const obj = JSON.parse(s.choices[0].message.content);
    assert.deepEqual(Object.keys(obj), ['name', 'age']);
    assert.ok(Number.isInteger(obj.age) && obj.age >= 1 && obj.age <= 99);
  }
  // A grammar that does not compile is a 400 naming the problem.
  await assert.rejects(client.completions.create({ model: 'stories260K', prompt: 'x', max_tokens: 5, grammar: 'root ::= nowhere' }),
    (e) => e instanceof OpenAI.BadRequestError && /'nowhere' is used but not defined/.test(e.message));
  await waitIdle();
});

test('structured output: chat.completions.parse with a zod schema returns the parsed object', { skip: why ?? false }, async () => {
  const Person = z.object({ name: z.string().max(8), age: z.number().int().min(0).max(120), pet: z.enum(['cat', 'dog']).nullable() });
  for (const seed of [1, 2, 3]) {
    const r = await client.chat.completions.parse({ model: 'stories260K', messages, max_tokens: 80, temperature: 1.2, seed,
      response_format: zodResponseFormat(Person, 'person') });
    const msg = r.choices[0].message;
    assert.equal(r.choices[0].finish_reason, 'stop');
    assert.deepEqual(Person.parse(msg.parsed), msg.parsed);  // the SDK parsed it; zod agrees it is valid
    assert.deepEqual(Object.keys(msg.parsed), ['name', 'age', 'pet']);
  }
  await waitIdle();
});

// A tool small enough for stories260K's 512-token context, with a bounded argument.
const weatherTool = { type: 'function', function: { name: 'get_weather', description: 'Weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 6 } }, required: ['city'], additionalProperties: false } } };
const ask = [{ role: 'user', content: 'Weather?' }];

test('tools: a named tool_choice forces a call; the call and its result round-trip into an answer', { skip: why ?? false }, async () => {
  const body = { ...greedy, messages: ask, tools: [weatherTool], tool_choice: { type: 'function', function: { name: 'get_weather' } }, max_tokens: 40 };
  const r = await client.chat.completions.create(body);
  const choice = r.choices[0];
  assert.equal(choice.finish_reason, 'tool_calls');
  assert.equal(choice.message.content, null);
  assert.equal(choice.message.tool_calls.length, 1);
  const call = choice.message.tool_calls[0];
  assert.equal(call.type, 'function');
  assert.match(call.id, /^[A-Za-z0-9]{9}$/);
  assert.equal(call.function.name, 'get_weather');
  const args = JSON.parse(call.function.arguments);
  assert.deepEqual(Object.keys(args), ['city']);
  assert.ok(typeof args.city === 'string' && args.city.length <= 6);

  // Streamed: the SDK's stream helper assembles the tool_calls deltas into the same call.
  const stream = client.chat.completions.stream(body);
  const streamed = (await stream.finalChatCompletion()).choices[0];
  assert.equal(streamed.finish_reason, 'tool_calls');
  assert.equal(streamed.message.tool_calls.length, 1);
  assert.equal(streamed.message.tool_calls[0].function.name, 'get_weather');
  assert.equal(streamed.message.tool_calls[0].function.arguments, call.function.arguments);
  // As OpenAI streams a call: id and name first, then the arguments in pieces as they are generated.
  const pieces = [];
  for await (const chunk of await client.chat.completions.create({ ...body, stream: true }))
    for (const d of chunk.choices[0]?.delta?.tool_calls ?? []) pieces.push(d);
  assert.ok(pieces.length > 2, JSON.stringify(pieces));
  assert.equal(pieces[0].function.name, 'get_weather');
  assert.match(pieces[0].id, /^[A-Za-z0-9]{9}$/);
  for (const p of pieces.slice(1)) {
    assert.equal(p.index, 0);
    assert.equal(p.id, undefined);
    assert.equal(p.function.name, undefined);
  }
  assert.equal(pieces.map((p) => p.function.arguments).join(''), call.function.arguments);

  // The history goes back in: the template writes the call and the tool's result, and the model answers in text.
  const history = [...ask, choice.message, { role: 'tool', tool_call_id: call.id, content: '21C' }];
  const prompt = await (await fetch(`${srv.url}/apply-template`, { method: 'POST',
    body: JSON.stringify({ messages: history, tools: [weatherTool] }) })).json();
  assert.ok(prompt.prompt.includes(`<tool_call>\n{"name": "get_weather", "arguments": ${JSON.stringify(args).replace(/":/g, '": ')}}\n</tool_call>`), prompt.prompt);
  assert.ok(prompt.prompt.includes('<tool_response>\n21C\n</tool_response>'));
  const answer = await client.chat.completions.create({ ...greedy, messages: history, tools: [weatherTool], tool_choice: 'none', max_tokens: 8 });
  assert.equal(answer.choices[0].finish_reason, 'length');
  assert.ok(answer.choices[0].message.content.length > 0);
  assert.equal(answer.choices[0].message.tool_calls, undefined);

  // auto: stories260K tells a story, which stays content, streamed or not.
  const auto = { ...greedy, messages: ask, tools: [weatherTool], max_tokens: 12 };
  const text = await client.chat.completions.create(auto);
  assert.equal(text.choices[0].finish_reason, 'length');
  assert.equal(text.choices[0].message.tool_calls, undefined);
  const streamedText = (await client.chat.completions.stream(auto).finalChatCompletion()).choices[0].message;
  assert.equal(streamedText.content, text.choices[0].message.content);
  await waitIdle();
});

test('tools: a template that ignores `tools` gets them described in the first message', { skip: why ?? false }, async () => {
  // Gemma's template has no tools branch (and refuses a system role).
  const gemma = await startServer({ args: ['--chat-template-file', '../tokenizer/templates/gemma.jinja'] });
  try {
    const c = new OpenAI({ baseURL: `${gemma.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const p = await (await fetch(`${gemma.url}/apply-template`, { method: 'POST',
      body: JSON.stringify({ messages: ask, tools: [weatherTool] }) })).json();
    assert.ok(p.prompt.startsWith('<s><start_of_turn>user\n# Tools\n<tools>\n{"type":"function","function":{"name":"get_weather"'), p.prompt);
    assert.ok(p.prompt.includes('</tool_call> per call.\n\nWeather?<end_of_turn>'), p.prompt);
    const r = await c.chat.completions.create({ ...greedy, messages: ask, tools: [weatherTool], max_tokens: 40,
      tool_choice: { type: 'function', function: { name: 'get_weather' } } });
    assert.equal(r.choices[0].message.tool_calls[0].function.name, 'get_weather');
  } finally {
    assert.equal(await gemma.stop(), 0);
  }
});

test('tools: required picks among several tools, and the SDK runner calls the function with parsed arguments', { skip: why ?? false }, async () => {
  // Two tools with short names: the tools' JSON costs stories260K many prompt tokens.
  const wx = { type: 'function', function: { name: 'wx', parameters: { type: 'object', properties: { c: { type: 'string', maxLength: 4 } }, required: ['c'] } } };
  const tm = { type: 'function', function: { name: 'tm', parameters: { type: 'object', properties: { tz: { enum: ['utc', 'cet'] } }, required: ['tz'] } } };
  let n_calls = 0;
  for (const seed of [1, 2, 3, 4]) {
    for (const stream of [false, true]) {
      const body = { model: 'stories260K', temperature: 1.2, seed, messages: ask, tools: [wx, tm], tool_choice: 'required',
        parallel_tool_calls: false, max_tokens: 85 };
      const choice = stream ? (await client.chat.completions.stream(body).finalChatCompletion()).choices[0]
        : (await client.chat.completions.create(body)).choices[0];
      if (choice.finish_reason === 'length') continue;  // cut inside the JSON: returned as content, checked in C++
      assert.equal(choice.finish_reason, 'tool_calls');
      assert.equal(choice.message.tool_calls.length, 1);
      const { name, arguments: a } = choice.message.tool_calls[0].function;
      const args = JSON.parse(a);
      if (name === 'tm') assert.ok(['utc', 'cet'].includes(args.tz));
      else assert.ok(name === 'wx' && typeof args.c === 'string' && args.c.length <= 4, a);
      ++n_calls;
    }
  }
  assert.ok(n_calls >= 4, `only ${n_calls} of 8 replies finished their call`);
  const seen = [];
  const runner = client.chat.completions.runTools({ ...greedy, messages: ask, max_tokens: 40,
    tool_choice: { type: 'function', function: { name: 'get_weather' } },
    tools: [{ type: 'function', function: { ...weatherTool.function, parse: JSON.parse, function: (args) => { seen.push(args); return '21C'; } } }] });
  await runner.done();
  assert.equal(seen.length, 1);
  assert.equal(typeof seen[0].city, 'string');
  const last = runner.messages.at(-1);
  assert.equal(last.role, 'tool');
  assert.equal(last.content, '21C');
  await waitIdle();
});

test('tools: bad definitions and choices are 400s naming the field', { skip: why ?? false }, async () => {
  const cases = [
    [{ tools: [weatherTool], tool_choice: { type: 'function', function: { name: 'nope' } } }, 'tool_choice'],
    [{ tools: [{ type: 'function', function: { name: 'bad name' } }] }, 'tools[0]'],
    [{ tool_choice: 'required' }, 'tool_choice'],
    [{ tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { x: { not: {} } } } } }], tool_choice: 'required' }, 'tools'],
  ];
  for (const [extra, param] of cases) {
    await assert.rejects(client.chat.completions.create({ ...greedy, messages: ask, max_tokens: 4, ...extra }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === param, JSON.stringify(extra));
  }
});

test('GET /metrics passes promtool check metrics', { skip: why ?? false }, async () => {
  const which = spawnSync('promtool', ['--version']);
  if (which.error) return assert.fail('promtool is not installed (Debian package prometheus)');
  const body = await (await fetch(`${srv.url}/metrics`)).text();
  const r = spawnSync('promtool', ['check', 'metrics'], { input: body, encoding: 'utf8' });
  assert.equal(r.status, 0, `promtool: ${r.stdout}${r.stderr}`);
  for (const name of ['tern_time_to_first_token_seconds_bucket', 'tern_inter_token_latency_seconds_count',
    'tern_e2e_request_latency_seconds_sum', 'tern_prompt_tokens_total', 'tern_generation_tokens_total',
    'tern_num_requests_running', 'tern_num_requests_waiting', 'tern_kv_cache_usage_ratio',
    'tern_prefix_cache_hit_ratio', 'tern_num_preemptions_total', 'tern_http_requests_total']) {
    assert.ok(body.includes(name), `missing ${name}`);
  }
  assert.match(body, /tern_http_requests_total\{endpoint="\/v1\/chat\/completions",status="400"\} [1-9]/);
});
