#include "hf_json_writer.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <map>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/utf8.h"

namespace tern::test {

namespace {

using nlohmann::json;

const std::string kSpace = "\xE2\x96\x81";

struct GgufVocab {
  std::string model, pre;
  std::vector<std::string> tokens;
  std::vector<int64_t> types;
  std::vector<double> scores;
  std::vector<std::string> merges;
};

GgufVocab read_vocab(const gguf::GgufFile& file) {
  GgufVocab v;
  v.model = file.get_string("tokenizer.ggml.model").value();
  if (file.find("tokenizer.ggml.pre")) v.pre = file.get_string("tokenizer.ggml.pre").value();
  for (const auto& item : file.find("tokenizer.ggml.tokens")->as_array()->items) v.tokens.push_back(*item.as_string());
  for (const auto& item : file.find("tokenizer.ggml.token_type")->as_array()->items) v.types.push_back(*item.as_i64());
  if (const gguf::Value* s = file.find("tokenizer.ggml.scores")) {
    for (const auto& item : s->as_array()->items) v.scores.push_back(*item.as_f64());
  }
  if (const gguf::Value* m = file.find("tokenizer.ggml.merges")) {
    for (const auto& item : m->as_array()->items) v.merges.push_back(*item.as_string());
  }
  return v;
}

bool is_hole(const GgufVocab& v, size_t id, const HfWriteOptions& o) {
  return o.holes_for_pads && v.tokens[id] == "[PAD" + std::to_string(id) + "]";
}

json split_step(const std::string& regex) {
  return {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}};
}

json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", use_regex}};
}

// The pre-tokenizer each family's tokenizer.json has.
json byte_level_pre_tokenizer(const std::string& pre) {
  if (pre == "gpt-2" || pre == "mpt") return byte_level(true);
  if (pre == "starcoder" || pre == "refact")
    return {{"type", "Sequence"},
            {"pretokenizers", json::array({{{"type", "Digits"}, {"individual_digits", true}}, byte_level(true)})}};
  if (pre == "deepseek-llm") {
    json steps = json::array();
    steps.push_back(split_step("[\r\n]"));  // the characters themselves, as the file has them
    steps.push_back(split_step(
        R"(\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+)"));
    steps.push_back(split_step(R"(\s?[!-/:-~！-／：-～‘-‟　-。]+)"));
    steps.push_back(split_step(R"(\s+$)"));
    steps.push_back(split_step("[一-龥ࠀ-一가-퟿]+"));
    steps.push_back({{"type", "Digits"}, {"individual_digits", false}});
    steps.push_back(byte_level(false));
    return {{"type", "Sequence"}, {"pretokenizers", steps}};
  }
  throw std::runtime_error("no tokenizer.json pre-tokenizer known for '" + pre + "'");
}

// Ids below the first id after the last ordinary token are the base vocabulary; control and
// user-defined tokens are listed as added tokens too (Llama lists <unk> <s> </s> both ways).
size_t base_vocab_size(const GgufVocab& v) {
  size_t n = 0;
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (v.types[i] == 1 || v.types[i] == 6) n = i + 1;
  }
  return n;
}

json added_tokens(const GgufVocab& v, const HfWriteOptions& o) {
  json added = json::array();
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    const int64_t t = v.types[i];
    if ((t != 2 && t != 3 && t != 4) || is_hole(v, i, o)) continue;
    added.push_back({{"id", i},
                     {"content", v.tokens[i]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", t != 4}});
  }
  return added;
}

json merge_list(const std::vector<std::pair<std::string, std::string>>& merges, bool as_pairs) {
  json out = json::array();
  for (const auto& [l, r] : merges) {
    if (as_pairs)
      out.push_back(json::array({l, r}));
    else
      out.push_back(l + " " + r);
  }
  return out;
}

// HF's SentencePiece converter: every split of a piece into two pieces is a
// merge, ranked by the piece's score (best first), then by the parts' ids.
std::vector<std::pair<std::string, std::string>> spm_merges(const GgufVocab& v, const HfWriteOptions& o) {
  std::unordered_map<std::string, size_t> ids;
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (!is_hole(v, i, o)) ids.emplace(v.tokens[i], i);
  }
  struct Merge {
    double score;
    size_t id, left, right;
    std::string l, r;
  };
  std::vector<Merge> merges;
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (v.types[i] != 1) continue;
    const std::string& t = v.tokens[i];
    for (size_t k = 0; k < t.size();) {
      k += std::max(1, utf8::sequence_length(static_cast<uint8_t>(t[k])));
      if (k >= t.size()) break;
      auto l = ids.find(t.substr(0, k)), r = ids.find(t.substr(k));
      if (l != ids.end() && r != ids.end()) merges.push_back({v.scores[i], i, l->second, r->second, l->first, r->first});
    }
  }
  std::stable_sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) {
    return std::tie(b.score, a.id, a.left, a.right) < std::tie(a.score, b.id, b.left, b.right);
  });
  std::vector<std::pair<std::string, std::string>> out;
  for (const Merge& m : merges) out.emplace_back(m.l, m.r);
  return out;
}

json vocab_object(const GgufVocab& v, const HfWriteOptions& o, size_t n_base) {
  json vocab = json::object();
  for (size_t i = 0; i < n_base; ++i) {
    if (!is_hole(v, i, o)) vocab[v.tokens[i]] = i;
  }
  return vocab;
}

