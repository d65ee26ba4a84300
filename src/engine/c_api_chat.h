// engine/c_api_chat.h — the C API's chat messages rendered by a model's chat
// template (tokenizer/chat_template.h), shared by tern_chat_prompt (a model)
// and tern_engine_add_chat (an engine).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tern/status.h"
#include "tern/tern.h"

namespace tern::capi {

struct ChatRender {
  std::string template_source;  // "" when the file has none: ChatML
  std::string bos_token, eos_token;
  bool add_generation_prompt = true;
  // Applied to each message's content (special-token text quoted); null = as given.
  std::function<std::string(std::string_view)> client_text;
};

// The prompt text for `n` messages; InvalidArgument naming a NULL or empty
// role/content, or with the template's own message when it refuses.
Result<std::string> render_chat(const tern_chat_message* messages, size_t n, const ChatRender& how);

}  // namespace tern::capi
