// Chat templates: real model templates rendered for a fixed conversation (expected outputs
// written by hand from each template's semantics), the Jinja subset piece by piece, syntax
// errors with positions, and hostile templates that must fail cleanly within the limits.
#include <gtest/gtest.h>

#include <string>

#include "tokenizer/chat_template.h"

namespace tern {
namespace {

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
                   std::string eos = "</s>", bool add_generation_prompt = true) {
  ChatTemplateInputs in;
  in.messages = std::move(messages);
  in.bos_token = std::move(bos);
  in.eos_token = std::move(eos);
  in.add_generation_prompt = add_generation_prompt;
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

// ---- real templates (sources as in each model's tokenizer_config.json, JSON-decoded) ----

// meta-llama/Llama-2-7b-chat-hf
constexpr std::string_view kLlama2 =
    R"TPL({% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %})TPL";

TEST(ChatTemplateModels, Llama2) {
  ChatTemplate t = must_parse(kLlama2);
  EXPECT_EQ(render(t, with_system()),
            "<s>[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST] Hi there </s>"
            "<s>[INST] Who are you [/INST]");
  EXPECT_EQ(render(t, user_only()), "<s>[INST] Hello [/INST]");
  EXPECT_NE(render_error(t, {{"user", "a"}, {"user", "b"}}).find("Conversation roles must alternate"),
            std::string::npos);
}

// meta-llama/Meta-Llama-3-8B-Instruct (the revision that honours add_generation_prompt)
constexpr std::string_view kLlama3 =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 "
    "%}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";

TEST(ChatTemplateModels, Llama3) {
  ChatTemplate t = must_parse(kLlama3);
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

// meta-llama/Meta-Llama-3.1-8B-Instruct
constexpr std::string_view kLlama31 = R"TPL({{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}

{#- This block extracts the system message, so we can slot it into the right place. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}

{#- System message + builtin tools #}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\n" }}
{%- endif %}
{%- if builtin_tools is defined %}
    {{- "Tools: " + builtin_tools | reject('equalto', 'code_interpreter') | join(", ") + "\n\n"}}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {{- "You have access to the following functions. To call a function, please respond with JSON for a function call." }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}

{#- Custom tools are passed in a user message with some extra guidance #}
{%- if tools_in_user_message and not tools is none %}
    {#- Extract the first user message so we can plug it in here #}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
{%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\n\n' -}}
    {{- "Given the following functions, please respond with a JSON for a function call " }}
    {{- "with its proper arguments that best answers the given prompt.\n\n" }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}

{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {%- if builtin_tools is defined and tool_call.name in builtin_tools %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- "<|python_tag|>" + tool_call.name + ".call(" }}
            {%- for arg_name, arg_val in tool_call.arguments | items %}
                {{- arg_name + '="' + arg_val + '"' }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- endif %}
                {%- endfor %}
            {{- ")" }}
        {%- else  %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- '{"name": "' + tool_call.name + '", ' }}
            {{- '"parameters": ' }}
            {{- tool_call.arguments | tojson }}
            {{- "}" }}
        {%- endif %}
        {%- if builtin_tools is defined %}
            {#- This means we're in ipython mode #}
            {{- "<|eom_id|>" }}
        {%- else %}
            {{- "<|eot_id|>" }}
        {%- endif %}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
)TPL";

TEST(ChatTemplateModels, Llama31) {
  ChatTemplate t = must_parse(kLlama31);
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

// mistralai/Mistral-7B-Instruct-v0.1, original template (eos followed by a space)
constexpr std::string_view kMistralV01 =
    R"TPL({{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token + ' ' }}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %})TPL";

// mistralai/Mistral-7B-Instruct-v0.2, original template
constexpr std::string_view kMistralV02 =
    R"TPL({{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %})TPL";

TEST(ChatTemplateModels, MistralV01AndV02Originals) {
  ChatTemplate v01 = must_parse(kMistralV01);
  ChatTemplate v02 = must_parse(kMistralV02);
  EXPECT_EQ(render(v01, no_system()), "<s>[INST] Hello [/INST]Hi there</s> [INST] Who are you [/INST]");
  EXPECT_EQ(render(v02, no_system()), "<s>[INST] Hello [/INST]Hi there</s>[INST] Who are you [/INST]");
  EXPECT_EQ(render(v01, user_only()), "<s>[INST] Hello [/INST]");
  EXPECT_EQ(render(v02, user_only()), "<s>[INST] Hello [/INST]");
  // These templates have no system role: a leading system message breaks the alternation.
  EXPECT_EQ(render_error(v02, with_system()),
            "chat template: Conversation roles must alternate user/assistant/user/assistant/...");
}

// mistralai/Mistral-7B-Instruct-v0.1 and v0.2, later revision with an optional system message
constexpr std::string_view kMistralV1System = R"TPL({%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- if loop.first and system_message is defined %}
            {{- ' [INST] ' + system_message + '\n\n' + message['content'] + ' [/INST]' }}
        {%- else %}
            {{- ' [INST] ' + message['content'] + ' [/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' + message['content'] + eos_token}}
    {%- else %}
        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}
    {%- endif %}
{%- endfor %}
)TPL";

TEST(ChatTemplateModels, MistralV1WithSystem) {
  ChatTemplate t = must_parse(kMistralV1System);
  EXPECT_EQ(render(t, with_system()),
            "<s> [INST] You are a helpful assistant\n\nHello [/INST] Hi there</s> [INST] Who are you [/INST]");
  EXPECT_EQ(render(t, user_only()), "<s> [INST] Hello [/INST]");
}

// mistralai/Mistral-7B-Instruct-v0.3 ("v3" template with tool calling)
constexpr std::string_view kMistralV03 = R"TPL({%- if messages[0]["role"] == "system" %}
    {%- set system_message = messages[0]["content"] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}
{%- set user_messages = loop_messages | selectattr("role", "equalto", "user") | list %}

{#- This block checks for alternating user/assistant messages, skipping tool calling messages #}
{%- set ns = namespace() %}
{%- set ns.index = 0 %}
{%- for message in loop_messages %}
    {%- if not (message.role == "tool" or message.role == "tool_results" or (message.tool_calls is defined and message.tool_calls is not none)) %}
        {%- if (message["role"] == "user") != (ns.index % 2 == 0) %}
            {{- raise_exception("After the optional system message, conversation roles must alternate user/assistant/user/assistant/...") }}
        {%- endif %}
        {%- set ns.index = ns.index + 1 %}
    {%- endif %}
{%- endfor %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message["role"] == "user" %}
        {%- if tools is not none and (message == user_messages[-1]) %}
            {{- "[AVAILABLE_TOOLS] [" }}
            {%- for tool in tools %}
                {%- set tool = tool.function %}
                {{- '{"type": "function", "function": {' }}
                {%- for key, val in tool.items() if key != "return" %}
                    {%- if val is string %}
                        {{- '"' + key + '": "' + val + '"' }}
                    {%- else %}
                        {{- '"' + key + '": ' + val|tojson }}
                    {%- endif %}
                    {%- if not loop.last %}
                        {{- ", " }}
                    {%- endif %}
                {%- endfor %}
                {{- "}}" }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- else %}
                    {{- "]" }}
                {%- endif %}
            {%- endfor %}
            {{- "[/AVAILABLE_TOOLS]" }}
            {%- endif %}
        {%- if loop.last and system_message is defined %}
            {{- "[INST] " + system_message + "\n\n" + message["content"] + "[/INST]" }}
        {%- else %}
            {{- "[INST] " + message["content"] + "[/INST]" }}
        {%- endif %}
    {%- elif message.tool_calls is defined and message.tool_calls is not none %}
        {{- "[TOOL_CALLS] [" }}
        {%- for tool_call in message.tool_calls %}
            {%- set out = tool_call.function|tojson %}
            {{- out[:-1] }}
            {%- if not tool_call.id is defined or tool_call.id|length != 9 %}
                {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
            {%- endif %}
            {{- ', "id": "' + tool_call.id + '"}' }}
            {%- if not loop.last %}
                {{- ", " }}
            {%- else %}
                {{- "]" + eos_token }}
            {%- endif %}
        {%- endfor %}
    {%- elif message["role"] == "assistant" %}
        {{- " " + message["content"]|trim + eos_token}}
    {%- elif message["role"] == "tool_results" or message["role"] == "tool" %}
        {%- if message.content is defined and message.content.content is defined %}
            {%- set content = message.content.content %}
        {%- else %}
            {%- set content = message.content %}
        {%- endif %}
        {{- '[TOOL_RESULTS] {"content": ' + content|string + ", " }}
        {%- if not message.tool_call_id is defined or message.tool_call_id|length != 9 %}
            {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
        {%- endif %}
        {{- '"call_id": "' + message.tool_call_id + '"}[/TOOL_RESULTS]' }}
    {%- else %}
        {{- raise_exception("Only user and assistant roles are supported, with the exception of an initial optional system message!") }}
    {%- endif %}
{%- endfor %}
)TPL";

TEST(ChatTemplateModels, MistralV03) {
  ChatTemplate t = must_parse(kMistralV03);
  // v3 moves the system message in front of the *last* user message.
  EXPECT_EQ(render(t, with_system()),
            "<s>[INST] Hello[/INST] Hi there</s>[INST] You are a helpful assistant\n\nWho are you[/INST]");
  EXPECT_EQ(render(t, user_only()), "<s>[INST] Hello[/INST]");
  EXPECT_NE(render_error(t, {{"user", "a"}, {"user", "b"}}).find("conversation roles must alternate"),
            std::string::npos);
}

// Qwen/Qwen2-7B-Instruct (ChatML with a default system message)
constexpr std::string_view kQwen2 =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
    "'<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + "
    "message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt "
    "%}{{ '<|im_start|>assistant\\n' }}{% endif %}";

TEST(ChatTemplateModels, Qwen2) {
  ChatTemplate t = must_parse(kQwen2);
  EXPECT_EQ(render(t, with_system(), "", "<|im_end|>"),
            "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
            "<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(render(t, user_only(), "", "<|im_end|>"),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
            "<|im_start|>assistant\n");
}

// google/gemma-2b-it and google/gemma-7b-it
constexpr std::string_view kGemma =
    R"TPL({{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '
' + message['content'] | trim + '<end_of_turn>
' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model
'}}{% endif %})TPL";

TEST(ChatTemplateModels, Gemma) {
  ChatTemplate t = must_parse(kGemma);
  EXPECT_EQ(render_error(t, with_system()), "chat template: System role not supported");
  EXPECT_EQ(render(t, no_system(), "<bos>", "<eos>"),
            "<bos><start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\nHi there<end_of_turn>\n"
            "<start_of_turn>user\nWho are you<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(render(t, user_only(), "<bos>", "<eos>"), "<bos><start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n");
}

// microsoft/Phi-3-mini-4k-instruct (revision of 2024-05-08)
constexpr std::string_view kPhi3Mini =
    R"TPL({% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>
' + message['content'] + '<|end|>
'}}{% elif message['role'] == 'user' %}{{'<|user|>
' + message['content'] + '<|end|>
'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>
' + message['content'] + '<|end|>
'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>
' }}{% else %}{{ eos_token }}{% endif %})TPL";

// microsoft/Phi-3-mini-4k-instruct (first release: bos, and no system role)
constexpr std::string_view kPhi3MiniFirst =
    R"TPL({{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') %}{{'<|user|>' + '
' + message['content'] + '<|end|>' + '
' + '<|assistant|>' + '
'}}{% elif (message['role'] == 'assistant') %}{{message['content'] + '<|end|>' + '
'}}{% endif %}{% endfor %})TPL";

TEST(ChatTemplateModels, Phi3Mini) {
  ChatTemplate t = must_parse(kPhi3Mini);
  EXPECT_EQ(render(t, with_system(), "<s>", "<|endoftext|>"),
            "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n"
            "<|user|>\nWho are you<|end|>\n<|assistant|>\n");
  EXPECT_EQ(render(t, user_only(), "<s>", "<|endoftext|>"), "<|user|>\nHello<|end|>\n<|assistant|>\n");
  EXPECT_EQ(render(t, user_only(), "<s>", "<|endoftext|>", false), "<|user|>\nHello<|end|>\n<|endoftext|>");

  ChatTemplate first = must_parse(kPhi3MiniFirst);
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
  EXPECT_EQ(render(t, {{"tool", "{\"x\": 1}"}}, "", "", false), "<|im_start|>tool\n{\"x\": 1}<|im_end|>\n");
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
  EXPECT_EQ(eval("x\n  {% macro m() %}{% endmacro %}"),
            "PARSE ERROR: chat template: line 2, column 6: unsupported tag 'macro'");
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
  ChatTemplate t = must_parse(kMistralV03);
  std::vector<ChatMessage> messages;
  for (int k = 0; k < 2000; ++k) messages.push_back({k % 2 == 0 ? "user" : "assistant", "message " + std::to_string(k)});
  std::string out = render(t, messages);
  EXPECT_EQ(out.rfind("<s>[INST] message 0[/INST] message 1</s>", 0), 0u);
  EXPECT_NE(out.find("[INST] message 1998[/INST]"), std::string::npos);
}

}  // namespace
}  // namespace tern