json bpe_model(const GgufVocab& v, const HfWriteOptions& o, bool byte_fallback, json merges) {
  return {{"type", "BPE"},
          {"dropout", nullptr},
          {"unk_token", byte_fallback ? json("<unk>") : json(nullptr)},
          {"continuing_subword_prefix", nullptr},
          {"end_of_word_suffix", nullptr},
          {"fuse_unk", byte_fallback},
          {"byte_fallback", byte_fallback},
          {"ignore_merges", false},
          {"vocab", vocab_object(v, o, base_vocab_size(v))},
          {"merges", std::move(merges)}};
}

json spm_tokenizer(const GgufVocab& v, const HfWriteOptions& o) {
  json j;
  j["model"] = bpe_model(v, o, true, merge_list(spm_merges(v, o), o.merges_as_pairs));
  if (o.metaspace) {
    j["normalizer"] = nullptr;
    j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", kSpace}, {"prepend_scheme", "first"}, {"split", false}};
  } else {
    j["normalizer"] = {{"type", "Sequence"},
                       {"normalizers",
                        json::array({{{"type", "Prepend"}, {"prepend", kSpace}},
                                     {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpace}}})}};
    j["pre_tokenizer"] = nullptr;
  }
  j["decoder"] = {{"type", "Sequence"}, {"decoders", json::array({{{"type", "ByteFallback"}}, {{"type", "Fuse"}}})}};
  return j;
}

json byte_level_tokenizer(const GgufVocab& v, const HfWriteOptions& o) {
  std::vector<std::pair<std::string, std::string>> merges;
  for (const std::string& m : v.merges) {
    const size_t sep = m.find(' ');
    merges.emplace_back(m.substr(0, sep), m.substr(sep + 1));
  }
  json j;
  j["model"] = bpe_model(v, o, false, merge_list(merges, o.merges_as_pairs));
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = byte_level_pre_tokenizer(v.pre);
  j["decoder"] = byte_level(true);
  return j;
}

json wordpiece_tokenizer(const GgufVocab& v, const HfWriteOptions& o) {
  json vocab = json::object();
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    const std::string& t = v.tokens[i];
    if (is_hole(v, i, o)) continue;
    // Undo llama.cpp's spelling: ▁word -> word, continuation -> ##continuation.
    vocab[v.types[i] == 3 ? t : t.starts_with(kSpace) ? t.substr(kSpace.size()) : "##" + t] = i;
  }
  json j;
  j["model"] = {{"type", "WordPiece"},
                {"unk_token", "[UNK]"},
                {"continuing_subword_prefix", "##"},
                {"max_input_chars_per_word", 100},
                {"vocab", vocab}};
  j["normalizer"] = {{"type", "BertNormalizer"},
                     {"clean_text", true},
                     {"handle_chinese_chars", true},
                     {"strip_accents", nullptr},
                     {"lowercase", true}};
  j["pre_tokenizer"] = {{"type", "BertPreTokenizer"}};
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", json::array({{{"SpecialToken", {{"id", "[CLS]"}, {"type_id", 0}}}},
                                                 {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                                 {{"SpecialToken", {{"id", "[SEP]"}, {"type_id", 0}}}}})}};
  return j;
}

}  // namespace

json tokenizer_json_from_gguf(const gguf::GgufFile& file, const HfWriteOptions& options) {
  const GgufVocab v = read_vocab(file);
  json j;
  if (v.model == "llama")
    j = spm_tokenizer(v, options);
  else if (v.model == "gpt2")
    j = byte_level_tokenizer(v, options);
  else if (v.model == "bert")
    j = wordpiece_tokenizer(v, options);
  else
    throw std::runtime_error("no tokenizer.json writer for model '" + v.model + "'");
  j["version"] = "1.0";
  j["added_tokens"] = added_tokens(v, options);
  return j;
}

json tokenizer_config_from_gguf(const gguf::GgufFile& file) {
  const GgufVocab v = read_vocab(file);
  json config = json::object();
  const std::pair<const char*, const char*> kinds[] = {
      {"bos", "tokenizer.ggml.bos_token_id"},     {"eos", "tokenizer.ggml.eos_token_id"},
      {"unk", "tokenizer.ggml.unknown_token_id"}, {"sep", "tokenizer.ggml.seperator_token_id"},
      {"pad", "tokenizer.ggml.padding_token_id"}, {"cls", "tokenizer.ggml.cls_token_id"},
      {"mask", "tokenizer.ggml.mask_token_id"}};
  for (const auto& [name, key] : kinds) {
    const gguf::Value* id = file.find(key);
    if (id != nullptr && *id->as_u64() < v.tokens.size())
      config[std::string(name) + "_token"] = v.tokens[*id->as_u64()];
  }
  for (const char* flag : {"bos", "eos"}) {
    const gguf::Value* add = file.find(std::string("tokenizer.ggml.add_") + flag + "_token");
    if (add != nullptr) config[std::string("add_") + flag + "_token"] = *add->as_bool();
  }
  return config;
}

TempDir::TempDir(const std::string& tag) {
  static std::atomic<int> counter{0};
  path_ = std::filesystem::temp_directory_path() /
          ("tern-hf-" + tag + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void TempDir::write(const std::string& name, const std::string& text) const {
  std::ofstream out(path_ / name, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + (path_ / name).string());
}

}  // namespace tern::test
