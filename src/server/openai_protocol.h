// server/openai_protocol.h — OpenAI request bodies parsed into typed structs,
// and the error shape every failure is answered with.
//
// Contract: parse_chat_request()/parse_completion_request() accept exactly the
// JSON the OpenAI API documents for the fields we implement (plus the vLLM-
// style extensions top_k, min_p, repetition_penalty, priority, ignore_eos) and
// reject with an ApiError naming the offending `param` anything of the wrong
// type or out of range, and features we cannot honour (schema
// keywords the grammar compiler refuses, an unknown tool_choice) — never silently ignore something that would change
// the answer. Unknown fields are ignored, as vLLM does. Defaults follow
// OpenAI: temperature 1, top_p 1, no top-k/min-p, n 1; max_tokens defaults to
// 16 for completions and to "until the context ends" (-1) for chat.
//
// Errors map to HTTP in one place: api_error_from_status().
// Threading: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/status.h"
#include "sampling/sampler.h"
#include "tokenizer/chat_template.h"

namespace tern::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";  // OpenAI's error types
  std::string param;                            // "" = null
  std::string code;                             // "" = null
};

// The JSON body {"error": {...}}.
std::string api_error_body(const ApiError& e);
// One place maps library errors to HTTP: InvalidArgument/OutOfRange -> 400,
// NotFound -> 404, Unsupported -> 400, Unavailable -> 503, everything else -> 500.
ApiError api_error_from_status(const Status& s, std::string param = {});
// A 500 server_error with `message` (a generation that failed inside the engine).
ApiError server_error(std::string message);

template <typename T>
using ApiResult = std::variant<T, ApiError>;

// What both endpoints share.
struct GenerationParams {
  std::string model;
  int32_t max_tokens = -1;        // -1 = until the context ends
  int n = 1;                      // choices per prompt, 1..kMaxN
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage
  SamplingParams sampling;        // OpenAI defaults (see above); penalties over the whole history
  bool seeded = false;            // sampling.seed came from the request
  std::vector<std::string> stop;
  int n_logprobs = -1;            // -1 none; 0 the chosen token's; k > 0 also the top k
  // Prompt log-probabilities (vLLM's `prompt_logprobs`, and completions' echo + logprobs): -1 none.
  int prompt_logprobs = -1;
  int priority = 0;
  bool ignore_eos = false;
  std::string user;
  // Extensions (ignored by clients that do not send them):
  int spec_k = -1;                     // speculative proposals per step: -1 the server's, 0 off
  int spec_tree = -1;                  // candidates per proposed position: -1 the server's
  std::vector<int32_t> stop_token_ids;  // generating one of these ends the choice (vLLM's field)
  // Generation past the context in constant KV memory (engine/streaming.h's
  // forms); unset: the server's --streaming.
  std::optional<StreamingParams> streaming;
  std::optional<KvEvictParams> kv_evict;  // the same forms as --kv-evict; unset: the server's
  // response_format json_object / json_schema, or the extensions `grammar`
  // (GBNF), `regex` and `json_schema` (a schema, as llama-server takes it).
  OutputConstraint constraint;
  std::vector<std::pair<int32_t, float>> logit_bias;  // token id -> bias in [-100, 100]
};

inline constexpr int kMaxN = 16;
inline constexpr int kMaxJsonDepth = 64;  // deeper request bodies are refused (the reader stops there)
inline constexpr int kMaxStop = 16;
inline constexpr size_t kMaxLogitBias = 1024;

// Tool calling: `tools` ([{"type": "function", "function": {"name", "description"?,
// "parameters"?}}]), `tool_choice` ("auto" | "none" | "required" | {"type": "function",
// "function": {"name"}}) and `parallel_tool_calls`.
enum class ToolChoice { Auto, None, Required, Named };
inline constexpr size_t kMaxTools = 128;

struct ToolSpec {
  std::string name;
  std::string parameters;  // JSON Schema text, key order as sent ("" = any object)
};

struct ToolsRequest {
  std::string tools_json;  // the `tools` array as sent, key order kept ("" = no tools)
  std::vector<ToolSpec> tools;
  ToolChoice choice = ToolChoice::Auto;  // OpenAI's default when tools are given
  std::string named;                     // ToolChoice::Named: the function
  bool parallel = true;                  // parallel_tool_calls
  // Whether the reply is parsed for calls (tool_choice none: the model sees no tools at all).
  bool active() const { return !tools.empty() && choice != ToolChoice::None; }
};

// How chat messages become a prompt: the template's generation prompt (an
// open assistant turn), or continue_final_message (vLLM/transformers): the
// last message, an assistant one, is left open so the model continues it.
struct ChatPromptOptions {
  bool add_generation_prompt = true;
  bool continue_final_message = false;
  ToolsRequest tools;  // rendered into the prompt when active()
  std::string template_kwargs_json;  // chat_template_kwargs, an object as sent ("" = none)
};

struct ChatRequest {
  GenerationParams params;
  std::vector<ChatMessage> messages;
  ChatPromptOptions prompt;
};

struct Prompt {
  std::string text;            // when !is_tokens
  std::vector<int32_t> tokens; // when is_tokens
  bool is_tokens = false;
};

struct CompletionRequest {
  GenerationParams params;
  std::vector<Prompt> prompts;  // one or more
  bool echo = false;
};

ApiResult<ChatRequest> parse_chat_request(std::string_view body);
ApiResult<CompletionRequest> parse_completion_request(std::string_view body);

// POST /v1/embeddings: {"input": str | [str] | [int] | [[int]], "model"?, "encoding_format"?:
// "float" | "base64", "dimensions"?: the model's width only, "user"?}, and the extensions
// "pooling": "mean" | "last" (default: the server's) and "normalize" (default true).
struct EmbeddingsRequest {
  std::string model;
  std::vector<Prompt> inputs;  // 1..kMaxEmbeddingInputs
  bool base64 = false;
  int64_t dimensions = 0;      // 0 = not given
  std::optional<Pooling> pooling;
  bool normalize = true;
};
inline constexpr size_t kMaxEmbeddingInputs = 256;
ApiResult<EmbeddingsRequest> parse_embeddings_request(std::string_view body);

// POST /tokenize: {"prompt": str, "add_special_tokens"?: bool} or {"messages": [...]}.
struct TokenizeRequest {
  std::string prompt;
  std::vector<ChatMessage> messages;  // rendered with the chat template when non-empty
  bool add_special = true;
  ChatPromptOptions chat;
};
ApiResult<TokenizeRequest> parse_tokenize_request(std::string_view body);
// POST /detokenize: {"tokens": [int, ...]}.
ApiResult<std::vector<int32_t>> parse_detokenize_request(std::string_view body);

}  // namespace tern::server
