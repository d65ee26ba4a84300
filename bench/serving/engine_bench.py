#!/usr/bin/env python3
"""Serving-engine benchmarks (paged KV cache, continuous batching).

Two parts, each printing a markdown table:

  kv      KV memory waste and concurrency in a fixed KV budget, on the real
          ShareGPT prompt/response lengths of ../shared/data/prompts: runs
          `tern batch` (prefix caching off, so no sharing flatters the figures)
          and reports allocated-but-unused slots of the paged cache against
          per-sequence contiguous allocation at the context length, and the
          peak number of sequences the budget held against what contiguous
          allocation would hold.

  decode  Batched decode throughput with 16 and 32 concurrent sequences
          (128-token prompts, 128 generated tokens each), tern's engine
          (`tern batch`, decode-only steps) against llama.cpp's
          `llama-batched-bench -npp 128 -ntg 128 -npl 16,32` (S_TG), run
          interleaved on the same files and thread count. llama-batched-bench
          is not built here: pass a binary you built outside this repository.

  bench/serving/engine_bench.py kv --tern build/tools/tern/tern -m bench-150m-Q4_0.gguf
  bench/serving/engine_bench.py decode --tern build/tools/tern/tern \
      --llama-batched-bench /path/to/llama-batched-bench -t 2 --rounds 2 bench-150m-Q4_0.gguf ...
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHAREGPT = os.path.join(ROOT, "..", "shared", "data", "prompts", "sharegpt_sample_50_with_responses.json")


def run_tern_batch(tern, model, requests, extra):
    with tempfile.TemporaryDirectory() as d:
        inp, out, stats = (os.path.join(d, n) for n in ("in.jsonl", "out.jsonl", "stats.json"))
        with open(inp, "w") as f:
            for r in requests:
                f.write(json.dumps(r) + "\n")
        cmd = [tern, "batch", "-m", model, "-f", inp, "-o", out, "--stats-json", stats] + extra
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"tern batch failed ({p.returncode}): {p.stderr}")
        with open(stats) as f:
            return json.load(f), p.stderr


def kv_part(a):
    convs = json.load(open(a.sharegpt))
    reqs = []
    for i, c in enumerate(convs):
        reqs.append({"id": i, "prompt": c["prompt"], "max_tokens": max(1, int(c["response_tokens"])),
                     "temperature": 0, "ignore_eos": True})
    extra = ["-t", str(a.threads), "-c", str(a.ctx), "--kv-memory", a.kv_memory, "--no-prefix-cache",
             "--max-num-seqs", "256"]
    st, log = run_tern_batch(a.tern, a.model, reqs, extra)
    print(log, file=sys.stderr)
    print(f"\nKV memory use: {len(reqs)} ShareGPT requests (prompt + reference response lengths), "
          f"{os.path.basename(a.model)}, KV budget {a.kv_memory} = {st['kv_blocks_total']} blocks of "
          f"{st['block_size']} tokens, context {st['n_ctx']}\n")
    print("| allocation | KV waste (allocated, unused) | concurrent sequences in the budget |")
    print("|---|---:|---:|")
    print(f"| tern paged (block {st['block_size']}) | {100 * st['kv_waste_paged']:.1f}% | "
          f"{st['running_peak']} peak, {st['running_mean']:.1f} mean |")
    print(f"| contiguous at max length ({st['n_ctx']}) | {100 * st['kv_waste_contiguous']:.1f}% | "
          f"{st['contiguous_capacity']} |")
    cap = st["contiguous_capacity"]
    print(f"\nconcurrency ratio: {st['running_peak'] / cap if cap else float('inf'):.1f}x; "
          f"{st['preemptions']} preemptions; {st['output_tok_s']:.1f} output tok/s")


def llama_decode(bin_, model, threads, npl):
    cmd = [bin_, "-m", model, "-t", str(threads), "-c", str(256 * max(npl) + 256), "-b", "2048", "-ub", "512",
           "-npp", "128", "-ntg", "128", "-npl", ",".join(map(str, npl)), "--output-format", "jsonl"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"llama-batched-bench failed: {p.stderr[-2000:]}")
    out = {}
    for line in p.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            j = json.loads(line)
            out[j["pl"]] = j["speed_tg"]
    return out


def tern_decode(tern, model, threads, b, seed):
    rnd = random.Random(seed)
    reqs = [{"id": i, "prompt": [1] + [rnd.randrange(100, 30000) for _ in range(127)], "max_tokens": 128,
             "temperature": 0, "ignore_eos": True} for i in range(b)]
    st, _ = run_tern_batch(tern, model, reqs, ["-t", str(threads), "--max-num-seqs", str(b), "--kv-memory", "2G",
                                               "--max-batched-tokens", "2048"])
    return st["decode_tok_s"]


def decode_part(a):
    npl = [16, 32]
    rows = []
    for model in a.models:
        t = {b: [] for b in npl}
        l = {b: [] for b in npl}
        for r in range(a.rounds):
            for b in npl:
                t[b].append(tern_decode(a.tern, model, a.threads, b, r))
            got = llama_decode(a.llama_batched_bench, model, a.threads, npl)
            for b in npl:
                l[b].append(got.get(b, 0.0))
            print(f"{model} round {r + 1}: tern {[round(t[b][-1], 1) for b in npl]} "
                  f"llama.cpp {[round(l[b][-1], 1) for b in npl]}", file=sys.stderr)
        for b in npl:
            rows.append((os.path.basename(model), b, statistics.mean(t[b]), statistics.mean(l[b])))
    print(f"\nbatched decode, 128-token prompts, 128 generated per sequence, -t {a.threads}, "
          f"mean of {a.rounds} interleaved rounds\n")
    print("| model | sequences | tern decode tok/s | llama.cpp S_TG tok/s | ratio |")
    print("|---|---:|---:|---:|---:|")
    for m, b, tt, ll in rows:
        print(f"| {m} | {b} | {tt:.1f} | {ll:.1f} | {tt / ll if ll else 0:.2f}x |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="part", required=True)
    k = sub.add_parser("kv")
    k.add_argument("--tern", required=True)
    k.add_argument("-m", "--model", required=True)
    k.add_argument("-t", "--threads", type=int, default=2)
    k.add_argument("-c", "--ctx", type=int, default=2048)
    k.add_argument("--kv-memory", default="64M")
    k.add_argument("--sharegpt", default=SHAREGPT)
    d = sub.add_parser("decode")
    d.add_argument("--tern", required=True)
    d.add_argument("--llama-batched-bench", required=True)
    d.add_argument("-t", "--threads", type=int, default=2)
    d.add_argument("--rounds", type=int, default=2)
    d.add_argument("models", nargs="+")
    a = ap.parse_args()
    kv_part(a) if a.part == "kv" else decode_part(a)


if __name__ == "__main__":
    main()
