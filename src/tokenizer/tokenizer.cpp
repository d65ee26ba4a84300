#include "tokenizer/tokenizer.h"

#include <optional>

#include "gguf/reader.h"
#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/spm.h"
#include "tokenizer/wordpiece.h"

namespace tern {

namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// Token texts that end a turn in the chat formats we know, whatever id they have.
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>",
    "<|eom_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "<end_of_utterance>",
    "<|return|>",
    "<|call|>",
    "<\xEF\xBD\x9C"
    "end\xE2\x96\x81"
    "of\xE2\x96\x81"
    "sentence\xEF\xBD\x9C>",
};

bool is_special_type(TokenType t) {
  return t == TokenType::Control || t == TokenType::Unknown || t == TokenType::Unused ||
         t == TokenType::Undefined;
}

std::string replace_spm_spaces(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text.substr(i, kSpmSpace.size()) == kSpmSpace) {
      out.push_back(' ');
      i += kSpmSpace.size();
    } else {
      out.push_back(text[i++]);
    }
  }
  return out;
}

// token_to_piece(id, render_special=false), computed once per token.
std::string plain_piece(const Vocab& v, TokenId id) {
  const std::string& text = v.texts[id];
  switch (v.types[id]) {
    case TokenType::UserDefined:
      return text;
    case TokenType::Normal:
    case TokenType::Byte:
      if (v.kind == VocabKind::Bpe) return byte_level::decode(text);
      if (v.types[id] == TokenType::Byte) {
        const int b = SpmModel::parse_byte_token(text);
        return b >= 0 ? std::string(1, static_cast<char>(b)) : std::string();
      }
      return replace_spm_spaces(text);
    default:
      return {};
  }
}

}  // namespace

struct Tokenizer::Impl {
  Vocab vocab;
  std::optional<SpmModel> spm;
  std::optional<BpeModel> bpe;
  std::optional<WordPieceModel> wordpiece;
  SpecialTokenMatcher specials;      // control, unknown and user-defined tokens (parse_special)
  SpecialTokenMatcher user_defined;  // user-defined tokens only (always split out)
  std::vector<std::string> pieces;   // [n_vocab] plain_piece()
  std::vector<uint8_t> eog;          // [n_vocab] 1 for end-of-generation tokens
  bool strip_leading_space = false;

  void encode_plain(std::string_view text, bool after_special, std::vector<TokenId>& out) const {
    switch (vocab.kind) {
      case VocabKind::Spm: {
        std::string escaped;
        if (vocab.add_space_prefix && after_special) escaped = kSpmSpace;
        escaped += spm_escape_spaces(text);
        spm->encode(vocab, escaped, out);
        break;
      }
      case VocabKind::Bpe:
        bpe->encode(vocab, text, out);
        break;
      case VocabKind::WordPiece:
        wordpiece->encode(vocab, text, out);
        break;
    }
  }

  std::vector<TokenId> encode_segments(std::string_view text, const std::vector<SpecialTokenMatcher::Segment>& segments,
                                       bool add_special) const {
    const Vocab& v = vocab;
    std::vector<TokenId> out;
    if (add_special && v.add_bos) out.push_back(v.bos);
    // SPM puts its dummy-prefix space before text that starts the sequence or follows a special token.
    bool after_special = true;
    for (const auto& seg : segments) {
      if (seg.token >= 0) {
        out.push_back(seg.token);
        after_special = true;
      } else {
        encode_plain(text.substr(seg.begin, seg.end - seg.begin), after_special, out);
        after_special = false;
      }
    }
    if (add_special && v.add_eos) out.push_back(v.eos);
    return out;
  }
};

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf(const gguf::GgufFile& file) {
  auto vocab = load_vocab(file);
  if (!vocab.is_ok()) return vocab.status().with_context("tokenizer");
  auto impl = std::make_unique<Impl>();
  impl->vocab = std::move(vocab).value();
  Vocab& v = impl->vocab;

  switch (v.kind) {
    case VocabKind::Spm:
      impl->spm = SpmModel::build(v);
      impl->strip_leading_space = v.add_space_prefix;
      break;
    case VocabKind::Bpe: {
      auto pre = PreTokenizer::from_name(v.pre);
      if (!pre.is_ok()) return pre.status().with_context("tokenizer");
      if (!v.add_bos_from_file && pre->default_add_bos() && v.bos >= 0) v.add_bos = true;
      auto bpe = BpeModel::build(v, std::move(pre).value());
      if (!bpe.is_ok()) return bpe.status().with_context("tokenizer");
      impl->bpe = std::move(bpe).value();
      break;
    }
    case VocabKind::WordPiece:
      impl->wordpiece = WordPieceModel::build(v);
      impl->strip_leading_space = true;
      break;
  }

  impl->specials = SpecialTokenMatcher::build(v, [](TokenType t) {
    return t == TokenType::Control || t == TokenType::Unknown || t == TokenType::UserDefined;
  });
  impl->user_defined = SpecialTokenMatcher::build(v, [](TokenType t) { return t == TokenType::UserDefined; });

  impl->pieces.reserve(v.texts.size());
  for (TokenId id = 0; id < v.n_vocab(); ++id) impl->pieces.push_back(plain_piece(v, id));

  impl->eog.assign(v.texts.size(), 0);
  for (TokenId id : {v.eos, v.eot, v.eom}) {
    if (id >= 0) impl->eog[id] = 1;
  }
  for (std::string_view text : kEogTexts) {
    const TokenId id = v.find(text);
    if (id >= 0) impl->eog[id] = 1;
  }
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  const SpecialTokenMatcher& matcher = parse_special ? impl_->specials : impl_->user_defined;
  std::vector<SpecialTokenMatcher::Segment> segments;
  if (matcher.empty()) {
    if (!text.empty()) segments.push_back({0, text.size(), -1});
  } else {
    segments = matcher.partition(impl_->vocab, text);
  }
  return impl_->encode_segments(text, segments, add_special);
}

