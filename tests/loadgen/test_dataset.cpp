// Datasets: the ShareGPT parser (bad records skipped and counted), synthetic
// prompt lengths and the --dataset spec.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "loadgen/dataset.h"

namespace tern::loadgen {
namespace {

// Exact counter for tests: one token per space-separated word.
TokenCounter word_counter() {
  return TokenCounter{[](std::string_view s) {
                        int n = 0;
                        bool in_word = false;
                        for (char c : s) {
                          if (c != ' ' && !in_word) ++n;
                          in_word = c != ' ';
                        }
                        return n;
                      },
                      true};
}

constexpr const char* kShareGpt = R"([
  {"id": "a", "conversations": [{"from": "human", "value": "one two three"}, {"from": "gpt", "value": "four five"}]},
  {"id": "b", "conversations": [{"from": "system", "value": "be nice"}, {"from": "human", "value": "hello there"}]},
  {"id": "c", "conversations": [{"from": "gpt", "value": "no question"}]},
  {"id": "d", "conversations": [{"from": "human", "value": ""}, {"from": "gpt", "value": "x"}]},
  {"id": "e", "conversations": [{"from": "human", "value": 17}]},
  "just a string",
  {"id": "f"},
  {"conversation_id": "g", "prompt": "why is the sky blue", "response": "because of scattering of light"},
  {"id": "h", "conversations": [{"from": "user", "value": "alpha beta"}, {"from": "assistant", "value": "gamma"}]},
  {"id": "i", "conversations": "not a list"}
])";

TEST(ShareGpt, UsableRecordsAndSkipCounts) {
  ShareGptOptions opt;
  opt.default_output_len = 64;
  auto ds = parse_sharegpt(kShareGpt, word_counter(), opt);
  ASSERT_TRUE(ds.is_ok()) << ds.status().message();
  ASSERT_EQ(ds->requests.size(), 4u);
  EXPECT_EQ(ds->requests[0].prompt, "one two three");
  EXPECT_EQ(ds->requests[0].n_prompt_tokens, 3);
  EXPECT_EQ(ds->requests[0].max_tokens, 2);  // the reply's length
  EXPECT_EQ(ds->requests[1].prompt, "hello there");
  EXPECT_EQ(ds->requests[1].max_tokens, 64);  // no reply: the default
  EXPECT_EQ(ds->requests[2].prompt, "why is the sky blue");
  EXPECT_EQ(ds->requests[2].max_tokens, 5);  // "because of scattering of light"
  EXPECT_EQ(ds->requests[3].max_tokens, 1);
  EXPECT_EQ(ds->n_skipped, 6u);
  EXPECT_EQ(ds->skipped_by_reason.at("no human turn"), 1u);
  EXPECT_EQ(ds->skipped_by_reason.at("empty prompt"), 1u);
  EXPECT_EQ(ds->skipped_by_reason.at("turn without string from/value"), 1u);
  EXPECT_EQ(ds->skipped_by_reason.at("not an object"), 1u);
  EXPECT_EQ(ds->skipped_by_reason.at("no conversations or prompt"), 2u);  // "f" and "i"
  EXPECT_TRUE(ds->counts_exact);
}

TEST(ShareGpt, OutputLenOverrides) {
  ShareGptOptions opt;
  opt.output_len = 7;
  auto ds = parse_sharegpt(kShareGpt, estimating_counter(), opt);
  ASSERT_TRUE(ds.is_ok());
  for (const auto& r : ds->requests) EXPECT_EQ(r.max_tokens, 7);
  EXPECT_FALSE(ds->counts_exact);
}

TEST(ShareGpt, NotJsonOrNotArrayIsAnError) {
  EXPECT_EQ(parse_sharegpt("[{", estimating_counter(), {}).status().kind(), ErrorKind::InvalidFile);
  EXPECT_EQ(parse_sharegpt(R"({"a": 1})", estimating_counter(), {}).status().kind(), ErrorKind::InvalidFile);
  auto empty = parse_sharegpt("[]", estimating_counter(), {});
  ASSERT_TRUE(empty.is_ok());
  EXPECT_TRUE(empty->requests.empty());
}

TEST(ShareGpt, FileWithBadRecordsAndSampling) {
  const auto path = std::filesystem::temp_directory_path() / ("tern_sharegpt_" + std::to_string(getpid()) + ".json");
  std::ofstream(path) << kShareGpt;
  DatasetSpec spec;
  spec.kind = DatasetSpec::Kind::ShareGpt;
  spec.path = path.string();
  auto ds = build_dataset(spec, 10, 3, word_counter(), {});
  std::filesystem::remove(path);
  ASSERT_TRUE(ds.is_ok()) << ds.status().message();
  EXPECT_EQ(ds->requests.size(), 10u);  // 4 usable records, cycled
  EXPECT_EQ(ds->n_skipped, 6u);
  EXPECT_NE(ds->description.find("4 usable, 6 skipped"), std::string::npos) << ds->description;
  EXPECT_EQ(build_dataset(spec, 1, 0, word_counter(), {}).status().kind(), ErrorKind::NotFound);
}

