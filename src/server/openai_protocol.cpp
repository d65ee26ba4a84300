// Request parsing: every field is read through one typed getter that names the
// field in its error, so a client learns exactly what to fix.
#include "server/openai_protocol.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "core/json.h"
#include "engine/streaming.h"

namespace tern::server {

std::string api_error_body(const ApiError& e) {
  Json err = Json::object();
  err["message"] = e.message;
  err["type"] = e.type;
  err["param"] = e.param.empty() ? Json() : Json(e.param);
  err["code"] = e.code.empty() ? Json() : Json(e.code);
  Json j = Json::object();
  j["error"] = std::move(err);
  return j.dump();
}

ApiError api_error_from_status(const Status& s, std::string param) {
  ApiError e;
  e.message = s.message();
  e.param = std::move(param);
  switch (s.kind()) {
    case ErrorKind::InvalidArgument:
    case ErrorKind::OutOfRange:
    case ErrorKind::Unsupported:
      e.status = 400;
      break;
    case ErrorKind::NotFound:
      e.status = 404;
      e.type = "not_found_error";
      break;
    case ErrorKind::Unavailable:
      e.status = 503;
      e.type = "server_error";
      break;
    default:
      e.status = 500;
      e.type = "server_error";
      break;
  }
  return e;
}

ApiError server_error(std::string message) {
  ApiError e;
  e.status = 500;
  e.type = "server_error";
  e.message = std::move(message);
  return e;
}

namespace {

ApiError bad(std::string param, std::string message) {
  ApiError e;
  e.param = std::move(param);
  e.message = std::move(message);
  return e;
}

// A failed field read: the error to answer with.
struct FieldError {
  ApiError error;
};

const char* json_type(const Json& v) {
  switch (v.type()) {
    case Json::Type::Null: return "null";
    case Json::Type::Bool: return "a boolean";
    case Json::Type::String: return "a string";
    case Json::Type::Array: return "an array";
    case Json::Type::Object: return "an object";
    default: return "a number";
  }
}

// Typed getters over an object: absent or null fields leave `out` unchanged.
class Fields {
 public:
  explicit Fields(const Json& obj) : obj_(obj) {}
  std::optional<ApiError> error;

  const Json* get(const char* name) const {
    const Json* v = obj_.find(name);
    return v && !v->is_null() ? v : nullptr;
  }
  void fail(const char* name, std::string msg) {
    if (!error) error = bad(name, std::move(msg));
  }
  bool number(const char* name, double lo, double hi, float& out) {
    const Json* v = get(name);
    if (!v) return false;
    if (!v->is_number()) return fail(name, std::string("'") + name + "' must be a number, not " + json_type(*v)), false;
    const double d = v->as_double();
    if (!(d >= lo && d <= hi))
      return fail(name, std::string("'") + name + "' must be between " + fmt(lo) + " and " + fmt(hi) + ", got " +
                            fmt(d)),
             false;
    out = static_cast<float>(d);
    return true;
  }
  template <typename Int>
  bool integer(const char* name, int64_t lo, int64_t hi, Int& out) {
    const Json* v = get(name);
    if (!v) return false;
    if (!v->is_integer() && !(v->is_number() && is_whole(v->as_double())))
      return fail(name, std::string("'") + name + "' must be an integer, not " + json_type(*v)), false;
    // Range-checked in the type the value came in, and reported as sent (a
    // huge unsigned or 1e23 must not be shown clamped or wrapped).
    auto out_of_range = [&](const std::string& got) {
      return fail(name, std::string("'") + name + "' must be between " + std::to_string(lo) + " and " +
                            std::to_string(hi) + ", got " + got),
             false;
    };
    int64_t i = 0;
    if (v->is_integer()) {
      if (!v->to_int64()) return out_of_range(std::to_string(*v->to_uint64()));  // above INT64_MAX
      i = *v->to_int64();
    } else {
      const double d = v->as_double();
      if (d < static_cast<double>(lo) || d > static_cast<double>(hi)) return out_of_range(fmt(d));
      i = static_cast<int64_t>(d);
    }
    if (i < lo || i > hi) return out_of_range(std::to_string(i));
    out = static_cast<Int>(i);
    return true;
  }
  bool boolean(const char* name, bool& out) {
    const Json* v = get(name);
    if (!v) return false;
    if (!v->is_bool()) return fail(name, std::string("'") + name + "' must be a boolean, not " + json_type(*v)), false;
    out = v->as_bool();
    return true;
  }
  bool string(const char* name, std::string& out) {
    const Json* v = get(name);
    if (!v) return false;
    if (!v->is_string()) return fail(name, std::string("'") + name + "' must be a string, not " + json_type(*v)), false;
    out = v->as_string();
    return true;
  }

