// server/tool_calls.h — OpenAI tool calling around a chat template: which tools a request
// declares, the grammar that enforces tool_choice "required" or a named function, and the
// parser that turns a model's reply back into `tool_calls`.
//
// Contract:
//  - ToolCallParser reads the call formats of the major template families, whatever the
//    template: Hermes/Qwen `<tool_call>{json}</tool_call>` blocks anywhere in the reply, and a
//    reply that *is* JSON — Llama 3.x `{"name", "parameters"}` objects (one or several, `;` or
//    whitespace between) and Mistral's `[TOOL_CALLS] [{"name", "arguments"}, ...]` array (its
//    control token never reaches the text). A call counts only when its name is a declared
//    tool and its arguments are a JSON object; anything else stays content, never lost.
//  - Streaming: feed() returns the content that can no longer be part of a call (a possible
//    `<tool_call>` prefix and trailing whitespace are held back) and each call once complete;
//    a reply that opens with `{` or `[` is held until finish() decides. Concatenating every
//    delta's content gives the non-streamed content exactly.
//  - ToolChoice::Named / Required replies are JSON by grammar (forced_tool_schema): the named
//    function's arguments object, or an array of {"name", "arguments"} objects. Their calls
//    stream as OpenAI streams them: a call's name as soon as it is complete, then its arguments
//    in pieces as they are generated (the text as the model wrote it); a reply cut short by
//    max_tokens leaves its last call's arguments cut short, as OpenAI's do. (In auto mode a call
//    is sent whole once it has parsed: until then it might turn out to be content.)
//  - Threading: a parser belongs to one choice; the free functions are pure.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "server/openai_protocol.h"

namespace tern::server {

// A call, or a piece of one: `name` is set on a call's first piece and empty on the pieces
// that continue the latest call, whose `arguments` are appended to it.
struct ParsedToolCall {
  std::string name;
  std::string arguments;  // JSON object text (compact in auto mode), or its next piece
};

class ToolCallParser {
 public:
  // Keeps a reference to `tools`, which must outlive the parser (a temporary cannot bind).
  explicit ToolCallParser(const ToolsRequest& tools);
  explicit ToolCallParser(ToolsRequest&&) = delete;

  struct Delta {
    std::string content;
    std::vector<ParsedToolCall> calls;
  };
  Delta feed(std::string_view text);
  Delta finish();  // the reply ended: decides whatever is held
  int n_calls() const { return n_calls_; }

 private:
  enum class Mode { Text, InTag, Json };
  void run(Delta& d);
  // Named / Required: calls out of the grammar's JSON as it arrives.
  void run_forced(Delta& d);
  void emit_text(Delta& d, bool final);
  bool take_calls(std::string_view text, Delta& d);  // false: not calls (text stays content)
  bool declared(const std::string& name) const;
  // required / named: the grammar made the whole reply JSON (run_forced reads it).
  bool forced() const { return tools_.choice == ToolChoice::Named || tools_.choice == ToolChoice::Required; }

  const ToolsRequest& tools_;
  Mode mode_ = Mode::Text;
  std::string buf_;          // text not yet decided
  std::string tag_lead_;     // whitespace before the open tag (content again if the tag is no call)
  bool seen_text_ = false;   // non-whitespace content was emitted (a later `{` is not a call)
  int n_calls_ = 0;
  // Forced choices: inside a call's arguments object (its depth and string state so far).
  bool in_args_ = false;
  int args_depth_ = 0;
  bool in_string_ = false, escaped_ = false;
};

// The JSON Schema a reply must match under tool_choice required / named (see above);
// InvalidArgument when a tool's parameters cannot be combined (clashing $defs).
Result<std::string> forced_tool_schema(const ToolsRequest& tools);

// For templates that do not read `tools`: a description of the tools and the <tool_call>
// format, for the server to put into the conversation itself.
std::string tools_prompt_text(const ToolsRequest& tools);

// An id for a call: 9 letters and digits (Mistral's templates insist on exactly that).
std::string new_tool_call_id();

}  // namespace tern::server
