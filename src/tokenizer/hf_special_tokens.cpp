#include "tokenizer/hf_special_tokens.h"

#include <filesystem>
#include <map>

#include "core/input_file.h"
#include "core/log.h"

namespace tern::hf {

int32_t TokenIndex::find(const std::string& text) const {
  for (const auto& [content, id] : added) {
    if (content == text) return id;
  }
  auto it = by_text.find(text);
  return it == by_text.end() ? -1 : it->second;
}

namespace {

struct SpecialKind {
  const char* name;  // as in tokenizer_config.json's NAME_token and config.json's NAME_token_id
  const char* key;   // GGUF key
};

constexpr SpecialKind kKinds[] = {
    {"bos", "tokenizer.ggml.bos_token_id"},       {"eos", "tokenizer.ggml.eos_token_id"},
    {"unk", "tokenizer.ggml.unknown_token_id"},   {"sep", "tokenizer.ggml.seperator_token_id"},  // sic
    {"pad", "tokenizer.ggml.padding_token_id"},   {"cls", "tokenizer.ggml.cls_token_id"},
    {"mask", "tokenizer.ggml.mask_token_id"},
};

// tokenizer_config.json writes a special token as its text or as {"content": text, ...}.
const std::string* config_token_text(const json& config, const std::string& key) {
  const json* v = member(config, key.c_str());
  if (v == nullptr) return nullptr;
  if (v->is_string()) return &v->as_string();
  return string_member(*v, "content");
}

// An id from config.json / generation_config.json: an int, or a list whose first id counts
// (generation_config.json lists every end-of-generation id; llama.cpp keeps only one EOS too).
// Multimodal configs keep them under text_config.
const json* config_id(const json& config, const std::string& key) {
  const json* v = member(config, key.c_str());
  if (v == nullptr) {
    if (const json* text = member(config, "text_config")) v = member(*text, key.c_str());
  }
  if (v != nullptr && v->is_array() && !v->empty()) v = &v->as_array().front();
  return v != nullptr && v->is_integer() ? v : nullptr;
}

using Texts = std::map<std::string, std::string>;  // kind -> token text

const std::string* special_token_id(const json& item) {
  const json* special = member(item, "SpecialToken");
  return special != nullptr ? string_member(*special, "id") : nullptr;
}

// The post-processor's template says which special tokens frame a single
// sequence: a leading BOS/CLS means add_bos, a trailing EOS means add_eos.
void apply_post_processor(const json& post, Texts& texts, SpecialTokens& out) {
  std::vector<const json*> processors;
  const json* list = member(post, "processors");
  if (list != nullptr && list->is_array()) {
    for (const json& p : *list) processors.push_back(&p);
  } else {
    processors.push_back(&post);
  }
  for (const json* p : processors) {
    const std::string* type = string_member(*p, "type");
    if (type == nullptr) continue;
    if (*type == "RobertaProcessing") {
      out.add_bos = true;
      out.add_eos = true;
      continue;
    }
    if (*type != "TemplateProcessing") continue;
    const json* single = member(*p, "single");
    if (single == nullptr || !single->is_array() || single->size() < 2) continue;
    if (const std::string* first = special_token_id(single->as_array().front())) {
      if (!texts.count("bos")) texts["bos"] = *first;
      out.add_bos = *first == texts["bos"] || (texts.count("cls") && *first == texts["cls"]);
    }
    if (const std::string* last = special_token_id(single->as_array().back())) {
      if (!texts.count("eos")) texts["eos"] = *last;
      out.add_eos = *last == texts["eos"];
    }
  }
}

void set_from_config(const json& config, const char* file, const SpecialKind& kind, const TokenIndex& index,
                     std::map<std::string, int64_t>& ids) {
  if (ids.count(kind.name)) return;
  const json* v = config_id(config, std::string(kind.name) + "_token_id");
  if (v == nullptr) return;
  const int64_t id = v->to_int64().value_or(-1);  // above INT64_MAX: outside, as below
  if (id < 0 || id >= index.n_vocab) {
    TERN_LOG_WARN("%s: %s_token_id %lld is outside the vocabulary of %d tokens; ignored", file, kind.name,
                  static_cast<long long>(id), index.n_vocab);
    return;
  }
  ids[kind.name] = id;
}

}  // namespace

Result<SpecialTokens> read_special_tokens(const ModelFiles& files, const TokenIndex& index) {
  SpecialTokens out;
  Texts texts;
  for (const SpecialKind& kind : kKinds) {
    if (const std::string* t = config_token_text(files.tokenizer_config, std::string(kind.name) + "_token"))
      texts[kind.name] = *t;
  }
  // BERT-style configs name only CLS and SEP; they play BOS and EOS.
  if (!texts.count("bos") && texts.count("cls")) texts["bos"] = texts["cls"];
  if (!texts.count("eos") && texts.count("sep")) texts["eos"] = texts["sep"];
  if (const json* post = member(files.tokenizer, "post_processor")) apply_post_processor(*post, texts, out);
  for (const char* flag : {"bos", "eos"}) {
    const json* v = member(files.tokenizer_config, (std::string("add_") + flag + "_token").c_str());
    if (v == nullptr || !v->is_bool()) continue;
    (std::string(flag) == "bos" ? out.add_bos : out.add_eos) = v->as_bool();
  }

  std::map<std::string, int64_t> ids;
  for (const SpecialKind& kind : kKinds) {
    auto it = texts.find(kind.name);
    if (it == texts.end()) continue;
    const int32_t id = index.find(it->second);
    if (id >= 0)
      ids[kind.name] = id;
    else
      TERN_LOG_WARN("%s/tokenizer_config.json: %s_token '%s' is not a token; ignored", files.dir.c_str(), kind.name,
                    it->second.c_str());
  }
  for (const SpecialKind& kind : kKinds) {
    set_from_config(files.config, "config.json", kind, index, ids);
    set_from_config(files.generation_config, "generation_config.json", kind, index, ids);
  }
  if (!ids.count("unk")) {
    const json* model = member(files.tokenizer, "model");
    const std::string* unk = model != nullptr ? string_member(*model, "unk_token") : nullptr;
    if (unk != nullptr && index.find(*unk) >= 0) ids["unk"] = index.find(*unk);
  }
  for (const SpecialKind& kind : kKinds) {
    auto it = ids.find(kind.name);
    if (it != ids.end()) out.ids.emplace_back(kind.key, static_cast<uint32_t>(it->second));
  }
  return out;
}

namespace {

// llama.cpp keeps template names to ASCII letters, digits and '_'.
std::string template_key_name(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!ok) c = '_';
  }
  return out;
}

}  // namespace