 private:
  static bool is_whole(double d) { return std::isfinite(d) && d == std::floor(d); }
  static std::string fmt(double d) {
    char b[32];
    std::snprintf(b, sizeof b, "%g", d);
    return b;
  }
  const Json& obj_;
};

// response_format ({"type": "text" | "json_object" | "json_schema",
// "json_schema": {"name", "schema", "strict"}}) and the extensions grammar,
// regex and json_schema: at most one constraint. The grammar itself is
// compiled (and its errors reported) when the engine prepares the request.
std::optional<ApiError> parse_constraint(Fields& f, OutputConstraint& out) {
  int n_given = 0;
  if (const Json* rf = f.get("response_format")) {
    const Json* type = rf->find("type");
    const std::string t = type && type->is_string() ? type->as_string() : "";
    if (t == "json_object") {
      out = {ConstraintKind::JsonObject, {}};
      ++n_given;
    } else if (t == "json_schema") {
      const Json* schema = (*rf)["json_schema"].find("schema");
      if (!schema || !(schema->is_object() || schema->is_bool()))
        return bad("response_format", "'response_format' of type json_schema needs 'json_schema': {\"schema\": {...}}");
      out = {ConstraintKind::JsonSchema, schema->dump()};  // key order as sent: the property order generated
      ++n_given;
    } else if (t != "text") {
      return bad("response_format", "'response_format' type must be text, json_object or json_schema");
    }
  }
  if (const Json* g = f.get("grammar")) {
    if (!g->is_string() || g->as_string().empty()) return bad("grammar", "'grammar' must be GBNF text");
    out = {ConstraintKind::Gbnf, g->as_string()};
    ++n_given;
  }
  if (const Json* r = f.get("regex")) {
    if (!r->is_string() || r->as_string().empty()) return bad("regex", "'regex' must be a regular expression");
    out = {ConstraintKind::Regex, r->as_string()};
    ++n_given;
  }
  if (const Json* s = f.get("json_schema")) {
    if (!s->is_object() && !s->is_bool()) return bad("json_schema", "'json_schema' must be a JSON Schema object");
    out = {ConstraintKind::JsonSchema, s->dump()};
    ++n_given;
  }
  if (n_given > 1)
    return bad("response_format", "give at most one of response_format (json), grammar, regex and json_schema");
  return std::nullopt;
}

std::optional<ApiError> parse_stop(Fields& f, std::vector<std::string>& out) {
  const Json* v = f.get("stop");
  if (!v) return std::nullopt;
  if (v->is_string()) {
    out.push_back(v->as_string());
  } else if (v->is_array()) {
    if (v->size() > kMaxStop) return bad("stop", "'stop' may hold at most " + std::to_string(kMaxStop) + " strings");
    for (const Json& s : v->as_array()) {
      if (!s.is_string()) return bad("stop", "'stop' must be a string or an array of strings");
      out.push_back(s.as_string());
    }
  } else {
    return bad("stop", std::string("'stop' must be a string or an array of strings, not ") + json_type(*v));
  }
  for (const auto& s : out)
    if (s.empty()) return bad("stop", "'stop' strings must not be empty");
  return std::nullopt;
}

// Fields both endpoints share. `chat` selects the logprobs shape and defaults.
std::optional<ApiError> parse_common(const Json& j, bool chat, GenerationParams& p) {
  Fields f(j);
  p.sampling.temperature = 1.0f;
  p.sampling.top_p = 1.0f;
  p.sampling.top_k = 0;
  p.sampling.min_p = 0.0f;
  p.sampling.penalty_last_n = -1;  // OpenAI penalties count the whole text so far
  p.max_tokens = chat ? -1 : 16;
  f.string("model", p.model);
  int32_t max_tokens = -2;
  f.integer("max_tokens", 0, INT32_MAX, max_tokens);
  if (chat && f.get("max_completion_tokens")) f.integer("max_completion_tokens", 0, INT32_MAX, max_tokens);
  if (max_tokens != -2) p.max_tokens = max_tokens;
  f.integer("n", 1, kMaxN, p.n);
  f.boolean("stream", p.stream);
  if (const Json* so = f.get("stream_options")) {
    if (!so->is_object()) return bad("stream_options", "'stream_options' must be an object");
    Fields g(*so);
    g.boolean("include_usage", p.include_usage);
    if (g.error) return g.error;
  }
  f.number("temperature", 0.0, 2.0, p.sampling.temperature);
  f.number("top_p", 0.0, 1.0, p.sampling.top_p);
  if (p.sampling.top_p <= 0.0f) return bad("top_p", "'top_p' must be greater than 0");
  f.integer("top_k", -1, INT32_MAX, p.sampling.top_k);
  if (p.sampling.top_k < 0) p.sampling.top_k = 0;
  f.number("min_p", 0.0, 1.0, p.sampling.min_p);
  f.number("presence_penalty", -2.0, 2.0, p.sampling.presence_penalty);
  f.number("frequency_penalty", -2.0, 2.0, p.sampling.frequency_penalty);
  f.number("repetition_penalty", 1e-3, 100.0, p.sampling.repetition_penalty);
  if (const Json* seed = f.get("seed")) {
    int64_t s = 0;
    if (f.integer("seed", INT64_MIN, INT64_MAX, s)) {
      p.sampling.seed = static_cast<uint64_t>(s);
      // The all-ones pattern means "random" to the sampler; nudge it.
      if (p.sampling.seed == SamplingParams::kRandomSeed) p.sampling.seed -= 1;
      p.seeded = true;
    }
    (void)seed;
  }
  f.integer("priority", INT32_MIN, INT32_MAX, p.priority);
  f.boolean("ignore_eos", p.ignore_eos);
  f.string("user", p.user);
  f.integer("spec_k", 0, 16, p.spec_k);
  f.integer("spec_tree", 1, 8, p.spec_tree);
  f.integer("prompt_logprobs", 0, 20, p.prompt_logprobs);
  if (f.error) return f.error;
  if (const Json* s = f.get("streaming")) {
    auto st = streaming_from_json(*s);
    if (!st) return bad("streaming", st.status().message());
    p.streaming = *st;
  }
  if (const Json* e = f.get("kv_evict")) {
    auto ev = kv_evict_from_json(*e);
    if (!ev) return bad("kv_evict", ev.status().message());
    p.kv_evict = *ev;
  }
  if (const Json* ids = f.get("stop_token_ids")) {
    if (!ids->is_array() || ids->size() > 64)
      return bad("stop_token_ids", "'stop_token_ids' must be an array of at most 64 token ids");
    for (const Json& id : ids->as_array()) {
      const auto v = id.to_int64();
      if (!v || *v < 0 || *v > INT32_MAX)
        return bad("stop_token_ids", "'stop_token_ids' must hold non-negative integer token ids");
      p.stop_token_ids.push_back(static_cast<int32_t>(*v));
    }
  }
  if (auto e = parse_stop(f, p.stop)) return e;

  if (chat) {
    bool logprobs = false;
    int top = 0;
    f.boolean("logprobs", logprobs);
    f.integer("top_logprobs", 0, 20, top);
    if (f.error) return f.error;
    if (f.get("top_logprobs") && !logprobs) return bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    if (logprobs) p.n_logprobs = top;
  } else {
    int k = -1;
    f.integer("logprobs", 0, 5, k);
    if (f.error) return f.error;
    p.n_logprobs = k;
  }
  if (const Json* lb = f.get("logit_bias")) {
    if (!lb->is_object() || lb->size() > kMaxLogitBias)
      return bad("logit_bias", "'logit_bias' must be an object of at most " + std::to_string(kMaxLogitBias) +
                                   " token ids (as strings) to numbers");
    for (const auto& [key, v] : lb->as_object()) {
      if (lb->find(key) != &v) continue;  // a key sent twice: the last one counts
      char* end = nullptr;
      const long id = std::strtol(key.c_str(), &end, 10);
      if (key.empty() || *end != '\0' || id < 0 || id > INT32_MAX)
        return bad("logit_bias", "'logit_bias' keys must be token ids, not '" + key + "'");
      if (!v.is_number() || !(v.as_double() >= -100.0 && v.as_double() <= 100.0))
        return bad("logit_bias", "'logit_bias' values must be numbers between -100 and 100");
      p.logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(v.as_double()));
    }
  }
  if (auto e = parse_constraint(f, p.constraint)) return e;
  if (const Json* bo = f.get("best_of")) {
    if (!bo->to_int64() || *bo->to_int64() != p.n)
      return bad("best_of", "'best_of' other than n is not supported");
  }
  return std::nullopt;
}

std::optional<Json> parse_json(std::string_view body, ApiError& e) {
  // The depth limit is the reader's: a body of a million '[' stops at the 65th.
  auto j = Json::parse(body, kMaxJsonDepth);
  if (!j) {
    e = bad("", "the request body: " + j.status().message());
    return std::nullopt;
  }
  if (!j->is_object()) {
    e = bad("", std::string("the request body must be a JSON object, not ") + json_type(*j));
    return std::nullopt;
  }
  return std::move(j).value();
}

// An assistant message's tool_calls and a tool message's tool_call_id / name.
std::optional<ApiError> parse_message_tools(const Json& m, const std::string& where, ChatMessage& msg) {
  if (const Json* calls = m.find("tool_calls"); calls && !calls->is_null()) {
    const std::string at = where + ".tool_calls";
    if (msg.role != "assistant") return bad(at, at + " is only allowed on assistant messages");
    if (!calls->is_array()) return bad(at, at + " must be an array");
    for (size_t k = 0; k < calls->size(); ++k) {
      const Json& c = calls->as_array()[k];
      const std::string ck = at + "[" + std::to_string(k) + "]";
      const Json& fn = c["function"];
      if (!fn.is_object() || !fn["name"].is_string())
        return bad(ck, ck + " must be {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}");
      ToolCall call;
      call.name = fn["name"].as_string();
      if (c["id"].is_string()) call.id = c["id"].as_string();
      const Json& a = fn["arguments"];
      if (a.is_string()) call.arguments = a.as_string();
      else if (a.is_object()) call.arguments = a.dump();
      else if (!a.is_null()) return bad(ck, ck + ".function.arguments must be a JSON string");
      if (call.arguments.empty()) call.arguments = "{}";
      msg.tool_calls.push_back(std::move(call));
    }
  }
  for (const char* key : {"tool_call_id", "name"}) {
    const Json* v = m.find(key);
    if (!v || v->is_null()) continue;
    if (!v->is_string()) return bad(where + "." + key, where + "." + key + " must be a string");
    (std::string_view(key) == "name" ? msg.name : msg.tool_call_id) = v->as_string();
  }
  return std::nullopt;
}

std::optional<ApiError> parse_messages(const Json& j, std::vector<ChatMessage>& out) {
  const Json* list = j.find("messages");
  if (!list || list->is_null()) return bad("messages", "'messages' is required");
  if (!list->is_array()) return bad("messages", "'messages' must be an array of message objects");
  if (list->empty()) return bad("messages", "'messages' must not be empty");
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& m = list->as_array()[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return bad(where, where + " must be an object");
    ChatMessage msg;
    const Json& role = m["role"];
    if (!role.is_string()) return bad(where + ".role", where + ".role must be a string");
    msg.role = role.as_string();
    if (msg.role == "developer") msg.role = "system";
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "tool")
      return bad(where + ".role", where + ".role must be one of system, developer, user, assistant, tool; got '" +
                                      msg.role + "'");
    if (auto err = parse_message_tools(m, where, msg)) return err;
    if (const Json& rc = m["reasoning_content"]; !rc.is_null()) {
      if (msg.role != "assistant" || !rc.is_string())
        return bad(where + ".reasoning_content", where + ".reasoning_content must be a string on an assistant message");
      msg.reasoning_content = rc.as_string();
    }
    const Json& content = m["content"];
    if (content.is_null()) {
      if (msg.role != "assistant") return bad(where + ".content", where + ".content is required");
    } else if (content.is_string()) {
      msg.content = content.as_string();
    } else if (content.is_array()) {
      for (const Json& part : content.as_array()) {
        const Json& type = part["type"];
        if (!type.is_string() || type.as_string() != "text" || !part["text"].is_string())
          return bad(where + ".content", where + ".content parts must be {\"type\": \"text\", \"text\": string}; "
                                                 "other part types are not supported");
        msg.content += part["text"].as_string();
        msg.content_parts.push_back(part["text"].as_string());
      }
    } else {
      return bad(where + ".content", where + ".content must be a string or an array of text parts");
    }
    out.push_back(std::move(msg));
  }
  return std::nullopt;
}

