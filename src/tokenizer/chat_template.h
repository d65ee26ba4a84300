// tokenizer/chat_template.h — turning a chat (system/user/assistant/tool messages) into the
// prompt text a model was trained on, by rendering the Jinja template stored in its GGUF
// `tokenizer.chat_template`, as /v1/chat/completions needs.
//
// Contract:
//  - We interpret our own Jinja subset (see docs/chat_template.md): the statements, operators,
//    filters, tests and methods that real chat templates use (Llama 2/3/3.1, Mistral v0.1–v0.3,
//    Qwen2, Gemma, Phi-3, ChatML). Rendering follows Hugging Face transformers: trim_blocks and
//    lstrip_blocks on, Python semantics for str(), ==, truthiness and tojson.
//  - parse() checks the whole template once, so an unsupported construct fails at load time
//    with InvalidArgument naming line and column, not on a later request.
//  - render() returns InvalidArgument with the template's own message for raise_exception(...)
//    (e.g. "roles must alternate") and for type errors; OutOfRange when a render passes the
//    limits below. A hostile template can neither crash the process nor run unbounded.
//  - Undefined variables are falsy and render as "", as in Jinja.
//  - Threading: a ChatTemplate is immutable after parse(); render() may run concurrently.
//    Copies share the parsed program.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace tern {

namespace jinja {
struct Program;
}

struct ChatMessage {
  std::string role;  // system, user, assistant, tool
  std::string content;
};

struct ChatTemplateInputs {
  std::vector<ChatMessage> messages;
  bool add_generation_prompt = true;
  std::string bos_token, eos_token;  // from the vocabulary
};

class ChatTemplate {
 public:
  static constexpr size_t kMaxOutputBytes = size_t{1} << 20;  // rendered prompt and any string on the way
  static constexpr long long kMaxSteps = 2'000'000;          // statements executed + expressions evaluated

  // Parses once; InvalidArgument with line/column for syntax it does not support.
  static Result<ChatTemplate> parse(std::string_view source);
  // A ChatML template (the fallback when a model has none).
  static ChatTemplate chatml();

  // The template's variables are messages (a list of {role, content} dicts),
  // add_generation_prompt, bos_token and eos_token; nothing else is defined.
  Result<std::string> render(const ChatTemplateInputs& in) const;

 private:
  ChatTemplate() = default;
  std::shared_ptr<const jinja::Program> program_;  // never null after parse()
};

}  // namespace tern
