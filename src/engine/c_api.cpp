// engine/c_api.cpp — include/tern/tern.h: errors, handles, versions, models
// and the tokenizer (the engine's half is c_api_engine.cpp).
#include <algorithm>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "engine/c_api_chat.h"
#include "engine/c_api_model.h"
#include "engine/c_api_util.h"
#include "model/hf_model.h"
#include "tokenizer/tokenizer.h"

namespace tern::capi {
namespace {

thread_local std::string t_last_error;

struct Registry {
  std::mutex mu;
  std::unordered_set<const void*> live;
};

// The size-query contract of tern_tokenize / _detokenize / tern_chat_prompt:
// the count always written, the items only when they fit.
template <typename T>
tern_status copy_out(std::span<const T> items, T* out, size_t capacity, size_t* n, const char* what, const char* unit) {
  *n = items.size();
  if (items.size() > capacity)
    return fail(TERN_E_BUFFER_TOO_SMALL, std::string(what) + ": " + std::to_string(items.size()) + " " + unit +
                                             ", room for " + std::to_string(capacity));
  std::copy(items.begin(), items.end(), out);
  return TERN_OK;
}

Registry& registry() {
  // Never destroyed: a handle may be freed from another static's destructor.
  static Registry* r = new Registry();
  return *r;
}

}  // namespace

tern_status fail(tern_status status, std::string message) {
  t_last_error = std::move(message);
  return status;
}

tern_status status_of(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Ok: return TERN_OK;
    case ErrorKind::InvalidArgument: return TERN_E_INVALID_ARGUMENT;
    case ErrorKind::InvalidFile: return TERN_E_INVALID_FILE;
    case ErrorKind::NotFound: return TERN_E_NOT_FOUND;
    case ErrorKind::Unsupported: return TERN_E_UNSUPPORTED;
    case ErrorKind::IoError: return TERN_E_IO;
    case ErrorKind::OutOfRange: return TERN_E_OUT_OF_RANGE;
    case ErrorKind::Unavailable: return TERN_E_UNAVAILABLE;
    case ErrorKind::Internal: return TERN_E_INTERNAL;
  }
  return TERN_E_INTERNAL;
}

tern_status fail(const Status& status) { return fail(status_of(status.kind()), status.message()); }

void register_handle(const void* handle) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  r.live.insert(handle);
}

bool unregister_handle(const void* handle) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  return r.live.erase(handle) > 0;
}

bool is_live(const void* handle) {
  if (!handle) return false;
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  return r.live.count(handle) > 0;
}

tern_status bad_handle(const char* what) {
  return fail(TERN_E_BAD_HANDLE, std::string(what) + " is not a live handle (NULL, already freed, or not made by tern)");
}

}  // namespace tern::capi

using namespace tern;
using namespace tern::capi;

