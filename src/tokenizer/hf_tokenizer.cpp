#include "tokenizer/hf_tokenizer.h"

#include <algorithm>
#include <filesystem>

#include "core/log.h"
#include "tokenizer/hf_pre_tokenizer.h"
#include "tokenizer/hf_special_tokens.h"
#include "core/utf8.h"

namespace tern {

namespace {

using hf::json;

// llama.cpp's token types (see vocab.h).
constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6;
// Far more than any real vocabulary (the largest are about 256k); with the bound on holes below,
// a corrupt id or vocab_size cannot make us allocate more than a small multiple of the file.
constexpr int64_t kMaxTokens = int64_t{1} << 22;
constexpr int64_t kMaxHoles = 65536;
const std::string kSpace = "\xE2\x96\x81";  // ▁

struct Token {
  std::string text;
  int32_t type = kNormal;
  bool present = false;
  bool added = false;
  bool special = false;
};

struct Assembled {
  int64_t id_limit = 0;  // ids must be below: the file's entries twice over, plus some holes
  std::vector<Token> tokens;
  hf::TokenIndex index;
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
};

Status invalid(const hf::ModelFiles& f, const std::string& what) {
  return error(ErrorKind::InvalidFile, f.dir + "/tokenizer.json: " + what);
}

Result<int32_t> token_id(const hf::ModelFiles& f, const json& v, const std::string& text, int64_t limit) {
  if (!v.is_integer()) return invalid(f, "the id of '" + text + "' is not an integer");
  const int64_t id = v.to_int64().value_or(INT64_MAX);  // above INT64_MAX: out of range below
  if (id < 0 || id >= limit)
    return invalid(f, "the id " + std::to_string(id) + " of '" + text + "' is out of range (the file has " +
                          "far fewer tokens)");
  return static_cast<int32_t>(id);
}

// Two vocabulary entries with one id are an error. An added token may take over a vocabulary
// entry's id with new text: Hugging Face then decodes the id as the added token, and llama.cpp's
// converter writes the added text too.
Status place(const hf::ModelFiles& f, std::vector<Token>& tokens, int32_t id, const std::string& text, bool added) {
  if (static_cast<size_t>(id) >= tokens.size()) tokens.resize(static_cast<size_t>(id) + 1);
  Token& t = tokens[static_cast<size_t>(id)];
  if (t.present && t.text != text) {
    if (!added || t.added)
      return invalid(f, "id " + std::to_string(id) + " is given to both '" + t.text + "' and '" + text + "'");
    TERN_LOG_WARN("%s/tokenizer.json: added token '%s' replaces '%s' as id %d", f.dir.c_str(), text.c_str(),
                  t.text.c_str(), id);
  }
  t.text = text;
  t.present = true;
  return Status::ok();
}

Status read_model_vocab(const hf::ModelFiles& f, const json& model, Assembled& a) {
  const json* vocab = hf::member(model, "vocab");
  if (vocab == nullptr || !vocab->is_object()) return invalid(f, "model.vocab is not an object of token -> id");
  for (const auto& [key, value] : vocab->distinct_members()) {  // a token listed twice: its last id
    const std::string text(key);
    auto id = token_id(f, *value, text, a.id_limit);
    TERN_RETURN_IF_ERROR(id);
    TERN_RETURN_IF_ERROR(place(f, a.tokens, *id, text, false));
  }
  return Status::ok();
}

// Added tokens may repeat a vocabulary entry (same id and text) or extend the vocabulary.
Status read_added_tokens(const hf::ModelFiles& f, Assembled& a) {
  const json* added = hf::member(f.tokenizer, "added_tokens");
  if (added == nullptr || added->is_null()) return Status::ok();
  if (!added->is_array()) return invalid(f, "added_tokens is not a list");
  for (const json& entry : *added) {
    const std::string* content = hf::string_member(entry, "content");
    const json* id_value = hf::member(entry, "id");
    if (content == nullptr || id_value == nullptr) return invalid(f, "an added token without content or id");
    auto id = token_id(f, *id_value, *content, a.id_limit);
    TERN_RETURN_IF_ERROR(id);
    TERN_RETURN_IF_ERROR(place(f, a.tokens, *id, *content, true));
    Token& t = a.tokens[static_cast<size_t>(*id)];
    t.added = true;
    t.special = hf::bool_member(entry, "special", false);
    a.index.added.emplace_back(*content, *id);
  }
  return Status::ok();
}

// config.json's vocab_size is the embedding's row count; llama.cpp pads the vocabulary to it.
Result<size_t> vocab_size(const hf::ModelFiles& f, size_t n_tokens) {
  const json* v = hf::member(f.config, "vocab_size");
  if (v == nullptr) {
    if (const json* text = hf::member(f.config, "text_config")) v = hf::member(*text, "vocab_size");
  }
  if (v == nullptr || !v->is_integer()) return n_tokens;
  const int64_t n = v->to_int64().value_or(INT64_MAX);
  if (n < static_cast<int64_t>(n_tokens) || n > kMaxTokens)
    return error(ErrorKind::InvalidFile, f.dir + "/config.json: vocab_size " + std::to_string(n) +
                                             " does not hold the tokenizer's " + std::to_string(n_tokens) +
                                             " token ids");
  return static_cast<size_t>(n);
}

// Merges come as "left right" strings or, since tokenizers 0.20, as [left, right] pairs.
Status read_merges(const hf::ModelFiles& f, const json& model, Assembled& a) {
  const json* merges = hf::member(model, "merges");
  if (merges == nullptr || merges->is_null()) return Status::ok();
  if (!merges->is_array()) return invalid(f, "model.merges is not a list");
  a.merges.reserve(merges->size());
  for (size_t i = 0; i < merges->size(); ++i) {
    const json& m = (*merges)[i];
    std::string left, right;
    if (m.is_string()) {
      const std::string& s = m.as_string();
      const size_t sep = s.find(' ');
      if (sep == std::string::npos || s.find(' ', sep + 1) != std::string::npos)
        return invalid(f, "merge #" + std::to_string(i) + " '" + s + "' is not two tokens separated by a space");
      left = s.substr(0, sep);
      right = s.substr(sep + 1);
    } else if (m.is_array() && m.size() == 2 && m.as_array()[0].is_string() && m.as_array()[1].is_string()) {
      left = m.as_array()[0].as_string();
      right = m.as_array()[1].as_string();
    } else {
      return invalid(f, "merge #" + std::to_string(i) + " is neither \"a b\" nor [\"a\", \"b\"]");
    }
    for (const std::string* part : {&left, &right}) {
      if (!a.index.by_text.count(*part))
        return invalid(f, "merge #" + std::to_string(i) + " names '" + *part + "', which is not in the vocabulary");
    }
    if (!a.index.by_text.count(left + right))
      return invalid(f, "merge #" + std::to_string(i) + " makes '" + left + right +
                            "', which is not in the vocabulary");
    a.merges.emplace_back(std::move(left), std::move(right));
  }
  return Status::ok();
}

// llama.cpp's does_token_look_special: added tokens some models forget to mark special.
bool looks_special(const std::string& t) {
  auto wrapped = [&](const std::string& open, const std::string& close) {
    return t.size() >= open.size() + close.size() && t.starts_with(open) && t.ends_with(close);
  };
  return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" || wrapped("<|", "|>") ||
         wrapped("<\xEF\xBD\x9C", "\xEF\xBD\x9C>") || wrapped("<unused", ">");
}

bool is_byte_token(const std::string& t) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f'); };
  return t.size() == 6 && t.starts_with("<0x") && t[5] == '>' && hex(t[3]) && hex(t[4]);
}

void assign_types(const std::string& model, const std::string* unk, std::vector<Token>& tokens) {
  for (Token& t : tokens) {
    if (!t.present) {
      t.type = kUnused;
    } else if (model == "llama") {
      if (is_byte_token(t.text))
        t.type = kByte;
      else if (unk != nullptr && t.text == *unk)
        t.type = kUnknown;
      else if (t.added)
        t.type = t.special || looks_special(t.text) ? kControl : kUserDefined;
      else
        t.type = kNormal;
    } else if (t.added) {
      t.type = t.special || looks_special(t.text) ? kControl : kUserDefined;
    } else {
      t.type = kNormal;
    }
  }
}

// tokenizer.json has no SentencePiece scores; the merge order carries them. A
// token scores -(rank + 1) of the first merge that makes it, so SPM's
// best-score-first merging follows the merge ranks. Tokens no merge makes keep
// 0 (bytes, specials, single characters, which SPM never merges into), except
// longer ordinary ones, which get the lowest score so they merge last.
std::vector<float> spm_scores(const Assembled& a) {
  std::vector<float> scores(a.tokens.size(), 0.0f);
  std::vector<bool> scored(a.tokens.size(), false);
  for (size_t r = 0; r < a.merges.size(); ++r) {
    const int32_t id = a.index.by_text.at(a.merges[r].first + a.merges[r].second);
    if (scored[static_cast<size_t>(id)]) continue;
    scored[static_cast<size_t>(id)] = true;
    scores[static_cast<size_t>(id)] = -static_cast<float>(r + 1);
  }
  for (size_t i = 0; i < a.tokens.size(); ++i) {
    const Token& t = a.tokens[i];
    const bool single_char =
        !t.text.empty() && utf8::sequence_length(static_cast<uint8_t>(t.text[0])) == static_cast<int>(t.text.size());
    if (!scored[i] && (t.type == kNormal || t.type == kUserDefined) && !single_char) scores[i] = -1e9f;
  }
  return scores;
}

// llama.cpp's BERT spelling: word-initial pieces start with ▁, "##" continuations lose the prefix.
void wordpiece_spelling(std::vector<Token>& tokens) {
  for (Token& t : tokens) {
    if (!t.present || t.type == kControl) continue;
    t.text = t.text.starts_with("##") ? t.text.substr(2) : kSpace + t.text;
  }
}

// A space inside a merge part cannot be written in "left right" form; llama.cpp writes it as U+0120.
std::string merge_part(const std::string& part) {
  std::string out;
  for (char c : part) {
    if (c == ' ')
      out += "\xC4\xA0";
    else
      out.push_back(c);
  }
  return out;
}

Result<hf::ModelFiles> read_files(const std::string& dir) {
  hf::ModelFiles f;
  f.dir = dir;
  std::error_code ec;
  if (!std::filesystem::exists(dir + "/tokenizer.json", ec) && std::filesystem::exists(dir + "/tokenizer.model", ec))
    return error(ErrorKind::Unsupported, dir + " has tokenizer.model (SentencePiece) but no tokenizer.json, " +
                                             "the only tokenizer format read here");
  auto tokenizer = hf::read_json_file(dir + "/tokenizer.json", true);
  TERN_RETURN_IF_ERROR(tokenizer);
  f.tokenizer = std::move(tokenizer).value();
  if (!f.tokenizer.is_object()) return invalid(f, "not a JSON object");
  for (auto [name, slot] : {std::pair{"tokenizer_config.json", &f.tokenizer_config},
                            std::pair{"config.json", &f.config},
                            std::pair{"generation_config.json", &f.generation_config}}) {
    auto j = hf::read_json_file(dir + "/" + name, false);
    TERN_RETURN_IF_ERROR(j);
    if (!j->is_null() && !j->is_object())
      return error(ErrorKind::InvalidFile, dir + "/" + name + ": not a JSON object");
    *slot = std::move(j).value();
  }
  return f;
}

}  // namespace

