#include "sampling/stop.h"

#include <algorithm>
#include <utility>

namespace tern {

namespace {

// Bytes at the end of `text` that start a UTF-8 sequence without completing
// it. Anything malformed counts as complete: holding it back would not help.
size_t incomplete_utf8_tail(std::string_view text) {
  const size_t n = text.size();
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    const auto byte = static_cast<unsigned char>(text[n - back]);
    if ((byte & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    size_t need = 0;
    if ((byte & 0xE0) == 0xC0) need = 2;
    else if ((byte & 0xF0) == 0xE0) need = 3;
    else if ((byte & 0xF8) == 0xF0) need = 4;
    return need > back ? back : 0;
  }
  return 0;
}

}  // namespace

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

size_t StopMatcher::held_prefix_length() const {
  size_t best = 0;
  const std::string_view held = held_;
  for (const std::string& stop : stops_) {
    // Longest first, and never longer than what is already known to beat it.
    for (size_t len = std::min(stop.size() - 1, held.size()); len > best; --len) {
      if (held.ends_with(std::string_view(stop).substr(0, len))) {
        best = len;
        break;
      }
    }
  }
  return best;
}

StopMatcher::Step StopMatcher::push(std::string_view piece) {
  Step step;
  if (stopped_) {
    step.stopped = true;
    return step;
  }
  held_.append(piece);

  // Any match lies entirely inside held_: everything emitted before could not
  // begin a stop string, and held_ was free of complete matches.
  size_t best_start = std::string::npos;
  size_t best_end = std::string::npos;
  const std::string* best_stop = nullptr;
  for (const std::string& stop : stops_) {
    const size_t start = held_.find(stop);
    if (start == std::string::npos) continue;
    const size_t end = start + stop.size();
    if (end < best_end || (end == best_end && start < best_start)) {
      best_start = start;
      best_end = end;
      best_stop = &stop;
    }
  }
  if (best_stop != nullptr) {
    step.emit = held_.substr(0, best_start);
    step.stopped = true;
    stopped_ = true;
    matched_ = *best_stop;
    held_.clear();
    return step;
  }

  const size_t hold = std::max(held_prefix_length(), incomplete_utf8_tail(held_));
  const size_t n_emit = held_.size() - hold;
  step.emit = held_.substr(0, n_emit);
  held_.erase(0, n_emit);
  return step;
}

std::string StopMatcher::flush() {
  std::string out = std::move(held_);
  held_.clear();
  return out;
}

}  // namespace tern
