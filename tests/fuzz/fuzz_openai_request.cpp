// The OpenAI request parsers (chat, completions, embeddings, tokenize, detokenize: JSON →
// request, all validation); byte 0 picks the endpoint, the rest is the body. A chat request that
// parses with tools also gets its forced-call schema built and its own body fed to the tool-call
// parser as if it were the model's reply, in pieces.
#include <string>
#include <string_view>
#include <variant>

#include "fuzz.h"
#include "server/openai_protocol.h"
#include "server/tool_calls.h"

using namespace tern::server;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 65536) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 5) {
    case 0: {
      auto r = parse_chat_request(body);
      auto* chat = std::get_if<ChatRequest>(&r);
      if (!chat || !chat->prompt.tools.active()) break;
      (void)forced_tool_schema(chat->prompt.tools);
      ToolCallParser parser(chat->prompt.tools);
      for (size_t i = 0; i < body.size(); i += 7) (void)parser.feed(body.substr(i, 7));
      (void)parser.finish();
      break;
    }
    case 1:
      (void)parse_completion_request(body);
      break;
    case 2:
      (void)parse_embeddings_request(body);
      break;
    case 3:
      (void)parse_tokenize_request(body);
      break;
    default:
      (void)parse_detokenize_request(body);
  }
  return 0;
}
