// synth_embed_model (`tern synth --embed`): a wide model built around
// stories260K predicts exactly what stories260K does — its logits equal the
// small model's at F32 (head-size ratios 4 and 2, extra layers, heads, kv
// heads and FFN rows), its greedy output is the golden 200 tokens at F16 —
// and shapes that cannot hold the small model are refused by name.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "../model/model_fixture.h"
#include "engine/generate.h"
#include "one_by_one.h"
#include "model/model.h"
#include "model/synth_embed.h"
#include "scratch_model.h"

namespace tern {
namespace {

// A model file under the build tree, "embed_" + name.
struct Scratch : test::ScratchModel {
  explicit Scratch(const std::string& name) : test::ScratchModel("embed_" + name) {}
};

EmbedOptions shape(const std::string& out, int dim, int layers, int heads, int kv_heads, int ffn, const char* type) {
  EmbedOptions o;
  o.small_path = test::stories_gguf();
  o.out_path = out;
  o.n_embd = dim;
  o.n_layer = layers;
  o.n_head = heads;
  o.n_head_kv = kv_heads;
  o.n_ff = ffn;
  o.scheme = *find_quant_scheme(type);
  return o;
}

TEST(SynthEmbed, LogitsEqualTheSmallModelsAtF32) {
  TERN_REQUIRE_STORIES();
  auto small = Model::load(test::stories_gguf());
  ASSERT_TRUE(small.is_ok());
  const std::vector<int> golden = test::golden_ids();
  const std::vector<TokenId> tokens(golden.begin(), golden.begin() + 48);
  const auto want = test::logits_one_by_one(**small, tokens);
  // Head size 32 (ratio 4: Q scaled by 2) and 16 (ratio 2: by sqrt 2); more
  // kv heads and heads per group than the small model's 4 and 2.
  for (auto [dim, heads, kv] : {std::tuple{256, 8, 4}, std::tuple{384, 24, 6}}) {
    Scratch out("f32_" + std::to_string(dim));
    ThreadPool pool(2);
    auto r = synth_embed_model(shape(out.path, dim, 7, heads, kv, 400, "F32"), pool);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    auto big = Model::load(out.path);
    ASSERT_TRUE(big.is_ok()) << big.status().message();
    EXPECT_EQ((*big)->hparams().n_embd, dim);
    EXPECT_EQ((*big)->hparams().n_layer, 7);
    const auto got = test::logits_one_by_one(**big, tokens);
    double worst = 0.0;
    for (size_t t = 0; t < tokens.size(); ++t)
      for (size_t v = 0; v < want[t].size(); ++v)
        worst = std::max(worst, std::abs(static_cast<double>(got[t][v]) - want[t][v]) / std::max(1.0f, std::abs(want[t][v])));
    EXPECT_LT(worst, 1e-4) << "dim " << dim;
  }
}

TEST(SynthEmbed, GreedyOutputIsTheGoldenOneAtF16) {
  TERN_REQUIRE_STORIES();
  Scratch out("f16");
  ThreadPool pool(2);
  auto r = synth_embed_model(shape(out.path, 512, 6, 16, 4, 768, "F16"), pool);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  auto engine = Engine::create(single_sequence_config(out.path, 0, 2));
  ASSERT_TRUE(engine.is_ok()) << engine.status().message();
  GenerateOptions o;
  o.sampling.temperature = 0.0f;
  o.max_tokens = 200;
  auto result = generate(**engine, {1}, o, [](const std::string&) { return true; });
  ASSERT_TRUE(result.is_ok()) << result.status().message();
  const std::vector<int> golden = test::golden_ids();
  EXPECT_EQ(result->tokens, std::vector<TokenId>(golden.begin() + 1, golden.end()));
}

TEST(SynthEmbed, ShapesThatCannotHoldTheSmallModelAreRefused) {
  TERN_REQUIRE_STORIES();
  Scratch out("bad");
  ThreadPool pool(1);
  const struct {
    EmbedOptions o;
    const char* why;
  } cases[] = {
      {shape(out.path, 32, 6, 4, 4, 256, "F32"), "at least the small model's"},  // dim < 64
      {shape(out.path, 256, 4, 8, 4, 256, "F32"), "at least the small model's"},  // layers < 5
      {shape(out.path, 256, 6, 8, 4, 100, "F32"), "at least the small model's"},  // ffn < 172
      {shape(out.path, 256, 6, 8, 2, 256, "F32"), "kv-heads"},                     // 2 kv heads < 4
      {shape(out.path, 240, 6, 8, 4, 256, "F32"), "multiple of the small one's"},  // head size 30
      {shape(out.path, 256, 6, 7, 7, 256, "F32"), "--heads must divide --dim"},
  };
  for (const auto& c : cases) {
    auto r = synth_embed_model(c.o, pool);
    ASSERT_FALSE(r.is_ok()) << c.why;
    EXPECT_NE(r.status().message().find(c.why), std::string::npos) << r.status().message();
    EXPECT_FALSE(std::filesystem::exists(out.path));
  }
}

}  // namespace
}  // namespace tern
