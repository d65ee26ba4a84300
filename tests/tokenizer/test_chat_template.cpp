// Chat templates: real model templates rendered for a fixed conversation (expected outputs
// written by hand from each template's semantics), the Jinja subset piece by piece, syntax
// errors with positions, and hostile templates that must fail cleanly within the limits.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <thread>
#include <iterator>
#include <string>

#include "tokenizer/chat_template.h"

namespace tern {
namespace {

constexpr int64_t kJul26of2024 = 1721995200;  // 2024-07-26 12:00 UTC: date_string is "26 Jul 2024"

// ---- conversations ----

std::vector<ChatMessage> with_system() {
  return {{"system", "You are a helpful assistant"},
          {"user", "Hello"},
          {"assistant", "Hi there"},
          {"user", "Who are you"}};
}
std::vector<ChatMessage> no_system() { return {{"user", "Hello"}, {"assistant", "Hi there"}, {"user", "Who are you"}}; }
std::vector<ChatMessage> user_only() { return {{"user", "Hello"}}; }

ChatTemplate must_parse(std::string_view source) {
  auto t = ChatTemplate::parse(source);
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  return t.is_ok() ? t.value() : ChatTemplate::chatml();
}

std::string render(const ChatTemplate& t, std::vector<ChatMessage> messages, std::string bos = "<s>",
                   std::string eos = "</s>", bool add_generation_prompt = true, std::string tools_json = "") {
  ChatTemplateInputs in;
  in.messages = std::move(messages);
  in.tools_json = std::move(tools_json);
  in.bos_token = std::move(bos);
  in.eos_token = std::move(eos);
  in.add_generation_prompt = add_generation_prompt;
  in.now_unix = kJul26of2024;
  auto r = t.render(in);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? r.value() : "<render failed>";
}

// The error message of a render that must fail.
std::string render_error(const ChatTemplate& t, std::vector<ChatMessage> messages) {
  ChatTemplateInputs in;
  in.messages = std::move(messages);
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  auto r = t.render(in);
  EXPECT_FALSE(r.is_ok());
  return r.is_ok() ? "" : r.status().message();
}

// Renders a small template with no messages (for interpreter tests).
std::string eval(std::string_view source) {
  auto t = ChatTemplate::parse(source);
  if (!t.is_ok()) return "PARSE ERROR: " + t.status().message();
  ChatTemplateInputs in;
  auto r = t->render(in);
  return r.is_ok() ? r.value() : "RENDER ERROR: " + r.status().message();
}

// ---- real templates (tests/tokenizer/templates: sources as in each model's tokenizer_config.json,
// JSON-decoded; the same files are rendered by Jinja2 itself in jinja_reference.py) ----

std::string load(const std::string& name) {
  std::ifstream f(std::string(TERN_TEMPLATE_DIR) + "/" + name + ".jinja", std::ios::binary);
  EXPECT_TRUE(f.good()) << name;
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// Content sent as text parts: a template that loops over content gets the parts as a list (as
// transformers would hand them over), any other template gets them joined — a template that
// only ever prints strings would otherwise print a list, or drop the text.
TEST(ChatTemplateContent, PartsReachTemplatesThatLoopOverThemJoinedOtherwise) {
  ChatMessage m("user", "Hello world");
  m.content_parts = {"Hello ", "world"};
  const ChatTemplate loops = must_parse(
      "{% for m in messages %}{% for p in m['content'] %}[{{ p.text | trim }}]{% endfor %}{% endfor %}");
  const ChatTemplate filtered = must_parse(
      "{% for m in messages %}{%- for p in m.content if p.type == 'text' -%}<{{ p.text }}>{%- endfor %}{% endfor %}");
  const ChatTemplate strings = must_parse(
      "{% for m in messages %}{{ m.content if m.content is string else 'LIST' }}{% endfor %}");
  EXPECT_TRUE(loops.reads_content_parts());
  EXPECT_TRUE(filtered.reads_content_parts());
  EXPECT_FALSE(strings.reads_content_parts());
  EXPECT_EQ(render(loops, {m}), "[Hello][world]");
  EXPECT_EQ(render(filtered, {m}), "<Hello ><world>");
  EXPECT_EQ(render(strings, {m}), "Hello world");
  // A plain string stays a string everywhere.
  EXPECT_EQ(render(strings, {{"user", "Hi"}}), "Hi");
}

TEST(ChatTemplateModels, Llama2) {
  ChatTemplate t = must_parse(load("llama2"));
  EXPECT_EQ(render(t, with_system()),
            "<s>[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST] Hi there </s>"
            "<s>[INST] Who are you [/INST]");
  EXPECT_EQ(render(t, user_only()), "<s>[INST] Hello [/INST]");
  EXPECT_NE(render_error(t, {{"user", "a"}, {"user", "b"}}).find("Conversation roles must alternate"),
            std::string::npos);
}

TEST(ChatTemplateModels, Llama3) {
  ChatTemplate t = must_parse(load("llama3"));
  const std::string bos = "<|begin_of_text|>", eos = "<|eot_id|>";
  EXPECT_EQ(render(t, with_system(), bos, eos),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(render(t, user_only(), bos, eos),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  // `| trim` binds to message['content'] alone, before the `+`s.
  EXPECT_EQ(render(t, {{"user", "  Hello \n"}}, bos, eos, false),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>");
}

TEST(ChatTemplateModels, Llama31) {
  ChatTemplate t = must_parse(load("llama31"));
  const std::string bos = "<|begin_of_text|>", eos = "<|eot_id|>";
  const std::string preamble =
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
      "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n";
  EXPECT_EQ(render(t, with_system(), bos, eos),
            preamble + "You are a helpful assistant<|eot_id|>" +
                "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>"
                "<|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(render(t, user_only(), bos, eos),
            preamble + "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>" +
                "<|start_header_id|>assistant<|end_header_id|>\n\n");
  // A tool result: a Python string `is iterable`, so the template prints it through tojson.
  EXPECT_EQ(render(t, {{"user", "Hi"}, {"tool", "42"}}, bos, eos, false),
            preamble + "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>" +
                "<|start_header_id|>ipython<|end_header_id|>\n\n\"42\"<|eot_id|>");
}

TEST(ChatTemplateModels, MistralV01AndV02Originals) {
  ChatTemplate v01 = must_parse(load("mistral_v01"));
  ChatTemplate v02 = must_parse(load("mistral_v02"));
  EXPECT_EQ(render(v01, no_system()), "<s>[INST] Hello [/INST]Hi there</s> [INST] Who are you [/INST]");
  EXPECT_EQ(render(v02, no_system()), "<s>[INST] Hello [/INST]Hi there</s>[INST] Who are you [/INST]");
  EXPECT_EQ(render(v01, user_only()), "<s>[INST] Hello [/INST]");
  EXPECT_EQ(render(v02, user_only()), "<s>[INST] Hello [/INST]");
  // These templates have no system role: a leading system message breaks the alternation.
  EXPECT_EQ(render_error(v02, with_system()),
            "chat template: Conversation roles must alternate user/assistant/user/assistant/...");
}

TEST(ChatTemplateModels, MistralV1WithSystem) {
  ChatTemplate t = must_parse(load("mistral_v1_system"));
  EXPECT_EQ(render(t, with_system()),
            "<s> [INST] You are a helpful assistant\n\nHello [/INST] Hi there</s> [INST] Who are you [/INST]");
  EXPECT_EQ(render(t, user_only()), "<s> [INST] Hello [/INST]");
}

TEST(ChatTemplateModels, MistralV03) {
  ChatTemplate t = must_parse(load("mistral_v03"));
  // v3 moves the system message in front of the *last* user message.
  EXPECT_EQ(render(t, with_system()),
            "<s>[INST] Hello[/INST] Hi there</s>[INST] You are a helpful assistant\n\nWho are you[/INST]");
  EXPECT_EQ(render(t, user_only()), "<s>[INST] Hello[/INST]");
  EXPECT_NE(render_error(t, {{"user", "a"}, {"user", "b"}}).find("conversation roles must alternate"),
            std::string::npos);
}

TEST(ChatTemplateModels, Qwen2) {
  ChatTemplate t = must_parse(load("qwen2"));
  EXPECT_EQ(render(t, with_system(), "", "<|im_end|>"),
            "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
            "<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(render(t, user_only(), "", "<|im_end|>"),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplateModels, Gemma) {
  ChatTemplate t = must_parse(load("gemma"));
  EXPECT_EQ(render_error(t, with_system()), "chat template: System role not supported");
  EXPECT_EQ(render(t, no_system(), "<bos>", "<eos>"),
            "<bos><start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\nHi there<end_of_turn>\n"
            "<start_of_turn>user\nWho are you<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(render(t, user_only(), "<bos>", "<eos>"), "<bos><start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n");
}

TEST(ChatTemplateModels, Phi3Mini) {
  ChatTemplate t = must_parse(load("phi3_mini"));
  EXPECT_EQ(render(t, with_system(), "<s>", "<|endoftext|>"),
            "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n"
            "<|user|>\nWho are you<|end|>\n<|assistant|>\n");
  EXPECT_EQ(render(t, user_only(), "<s>", "<|endoftext|>"), "<|user|>\nHello<|end|>\n<|assistant|>\n");
  EXPECT_EQ(render(t, user_only(), "<s>", "<|endoftext|>", false), "<|user|>\nHello<|end|>\n<|endoftext|>");

  ChatTemplate first = must_parse(load("phi3_mini_first"));
  EXPECT_EQ(render(first, with_system(), "<s>", "<|endoftext|>"),
            "<s><|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n<|user|>\nWho are you<|end|>\n<|assistant|>\n");
  EXPECT_EQ(render(first, user_only(), "<s>", "<|endoftext|>"), "<s><|user|>\nHello<|end|>\n<|assistant|>\n");
}

TEST(ChatTemplateModels, ChatmlFallback) {
  ChatTemplate t = ChatTemplate::chatml();
  EXPECT_EQ(render(t, with_system(), "", ""),
            "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
            "<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(render(t, user_only(), "", ""), "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render(t, user_only(), "", "", false), "<|im_start|>user\nHello<|im_end|>\n");
  // A tool result is wrapped as the Hermes convention writes it.
  EXPECT_EQ(render(t, {{"tool", "{\"x\": 1}"}}, "", "", false),
            "<|im_start|>tool\n<tool_response>\n{\"x\": 1}\n</tool_response><|im_end|>\n");
}

// ---- tools: definitions and call history, as each template writes them (checked against
// Jinja2's rendering of the same template; jinja_reference.py covers many more cases) ----

constexpr std::string_view kWeatherTool =
    R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather now", )"
    R"("parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])";

std::vector<ChatMessage> tool_round_trip() {
  ChatMessage call("assistant", "");
  call.tool_calls.push_back({"abcDEF123", "get_weather", R"({"city": "Paris"})"});
  ChatMessage result("tool", "21C");
  result.tool_call_id = "abcDEF123";
  return {{"user", "Weather in Paris?"}, call, result};
}

std::string render_with_tools(const ChatTemplate& t, std::string bos, std::string eos) {
  return render(t, tool_round_trip(), std::move(bos), std::move(eos), true, std::string(kWeatherTool));
}

TEST(ChatTemplateTools, Llama31ToolsInTheFirstUserMessage) {
  const ChatTemplate t = must_parse(load("llama31"));
  EXPECT_TRUE(t.reads_tools());
  EXPECT_EQ(render_with_tools(t, "<|begin_of_text|>", "<|eot_id|>"),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\n"
            "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a JSON "
            "for a function call with its proper arguments that best answers the given prompt.\n\n"
            "Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its "
            "value}.Do not use variables.\n\n"
            "{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"get_weather\",\n"
            "        \"description\": \"Weather now\",\n        \"parameters\": {\n            \"type\": \"object\",\n"
            "            \"properties\": {\n                \"city\": {\n                    \"type\": \"string\"\n"
            "                }\n            }\n        }\n    }\n}\n\n"
            "Weather in Paris?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
            "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}<|eot_id|>"
            "<|start_header_id|>ipython<|end_header_id|>\n\n\"21C\"<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplateTools, Qwen25HermesToolCalls) {
  const ChatTemplate t = must_parse(load("qwen25"));
  EXPECT_EQ(render_with_tools(t, "", "<|im_end|>"),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n# Tools\n\n"
            "You may call one or more functions to assist with the user query.\n\n"
            "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
            "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather now\", "
            "\"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}}\n</tools>\n\n"
            "For each function call, return a json object with function name and arguments within "
            "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
            "<args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nWeather in Paris?<|im_end|>\n"
            "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
            "</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n21C\n</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplateTools, MistralV03AvailableToolsAndCallIds) {
  const ChatTemplate t = must_parse(load("mistral_v03"));
  EXPECT_EQ(render_with_tools(t, "<s>", "</s>"),
            "<s>[AVAILABLE_TOOLS] [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
            "\"description\": \"Weather now\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": "
            "{\"type\": \"string\"}}}}}][/AVAILABLE_TOOLS][INST] Weather in Paris?[/INST][TOOL_CALLS] "
            "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"abcDEF123\"}]</s>"
            "[TOOL_RESULTS] {\"content\": 21C, \"call_id\": \"abcDEF123\"}[/TOOL_RESULTS]");
  // Its own rule: ids of nine characters.
  auto messages = tool_round_trip();
  messages[1].tool_calls[0].id = "call_1";
  EXPECT_NE(render_error(t, messages).find("length 9"), std::string::npos);
}

TEST(ChatTemplateTools, ChatmlFallbackDescribesToolsAndWritesCallsAsTags) {
  const ChatTemplate t = ChatTemplate::chatml();
  EXPECT_TRUE(t.reads_tools());
  EXPECT_EQ(render_with_tools(t, "", ""),
            "<|im_start|>system\n# Tools\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": "
            "\"get_weather\", \"description\": \"Weather now\", \"parameters\": {\"type\": \"object\", "
            "\"properties\": {\"city\": {\"type\": \"string\"}}}}}\n</tools>\nTo call functions, reply with one "
            "<tool_call>{\"name\": <name>, \"arguments\": <object>}</tool_call> per call.<|im_end|>\n"
            "<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": "
            "\"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n"
            "<|im_start|>tool\n<tool_response>\n21C\n</tool_response><|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateTools, ArgumentsThatAreNoObjectStayAStringAndBadToolsAreRefused) {
  const ChatTemplate t = must_parse("{{ messages[0].tool_calls[0].function.arguments | tojson }}");
  ChatMessage m("assistant", "");
  m.tool_calls.push_back({"id", "f", "not json"});
  EXPECT_EQ(render(t, {m}), "\"not json\"");
  ChatTemplateInputs in;
  in.messages = {{"user", "x"}};
  in.tools_json = "{\"not\": \"a list\"}";
  EXPECT_FALSE(t.render(in).is_ok());
  EXPECT_FALSE(must_parse("{{ custom_tools }}{{ builtin_tools }}").reads_tools());
}

TEST(ChatTemplateJinja, MacrosCallBlocksSetBlocksFilterBlocksAndGeneration) {
  // Macros: positional, keyword and default arguments; they see the top level, not the caller's loop.
  EXPECT_EQ(eval("{% set top = 'T' %}{% macro m(a, b='d') %}[{{ a }}{{ b }}{{ top }}{{ x }}]{% endmacro %}"
                 "{% for x in [1] %}{{ m(1) }}{{ m(2, b='k') }}{{ m('z', 'y') }}{% endfor %}"),
            "[1dT][2kT][zyT]");
  // A macro's result is a string; recursion works up to a bound.
  EXPECT_EQ(eval("{% macro r(n) %}{% if n > 0 %}{{ n }}{{ r(n - 1) }}{% endif %}{% endmacro %}{{ r(3) | length }}"), "3");
  EXPECT_NE(eval("{% macro r(n) %}{{ r(n) }}{% endmacro %}{{ r(1) }}").find("too deeply"), std::string::npos);
  EXPECT_NE(eval("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}").find("RENDER ERROR"), std::string::npos);
  // Call blocks: caller() renders the block in the call site's scope.
  EXPECT_EQ(eval("{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}"
                 "{% for v in ['a', 'b'] %}{% call wrap('i') %}{{ v }}!{% endcall %}{% endfor %}"),
            "<i>a!</i><i>b!</i>");
  // Block set, filter blocks and generation blocks (which render as if absent).
  EXPECT_EQ(eval("{% set s %}x{{ 1 + 1 }}{% endset %}{{ s ~ s }}"), "x2x2");
  EXPECT_EQ(eval("{% filter upper %}ab{{ 'c' }}{% endfilter %}|{% filter replace('a', 'b') | upper %}aa{% endfilter %}"),
            "ABC|BB");
  EXPECT_EQ(eval("<{% generation %}{{ 'g' }}{% endgeneration %}>"), "<g>");
  EXPECT_NE(eval("{% filter upper is string %}x{% endfilter %}").find("PARSE ERROR"), std::string::npos);
  // A shared program renders the same from many threads at once (filter blocks read it, never write it).
  const ChatTemplate shared = must_parse("{% filter upper %}{{ messages[0]['content'] }}{% endfilter %}");
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int k = 0; k < 200; ++k) {
        const std::string word = "w" + std::to_string(t);
        ChatTemplateInputs in;
        in.messages = {{"user", word}};
        auto r = shared.render(in);
        if (!r.is_ok() || r.value() != "W" + std::to_string(t)) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_NE(eval("{% macro m() %}{% break %}{% endmacro %}").find("PARSE ERROR"), std::string::npos);
  EXPECT_NE(eval("{% call nope() %}x{% endcall %}").find("is not a macro"), std::string::npos);
}

TEST(ChatTemplateJinja, StrftimeNowAndDateStringReadTheClock) {
  const ChatTemplate t = must_parse("{{ strftime_now('%Y-%m-%d %H:%M') }}|{{ date_string }}");
  EXPECT_EQ(render(t, {}), "2024-07-26 12:00|26 Jul 2024");
  EXPECT_NE(eval("{{ strftime_now(5) }}").find("RENDER ERROR"), std::string::npos);
}

// ---- the Jinja subset ----

TEST(ChatTemplateJinja, WhitespaceControl) {
  EXPECT_EQ(eval("a  {{- 'b' -}}  \n c"), "abc");
  EXPECT_EQ(eval("a {%- if true -%} \n b \n {%- endif -%} c"), "abc");
  EXPECT_EQ(eval("a {# comment #} b {#- trimmed -#} c"), "a  bc");
  // trim_blocks drops the newline after a block tag; lstrip_blocks the indentation before one.
  EXPECT_EQ(eval("line\n  {% if true %}\n  x\n  {% endif %}\nend"), "line\n  x\nend");
  EXPECT_EQ(eval("{% if true %}\n{{ 'v' }}\n{% endif %}"), "v\n");
  EXPECT_EQ(eval("  {%+ if true %}x{% endif %}"), "  x");
}

TEST(ChatTemplateJinja, LoopVariables) {
  EXPECT_EQ(eval("{% for x in ['a', 'b', 'c'] %}{{ x }}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}"
                 "{{ loop.last }}{{ loop.length }};{% endfor %}"),
            "a10TrueFalse3;b21FalseFalse3;c32FalseTrue3;");
  EXPECT_EQ(eval("{% for x in [] %}{{ x }}{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(eval("{% for x in [1, 2, 3, 4] if x % 2 == 0 %}{{ x }}{{ loop.length }} {% endfor %}"), "22 42 ");
  EXPECT_EQ(eval("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}"), "a=1;b=2;");
  EXPECT_EQ(eval("{% for k, v in {'a': 1} | items %}{{ k }}{{ v }}{% endfor %}"), "a1");
  EXPECT_EQ(eval("{% for i in range(5) %}{% if i == 3 %}{% break %}{% endif %}{% if i == 1 %}{% continue %}"
                 "{% endif %}{{ i }}{% endfor %}"),
            "02");
  EXPECT_EQ(eval("{% for c in 'héllo' %}[{{ c }}]{% endfor %}"), "[h][é][l][l][o]");
}

TEST(ChatTemplateJinja, SetScopesAndNamespaces) {
  EXPECT_EQ(eval("{% set ns = namespace(n=0, found=false) %}{% for x in [1, 2, 3] %}{% set ns.n = ns.n + x %}"
                 "{% set ns.found = true %}{% endfor %}{{ ns.n }} {{ ns.found }}"),
            "6 True");
  // A plain `set` inside a loop does not leak out of it.
  EXPECT_EQ(eval("{% set y = 1 %}{% for x in [1] %}{% set y = 2 %}{{ y }}{% endfor %}{{ y }}"), "21");
  // `if` opens no scope.
  EXPECT_EQ(eval("{% if true %}{% set y = 'in' %}{% endif %}{{ y }}"), "in");
  EXPECT_NE(eval("{% set y = 1 %}{% set y.a = 2 %}").find("RENDER ERROR"), std::string::npos);
}

TEST(ChatTemplateJinja, Expressions) {
  EXPECT_EQ(eval("{{ 1 + 2 * 3 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 // 2 }} {{ 7 / 2 }} {{ 2 ** 10 }}"), "7 1 2 3 3.5 1024");
  EXPECT_EQ(eval("{{ 'a' ~ 1 ~ none }} {{ 'ab' + 'cd' }} {{ [1] + [2] }}"), "a1None abcd [1, 2]");
  EXPECT_EQ(eval("{{ 1 == 1.0 }} {{ 'a' != 'b' }} {{ 1 < 2 }} {{ 'b' >= 'a' }} {{ 2 <= 1 }}"), "True True True True False");
  EXPECT_EQ(eval("{{ 'ell' in 'hello' }} {{ 3 not in [1, 2] }} {{ 'k' in {'k': 1} }}"), "True True True");
  EXPECT_EQ(eval("{{ true and 'x' }} {{ false or 'y' }} {{ not none }} {{ not 'a' == 'a' }}"), "x y True False");
  EXPECT_EQ(eval("{{ 'yes' if 1 > 0 else 'no' }}{{ 'x' if false }}"), "yes");
  EXPECT_EQ(eval("{{ [1, 2, 3, 4][1:] }} {{ [1, 2, 3][-1] }} {{ [1, 2, 3][::-1] }} {{ 'hello'[1:3] }} {{ 'abc'[:-1] }}"),
            "[2, 3, 4] 3 [3, 2, 1] el ab");
  EXPECT_EQ(eval("{{ {'a': {'b': 'c'}}['a']['b'] }}{{ {'a': {'b': 'c'}}.a.b }}"), "cc");
  EXPECT_EQ(eval("{{ none }} {{ true }} {{ 1.5 }} {{ 2.0 }} {{ ['x', 1, none] }} {{ {'k': 'v'} }}"),
            "None True 1.5 2.0 ['x', 1, None] {'k': 'v'}");
}

TEST(ChatTemplateJinja, UndefinedIsFalsyAndEmpty) {
  EXPECT_EQ(eval("[{{ nothing }}{{ nothing.attr }}{{ nothing['k'] }}{% if nothing %}x{% endif %}]"), "[]");
  EXPECT_EQ(eval("{{ nothing is defined }} {{ nothing is not defined }} {{ nothing is undefined }}"), "False True True");
  EXPECT_EQ(eval("{{ nothing | default('d') }} {{ '' | default('e', true) }} {{ 'v' | default('d') }}"), "d e v");
  EXPECT_EQ(eval("{{ [1][5] is defined }} {{ {'a': 1}.b is defined }}"), "False False");
}

TEST(ChatTemplateJinja, Tests) {
  EXPECT_EQ(eval("{{ none is none }} {{ 'a' is string }} {{ 1 is string }} {{ {} is mapping }} {{ [] is iterable }}"),
            "True True False True True");
  EXPECT_EQ(eval("{{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby(3) }} {{ 'a' is equalto 'a' }}"),
            "True True True True");
}

TEST(ChatTemplateJinja, Filters) {
  EXPECT_EQ(eval("{{ '  x  ' | trim }}|{{ [1, 2] | length }}|{{ 'héllo' | length }}|{{ 'Ab' | upper }}{{ 'Ab' | lower }}"),
            "x|2|5|ABab");
  EXPECT_EQ(eval("{{ [1, 2] | first }}{{ [1, 2] | last }}{{ 12 | string }}{{ ['a', 'b'] | join('-') }}{{ [1, 2] | join }}"),
            "1212a-b12");
  EXPECT_EQ(eval("{{ {'a': [1, 'x', none, true], 'b': 1.5} | tojson }}"), R"({"a": [1, "x", null, true], "b": 1.5})");
  EXPECT_EQ(eval("{{ {'a': [1], 'b': {}} | tojson(indent=2) }}"), "{\n  \"a\": [\n    1\n  ],\n  \"b\": {}\n}");
  EXPECT_EQ(eval("{{ 'q\"\\n' | tojson }}"), R"("q\"\n")");
  EXPECT_EQ(eval("{{ [{'r': 'u'}, {'r': 'a'}, {'r': 'u'}] | selectattr('r', 'equalto', 'u') | list | length }}"), "2");
  EXPECT_EQ(eval("{{ ['a', 'b', 'c'] | reject('equalto', 'b') | join(',') }}"), "a,c");
  EXPECT_EQ(eval("{{ [{'n': 'x'}, {'n': 'y'}] | map(attribute='n') | join }}"), "xy");
  EXPECT_EQ(eval("{{ 'user' | title }} {{ 'a-b' | replace('-', '+') }} {{ '42' | int + 1 }}"), "User a+b 43");
}

TEST(ChatTemplateJinja, Methods) {
  EXPECT_EQ(eval("{{ '  hi  '.strip() }}|{{ 'xhix'.strip('x') }}|{{ ' a'.lstrip() }}|{{ 'a '.rstrip() }}|"), "hi|hi|a|a|");
  EXPECT_EQ(eval("{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith('bc') }} {{ 'abc'.startswith(('x', 'a')) }}"),
            "True True True");
  EXPECT_EQ(eval("{{ 'a,b,,c'.split(',') }} {{ '  a  b '.split() }} {{ 'Hi'.upper() }}{{ 'Hi'.lower() }}"),
            "['a', 'b', '', 'c'] ['a', 'b'] HIhi");
  EXPECT_EQ(eval("{{ {'a': 1}.get('a') }} {{ {'a': 1}.get('b', 'none') }} {{ {'a': 1, 'b': 2}.keys() | list }}"),
            "1 none ['a', 'b']");
  EXPECT_NE(eval("{{ [1].strip() }}").find("RENDER ERROR"), std::string::npos);
}

TEST(ChatTemplateJinja, RaiseExceptionAndTypeErrors) {
  EXPECT_EQ(eval("a{{ raise_exception('custom message') }}b"), "RENDER ERROR: chat template: custom message");
  EXPECT_EQ(eval("{{ 'a' + 1 }}"), "RENDER ERROR: chat template: line 1, column 8: unsupported operand types for +: "
                                   "'str' and 'int'");
  EXPECT_NE(eval("{{ 1 / 0 }}").find("division by zero"), std::string::npos);
  EXPECT_NE(eval("{{ 1 < 'a' }}").find("not supported between"), std::string::npos);
  EXPECT_NE(eval("{{ no_such_function() }}").find("unknown function 'no_such_function'"), std::string::npos);
  EXPECT_NE(eval("{% for a, b in [1, 2] %}{% endfor %}").find("cannot unpack"), std::string::npos);
}

TEST(ChatTemplateSyntax, ErrorsNameLineAndColumn) {
  EXPECT_EQ(eval("ok\n{{ x + }}"), "PARSE ERROR: chat template: line 2, column 8: expected an expression");
  EXPECT_EQ(eval("{% if x %}\nno end"), "PARSE ERROR: chat template: line 1, column 1: unclosed 'if'");
  EXPECT_EQ(eval("{% endif %}"), "PARSE ERROR: chat template: line 1, column 4: unexpected 'endif'");
  EXPECT_EQ(eval("x\n  {% raw %}{% endraw %}"), "PARSE ERROR: chat template: line 2, column 6: unsupported tag 'raw'");
  EXPECT_EQ(eval("{{ x | frobnicate }}"), "PARSE ERROR: chat template: line 1, column 8: unsupported filter 'frobnicate'");
  EXPECT_EQ(eval("{{ x is frob }}"), "PARSE ERROR: chat template: line 1, column 9: unsupported test 'frob'");
  EXPECT_EQ(eval("{{ 'abc }}"), "PARSE ERROR: chat template: line 1, column 4: unterminated string literal");
  EXPECT_EQ(eval("{{ x "), "PARSE ERROR: chat template: line 1, column 1: unclosed tag");
  EXPECT_EQ(eval("{# never closed"), "PARSE ERROR: chat template: line 1, column 1: unclosed comment");
  EXPECT_EQ(eval("{{ a $ b }}"), "PARSE ERROR: chat template: line 1, column 6: unexpected character '$'");
  EXPECT_NE(eval("{% break %}").find("outside a loop"), std::string::npos);
  // "}}" inside a string or a dict literal does not close the tag.
  EXPECT_EQ(eval("{{ '}}' }}{{ {'a': {'b': 1}}['a']['b'] }}"), "}}1");
}

// ErrorKind of parsing and rendering `source` with no messages (Ok if both succeed).
ErrorKind error_kind(std::string_view source) {
  auto t = ChatTemplate::parse(source);
  if (!t.is_ok()) return t.status().kind();
  auto r = t->render(ChatTemplateInputs{});
  return r.is_ok() ? ErrorKind::Ok : r.status().kind();
}

TEST(ChatTemplateLimits, OutputAndValueSizesAreBounded) {
  // Output past 1 MiB.
  EXPECT_EQ(error_kind("{% for a in range(1000) %}{% for b in range(1000) %}0123456789{% endfor %}{% endfor %}"),
            ErrorKind::OutOfRange);
  // A string that doubles every iteration.
  EXPECT_EQ(error_kind("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}"
                       "{% endfor %}{{ ns.s | length }}"),
            ErrorKind::OutOfRange);
  // One big string repeated in a list, then joined or serialised.
  EXPECT_EQ(error_kind("{% set s = 'x' * 900000 %}{{ [s, s, s] | join }}"), ErrorKind::OutOfRange);
  EXPECT_EQ(error_kind("{% set s = 'x' * 900000 %}{{ [s, s, s] | tojson }}"), ErrorKind::OutOfRange);
  EXPECT_EQ(error_kind("{{ 'x' * 10000000000 }}"), ErrorKind::OutOfRange);
  // Integer overflow is an error, not undefined behaviour.
  EXPECT_EQ(error_kind("{{ 9223372036854775807 + 1 }}"), ErrorKind::OutOfRange);
}

TEST(ChatTemplateLimits, ListSizesAreBounded) {
  EXPECT_EQ(error_kind("{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}"
                       "{% endfor %}"),
            ErrorKind::OutOfRange);
  EXPECT_EQ(error_kind("{{ range(10000000000) | length }}"), ErrorKind::OutOfRange);
}

TEST(ChatTemplateLimits, EndlessWorkRunsOutOfSteps) {
  EXPECT_EQ(error_kind("{% for a in range(60000) %}{% for b in range(100) %}{% endfor %}{% endfor %}"),
            ErrorKind::OutOfRange);
}

TEST(ChatTemplateLimits, DeepNestingIsAParseError) {
  // Deep enough to overflow the stack of a naive recursive parser.
  EXPECT_EQ(error_kind("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}"),
            ErrorKind::InvalidArgument);
  EXPECT_EQ(error_kind("{{ " + std::string(100000, '-') + "1 }}"), ErrorKind::InvalidArgument);
  EXPECT_EQ(error_kind("{{ " + std::string(100000, '[') + std::string(100000, ']') + " }}"), ErrorKind::InvalidArgument);
  std::string nested_ifs;
  for (int k = 0; k < 5000; ++k) nested_ifs += "{% if true %}";
  EXPECT_EQ(error_kind(nested_ifs), ErrorKind::InvalidArgument);
}

TEST(ChatTemplateLimits, LongConversationStaysWithinBudget) {
  ChatTemplate t = must_parse(load("mistral_v03"));
  std::vector<ChatMessage> messages;
  for (int k = 0; k < 2000; ++k) messages.push_back({k % 2 == 0 ? "user" : "assistant", "message " + std::to_string(k)});
  std::string out = render(t, messages);
  EXPECT_EQ(out.rfind("<s>[INST] message 0[/INST] message 1</s>", 0), 0u);
  EXPECT_NE(out.find("[INST] message 1998[/INST]"), std::string::npos);
}

}  // namespace
}  // namespace tern
