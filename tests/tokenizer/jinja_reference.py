#!/usr/bin/env python3
"""tern's chat-template interpreter against Jinja2 itself.

Every template under --templates is rendered for every conversation below, once by tern
(the render_chat_template driver) and once by Debian's python3-jinja2 configured the way
transformers' apply_chat_template configures it (trim_blocks, lstrip_blocks, loop controls,
its tojson, raise_exception and strftime_now). The two must agree byte for byte, or both
refuse the conversation (a template's raise_exception; messages may differ).
Exit status 1 on any disagreement, with a diff of the first differing bytes.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

NOW = 1721995200  # 2024-07-26 12:00 UTC

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather",
        "description": "Current weather in a city (\u00b0C, \"quoted\")",
        "parameters": {"type": "object",
                       "properties": {"city": {"type": "string", "description": "e.g. Z\u00fcrich"},
                                      "days": {"type": "integer", "minimum": 1}},
                       "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}},
]


def call(id_, name, args):
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


CASES = {
    "plain": {"messages": [{"role": "system", "content": "You are terse."},
                           {"role": "user", "content": "Hello"},
                           {"role": "assistant", "content": "Hi there"},
                           {"role": "user", "content": "Who are you"}]},
    "user_only": {"messages": [{"role": "user", "content": "Hello"}]},
    "no_generation_prompt": {"add_generation_prompt": False,
                             "messages": [{"role": "user", "content": "Hello"},
                                          {"role": "assistant", "content": "  Hi  "}]},
    "awkward_text": {"messages": [{"role": "user",
                                   "content": "Quotes \" ' and \\ backslash,\ttabs,\nnewlines, \u00e9, \U0001F600 {{ x }}"}]},
    "tools": {"tools": TOOLS, "messages": [{"role": "user", "content": "Weather in Paris?"}]},
    "tools_system": {"tools": TOOLS, "messages": [{"role": "system", "content": "Be brief."},
                                                 {"role": "user", "content": "Weather in Paris?"}]},
    "tool_round_trip": {"tools": TOOLS, "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [call("abcDEF123", "get_weather", {"city": "Paris", "days": 2})]},
        {"role": "tool", "tool_call_id": "abcDEF123", "name": "get_weather", "content": "{\"temp\": 21}"}]},
    "parallel_calls": {"tools": TOOLS, "messages": [
        {"role": "user", "content": "Weather and time?"},
        {"role": "assistant", "content": None, "tool_calls": [call("call00001", "get_weather", {"city": "Oslo"}),
                                                              call("call00002", "get_time", {})]},
        {"role": "tool", "tool_call_id": "call00001", "content": "cold"},
        {"role": "tool", "tool_call_id": "call00002", "content": "noon"},
        {"role": "assistant", "content": "Cold, and it is noon."},
        {"role": "user", "content": "Thanks"}]},
    # Reasoning models' history: thinking inline in the content, or sent back as reasoning_content;
    # and a request that turns thinking off through chat_template_kwargs.
    "reasoning_history": {"messages": [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "<think>\nAdd them.\n</think>\n\n4"},
        {"role": "user", "content": "And 3+3?"},
        {"role": "assistant", "content": "6", "reasoning_content": "Three and three."},
        {"role": "user", "content": "Thanks"}]},
    "reasoning_tools": {"tools": TOOLS, "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "<think>Call the tool.</think>", "reasoning_content": "Call it.",
         "tool_calls": [call("abcDEF123", "get_weather", {"city": "Paris"})]},
        {"role": "tool", "tool_call_id": "abcDEF123", "content": "21C"},
        {"role": "tool", "tool_call_id": "abcDEF124", "content": "dry"}]},
    # Content as an array of text parts: templates that loop over content get the list, the
    # others the parts joined (as vLLM decides per template).
    "content_parts": {"messages": [
        {"role": "system", "content": [{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}]},
        {"role": "user", "content": [{"type": "text", "text": " Hello \n"}, {"type": "text", "text": "world"}]}]},
    "thinking_off": {"kwargs": {"enable_thinking": False, "style": {"terse": True}},
                     "messages": [{"role": "user", "content": "Hi"}]},
}

BOS_EOS = {"llama": ("<|begin_of_text|>", "<|eot_id|>"), "qwen": ("", "<|im_end|>"),
           "phi3": ("<s>", "<|endoftext|>"), "gemma": ("<bos>", "<eos>")}


def special_tokens(template_name):
    for prefix, pair in BOS_EOS.items():
        if template_name.startswith(prefix):
            return pair
    return ("<s>", "</s>")


class GenerationTag(jinja2.ext.Extension):
    """{% generation %}...{% endgeneration %}, as transformers' AssistantTracker parses it: a call
    block whose output is its body's (transformers also records where it lies)."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def as_strings(case):
    """The case with array contents joined, as tern gives them to a template that does not loop
    over content."""
    case = json.loads(json.dumps(case))
    for m in case["messages"]:
        if isinstance(m.get("content"), list):
            m["content"] = "".join(p["text"] for p in m["content"])
    return case


