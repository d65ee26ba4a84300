// The load generator's server-sent-events parser and OpenAI chunk reader (loadgen/sse.h). The
// input is a response body; it is parsed whole and again in pieces whose sizes come from the
// input itself (an event, a line or a "\r\n" split anywhere), and both must give the same events
// and comment count. Every event's data is read as a chunk, the whole input as an error body.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz.h"
#include "loadgen/sse.h"

namespace {

struct Parsed {
  std::vector<std::string> events;
  size_t comments = 0;
};

Parsed parse(std::string_view body, size_t piece_seed) {
  Parsed out;
  tern::loadgen::SseParser parser([&](std::string_view data) { out.events.emplace_back(data); });
  size_t i = 0, k = piece_seed;
  while (i < body.size()) {
    const size_t n = piece_seed == 0 ? body.size() : 1 + k % 7;
    parser.feed(body.substr(i, n));
    i += n;
    k = k * 31 + 17;
  }
  parser.finish();
  out.comments = parser.n_comments();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 65536) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  const Parsed whole = parse(body, 0), pieces = parse(body, 1 + data[0]);
  if (whole.events != pieces.events || whole.comments != pieces.comments) {
    std::fprintf(stderr, "fuzz_sse: %zu events whole, %zu in pieces\n", whole.events.size(), pieces.events.size());
    std::abort();
  }
  for (const std::string& e : whole.events) (void)tern::loadgen::interpret_chunk(e);
  std::string type, message;
  tern::loadgen::read_error_body(body, type, message);
  return 0;
}
