// bench_grammar VOCAB.gguf [steps] — what a grammar costs per generated token
// on a real vocabulary: schema compilation time, then the token mask along
// random walks through a 50-property JSON Schema and JSON-object mode
// (mean / p50 / p99 ms per mask, and tokens allowed per step).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "grammar/constraint.h"
#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"

using namespace tern;

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string schema_50() {
  std::string s = R"({"type":"object","properties":{)";
  const char* types[] = {R"({"type":"string","maxLength":24})", R"({"type":"integer","minimum":0,"maximum":100000})",
                         R"({"type":"boolean"})", R"({"enum":["red","green","blue"]})",
                         R"({"type":"array","items":{"type":"number"},"maxItems":4})"};
  std::string req;
  for (int i = 0; i < 50; ++i) {
    s += (i ? "," : "") + std::string("\"field_") + std::to_string(i) + "\":" + types[i % 5];
    if (i % 2 == 0) req += (req.empty() ? "\"" : ",\"") + std::string("field_") + std::to_string(i) + "\"";
  }
  return s + "},\"required\":[" + req + "]}";
}

void walk(const char* name, const OutputConstraint& c, const grammar::TokenVocab& vocab, int steps) {
  const auto t0 = std::chrono::steady_clock::now();
  auto g = grammar::compile_constraint(c);
  const double compile_ms = ms_since(t0);
  if (!g.is_ok()) {
    std::fprintf(stderr, "%s: %s\n", name, g.status().message().c_str());
    return;
  }
  grammar::Matcher m(*g);
  std::mt19937 rng(1);
  std::vector<double> times;
  std::vector<uint8_t> allowed;
  double allowed_sum = 0;
  for (int i = 0; i < steps; ++i) {
    const auto t = std::chrono::steady_clock::now();
    m.mask(vocab.trie, allowed);
    times.push_back(ms_since(t));
    std::vector<int32_t> ok;
    for (size_t id = 0; id < allowed.size(); ++id)
      if (allowed[id]) ok.push_back(static_cast<int32_t>(id));
    allowed_sum += static_cast<double>(ok.size());
    if (ok.empty()) break;
    // Favour longer tokens, as a model would write them.
    std::sort(ok.begin(), ok.end(), [&](int32_t a, int32_t b) { return vocab.pieces[a].size() > vocab.pieces[b].size(); });
    const size_t pick = rng() % std::max<size_t>(1, std::min<size_t>(ok.size(), 8));
    m.accept(vocab.pieces[static_cast<size_t>(ok[pick])]);
  }
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0;
  for (double t : times) sum += t;
  std::printf("| %s | %.2f | %zu | %.3f | %.3f | %.3f | %.0f |\n", name, compile_ms, times.size(), sum / times.size(),
              sorted[sorted.size() / 2], sorted[sorted.size() * 99 / 100], allowed_sum / times.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_grammar VOCAB.gguf [steps]\n");
    return 2;
  }
  const int steps = argc > 2 ? std::atoi(argv[2]) : 200;
  auto file = gguf::GgufFile::open(argv[1]);
  if (!file.is_ok()) return std::fprintf(stderr, "%s\n", file.status().message().c_str()), 1;
  auto tok = Tokenizer::from_gguf(*file);
  if (!tok.is_ok()) return std::fprintf(stderr, "%s\n", tok.status().message().c_str()), 1;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> pieces(static_cast<size_t>((*tok)->n_vocab()));
  for (size_t t = 0; t < pieces.size(); ++t) pieces[t] = (*tok)->token_to_piece(static_cast<TokenId>(t));
  const grammar::TokenVocab vocab(std::move(pieces));
  std::printf("vocabulary %zu tokens (longest %zu bytes), trie built in %.1f ms\n\n", vocab.pieces.size(),
              vocab.trie.max_len(), ms_since(t0));
  std::printf("| grammar | compile ms | steps | mask ms mean | p50 | p99 | tokens allowed (mean) |\n|---|---|---|---|---|---|---|\n");
  walk("JSON Schema, 50 properties", {ConstraintKind::JsonSchema, schema_50()}, vocab, steps);
  walk("JSON object", {ConstraintKind::JsonObject, ""}, vocab, steps);
  walk("regex [a-z ]+\\.", {ConstraintKind::Regex, "[a-z ]+\\."}, vocab, steps);
  // Counted repetitions: a long bounded string and a long bounded array.
  walk("JSON Schema, string minLength 400",
       {ConstraintKind::JsonSchema, R"({"type":"object","properties":{"story":{"type":"string","minLength":400}},"required":["story"]})"},
       vocab, steps);
  walk("JSON Schema, 50-200 integers",
       {ConstraintKind::JsonSchema, R"({"type":"array","items":{"type":"integer"},"minItems":50,"maxItems":200})"}, vocab,
       steps);
  return 0;
}
