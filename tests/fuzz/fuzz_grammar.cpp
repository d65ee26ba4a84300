// Grammar compilation (GBNF, JSON Schema, regular expressions) and the matcher over whatever
// compiles. Input: byte 0 picks the kind; the constraint text runs to the first NUL; the bytes
// after it are fed to the matcher as tokens of 1-4 bytes, with masks taken along the way.
// Beyond "no crash": accept() agrees with allows(), and a one-byte token's mask bit agrees too.
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz.h"
#include "grammar/constraint.h"
#include "grammar/matcher.h"

namespace {

const tern::grammar::TokenVocab& vocab() {
  static const tern::grammar::TokenVocab v = [] {
    std::vector<std::string> pieces;
    for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));  // id = the byte
    for (const char* p : {"{\"", "\":", "\": ", ", \"", "\"}", "true", "null", "12", "0.5", "abc", "  ", "\n", "é",
                          "\\u00", "[1", "]}", "aaaaaaaa"})
      pieces.emplace_back(p);
    return tern::grammar::TokenVocab(std::move(pieces));
  }();
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 8192) return 0;
  static constexpr tern::ConstraintKind kKinds[] = {tern::ConstraintKind::Gbnf, tern::ConstraintKind::JsonSchema,
                                                    tern::ConstraintKind::Regex};
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t nul = in.find('\0');
  tern::OutputConstraint c;
  c.kind = kKinds[data[0] % 3];
  c.text = std::string(in.substr(0, nul));
  auto g = tern::grammar::compile_constraint(c);
  if (!g.is_ok()) return 0;
  tern::grammar::Matcher m(*g);
  std::string_view feed = nul == std::string_view::npos ? std::string_view() : in.substr(nul + 1);
  for (int step = 0; step < 64 && !feed.empty(); ++step) {
    const std::vector<uint64_t>& bits = m.mask_bits(vocab().trie);
    const size_t n = std::min<size_t>(1 + static_cast<uint8_t>(feed[0]) % 4, feed.size());
    const std::string_view tok = feed.substr(0, n);
    feed.remove_prefix(n);
    const bool masked_in = n == 1 && ((bits[static_cast<uint8_t>(tok[0]) >> 6] >> (static_cast<uint8_t>(tok[0]) & 63)) & 1);
    const bool allowed = m.allows(tok);
    const bool overflowed = m.overflowed();
    const bool accepted = m.accept(tok);
    if (allowed != accepted) std::abort();                      // the two must agree
    if (n == 1 && !overflowed && masked_in != accepted) std::abort();  // and so must the mask
    if (step % 16 == 15 && m.n_accepted() > 0) m.rollback(1);
  }
  return 0;
}
