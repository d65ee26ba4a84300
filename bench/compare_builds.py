#!/usr/bin/env python3
"""Two tern binaries side by side (before/after a change) on the same files.

Runs `tern bench` of binary A and binary B interleaved (A, B, A, B ...) so
that machine noise hits both alike, and prints a markdown table of the mean
pp, tg and batched-decode tok/s of each and the ratio B/A.

  bench/compare_builds.py --a /tmp/base/tern --b build/tools/tern/tern -t 2 -p 512 -n 128 -b 16 \
      --rounds 3 model1.gguf model2.gguf ...
"""
import argparse
import json
import statistics
import subprocess


def run(tern, model, a):
    cmd = [tern, "bench", "-m", model, "-t", str(a.threads), "-p", str(a.n_prompt), "-n", str(a.n_gen), "-r", "1",
           "--json"]
    if a.batch > 0:
        cmd += ["-b", str(a.batch)]
    j = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    batched = j["batched"][0]["tok_s"] if j.get("batched") else 0.0
    return j["pp"]["tok_s"], j["tg"]["tok_s"], batched


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True, help="the binary before the change")
    ap.add_argument("--b", required=True, help="the binary after the change")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-p", "--n-prompt", type=int, default=512)
    ap.add_argument("-n", "--n-gen", type=int, default=128)
    ap.add_argument("-b", "--batch", type=int, default=16, help="batched decode size (0 skips)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    rows = []
    for model in a.models:
        got = {"a": [], "b": []}
        for r in range(a.rounds):
            for side in ("a", "b"):
                got[side].append(run(getattr(a, side), model, a))
            print(f"{model} round {r + 1}: A pp/tg/B{a.batch} {got['a'][-1]} | B {got['b'][-1]}", flush=True)
        means = {s: [statistics.mean(x[i] for x in got[s]) for i in range(3)] for s in got}
        rows.append((model, means["a"], means["b"]))
    print()
    print(f"| model | A pp{a.n_prompt} | B pp{a.n_prompt} | B/A | A tg{a.n_gen} | B tg{a.n_gen} | B/A | "
          f"A B={a.batch} | B B={a.batch} | B/A |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for model, ma, mb in rows:
        cells = []
        for i in range(3):
            ratio = mb[i] / ma[i] if ma[i] > 0 else 0.0
            cells += [f"{ma[i]:.1f}", f"{mb[i]:.1f}", f"{ratio:.3f}"]
        print(f"| {model.split('/')[-1]} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