Result<std::vector<std::pair<std::string, gguf::Value>>> read_chat_templates(const ModelFiles& files) {
  std::vector<std::pair<std::string, gguf::Value>> out;
  json alt;
  const json* tmpl = member(files.tokenizer_config, "chat_template");
  std::string where = files.dir + "/tokenizer_config.json";
  if (tmpl == nullptr || tmpl->is_null()) {
    const std::string jinja = files.dir + "/chat_template.jinja";
    std::error_code ec;
    if (std::filesystem::exists(jinja, ec)) {
      auto text = read_file(jinja);
      TERN_RETURN_IF_ERROR(text);
      alt = *text;
    } else {
      auto j = read_json_file(files.dir + "/chat_template.json", false);
      TERN_RETURN_IF_ERROR(j);
      if (const json* t = member(*j, "chat_template")) alt = *t;
      where = files.dir + "/chat_template.json";
    }
    tmpl = &alt;
  }
  if (tmpl->is_null()) return out;
  if (tmpl->is_string()) {
    out.emplace_back("tokenizer.chat_template", gguf::Value::of_string(tmpl->as_string()));
    return out;
  }
  if (!tmpl->is_array())
    return error(ErrorKind::InvalidFile, where + ": chat_template is neither a string nor a list of templates");
  std::vector<std::string> names;
  const std::string* default_template = nullptr;
  for (const json& choice : *tmpl) {
    const std::string* name = string_member(choice, "name");
    const std::string* text = string_member(choice, "template");
    if (name == nullptr || name->empty() || text == nullptr) continue;
    const std::string key = template_key_name(*name);
    if (key == "default") {
      default_template = text;
    } else {
      names.push_back(key);
      out.emplace_back("tokenizer.chat_template." + key, gguf::Value::of_string(*text));
    }
  }
  if (!names.empty()) out.emplace_back("tokenizer.chat_templates", gguf::Value::of_strings(names));
  if (default_template != nullptr)
    out.emplace_back("tokenizer.chat_template", gguf::Value::of_string(*default_template));
  return out;
}

}  // namespace tern::hf
