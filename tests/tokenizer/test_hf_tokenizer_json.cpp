// read_hf_tokenizer() on small hand-written tokenizer directories: the
// pre-tokenizer mapping, token types, special tokens, chat templates, and a
// clear error for each kind of bad input.
#include <gtest/gtest.h>

#include "hf_json_writer.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/pre_tokenizer.h"

namespace tern {
namespace {

using nlohmann::json;
using KeyValues = std::vector<std::pair<std::string, gguf::Value>>;

const std::string kSpace = "\xE2\x96\x81";

const gguf::Value* find(const KeyValues& kv, const std::string& key) {
  for (const auto& [k, v] : kv) {
    if (k == key) return &v;
  }
  return nullptr;
}

std::string str(const KeyValues& kv, const std::string& key) {
  const gguf::Value* v = find(kv, key);
  return v != nullptr && v->as_string() ? *v->as_string() : "<absent>";
}

int64_t num(const KeyValues& kv, const std::string& key) {
  const gguf::Value* v = find(kv, key);
  return v != nullptr && v->as_i64() ? *v->as_i64() : -999;
}

std::vector<std::string> strings(const KeyValues& kv, const std::string& key) {
  std::vector<std::string> out;
  if (const gguf::Value* v = find(kv, key)) {
    for (const auto& item : v->as_array()->items) out.push_back(*item.as_string());
  }
  return out;
}

std::vector<int64_t> ints(const KeyValues& kv, const std::string& key) {
  std::vector<int64_t> out;
  if (const gguf::Value* v = find(kv, key)) {
    for (const auto& item : v->as_array()->items) out.push_back(*item.as_i64());
  }
  return out;
}

json byte_level(bool use_regex) { return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", use_regex}}; }
json split(const std::string& regex) {
  return {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}};
}
json sequence(json steps) { return {{"type", "Sequence"}, {"pretokenizers", std::move(steps)}}; }

// A byte-level BPE tokenizer.json: tokens a b c ab abc, merges "a b", "ab c".
json tiny_bpe(json pre_tokenizer = byte_level(true)) {
  return {{"model",
           {{"type", "BPE"},
            {"vocab", {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"abc", 4}}},
            {"merges", json::array({"a b", "ab c"})}}},
          {"pre_tokenizer", std::move(pre_tokenizer)},
          {"added_tokens", json::array()}};
}

Result<KeyValues> read(const test::TempDir& dir, const json& tokenizer, const json& config = nullptr) {
  dir.write_json("tokenizer.json", tokenizer);
  if (!config.is_null()) dir.write_json("tokenizer_config.json", config);
  return read_hf_tokenizer(dir.str());
}

KeyValues read_ok(const json& tokenizer, const json& config = nullptr) {
  test::TempDir dir("ok");
  auto kv = read(dir, tokenizer, config);
  EXPECT_TRUE(kv.is_ok()) << kv.status().message();
  return kv.is_ok() ? std::move(kv).value() : KeyValues{};
}

Status read_error(const json& tokenizer) {
  test::TempDir dir("err");
  auto kv = read(dir, tokenizer);
  EXPECT_FALSE(kv.is_ok());
  return kv.status();
}

// The regexes as the tokenizer.json files of each family spell them.
const std::string kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kTekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kO200k =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

TEST(HfTokenizer, ByteLevelPreTokenizersMapToOurRules) {
  struct Case {
    json pre;
    bool ignore_merges;
    std::string name;
  };
  const std::string seed_coder = std::string(R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^)") + "\r\n" +
                                 R"(\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N})" + "\r\n" + R"(]+|\s*[)" +
                                 "\r\n" + R"(]+|\s+(?!\S)|\s+)";
  const std::string llama3_llamacpp_spelling =
      R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  const std::string bloom = R"( ?[^(\s|.,!?…。，、।۔،)]+)";
  const std::vector<Case> cases = {
      {byte_level(true), false, "gpt-2"},
      {sequence({{{"type", "Digits"}, {"individual_digits", true}}, byte_level(true)}), false, "starcoder"},
      {sequence({split(kLlama3), byte_level(false)}), true, "llama-bpe"},
      {sequence({split(llama3_llamacpp_spelling), byte_level(false)}), true, "llama-bpe"},
      {sequence({split(kLlama3), byte_level(false)}), false, "smaug-bpe"},
      {sequence({split(kQwen2), byte_level(false)}), false, "qwen2"},
      {sequence({split(seed_coder), byte_level(false)}), false, "seed-coder"},
      {sequence({split(kTekken), byte_level(false)}), true, "tekken"},
      {sequence({split(kO200k), byte_level(false)}), false, "gpt-4o"},
      {sequence({split("[\r\n]"), split(R"(\s?\p{L}+)"), split(R"(\s?\p{P}+)"), split("[一-龥ࠀ-一가-퟿]+"),
                 {{"type", "Digits"}, {"individual_digits", true}}, byte_level(false)}),
       false, "deepseek-coder"},
      {sequence({split(R"(\p{N}{1,3})"), split("[一-龥぀-ゟ゠-ヿ]+"),
                 split(R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^)"
                       "\r\n"
                       R"(\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[)"
                       "\r\n"
                       R"(]*|\s*[)"
                       "\r\n"
                       R"(]+|\s+(?!\S)|\s+)"),
                 byte_level(false)}),
       false, "deepseek-v3"},
      {sequence({split(bloom), byte_level(false)}), false, "bloom"},
      {sequence({split(bloom), split(R"(\p{N})"), byte_level(false)}), false, "viking"},
  };
  for (const Case& c : cases) {
    json tok = tiny_bpe(c.pre);
    tok["model"]["ignore_merges"] = c.ignore_merges;
    const KeyValues kv = read_ok(tok);
    EXPECT_EQ(str(kv, "tokenizer.ggml.model"), "gpt2");
    EXPECT_EQ(str(kv, "tokenizer.ggml.pre"), c.name) << c.pre.dump();
    EXPECT_TRUE(PreTokenizer::from_name(c.name).is_ok()) << c.name;
  }
}

