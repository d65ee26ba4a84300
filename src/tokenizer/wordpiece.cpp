#include "tokenizer/wordpiece.h"

#include <algorithm>
#include <string>

#include "tokenizer/unicode.h"
#include "core/utf8.h"

namespace tern {

namespace {

// The CJK ideograph blocks BERT isolates (its _is_chinese_char ranges).
bool is_cjk_ideograph(uint32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// BERT's basic tokenizer: normalised words, each punctuation mark and CJK ideograph a word of its own.
std::vector<std::string> basic_words(std::string_view text) {
  std::vector<std::string> words(1);
  auto finish_word = [&] {
    if (!words.back().empty()) words.emplace_back();
  };
  for (const uint32_t c : unicode::nfd(text)) {
    const uint16_t f = unicode::flags(c);
    if (f & unicode::kSpace) {
      finish_word();
      continue;
    }
    if (c == 0 || c == utf8::kReplacementChar || (f & (unicode::kControl | unicode::kNonspacingMark)))
      continue;
    const uint32_t lower = unicode::to_lower(c);
    if ((f & unicode::kPunct) || (c < 0x7F && (f & unicode::kSymbol)) || is_cjk_ideograph(c)) {
      finish_word();
      utf8::append(words.back(), lower);
      words.emplace_back();
    } else {
      utf8::append(words.back(), lower);
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

}  // namespace

WordPieceModel WordPieceModel::build(const Vocab& vocab) {
  WordPieceModel m;
  for (const std::string& t : vocab.texts) m.max_token_bytes_ = std::max(m.max_token_bytes_, t.size());
  return m;
}

void WordPieceModel::encode(const Vocab& vocab, std::string_view text, std::vector<TokenId>& out) const {
  for (const std::string& w : basic_words(text)) {
    const std::string word = "\xE2\x96\x81" + w;  // word-initial pieces carry the ▁ prefix
    const size_t first = out.size();
    bool matched_all = true;
    for (size_t i = 0; i < word.size() && matched_all;) {
      matched_all = false;
      for (size_t j = std::min(word.size(), i + max_token_bytes_); j > i; --j) {
        const TokenId id = vocab.find(std::string_view(word).substr(i, j - i));
        if (id >= 0) {
          out.push_back(id);
          i = j;
          matched_all = true;
          break;
        }
      }
    }
    if (!matched_all) {
      out.resize(first);
      if (vocab.unk >= 0) out.push_back(vocab.unk);
    }
  }
}

}  // namespace tern
