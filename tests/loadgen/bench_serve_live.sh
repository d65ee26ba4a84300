#!/usr/bin/env bash
# tests/loadgen/bench_serve_live.sh TERN_BIN SHARED_DIR
# `tern bench serve` and `tern bench sweep` against a live `tern serve` with
# stories260K: the JSON keys scripts rely on, token counts equal to the
# server's usage (per request in the CSV, in total against the server's own
# Prometheus counters), exact output lengths under --ignore-eos, and the sweep
# outputs (markdown, JSON, SVG with its series). Exit 77 = skipped.
set -euo pipefail

tern=${1:?usage: bench_serve_live.sh TERN_BIN SHARED_DIR}
shared=${2:?usage: bench_serve_live.sh TERN_BIN SHARED_DIR}
model_bin=$shared/models/stories260K/stories260K.bin
vocab_bin=$shared/models/stories260K/tok512.bin

skip() { echo "SKIP: $*"; exit 77; }
"$tern" serve --help >/dev/null 2>&1 || skip "this tern has no serve subcommand"
[[ -f $model_bin && -f $vocab_bin ]] || skip "no stories260K under $shared/models"
command -v node >/dev/null || skip "node is needed for the JSON checks"

tmp=$(mktemp -d)
server_pid=
cleanup() {
  if [[ -n $server_pid ]]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  [[ -f $tmp/serve.log ]] && { echo "--- serve log" >&2; tail -20 "$tmp/serve.log" >&2; }
  exit 1
}

"$tern" convert --from llama2c --model "$model_bin" --vocab "$vocab_bin" -o "$tmp/stories.gguf" >/dev/null
"$tern" serve -m "$tmp/stories.gguf" --port 0 2>"$tmp/serve.log" &
server_pid=$!

url=
for _ in $(seq 1 300); do
  url=$(sed -n 's|^tern serve: listening on \(http://[^ ]*\)$|\1|p' "$tmp/serve.log" | head -1)
  [[ -n $url ]] && break
  kill -0 "$server_pid" 2>/dev/null || fail "tern serve exited early"
  sleep 0.1
done
[[ -n $url ]] || fail "tern serve never printed its address"

# Wait for /health 200 (503 while the model loads).
node -e '
  const url = process.argv[1];
  (async () => {
    for (let i = 0; i < 300; i++) {
      try { if ((await fetch(url + "/health")).status === 200) return; } catch (e) {}
      await new Promise(r => setTimeout(r, 100));
    }
    console.error("no /health 200 from " + url); process.exit(1);
  })();' "$url" || fail "server not ready"

# The run under test: 6 requests, 3 at a time, exact lengths, exact prompt tokens.
"$tern" bench serve --url "$url" --dataset random:16,8 --num-requests 6 --max-concurrency 3 --ignore-eos \
  --seed 1 --tokenizer "$tmp/stories.gguf" --slo-ttft 60000 --slo-tpot 60000 --price-per-hour 1.5 \
  --timeout 60 --max-duration 120 --json "$tmp/serve.json" --csv "$tmp/serve.csv" --plot "$tmp/serve.svg" \
  >"$tmp/serve.txt" || fail "bench serve failed: $(cat "$tmp/serve.txt")"

