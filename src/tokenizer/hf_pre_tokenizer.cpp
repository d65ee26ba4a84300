#include "tokenizer/hf_pre_tokenizer.h"

#include <filesystem>
#include <optional>
#include <vector>

#include "core/input_file.h"

namespace tern::hf {

const json* member(const json& obj, const char* key) { return obj.find(key); }

const std::string* string_member(const json& obj, const char* key) {
  const json* v = member(obj, key);
  return v != nullptr && v->is_string() ? &v->as_string() : nullptr;
}

bool bool_member(const json& obj, const char* key, bool fallback) {
  const json* v = member(obj, key);
  return v != nullptr && v->is_bool() ? v->as_bool() : fallback;
}

Result<json> read_json_file(const std::string& path, bool required) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    if (required) return error(ErrorKind::NotFound, path + " not found");
    return json();
  }
  auto text = read_file(path);
  TERN_RETURN_IF_ERROR(text);
  auto j = json::parse(*text);
  if (!j) return error(ErrorKind::InvalidFile, path + ": malformed JSON: " + j.status().message());
  return std::move(j).value();
}

namespace {

const std::string kSpace = "\xE2\x96\x81";  // ▁, SentencePiece's spelling of a space

Status unsupported(const std::string& what) { return error(ErrorKind::Unsupported, "tokenizer.json: " + what); }
Status invalid(const std::string& what) { return error(ErrorKind::InvalidFile, "tokenizer.json: " + what); }

// The regexes of our rule sets as tokenizer.json spells them (after canonical()).
// The GPT-2 regex is also what a ByteLevel pre-tokenizer with use_regex applies.
const std::string kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const std::string kContractionsAnyCase = R"((?i:'s|'t|'re|'ve|'m|'ll|'d))";
const std::string kLlama3 = kContractionsAnyCase +
                            R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kQwen2 =
    kContractionsAnyCase + R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kSeedCoder =
    kContractionsAnyCase + R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kUpperLower = R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)";
const std::string kUpperPlus = R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)";
const std::string kCasedTail = R"( ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kTekken = kUpperLower + "|" + kUpperPlus + R"(|\p{N}|)" + kCasedTail;
const std::string kO200k = kUpperLower + kContractionsAnyCase + "?|" + kUpperPlus + kContractionsAnyCase +
                           R"(?|\p{N}{1,3}|)" + kCasedTail;
const std::string kDeepseekLatin =
    R"(\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+)";
const std::string kDeepseekPunct = R"(\s?[!-/:-~！-／：-～‘-‟　-。]+)";
const std::string kDeepseekCjk = "[一-龥ࠀ-一가-퟿]+";
const std::string kDeepseek3Words =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kBloom = R"( ?[^(\s|.,!?…。，、।۔،)]+)";

enum class IgnoreMerges { Any, Yes, No };

struct Rule {
  const char* name;  // tokenizer.ggml.pre
  std::vector<std::string> steps;
  IgnoreMerges ignore_merges = IgnoreMerges::Any;
};

// One row per rule set of pre_tokenizer.cpp that a tokenizer.json can describe.
// The llama3 regex names two rule sets told apart by the model's ignore_merges.
const std::vector<Rule>& rules() {
  static const auto* table = new std::vector<Rule>{
      {"gpt-2", {kGpt2}},
      {"starcoder", {R"(\p{N})", kGpt2}},
      {"llama-bpe", {kLlama3}, IgnoreMerges::Yes},
      {"smaug-bpe", {kLlama3}, IgnoreMerges::No},
      {"qwen2", {kQwen2}},
      {"seed-coder", {kSeedCoder}},
      {"tekken", {kTekken}},
      {"gpt-4o", {kO200k}},
      {"deepseek-llm", {R"([\r\n])", kDeepseekLatin, kDeepseekPunct, R"(\s+$)", kDeepseekCjk, R"(\p{N}+)"}},
      {"deepseek-coder", {R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kDeepseekCjk, R"(\p{N})"}},
      {"deepseek-v3", {R"(\p{N}{1,3})", "[一-龥぀-ゟ゠-ヿ]+", kDeepseek3Words}},
      {"bloom", {kBloom}},
      {"viking", {kBloom, R"(\p{N})"}},
  };
  return *table;
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size())
    s.replace(pos, from.size(), to);
}

// One spelling per meaning: tokenizer.json files write CR/LF either escaped or
// as the characters themselves, and some spell the case-insensitive
// contractions or single digits differently. The GPT-2 regex without its final
// \s+ splits the same (what it leaves unmatched becomes a word of its own).
std::string canonical(std::string p) {
  replace_all(p, "\r", R"(\r)");
  replace_all(p, "\n", R"(\n)");
  replace_all(p, "\t", R"(\t)");
  replace_all(p, R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]))", kContractionsAnyCase);
  replace_all(p, R"(\p{N}{1}|)", R"(\p{N}|)");
  if (p + R"(|\s+)" == kGpt2) p = kGpt2;
  return p;
}

