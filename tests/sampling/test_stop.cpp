// StopMatcher: splitting, partial matches, several stops, UTF-8, piece-independence.
#include <gtest/gtest.h>

#include <random>

#include "sampling/stop.h"

namespace tern {
namespace {

struct StopRun {
  std::vector<std::string> emits;  // one per push
  std::string text;                // everything emitted, flush included when not stopped
  bool stopped = false;
};

StopRun run_stops(std::vector<std::string> stops, const std::vector<std::string>& pieces) {
  StopMatcher m(std::move(stops));
  StopRun r;
  for (const std::string& piece : pieces) {
    StopMatcher::Step step = m.push(piece);
    r.emits.push_back(step.emit);
    r.text += step.emit;
    if (step.stopped) {
      r.stopped = true;
      break;
    }
  }
  if (!r.stopped) r.text += m.flush();
  return r;
}

bool is_valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    size_t len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

TEST(StopMatcher, EmptyStopListEmitsEverythingAtOnce) {
  const StopRun r = run_stops({}, {"Hello", ", ", "world"});
  EXPECT_EQ(r.emits, (std::vector<std::string>{"Hello", ", ", "world"}));
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(r.text, "Hello, world");
}

TEST(StopMatcher, EmptyStopStringsAreIgnored) {
  const StopRun r = run_stops({"", ""}, {"abc"});
  EXPECT_EQ(r.emits, (std::vector<std::string>{"abc"}));
  EXPECT_FALSE(r.stopped);
}

TEST(StopMatcher, StopSplitAcrossPieces) {
  const StopRun r = run_stops({"</s>"}, {"Hello <", "/", "s", "> more"});
  EXPECT_EQ(r.emits, (std::vector<std::string>{"Hello ", "", "", ""}));
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "Hello ");
}

TEST(StopMatcher, TextBeforeStopInSamePieceIsEmitted) {
  StopMatcher m({"###"});
  EXPECT_EQ(m.push("ab").emit, "ab");
  const StopMatcher::Step step = m.push("c### tail");
  EXPECT_TRUE(step.stopped);
  EXPECT_EQ(step.emit, "c");
  EXPECT_EQ(m.matched_stop(), "###");
  // Nothing after a stop, ever.
  const StopMatcher::Step later = m.push("more");
  EXPECT_TRUE(later.stopped);
  EXPECT_EQ(later.emit, "");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, PartialMatchThatFailsIsEmittedInFull) {
  const StopRun r = run_stops({"STOP"}, {"go ST", "O", "Pping? no: STO", "ck"});
  // "ST", "STO" are held, then released once the next piece rules them out.
  EXPECT_EQ(r.emits[0], "go ");
  EXPECT_EQ(r.emits[1], "");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "go ");

  const StopRun r2 = run_stops({"STOP"}, {"go ST", "OX", " and STO", "ck"});
  EXPECT_EQ(r2.emits, (std::vector<std::string>{"go ", "STOX", " and ", "STOck"}));
  EXPECT_FALSE(r2.stopped);
  EXPECT_EQ(r2.text, "go STOX and STOck");
}

TEST(StopMatcher, HeldTextComesOutOnFlush) {
  StopMatcher m({"\n\nUser:"});
  EXPECT_EQ(m.push("The end.\n").emit, "The end.");
  EXPECT_EQ(m.push("\nUs").emit, "");
  EXPECT_EQ(m.flush(), "\n\nUs");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, StopAtVeryStart) {
  const StopRun whole = run_stops({"<|end|>"}, {"<|end|>", "x"});
  EXPECT_TRUE(whole.stopped);
  EXPECT_EQ(whole.emits, (std::vector<std::string>{""}));
  const StopRun split = run_stops({"<|end|>"}, {"<|", "end", "|>"});
  EXPECT_TRUE(split.stopped);
  EXPECT_EQ(split.text, "");
}

