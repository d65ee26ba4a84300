#!/usr/bin/python3
"""tern and llama.cpp on the same `tern synth` file, architecture by architecture.

For each architecture and weight type: the file is synthesised once, then
  - greedy: 4 prompts x N tokens through `tern run --temp 0` and
    `llama-completion --temp 0`; the continuations must be byte-identical;
  - logits: `tern perplexity --save-logits` and `llama-perplexity
    --kl-divergence-base` over the same text windows; both files are read here
    and compared row by row: top-1 agreement, mean and max KL(llama || tern).
    Perplexities are printed too (equal to ~1e-3 when both see the same tokens).

llama.cpp is built outside this repository (LLAMA_BIN_DIR holds
llama-completion and llama-perplexity). Needs python3-numpy.

  bench/archs/vs_llamacpp.py --tern build/tools/tern/tern --llama-bin /tmp/llama.cpp/build/bin \
      --vocab stories260K.gguf --text ../shared/data/text/wiki.test.raw [--archs llama,gemma2] [--types F32,Q8_0]

Random weights give near-uniform next-token distributions, so a top-1
disagreement can be a near tie decided by rounding; the script reports the
llama.cpp margin (top-1 minus top-2 log-prob) of every disagreeing row so a tie
can be told from an error.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

PROMPTS = ["Once upon a time", "The little dog", "She said", "In the park there was"]

# Shapes small enough to run in seconds, with every feature of the
# architecture switched on (GQA, head_dim != dim/heads where the family uses it).
SHAPES = {
    "llama": "--dim 256 --layers 4 --heads 8 --kv-heads 4 --ffn 768",
    "llama3": "--dim 256 --layers 4 --heads 8 --kv-heads 2 --ffn 768",
    "qwen3": "--dim 256 --layers 4 --heads 4 --kv-heads 2 --head-dim 128 --ffn 768",
    "phi3": "--dim 256 --layers 4 --heads 8 --kv-heads 8 --ffn 768",
    "gemma2": "--dim 256 --layers 4 --heads 4 --kv-heads 2 --head-dim 128 --ffn 768 --window 32",
    "gemma3": "--dim 256 --layers 6 --heads 4 --kv-heads 2 --head-dim 128 --ffn 768 --window 32",
    "mixtral": "--dim 256 --layers 4 --heads 8 --kv-heads 4 --ffn 512 --experts 8 --experts-used 2",
    "qwen2moe": "--dim 256 --layers 4 --heads 8 --kv-heads 4 --ffn 512 --experts 8 --experts-used 2 "
                "--expert-ffn 128 --shared-ffn 384",
    "qwen3moe": "--dim 256 --layers 4 --heads 4 --kv-heads 2 --head-dim 128 --ffn 512 --experts 16 --experts-used 4 "
                "--expert-ffn 128",
    # d_inner 512, dt_rank 16, d_state 16: every matrix a multiple of 32 wide (quantizable);
    # a larger std so that the mixer, not the embedding, decides the logits.
    "mamba": "--dim 256 --layers 4 --weight-std 0.08",
    # d_inner 512 in 8 heads of 64, 2 groups of B/C, d_state 64.
    "mamba2": "--dim 256 --layers 4 --weight-std 0.08 --head-dim 64 --ssm-groups 2 --ssm-state 64",
    # Nemotron-H: Mamba-2 mixers (2 groups), attention without RoPE (GQA 4:1), relu^2 FFNs.
    "nemotron_h": "--dim 256 --layers 6 --layer-pattern M*M-M* --heads 8 --kv-heads 2 --ffn 768 --weight-std 0.08 "
                  "--ssm-groups 2 --ssm-state 64",
}


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, check=True, **kw)


def tern_greedy(tern, model, prompt, n):
    return run([tern, "run", "-m", model, "-p", prompt, "-n", str(n), "--temp", "0", "-t", "2"]).stdout


def llama_greedy(llama_bin, model, prompt, n):
    out = run([os.path.join(llama_bin, "llama-completion"), "-m", model, "-p", prompt, "-n", str(n),
               "--temp", "0", "-t", "2", "-no-cnv", "--no-warmup"], stdin=subprocess.DEVNULL).stdout
    # llama-completion echoes the prompt (after a leading space its SPM
    # detokenizer may add) and may print an end marker; keep what follows the prompt.
    i = out.find(prompt.encode())
    return out[i + len(prompt.encode()):] if i >= 0 else out


def same_text(tern_out, llama_out):
    """tern prints U+FFFD for bytes that are not UTF-8, llama.cpp the raw
    bytes, and llama.cpp holds back trailing bytes that look like an unfinished
    character: compare as a UTF-8 decoder sees them, allowing tern extra
    trailing U+FFFD only."""
    a = tern_out.decode("utf-8", "replace").strip()
    b = llama_out.decode("utf-8", "replace").strip()
    # llama-completion marks a generated end-of-text token; tern stops there silently.
    b = b.removesuffix("[end of text]").strip()
    return a == b or (a.startswith(b) and set(a[len(b):]) <= {"\ufffd"})


def read_tern_logits(path):
    with open(path, "rb") as f:
        head = f.read(48)
        assert head[:8] == b"TERNLOGP", path
        n_vocab, n_ctx, n_chunks, n_rows = np.frombuffer(head[12:28], dtype="<u4")
        raw = np.frombuffer(f.read(), dtype=np.uint8)
    row = 4 + 2 * int(n_vocab)
    raw = raw.reshape(-1, row)
    top1 = raw[:, :4].copy().view("<i4")[:, 0]
    lp = raw[:, 4:].copy().view("<f2").astype(np.float64)
    lp -= np.log(np.exp(lp).sum(axis=1, keepdims=True))  # renormalise the rounded rows
    return int(n_ctx), top1, lp


def read_llama_logits(path):
    with open(path, "rb") as f:
        assert f.read(8) == b"_logits_", path
        n_ctx, n_vocab, n_chunk = np.frombuffer(f.read(12), dtype="<i4")
        tokens = np.frombuffer(f.read(4 * int(n_ctx) * int(n_chunk)), dtype="<i4").reshape(int(n_chunk), int(n_ctx))
        nv = 2 * ((int(n_vocab) + 1) // 2) + 4
        raw = np.frombuffer(f.read(), dtype="<u2").reshape(-1, nv)
    scale = raw[:, 0:2].copy().view("<f4")[:, 0].astype(np.float64)
    min_lp = raw[:, 2:4].copy().view("<f4")[:, 0].astype(np.float64)
    q = raw[:, 4:4 + int(n_vocab)].astype(np.float64)
    lp = min_lp[:, None] + scale[:, None] * q  # llama.cpp's u16 log-probs
    lp -= np.log(np.exp(lp).sum(axis=1, keepdims=True))
    # The token each row predicts: rows are the second half of each window.
    first = int(n_ctx) // 2
    targets = tokens[:, first + 1:].reshape(-1)
    return lp, targets


def tern_ppl(text):
    m = re.findall(rb'"perplexity": *([0-9.]+)', text)
    return float(m[-1]) if m else float("nan")


def compare_logits(args, model, tmp):
    tl, ll = os.path.join(tmp, "tern.bin"), os.path.join(tmp, "llama.bin")
    for p in (tl, ll):
        if os.path.exists(p):
            os.remove(p)
    t = run([args.tern, "perplexity", "-m", model, "-f", args.text, "-c", str(args.ctx), "--chunks",
             str(args.chunks), "--save-logits", tl, "-t", "2", "--json"])
    l = run([os.path.join(args.llama_bin, "llama-perplexity"), "-m", model, "-f", args.text, "-c", str(args.ctx),
             "--chunks", str(args.chunks), "--kl-divergence-base", ll, "-t", "2", "-b", str(args.ctx)],
            stdin=subprocess.DEVNULL)
    ppl_t = tern_ppl(t.stdout)
    _, top1_t, lp_t = read_tern_logits(tl)
    lp_l, targets = read_llama_logits(ll)
    # llama-perplexity's own PPL line is printed by an asynchronous logger and
    # sometimes lost at exit: compute it from its saved log-probs instead.
    ppl_l = float(np.exp(-lp_l[np.arange(len(targets)), targets].mean())) if len(targets) == len(lp_l) else float("nan")
    if lp_t.shape != lp_l.shape:
        return dict(error=f"row shapes differ: tern {lp_t.shape}, llama.cpp {lp_l.shape}")
    top1_l = lp_l.argmax(axis=1)
    # llama.cpp's rows are quantized to 16 bits over a 16-nat range: count a
    # row as agreeing when tern's top-1 is within that rounding of llama's max.
    step = 16.0 / 65535 * 2
    agree = lp_l[np.arange(len(top1_t)), top1_t] >= lp_l.max(axis=1) - step
    p_l = np.exp(lp_l)
    kl = (p_l * (lp_l - lp_t)).sum(axis=1)
    srt = np.sort(lp_l, axis=1)
    margins = (srt[:, -1] - srt[:, -2])[~agree]
    return dict(rows=len(agree), top1=agree.mean(), exact_top1=(top1_t == top1_l).mean(), kl_mean=kl.mean(),
                kl_max=kl.max(), ppl_tern=ppl_t, ppl_llama=ppl_l,
                margins=" ".join(f"{m:.4f}" for m in margins[:5]))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tern", required=True)
    ap.add_argument("--llama-bin", required=True)
    ap.add_argument("--vocab", required=True, help="GGUF whose vocabulary the synthesised files copy")
    ap.add_argument("--phi3-vocab", help="vocabulary for phi3 (llama.cpp's phi3 loader looks up "
                    "<|end|> and friends), e.g. ../shared/testdata/tokenizers/ggml-vocab-phi-3.gguf")
    ap.add_argument("--text", required=True)
    ap.add_argument("--archs", default=",".join(SHAPES))
    ap.add_argument("--real", help="also a trained model (e.g. stories260K as GGUF): its real, peaked predictions "
                    "make greedy paths comparable at quantized types; re-encoded with tern quantize per type")
    ap.add_argument("--types", default="F32,F16,Q8_0,Q4_K_M")
    ap.add_argument("-n", type=int, default=32)
    ap.add_argument("--ctx", type=int, default=128)
    ap.add_argument("--chunks", type=int, default=8)
    args = ap.parse_args()
    print("| arch | type | greedy: prompts equal | logits rows | top-1 agree | exact argmax equal | KL mean | KL max | "
          "PPL tern | PPL llama.cpp | margins of disagreeing rows |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        jobs = [(a, t) for a in args.archs.split(",") if a for t in args.types.split(",")]
        if args.real:
            jobs += [("real", t) for t in args.types.split(",")]
        for arch, typ in jobs:
            if True:
                model = os.path.join(tmp, f"{arch}-{typ}.gguf")
                if arch == "real":
                    run([args.tern, "quantize", args.real, model, typ, "--pure"])
                else:
                    vocab = args.phi3_vocab if arch == "phi3" and args.phi3_vocab else args.vocab
                    run([args.tern, "synth", "--arch", arch, *SHAPES[arch].split(), "--vocab-from", vocab,
                         "--type", typ, "-o", model, "--seed", "7"])
                equal = 0
                for p in PROMPTS:
                    a = tern_greedy(args.tern, model, p, args.n)
                    b = llama_greedy(args.llama_bin, model, p, args.n)
                    if not same_text(a, b):
                        # llama-completion has been seen to drop its last bytes
                        # of output under load: ask it once more before counting a difference.
                        b = llama_greedy(args.llama_bin, model, p, args.n)
                    if same_text(a, b):
                        equal += 1
                    else:
                        print(f"<!-- {arch} {typ} {p!r}: tern {a!r} llama.cpp {b!r} -->", file=sys.stderr)
                r = compare_logits(args, model, tmp)
                failed |= equal != len(PROMPTS)
                if "error" in r:
                    print(f"| {arch} | {typ} | {equal}/{len(PROMPTS)} | {r['error']} |")
                    failed = True
                else:
                    print(f"| {arch} | {typ} | {equal}/{len(PROMPTS)} | {r['rows']} | {r['top1']:.4f} | "
                          f"{r['exact_top1']:.4f} | {r['kl_mean']:.2e} | {r['kl_max']:.2e} | {r['ppl_tern']:.4f} | "
                          f"{r['ppl_llama']:.4f} | {r['margins']} |", flush=True)
                os.remove(model)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
