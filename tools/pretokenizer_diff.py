#!/usr/bin/env python3
"""Differential check of the tokenizer's hand-written pre-tokenizer rules.

Applies each family's original tokenizer.json regexes one after another (Hugging Face
Split, behaviour Isolated) with the `regex` module (Debian: python3-regex), runs the
C++ rules through the pretokenizer_split driver on the same random Unicode-rich
texts, and reports every difference. Run after adding or changing a rule:

    ninja -C build pretokenizer_split
    python3 tools/pretokenizer_diff.py build/tests/tokenizer/pretokenizer_split [seed]

Exit status 1 when any split differs. Unicode versions of ICU and `regex` may differ
for recently assigned characters; the character pool avoids those.
"""
import random
import subprocess
import sys

import regex

GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
def cl100k(n, tail=r"[\r\n]*", punct=r"[^\s\p{L}\p{N}]"):
    return r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}" + n + r"| ?" + punct + "+" + tail + r"|\s*[\r\n]+|\s+(?!\S)|\s+"
U = r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"; W = r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"
def cased(n, c):
    return (r"[^\r\n\p{L}\p{N}]?" + U + "*" + W + "+" + c + r"|[^\r\n\p{L}\p{N}]?" + U + "+" + W + "*" + c +
            r"|\p{N}" + n + r"| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
CONTR = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
# The letter class of deepseek-llm's second regex, as code point ranges (the
# original lists the characters; written as ranges to survive Unicode normalisation).
LATIN = "".join(chr(a) + "-" + chr(b) for a, b in [
 (0x41,0x5A),(0x61,0x7A),(0xB5,0xB5),(0xC0,0xD6),(0xD8,0xF6),(0xF8,0x1BA),(0x1BC,0x1BF),(0x1C4,0x293),(0x295,0x2AF),(0x370,0x373),(0x376,0x377),(0x37B,0x37D),(0x37F,0x37F),(0x386,0x386),(0x388,0x38A),(0x38C,0x38C),(0x38E,0x3A1),(0x3A3,0x3F5),(0x3F7,0x481),(0x48A,0x52F),(0x531,0x556),(0x10A0,0x10C5),(0x13A0,0x13F5),(0x13F8,0x13FD),(0x1C90,0x1CBA),(0x1CBD,0x1CBF),(0x1D00,0x1D2B),(0x1D6B,0x1D77),(0x1D79,0x1D9A),(0x1E00,0x1F15),(0x1F18,0x1F1D),(0x1F20,0x1F45),(0x1F48,0x1F4D),(0x1F50,0x1F57),(0x1F59,0x1F59),(0x1F5B,0x1F5B),(0x1F5D,0x1F5D),(0x1F5F,0x1F7D),(0x1F80,0x1FB4),(0x1FB6,0x1FBC),(0x1FBE,0x1FBE),(0x1FC2,0x1FC4),(0x1FC6,0x1FCC),(0x1FD0,0x1FD3),(0x1FD6,0x1FDB),(0x1FE0,0x1FEC),(0x1FF2,0x1FF4),(0x1FF6,0x1FFC),(0x2102,0x2102),(0x2107,0x2107),(0x210A,0x2113),(0x2115,0x2115),(0x2119,0x211D),(0x2124,0x2124),(0x2126,0x2126),(0x2128,0x2128),(0x212A,0x212D),(0x212F,0x2134),(0x2139,0x2139),(0x213C,0x213F),(0x2145,0x2149),(0x214E,0x214E),(0x2183,0x2184),(0x2C00,0x2C7B),(0x2C7E,0x2CE4),(0x2CEB,0x2CEE),(0x2CF2,0x2CF3),(0xA640,0xA66D),(0xA680,0xA69B),(0xA722,0xA76F),(0xA771,0xA787),(0xA78B,0xA78E),(0xAB70,0xABBF),(0xFB00,0xFB06),(0xFB13,0xFB17),(0xFF21,0xFF3A),(0xFF41,0xFF5A),(0x10400,0x1044F),(0x104B0,0x104D3),(0x104D8,0x104FB),(0x10C80,0x10CB2),(0x10CC0,0x10CF2),(0x118A0,0x118DF),(0x1E900,0x1E943)])
CJK = r"[一-龥ࠀ-一가-퟿]+"
FAMILIES = {
 "gpt-2": [GPT2],
 "default": [r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"],
 "starcoder": [r"\p{N}", GPT2],
 "falcon": [r"[\p{P}\$\+<=>\^~\|`]+", GPT2, r"[0-9][0-9][0-9]"],
 "llama-bpe": [cl100k("{1,3}")],
 "qwen2": [cl100k("")],
 "seed-coder": [cl100k("{1}", tail="", punct=r"[^\s\p{L}\p{N}\r\n]")],
 "tekken": [cased("", "")],
 "gpt-4o": [cased("{1,3}", CONTR)],
 "deepseek-llm": [r"[\r\n]", r"\s?[" + LATIN + "]+", r"\s?[!-/:-~！-／：-～‘-‟　-。]+", r"\s+$", CJK, r"\p{N}+"],
 "deepseek-coder": [r"[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", CJK, r"\p{N}"],
 "deepseek-v3": [r"\p{N}{1,3}", r"[一-龥぀-ゟ゠-ヿ]+",
   r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
 "bloom": [r" ?[^(\s|.,!?…。，、।۔،)]+"],
 "viking": [r" ?[^(\s|.,!?…。，、।۔،)]+", r"\p{N}"],
}
def split(text, rxs):
    frags = [text]
    for rx in rxs:
        out = []
        for f in frags:
            last = 0
            for m in rx.finditer(f):
                if m.start() == m.end(): continue
                if m.start() > last: out.append(f[last:m.start()])
                out.append(m.group()); last = m.end()
            if last < len(f): out.append(f[last:])
        frags = out
    return frags
POOL = (list("aZqéÉßøÿÄxyzABCdef") + list("  \t\n\r\n\v\f") + ["\u00a0", "\u2003", "\u3000", "\u0085", "\u2028", "\u202f"] +
        list("0123456789") + ["٣", "１", "Ⅻ", "²", "½"] + list("'''sStTmMdDlLrReEvV") + list("!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~…。，、।۔،") +
        ["«", "»", "¿", "€", "©", "∑", "→", "ǅ", "ʰ", "ª", "ƻ", "\u0301", "\u0308", "\u20dd", "\u0903", "世", "界", "ぁ", "ア", "한", "ж", "Ж", "Ω", "Ω", "K", "ῼ", "ά", "𝐀", "😀", "🦙", "\u200d", "ǈ", "ﬀ", "ℂ", "ա", "Ա", "Ⴀ", "ڤ", "א", "ก", "ั"])
def rand_text(rng):
    n = rng.randint(0, 30)
    return "".join(rng.choice(POOL) for _ in range(n))
if len(sys.argv) < 2:
    sys.exit(__doc__)
DRIVER = sys.argv[1]
rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
texts = [rand_text(rng) for _ in range(4000)] + ["don't DON'T I'Ve", "HelloWorld ABC def", "  \n\n  x", "a  \t b\n"]
bad_total = 0
for name, rxs in FAMILIES.items():
    crx = [regex.compile(r) for r in rxs]
    data = b"".join(t.encode() + b"\0" for t in texts)
    out = subprocess.run([DRIVER, name], input=data, capture_output=True, check=True).stdout
    got = out.split(b"\0")[:-1]
    bad = 0
    for t, g in zip(texts, got):
        exp = split(t, crx)
        mine = [w.decode() for w in g.split(b"\x01")] if g else []
        if exp != mine:
            bad += 1
            if bad <= 3: print(name, repr(t), "\n   expected", exp, "\n   got     ", mine)
    print(f"{name}: {bad} / {len(texts)} differ"); bad_total += bad
sys.exit(1 if bad_total else 0)
