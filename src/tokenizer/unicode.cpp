#include "tokenizer/unicode.h"

#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/utf16.h>

#include <array>
#include <memory>

#include "core/utf8.h"

namespace tern::unicode {

namespace {

uint16_t flags_from_icu(uint32_t cp) {
  const auto c = static_cast<UChar32>(cp);
  const uint32_t gc = U_GET_GC_MASK(c);
  uint16_t f = 0;
  if (gc & U_GC_L_MASK) f |= kLetter;
  if (gc & U_GC_N_MASK) f |= kNumber;
  if (gc & U_GC_P_MASK) f |= kPunct;
  if (gc & U_GC_S_MASK) f |= kSymbol;
  if (gc & U_GC_M_MASK) f |= kMark;
  if (gc & (U_GC_LU_MASK | U_GC_LT_MASK | U_GC_LM_MASK | U_GC_LO_MASK | U_GC_M_MASK)) f |= kUpperish;
  if (gc & (U_GC_LL_MASK | U_GC_LM_MASK | U_GC_LO_MASK | U_GC_M_MASK)) f |= kLowerish;
  if (gc & (U_GC_CC_MASK | U_GC_CF_MASK)) f |= kControl;
  if (gc & U_GC_LL_MASK) f |= kLowercase;
  if (gc & U_GC_MN_MASK) f |= kNonspacingMark;
  if (u_hasBinaryProperty(c, UCHAR_WHITE_SPACE)) f |= kSpace;
  return f;
}

struct BmpTable {
  std::array<uint16_t, 0x10000> flags{};
  BmpTable() {
    for (uint32_t cp = 0; cp < 0x10000; ++cp) flags[cp] = flags_from_icu(cp);
  }
};

const BmpTable& bmp_table() {
  static const auto* table = new BmpTable();  // never freed: lives for the process
  return *table;
}

}  // namespace

uint16_t flags(uint32_t cp) {
  if (cp < 0x10000) return bmp_table().flags[cp];
  if (cp > 0x10FFFF) return 0;
  return flags_from_icu(cp);
}

uint32_t to_lower(uint32_t cp) {
  if (cp > 0x10FFFF) return cp;
  return static_cast<uint32_t>(u_tolower(static_cast<UChar32>(cp)));
}

std::u32string nfd(std::string_view text) {
  std::u16string src;
  src.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const utf8::Decoded d = utf8::decode(text, i);
    i += d.n_bytes;
    if (d.cp < 0x10000) {
      src.push_back(static_cast<char16_t>(d.cp));
    } else {
      src.push_back(static_cast<char16_t>(0xD7C0 + (d.cp >> 10)));
      src.push_back(static_cast<char16_t>(0xDC00 | (d.cp & 0x3FF)));
    }
  }
  UErrorCode err = U_ZERO_ERROR;
  const UNormalizer2* norm = unorm2_getNFDInstance(&err);
  std::u16string dst(src.size() + 16, u'\0');
  int32_t n = 0;
  if (U_SUCCESS(err) && norm != nullptr) {
    for (int attempt = 0; attempt < 2; ++attempt) {  // the second try has the size ICU asked for
      err = U_ZERO_ERROR;
      n = unorm2_normalize(norm, reinterpret_cast<const UChar*>(src.data()), static_cast<int32_t>(src.size()),
                           reinterpret_cast<UChar*>(dst.data()), static_cast<int32_t>(dst.size()), &err);
      if (err != U_BUFFER_OVERFLOW_ERROR) break;
      dst.assign(static_cast<size_t>(n) + 16, u'\0');
    }
  }
  if (U_FAILURE(err) || norm == nullptr) {  // fall back to the undecomposed text
    dst = src;
    n = static_cast<int32_t>(src.size());
  }
  std::u32string out;
  out.reserve(static_cast<size_t>(n));
  for (int32_t k = 0; k < n;) {
    UChar32 c = 0;
    U16_NEXT(dst.data(), k, n, c);
    out.push_back(static_cast<uint32_t>(c));
  }
  return out;
}

CodePoints decode_with_flags(std::string_view text) {
  CodePoints r;
  r.cps.reserve(text.size());
  r.flags.reserve(text.size());
  r.offsets.reserve(text.size() + 1);
  for (size_t i = 0; i < text.size();) {
    const auto b = static_cast<uint8_t>(text[i]);
    uint32_t cp = b;
    uint32_t n = 1;
    if (b >= 0x80) {
      const utf8::Decoded d = utf8::decode(text, i);
      cp = d.cp;
      n = d.valid ? d.n_bytes : 1;  // one U+FFFD per invalid byte keeps every byte in exactly one code point
    }
    r.cps.push_back(cp);
    r.flags.push_back(flags(cp));
    r.offsets.push_back(i);
    i += n;
  }
  r.offsets.push_back(text.size());
  return r;
}

}  // namespace tern::unicode
