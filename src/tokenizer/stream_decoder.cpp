// StreamDecoder (declared in tokenizer.h): token pieces in, complete UTF-8 out.
#include "tokenizer/tokenizer.h"
#include "core/utf8.h"

namespace tern {

namespace {

// Moves the complete part of `pending` to the result: valid sequences as they
// are, bytes that can never complete as U+FFFD. Leaves in `pending` only a
// valid-so-far prefix of one sequence at its end (at most 3 bytes).
std::string take_complete(std::string& pending) {
  std::string out;
  size_t i = 0;
  while (i < pending.size()) {
    const utf8::PrefixInfo info = utf8::classify(pending, i);
    if (info.kind == utf8::Prefix::Incomplete) break;
    if (info.kind == utf8::Prefix::Complete)
      out.append(pending, i, info.n_bytes);
    else
      utf8::append(out, utf8::kReplacementChar);
    i += info.n_bytes;
  }
  pending.erase(0, i);
  return out;
}

}  // namespace

StreamDecoder::StreamDecoder(const Tokenizer& tok, bool at_text_start)
    : tok_(&tok), at_text_start_(at_text_start) {}

std::string StreamDecoder::push(TokenId id) {
  std::string piece = tok_->token_to_piece(id);
  if (piece.empty()) return {};  // control tokens and unknown ids carry no text
  if (at_text_start_) {
    at_text_start_ = false;
    if (tok_->strips_leading_space() && piece[0] == ' ') piece.erase(0, 1);
  }
  pending_ += piece;
  return take_complete(pending_);
}

std::string StreamDecoder::flush() {
  std::string out = take_complete(pending_);
  if (!pending_.empty()) utf8::append(out, utf8::kReplacementChar);  // one U+FFFD for the unfinished sequence
  pending_.clear();
  return out;
}

}  // namespace tern