// Printable name of a step for error messages.
std::string describe(const std::string& step) { return "/" + step + "/"; }

// Appends the regexes one pre-tokenizer (possibly a Sequence) applies.
Status collect_steps(const json& pre, std::vector<std::string>& steps, bool& byte_level) {
  const std::string* type = string_member(pre, "type");
  if (type == nullptr) return invalid("a pre_tokenizer without a \"type\"");
  if (*type == "Sequence") {
    const json* list = member(pre, "pretokenizers");
    if (list == nullptr || !list->is_array()) return invalid("a Sequence pre_tokenizer without \"pretokenizers\"");
    for (const json& p : *list) TERN_RETURN_IF_ERROR(collect_steps(p, steps, byte_level));
    return Status::ok();
  }
  if (*type == "ByteLevel") {
    if (bool_member(pre, "add_prefix_space", false))
      return unsupported("ByteLevel pre_tokenizer with add_prefix_space=true (llama.cpp has no such rule)");
    byte_level = true;
    if (bool_member(pre, "use_regex", true)) steps.push_back(kGpt2);
    return Status::ok();
  }
  if (*type == "Digits") {
    steps.push_back(bool_member(pre, "individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)");
    return Status::ok();
  }
  if (*type == "Split") {
    const json* pattern = member(pre, "pattern");
    const std::string* regex = pattern != nullptr ? string_member(*pattern, "Regex") : nullptr;
    if (regex == nullptr) return unsupported("Split pre_tokenizer without a Regex pattern");
    const std::string* behavior = string_member(pre, "behavior");
    if (behavior == nullptr || *behavior != "Isolated" || bool_member(pre, "invert", false))
      return unsupported("Split pre_tokenizer " + describe(*regex) + " with behavior '" +
                         (behavior ? *behavior : std::string("?")) +
                         "' (only Isolated, not inverted, is supported)");
    steps.push_back(canonical(*regex));
    return Status::ok();
  }
  return unsupported("pre_tokenizer type '" + *type + "' is not supported for byte-level BPE");
}

Result<std::string> byte_level_pre_name(const json& model, const json* pre) {
  std::vector<std::string> steps;
  bool byte_level = false;
  if (pre != nullptr && !pre->is_null()) TERN_RETURN_IF_ERROR(collect_steps(*pre, steps, byte_level));
  if (!byte_level)
    return unsupported("a BPE model needs a ByteLevel pre_tokenizer or byte_fallback=true; this has neither");
  const bool ignore_merges = bool_member(model, "ignore_merges", false);
  for (const Rule& rule : rules()) {
    if (rule.steps != steps) continue;
    if (rule.ignore_merges == IgnoreMerges::Yes && !ignore_merges) continue;
    if (rule.ignore_merges == IgnoreMerges::No && ignore_merges) continue;
    return std::string(rule.name);
  }
  std::string listed;
  for (const std::string& s : steps) listed += (listed.empty() ? "" : ", ") + describe(s);
  if (steps.empty()) listed = "no split at all";
  return unsupported("pre-tokenizer [" + listed + "] matches none of our pre-tokenizer rules");
}

Status check_byte_level_normalizer(const json* norm) {
  if (norm == nullptr || norm->is_null()) return Status::ok();
  const std::string* type = string_member(*norm, "type");
  // NFC: llama.cpp converts such models (qwen2) without it; the input is expected to be NFC already.
  if (type != nullptr && *type == "NFC") return Status::ok();
  if (type != nullptr && *type == "Sequence") {  // deepseek-v3 has an empty one
    const json* list = member(*norm, "normalizers");
    if (list != nullptr && list->is_array()) {
      for (const json& n : *list) TERN_RETURN_IF_ERROR(check_byte_level_normalizer(&n));
      return Status::ok();
    }
  }
  return unsupported("normalizer '" + (type ? *type : std::string("?")) + "' is not supported for byte-level BPE");
}

// Replace(" " -> "▁") and Prepend("▁") steps of an SPM-style normalizer.
Status collect_spm_normalizer(const json& norm, bool& replaces_space, bool& prepends) {
  const std::string* type = string_member(norm, "type");
  if (type == nullptr) return invalid("a normalizer without a \"type\"");
  if (*type == "Sequence") {
    const json* list = member(norm, "normalizers");
    if (list == nullptr || !list->is_array()) return invalid("a Sequence normalizer without \"normalizers\"");
    for (const json& n : *list) TERN_RETURN_IF_ERROR(collect_spm_normalizer(n, replaces_space, prepends));
    return Status::ok();
  }
  if (*type == "Prepend") {
    const std::string* what = string_member(norm, "prepend");
    if (what == nullptr || *what != kSpace) return unsupported("Prepend normalizer of something other than ▁");
    prepends = true;
    return Status::ok();
  }
  if (*type == "Replace") {
    const json* pattern = member(norm, "pattern");
    const std::string* from = pattern != nullptr ? string_member(*pattern, "String") : nullptr;
    const std::string* to = string_member(norm, "content");
    if (from == nullptr || to == nullptr || *from != " " || *to != kSpace)
      return unsupported("Replace normalizer other than \" \" -> \"▁\"");
    replaces_space = true;
    return Status::ok();
  }
  return unsupported("normalizer '" + *type + "' is not supported for SentencePiece-style BPE");
}

bool is_split_at_space(const json& pre) {
  const std::string* type = string_member(pre, "type");
  const json* pattern = member(pre, "pattern");
  const std::string* text = pattern != nullptr ? string_member(*pattern, "String") : nullptr;
  return type != nullptr && *type == "Split" && text != nullptr && *text == " ";
}

Result<TokenizerKind> spm_kind(const json* norm, const json* pre) {
  bool replaces_space = false, prepends = false;
  if (norm != nullptr && !norm->is_null()) TERN_RETURN_IF_ERROR(collect_spm_normalizer(*norm, replaces_space, prepends));
  // Gemma 3 splits at " " after its normalizer has replaced every space: nothing to split.
  if (replaces_space && pre != nullptr && is_split_at_space(*pre)) pre = nullptr;
  if (pre != nullptr && !pre->is_null()) {
    const std::string* type = string_member(*pre, "type");
    if (type == nullptr || *type != "Metaspace")
      return unsupported("pre_tokenizer '" + (type ? *type : std::string("?")) +
                         "' is not supported for SentencePiece-style BPE (only Metaspace)");
    const std::string* replacement = string_member(*pre, "replacement");
    if (replacement == nullptr || *replacement != kSpace) return unsupported("Metaspace replacement other than ▁");
    replaces_space = true;
    // Newer files say prepend_scheme ("first", "always", "never"), older ones add_prefix_space.
    if (const std::string* scheme = string_member(*pre, "prepend_scheme"))
      prepends = prepends || *scheme != "never";
    else
      prepends = prepends || bool_member(*pre, "add_prefix_space", true);
  }
  if (!replaces_space)
    return unsupported("byte_fallback BPE whose spaces are not replaced by ▁ (no Replace normalizer or Metaspace)");
  return TokenizerKind{"llama", "default", prepends};
}

Result<TokenizerKind> wordpiece_kind(const json& model, const json* norm) {
  const std::string* prefix = string_member(model, "continuing_subword_prefix");
  if (prefix != nullptr && *prefix != "##")
    return unsupported("WordPiece continuing_subword_prefix '" + *prefix + "' (only ## is supported)");
  // Our WordPiece is BERT's uncased basic tokenizer: lower-cased, accents stripped.
  const std::string* type = norm != nullptr ? string_member(*norm, "type") : nullptr;
  if (type == nullptr || *type != "BertNormalizer" || !bool_member(*norm, "lowercase", true))
    return unsupported("WordPiece without an uncased BertNormalizer is not supported");
  return TokenizerKind{"bert", "default", false};
}

}  // namespace