extern "C" {

uint32_t tern_abi_version(void) { return TERN_ABI_VERSION; }

const char* tern_version(void) { return TERN_VERSION_STRING; }

const char* tern_last_error(void) { return t_last_error.c_str(); }

const char* tern_status_name(tern_status status) {
  switch (status) {
    case TERN_OK: return "ok";
    case TERN_E_INVALID_ARGUMENT: return "invalid_argument";
    case TERN_E_NOT_FOUND: return "not_found";
    case TERN_E_INVALID_FILE: return "invalid_file";
    case TERN_E_UNSUPPORTED: return "unsupported";
    case TERN_E_IO: return "io";
    case TERN_E_OUT_OF_RANGE: return "out_of_range";
    case TERN_E_UNAVAILABLE: return "unavailable";
    case TERN_E_BUFFER_TOO_SMALL: return "buffer_too_small";
    case TERN_E_TIMEOUT: return "timeout";
    case TERN_E_BAD_HANDLE: return "bad_handle";
    case TERN_E_OUT_OF_MEMORY: return "out_of_memory";
    case TERN_E_INTERNAL: return "internal";
  }
  return "unknown";
}

tern_status tern_model_load(const char* path, tern_model** out) {
  return guard([&] {
    if (!out) return fail(TERN_E_INVALID_ARGUMENT, "tern_model_load: out is NULL");
    *out = nullptr;
    if (!path || !*path) return fail(TERN_E_INVALID_ARGUMENT, "tern_model_load: no path given");
    auto file = hf::open_model_file(path);
    if (!file) return fail(file.status());
    auto tokenizer = Tokenizer::from_gguf(*file);
    if (!tokenizer) return fail(tokenizer.status().with_context(path));
    std::string arch, chat_template;
    int32_t n_ctx_train = 0;
    if (auto t = file->get_string("tokenizer.chat_template")) chat_template = *t;
    if (auto a = file->get_string("general.architecture")) {
      arch = *a;
      auto ctx = file->get_u64_or(arch + ".context_length", 0);
      if (ctx) n_ctx_train = static_cast<int32_t>(std::min<uint64_t>(*ctx, INT32_MAX));
    }
    std::string owned_path = path;
    tern_model* handle = make_handle<tern_model>();  // what follows only moves: nothing throws
    handle->path = std::move(owned_path);
    handle->tokenizer = std::move(tokenizer).value();
    handle->arch = std::move(arch);
    handle->n_ctx_train = n_ctx_train;
    handle->chat_template = std::move(chat_template);
    publish(handle, out);
    return TERN_OK;
  });
}

void tern_model_free(tern_model* model) {
  if (!model || !unregister_handle(model)) return;
  destroy_handle(model);
}

int32_t tern_model_n_vocab(const tern_model* model) {
  return is_live(model) ? model->tokenizer->n_vocab() : -1;
}

int32_t tern_model_n_ctx_train(const tern_model* model) { return is_live(model) ? model->n_ctx_train : -1; }

int32_t tern_model_bos(const tern_model* model) { return is_live(model) ? model->tokenizer->bos_id() : -1; }

int32_t tern_model_eos(const tern_model* model) { return is_live(model) ? model->tokenizer->eos_id() : -1; }

const char* tern_model_arch(const tern_model* model) { return is_live(model) ? model->arch.c_str() : ""; }

tern_status tern_tokenize(const tern_model* model, const char* text, size_t len, int add_special, int32_t* tokens,
                          size_t capacity, size_t* n_tokens) {
  return guard([&] {
    if (!is_live(model)) return bad_handle("tern_tokenize: model");
    if (!n_tokens) return fail(TERN_E_INVALID_ARGUMENT, "tern_tokenize: n_tokens is NULL");
    if (!text && len > 0) return fail(TERN_E_INVALID_ARGUMENT, "tern_tokenize: text is NULL");
    if (!tokens && capacity > 0) return fail(TERN_E_INVALID_ARGUMENT, "tern_tokenize: tokens is NULL with capacity > 0");
    const std::vector<TokenId> ids =
        model->tokenizer->encode(std::string_view(text ? text : "", len), add_special != 0, add_special != 0);
    return copy_out(std::span<const int32_t>(ids), tokens, capacity, n_tokens, "tern_tokenize", "tokens");
  });
}

tern_status tern_detokenize(const tern_model* model, const int32_t* tokens, size_t n_tokens, char* text,
                            size_t capacity, size_t* len) {
  return guard([&] {
    if (!is_live(model)) return bad_handle("tern_detokenize: model");
    if (!len) return fail(TERN_E_INVALID_ARGUMENT, "tern_detokenize: len is NULL");
    if (!tokens && n_tokens > 0) return fail(TERN_E_INVALID_ARGUMENT, "tern_detokenize: tokens is NULL");
    if (!text && capacity > 0) return fail(TERN_E_INVALID_ARGUMENT, "tern_detokenize: text is NULL with capacity > 0");
    const Tokenizer& tok = *model->tokenizer;
    std::vector<TokenId> ids(n_tokens);
    for (size_t i = 0; i < n_tokens; ++i) {
      if (tokens[i] < 0 || tokens[i] >= tok.n_vocab())
        return fail(TERN_E_INVALID_ARGUMENT, "tern_detokenize: token " + std::to_string(tokens[i]) + " at " +
                                                 std::to_string(i) + " is outside the vocabulary (0.." +
                                                 std::to_string(tok.n_vocab() - 1) + ")");
      ids[i] = tokens[i];
    }
    const std::string s = tok.decode(ids);
    return copy_out(std::span<const char>(s), text, capacity, len, "tern_detokenize", "bytes");
  });
}

tern_status tern_chat_prompt(const tern_model* model, const tern_chat_message* messages, size_t n_messages,
                             int add_generation_prompt, char* text, size_t capacity, size_t* len) {
  return guard([&] {
    if (!is_live(model)) return bad_handle("tern_chat_prompt: model");
    if (!len) return fail(TERN_E_INVALID_ARGUMENT, "tern_chat_prompt: len is NULL");
    if (!text && capacity > 0) return fail(TERN_E_INVALID_ARGUMENT, "tern_chat_prompt: text is NULL with capacity > 0");
    const Tokenizer& tok = *model->tokenizer;
    ChatRender how;
    how.template_source = model->chat_template;
    if (tok.bos_id() >= 0) how.bos_token = tok.token_text(tok.bos_id());
    if (tok.eos_id() >= 0) how.eos_token = tok.token_text(tok.eos_id());
    how.add_generation_prompt = add_generation_prompt != 0;
    auto s = render_chat(messages, n_messages, how);
    if (!s) return fail(s.status().with_context("tern_chat_prompt"));
    return copy_out(std::span<const char>(*s), text, capacity, len, "tern_chat_prompt", "bytes");
  });
}

}  // extern "C"
