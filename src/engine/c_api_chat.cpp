// engine/c_api_chat.cpp — see c_api_chat.h.
#include "engine/c_api_chat.h"

#include "tokenizer/chat_template.h"

namespace tern::capi {

Result<std::string> render_chat(const tern_chat_message* messages, size_t n, const ChatRender& how) {
  if (n == 0) return error(ErrorKind::InvalidArgument, "no chat messages given");
  if (!messages) return error(ErrorKind::InvalidArgument, "messages is NULL");
  ChatTemplateInputs in;
  for (size_t i = 0; i < n; ++i) {
    const tern_chat_message& m = messages[i];
    if (!m.role || !*m.role)
      return error(ErrorKind::InvalidArgument, "messages[" + std::to_string(i) + "].role is NULL or empty");
    if (!m.content) return error(ErrorKind::InvalidArgument, "messages[" + std::to_string(i) + "].content is NULL");
    in.messages.emplace_back(m.role, m.content);
  }
  in.add_generation_prompt = how.add_generation_prompt;
  in.bos_token = how.bos_token;
  in.eos_token = how.eos_token;
  in.client_text = how.client_text;
  if (how.template_source.empty()) return ChatTemplate::chatml().render(in);
  auto tmpl = ChatTemplate::parse(how.template_source);
  if (!tmpl) return tmpl.status().with_context("the model's chat template");
  return tmpl->render(in);
}

}  // namespace tern::capi
