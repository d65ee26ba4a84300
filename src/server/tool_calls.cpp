// Tool calls in and out of a model's reply (see tool_calls.h for the formats).
#include "server/tool_calls.h"

#include <algorithm>
#include <random>
#include <regex>

#include "core/json.h"

namespace tern::server {

namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// Bytes of `s` at its end that could begin `marker` (held back while streaming).
size_t partial_marker(std::string_view s, std::string_view marker) {
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

// Where the JSON object or array starting at s[0] ends (one past its closing bracket), or npos.
size_t json_end(std::string_view s) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

}  // namespace

ToolCallParser::ToolCallParser(const ToolsRequest& tools) : tools_(tools) {}

bool ToolCallParser::declared(const std::string& name) const {
  return std::any_of(tools_.tools.begin(), tools_.tools.end(), [&](const ToolSpec& t) { return t.name == name; });
}

// One call object: {"name", "arguments" | "parameters"}, or the same wrapped in
// {"type": "function", "function": {...}}; arguments may arrive as a JSON string.
static bool call_of(const Json& j, ParsedToolCall& out) {
  if (!j.is_object()) return false;
  const Json& c = j["function"].is_object() ? j["function"] : j;
  if (!c["name"].is_string()) return false;
  const Json* args = c.contains("arguments") ? c.find("arguments") : c.find("parameters");
  Result<Json> parsed = Json();
  if (args && args->is_string()) {
    parsed = Json::parse(args->as_string());
    args = parsed.is_ok() ? &*parsed : nullptr;
  }
  if (!args || !args->is_object()) return false;
  out.name = c["name"].as_string();
  out.arguments = args->dump();
  return true;
}

bool ToolCallParser::take_calls(std::string_view text, Delta& d) {
  std::vector<ParsedToolCall> calls;
  // A JSON array of calls, or call objects one after another (`;` or whitespace between).
  size_t i = 0;
  while (true) {
    while (i < text.size() && (is_space(text[i]) || (text[i] == ';' && !calls.empty()))) ++i;
    if (i == text.size()) break;
    if (text[i] != '{' && text[i] != '[') return false;
    const size_t end = json_end(text.substr(i));
    if (end == std::string_view::npos) return false;
    const auto parsed = Json::parse(text.substr(i, end));
    if (!parsed) return false;
    const Json& j = *parsed;
    if (j.is_array()) {
      if (j.empty()) return false;
      for (const Json& e : j.as_array()) {
        ParsedToolCall c;
        if (!call_of(e, c)) return false;
        calls.push_back(std::move(c));
      }
    } else {
      ParsedToolCall c;
      if (!call_of(j, c)) return false;
      calls.push_back(std::move(c));
    }
    i += end;
  }
  if (calls.empty()) return false;
  for (const ParsedToolCall& c : calls)
    if (!declared(c.name)) return false;
  for (ParsedToolCall& c : calls) {
    if (!tools_.parallel && n_calls_ > 0) break;  // parallel_tool_calls false: the first call only
    ++n_calls_;
    d.calls.push_back(std::move(c));
  }
  return true;
}

void ToolCallParser::emit_text(Delta& d, bool final) {
  size_t end = final ? buf_.size() : buf_.size() - partial_marker(buf_, kOpen);
  // Trailing whitespace waits while streaming (it may sit before a call); after calls it is
  // not content at all.
  if (!final || n_calls_ > 0)
    while (end > 0 && is_space(buf_[end - 1])) --end;
  const std::string_view out(buf_.data(), end);
  if (std::any_of(out.begin(), out.end(), [](char c) { return !is_space(c); })) seen_text_ = true;
  d.content.append(out);
  buf_.erase(0, final ? buf_.size() : end);
}

void ToolCallParser::run_forced(Delta& d) {
  while (!buf_.empty()) {
    if (!in_args_) {
      if (tools_.choice == ToolChoice::Named) {
        if (n_calls_ > 0) return;  // one call; nothing follows its object but whitespace
        const size_t start = buf_.find_first_not_of(" \t\r\n");
        if (start == std::string::npos) return;
        buf_.erase(0, start);
        d.calls.push_back({tools_.named, ""});  // the whole reply is its arguments
      } else {
        // The next call's head, `[` or `,` then {"name": "...", "arguments": — whole, or wait.
        // (The grammar fixes the keys' order; a function name needs no escapes.)
        static const std::regex kHead(R"re([\s}]*[\[,]\s*\{\s*"name"\s*:\s*"([^"\\]*)"\s*,\s*"arguments"\s*:\s*)re");
        std::smatch m;
        if (!std::regex_search(buf_, m, kHead, std::regex_constants::match_continuous)) return;
        d.calls.push_back({m[1].str(), ""});
        buf_.erase(0, static_cast<size_t>(m.length(0)));
      }
      ++n_calls_;
      in_args_ = true;
      args_depth_ = 0;
      in_string_ = escaped_ = false;
    }
    // The arguments object's bytes as they come, up to its closing brace (whitespace before
    // its opening one is not part of it).
    if (args_depth_ == 0) {
      const size_t start = buf_.find_first_not_of(" \t\r\n");
      buf_.erase(0, start == std::string::npos ? buf_.size() : start);
    }
    size_t i = 0;
    bool closed = false;
    for (; i < buf_.size() && !closed; ++i) {
      const char c = buf_[i];
      if (in_string_) {
        if (escaped_) escaped_ = false;
        else if (c == '\\') escaped_ = true;
        else if (c == '"') in_string_ = false;
      } else if (c == '"') {
        in_string_ = true;
      } else if (c == '{' || c == '[') {
        ++args_depth_;
      } else if ((c == '}' || c == ']') && --args_depth_ == 0) {
        closed = true;
      }
    }
    // Pieces of one call within one delta are one piece (its head's, when the head is here too).
    if (!d.calls.empty()) d.calls.back().arguments.append(buf_, 0, i);
    else if (i > 0) d.calls.push_back({"", buf_.substr(0, i)});
    buf_.erase(0, i);
    if (!closed) return;
    in_args_ = false;
  }
}

void ToolCallParser::run(Delta& d) {
  if (forced()) {
    run_forced(d);  // the grammar made the whole reply JSON
    return;
  }
  while (true) {
    if (mode_ == Mode::Text) {
      if (!seen_text_ && n_calls_ == 0) {
        const auto first = std::find_if(buf_.begin(), buf_.end(), [](char c) { return !is_space(c); });
        if (first == buf_.end()) return;  // only whitespace so far: undecided
        if (*first == '{' || *first == '[') {
          mode_ = Mode::Json;
          return;
        }
      }
      const size_t at = buf_.find(kOpen);
      if (at == std::string::npos) {
        emit_text(d, /*final=*/false);
        return;
      }
      std::string rest = buf_.substr(at + kOpen.size());
      size_t end = at;  // content before the tag, its trailing whitespace dropped
      while (end > 0 && is_space(buf_[end - 1])) --end;
      if (end > 0) {
        d.content.append(buf_, 0, end);
        seen_text_ = true;
      }
      tag_lead_ = buf_.substr(end, at - end);
      buf_ = std::move(rest);
      mode_ = Mode::InTag;
    } else if (mode_ == Mode::InTag) {
      const size_t at = buf_.find(kClose);
      if (at == std::string::npos) return;
      const std::string body = buf_.substr(0, at);
      if (!take_calls(body, d)) {
        d.content += tag_lead_ + std::string(kOpen) + buf_.substr(0, at + kClose.size());
        seen_text_ = true;
      }
      buf_.erase(0, at + kClose.size());
      mode_ = Mode::Text;
    } else {
      return;  // JSON: decided at the end
    }
  }
}

ToolCallParser::Delta ToolCallParser::feed(std::string_view text) {
  Delta d;
  buf_.append(text);
  run(d);
  return d;
}

ToolCallParser::Delta ToolCallParser::finish() {
  Delta d;
  run(d);
  if (forced()) {
    // What is left is the JSON's closing brackets, or — when no call began (cut short before
    // its head) — the reply itself, returned as content rather than lost.
    if (n_calls_ == 0) d.content = std::move(buf_);
    buf_.clear();
    return d;
  }
  if (mode_ == Mode::InTag) {
    // A reply may end without its closing tag (the end-of-turn came first).
    if (!take_calls(buf_, d)) {
      d.content += tag_lead_ + std::string(kOpen) + buf_;
      seen_text_ = true;
    }
    buf_.clear();
  } else if (mode_ == Mode::Json) {
    if (!take_calls(buf_, d)) d.content += buf_;
    buf_.clear();
  } else {
    emit_text(d, /*final=*/true);
  }
  mode_ = Mode::Text;
  return d;
}

namespace {

// A tool's parameters schema, with any $defs moved to `defs` (references are to the root).
Result<Json> parameters_of(const ToolSpec& t, Json& defs) {
  if (t.parameters.empty()) {
    Json p;
    p["type"] = "object";
    return p;
  }
  auto parsed = Json::parse(t.parameters);
  if (!parsed || !parsed->is_object())
    return error(ErrorKind::InvalidArgument, "tool '" + t.name + "': parameters is not a JSON Schema object");
  Json p = std::move(parsed).value();
  for (const char* key : {"$defs", "definitions"}) {
    const Json* group = p.find(key);
    if (!group) continue;
    if (!group->is_object())
      return error(ErrorKind::InvalidArgument, "tool '" + t.name + "': " + key + " must be an object of schemas");
    for (const auto& [name, schema] : group->as_object()) {
      if (defs.contains(name) && defs[name] != schema)
        return error(ErrorKind::InvalidArgument, "tools define '" + name +
                                                     "' differently in their $defs; with tool_choice required, "
                                                     "give shared definitions one name each");
      defs[name] = schema;
    }
    if (std::string_view(key) == "definitions") {
      // References to #/definitions/X now point at the merged #/$defs/X.
      const std::string text = p.dump();
      std::string fixed;
      const std::string from = "\"#/definitions/", to = "\"#/$defs/";
      for (size_t i = 0; i < text.size();) {
        if (text.compare(i, from.size(), from) == 0) {
          fixed += to;
          i += from.size();
        } else {
          fixed += text[i++];
        }
      }
      auto again = Json::parse(fixed);
      if (!again) return error(ErrorKind::Internal, "tool '" + t.name + "': " + again.status().message());
      p = std::move(again).value();
    }
    p.erase(key);
  }
  return p;
}

}  // namespace

Result<std::string> forced_tool_schema(const ToolsRequest& tools) {
  Json defs = Json::object();
  Json schema;
  if (tools.choice == ToolChoice::Named) {
    for (const ToolSpec& t : tools.tools) {
      if (t.name != tools.named) continue;
      auto p = parameters_of(t, defs);
      TERN_RETURN_IF_ERROR(p.status());
      schema = std::move(p).value();
    }
  } else {
    Json alternatives = Json::array();
    for (const ToolSpec& t : tools.tools) {
      auto p = parameters_of(t, defs);
      TERN_RETURN_IF_ERROR(p.status());
      Json call;
      call["type"] = "object";
      call["properties"]["name"]["const"] = t.name;
      call["properties"]["arguments"] = std::move(p).value();
      call["required"] = Json::Array{"name", "arguments"};
      call["additionalProperties"] = false;
      alternatives.push_back(std::move(call));
    }
    schema["type"] = "array";
    schema["minItems"] = 1;
    if (!tools.parallel) schema["maxItems"] = 1;
    if (alternatives.size() == 1) {
      schema["items"] = std::move(alternatives.as_array()[0]);
    } else {
      schema["items"]["anyOf"] = std::move(alternatives);
    }
  }
  if (!defs.empty()) schema["$defs"] = std::move(defs);
  return schema.dump();
}

std::string tools_prompt_text(const ToolsRequest& tools) {
  // The wording of ChatTemplate::chatml()'s tools turn; kept short, as it costs prompt tokens.
  std::string s = "# Tools\n<tools>";
  const auto list = Json::parse(tools.tools_json);
  if (list && list->is_array())
    for (const Json& t : list->as_array()) s += "\n" + t.dump();
  s += "\n</tools>\nTo call functions, reply with one <tool_call>{\"name\": <name>, \"arguments\": <object>}"
       "</tool_call> per call.";
  return s;
}

std::string new_tool_call_id() {
  static constexpr char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string id(9, 'a');
  for (char& c : id) c = kAlnum[rng() % (sizeof kAlnum - 1)];
  return id;
}

}  // namespace tern::server
