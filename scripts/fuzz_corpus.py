#!/usr/bin/env python3
"""Writes the fuzz harnesses' seed corpora (tests/fuzz/seeds/<harness>/) from valid inputs.

    scripts/fuzz_corpus.py [OUT_DIR]     (default: tests/fuzz/seeds)

grammar: byte 0 the kind (0 GBNF, 1 JSON Schema, 2 regex), the text, NUL, then bytes the harness
feeds to the matcher (a sentence of the grammar). chat_template: small templates using the
constructs real ones use (the real ones, tests/tokenizer/templates, are a second seed directory).
gguf: tiny GGUF v3 files (a llama-shaped model's hyper-parameters, an SPM or BPE vocabulary, two
tensors), written here. openai_request: byte 0 the endpoint (0 chat, 1 completions, 2 embeddings, 3 tokenize,
4 detokenize), then a valid body. tokenizer: byte 0 the vocabulary (ggml-vocab-*.gguf in ../shared, sorted),
byte 1 flags, then text. hf: config.json, tokenizer.json and model.safetensors of tiny Llama and Qwen2
checkpoints (each part but the last after its u32 length). llama2c: a tiny checkpoint and tokenizer.bin.
sse: byte 0 the piece-size seed, then an OpenAI stream body. http: request byte streams. batch_line:
`tern batch` lines. json: JSON texts (numbers at the edges of 64 bits and of a double, escapes,
surrogates, UTF-8, nesting, repeated keys).
"""
import json
import os
import struct
import sys

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "fuzz", "seeds")

GRAMMARS = [
    (0, 'root ::= "{" ws "\\"a\\"" ws ":" ws num ws "}"\nnum ::= [0-9]+\nws ::= [ \\t\\n]*', '{"a": 12}'),
    (0, 'root ::= item ("," item){2,5}\nitem ::= [a-z]{1,3} | "(" root ")"', 'ab,c,(x,y,z),d'),
    (0, 'root ::= ("x"?){2,4} [^"\\\\]* "\\u00e9" [\\U0001F600-\\U0001F64F]?', 'xxabc\u00e9\U0001F600'),
    (0, 'expr ::= term (("+" | "-") term)*\nterm ::= [0-9]+ | "(" expr ")"\nroot ::= expr', '(1+2)-3'),
    (1, json.dumps({"type": "object", "properties": {
        "name": {"type": "string", "minLength": 2, "maxLength": 40},
        "age": {"type": "integer", "minimum": -5, "maximum": 130},
        "tags": {"type": "array", "items": {"enum": ["a", "b", 3]}, "minItems": 1, "maxItems": 4},
        "when": {"type": "string", "format": "date-time"},
        "ref": {"$ref": "#/$defs/node"}}, "required": ["name", "age"],
        "$defs": {"node": {"anyOf": [{"type": "null"}, {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}]}}}),
     '{"name": "Bo", "age": 7, "tags": ["a", 3]}'),
    (1, json.dumps({"type": "array", "items": {"type": "number"}, "minItems": 3, "maxItems": 300}), '[1.5, -2, 3e4]'),
    (1, json.dumps({"type": "string", "pattern": "^[A-Z]{2}-\\d{3,}$"}), '"AB-1234"'),
    (1, json.dumps({"oneOf": [{"const": {"k": [1, True, None]}}, {"type": "boolean"}]}), 'true'),
    (2, '[a-z]+@[a-z]+\\.(com|org){1,2}', 'me@host.com'),
    (2, '(?:ab|c){3,7}d?\\s*\\w{0,12}', 'abcab d xyz'),
    (2, '[^\\d\\s]{2,}.+', 'xy\u00e9z'),
]

TEMPLATES = [
    "{% for m in messages %}<|{{ m.role }}|>{{ m.content | trim }}{% if not loop.last %}\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}",
    "{%- set ns = namespace(last=-1) -%}{%- for m in messages[::-1] %}{% if m.role == 'user' and ns.last < 0 %}"
    "{% set ns.last = loop.index0 %}{% endif %}{% endfor -%}{{ ns.last }}{{ tools | tojson(indent=2) if tools }}",
    "{% macro r(x, y='d') -%}[{{ x }}{{ y }}]{%- endmacro %}{% call(a) r(1) %}{{ caller }}{% endcall %}"
    "{% for k, v in {'a': 1, 'b': [2, 3]} | items %}{{ k }}={{ v | join(',') if v is iterable else v }}{% endfor %}",
    "{% for m in messages %}{% for c in m.tool_calls | default([]) %}{{ c.function.name }}({{ c.function.arguments | tojson }})"
    "{% endfor %}{% if m.content is string %}{{ m.content.split('</think>')[-1].lstrip() }}{% endif %}{% endfor %}"
    "{{ strftime_now('%Y-%m-%d') }}{{ raise_exception('no') if messages | length > 99 }}",
    "{% set x %}{% filter upper %}{{ bos_token ~ 'hi' }}{% endfilter %}{% endset %}{{ x[1:3] }}{{ '%s-%d' % ('a', 3) }}"
    "{% for i in range(3) if i != 1 %}{{ i }}{% else %}none{% endfor %}{% generation %}g{% endgeneration %}",
]