Result<std::vector<std::pair<std::string, gguf::Value>>> read_hf_tokenizer(const std::string& dir) {
  auto files = read_files(dir);
  TERN_RETURN_IF_ERROR(files);
  const hf::ModelFiles& f = *files;
  auto kind = hf::classify_tokenizer(f.tokenizer);
  if (!kind.is_ok()) return kind.status().with_context(dir);
  const json& model = *hf::member(f.tokenizer, "model");

  Assembled a;
  const json* vocab = hf::member(model, "vocab");
  const json* added = hf::member(f.tokenizer, "added_tokens");
  const size_t n_entries = (vocab != nullptr ? vocab->size() : 0) + (added != nullptr ? added->size() : 0);
  a.id_limit = std::min<int64_t>(kMaxTokens, 2 * static_cast<int64_t>(n_entries) + kMaxHoles);
  TERN_RETURN_IF_ERROR(read_model_vocab(f, model, a));
  TERN_RETURN_IF_ERROR(read_added_tokens(f, a));
  if (a.tokens.empty()) return invalid(f, "the vocabulary is empty");
  auto n_vocab = vocab_size(f, a.tokens.size());
  TERN_RETURN_IF_ERROR(n_vocab);
  a.tokens.resize(*n_vocab);
  assign_types(kind->model, hf::string_member(model, "unk_token"), a.tokens);
  if (kind->model == "bert") wordpiece_spelling(a.tokens);
  for (size_t i = 0; i < a.tokens.size(); ++i) {
    Token& t = a.tokens[i];
    if (!t.present) t.text = "[PAD" + std::to_string(i) + "]";
    a.index.by_text.emplace(t.text, static_cast<int32_t>(i));
  }
  a.index.n_vocab = static_cast<int32_t>(a.tokens.size());
  if (kind->model != "bert") TERN_RETURN_IF_ERROR(read_merges(f, model, a));

  std::vector<std::string> texts;
  std::vector<int32_t> types;
  texts.reserve(a.tokens.size());
  types.reserve(a.tokens.size());
  for (const Token& t : a.tokens) {
    texts.push_back(t.text);
    types.push_back(t.type);
  }

  std::vector<std::pair<std::string, gguf::Value>> out;
  out.emplace_back("tokenizer.ggml.model", gguf::Value::of_string(kind->model));
  out.emplace_back("tokenizer.ggml.pre", gguf::Value::of_string(kind->pre));
  out.emplace_back("tokenizer.ggml.tokens", gguf::Value::of_strings(texts));
  if (kind->model == "llama") out.emplace_back("tokenizer.ggml.scores", gguf::Value::of_f32s(spm_scores(a)));
  out.emplace_back("tokenizer.ggml.token_type", gguf::Value::of_i32s(types));
  if (kind->model == "llama" && !kind->add_space_prefix)
    out.emplace_back("tokenizer.ggml.add_space_prefix", gguf::Value::of_bool(false));
  if (kind->model == "gpt2") {
    std::vector<std::string> merges;
    merges.reserve(a.merges.size());
    for (const auto& [left, right] : a.merges) merges.push_back(merge_part(left) + " " + merge_part(right));
    out.emplace_back("tokenizer.ggml.merges", gguf::Value::of_strings(merges));
  }

  auto specials = hf::read_special_tokens(f, a.index);
  TERN_RETURN_IF_ERROR(specials);
  for (const auto& [key, id] : specials->ids) out.emplace_back(key, gguf::Value::of_u32(id));
  if (specials->add_bos) out.emplace_back("tokenizer.ggml.add_bos_token", gguf::Value::of_bool(*specials->add_bos));
  if (specials->add_eos) out.emplace_back("tokenizer.ggml.add_eos_token", gguf::Value::of_bool(*specials->add_eos));
  auto templates = hf::read_chat_templates(f);
  TERN_RETURN_IF_ERROR(templates);
  for (auto& kv : *templates) out.push_back(std::move(kv));
  return out;
}

}  // namespace tern