TEST(HfTokenizer, UnknownPreTokenizerRegexIsRefusedByName) {
  const Status s = read_error(tiny_bpe(sequence({split(R"(\w+|\d+)"), byte_level(false)})));
  EXPECT_EQ(s.kind(), ErrorKind::Unsupported);
  EXPECT_NE(s.message().find(R"(/\w+|\d+/)"), std::string::npos) << s.message();
  // A known regex with one more step is no rule either: refused, not guessed.
  EXPECT_EQ(read_error(tiny_bpe(sequence({split(kLlama3), byte_level(false), split(R"(\p{N})")}))).kind(),
            ErrorKind::Unsupported);
  EXPECT_EQ(read_error(tiny_bpe({{"type", "Punctuation"}})).kind(), ErrorKind::Unsupported);
  json prefix = byte_level(true);
  prefix["add_prefix_space"] = true;
  EXPECT_NE(read_error(tiny_bpe(prefix)).message().find("add_prefix_space"), std::string::npos);
  // A BPE model that is neither byte-level nor byte_fallback.
  EXPECT_EQ(read_error(tiny_bpe(nullptr)).kind(), ErrorKind::Unsupported);
}

TEST(HfTokenizer, ByteLevelNormalizers) {
  json tok = tiny_bpe();
  tok["normalizer"] = {{"type", "NFC"}};  // qwen2: ignored, as llama.cpp does
  EXPECT_EQ(str(read_ok(tok), "tokenizer.ggml.pre"), "gpt-2");
  tok["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array()}};  // deepseek-v3
  EXPECT_EQ(str(read_ok(tok), "tokenizer.ggml.pre"), "gpt-2");
  tok["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array({{{"type", "Lowercase"}}})}};
  EXPECT_NE(read_error(tok).message().find("'Lowercase'"), std::string::npos);
}

TEST(HfTokenizer, UnsupportedModelTypesAreNamed) {
  for (const char* type : {"Unigram", "WordLevel"}) {
    json tok = tiny_bpe();
    tok["model"] = {{"type", type}, {"vocab", json::array()}};
    const Status s = read_error(tok);
    EXPECT_EQ(s.kind(), ErrorKind::Unsupported);
    EXPECT_NE(s.message().find(std::string("'") + type + "'"), std::string::npos) << s.message();
  }
}

TEST(HfTokenizer, MissingTokenizerJsonIsNotFound) {
  test::TempDir dir("missing");
  auto kv = read_hf_tokenizer(dir.str());
  ASSERT_FALSE(kv.is_ok());
  EXPECT_EQ(kv.status().kind(), ErrorKind::NotFound);
  EXPECT_NE(kv.status().message().find(dir.str() + "/tokenizer.json"), std::string::npos);
  dir.write("tokenizer.model", "protobuf");
  kv = read_hf_tokenizer(dir.str());
  ASSERT_FALSE(kv.is_ok());
  EXPECT_EQ(kv.status().kind(), ErrorKind::Unsupported);
  EXPECT_NE(kv.status().message().find("no tokenizer.json"), std::string::npos) << kv.status().message();
}

TEST(HfTokenizer, MalformedJsonNamesFileAndPlace) {
  test::TempDir dir("malformed");
  dir.write("tokenizer.json", "{\"model\": {\"type\": \"BPE\",\n \"vocab\": {\"a\": 0,}}}");
  auto kv = read_hf_tokenizer(dir.str());
  ASSERT_FALSE(kv.is_ok());
  EXPECT_EQ(kv.status().kind(), ErrorKind::InvalidFile);
  EXPECT_NE(kv.status().message().find("tokenizer.json: malformed JSON"), std::string::npos) << kv.status().message();
  EXPECT_NE(kv.status().message().find("line 2"), std::string::npos) << kv.status().message();
  // A malformed optional file is an error too, not silently skipped.
  dir.write_json("tokenizer.json", tiny_bpe());
  dir.write("tokenizer_config.json", "{\"bos_token\": ");
  kv = read_hf_tokenizer(dir.str());
  ASSERT_FALSE(kv.is_ok());
  EXPECT_NE(kv.status().message().find("tokenizer_config.json"), std::string::npos) << kv.status().message();
}

TEST(HfTokenizer, BadVocabularyAndMergesAreInvalid) {
  json tok = tiny_bpe();
  tok["model"]["merges"] = json::array({"a b", "ab zz"});
  Status s = read_error(tok);
  EXPECT_EQ(s.kind(), ErrorKind::InvalidFile);
  EXPECT_NE(s.message().find("merge #1 names 'zz'"), std::string::npos) << s.message();

  tok = tiny_bpe();
  tok["model"]["merges"] = json::array({"b c"});  // "bc" is not a token
  EXPECT_NE(read_error(tok).message().find("makes 'bc'"), std::string::npos);

  tok = tiny_bpe();
  tok["model"]["merges"] = json::array({"abc"});
  EXPECT_EQ(read_error(tok).kind(), ErrorKind::InvalidFile);

  tok = tiny_bpe();
  tok["model"]["vocab"]["d"] = 1;  // id 1 is "b"
  EXPECT_NE(read_error(tok).message().find("id 1 is given to both"), std::string::npos);

  tok = tiny_bpe();  // two added tokens with one id
  tok["added_tokens"] = json::array({{{"id", 5}, {"content", "<x>"}}, {{"id", 5}, {"content", "<y>"}}});
  EXPECT_NE(read_error(tok).message().find("id 5 is given to both '<x>' and '<y>'"), std::string::npos);

  tok = tiny_bpe();
  tok["model"]["vocab"]["d"] = -3;
  EXPECT_EQ(read_error(tok).kind(), ErrorKind::InvalidFile);
  tok["model"]["vocab"]["d"] = "seven";
  EXPECT_EQ(read_error(tok).kind(), ErrorKind::InvalidFile);
  tok["model"]["vocab"]["d"] = 3000000;  // would mean millions of [PADi] holes in a 6-token file
  EXPECT_NE(read_error(tok).message().find("out of range"), std::string::npos);

  test::TempDir dir("small");
  dir.write_json("config.json", {{"vocab_size", 3}});
  auto kv = read(dir, tiny_bpe());
  ASSERT_FALSE(kv.is_ok());
  EXPECT_NE(kv.status().message().find("vocab_size 3"), std::string::npos) << kv.status().message();
}

TEST(HfTokenizer, AddedTokenTypesAndHoles) {
  json tok = tiny_bpe();
  tok["added_tokens"] = json::array({
      {{"id", 6}, {"content", "<extra>"}, {"special", true}},
      {{"id", 7}, {"content", "<|im_end|>"}, {"special", false}},  // looks special: CONTROL, as llama.cpp
      {{"id", 8}, {"content", "hello world"}, {"special", false}},
  });
  test::TempDir dir("added");
  dir.write_json("config.json", {{"vocab_size", 10}});
  auto kv = read(dir, tok);
  ASSERT_TRUE(kv.is_ok()) << kv.status().message();
  EXPECT_EQ(strings(*kv, "tokenizer.ggml.tokens"),
            (std::vector<std::string>{"a", "b", "c", "ab", "abc", "[PAD5]", "<extra>", "<|im_end|>", "hello world",
                                      "[PAD9]"}));
  EXPECT_EQ(ints(*kv, "tokenizer.ggml.token_type"), (std::vector<int64_t>{1, 1, 1, 1, 1, 5, 3, 3, 4, 5}));
  EXPECT_EQ(strings(*kv, "tokenizer.ggml.merges"), (std::vector<std::string>{"a b", "ab c"}));

  // An added token may take over a vocabulary id with new text (Hugging Face decodes it so).
  tok["added_tokens"] = json::array({{{"id", 2}, {"content", "<c>"}, {"special", true}}});
  tok["model"]["merges"] = json::array({"a b"});
  const KeyValues over = read_ok(tok);
  EXPECT_EQ(strings(over, "tokenizer.ggml.tokens")[2], "<c>");
  EXPECT_EQ(ints(over, "tokenizer.ggml.token_type")[2], 3);
}

TEST(HfTokenizer, KeysInLlamaCppOrder) {
  json config = {{"bos_token", "abc"}, {"eos_token", {{"content", "ab"}, {"special", true}}},
                 {"add_bos_token", true}, {"chat_template", "{{ messages }}"}};
  const KeyValues kv = read_ok(tiny_bpe(), config);
  std::vector<std::string> keys;
  for (const auto& [k, v] : kv) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
                                            "tokenizer.ggml.token_type", "tokenizer.ggml.merges",
                                            "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                            "tokenizer.ggml.add_bos_token", "tokenizer.chat_template"}));
  EXPECT_EQ(num(kv, "tokenizer.ggml.bos_token_id"), 4);
  EXPECT_EQ(num(kv, "tokenizer.ggml.eos_token_id"), 3);
  EXPECT_EQ(str(kv, "tokenizer.chat_template"), "{{ messages }}");
}

TEST(HfTokenizer, MergePairsWithSpacesAreWrittenAsLlamaCppDoes) {
  json tok = tiny_bpe();
  tok["model"]["vocab"]["a b"] = 5;
  tok["model"]["vocab"]["a bc"] = 6;
  tok["model"]["merges"] = json::array({json::array({"a b", "c"})});
  EXPECT_EQ(strings(read_ok(tok), "tokenizer.ggml.merges"), (std::vector<std::string>{"a\xC4\xA0"
                                                                                       "b c"}));
}

TEST(HfTokenizer, AddBosFromPostProcessorTemplate) {
  json tok = tiny_bpe();
  tok["added_tokens"] = json::array({{{"id", 5}, {"content", "<|begin|>"}, {"special", true}}});
  tok["post_processor"] = {
      {"type", "Sequence"},
      {"processors",
       json::array({byte_level(false),
                    {{"type", "TemplateProcessing"},
                     {"single", json::array({{{"SpecialToken", {{"id", "<|begin|>"}, {"type_id", 0}}}},
                                             {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})}}})}};
  KeyValues kv = read_ok(tok);
  EXPECT_EQ(num(kv, "tokenizer.ggml.bos_token_id"), 5);
  ASSERT_NE(find(kv, "tokenizer.ggml.add_bos_token"), nullptr);
  EXPECT_TRUE(*find(kv, "tokenizer.ggml.add_bos_token")->as_bool());
  EXPECT_EQ(find(kv, "tokenizer.ggml.add_eos_token"), nullptr);
  // tokenizer_config.json's flag has the last word.
  kv = read_ok(tok, {{"add_bos_token", false}});
  EXPECT_FALSE(*find(kv, "tokenizer.ggml.add_bos_token")->as_bool());
}

TEST(HfTokenizer, EosFromGenerationConfigListAndPrecedence) {
  json tok = tiny_bpe();
  tok["added_tokens"] = json::array({{{"id", 5}, {"content", "<|eot|>"}, {"special", true}},
                                     {{"id", 6}, {"content", "<|end|>"}, {"special", true}}});
  test::TempDir dir("gen");
  dir.write_json("generation_config.json", {{"bos_token_id", 0}, {"eos_token_id", json::array({6, 5})}});
  dir.write_json("config.json", {{"pad_token_id", 99}});  // outside the vocabulary: ignored with a warning
  auto kv = read(dir, tok);
  ASSERT_TRUE(kv.is_ok()) << kv.status().message();
  EXPECT_EQ(num(*kv, "tokenizer.ggml.bos_token_id"), 0);
  EXPECT_EQ(num(*kv, "tokenizer.ggml.eos_token_id"), 6);
  EXPECT_EQ(find(*kv, "tokenizer.ggml.padding_token_id"), nullptr);
  // config.json comes before generation_config.json, tokenizer_config.json before both.
  dir.write_json("config.json", {{"eos_token_id", 5}});
  kv = read(dir, tok);
  EXPECT_EQ(num(*kv, "tokenizer.ggml.eos_token_id"), 5);
  kv = read(dir, tok, {{"eos_token", "abc"}});
  EXPECT_EQ(num(*kv, "tokenizer.ggml.eos_token_id"), 4);
}

TEST(HfTokenizer, ChatTemplates) {
  json named = json::array({{{"name", "default"}, {"template", "D"}}, {{"name", "tool use"}, {"template", "T"}}});
  KeyValues kv = read_ok(tiny_bpe(), {{"chat_template", named}});
  EXPECT_EQ(str(kv, "tokenizer.chat_template"), "D");
  EXPECT_EQ(str(kv, "tokenizer.chat_template.tool_use"), "T");
  EXPECT_EQ(strings(kv, "tokenizer.chat_templates"), std::vector<std::string>{"tool_use"});

  test::TempDir dir("jinja");
  dir.write("chat_template.jinja", "{{ bos_token }}J");
  auto from_file = read(dir, tiny_bpe(), json::object());
  ASSERT_TRUE(from_file.is_ok()) << from_file.status().message();
  EXPECT_EQ(str(*from_file, "tokenizer.chat_template"), "{{ bos_token }}J");

  test::TempDir bad("badtemplate");
  auto k = read(bad, tiny_bpe(), {{"chat_template", 42}});
  ASSERT_FALSE(k.is_ok());
  EXPECT_NE(k.status().message().find("chat_template"), std::string::npos);
}

// SentencePiece-style BPE: bytes, unknown, control and scores from merge ranks.
json tiny_spm(json normalizer, json pre_tokenizer) {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}, {"<0x0A>", 3}, {kSpace, 4}, {"h", 5},
                {"i", 6},     {"hi", 7},  {kSpace + "hi", 8}};
  return {{"model",
           {{"type", "BPE"},
            {"byte_fallback", true},
            {"unk_token", "<unk>"},
            {"vocab", vocab},
            {"merges", json::array({"h i", kSpace + " hi"})}}},
          {"normalizer", std::move(normalizer)},
          {"pre_tokenizer", std::move(pre_tokenizer)},
          {"added_tokens", json::array({{{"id", 1}, {"content", "<s>"}, {"special", true}},
                                        {{"id", 2}, {"content", "</s>"}, {"special", true}},
                                        // Gemma leaves these unmarked; llama.cpp makes them CONTROL.
                                        {{"id", 9}, {"content", "<unused0>"}, {"special", false}},
                                        {{"id", 10}, {"content", "<hi>"}, {"special", false}}})}};
}

TEST(HfTokenizer, SpmStyleBpeBecomesLlamaVocab) {
  const json replace = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpace}};
  const json prepend_replace = {
      {"type", "Sequence"},
      {"normalizers", json::array({{{"type", "Prepend"}, {"prepend", kSpace}}, replace})}};
  KeyValues kv = read_ok(tiny_spm(prepend_replace, nullptr), {{"bos_token", "<s>"}, {"eos_token", "</s>"}});
  EXPECT_EQ(str(kv, "tokenizer.ggml.model"), "llama");
  EXPECT_EQ(str(kv, "tokenizer.ggml.pre"), "default");
  EXPECT_EQ(ints(kv, "tokenizer.ggml.token_type"), (std::vector<int64_t>{2, 3, 3, 6, 1, 1, 1, 1, 1, 3, 4}));
  std::vector<double> scores;
  for (const auto& item : find(kv, "tokenizer.ggml.scores")->as_array()->items) scores.push_back(*item.as_f64());
  // Merge ranks; a longer token no merge makes merges last.
  EXPECT_EQ(scores, (std::vector<double>{0, 0, 0, 0, 0, 0, 0, -1, -2, 0, -1e9}));
  EXPECT_EQ(find(kv, "tokenizer.ggml.add_space_prefix"), nullptr);  // the default: prefix
  EXPECT_EQ(find(kv, "tokenizer.ggml.merges"), nullptr);
  EXPECT_EQ(num(kv, "tokenizer.ggml.unknown_token_id"), 0);

  // Gemma: spaces replaced, no prefix.
  kv = read_ok(tiny_spm(replace, nullptr));
  ASSERT_NE(find(kv, "tokenizer.ggml.add_space_prefix"), nullptr);
  EXPECT_FALSE(*find(kv, "tokenizer.ggml.add_space_prefix")->as_bool());
  // Metaspace, newer files.
  kv = read_ok(tiny_spm(nullptr, {{"type", "Metaspace"}, {"replacement", kSpace}, {"prepend_scheme", "first"}}));
  EXPECT_EQ(str(kv, "tokenizer.ggml.model"), "llama");
  EXPECT_EQ(find(kv, "tokenizer.ggml.add_space_prefix"), nullptr);
  // Gemma 3: a Split at " " after the normalizer replaced every space splits nothing.
  kv = read_ok(tiny_spm(replace, {{"type", "Split"},
                                  {"pattern", {{"String", " "}}},
                                  {"behavior", "MergedWithPrevious"},
                                  {"invert", false}}));
  EXPECT_EQ(str(kv, "tokenizer.ggml.model"), "llama");
  // Spaces never become ▁: refused rather than tokenized wrongly.
  EXPECT_EQ(read_error(tiny_spm(nullptr, nullptr)).kind(), ErrorKind::Unsupported);
  EXPECT_NE(read_error(tiny_spm({{"type", "NFKC"}}, nullptr)).message().find("'NFKC'"), std::string::npos);
}

}  // namespace
}  // namespace tern
