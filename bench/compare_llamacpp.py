#!/usr/bin/env python3
"""Side-by-side throughput of tern and llama.cpp on the same GGUF files.

Runs `tern bench` and `llama-bench` interleaved (tern, llama, tern, llama ...)
so that machine noise hits both engines alike, and prints a markdown table of
the mean tok/s of each engine and their ratio. llama-bench is not built here:
pass the path of a binary you built yourself (outside this repository).

  bench/compare_llamacpp.py --tern build/tools/tern/tern --llama-bench /path/to/llama-bench \
      -t 2 -p 512 -n 128 --rounds 3 model1.gguf model2.gguf ...
"""
import argparse
import json
import statistics
import subprocess
import sys


def run_tern(tern, model, threads, n_prompt, n_gen):
    out = subprocess.run([tern, "bench", "-m", model, "-t", str(threads), "-p", str(n_prompt), "-n", str(n_gen),
                          "-r", "1", "--json"], check=True, capture_output=True, text=True).stdout
    j = json.loads(out)
    return j["pp"]["tok_s"], j["tg"]["tok_s"], j


def run_llama(llama_bench, model, threads, n_prompt, n_gen):
    out = subprocess.run([llama_bench, "-m", model, "-t", str(threads), "-p", str(n_prompt), "-n", str(n_gen),
                          "-r", "1", "-o", "json"], check=True, capture_output=True, text=True).stdout
    pp = tg = 0.0
    for rec in json.loads(out):
        if rec.get("n_prompt", 0) > 0 and rec.get("n_gen", 0) == 0:
            pp = rec["avg_ts"]
        elif rec.get("n_gen", 0) > 0 and rec.get("n_prompt", 0) == 0:
            tg = rec["avg_ts"]
    return pp, tg


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tern", required=True)
    ap.add_argument("--llama-bench", required=True)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-p", "--n-prompt", type=int, default=512)
    ap.add_argument("-n", "--n-gen", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()

    rows = []
    for model in a.models:
        t_pp, t_tg, l_pp, l_tg = [], [], [], []
        info = {}
        for r in range(a.rounds):
            pp, tg, info = run_tern(a.tern, model, a.threads, a.n_prompt, a.n_gen)
            t_pp.append(pp)
            t_tg.append(tg)
            pp, tg = run_llama(a.llama_bench, model, a.threads, a.n_prompt, a.n_gen)
            l_pp.append(pp)
            l_tg.append(tg)
            print(f"{model} round {r + 1}: tern pp {t_pp[-1]:.1f} tg {t_tg[-1]:.2f} | llama.cpp pp {l_pp[-1]:.1f} "
                  f"tg {l_tg[-1]:.2f}", file=sys.stderr)
        m = statistics.mean
        roof = info.get("roofline_tg_tok_s", 0.0)
        rows.append((model, info.get("weight_type", "?"), m(t_pp), m(l_pp), m(t_tg), m(l_tg), roof))

    print(f"\nthreads {a.threads}, pp{a.n_prompt} / tg{a.n_gen}, mean of {a.rounds} interleaved rounds\n")
    print("| model | type | tern pp | llama.cpp pp | ratio | tern tg | llama.cpp tg | ratio | tg roofline | tern % of roofline |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for model, wt, tpp, lpp, ttg, ltg, roof in rows:
        print(f"| {model.split('/')[-1]} | {wt} | {tpp:.1f} | {lpp:.1f} | {tpp / lpp:.2f}x | {ttg:.2f} | {ltg:.2f} | "
              f"{ttg / ltg:.2f}x | {roof:.1f} | {100 * ttg / roof if roof else 0:.0f}% |")


if __name__ == "__main__":
    main()