std::string Tokenizer::quote_special(std::string_view text) const {
  if (impl_->specials.empty()) return std::string(text);
  std::string out;
  for (const auto& seg : impl_->specials.partition(impl_->vocab, text)) {
    const std::string_view piece = text.substr(seg.begin, seg.end - seg.begin);
    const bool quote = seg.token >= 0 && impl_->vocab.types[seg.token] != TokenType::UserDefined;
    if (quote) out += kQuoteOpen;
    out += piece;
    if (quote) out += kQuoteClose;
  }
  return out;
}

std::vector<TokenId> Tokenizer::encode_quoted(std::string_view text, bool add_special) const {
  // Drop the markers, remembering which byte ranges of what is left were quoted.
  std::string plain;
  plain.reserve(text.size());
  std::vector<std::pair<size_t, size_t>> quoted;  // [begin, end) in `plain`, ascending
  for (char c : text) {
    if (c == kQuoteOpen) {
      quoted.push_back({plain.size(), plain.size()});
    } else if (c == kQuoteClose) {
      if (!quoted.empty()) quoted.back().second = plain.size();
    } else {
      plain += c;
    }
  }
  if (!quoted.empty() && quoted.back().second < quoted.back().first) quoted.back().second = plain.size();
  const Vocab& v = impl_->vocab;
  // A special token may not be matched over any quoted byte; user-defined tokens always are (as in encode()).
  const SpecialTokenMatcher::AcceptFn accept = [&](TokenId id, size_t b, size_t e) {
    if (v.types[id] == TokenType::UserDefined) return true;
    for (const auto& [qb, qe] : quoted)
      if (b < qe && qb < e) return false;
    return true;
  };
  std::vector<SpecialTokenMatcher::Segment> segments;
  if (impl_->specials.empty()) {
    if (!plain.empty()) segments.push_back({0, plain.size(), -1});
  } else {
    segments = impl_->specials.partition(v, plain, &accept);
  }
  return impl_->encode_segments(plain, segments, add_special);
}

std::string Tokenizer::token_to_piece(TokenId id, bool render_special) const {
  const Vocab& v = impl_->vocab;
  if (!v.valid_id(id)) return {};
  if (render_special && is_special_type(v.types[id])) return v.texts[id];
  return impl_->pieces[id];
}

std::string Tokenizer::decode(std::span<const TokenId> ids, bool render_special) const {
  std::string out;
  bool strip = impl_->strip_leading_space;
  for (TokenId id : ids) {
    if (!impl_->vocab.valid_id(id)) continue;
    const std::string& plain = impl_->pieces[id];
    if (strip && !plain.empty()) {  // the first text token
      strip = false;
      out.append(plain, plain[0] == ' ' ? 1 : 0);
      continue;
    }
    if (plain.empty())
      out += token_to_piece(id, render_special);
    else
      out += plain;
  }
  return out;
}

int Tokenizer::n_vocab() const { return impl_->vocab.n_vocab(); }
VocabKind Tokenizer::kind() const { return impl_->vocab.kind; }
TokenId Tokenizer::bos_id() const { return impl_->vocab.bos; }
TokenId Tokenizer::eos_id() const { return impl_->vocab.eos; }
bool Tokenizer::add_bos() const { return impl_->vocab.add_bos; }
bool Tokenizer::add_eos() const { return impl_->vocab.add_eos; }
const Vocab& Tokenizer::vocab() const { return impl_->vocab; }
bool Tokenizer::strips_leading_space() const { return impl_->strip_leading_space; }

bool Tokenizer::is_control(TokenId id) const {
  return impl_->vocab.valid_id(id) && impl_->vocab.types[id] == TokenType::Control;
}

bool Tokenizer::is_eog(TokenId id) const { return impl_->vocab.valid_id(id) && impl_->eog[id] != 0; }

const std::string& Tokenizer::token_text(TokenId id) const {
  static const std::string kEmpty;
  return impl_->vocab.valid_id(id) ? impl_->vocab.texts[id] : kEmpty;
}

}  // namespace tern
