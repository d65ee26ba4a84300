// loadgen/sse.h — server-sent events framing and OpenAI stream chunks.
//
// Contract:
// - SseParser is fed the response body in whatever pieces the network gives
//   (an event, a line or a UTF-8 character may be split anywhere) and calls
//   on_event once per complete event with its data lines joined by '\n'.
//   Lines end in "\n" or "\r\n"; ":" lines are comments (keep-alives) and
//   counted; fields other than data are ignored; an event ends at a blank line.
//   finish() delivers an event left without its blank line when the body ends.
// - interpret_chunk() reads one event's data as an OpenAI completion or chat
//   chunk: "[DONE]", an {"error": ...} object, content text (choices[0].text or
//   choices[0].delta.content), finish_reason and usage, without throwing.
// Threading: a parser belongs to one stream.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace tern::loadgen {

class SseParser {
 public:
  explicit SseParser(std::function<void(std::string_view data)> on_event) : on_event_(std::move(on_event)) {}
  void feed(std::string_view bytes);
  void finish();
  size_t n_comments() const { return n_comments_; }
  size_t n_events() const { return n_events_; }

 private:
  void take_line(std::string_view line);
  void dispatch();

  std::function<void(std::string_view)> on_event_;
  std::string line_;  // the unfinished line so far
  std::string data_;  // data of the unfinished event
  bool has_data_ = false;
  size_t n_comments_ = 0, n_events_ = 0;
};

struct ChunkInfo {
  bool done = false;         // "[DONE]"
  bool malformed = false;    // not JSON, or JSON of an unexpected shape
  bool is_error = false;     // {"error": {...}} inside the stream
  std::string error_type, error_message;
  std::string content;       // text of choice 0 ("" when none)
  std::string finish_reason; // "" while null
  std::optional<int> prompt_tokens, completion_tokens;  // from a non-null "usage"
};
ChunkInfo interpret_chunk(std::string_view data);

// Reads {"error": {"message", "type"}} from a non-2xx body; "" fields when absent.
void read_error_body(std::string_view body, std::string& type, std::string& message);

}  // namespace tern::loadgen