TEST(StopMatcher, MultipleStopsEarliestCompletionWins) {
  StopMatcher m({"world", "lo w", "\n"});
  const StopMatcher::Step step = m.push("hello world\n");
  EXPECT_TRUE(step.stopped);
  EXPECT_EQ(step.emit, "hel");  // "lo w" completes before "world" does
  EXPECT_EQ(m.matched_stop(), "lo w");

  // Same end: the longer (earlier-starting) stop wins, emitting less.
  StopMatcher same_end({"c", "abc"});
  EXPECT_EQ(same_end.push("xxabcd").emit, "xx");
  EXPECT_EQ(same_end.matched_stop(), "abc");
}

TEST(StopMatcher, HoldsLongestPrefixOverAllStops) {
  StopMatcher m({"abcd", "cx"});
  EXPECT_EQ(m.push("zzabc").emit, "zz");  // "abc" is a prefix of "abcd"
  EXPECT_EQ(m.push("q").emit, "abcq");
}

TEST(StopMatcher, Utf8StopsAndPieces) {
  const std::string text = "こんにちは。さようなら";
  const StopRun whole = run_stops({"。"}, {text});
  EXPECT_TRUE(whole.stopped);
  EXPECT_EQ(whole.text, "こんにちは");

  // Byte-by-byte pieces, as byte-fallback tokens produce: every emit stays
  // valid UTF-8 and the result is the same.
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  const StopRun split = run_stops({"。"}, bytes);
  EXPECT_TRUE(split.stopped);
  EXPECT_EQ(split.text, "こんにちは");
  for (const std::string& e : split.emits) EXPECT_TRUE(is_valid_utf8(e)) << e;
}

TEST(StopMatcher, IncompleteUtf8IsHeldEvenWithoutStops) {
  StopMatcher m({});
  EXPECT_EQ(m.push("a\xE3\x81").emit, "a");
  EXPECT_EQ(m.push("\x93\xF0\x9F").emit, "\xE3\x81\x93");  // こ
  EXPECT_EQ(m.push("\x98").emit, "");
  EXPECT_EQ(m.push("\x80!").emit, "\xF0\x9F\x98\x80!");  // 😀
  EXPECT_EQ(m.push("\xE3").emit, "");
  EXPECT_EQ(m.flush(), "\xE3");  // flush gives back even an incomplete tail
}

TEST(StopMatcher, MalformedBytesAreNotHeldForever) {
  StopMatcher m({});
  EXPECT_EQ(m.push("\x80\x80\x80\x80\x80").emit, "\x80\x80\x80\x80\x80");
}

TEST(StopMatcher, Utf8StopSharingLeadBytes) {
  // "é" (C3 A9) and "ê" (C3 AA) share a lead byte: "ê" must not be cut.
  const StopRun r = run_stops({"é!"}, {"caf", "\xC3", "\xAA", "é", "!"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "cafê");
  for (const std::string& e : r.emits) EXPECT_TRUE(is_valid_utf8(e)) << e;
}

// Reference: the earliest end over all occurrences, then the earliest start.
std::pair<std::string, bool> reference(const std::string& text, const std::vector<std::string>& stops) {
  for (size_t end = 1; end <= text.size(); ++end) {
    size_t best_start = std::string::npos;
    for (const std::string& s : stops) {
      if (s.size() <= end && text.compare(end - s.size(), s.size(), s) == 0) {
        best_start = std::min(best_start, end - s.size());
      }
    }
    if (best_start != std::string::npos) return {text.substr(0, best_start), true};
  }
  return {text, false};
}

TEST(StopMatcher, ResultIndependentOfPieceBoundaries) {
  const std::vector<std::string> stops = {"abc", "bca", "cc", "aab"};
  std::mt19937 rng(21);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text;
    const size_t len = rng() % 24;
    for (size_t i = 0; i < len; ++i) text += static_cast<char>('a' + rng() % 3);
    std::vector<std::string> pieces;
    for (size_t i = 0; i < text.size();) {
      const size_t n = 1 + rng() % 4;
      pieces.push_back(text.substr(i, n));
      i += n;
    }
    const auto [want_text, want_stop] = reference(text, stops);
    const StopRun r = run_stops(stops, pieces);
    EXPECT_EQ(r.text, want_text) << "text=" << text;
    EXPECT_EQ(r.stopped, want_stop) << "text=" << text;
  }
}

}  // namespace
}  // namespace tern