bool valid_function_name(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.';
  });
}

// tools, tool_choice and parallel_tool_calls. Key order is kept as sent: the template prints
// tools with tojson, and a schema's property order is the order generated.
std::optional<ApiError> parse_tools(const Json& o, ToolsRequest& out) {
  if (const Json* tools = o.find("tools"); tools && !tools->is_null()) {
    if (!tools->is_array()) return bad("tools", "'tools' must be an array of {\"type\": \"function\", \"function\": {...}}");
    if (tools->size() > kMaxTools) return bad("tools", "at most " + std::to_string(kMaxTools) + " tools per request");
    for (size_t k = 0; k < tools->size(); ++k) {
      const Json& t = tools->as_array()[k];
      const std::string at = "tools[" + std::to_string(k) + "]";
      if (!t["type"].is_string() || t["type"].as_string() != "function")
        return bad(at, at + " must have \"type\": \"function\" (the only tool type supported)");
      const Json& fn = t["function"];
      if (!fn.is_object()) return bad(at, at + ".function must be an object with name, description and parameters");
      if (!fn["name"].is_string() || !valid_function_name(fn["name"].as_string()))
        return bad(at, at + ".function.name must be 1 to 64 letters, digits, '_', '-' or '.'");
      ToolSpec spec;
      spec.name = fn["name"].as_string();
      for (const ToolSpec& prev : out.tools)
        if (prev.name == spec.name) return bad(at, "two tools are named '" + spec.name + "'");
      if (const Json& params = fn["parameters"]; !params.is_null()) {
        if (!params.is_object()) return bad(at, at + ".function.parameters must be a JSON Schema object");
        spec.parameters = params.dump();
      }
      if (const Json& d = fn["description"]; !d.is_string() && !d.is_null())
        return bad(at, at + ".function.description must be a string");
      out.tools.push_back(std::move(spec));
    }
    if (!out.tools.empty()) out.tools_json = tools->dump();
  }
  if (const Json* choice = o.find("tool_choice"); choice && !choice->is_null()) {
    const char* shape = "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
                        "\"function\": {\"name\": ...}}";
    if (choice->is_string()) {
      const std::string& c = choice->as_string();
      if (c == "auto") out.choice = ToolChoice::Auto;
      else if (c == "none") out.choice = ToolChoice::None;
      else if (c == "required") out.choice = ToolChoice::Required;
      else return bad("tool_choice", shape);
    } else if ((*choice)["function"]["name"].is_string()) {
      out.choice = ToolChoice::Named;
      out.named = (*choice)["function"]["name"].as_string();
    } else {
      return bad("tool_choice", shape);
    }
    if (out.choice == ToolChoice::Required && out.tools.empty())
      return bad("tool_choice", "'tool_choice' \"required\" needs 'tools'");
    if (out.choice == ToolChoice::Named &&
        std::none_of(out.tools.begin(), out.tools.end(), [&](const ToolSpec& t) { return t.name == out.named; }))
      return bad("tool_choice", "'tool_choice' names the function '" + out.named + "', which is not among 'tools'");
  }
  if (const Json* par = o.find("parallel_tool_calls"); par && !par->is_null()) {
    if (!par->is_bool()) return bad("parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    out.parallel = par->as_bool();
  }
  return std::nullopt;
}

std::optional<ApiError> parse_prompt_options(Fields& f, const Json& j, const std::vector<ChatMessage>& messages,
                                             ChatPromptOptions& o) {
  if (auto err = parse_tools(j, o.tools)) return err;
  const bool agp_given = f.get("add_generation_prompt") != nullptr;
  f.boolean("add_generation_prompt", o.add_generation_prompt);
  f.boolean("continue_final_message", o.continue_final_message);
  if (f.error) return f.error;
  if (const Json* k = f.get("chat_template_kwargs")) {
    if (!k->is_object()) return bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    for (const auto& [key, value] : k->as_object())
      if (ChatTemplate::reserved_variable(key))
        return bad("chat_template_kwargs", "'chat_template_kwargs' cannot set '" + key + "': the request sets it");
    o.template_kwargs_json = k->dump();  // key order as the client wrote it (a template may print the object)
  }
  if (o.continue_final_message) {
    if (agp_given && o.add_generation_prompt)
      return bad("continue_final_message", "'continue_final_message' and 'add_generation_prompt' cannot both be true");
    o.add_generation_prompt = false;
    if (messages.empty() || messages.back().role != "assistant")
      return bad("continue_final_message", "'continue_final_message' needs the last message to be the assistant's");
  }
  return std::nullopt;
}

// The shapes `prompt` (completions) and `input` (embeddings) take: a string, a list of strings,
// a list of token ids, or a list of token-id lists.
std::optional<ApiError> parse_prompts(const Json& j, const char* field, std::vector<Prompt>& out) {
  const Json* v = j.find(field);
  if (!v || v->is_null()) return bad(field, std::string("'") + field + "' is required");
  auto tokens_of = [](const Json& a, Prompt& p) {
    p.is_tokens = true;
    for (const Json& t : a.as_array()) {
      const auto id = t.to_int64();
      if (!id || *id < 0 || *id > INT32_MAX) return false;
      p.tokens.push_back(static_cast<int32_t>(*id));
    }
    return true;
  };
  const std::string shape = std::string("'") + field +
                            "' must be a string, an array of strings, an array of token ids, or an array of "
                            "arrays of token ids";
  if (v->is_string()) {
    out.push_back({v->as_string(), {}, false});
  } else if (v->is_array()) {
    if (v->empty()) return bad(field, std::string("'") + field + "' must not be empty");
    if (v->as_array()[0].is_number()) {
      Prompt p;
      if (!tokens_of(*v, p)) return bad(field, shape);
      out.push_back(std::move(p));
    } else {
      for (const Json& el : v->as_array()) {
        Prompt p;
        if (el.is_string()) {
          p.text = el.as_string();
        } else if (el.is_array()) {
          if (!tokens_of(el, p)) return bad(field, shape);
        } else {
          return bad(field, shape);
        }
        out.push_back(std::move(p));
      }
    }
  } else {
    return bad(field, shape);
  }
  return std::nullopt;
}

}  // namespace

