#include <gtest/gtest.h>

#include <algorithm>

#include "../model/model_fixture.h"
#include "core/memory_info.h"
#include "engine/generate.h"
#include "engine/perplexity.h"
#include "gguf/writer.h"
#include "../core/file_test_util.h"

namespace tern {
namespace {

// Generation goes through the serving engine (engine/generate.h), as `tern run` does.
std::unique_ptr<Engine> make_engine(const std::string& path = test::stories_gguf(), int32_t n_ctx = 0, int n_threads = 2) {
  auto e = Engine::create(single_sequence_config(path, n_ctx, n_threads));
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  return e.is_ok() ? std::move(e).value() : nullptr;
}

// The model alone, for perplexity.
struct Loaded {
  std::unique_ptr<Model> model;
};

Loaded load() {
  Loaded l;
  auto m = Model::load(test::stories_gguf());
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  l.model = std::move(m).value();
  return l;
}

GenerateOptions greedy(int n) {
  GenerateOptions o;
  o.sampling.temperature = 0.0f;
  o.max_tokens = n;
  return o;
}

TEST(Generate, GoldenTextAndStreamedPiecesAgree) {
  TERN_REQUIRE_STORIES();
  auto e = make_engine();
  ASSERT_TRUE(e);
  std::string streamed;
  auto r = generate(*e, {1}, greedy(200), [&](const std::string& p) {
    streamed += p;
    return true;
  });
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->text, test::golden_text());
  EXPECT_EQ(streamed, r->text);
  EXPECT_EQ(r->finish, FinishReason::Length);
  const auto golden = test::golden_ids();
  EXPECT_EQ(r->tokens, std::vector<TokenId>(golden.begin() + 1, golden.end()));
}

TEST(Generate, StopStringEndsGenerationAndIsNotEmitted) {
  TERN_REQUIRE_STORIES();
  auto e = make_engine();
  ASSERT_TRUE(e);
  auto o = greedy(200);
  o.stop = {"Lily."};
  auto r = generate(*e, {1}, o);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->finish, FinishReason::Stop);
  EXPECT_EQ(r->text, "Once upon a time, there was a little girl named ");
}

TEST(Generate, SeededSamplingIsReproducibleAndGreedyIsDeterministic) {
  TERN_REQUIRE_STORIES();
  auto e = make_engine();
  ASSERT_TRUE(e);
  auto o = greedy(80);
  o.sampling.temperature = 1.0f;
  o.sampling.seed = 1234;
  auto a = generate(*e, {1, 403}, o);
  auto b = generate(*e, {1, 403}, o);
  o.sampling.seed = 1235;
  auto c = generate(*e, {1, 403}, o);
  ASSERT_TRUE(a.is_ok() && b.is_ok() && c.is_ok());
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_NE(a->tokens, c->tokens);
  auto g1 = generate(*e, {1, 403}, greedy(50));
  // The same model on a one-thread backend.
  auto one = make_engine(test::stories_gguf(), 0, 1);
  ASSERT_TRUE(one);
  auto g2 = generate(*one, {1, 403}, greedy(50));
  EXPECT_EQ(g1->tokens, g2->tokens);
}