Result<TokenizerKind> classify_tokenizer(const json& tokenizer) {
  const json* model = member(tokenizer, "model");
  if (model == nullptr || !model->is_object()) return invalid("no \"model\" object");
  const std::string* type = string_member(*model, "type");
  // Files written by older versions of tokenizers leave the BPE type out.
  const std::string model_type = type != nullptr ? *type : (member(*model, "merges") ? "BPE" : "");
  const json* norm = member(tokenizer, "normalizer");
  const json* pre = member(tokenizer, "pre_tokenizer");
  if (model_type == "BPE") {
    const std::string* suffix = string_member(*model, "end_of_word_suffix");
    const std::string* prefix = string_member(*model, "continuing_subword_prefix");
    if ((suffix != nullptr && !suffix->empty()) || (prefix != nullptr && !prefix->empty()))
      return unsupported("BPE with continuing_subword_prefix / end_of_word_suffix is not supported");
    if (bool_member(*model, "byte_fallback", false)) return spm_kind(norm, pre);
    TERN_RETURN_IF_ERROR(check_byte_level_normalizer(norm));
    auto name = byte_level_pre_name(*model, pre);
    TERN_RETURN_IF_ERROR(name);
    return TokenizerKind{"gpt2", *name, false};
  }
  if (model_type == "WordPiece") return wordpiece_kind(*model, norm);
  return unsupported("tokenizer model type '" + model_type + "' is not supported (only BPE and WordPiece)");
}

}  // namespace tern::hf
