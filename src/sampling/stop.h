// sampling/stop.h — stop strings over streamed text.
//
// Contract: the caller pushes the text of each generated token as it is
// detokenized. push() returns the text that is now safe to show: it can no
// longer become part of a stop string. A suffix that is a prefix of some stop
// string is held back until the next piece decides it. When a stop string
// appears, everything before it is emitted and `stopped` is set; the stop
// string and anything after it are never emitted, and later pushes emit
// nothing.
//
// Which stop wins: the one that is complete earliest in the text (the first
// moment generation could have stopped), and among those ending at the same
// byte, the one starting earliest. This makes the result independent of how
// the text is cut into pieces.
//
// UTF-8: matching is bytewise. An incomplete UTF-8 sequence at the end of the
// text is also held back, so each emitted piece ends on a character boundary
// when the whole text is valid UTF-8 (tokens may split a character). flush()
// returns whatever is held, complete or not.
//
// Empty stop strings are ignored (they would match before any text). Not
// thread-safe; one per sequence.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tern {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  struct Step {
    std::string emit;
    bool stopped = false;
  };

  Step push(std::string_view piece);
  // The held-back text, once generation ends without a stop. Empty after a stop.
  std::string flush();

  // The stop string that matched; empty until push() reports stopped.
  const std::string& matched_stop() const { return matched_; }
  bool stopped() const { return stopped_; }

 private:
  // Length of the longest suffix of held_ that is a proper prefix of a stop.
  size_t held_prefix_length() const;

  std::vector<std::string> stops_;  // non-empty strings only
  std::string held_;                // text received but not yet emitted
  std::string matched_;
  bool stopped_ = false;
};

}  // namespace tern
