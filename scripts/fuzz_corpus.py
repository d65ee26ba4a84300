#!/usr/bin/env python3
"""Writes the fuzz harnesses' seed corpora (tests/fuzz/seeds/<harness>/) from valid inputs.

    scripts/fuzz_corpus.py [OUT_DIR]     (default: tests/fuzz/seeds)

grammar: byte 0 the kind (0 GBNF, 1 JSON Schema, 2 regex), the text, NUL, then bytes the harness
feeds to the matcher (a sentence of the grammar). chat_template: small templates using the
constructs real ones use (the real ones, tests/tokenizer/templates, are a second seed directory).
gguf: tiny GGUF v3 files (a llama-shaped model's hyper-parameters, an SPM or BPE vocabulary, two
tensors), written here. openai_request: byte 0 the endpoint (0 chat, 1 completions, 2 embeddings, 3 tokenize,
4 detokenize), then a valid body.
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
print(f"seeds written under {os.path.normpath(OUT)}")