TEST(ShareGpt, SharedFilesParse) {
  const std::string dir = std::string(TERN_SHARED_DIR) + "/data/prompts/";
  if (!std::filesystem::exists(dir + "ShareGPT_V3_filtered_1000.json")) GTEST_SKIP() << "no " << dir;
  auto big = load_sharegpt(dir + "ShareGPT_V3_filtered_1000.json", estimating_counter(), {});
  ASSERT_TRUE(big.is_ok()) << big.status().message();
  EXPECT_EQ(big->requests.size() + big->n_skipped, 1000u);
  EXPECT_GE(big->requests.size(), 990u);
  auto small = load_sharegpt(dir + "sharegpt_sample_50_with_responses.json", estimating_counter(), {});
  ASSERT_TRUE(small.is_ok()) << small.status().message();
  EXPECT_EQ(small->requests.size(), 50u);
  for (const auto& r : small->requests) EXPECT_GE(r.max_tokens, 1);
}

TEST(DatasetSpec, Parses) {
  auto r = parse_dataset_spec("random:128,64");
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->kind, DatasetSpec::Kind::Random);
  EXPECT_EQ(r->n_input, 128);
  EXPECT_EQ(r->n_output, 64);
  EXPECT_EQ(r->spread, 0.0);
  EXPECT_DOUBLE_EQ(parse_dataset_spec("random:128,64,0.5")->spread, 0.5);
  auto p = parse_dataset_spec("prefix:256,32,16");
  ASSERT_TRUE(p.is_ok());
  EXPECT_EQ(p->n_shared, 256);
  auto s = parse_dataset_spec("sharegpt:/tmp/x.json");
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s->path, "/tmp/x.json");
  for (const char* bad : {"random:1", "random:1,2,3,4", "random:a,2", "random:0,5", "random:5,5,1.5", "prefix:1,2",
                          "sharegpt:", "zipf:1,2", "random:1.5,2", ""})
    EXPECT_EQ(parse_dataset_spec(bad).status().kind(), ErrorKind::InvalidArgument) << bad;
}

TEST(Synthetic, RandomLengthsAreExactWithAnExactCounter) {
  const TokenCounter wc = word_counter();
  const Dataset ds = make_random(37, 9, 0.0, 20, 5, wc);
  ASSERT_EQ(ds.requests.size(), 20u);
  for (const auto& r : ds.requests) {
    EXPECT_EQ(r.n_prompt_tokens, 37);
    EXPECT_EQ(wc.count(r.prompt), 37);
    EXPECT_EQ(r.max_tokens, 9);
  }
  EXPECT_NE(ds.requests[0].prompt, ds.requests[1].prompt);
  const Dataset spread = make_random(100, 50, 0.5, 200, 5, wc);
  int min_in = 1 << 30, max_in = 0;
  for (const auto& r : spread.requests) {
    EXPECT_GE(r.n_prompt_tokens, 50);
    EXPECT_LE(r.n_prompt_tokens, 150);
    EXPECT_GE(r.max_tokens, 25);
    EXPECT_LE(r.max_tokens, 75);
    min_in = std::min(min_in, r.n_prompt_tokens);
    max_in = std::max(max_in, r.n_prompt_tokens);
  }
  EXPECT_LT(min_in, 70);
  EXPECT_GT(max_in, 130);
  // Same seed, same prompts.
  EXPECT_EQ(make_random(37, 9, 0.0, 3, 5, wc).requests[2].prompt, ds.requests[2].prompt);
}

TEST(Synthetic, EstimatedLengthsReachTheTarget) {
  const Dataset ds = make_random(200, 10, 0.0, 5, 1, estimating_counter());
  for (const auto& r : ds.requests) {
    EXPECT_GE(estimate_tokens(r.prompt), 200);
    EXPECT_LE(estimate_tokens(r.prompt), 203);
  }
  EXPECT_EQ(estimate_tokens(""), 0);
  EXPECT_EQ(estimate_tokens("ab"), 1);
  EXPECT_EQ(estimate_tokens("abcdefgh"), 2);
}

TEST(Synthetic, PrefixWorkloadSharesItsPrefix) {
  const TokenCounter wc = word_counter();
  const Dataset ds = make_prefix(50, 10, 4, 8, 2, wc);
  ASSERT_EQ(ds.requests.size(), 8u);
  const std::string& first = ds.requests[0].prompt;
  size_t cut = 0;  // the end of the 50th word
  for (int words = 0; cut < first.size(); ++cut)
    if (first[cut] == ' ' && ++words == 50) break;
  const std::string prefix = first.substr(0, cut);
  for (const auto& r : ds.requests) {
    EXPECT_EQ(r.prompt.compare(0, prefix.size(), prefix), 0);
    EXPECT_EQ(r.n_prompt_tokens, 60);
    EXPECT_EQ(r.max_tokens, 4);
  }
  EXPECT_NE(ds.requests[0].prompt, ds.requests[1].prompt);
}

}  // namespace
}  // namespace tern::loadgen
