// ChatTemplate: the public face of the Jinja interpreter (jinja_*.cpp), which it feeds the
// variables Hugging Face's apply_chat_template passes: messages (with tool calls and tool
// results), tools, the special tokens and the date.
#include "tokenizer/chat_template.h"

#include <algorithm>
#include <ctime>
#include <regex>

#include "core/assert.h"
#include "core/json.h"
#include "tokenizer/jinja_ast.h"

namespace tern {

namespace {

std::string pass(const std::function<std::string(std::string_view)>& f, std::string_view s) {
  return f ? f(s) : std::string(s);
}

// A JSON value as the Python object json.loads would give a template (dicts keep key order).
jinja::Value to_value(const Json& j, const std::function<std::string(std::string_view)>& text) {
  switch (j.type()) {
    case Json::Type::Null: return jinja::Value::none();
    case Json::Type::Bool: return jinja::Value::of_bool(j.as_bool());
    case Json::Type::Int: return jinja::Value::of_int(*j.to_int64());
    case Json::Type::Uint:  // above INT64_MAX: the nearest float, as the template's int cannot hold it
    case Json::Type::Double: return jinja::Value::of_float(j.as_double());
    case Json::Type::String: return jinja::Value::of_string(pass(text, j.as_string()));
    case Json::Type::Array: {
      jinja::List l;
      for (const Json& e : j.as_array()) l.push_back(to_value(e, text));
      return jinja::Value::of_list(std::move(l));
    }
    case Json::Type::Object: {
      jinja::Dict d;
      for (const auto& [k, v] : j.distinct_members()) d.emplace_back(pass(text, k), to_value(*v, text));
      return jinja::Value::of_dict(std::move(d));
    }
  }
  return jinja::Value::none();
}

// Arguments reach templates as a dict when they are a JSON object (as vLLM and llama.cpp pass
// them, so `arguments | tojson` prints JSON), else as the string sent.
jinja::Value arguments_value(const std::string& arguments, const std::function<std::string(std::string_view)>& text) {
  const auto j = Json::parse(arguments);
  if (j && j->is_object()) return to_value(*j, text);
  return jinja::Value::of_string(pass(text, arguments));
}

jinja::Value message_value(const ChatMessage& m, const std::function<std::string(std::string_view)>& text,
                           bool parts) {
  jinja::Dict d = {{"role", jinja::Value::of_string(m.role)}};
  if (parts && !m.content_parts.empty()) {
    jinja::List list;
    for (const std::string& p : m.content_parts)
      list.push_back(jinja::Value::of_dict(
          {{"type", jinja::Value::of_string("text")}, {"text", jinja::Value::of_string(pass(text, p))}}));
    d.emplace_back("content", jinja::Value::of_list(std::move(list)));
  } else if (!m.tool_calls.empty() && m.content.empty()) {
    d.emplace_back("content", jinja::Value::none());  // OpenAI sends null content with tool calls
  } else {
    d.emplace_back("content", jinja::Value::of_string(pass(text, m.content)));
  }
  if (!m.tool_calls.empty()) {
    jinja::List calls;
    for (const ToolCall& c : m.tool_calls) {
      jinja::Dict fn = {{"name", jinja::Value::of_string(pass(text, c.name))},
                        {"arguments", arguments_value(c.arguments, text)}};
      calls.push_back(jinja::Value::of_dict({{"id", jinja::Value::of_string(pass(text, c.id))},
                                             {"type", jinja::Value::of_string("function")},
                                             {"function", jinja::Value::of_dict(std::move(fn))}}));
    }
    d.emplace_back("tool_calls", jinja::Value::of_list(std::move(calls)));
  }
  if (!m.tool_call_id.empty()) d.emplace_back("tool_call_id", jinja::Value::of_string(pass(text, m.tool_call_id)));
  if (!m.name.empty()) d.emplace_back("name", jinja::Value::of_string(pass(text, m.name)));
  if (!m.reasoning_content.empty())
    d.emplace_back("reasoning_content", jinja::Value::of_string(pass(text, m.reasoning_content)));
  return jinja::Value::of_dict(std::move(d));
}

}  // namespace

Result<ChatTemplate> ChatTemplate::parse(std::string_view source) {
  auto program = jinja::parse_template(source);
  if (!program.is_ok()) return program.status();
  ChatTemplate t;
  t.program_ = std::make_shared<const jinja::Program>(std::move(program.value()));
  // `tools` as a whole word (custom_tools and builtin_tools do not count).
  static const std::regex kTools(R"(\btools\b)");
  t.reads_tools_ = std::regex_search(source.begin(), source.end(), kTools);
  // A loop over a message's content (`for x in message['content']`, `for x in m.content | ...`);
  // a template that only asks `content is string` would drop parts, so it gets the string.
  static const std::regex kParts(R"(for\s+\w+\s+in\s+[\w.'"\[\]]*content['"]?\]?\s*(-?%|\||if))");
  t.reads_content_parts_ = std::regex_search(source.begin(), source.end(), kParts);
  return t;
}

std::string_view ChatTemplate::chatml_source() {
  // ChatML as ChatML models ship it (e.g. teknium/OpenHermes-2.5-Mistral-7B), with no default
  // system message, so the prompt holds exactly the messages given. With tools it describes them
  // in the system turn and writes calls and results in the <tool_call>/<tool_response> tags of
  // the Hermes convention, which the server's tool-call parser reads back.
  static constexpr std::string_view kChatml = R"TPL(
{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] + '\n\n' }}{%- endif %}
    {{- '# Tools\n<tools>' }}
    {%- for tool in tools %}{{- '\n' + tool | tojson }}{%- endfor %}
    {{- '\n</tools>\nTo call functions, reply with one <tool_call>{"name": <name>, "arguments": <object>}</tool_call> per call.<|im_end|>\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if tools and loop.first and message['role'] == 'system' %}
    {%- elif message['role'] == 'assistant' and message.tool_calls %}
        {{- '<|im_start|>assistant\n' }}
        {%- if message['content'] %}{{- message['content'] + '\n' }}{%- endif %}
        {%- for call in message.tool_calls %}
            {{- '<tool_call>\n{"name": "' + call.function.name + '", "arguments": ' + call.function.arguments | tojson + '}\n</tool_call>' }}
            {%- if not loop.last %}{{- '\n' }}{%- endif %}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message['role'] == 'tool' %}
        {{- '<|im_start|>tool\n<tool_response>\n' + message['content'] + '\n</tool_response><|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}
)TPL";
  return kChatml;
}

ChatTemplate ChatTemplate::chatml() {
  auto parsed = parse(chatml_source());
  TERN_ASSERT(parsed.is_ok());
  return std::move(parsed.value());
}

bool ChatTemplate::reserved_variable(std::string_view name) {
  static constexpr std::string_view kSet[] = {"messages",    "add_generation_prompt", "bos_token", "eos_token",
                                              "date_string", "tools",                 "strftime_now",
                                              "raise_exception"};
  return std::find(std::begin(kSet), std::end(kSet), name) != std::end(kSet);
}

Result<std::string> ChatTemplate::render(const ChatTemplateInputs& in) const {
  TERN_ASSERT(program_ != nullptr);
  jinja::List messages;
  messages.reserve(in.messages.size());
  for (const ChatMessage& m : in.messages) messages.push_back(message_value(m, in.client_text, reads_content_parts_));
  const std::time_t now = in.now_unix != 0 ? static_cast<std::time_t>(in.now_unix) : std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char date[32];
  const size_t n_date = std::strftime(date, sizeof date, "%d %b %Y", &tm);
  jinja::Dict globals = {
      {"messages", jinja::Value::of_list(std::move(messages))},
      {"add_generation_prompt", jinja::Value::of_bool(in.add_generation_prompt)},
      {"bos_token", jinja::Value::of_string(in.bos_token)},
      {"eos_token", jinja::Value::of_string(in.eos_token)},
      {"date_string", jinja::Value::of_string(std::string(date, n_date))},
  };
  if (!in.tools_json.empty()) {
    const auto tools = Json::parse(in.tools_json);
    if (!tools || !tools->is_array())
      return error(ErrorKind::InvalidArgument, "chat template: tools must be a JSON array");
    globals.emplace_back("tools", to_value(*tools, in.client_text));
  }
  if (!in.kwargs_json.empty()) {
    const auto kwargs = Json::parse(in.kwargs_json);
    if (!kwargs || !kwargs->is_object())
      return error(ErrorKind::InvalidArgument, "chat template: chat_template_kwargs must be a JSON object");
    for (const auto& [key, value] : kwargs->distinct_members()) {
      if (reserved_variable(key))
        return error(ErrorKind::InvalidArgument,
                     "chat template: chat_template_kwargs cannot set '" + std::string(key) + "' (the request sets it)");
      globals.emplace_back(std::string(key), to_value(*value, in.client_text));
    }
  }
  jinja::RenderLimits limits;
  limits.max_output_bytes = kMaxOutputBytes;
  limits.max_steps = kMaxSteps;
  limits.now_unix = static_cast<int64_t>(now);
  return jinja::render_program(*program_, std::move(globals), limits);
}

}  // namespace tern
