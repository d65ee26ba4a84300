#!/usr/bin/env python3
"""Differential check of `tern quantize` against llama.cpp's llama-quantize.

Quantizes the same F32 (or already quantized) GGUF inputs with both tools under
each scheme and compares, tensor by tensor, the chosen type and the encoded
bytes (tern's quantizers follow ggml's reference ones, so they must be equal).
Tensor order and metadata order differ between the tools and are not compared;
general.file_type is. Inputs: any llama-family GGUF, e.g. made with
`tern synth ... --type F32` (vary layers, GQA and odd ffn widths). Run:

    python3 tools/quantize_diff.py build/tools/tern/tern /path/to/llama-quantize IN.gguf... [--schemes Q4_K_M,Q2_K]

llama-quantize refuses legacy types (Q4_0, Q8_0, ...) on rows that are not a
multiple of 32; those cases are reported as skipped (tern falls back to F16).
Exit status 1 when any type or byte differs. No numpy needed.
"""
import os
import struct
import subprocess
import sys
import tempfile

SCHEMES = ("Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 IQ4_NL Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M "
           "Q5_K_S Q5_K_M Q6_K F16 BF16").split()
# ggml type id -> (name, block elements, block bytes)
TYPES = {0: ("F32", 1, 4), 1: ("F16", 1, 2), 30: ("BF16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20),
         6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 10: ("Q2_K", 256, 84),
         11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144), 13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210),
         20: ("IQ4_NL", 32, 18)}
SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "B", 10: "Q", 11: "q", 12: "d"}


def read_gguf(path):
    """Returns (metadata dict, {tensor name: (type id, bytes)})."""
    b = open(path, "rb").read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, b, pos)[0]
        pos += struct.calcsize(fmt)
        return v

    def string():
        nonlocal pos
        n = take("Q")
        pos += n
        return b[pos - n:pos].decode("utf-8", "replace")

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            return [value(et) for _ in range(n)]
        return take(SCALARS[t])

    assert take("I") == 0x46554747, path + ": not a GGUF file"
    take("I")
    n_tensors, n_kv = take("Q"), take("Q")
    kv = {}
    for _ in range(n_kv):
        key = string()
        kv[key] = value(take("I"))
    infos = []
    for _ in range(n_tensors):
        name = string()
        dims = [take("Q") for _ in range(take("I"))]
        infos.append((name, dims, take("I"), take("Q")))
    align = kv.get("general.alignment", 32)
    data = (pos + align - 1) // align * align
    tensors = {}
    for name, dims, ty, off in infos:
        n = 1
        for d in dims:
            n *= d
        _, elems, size = TYPES[ty]
        tensors[name] = (ty, b[data + off:data + off + n // elems * size])
    return kv, tensors


def compare(tern_path, llama_path, label):
    kv_t, t = read_gguf(tern_path)
    kv_l, l = read_gguf(llama_path)
    problems = []
    if set(t) != set(l):
        problems.append("tensor sets differ: %s" % sorted(set(t) ^ set(l)))
    for name in sorted(set(t) & set(l)):
        if t[name][0] != l[name][0]:
            problems.append("%s: type tern %s, llama.cpp %s" % (name, TYPES[t[name][0]][0], TYPES[l[name][0]][0]))
        elif t[name][1] != l[name][1]:
            problems.append("%s: %s bytes differ" % (name, TYPES[t[name][0]][0]))
    if kv_t.get("general.file_type") != kv_l.get("general.file_type"):
        problems.append("general.file_type tern %s, llama.cpp %s" % (kv_t.get("general.file_type"),
                                                                   kv_l.get("general.file_type")))
    print("%-28s %4d tensors  %s" % (label, len(t), "ok" if not problems else "DIFFERENT"))
    for p in problems:
        print("    " + p)
    return not problems


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--schemes")]
    schemes = SCHEMES
    for a in sys.argv[1:]:
        if a.startswith("--schemes"):
            schemes = a.split("=", 1)[1].split(",")
    if len(args) < 3:
        sys.exit(__doc__)
    tern, llama_quantize, inputs = args[0], args[1], args[2:]
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for scheme in schemes:
            for path in inputs:
                label = "%s %s" % (os.path.basename(path), scheme)
                out_t, out_l = os.path.join(tmp, "t.gguf"), os.path.join(tmp, "l.gguf")
                subprocess.run([tern, "quantize", path, out_t, scheme, "-t", "2"], check=True,
                               stderr=subprocess.DEVNULL)
                r = subprocess.run([llama_quantize, "--allow-requantize", path, out_l, scheme, "2"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                if r.returncode != 0:
                    reason = [line for line in r.stderr.splitlines() if "failed to quantize" in line]
                    print("%-28s skipped: llama-quantize: %s" % (label, reason[0] if reason else "failed"))
                    continue
                ok &= compare(out_t, out_l, label)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
