// ChatTemplate: the public face of the Jinja interpreter (jinja_*.cpp), which it feeds the
// variables Hugging Face's apply_chat_template passes for plain text messages.
#include "tokenizer/chat_template.h"

#include "core/assert.h"
#include "tokenizer/jinja_ast.h"

namespace tern {

Result<ChatTemplate> ChatTemplate::parse(std::string_view source) {
  auto program = jinja::parse_template(source);
  if (!program.is_ok()) return program.status();
  ChatTemplate t;
  t.program_ = std::make_shared<const jinja::Program>(std::move(program.value()));
  return t;
}

ChatTemplate ChatTemplate::chatml() {
  // The template ChatML models ship (e.g. teknium/OpenHermes-2.5-Mistral-7B), with no default
  // system message, so the prompt holds exactly the messages given.
  static constexpr std::string_view kChatml =
      "{% for message in messages %}"
      "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
      "{% endfor %}"
      "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
  auto parsed = parse(kChatml);
  TERN_ASSERT(parsed.is_ok());
  return std::move(parsed.value());
}

Result<std::string> ChatTemplate::render(const ChatTemplateInputs& in) const {
  TERN_ASSERT(program_ != nullptr);
  jinja::List messages;
  messages.reserve(in.messages.size());
  for (const ChatMessage& m : in.messages) {
    messages.push_back(jinja::Value::of_dict({{"role", jinja::Value::of_string(m.role)},
                                              {"content", jinja::Value::of_string(m.content)}}));
  }
  jinja::Dict globals = {
      {"messages", jinja::Value::of_list(std::move(messages))},
      {"add_generation_prompt", jinja::Value::of_bool(in.add_generation_prompt)},
      {"bos_token", jinja::Value::of_string(in.bos_token)},
      {"eos_token", jinja::Value::of_string(in.eos_token)},
  };
  jinja::RenderLimits limits;
  limits.max_output_bytes = kMaxOutputBytes;
  limits.max_steps = kMaxSteps;
  return jinja::render_program(*program_, std::move(globals), limits);
}

}  // namespace tern