def reference_render(source, case):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, jinja2.ext.loopcontrols])

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    now = datetime.datetime.fromtimestamp(case["now"], tz=datetime.timezone.utc)
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: now.strftime(fmt)
    # Messages as vLLM and llama.cpp hand them to templates: arguments that are JSON objects
    # become dicts (templates print them with tojson).
    messages = []
    for m in case["messages"]:
        m = dict(m)
        if "tool_calls" in m:
            calls = []
            for c in m["tool_calls"]:
                c = json.loads(json.dumps(c))
                args = json.loads(c["function"]["arguments"])
                if isinstance(args, dict):
                    c["function"]["arguments"] = args
                calls.append(c)
            m["tool_calls"] = calls
        messages.append(m)
    variables = {"messages": messages, "add_generation_prompt": case["add_generation_prompt"],
                 "bos_token": case["bos_token"], "eos_token": case["eos_token"],
                 "date_string": now.strftime("%d %b %Y")}
    if "tools" in case:
        variables["tools"] = case["tools"]
    variables.update(case.get("kwargs", {}))
    try:
        return env.from_string(source).render(**variables)
    except Exception as e:  # raise_exception, and type errors such as None + str
        return "ERROR: " + str(e)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--render", required=True, help="the render_chat_template driver")
    ap.add_argument("--templates", required=True, help="a directory of *.jinja chat templates")
    args = ap.parse_args()
    paths = {f[:-6]: os.path.join(args.templates, f) for f in os.listdir(args.templates) if f.endswith(".jinja")}
    failures = 0
    compared = 0
    refused = 0
    with tempfile.TemporaryDirectory() as tmp:
        # tern's own fallback (ChatML, with tools in the Hermes format) is checked too.
        paths["qwen_tern_chatml"] = os.path.join(tmp, "chatml.jinja")
        with open(paths["qwen_tern_chatml"], "wb") as f:
            f.write(subprocess.run([args.render, "--chatml-source"], capture_output=True, check=True).stdout)
        for name, path in sorted(paths.items()):
            with open(path, encoding="utf-8") as f:
                source = f.read()
            bos, eos = special_tokens(name)
            for case_name, case in CASES.items():
                case = dict(case, bos_token=bos, eos_token=eos, now=NOW)
                case.setdefault("add_generation_prompt", True)
                case_path = os.path.join(tmp, "case.json")
                with open(case_path, "w", encoding="utf-8") as f:
                    json.dump(case, f, ensure_ascii=False)
                ours = subprocess.run([args.render, path, case_path], capture_output=True, check=True).stdout.decode()
                fmt = subprocess.run([args.render, "--content-format", path], capture_output=True,
                                     check=True).stdout.decode()
                ref = reference_render(source, case if fmt == "openai" else as_strings(case))
                compared += 1
                both_refuse = ours.startswith("ERROR: ") and ref.startswith("ERROR: ")
                refused += both_refuse
                if ours == ref or both_refuse:
                    continue
                failures += 1
                at = next((i for i, (a, b) in enumerate(zip(ours, ref)) if a != b), min(len(ours), len(ref)))
                print(f"MISMATCH {name} / {case_name} at byte {at}:")
                print(f"  tern:   {ours[max(0, at - 60):at + 80]!r}")
                print(f"  jinja2: {ref[max(0, at - 60):at + 80]!r}")
    print(f"{compared - failures}/{compared} template renders agree with Jinja2 {jinja2.__version__} "
          f"({refused} of them refused by both)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
