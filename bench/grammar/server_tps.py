#!/usr/bin/env python3
"""Constrained against plain decoding through OpenAI-compatible servers, side by side.

    bench/grammar/server_tps.py [--batch 16] [--rounds 3] [--tokens 64] [--schema FILE] URL [URL ...]

A URL written native+http://HOST:PORT is sent llama-server's own /completion requests (n_predict,
tokens_predicted) instead: its /v1/completions answers a 500 when a random-weight model's text does
not fit its output parser, and so does /completion for about a third of seeds (a sampled piece its
parser rejects mid-stream); --seeds picks seeds that llama-server completes (the seed only changes
which random text is generated, not the work per token).

For each round and each server in turn (interleaved, so a noisy machine hits all alike): BATCH
concurrent /v1/completions requests of TOKENS sampled tokens (temperature 0.8, one seed per
request), once plain (ignore_eos) and once under the JSON Schema in FILE (the `json_schema`
extension field, which tern serve and llama-server both take). Output tok/s = completion tokens
summed over the batch / wall time of the batch. Prints each run and, per server, the median
constrained/plain ratio and the median constrained tok/s. Constrained outputs are checked to be
JSON prefixes of an object (they start with '{'); a server that ignored the schema is an error.
"""
import argparse
import json
import statistics
import sys
import threading
import time
import urllib.request

DEFAULT_SCHEMA = {"type": "object", "properties": {"story": {"type": "string", "minLength": 400}},
                  "required": ["story"]}


NATIVE = "native+"


def post(url, path, body):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.load(r)


def model_id(url):
    with urllib.request.urlopen(url + "/v1/models", timeout=60) as r:
        return json.load(r)["data"][0]["id"]


def complete(url, model, tokens, seed, schema):
    """(completion tokens, text) of one request."""
    body = {"prompt": "Once upon a time", "temperature": 0.8, "seed": seed}
    if schema is None:
        body["ignore_eos"] = True
    else:
        body["json_schema"] = schema
    if url.startswith(NATIVE):
        r = post(url[len(NATIVE):], "/completion", dict(body, n_predict=tokens))
        return r["tokens_predicted"], r["content"]
    r = post(url, "/v1/completions", dict(body, model=model, max_tokens=tokens))
    return r["usage"]["completion_tokens"], r["choices"][0]["text"]


def run_batch(url, batch, tokens, schema, seeds=None):
    results = [None] * batch
    model = None if url.startswith(NATIVE) else model_id(url)
    seeds = seeds or list(range(1, batch + 1))

    def one(i):
        results[i] = complete(url, model, tokens, seeds[i % len(seeds)], schema)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(batch)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if any(r is None for r in results):
        sys.exit(f"{url}: a request failed")
    n = sum(r[0] for r in results)
    if schema is not None:
        for _, text in results:
            if not text.lstrip().startswith("{"):
                sys.exit(f"{url}: constrained output is not JSON: {text[:80]!r}")
    return n / wall, n / batch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--schema", help="a JSON Schema file (default: one string property, minLength 400)")
    ap.add_argument("--seeds", help="comma-separated request seeds (default 1..batch)")
    ap.add_argument("urls", nargs="+")
    a = ap.parse_args()
    seeds = [int(x) for x in a.seeds.split(",")] if a.seeds else None
    schema = json.load(open(a.schema)) if a.schema else DEFAULT_SCHEMA
    for url in a.urls:  # warm-up: first requests pay one-time costs (grammar compile, caches)
        run_batch(url, 1, 8, None, seeds)
        run_batch(url, 1, 8, schema, seeds)
    ratios = {u: [] for u in a.urls}
    constrained = {u: [] for u in a.urls}
    for r in range(a.rounds):
        for url in a.urls:
            plain, n_plain = run_batch(url, a.batch, a.tokens, None, seeds)
            json_tps, n_json = run_batch(url, a.batch, a.tokens, schema, seeds)
            ratios[url].append(json_tps / plain)
            constrained[url].append(json_tps)
            print(f"round {r + 1} {url}: plain {plain:.1f} tok/s ({n_plain:.1f} tokens/request), "
                  f"constrained {json_tps:.1f} tok/s ({n_json:.1f} tokens/request), ratio {json_tps / plain:.3f}")
    for url in a.urls:
        print(f"{url}: median ratio {statistics.median(ratios[url]):.3f}, "
              f"median constrained {statistics.median(constrained[url]):.1f} tok/s")


if __name__ == "__main__":
    main()
