// Grammar-constrained generation through the serving engine on stories260K,
// whose natural output is stories, never the shapes asked for here: every
// output must match (checked by an independent std::regex or JSON parser),
// sampled hot over many seeds, batched, and with speculative decoding.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "../grammar/schema_validator.h"
#include "engine_run_util.h"
#include "grammar/constraint.h"
#include "grammar/gbnf.h"
#include "grammar/matcher.h"

namespace tern {
namespace {

constexpr const char* kStoryGbnf = R"G(
root     ::= "Once upon a time, there was a " animal " named " name ". " sentence
animal   ::= "cat" | "dog" | "bird"
name     ::= [A-Z] [a-z]{2,8}
sentence ::= [A-Za-z ,]+ "."
)G";
const std::regex kStoryRegex(R"(Once upon a time, there was a (cat|dog|bird) named [A-Z][a-z]{2,8}\. [A-Za-z ,]+\.)");

constexpr const char* kRecordGbnf = R"G(
root ::= "{\"name\": \"" [A-Za-z ]{1,20} "\", \"age\": " ("0" | [1-9] [0-9]?) ", \"pets\": [" pets? "]}"
pets ::= "\"" [a-z]{1,10} "\"" ( ", \"" [a-z]{1,10} "\"" ){0,2}
)G";

GenerationRequest constrained(const char* gbnf, float temperature, uint64_t seed, int max_tokens) {
  GenerationRequest r;
  r.prompt_tokens = {1};
  r.max_tokens = max_tokens;
  r.sampling.temperature = temperature;
  r.sampling.seed = seed;
  r.constraint = {ConstraintKind::Gbnf, gbnf};
  return r;
}

// A text cut off by max_tokens is still a prefix of some sentence.
bool is_prefix_of_sentence(const char* gbnf, const std::string& text) {
  auto g = grammar::parse_gbnf(gbnf);
  grammar::Matcher m(std::make_shared<const grammar::Grammar>(std::move(g).value()));
  return m.accept(text);
}

TEST(Constrained, HotSamplingAlwaysMatchesTheGrammar) {
  auto core = test::make_core(test::base_config());
  ASSERT_TRUE(core);
  std::vector<GenerationRequest> reqs;
  for (uint64_t seed = 1; seed <= 24; ++seed) reqs.push_back(constrained(kStoryGbnf, 1.5f, seed, 80));
  const auto out = test::run_all(*core, reqs);  // all 24 batched together
  int n_complete = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    ASSERT_TRUE(out[i].final_output);
    if (out[i].final_output->finish == FinishReason::Eos) {
      ++n_complete;
      EXPECT_TRUE(std::regex_match(out[i].text, kStoryRegex)) << out[i].text;
    } else {
      EXPECT_EQ(out[i].final_output->finish, FinishReason::Length);
      EXPECT_TRUE(is_prefix_of_sentence(kStoryGbnf, out[i].text)) << out[i].text;
    }
  }
  EXPECT_GE(n_complete, 12) << "most stories should end with the grammar's '.' then end-of-text";
}

TEST(Constrained, JsonRecordsParseWithTheRightFields) {
  auto core = test::make_core(test::base_config());
  ASSERT_TRUE(core);
  std::vector<GenerationRequest> reqs;
  for (uint64_t seed = 1; seed <= 12; ++seed) reqs.push_back(constrained(kRecordGbnf, 1.2f, seed, 120));
  reqs.push_back(constrained(kRecordGbnf, 0.0f, 0, 120));  // greedy too
  const auto out = test::run_all(*core, reqs);
  for (const auto& o : out) {
    ASSERT_TRUE(o.final_output);
    ASSERT_EQ(o.final_output->finish, FinishReason::Eos) << o.text;  // the grammar is short: it always completes
    const auto j = nlohmann::json::parse(o.text, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(j.is_discarded()) << o.text;
    EXPECT_TRUE(j["name"].is_string());
    EXPECT_TRUE(j["age"].is_number_integer());
    EXPECT_TRUE(j["pets"].is_array());
    EXPECT_LE(j["pets"].size(), 3u);
  }
}

TEST(Constrained, JsonSchemaOutputsValidateAgainstAnIndependentValidator) {
  const char* schema = R"({"type":"object","properties":{
      "name":{"type":"string","minLength":1,"maxLength":12},
      "age":{"type":"integer","minimum":1,"maximum":120},
      "mood":{"enum":["happy","sad"]},
      "friends":{"type":"array","items":{"type":"string","maxLength":8},"maxItems":2}},
      "required":["name","age","mood"]})";
  const grammar::testing::SchemaValidator validator(nlohmann::ordered_json::parse(schema));
  auto core = test::make_core(test::base_config());
  ASSERT_TRUE(core);
  std::vector<GenerationRequest> reqs;
  for (uint64_t seed = 1; seed <= 16; ++seed) {
    GenerationRequest r = constrained("", 1.5f, seed, 200);
    r.constraint = {ConstraintKind::JsonSchema, schema};
    reqs.push_back(r);
  }
  const auto out = test::run_all(*core, reqs);
  auto g = grammar::compile_constraint({ConstraintKind::JsonSchema, schema});
  ASSERT_TRUE(g.is_ok());
  int n_complete = 0;
  for (const auto& o : out) {
    ASSERT_TRUE(o.final_output);
    if (o.final_output->finish == FinishReason::Eos) {
      ++n_complete;
      const auto j = nlohmann::ordered_json::parse(o.text, nullptr, false);
      ASSERT_FALSE(j.is_discarded()) << o.text;
      EXPECT_TRUE(validator.valid(j)) << o.text;
    } else {
      grammar::Matcher m(*g);
      EXPECT_TRUE(m.accept(o.text)) << o.text;
    }
  }
  EXPECT_GE(n_complete, 8);
}