node -e '
  const fs = require("fs");
  const [jsonPath, csvPath, url] = process.argv.slice(1);
  const j = JSON.parse(fs.readFileSync(jsonPath, "utf8"));
  const die = (m) => { console.error("FAIL: " + m); process.exit(1); };
  const num = (v, k) => { if (typeof v !== "number" || !isFinite(v)) die(k + " is not a number: " + v); return v; };
  for (const k of ["completed", "failed", "duration_s", "request_throughput", "input_throughput",
                   "output_throughput", "goodput", "output_throughput_per_core", "cost_per_million_output_tokens"])
    num(j[k], k);
  for (const lat of ["ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"])
    for (const s of ["mean", "median", "p90", "p95", "p99"]) if (num(j[lat][s], lat + "." + s) < 0) die(lat + " < 0");
  if (j.completed !== 6 || j.failed !== 0) die("completed/failed " + j.completed + "/" + j.failed);
  if (j.usage_missing !== 0) die("the server did not report usage on every stream");
  if (j.total_output_tokens !== 6 * 8) die("ignore_eos: output tokens " + j.total_output_tokens + " != 48");
  if (j.goodput !== j.request_throughput) die("loose SLOs: goodput should equal request throughput");
  if (j.ttft_ms.p99 > j.e2e_ms.p99 + 1e-9) die("TTFT p99 above e2e p99");
  if (j.config.token_lengths !== "tokenizer") die("token_lengths " + j.config.token_lengths);
  // Per request: the usage the server streamed, and what the dataset asked for.
  const rows = fs.readFileSync(csvPath, "utf8").trim().split("\n");
  const head = rows.shift().split(",");
  const col = (name) => head.indexOf(name);
  let prompt = 0, out = 0;
  for (const r of rows.map((l) => l.split(","))) {
    if (r[col("ok")] !== "1" || r[col("usage_reported")] !== "1") die("row " + r);
    if (r[col("completion_tokens")] !== "8" || r[col("max_tokens")] !== "8") die("completion tokens " + r);
    prompt += +r[col("prompt_tokens")];
    out += +r[col("completion_tokens")];
  }
  if (rows.length !== 6 || out !== j.total_output_tokens || prompt !== j.total_input_tokens) die("csv totals");
  // The server counted the same tokens (no other client has used it).
  (async () => {
    const text = await (await fetch(url + "/metrics")).text();
    const counter = (name) => {
      const m = text.match(new RegExp("^" + name + "(\\{[^}]*\\})?\\s+([0-9.eE+]+)\\s*$", "m"));
      if (!m) die("no " + name + " in /metrics");
      return Number(m[2]);
    };
    const gen = counter("tern_generation_tokens_total"), pr = counter("tern_prompt_tokens_total");
    if (gen !== j.total_output_tokens) die("server generated " + gen + ", bench counted " + j.total_output_tokens);
    if (pr !== j.total_input_tokens) die("server prompt tokens " + pr + ", bench counted " + j.total_input_tokens);
  })();' "$tmp/serve.json" "$tmp/serve.csv" "$url" || fail "bench serve output"
grep -q 'data-name="TTFT"' "$tmp/serve.svg" || fail "serve --plot SVG lacks the TTFT series"

# A sweep over two rates: markdown, JSON and the latency-throughput SVG.
"$tern" bench sweep --url "$url" --dataset random:8,4 --num-requests 4 --request-rates 4,inf --ignore-eos \
  --timeout 60 --max-duration 120 -o "$tmp/sweep" >"$tmp/sweep.txt" 2>"$tmp/sweep.err" ||
  fail "bench sweep failed: $(cat "$tmp/sweep.err")"
[[ -s $tmp/sweep.md ]] || fail "no sweep.md"
grep -q '^| request_rate | req/s' "$tmp/sweep.md" || fail "sweep.md has no table header"
node -e '
  const fs = require("fs");
  const die = (m) => { console.error("FAIL: " + m); process.exit(1); };
  const j = JSON.parse(fs.readFileSync(process.argv[1] + ".json", "utf8"));
  if (j.points.length !== 2 || j.points[1].request_rate !== "inf") die("sweep points");
  for (const p of j.points) if (p.completed !== 4 || p.total_output_tokens !== 16) die("sweep point " + p.label);
  const svg = fs.readFileSync(process.argv[1] + ".svg", "utf8");
  if (!svg.startsWith("<?xml") && !svg.startsWith("<svg")) die("not an SVG document");
  for (const s of ["TTFT p50", "TTFT p99", "TPOT p50", "ITL p50", "e2e p50"])
    if (!svg.includes("data-name=\"" + s + "\"")) die("sweep SVG lacks series " + s);
  if ((svg.match(/<svg\b/g) || []).length !== 1 || !svg.trimEnd().endsWith("</svg>")) die("SVG not one document");
' "$tmp/sweep" || fail "sweep outputs"

# A non-http URL is refused before anything is sent.
if "$tern" bench serve --url https://example.com --dataset random:4,4 --num-requests 1 2>"$tmp/https.err"; then
  fail "an https URL was accepted"
fi
grep -q "only plain http://" "$tmp/https.err" || fail "unclear https refusal: $(cat "$tmp/https.err")"
echo "bench_serve_live: OK"
