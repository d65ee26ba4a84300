// Driver for jinja_reference.py: renders a chat template for one case and prints the prompt,
// or "ERROR: <message>" (exit 0 either way; the script compares the two engines' answers).
//   render_chat_template TEMPLATE_FILE CASE_JSON_FILE
//   render_chat_template --chatml-source   (prints the fallback template's source)
//   render_chat_template --content-format TEMPLATE_FILE   ("openai": content parts reach the
//     template as a list; "string": joined)
// The case: {"messages": [OpenAI chat messages], "tools"?: [...], "add_generation_prompt": bool,
//            "bos_token": str, "eos_token": str, "now": unix seconds}.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "tokenizer/chat_template.h"

namespace {

std::string slurp(const char* path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "render_chat_template: cannot read %s\n", path);
    std::exit(2);
  }
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--content-format") {
    auto t = tern::ChatTemplate::parse(slurp(argv[2]));
    std::cout << (t.is_ok() && t->reads_content_parts() ? "openai" : "string");
    return 0;
  }
  if (argc == 2 && std::string(argv[1]) == "--chatml-source") {
    std::cout << tern::ChatTemplate::chatml_source();
    return 0;
  }
  if (argc != 3) {
    std::fprintf(stderr, "usage: render_chat_template TEMPLATE_FILE CASE_JSON_FILE\n");
    return 2;
  }
  using ojson = nlohmann::ordered_json;
  const ojson c = ojson::parse(slurp(argv[2]));
  tern::ChatTemplateInputs in;
  for (const ojson& m : c["messages"]) {
    tern::ChatMessage msg;
    msg.role = m["role"].get<std::string>();
    if (m.contains("content") && m["content"].is_string()) msg.content = m["content"].get<std::string>();
    if (m.contains("content") && m["content"].is_array())
      for (const ojson& part : m["content"]) {
        msg.content += part["text"].get<std::string>();
        msg.content_parts.push_back(part["text"].get<std::string>());
      }
    if (m.contains("tool_call_id")) msg.tool_call_id = m["tool_call_id"].get<std::string>();
    if (m.contains("name")) msg.name = m["name"].get<std::string>();
    if (m.contains("reasoning_content")) msg.reasoning_content = m["reasoning_content"].get<std::string>();
    if (m.contains("tool_calls"))
      for (const ojson& call : m["tool_calls"])
        msg.tool_calls.push_back({call["id"].get<std::string>(), call["function"]["name"].get<std::string>(),
                                  call["function"]["arguments"].get<std::string>()});
    in.messages.push_back(std::move(msg));
  }
  if (c.contains("tools")) in.tools_json = c["tools"].dump();
  if (c.contains("kwargs")) in.kwargs_json = c["kwargs"].dump();
  in.add_generation_prompt = c.value("add_generation_prompt", true);
  in.bos_token = c.value("bos_token", "");
  in.eos_token = c.value("eos_token", "");
  in.now_unix = c.value("now", int64_t{0});
  auto t = tern::ChatTemplate::parse(slurp(argv[1]));
  if (!t.is_ok()) {
    std::cout << "ERROR: " << t.status().message();
    return 0;
  }
  auto r = t->render(in);
  std::cout << (r.is_ok() ? r.value() : "ERROR: " + r.status().message());
  return 0;
}