TEST(Constrained, JsonObjectModeGivesAnObjectPrefix) {
  auto core = test::make_core(test::base_config());
  ASSERT_TRUE(core);
  GenerationRequest r;
  r.prompt = "Lily";
  r.max_tokens = 60;
  r.sampling.temperature = 1.0f;
  r.sampling.seed = 5;
  r.constraint = {ConstraintKind::JsonObject, ""};
  const auto out = test::run_all(*core, {r});
  ASSERT_TRUE(out[0].final_output);
  ASSERT_FALSE(out[0].text.empty());
  EXPECT_EQ(out[0].text.find_first_not_of(" \t\n\r"), out[0].text.find('{'));
  if (out[0].final_output->finish == FinishReason::Eos) {
    const auto j = nlohmann::json::parse(out[0].text, nullptr, false);
    EXPECT_TRUE(j.is_object()) << out[0].text;
  }
}

TEST(Constrained, SpeculativeDecodingGivesTheSameConstrainedOutput) {
  // Greedy: with prompt-lookup proposals (which know nothing of the grammar)
  // verified against masked rows, the output is token for token the same.
  std::vector<GenerationRequest> reqs;
  for (const char* g : {kStoryGbnf, kRecordGbnf}) reqs.push_back(constrained(g, 0.0f, 0, 100));
  auto plain = test::make_core(test::base_config());
  EngineConfig sc = test::base_config();
  sc.spec = SpecMethod::Ngram;
  sc.spec_k = 4;
  sc.spec_adaptive = false;  // proposals whenever lookup has them
  auto spec = test::make_core(sc);
  ASSERT_TRUE(plain && spec);
  const auto a = test::run_all(*plain, reqs);
  const auto b = test::run_all(*spec, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(a[i].tokens, b[i].tokens);
    EXPECT_EQ(a[i].text, b[i].text);
  }
  EXPECT_GT(spec->stats().spec_proposed, 0);
  const EngineStats st = spec->stats();
  EXPECT_GT(st.spec_proposed, 0);
  EXPECT_GT(st.spec_accepted, 0);
  EXPECT_LT(st.spec_accepted, st.spec_proposed);  // some proposals were masked away
}

TEST(Constrained, BadRequestsAreRefusedWithAReason) {
  auto core = test::make_core(test::base_config());
  ASSERT_TRUE(core);
  GenerationRequest r = constrained("root ::= undefined-rule", 0.0f, 0, 10);
  auto p = core->prepare(r);
  ASSERT_FALSE(p.is_ok());
  EXPECT_EQ(p.status().kind(), ErrorKind::InvalidArgument);
  EXPECT_NE(p.status().message().find("'undefined-rule' is used but not defined"), std::string::npos);
  r = constrained(kStoryGbnf, 0.0f, 0, 10);
  r.ignore_eos = true;
  p = core->prepare(r);
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("ignore_eos"), std::string::npos);
}

}  // namespace
}  // namespace tern

namespace tern {
namespace {

GenerationRequest greedy_golden(int max_tokens) {
  GenerationRequest r = test::golden_request();
  r.max_tokens = max_tokens;
  return r;
}

TEST(LogitBias, BansAndForcesTokens) {
  auto core = test::make_core(test::base_config());
  ASSERT_TRUE(core);
  const std::vector<TokenId> golden = test::golden_continuation();
  GenerationRequest ban = greedy_golden(20);
  ban.logit_bias = {{golden[0], -100.0f}};
  GenerationRequest force = greedy_golden(10);
  force.logit_bias = {{golden[5], 100.0f}};
  force.ignore_eos = true;
  GenerationRequest mild = greedy_golden(20);
  mild.logit_bias = {{golden[0], 0.001f}};  // too small to change an argmax with a real margin
  const auto out = test::run_all(*core, {ban, force, mild});
  ASSERT_FALSE(out[0].tokens.empty());
  EXPECT_NE(out[0].tokens[0], golden[0]);
  for (TokenId t : out[0].tokens) EXPECT_NE(t, golden[0]);
  EXPECT_EQ(out[1].tokens, std::vector<TokenId>(10, golden[5]));
  EXPECT_EQ(out[2].tokens, std::vector<TokenId>(golden.begin(), golden.begin() + 20));
}

TEST(LogitBias, SameUnderSpeculativeDecodingAndOutOfRangeIdsAreRefused) {
  const std::vector<TokenId> golden = test::golden_continuation();
  GenerationRequest r = greedy_golden(80);
  r.logit_bias = {{golden[3], -100.0f}, {golden[7], -3.0f}};
  EngineConfig sc = test::base_config();
  sc.spec = SpecMethod::Ngram;
  sc.spec_adaptive = false;  // proposals whenever lookup has them
  auto plain = test::make_core(test::base_config());
  auto spec = test::make_core(sc);
  ASSERT_TRUE(plain && spec);
  EXPECT_EQ(test::run_all(*plain, {r})[0].tokens, test::run_all(*spec, {r})[0].tokens);
  EXPECT_GT(spec->stats().spec_proposed, 0);
  r.logit_bias = {{1 << 20, 1.0f}};
  auto p = plain->prepare(r);
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("outside the vocabulary"), std::string::npos);
  r.logit_bias = {{5, 500.0f}};
  EXPECT_FALSE(plain->prepare(r).is_ok());
}

}  // namespace
}  // namespace tern
