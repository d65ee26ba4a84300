#include "tokenizer/pre_tokenizer_rules.h"

#include <algorithm>
#include <iterator>

#include "tokenizer/unicode.h"

namespace tern::pretok {

namespace {

using namespace tern::unicode;

constexpr size_t kNoMatch = static_cast<size_t>(-1);
constexpr uint32_t kNone = 0xFFFFFFFFu;  // "code point" past the end of a fragment

// A matcher anchored at i returns the end of the match, or kNoMatch.
using AtFn = size_t (*)(const Span& s, size_t i);

// Leftmost match: try every start in order, as a regex search does.
template <AtFn At>
bool scan(const Span& s, size_t from, size_t* begin, size_t* end) {
  for (size_t i = from; i < s.n; ++i) {
    const size_t e = At(s, i);
    if (e != kNoMatch && e > i) {
      *begin = i;
      *end = e;
      return true;
    }
  }
  return false;
}

uint32_t cp_at(const Span& s, size_t i) { return i < s.n ? s.cps[i] : kNone; }
bool has(const Span& s, size_t i, uint16_t f) { return i < s.n && (s.flags[i] & f) != 0; }
bool is_crlf(uint32_t c) { return c == '\r' || c == '\n'; }
bool is_space(const Span& s, size_t i) { return has(s, i, kSpace); }
bool is_letter(const Span& s, size_t i) { return has(s, i, kLetter); }
bool is_number(const Span& s, size_t i) { return has(s, i, kNumber); }
// [^\s\p{L}\p{N}]
bool is_other(const Span& s, size_t i) { return i < s.n && (s.flags[i] & (kSpace | kLetter | kNumber)) == 0; }

template <typename Pred>
size_t run(const Span& s, size_t i, Pred pred) {
  while (i < s.n && pred(i)) ++i;
  return i;
}
size_t run_flag(const Span& s, size_t i, uint16_t f) {
  return run(s, i, [&](size_t j) { return (s.flags[j] & f) != 0; });
}
size_t run_crlf(const Span& s, size_t i) {
  return run(s, i, [&](size_t j) { return is_crlf(s.cps[j]); });
}

// 's|'t|'re|'ve|'m|'ll|'d (any_case: each letter also upper case). Returns the end or kNoMatch.
size_t contraction(const Span& s, size_t i, bool any_case) {
  if (cp_at(s, i) != '\'') return kNoMatch;
  auto lower = [&](size_t j) {
    uint32_t c = cp_at(s, j);
    if (any_case && c >= 'A' && c <= 'Z') c += 'a' - 'A';
    return c;
  };
  const uint32_t a = lower(i + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
  const uint32_t b = lower(i + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
  return kNoMatch;
}

// \s+(?!\S)|\s+ — a whitespace run; when a non-space follows, its last
// character is left to start the next word (the lookahead backtracks one).
size_t whitespace(const Span& s, size_t i) {
  if (!is_space(s, i)) return kNoMatch;
  const size_t e = run_flag(s, i, kSpace);
  if (e < s.n && e - i >= 2) return e - 1;
  return e;
}

// \s*[\r\n]+ — greedy \s* backs off to the last CR/LF of the whitespace run;
// [\r\n]+ then takes that one (a later CR/LF would have been found first).
size_t space_then_newlines(const Span& s, size_t i) {
  if (!is_space(s, i)) return kNoMatch;
  const size_t e = run_flag(s, i, kSpace);
  for (size_t k = e; k > i; --k) {
    if (is_crlf(s.cps[k - 1])) return k;
  }
  return kNoMatch;
}

// ` ?X+` where X never matches ' ': the optional space can only help when X follows it.
template <typename Pred>
size_t optional_space_run(const Span& s, size_t i, Pred pred) {
  const size_t j = cp_at(s, i) == ' ' ? i + 1 : i;
  if (j >= s.n || !pred(j)) return kNoMatch;
  return run(s, j, pred);
}

size_t at_gpt2(const Span& s, size_t i) {
  size_t e = contraction(s, i, false);
  if (e != kNoMatch) return e;
  e = optional_space_run(s, i, [&](size_t j) { return is_letter(s, j); });
  if (e != kNoMatch) return e;
  e = optional_space_run(s, i, [&](size_t j) { return is_number(s, j); });
  if (e != kNoMatch) return e;
  e = optional_space_run(s, i, [&](size_t j) { return is_other(s, j); });
  if (e != kNoMatch) return e;
  return whitespace(s, i);
}

enum class PunctTail { None, Newlines, NewlinesSlash };

// ` ?[^\s\p{L}\p{N}]+` followed by the tail: [\r\n]* or [\r\n/]*.
size_t other_run_with_tail(const Span& s, size_t i, PunctTail tail) {
  size_t e = optional_space_run(s, i, [&](size_t j) { return is_other(s, j); });
  if (e == kNoMatch) return e;
  if (tail == PunctTail::Newlines) e = run_crlf(s, e);
  if (tail == PunctTail::NewlinesSlash)
    e = run(s, e, [&](size_t j) { return is_crlf(s.cps[j]) || s.cps[j] == '/'; });
  return e;
}

// \p{N}{1,max}
size_t digits(const Span& s, size_t i, size_t max) {
  if (!is_number(s, i)) return kNoMatch;
  return i + std::min(run_flag(s, i, kNumber) - i, max);
}

template <size_t kMaxDigits, PunctTail kTail>
size_t at_llama3_like(const Span& s, size_t i) {
  size_t e = contraction(s, i, true);
  if (e != kNoMatch) return e;
  // [^\r\n\p{L}\p{N}]?\p{L}+ : a letter at i starts the run; otherwise one
  // non-newline, non-letter, non-digit character may lead it.
  if (is_letter(s, i)) return run_flag(s, i, kLetter);
  if (i < s.n && !is_crlf(s.cps[i]) && !is_number(s, i) && is_letter(s, i + 1))
    return run_flag(s, i + 1, kLetter);
  e = digits(s, i, kMaxDigits);
  if (e != kNoMatch) return e;
  e = other_run_with_tail(s, i, kTail);
  if (e != kNoMatch) return e;
  e = space_then_newlines(s, i);
  if (e != kNoMatch) return e;
  return whitespace(s, i);
}

// [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+ from b: the
// greedy first class gives back characters until the second can start.
size_t upper_star_lower_plus(const Span& s, size_t b) {
  const size_t u = run_flag(s, b, kUpperish);
  for (size_t t = u + 1; t-- > b;) {
    if (has(s, t, kLowerish)) return run_flag(s, t, kLowerish);
  }
  return kNoMatch;
}

// [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]* from b.
size_t upper_plus_lower_star(const Span& s, size_t b) {
  const size_t u = run_flag(s, b, kUpperish);
  if (u == b) return kNoMatch;
  return run_flag(s, u, kLowerish);
}

template <size_t kMaxDigits, bool kContractions>
size_t at_cased_words(const Span& s, size_t i) {
  // [^\r\n\p{L}\p{N}]? before each word alternative: tried first with it, then without.
  const bool lead = i < s.n && !is_crlf(s.cps[i]) && !is_letter(s, i) && !is_number(s, i);
  for (auto word : {upper_star_lower_plus, upper_plus_lower_star}) {
    size_t e = lead ? word(s, i + 1) : kNoMatch;
    if (e == kNoMatch) e = word(s, i);
    if (e != kNoMatch) {
      if (kContractions) {
        const size_t c = contraction(s, e, true);
        if (c != kNoMatch) e = c;
      }
      return e;
    }
  }
  size_t e = digits(s, i, kMaxDigits);
  if (e != kNoMatch) return e;
  e = other_run_with_tail(s, i, PunctTail::NewlinesSlash);
  if (e != kNoMatch) return e;
  e = space_then_newlines(s, i);
  if (e != kNoMatch) return e;
  return whitespace(s, i);
}

bool is_ascii_punct(uint32_t c) {
  return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
         (c >= 0x7B && c <= 0x7E);
}
bool is_ascii_alpha(uint32_t c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }

size_t at_deepseek3_words(const Span& s, size_t i) {
  if (is_ascii_punct(cp_at(s, i)) && is_ascii_alpha(cp_at(s, i + 1)))
    return run(s, i + 1, [&](size_t j) { return is_ascii_alpha(s.cps[j]); });
  // [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
  const bool lead = i < s.n && !is_crlf(s.cps[i]) && !has(s, i, kLetter | kPunct | kSymbol);
  if (lead && has(s, i + 1, kLetter | kMark)) return run_flag(s, i + 1, kLetter | kMark);
  if (has(s, i, kLetter | kMark)) return run_flag(s, i, kLetter | kMark);
  size_t e = optional_space_run(s, i, [&](size_t j) { return has(s, j, kPunct | kSymbol); });
  if (e != kNoMatch) return run_crlf(s, e);
  e = space_then_newlines(s, i);
  if (e != kNoMatch) return e;
  return whitespace(s, i);
}

template <uint16_t kFlag, size_t kMax>
size_t at_flag_run(const Span& s, size_t i) {
  if (!has(s, i, kFlag)) return kNoMatch;
  return i + std::min(run_flag(s, i, kFlag) - i, kMax);
}

size_t at_ascii_digit_3(const Span& s, size_t i) {
  auto d = [&](size_t j) {
    const uint32_t c = cp_at(s, j);
    return c >= '0' && c <= '9';
  };
  return d(i) && d(i + 1) && d(i + 2) ? i + 3 : kNoMatch;
}

size_t at_newline_char(const Span& s, size_t i) { return is_crlf(cp_at(s, i)) ? i + 1 : kNoMatch; }

template <bool kBacktick>
size_t at_punct(const Span& s, size_t i) {
  auto p = [&](size_t j) {
    const uint32_t c = s.cps[j];
    return (s.flags[j] & kPunct) != 0 || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' ||
           c == '^' || c == '~' || c == '|' || (kBacktick && c == '`');
  };
  if (i >= s.n || !p(i)) return kNoMatch;
  return run(s, i, p);
}

// \s?X+ — the optional whitespace is taken when X follows it; otherwise X must start at i.
template <typename Pred>
size_t optional_whitespace_run(const Span& s, size_t i, Pred pred) {
  if (is_space(s, i) && i + 1 < s.n && pred(i + 1)) return run(s, i + 1, pred);
  if (i < s.n && pred(i)) return run(s, i, pred);
  return kNoMatch;
}

size_t at_space_letters(const Span& s, size_t i) {
  return optional_whitespace_run(s, i, [&](size_t j) { return is_letter(s, j); });
}
size_t at_space_puncts(const Span& s, size_t i) {
  return optional_whitespace_run(s, i, [&](size_t j) { return has(s, j, kPunct); });
}

struct Range {
  uint32_t lo, hi;
};

bool in_ranges(const Range* begin, const Range* end, uint32_t c) {
  const Range* r = std::upper_bound(begin, end, c, [](uint32_t v, const Range& x) { return v < x.lo; });
  return r != begin && c <= (r - 1)->hi;
}

// The letter class of deepseek-llm's second split regex, as code point ranges
// (sorted, merged). It lists cased letters (Lu, Ll, Lt) of many scripts.
constexpr Range kDeepseekLatin[] = {
    {0x0041, 0x005A},   {0x0061, 0x007A},   {0x00B5, 0x00B5},   {0x00C0, 0x00D6},   {0x00D8, 0x00F6},
    {0x00F8, 0x01BA},   {0x01BC, 0x01BF},   {0x01C4, 0x0293},   {0x0295, 0x02AF},   {0x0370, 0x0373},
    {0x0376, 0x0377},   {0x037B, 0x037D},   {0x037F, 0x037F},   {0x0386, 0x0386},   {0x0388, 0x038A},
    {0x038C, 0x038C},   {0x038E, 0x03A1},   {0x03A3, 0x03F5},   {0x03F7, 0x0481},   {0x048A, 0x052F},
    {0x0531, 0x0556},   {0x10A0, 0x10C5},   {0x13A0, 0x13F5},   {0x13F8, 0x13FD},   {0x1C90, 0x1CBA},
    {0x1CBD, 0x1CBF},   {0x1D00, 0x1D2B},   {0x1D6B, 0x1D77},   {0x1D79, 0x1D9A},   {0x1E00, 0x1F15},
    {0x1F18, 0x1F1D},   {0x1F20, 0x1F45},   {0x1F48, 0x1F4D},   {0x1F50, 0x1F57},   {0x1F59, 0x1F59},
    {0x1F5B, 0x1F5B},   {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},   {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE},   {0x1FC2, 0x1FC4},   {0x1FC6, 0x1FCC},   {0x1FD0, 0x1FD3},   {0x1FD6, 0x1FDB},
    {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FF4},   {0x1FF6, 0x1FFC},   {0x2102, 0x2102},   {0x2107, 0x2107},
    {0x210A, 0x2113},   {0x2115, 0x2115},   {0x2119, 0x211D},   {0x2124, 0x2124},   {0x2126, 0x2126},
    {0x2128, 0x2128},   {0x212A, 0x212D},   {0x212F, 0x2134},   {0x2139, 0x2139},   {0x213C, 0x213F},
    {0x2145, 0x2149},   {0x214E, 0x214E},   {0x2183, 0x2184},   {0x2C00, 0x2C7B},   {0x2C7E, 0x2CE4},
    {0x2CEB, 0x2CEE},   {0x2CF2, 0x2CF3},   {0xA640, 0xA66D},   {0xA680, 0xA69B},   {0xA722, 0xA76F},
    {0xA771, 0xA787},   {0xA78B, 0xA78E},   {0xAB70, 0xABBF},   {0xFB00, 0xFB06},   {0xFB13, 0xFB17},
    {0xFF21, 0xFF3A},   {0xFF41, 0xFF5A},   {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};
// [!-/:-~！-／：-～‘-‟　-。]
constexpr Range kDeepseekPunct[] = {
    {0x0021, 0x002F}, {0x003A, 0x007E}, {0x2018, 0x201F},
    {0x3000, 0x3002}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E},
};
// [一-龥ࠀ-一가-퟿]
constexpr Range kDeepseekCjk[] = {{0x0800, 0x9FA5}, {0xAC00, 0xD7FF}};
// [一-龥぀-ゟ゠-ヿ]
constexpr Range kDeepseek3Cjk[] = {{0x3040, 0x30FF}, {0x4E00, 0x9FA5}};

template <const Range* kBegin, size_t kCount, bool kOptionalSpace>
size_t at_ranges(const Span& s, size_t i) {
  auto in = [&](size_t j) { return in_ranges(kBegin, kBegin + kCount, s.cps[j]); };
  if (kOptionalSpace) return optional_whitespace_run(s, i, in);
  if (i >= s.n || !in(i)) return kNoMatch;
  return run(s, i, in);
}

size_t at_bloom(const Span& s, size_t i) {
  auto word = [&](size_t j) {
    if (s.flags[j] & kSpace) return false;
    switch (s.cps[j]) {
      case '(':
      case '|':
      case '.':
      case ',':
      case '!':
      case '?':
      case ')':
      case 0x2026:
      case 0x3002:
      case 0xFF0C:
      case 0x3001:
      case 0x0964:
      case 0x06D4:
      case 0x060C:
        return false;
      default:
        return true;
    }
  };
  return optional_space_run(s, i, word);
}

}  // namespace

bool find_gpt2(const Span& s, size_t f, size_t* b, size_t* e) { return scan<at_gpt2>(s, f, b, e); }
bool find_llama3(const Span& s, size_t f, size_t* b, size_t* e) {
  return scan<at_llama3_like<3, PunctTail::Newlines>>(s, f, b, e);
}
bool find_qwen2(const Span& s, size_t f, size_t* b, size_t* e) {
  return scan<at_llama3_like<1, PunctTail::Newlines>>(s, f, b, e);
}
bool find_seed_coder(const Span& s, size_t f, size_t* b, size_t* e) {
  return scan<at_llama3_like<1, PunctTail::None>>(s, f, b, e);
}
bool find_tekken(const Span& s, size_t f, size_t* b, size_t* e) {
  return scan<at_cased_words<1, false>>(s, f, b, e);
}
bool find_o200k(const Span& s, size_t f, size_t* b, size_t* e) {
  return scan<at_cased_words<3, true>>(s, f, b, e);
}
bool find_deepseek3_words(const Span& s, size_t f, size_t* b, size_t* e) {
  return scan<at_deepseek3_words>(s, f, b, e);
}
bool find_digit(const Span& s, size_t f, size_t* b, size_t* e) {
  return scan<at_flag_run<kNumber, 1>>(s, f, b, e);
}
bool find_digits_1_3(const Span& s, size_t f, size_t* b, size_t* e) {
  return scan<at_flag_run<kNumber, 3>>(s, f, b, e);
}
bool find_digit_run(const Span& s, size_t f, size_t* b, size_t* e) {
  return scan<at_flag_run<kNumber, kNoMatch>>(s, f, b, e);
}
bool find_ascii_digit_3(const Span& s, size_t f, size_t* b, size_t* e) {
  return scan<at_ascii_digit_3>(s, f, b, e);
}
bool find_newline_char(const Span& s, size_t f, size_t* b, size_t* e) {
  return scan<at_newline_char>(s, f, b, e);
}
bool find_punct_default(const Span& s, size_t f, size_t* b, size_t* e) {
  return scan<at_punct<false>>(s, f, b, e);
}
bool find_punct_falcon(const Span& s, size_t f, size_t* b, size_t* e) {
  return scan<at_punct<true>>(s, f, b, e);
}
bool find_space_letters(const Span& s, size_t f, size_t* b, size_t* e) {
  return scan<at_space_letters>(s, f, b, e);
}
bool find_space_puncts(const Span& s, size_t f, size_t* b, size_t* e) {
  return scan<at_space_puncts>(s, f, b, e);
}
bool find_deepseek_latin(const Span& s, size_t f, size_t* b, size_t* e) {
  return scan<at_ranges<kDeepseekLatin, std::size(kDeepseekLatin), true>>(s, f, b, e);
}
bool find_deepseek_punct(const Span& s, size_t f, size_t* b, size_t* e) {
  return scan<at_ranges<kDeepseekPunct, std::size(kDeepseekPunct), true>>(s, f, b, e);
}
bool find_deepseek_cjk(const Span& s, size_t f, size_t* b, size_t* e) {
  return scan<at_ranges<kDeepseekCjk, std::size(kDeepseekCjk), false>>(s, f, b, e);
}
bool find_deepseek3_cjk(const Span& s, size_t f, size_t* b, size_t* e) {
  return scan<at_ranges<kDeepseek3Cjk, std::size(kDeepseek3Cjk), false>>(s, f, b, e);
}
bool find_bloom(const Span& s, size_t f, size_t* b, size_t* e) { return scan<at_bloom>(s, f, b, e); }

// \s+$ — the whitespace run that reaches the end of the fragment. Found from
// the end so that long inner runs are not rescanned at every start.
bool find_trailing_space(const Span& s, size_t from, size_t* begin, size_t* end) {
  size_t b = s.n;
  while (b > from && is_space(s, b - 1)) --b;
  if (b == s.n) return false;
  *begin = b;
  *end = s.n;
  return true;
}

}  // namespace tern::pretok