ApiResult<ChatRequest> parse_chat_request(std::string_view body) {
  ApiError e;
  auto j = parse_json(body, e);
  if (!j) return e;
  ChatRequest r;
  if (auto err = parse_messages(*j, r.messages)) return *err;
  if (auto err = parse_common(*j, /*chat=*/true, r.params)) return *err;
  Fields f(*j);
  if (auto err = parse_prompt_options(f, *j, r.messages, r.prompt)) return *err;
  for (const char* legacy : {"functions", "function_call"})
    if (f.get(legacy))
      return bad(legacy, std::string("the legacy '") + legacy +
                             "' field is not supported: send 'tools' and 'tool_choice' instead");
  const ToolChoice choice = r.prompt.tools.choice;
  if ((choice == ToolChoice::Required || choice == ToolChoice::Named) &&
      r.params.constraint.kind != ConstraintKind::None)
    return bad("tool_choice", "a required or named 'tool_choice' cannot be combined with response_format, grammar, "
                              "regex or json_schema: the tool call is the reply's format");
  return r;
}

ApiResult<CompletionRequest> parse_completion_request(std::string_view body) {
  ApiError e;
  auto j = parse_json(body, e);
  if (!j) return e;
  CompletionRequest r;
  if (auto err = parse_prompts(*j, "prompt", r.prompts)) return *err;
  if (r.prompts.size() > 64) return bad("prompt", "at most 64 prompts per request");
  Fields f(*j);
  f.boolean("echo", r.echo);
  if (f.error) return *f.error;
  if (auto err = parse_common(*j, /*chat=*/false, r.params)) return *err;
  if (r.params.n * static_cast<int>(r.prompts.size()) > 64)
    return bad("n", "prompts x n must be at most 64 choices per request");
  // echo + logprobs: the prompt's tokens get log-probabilities too, as OpenAI's legacy API gives them.
  if (r.echo && r.params.n_logprobs >= 0) r.params.prompt_logprobs = std::max(r.params.prompt_logprobs, r.params.n_logprobs);
  return r;
}

