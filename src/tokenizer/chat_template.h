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
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace tern {

namespace jinja {
struct Program;
}

// A function call an assistant made, as the OpenAI API carries it.
struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text; handed to templates as a dict when it is a JSON object
};

struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string r, std::string c) : role(std::move(r)), content(std::move(c)) {}

  std::string role;  // system, user, assistant, tool
  std::string content;
  // When the client sent content as an array of text parts: each part's text (content is their
  // concatenation). Templates that iterate over content parts get them as
  // [{"type": "text", "text": ...}]; the others get `content`.
  std::vector<std::string> content_parts;
  std::vector<ToolCall> tool_calls;  // assistant: calls it made (then content may be empty, rendered as none)
  std::string tool_call_id;          // tool: the call this result answers ("" = not given)
  std::string name;                  // tool: the function's name ("" = not given)
  // assistant: the reasoning the client sent back with the reply (DeepSeek/vLLM's field;
  // reasoning templates such as Qwen3's put it in <think> tags); "" = not given
  std::string reasoning_content;
};

struct ChatTemplateInputs {
  std::vector<ChatMessage> messages;
  bool add_generation_prompt = true;
  std::string bos_token, eos_token;  // from the vocabulary
  // The OpenAI `tools` array as JSON text ("" = no tools: the template sees `tools` undefined).
  // Key order is kept, as Python dicts keep it, since templates print tools with tojson.
  std::string tools_json;
  // More template variables, a JSON object ("" = none): the request's chat_template_kwargs,
  // e.g. {"enable_thinking": false} for Qwen3. Cannot replace the variables above.
  std::string kwargs_json;
  int64_t now_unix = 0;  // the clock strftime_now() and date_string read; 0 = the current time
  // Applied to every string the client sent (contents, tool calls, tools) before the template
  // sees it; the server quotes special-token text with it. Null = strings as given.
  std::function<std::string(std::string_view)> client_text;
};

class ChatTemplate {
 public:
  static constexpr size_t kMaxOutputBytes = size_t{1} << 20;  // rendered prompt and any string on the way
  static constexpr long long kMaxSteps = 2'000'000;          // statements executed + expressions evaluated

  // Parses once; InvalidArgument with line/column for syntax it does not support.
  static Result<ChatTemplate> parse(std::string_view source);
  // A ChatML template (the fallback when a model has none), and its source.
  static ChatTemplate chatml();
  static std::string_view chatml_source();

  // The template's variables are messages (a list of {role, content} dicts, plus tool_calls
  // [{id, type, function: {name, arguments}}] on assistant messages that made calls and
  // tool_call_id/name on tool results), add_generation_prompt, bos_token, eos_token, tools (when
  // given), date_string ("26 Jul 2024" style, today) and the function strftime_now(format), as
  // transformers and llama.cpp provide them, plus the entries of kwargs_json. InvalidArgument
  // when tools_json is not a JSON array, or kwargs_json not an object or naming one of those.
  Result<std::string> render(const ChatTemplateInputs& in) const;

  // A variable render() sets itself (messages, tools, bos_token, strftime_now, ...), which
  // kwargs_json may not replace.
  static bool reserved_variable(std::string_view name);

  // Whether the template handles content given as a list of parts (it loops over a message's
  // content), as vLLM decides its "openai" content format.
  bool reads_content_parts() const { return reads_content_parts_; }

  // Whether the template reads the `tools` variable at all; when it does not, a caller that has
  // tools must describe them in the messages itself.
  bool reads_tools() const { return reads_tools_; }

 private:
  ChatTemplate() = default;
  std::shared_ptr<const jinja::Program> program_;  // never null after parse()
  bool reads_tools_ = false;
  bool reads_content_parts_ = false;
};

}  // namespace tern