// stories260K was trained with BOS (id 1) between stories and never emits
// EOS, so the EOS path is tested on a copy whose eos_token_id is 1: the
// model's own end-of-story token then ends generation, as in llama2.c.
TEST(Generate, EosEndsUnlessIgnored) {
  TERN_REQUIRE_STORIES();
  auto src = gguf::GgufFile::open(test::stories_gguf());
  ASSERT_TRUE(src.is_ok());
  gguf::GgufWriter w;
  for (const auto& [key, value] : src->metadata()) w.set(key, value);
  w.set("tokenizer.ggml.eos_token_id", gguf::Value::of_u32(1));
  for (const auto& t : src->tensors())
    ASSERT_TRUE(w.add_tensor(t.name, t.type, std::vector<uint64_t>(t.dims.begin(), t.dims.begin() + t.n_dims),
                             {t.data, t.n_bytes}).is_ok());
  test::ScratchDir dir;
  const std::string path = dir / "stories_eos1.gguf";
  ASSERT_TRUE(w.write(path).is_ok());
  auto e = make_engine(path);
  ASSERT_TRUE(e);
  auto o = greedy(400);
  o.sampling.temperature = 1.0f;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    o.sampling.seed = seed;
    o.ignore_eos = false;
    o.max_tokens = 400;
    auto r = generate(*e, {1}, o);
    ASSERT_TRUE(r.is_ok());
    if (r->finish != FinishReason::Eos) continue;
    EXPECT_EQ(r->tokens.back(), 1);
    EXPECT_EQ(std::count(r->tokens.begin(), r->tokens.end(), 1), 1);
    o.ignore_eos = true;
    o.max_tokens = static_cast<int>(r->tokens.size()) + 5;
    auto ignored = generate(*e, {1}, o);
    ASSERT_TRUE(ignored.is_ok());
    EXPECT_EQ(ignored->tokens.size(), r->tokens.size() + 5);
    EXPECT_EQ(ignored->finish, FinishReason::Length);
    EXPECT_TRUE(std::equal(r->tokens.begin(), r->tokens.end(), ignored->tokens.begin()));
    return;
  }
  FAIL() << "no sampled story ended in 30 seeds";
}

TEST(Generate, ContextLimitAndBadInput) {
  TERN_REQUIRE_STORIES();
  auto e = make_engine(test::stories_gguf(), 20);
  ASSERT_TRUE(e);
  auto o = greedy(100);
  o.ignore_eos = true;
  auto r = generate(*e, {1, 403, 407}, o);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->finish, FinishReason::Context);
  // Prompt + output fill the 20 positions, the rule the serving engine (and
  // the OpenAI context check) always had; `tern run`'s own loop used to sample
  // one token more from the last position.
  EXPECT_EQ(r->tokens.size() + 3, 20u);
  std::vector<TokenId> long_prompt(20, 300);
  auto too_long = generate(*e, long_prompt, o);
  ASSERT_FALSE(too_long.is_ok());
  EXPECT_NE(too_long.status().message().find("more than the context"), std::string::npos);
  EXPECT_FALSE(generate(*e, {}, o).is_ok());
  auto bad = greedy(5);
  bad.sampling.temperature = -1.0f;
  EXPECT_EQ(generate(*e, {1}, bad).status().kind(), ErrorKind::InvalidArgument);
  EXPECT_FALSE(generate(*e, {1, 9999}, greedy(5)).is_ok());
}

TEST(Perplexity, WindowsAndScoringFollowTheLlamaCppRule) {
  TERN_REQUIRE_STORIES();
  auto l = load();
  const std::vector<int> golden = test::golden_ids();
  std::vector<TokenId> tokens(golden.begin(), golden.end());  // 201 tokens
  PerplexityOptions o;
  o.n_ctx = 64;
  o.bos = 1;
  auto r = compute_perplexity(*l.model, tokens, o);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->n_windows, 3);
  EXPECT_EQ(r->n_scored, 3 * (64 - 1 - 32));
  // Greedy text is the model's own most likely continuation: very low perplexity.
  EXPECT_LT(r->perplexity, 3.0);
  EXPECT_GT(r->perplexity, 1.0);
  o.max_windows = 1;
  auto one = compute_perplexity(*l.model, tokens, o);
  EXPECT_EQ(one->n_windows, 1);
  o.n_ctx = 1000;
  EXPECT_FALSE(compute_perplexity(*l.model, tokens, o).is_ok());
}

// run -c 99999999: the KV cache for one sequence would need ~119 GiB;
// refused up front, naming the size, instead of std::bad_alloc (exit 134).
TEST(Generate, ContextPastAvailableMemoryIsAnError) {
  TERN_REQUIRE_STORIES();
  const int64_t available = available_memory_bytes();
  if (available <= 0 || available > (int64_t{119} << 30)) GTEST_SKIP() << "MemAvailable unknown or huge";
  auto r = Engine::create(single_sequence_config(test::stories_gguf(), 99999999));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().kind(), ErrorKind::InvalidArgument);
  EXPECT_NE(r.status().message().find("a KV cache for a context of 99999999 tokens (119.21 GiB) is more than"),
            std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace tern
