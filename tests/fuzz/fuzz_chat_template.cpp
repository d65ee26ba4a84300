// Chat templates: the input is a template's source; whatever parses is rendered over a fixed
// conversation with tools, tool calls and results, reasoning, content parts and extra variables.
// Rendering is bounded (ChatTemplate::kMaxSteps, kMaxOutputBytes), so no input may hang.
#include <string>
#include <string_view>
#include <vector>

#include "fuzz.h"
#include "tokenizer/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 16384) return 0;
  auto t = tern::ChatTemplate::parse(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!t.is_ok()) return 0;
  tern::ChatTemplateInputs in;
  in.messages.emplace_back("system", "Be brief.");
  tern::ChatMessage user("user", "Weather in Paris?");
  user.content_parts = {"Weather ", "in Paris?"};
  in.messages.push_back(user);
  tern::ChatMessage call("assistant", "");
  call.tool_calls.push_back({"abcDEF123", "get_weather", R"({"city":"Paris","days":[1,2]})"});
  call.reasoning_content = "Call the tool.";
  in.messages.push_back(call);
  tern::ChatMessage result("tool", "21C");
  result.tool_call_id = "abcDEF123";
  result.name = "get_weather";
  in.messages.push_back(result);
  in.messages.emplace_back("assistant", "<think>\nWarm.\n</think>\n\nIt is 21C.");
  in.tools_json = R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}])";
  in.kwargs_json = R"({"enable_thinking":false,"n":3})";
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  in.now_unix = 1721995200;
  (void)t->render(in);
  in.add_generation_prompt = false;
  in.messages.resize(2);
  (void)t->render(in);
  return 0;
}