BODIES = [
    (0, {"model": "m", "messages": [{"role": "system", "content": "Be brief."},
                                    {"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
         "max_tokens": 8, "temperature": 0.7, "stream": True, "stream_options": {"include_usage": True},
         "stop": ["\n"], "logprobs": True, "top_logprobs": 3, "logit_bias": {"5": -100}, "n": 2, "seed": 1}),
    (0, {"messages": [{"role": "user", "content": "Weather?"},
                      {"role": "assistant", "content": None, "reasoning_content": "call",
                       "tool_calls": [{"id": "abcDEF123", "type": "function",
                                       "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
                      {"role": "tool", "tool_call_id": "abcDEF123", "content": "cold"}],
         "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
             "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
         "tool_choice": "required", "parallel_tool_calls": False, "chat_template_kwargs": {"enable_thinking": False}}),
    (0, {"messages": [{"role": "user", "content": "{\"name\": \"get_weather\", \"parameters\": {}}"}],
         "tools": [{"type": "function", "function": {"name": "get_weather"}}],
         "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}}),
    (1, {"model": "m", "prompt": ["Once", [1, 2, 3]], "echo": True, "logprobs": 2, "max_tokens": 4,
         "grammar": "root ::= [a-z]+", "prompt_logprobs": 1, "ignore_eos": True}),
    (2, {"input": ["a", "b"], "encoding_format": "base64", "pooling": "mean", "dimensions": 64}),
    (3, {"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": False}),
    (4, {"tokens": [1, 2, 300]}),
]


def gguf_file(kv, tensors):
    """A GGUF v3 image: kv is [(key, type, value)] with type one of u32, f32, str, bool, [str], [f32], [i32];
    tensors is [(name, dims, f32 values)]."""
    def s(x):
        b = x.encode()
        return struct.pack("<Q", len(b)) + b
    codes = {"u32": 4, "i32": 5, "f32": 6, "bool": 7, "str": 8}
    def scalar(t, v):
        return {"u32": lambda: struct.pack("<I", v), "i32": lambda: struct.pack("<i", v),
                "f32": lambda: struct.pack("<f", v), "bool": lambda: struct.pack("<?", v), "str": lambda: s(v)}[t]()
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    for key, t, v in kv:
        out += s(key)
        if t.startswith("["):
            et = t[1:-1]
            out += struct.pack("<IIQ", 9, codes[et], len(v)) + b"".join(scalar(et, x) for x in v)
        else:
            out += struct.pack("<I", codes[t]) + scalar(t, v)
    offset = 0
    for name, dims, values in tensors:
        out += s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", 0, offset)  # F32
        offset += (len(values) * 4 + 31) // 32 * 32
    out += b"\0" * ((32 - len(out) % 32) % 32)
    for _, _, values in tensors:
        data = b"".join(struct.pack("<f", x) for x in values)
        out += data + b"\0" * ((32 - len(data) % 32) % 32)
    return out


def write(harness, name, data):
    d = os.path.join(OUT, harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


for i, (kind, text, sentence) in enumerate(GRAMMARS):
    write("grammar", f"g{i:02d}", bytes([kind]) + text.encode() + b"\0" + sentence.encode())
for i, source in enumerate(TEMPLATES):
    write("chat_template", f"t{i:02d}.jinja", source.encode())
pieces = ["<unk>", "<s>", "</s>", "\u2581", "\u2581a", "b", "c", "\u2581Hello", "\u2581world", "<0x0A>", "ab", "\u00e9"]
spm = [("general.architecture", "str", "llama"), ("llama.context_length", "u32", 64),
       ("llama.embedding_length", "u32", 8), ("llama.block_count", "u32", 1), ("llama.feed_forward_length", "u32", 16),
       ("llama.attention.head_count", "u32", 2), ("llama.attention.head_count_kv", "u32", 1),
       ("llama.attention.layer_norm_rms_epsilon", "f32", 1e-5), ("llama.rope.freq_base", "f32", 10000.0),
       ("tokenizer.ggml.model", "str", "llama"), ("tokenizer.ggml.tokens", "[str]", pieces),
       ("tokenizer.ggml.scores", "[f32]", [0.0] * 3 + [-float(i) for i in range(len(pieces) - 3)]),
       ("tokenizer.ggml.token_type", "[i32]", [2, 3, 3] + [1] * 6 + [6] + [1] * 2),
       ("tokenizer.ggml.bos_token_id", "u32", 1), ("tokenizer.ggml.eos_token_id", "u32", 2),
       ("tokenizer.chat_template", "str", TEMPLATES[0])]
tensors = [("token_embd.weight", [8, len(pieces)], [0.01 * i for i in range(8 * len(pieces))]),
           ("output_norm.weight", [8], [1.0] * 8)]
write("gguf", "spm.gguf", gguf_file(spm, tensors))
bpe_pieces = ["a", "b", "c", "\u0120", "\u0120a", "ab", "abc", "<|end|>"]
bpe = [(k, t, v) for k, t, v in spm if not k.startswith("tokenizer.")] + [
    ("tokenizer.ggml.model", "str", "gpt2"), ("tokenizer.ggml.pre", "str", "llama-bpe"),
    ("tokenizer.ggml.tokens", "[str]", bpe_pieces), ("tokenizer.ggml.token_type", "[i32]", [1] * 7 + [3]),
    ("tokenizer.ggml.merges", "[str]", ["\u0120 a", "a b", "ab c"]), ("tokenizer.ggml.eos_token_id", "u32", 7)]
write("gguf", "bpe.gguf", gguf_file(bpe, [("output_norm.weight", [8], [1.0] * 8)]))
for i, (endpoint, body) in enumerate(BODIES):
    write("openai_request", f"r{i:02d}", bytes([endpoint]) + json.dumps(body).encode())

TEXTS = ["Hello world", " leading space, tabs\tand\nnewlines\r\n", "caf\u00e9 \u00fcber \u4e2d\u6587 \U0001F600!!",
         "<s>[INST] special <|im_start|>user<|im_end|></s>", "12345 3.14159 0x1F  multiple   spaces",
         "def f(x):\n    return x ** 2  # code", "\u0928\u092e\u0938\u094d\u0924\u0947 \u0645\u0631\u062d\u0628\u0627"]
for i, text in enumerate(TEXTS):
    write("tokenizer", f"t{i:02d}", bytes([i, i % 8]) + text.encode())


def part(b):
    return struct.pack("<I", len(b)) + b


def safetensors(tensors):
    """tensors: [(name, shape, f32 values)] -> a safetensors image (F32, header padded to 8)."""
    header, data = {}, b""
    for name, shape, values in tensors:
        blob = b"".join(struct.pack("<f", v) for v in values)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data


def hf_checkpoint(arch, bias):
    hid, ffn, vocab, heads, kv = 8, 16, 16, 2, 1
    hd = hid // heads
    config = {"architectures": [arch], "model_type": {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2"}[arch],
              "hidden_size": hid, "intermediate_size": ffn, "num_hidden_layers": 1, "num_attention_heads": heads,
              "num_key_value_heads": kv, "vocab_size": vocab, "max_position_embeddings": 64, "rms_norm_eps": 1e-5,
              "rope_theta": 10000.0, "tie_word_embeddings": False, "torch_dtype": "float32"}
    def m(r, c):
        return [0.01 * ((i * 7) % 13 - 6) for i in range(r * c)]
    L = "model.layers.0."
    t = [("model.embed_tokens.weight", [vocab, hid], m(vocab, hid)), (L + "input_layernorm.weight", [hid], [1.0] * hid),
         (L + "self_attn.q_proj.weight", [heads * hd, hid], m(heads * hd, hid)),
         (L + "self_attn.k_proj.weight", [kv * hd, hid], m(kv * hd, hid)),
         (L + "self_attn.v_proj.weight", [kv * hd, hid], m(kv * hd, hid)),
         (L + "self_attn.o_proj.weight", [hid, heads * hd], m(hid, heads * hd)),
         (L + "post_attention_layernorm.weight", [hid], [1.0] * hid),
         (L + "mlp.gate_proj.weight", [ffn, hid], m(ffn, hid)), (L + "mlp.up_proj.weight", [ffn, hid], m(ffn, hid)),
         (L + "mlp.down_proj.weight", [hid, ffn], m(hid, ffn)), ("model.norm.weight", [hid], [1.0] * hid),
         ("lm_head.weight", [vocab, hid], m(vocab, hid))]
    if bias:
        t += [(L + f"self_attn.{p}_proj.bias", [n * hd], [0.1] * (n * hd)) for p, n in (("q", heads), ("k", kv), ("v", kv))]
    return json.dumps(config).encode(), safetensors(t)


TOKENIZER_JSON = json.dumps({
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4, "\u0120": 5, "\u0120a": 6,
                                       "<|end|>": 7}, "merges": ["a b", "ab c", "\u0120 a"]},
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
    "added_tokens": [{"id": 7, "content": "<|end|>", "special": True, "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False}]}).encode()
config, st = hf_checkpoint("LlamaForCausalLM", False)
write("hf", "llama", part(config) + part(TOKENIZER_JSON) + st)
config, st = hf_checkpoint("Qwen2ForCausalLM", True)
write("hf", "qwen2", part(config) + part(b"") + st)


def llama2c(dim=8, hidden=16, layers=1, heads=2, kv=1, vocab=6, seq=16, shared=True):
    hd = dim // heads
    head = struct.pack("<7i", dim, hidden, layers, heads, kv, vocab if shared else -vocab, seq)
    sizes = [vocab * dim, layers * dim, layers * dim * dim, layers * dim * kv * hd, layers * dim * kv * hd,
             layers * dim * dim, layers * dim, layers * dim * hidden, layers * hidden * dim, layers * dim * hidden,
             dim, seq * hd // 2, seq * hd // 2] + ([] if shared else [vocab * dim])
    body = b"".join(struct.pack("<f", 0.01 * (i % 11)) for n in sizes for i in range(n))
    pieces = [b"<unk>", b"<s>", b"</s>", b" a", b"b", b"<0x0A>"][:vocab]
    tok = struct.pack("<i", max(len(p) for p in pieces)) + b"".join(
        struct.pack("<fi", -float(i), len(p)) + p for i, p in enumerate(pieces))
    return head + body, tok


for name, kw in (("shared", {}), ("unshared", {"shared": False, "layers": 2})):
    model, tok = llama2c(**kw)
    write("llama2c", name, part(model) + tok)

STREAM = ('data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant",'
          '"content":"Hel"},"finish_reason":null}]}\n\n: keep-alive\n\ndata: {"choices":[{"index":0,"delta":'
          '{"content":"lo \\u00e9"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}\r\n\r\n'
          'data: [DONE]\n\n')
write("sse", "s00", bytes([3]) + STREAM.encode())
write("sse", "s01", bytes([0]) + b'event: x\nid: 1\ndata: {"error":{"message":"bad","type":"invalid_request_error"}}\n'
      b'data: second line\n\ndata: {"choices":[{"text":"t","finish_reason":null}]}')
write("sse", "s02", bytes([250]) + b'{"error": {"message": "Too many requests", "type": "rate_limit"}}')

HTTP = [
    b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
    b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET /x HTTP/1.1\r\n\r\n",
    b"POST /stream HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n3;ext=1\r\nefg\r\n0\r\n"
    b"Trailer: t\r\n\r\n",
    b"POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc",
    b"POST /echo HTTP/1.0\r\nContent-Length: 2\r\n\r\nhiHEAD /echo HTTP/1.1\r\nHost: y\r\n\r\n",
    b"POST /echo HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\nContent-Length: 4\r\n\r\n",
]
for i, req in enumerate(HTTP):
    write("http", f"h{i:02d}", req)

LINES = [
    {"id": "a", "prompt": "Once upon a time", "max_tokens": 16, "temperature": 0.8, "top_p": 0.9, "seed": 7},
    {"prompt": [1, 2, 3], "top_k": 5, "min_p": 0.05, "stop": ["\n", "."], "priority": -2, "tenant": "t"},
    {"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {"schema": {
        "type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "string"}}}}}},
    {"prompt": "y", "grammar": "root ::= [a-z]+", "ignore_eos": True},
    {"prompt": "z", "regex": "[0-9]{3}", "max_tokens": 0},
]
for i, line in enumerate(LINES):
    write("batch_line", f"l{i:02d}", json.dumps(line).encode())

JSON_TEXTS = [
    '{"a": [1, -2, 3.5, true, false, null, "x"], "b": {}, "c": []}',
    '[9223372036854775807, -9223372036854775808, 18446744073709551615, 18446744073709551616, -0, -0.0]',
    '[0.1, 1e308, 1.7976931348623157e308, 5e-324, 1e-400, 2.5E+3, 123456789012345678901234567890]',
    '"\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u0000 \\u00e9 \\ud83d\\ude00 \u00e9\u20ac\U0001F600"',
    '{"dup": 1, "z": {"y": [[[{"x": [null]}]]]}, "dup": [2]}',
    '\ufeff {"bom": true}',
    json.dumps(LINES[2]),
]
for i, text in enumerate(JSON_TEXTS):
    write("json", f"j{i:02d}", text.encode())

print(f"seeds written under {os.path.normpath(OUT)}")
