#!/usr/bin/env python3
"""Side-by-side throughput of tern and llama.cpp on the same GGUF files.

Runs `tern bench` and `llama-bench` interleaved (tern, llama, tern, llama ...)
so that machine noise hits both engines alike, and prints a markdown table of
the mean tok/s of each engine and their ratio. llama-bench is not built here:
pass the path of a binary you built yourself (outside this repository).

  bench/compare_llamacpp.py --tern build/tools/tern/tern --llama-bench /path/to/llama-bench \
      -t 2 -p 512 -n 128 --rounds 3 model1.gguf model2.gguf ...

With -d 0,512,4096 both engines measure pp and tg again after that many cached
positions (llama-bench -d, tern bench -d; both with an f16 KV cache), one row
per model and depth; the tg roofline then counts the KV bytes a token reads
as well as the weights.
"""
import argparse
import json
import statistics
import subprocess
import sys


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def run_tern(tern, model, threads, n_prompt, n_gen, depths):
    """{depth: (pp, tg, roofline)} and the whole JSON."""
    cmd = [tern, "bench", "-m", model, "-t", str(threads), "-p", str(n_prompt), "-n", str(n_gen), "-r", "1", "--json"]
    if depths:
        cmd += ["-d", ",".join(map(str, depths))]
    j = json.loads(run(cmd))
    if not depths:
        return {0: (j["pp"]["tok_s"], j["tg"]["tok_s"], j.get("roofline_tg_tok_s", 0.0))}, j
    return {d["depth"]: (d["pp"]["tok_s"], d["tg"]["tok_s"], d["roofline_tg_tok_s"]) for d in j["depths"]}, j


def run_llama(llama_bench, model, threads, n_prompt, n_gen, depths):
    """{depth: (pp, tg)}; records without n_depth (older llama-bench) are depth 0."""
    cmd = [llama_bench, "-m", model, "-t", str(threads), "-p", str(n_prompt), "-n", str(n_gen), "-r", "1", "-o", "json"]
    if depths:
        cmd += ["-d", ",".join(map(str, depths))]
    out = {}
    for rec in json.loads(run(cmd)):
        d = rec.get("n_depth", 0)
        pp, tg = out.get(d, (0.0, 0.0))
        if rec.get("n_prompt", 0) > 0 and rec.get("n_gen", 0) == 0:
            pp = rec["avg_ts"]
        elif rec.get("n_gen", 0) > 0 and rec.get("n_prompt", 0) == 0:
            tg = rec["avg_ts"]
        out[d] = (pp, tg)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tern", required=True)
    ap.add_argument("--llama-bench", required=True)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-p", "--n-prompt", type=int, default=512)
    ap.add_argument("-n", "--n-gen", type=int, default=128)
    ap.add_argument("-d", "--depths", default="", help="comma-separated cached positions, e.g. 0,512,4096")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    depths = [int(x) for x in a.depths.split(",") if x != ""]

    rows = []
    for model in a.models:
        t_res, l_res = [], []
        info = {}
        for r in range(a.rounds):
            t, info = run_tern(a.tern, model, a.threads, a.n_prompt, a.n_gen, depths)
            t_res.append(t)
            l_res.append(run_llama(a.llama_bench, model, a.threads, a.n_prompt, a.n_gen, depths))
            for d in sorted(t):
                lpp, ltg = l_res[-1].get(d, (0.0, 0.0))
                print(f"{model} d{d} round {r + 1}: tern pp {t[d][0]:.1f} tg {t[d][1]:.2f} | llama.cpp pp {lpp:.1f} "
                      f"tg {ltg:.2f}", file=sys.stderr)
        m = statistics.mean
        for d in sorted(t_res[0]):
            rows.append((model, d, info.get("weight_type", "?"), m(x[d][0] for x in t_res),
                         m(x.get(d, (0.0, 0.0))[0] for x in l_res), m(x[d][1] for x in t_res),
                         m(x.get(d, (0.0, 0.0))[1] for x in l_res), t_res[0][d][2]))

    def ratio(x, y):
        return f"{x / y:.2f}x" if y else "-"

    print(f"\nthreads {a.threads}, pp{a.n_prompt} / tg{a.n_gen}, mean of {a.rounds} interleaved rounds\n")
    print("| model | depth | type | tern pp | llama.cpp pp | ratio | tern tg | llama.cpp tg | ratio | tg roofline | "
          "tern % of roofline |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for model, d, wt, tpp, lpp, ttg, ltg, roof in rows:
        print(f"| {model.split('/')[-1]} | {d} | {wt} | {tpp:.1f} | {lpp:.1f} | {ratio(tpp, lpp)} | {ttg:.2f} | "
              f"{ltg:.2f} | {ratio(ttg, ltg)} | {roof:.1f} | {100 * ttg / roof if roof else 0:.0f}% |")


if __name__ == "__main__":
    main()
