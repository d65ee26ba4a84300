#include "loadgen/sse.h"

#include <climits>

#include "core/json.h"

namespace tern::loadgen {
namespace {

std::string string_field(const Json& obj, const char* key) {
  const Json* v = obj.find(key);
  return v && v->is_string() ? v->as_string() : std::string();
}

std::optional<int> int_field(const Json& obj, const char* key) {
  const Json* v = obj.find(key);
  const auto i = v ? v->to_int64() : std::nullopt;
  if (!i || *i < INT_MIN || *i > INT_MAX) return std::nullopt;
  return static_cast<int>(*i);
}

void read_error_object(const Json& err, std::string& type, std::string& message) {
  if (err.is_object()) {
    type = string_field(err, "type");
    message = string_field(err, "message");
  } else if (err.is_string()) {
    message = err.as_string();
  }
}

}  // namespace

void SseParser::feed(std::string_view bytes) {
  size_t start = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] != '\n') continue;
    if (line_.empty()) {
      take_line(bytes.substr(start, i - start));
    } else {
      line_.append(bytes.substr(start, i - start));
      take_line(line_);
      line_.clear();
    }
    start = i + 1;
  }
  line_.append(bytes.substr(start));
}

void SseParser::finish() {
  if (!line_.empty()) {
    take_line(line_);
    line_.clear();
  }
  dispatch();
}

void SseParser::take_line(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.empty()) {
    dispatch();
    return;
  }
  if (line.front() == ':') {
    ++n_comments_;
    return;
  }
  const size_t colon = line.find(':');
  const std::string_view field = line.substr(0, colon);
  if (field != "data") return;
  std::string_view value = colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (has_data_) data_ += '\n';
  data_.append(value);
  has_data_ = true;
}

void SseParser::dispatch() {
  if (!has_data_) return;
  ++n_events_;
  const std::string data = std::move(data_);
  data_.clear();
  has_data_ = false;
  on_event_(data);
}

ChunkInfo interpret_chunk(std::string_view data) {
  ChunkInfo c;
  if (data == "[DONE]") {
    c.done = true;
    return c;
  }
  const auto parsed = Json::parse(data);
  if (!parsed || !parsed->is_object()) {
    c.malformed = true;
    return c;
  }
  const Json& j = *parsed;
  if (const Json* err = j.find("error"); err && !err->is_null()) {
    c.is_error = true;
    read_error_object(*err, c.error_type, c.error_message);
    return c;
  }
  if (const Json* usage = j.find("usage"); usage && usage->is_object()) {
    c.prompt_tokens = int_field(*usage, "prompt_tokens");
    c.completion_tokens = int_field(*usage, "completion_tokens");
  }
  const Json* choices = j.find("choices");
  if (!choices || !choices->is_array()) {
    c.malformed = !c.completion_tokens.has_value();
    return c;
  }
  if (choices->empty()) return c;  // the usage-only chunk
  const Json& choice = choices->as_array()[0];
  if (!choice.is_object()) {
    c.malformed = true;
    return c;
  }
  c.finish_reason = string_field(choice, "finish_reason");
  if (const Json* delta = choice.find("delta"); delta && delta->is_object())
    c.content = string_field(*delta, "content");
  else
    c.content = string_field(choice, "text");
  return c;
}

void read_error_body(std::string_view body, std::string& type, std::string& message) {
  type.clear();
  message.clear();
  const auto j = Json::parse(body);
  if (!j || !j->is_object()) {
    message = std::string(body.substr(0, 200));
    return;
  }
  if (const Json* err = j->find("error")) read_error_object(*err, type, message);
}

}  // namespace tern::loadgen
