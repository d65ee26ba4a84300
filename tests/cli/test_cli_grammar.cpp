// Constrained output from the command line: `tern run` with each constraint
// flag and `tern batch` lines with grammar / regex / json_schema /
// response_format, checked with independent parsers (std::regex, nlohmann).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "../model/model_fixture.h"
#include "cli/run_tern.h"

namespace tern {
namespace {

std::string quote(const std::string& s) { return test::shell_quote(s); }
using test::run_tern;

class CliGrammar : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::string(TERN_BINARY_DIR) + "/cli_grammar." + std::to_string(::getpid());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name) << text;
    return dir_ + "/" + name;
  }
  std::string dir_;
};

TEST_F(CliGrammar, RunFollowsEachKindOfConstraint) {
  TERN_REQUIRE_STORIES();
  const std::string model = quote(test::stories_gguf());
  const std::string gbnf = write("story.gbnf", "root ::= \"The \" animal \" was \" [a-z]{3,10} \".\"\n"
                                               "animal ::= \"cat\" | \"dog\"\n");
  const std::regex story(R"(The (cat|dog) was [a-z]{3,10}\.)");
  for (int seed = 1; seed <= 3; ++seed) {
    auto o = run_tern("run -m " + model + " -p Once -n 40 --temp 1.2 --seed " + std::to_string(seed) +
                      " -t 1 --grammar-file " + quote(gbnf));
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_TRUE(std::regex_match(o.out, story)) << o.out;
  }
  const std::string schema = write("s.json", R"({"type":"object","properties":{"zeta":{"type":"integer","minimum":0,"maximum":9},
      "alpha":{"type":"boolean"}},"required":["zeta","alpha"]})");
  auto j = run_tern("run -m " + model + " -p Once -n 60 --temp 1.0 --seed 4 -t 1 --json-schema-file " + quote(schema));
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto v = nlohmann::ordered_json::parse(j.out, nullptr, false);
  ASSERT_FALSE(v.is_discarded()) << j.out;
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v.begin().key(), "zeta");  // the schema's property order
  EXPECT_TRUE(v["alpha"].is_boolean());
  auto r = run_tern("run -m " + model + " -p Once -n 30 --temp 0 -t 1 --regex '[A-Z][a-z]+ (was|had) [a-z]+\\.'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::regex_match(r.out, std::regex(R"([A-Z][a-z]+ (was|had) [a-z]+\.)"))) << r.out;
  auto obj = run_tern("run -m " + model + " -p Once -n 30 --temp 0 -t 1 --json");
  ASSERT_EQ(obj.exit_code, 0) << obj.err;
  EXPECT_EQ(obj.out.find_first_not_of(" \t\r\n"), obj.out.find('{')) << obj.out;
  // Errors: two constraints, a grammar that does not compile, ignore_eos with a grammar.
  auto two = run_tern("run -m " + model + " -p Once -n 5 --json --regex a");
  EXPECT_NE(two.exit_code, 0);
  EXPECT_NE(two.err.find("exclusive"), std::string::npos) << two.err;
  auto bad = run_tern("run -m " + model + " -p Once -n 5 --grammar-file " + quote(write("bad.gbnf", "root ::= [abc\n")));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("unterminated character class"), std::string::npos) << bad.err;
  auto eos = run_tern("run -m " + model + " -p Once -n 5 --json --ignore-eos");
  EXPECT_NE(eos.exit_code, 0);
  EXPECT_NE(eos.err.find("ignore_eos"), std::string::npos) << eos.err;
}

TEST_F(CliGrammar, BatchLinesCarryConstraints) {
  TERN_REQUIRE_STORIES();
  const std::string in = write("in.jsonl",
      R"({"id":"schema","prompt":"Once","max_tokens":60,"temperature":1.0,"seed":3,"json_schema":{"type":"object","properties":{"zeta":{"type":"integer","minimum":0,"maximum":9},"alpha":{"type":"boolean"}},"required":["zeta","alpha"]}})" "\n"
      R"({"id":"rf","prompt":"Once","max_tokens":40,"temperature":0,"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"enum":["yes","no"]}}}})" "\n"
      R"({"id":"re","prompt":"Once","max_tokens":20,"temperature":0,"regex":"[A-Z][a-z]+ (was|had) [a-z]+\\."})" "\n"
      R"({"id":"bad","prompt":"Once","max_tokens":5,"grammar":"root ::= nope"})" "\n"
      R"({"id":"two","prompt":"Once","max_tokens":5,"regex":"a","grammar":"root ::= \"a\""})" "\n");
  auto o = run_tern("batch -m " + quote(test::stories_gguf()) + " -f " + quote(in) + " -o " + quote(dir_ + "/out.jsonl") + " -t 1");
  EXPECT_EQ(o.exit_code, 1) << o.err;  // two lines fail, the rest run
  std::ifstream out(dir_ + "/out.jsonl");
  std::vector<nlohmann::ordered_json> lines;
  for (std::string line; std::getline(out, line);) lines.push_back(nlohmann::ordered_json::parse(line));
  ASSERT_EQ(lines.size(), 5u);
  const auto v = nlohmann::ordered_json::parse(lines[0]["text"].get<std::string>(), nullptr, false);
  ASSERT_FALSE(v.is_discarded()) << lines[0].dump();
  EXPECT_EQ(v.begin().key(), "zeta");
  const std::string rf = lines[1]["text"];
  EXPECT_TRUE(rf.find("\"yes\"") != std::string::npos || rf.find("\"no\"") != std::string::npos) << rf;
  EXPECT_TRUE(std::regex_match(lines[2]["text"].get<std::string>(), std::regex(R"([A-Z][a-z]+ (was|had) [a-z]+\.)")));
  EXPECT_NE(lines[3]["error"].get<std::string>().find("'nope' is used but not defined"), std::string::npos);
  EXPECT_NE(lines[4]["error"].get<std::string>().find("at most one"), std::string::npos);
}

}  // namespace
}  // namespace tern
