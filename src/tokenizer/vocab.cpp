#include "tokenizer/vocab.h"

#include <limits>

#include "gguf/reader.h"

namespace tern {

namespace {

constexpr const char* kKeyModel = "tokenizer.ggml.model";
constexpr const char* kKeyPre = "tokenizer.ggml.pre";
constexpr const char* kKeyTokens = "tokenizer.ggml.tokens";
constexpr const char* kKeyScores = "tokenizer.ggml.scores";
constexpr const char* kKeyTypes = "tokenizer.ggml.token_type";
constexpr const char* kKeyMerges = "tokenizer.ggml.merges";

Status invalid(const std::string& message) { return error(ErrorKind::InvalidFile, message); }

// An array-valued key: NotFound when absent (the caller decides if that is
// fine), InvalidFile when it is not an array.
Result<const gguf::Array*> find_array(const gguf::GgufFile& file, const char* key) {
  const gguf::Value* v = file.find(key);
  if (v == nullptr) return error(ErrorKind::NotFound, std::string("missing key ") + key);
  const gguf::Array* a = v->as_array();
  if (a == nullptr) return invalid(std::string(key) + " is not an array");
  return a;
}

Status check_length(const char* key, size_t n_items, size_t n_vocab) {
  if (n_items == n_vocab) return Status::ok();
  return invalid(std::string(key) + " has " + std::to_string(n_items) +
                 " entries but tokenizer.ggml.tokens has " + std::to_string(n_vocab));
}

Status read_tokens(const gguf::GgufFile& file, Vocab& v) {
  auto arr = find_array(file, kKeyTokens);
  TERN_RETURN_IF_ERROR(arr);
  const gguf::Array& a = **arr;
  if (a.items.empty()) return invalid(std::string(kKeyTokens) + " is empty");
  if (a.items.size() > static_cast<size_t>(std::numeric_limits<TokenId>::max()))
    return invalid(std::string(kKeyTokens) + " has too many entries");
  v.texts.reserve(a.items.size());
  for (size_t i = 0; i < a.items.size(); ++i) {
    const std::string* s = a.items[i].as_string();
    if (s == nullptr) return invalid(std::string(kKeyTokens) + "[" + std::to_string(i) + "] is not a string");
    v.texts.push_back(*s);
  }
  v.ids_by_text.reserve(v.texts.size());
  for (size_t i = 0; i < v.texts.size(); ++i) {
    if (!v.texts[i].empty()) v.ids_by_text.emplace(v.texts[i], static_cast<TokenId>(i));
  }
  return Status::ok();
}

Status read_scores_and_types(const gguf::GgufFile& file, Vocab& v) {
  const size_t n = v.texts.size();
  v.scores.assign(n, 0.0f);
  v.types.assign(n, TokenType::Normal);
  if (file.find(kKeyScores) != nullptr) {
    auto arr = find_array(file, kKeyScores);
    TERN_RETURN_IF_ERROR(arr);
    TERN_RETURN_IF_ERROR(check_length(kKeyScores, (*arr)->items.size(), n));
    for (size_t i = 0; i < n; ++i) {
      const gguf::Value& item = (*arr)->items[i];
      if (!item.is_float())
        return invalid(std::string(kKeyScores) + "[" + std::to_string(i) + "] is not a float");
      v.scores[i] = static_cast<float>(*item.as_f64());
    }
  }
  if (file.find(kKeyTypes) != nullptr) {
    auto arr = find_array(file, kKeyTypes);
    TERN_RETURN_IF_ERROR(arr);
    TERN_RETURN_IF_ERROR(check_length(kKeyTypes, (*arr)->items.size(), n));
    for (size_t i = 0; i < n; ++i) {
      const auto t = (*arr)->items[i].as_i64();
      if (!t) return invalid(std::string(kKeyTypes) + "[" + std::to_string(i) + "] is not an integer");
      // Values llama.cpp does not know are treated like it treats them: undefined.
      v.types[i] = (*t >= 0 && *t <= 6) ? static_cast<TokenType>(*t) : TokenType::Undefined;
    }
  }
  return Status::ok();
}

Status read_merges(const gguf::GgufFile& file, Vocab& v) {
  auto arr = find_array(file, kKeyMerges);
  if (!arr.is_ok()) {
    if (arr.status().kind() == ErrorKind::NotFound)
      return invalid(std::string("a BPE vocabulary needs ") + kKeyMerges + ", which is missing");
    return arr.status();
  }
  v.merges.reserve((*arr)->items.size());
  for (size_t i = 0; i < (*arr)->items.size(); ++i) {
    const std::string* s = (*arr)->items[i].as_string();
    if (s == nullptr) return invalid(std::string(kKeyMerges) + "[" + std::to_string(i) + "] is not a string");
    v.merges.push_back(*s);
  }
  return Status::ok();
}

// What llama.cpp's tools write for "no such token": -1 stored as a uint32
// (its llama2.c converter sets tokenizer.ggml.seperator_token_id and
// padding_token_id so for stories260K), which llama.cpp loads as no token.
constexpr uint64_t kNoTokenU32 = 0xFFFFFFFFu;

// An optional special-token id: -1 when absent or written as "none"
// (0xFFFFFFFF); an error when otherwise outside the vocabulary. A signed -1 is
// still refused: llama.cpp reads these keys as uint32 and would refuse it too.
Status read_special_id(const gguf::GgufFile& file, const char* key, size_t n_vocab, TokenId& id) {
  const gguf::Value* v = file.find(key);
  if (v == nullptr) return Status::ok();
  if (v->as_u64() == kNoTokenU32) {
    id = -1;
    return Status::ok();
  }
  auto value = file.get_u64(key);
  TERN_RETURN_IF_ERROR(value);
  if (*value >= n_vocab)
    return error(ErrorKind::OutOfRange, std::string(key) + " = " + std::to_string(*value) +
                                            " is outside the vocabulary of " + std::to_string(n_vocab) +
                                            " tokens");
  id = static_cast<TokenId>(*value);
  return Status::ok();
}

Status read_special_ids(const gguf::GgufFile& file, Vocab& v) {
  const size_t n = v.texts.size();
  TERN_RETURN_IF_ERROR(read_special_id(file, "tokenizer.ggml.bos_token_id", n, v.bos));
  TERN_RETURN_IF_ERROR(read_special_id(file, "tokenizer.ggml.eos_token_id", n, v.eos));
  TERN_RETURN_IF_ERROR(read_special_id(file, "tokenizer.ggml.unknown_token_id", n, v.unk));
  TERN_RETURN_IF_ERROR(
      read_special_id(file, "tokenizer.ggml.seperator_token_id", n, v.sep));  // sic: GGUF's spelling
  TERN_RETURN_IF_ERROR(read_special_id(file, "tokenizer.ggml.eot_token_id", n, v.eot));
  TERN_RETURN_IF_ERROR(read_special_id(file, "tokenizer.ggml.eom_token_id", n, v.eom));
  if (v.kind == VocabKind::WordPiece) {
    // BERT vocabularies name [CLS] and [SEP]; they play the parts of BOS and EOS.
    TokenId cls = -1;
    TERN_RETURN_IF_ERROR(read_special_id(file, "tokenizer.ggml.cls_token_id", n, cls));
    if (v.bos < 0) v.bos = cls;
    if (v.eos < 0) v.eos = v.sep;
  }
  if (v.unk < 0 && v.kind == VocabKind::Spm) v.unk = v.find("<unk>");
  return Status::ok();
}

Status read_flags(const gguf::GgufFile& file, Vocab& v) {
  const bool spm = v.kind == VocabKind::Spm;
  const bool wpm = v.kind == VocabKind::WordPiece;
  v.add_bos_from_file = file.find("tokenizer.ggml.add_bos_token") != nullptr;
  auto add_bos = file.get_bool_or("tokenizer.ggml.add_bos_token", spm || wpm);
  TERN_RETURN_IF_ERROR(add_bos);
  auto add_eos = file.get_bool_or("tokenizer.ggml.add_eos_token", wpm);
  TERN_RETURN_IF_ERROR(add_eos);
  auto add_space_prefix = file.get_bool_or("tokenizer.ggml.add_space_prefix", spm);
  TERN_RETURN_IF_ERROR(add_space_prefix);
  v.add_bos = *add_bos;
  v.add_eos = *add_eos;
  v.add_space_prefix = spm && *add_space_prefix;
  return Status::ok();
}

}  // namespace

Result<Vocab> load_vocab(const gguf::GgufFile& file) {
  Vocab v;
  auto model = file.get_string(kKeyModel);
  TERN_RETURN_IF_ERROR(model);
  v.model = *model;
  if (v.model == "llama")
    v.kind = VocabKind::Spm;
  else if (v.model == "gpt2")
    v.kind = VocabKind::Bpe;
  else if (v.model == "bert")
    v.kind = VocabKind::WordPiece;
  else
    return error(ErrorKind::Unsupported, std::string("unsupported ") + kKeyModel + "='" + v.model + "'");

  if (file.find(kKeyPre) != nullptr) {
    auto pre = file.get_string(kKeyPre);
    TERN_RETURN_IF_ERROR(pre);
    v.pre = *pre;
  }
  if (v.pre.empty()) v.pre = "default";

  TERN_RETURN_IF_ERROR(read_tokens(file, v));
  TERN_RETURN_IF_ERROR(read_scores_and_types(file, v));
  if (v.kind == VocabKind::Bpe) TERN_RETURN_IF_ERROR(read_merges(file, v));
  TERN_RETURN_IF_ERROR(read_special_ids(file, v));
  TERN_RETURN_IF_ERROR(read_flags(file, v));
  if (v.add_bos && v.bos < 0) v.add_bos = false;  // nothing to add
  if (v.add_eos && v.eos < 0) v.add_eos = false;
  return v;
}

}  // namespace tern