ApiResult<EmbeddingsRequest> parse_embeddings_request(std::string_view body) {
  ApiError e;
  auto j = parse_json(body, e);
  if (!j) return e;
  EmbeddingsRequest r;
  if (auto err = parse_prompts(*j, "input", r.inputs)) return *err;
  if (r.inputs.size() > kMaxEmbeddingInputs)
    return bad("input", "at most " + std::to_string(kMaxEmbeddingInputs) + " inputs per request");
  Fields f(*j);
  f.string("model", r.model);
  std::string format = "float";
  f.string("encoding_format", format);
  f.integer("dimensions", 1, INT32_MAX, r.dimensions);
  std::string pooling;
  if (f.string("pooling", pooling)) {
    if (pooling == "mean") r.pooling = Pooling::Mean;
    else if (pooling == "last") r.pooling = Pooling::Last;
    else return bad("pooling", "'pooling' must be \"mean\" or \"last\"");
  }
  f.boolean("normalize", r.normalize);
  if (f.error) return *f.error;
  if (format != "float" && format != "base64")
    return bad("encoding_format", "'encoding_format' must be \"float\" or \"base64\"");
  r.base64 = format == "base64";
  return r;
}

ApiResult<TokenizeRequest> parse_tokenize_request(std::string_view body) {
  ApiError e;
  auto j = parse_json(body, e);
  if (!j) return e;
  TokenizeRequest r;
  Fields f(*j);
  if (j->contains("messages")) {
    if (auto err = parse_messages(*j, r.messages)) return *err;
    if (auto err = parse_prompt_options(f, *j, r.messages, r.chat)) return *err;
    r.add_special = false;  // the template writes BOS itself
  } else if (!f.string("prompt", r.prompt) && !f.error) {
    return bad("prompt", "'prompt' (a string) or 'messages' is required");
  }
  f.boolean("add_special_tokens", r.add_special);
  if (f.error) return *f.error;
  return r;
}

ApiResult<std::vector<int32_t>> parse_detokenize_request(std::string_view body) {
  ApiError e;
  auto j = parse_json(body, e);
  if (!j) return e;
  const Json* tokens = j->find("tokens");
  if (!tokens || !tokens->is_array()) return bad("tokens", "'tokens' (an array of token ids) is required");
  std::vector<int32_t> out;
  for (const Json& t : tokens->as_array()) {
    const auto id = t.to_int64();
    if (!id || *id < 0 || *id > INT32_MAX) return bad("tokens", "'tokens' must hold non-negative integer token ids");
    out.push_back(static_cast<int32_t>(*id));
  }
  return out;
}

}  // namespace tern::server
