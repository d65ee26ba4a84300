# Sourced by bench/prune/*.sh in their work directory, with $tern and $shared
# set: stories260K as stories.gguf, TinyStories' text cut at the paragraph
# break nearest its middle (calib.txt, eval.txt), its calibration (calib.gguf,
# 256-token windows) and the unpruned model's logits on eval.txt (base.logits).
"$tern" convert --from llama2c --model "$shared/models/stories260K/stories260K.bin" \
  --vocab "$shared/models/stories260K/tok512.bin" -o stories.gguf 2>/dev/null
python3 - "$shared/data/text/tinystories_val.txt" <<'PY'
import sys
s = open(sys.argv[1], encoding="utf-8").read()
cut = s.find("\n\n", len(s) // 2) + 2
open("calib.txt", "w", encoding="utf-8").write(s[:cut])
open("eval.txt", "w", encoding="utf-8").write(s[cut:])
PY
"$tern" calibrate -m stories.gguf -f calib.txt -o calib.gguf -c 256 -t 2 2>/dev/null
"$tern" perplexity -m stories.gguf -f eval.txt -c 256 -t 2 --save-logits base.logits 2>/dev/null > /dev/null
# "PPL | RATIO | KL | TOP1" of a model on eval.txt against base.logits.
quality() {
  local out ppl kl top1
  out=$("$tern" perplexity -m "$1" -f eval.txt -c 256 -t 2 --kl-divergence base.logits 2>&1)
  ppl=$(echo "$out" | sed -n 's/^perplexity: model \([0-9.]*\), base .*, ratio \([0-9.]*\)$/\1 | \2/p')
  kl=$(echo "$out" | sed -n 's/^  mean *\([0-9.]*\) .*/\1/p')
  top1=$(echo "$out" | sed -n 's/^top-1 agreement: \(.*\)$/\1/p')
  echo "$ppl | $kl | $top1"
}
