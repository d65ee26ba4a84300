// tokenizer/tokenizer.h — text <-> token ids for the vocabularies GGUF files carry.
//
// Contract: a Tokenizer is built from GGUF tokenizer.ggml.* metadata and
// nothing else (never from file names): SPM ("llama"), byte-level BPE ("gpt2",
// pre-tokenizer chosen by tokenizer.ggml.pre) and WordPiece ("bert"). An
// unknown model or pre-tokenizer is Status Unsupported naming the value;
// malformed metadata is InvalidFile / OutOfRange; nothing here throws.
// encode() matches llama.cpp's llama_tokenize (the test vectors in
// ../shared/testdata/tokenizers are its golden output). decode() returns the
// bytes the tokens stand for, untouched: use StreamDecoder for text that must
// be valid UTF-8.
// Threading: a Tokenizer is immutable after from_gguf() and safe to use from
// many threads at once. A StreamDecoder belongs to one sequence and one thread.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/ids.h"
#include "core/status.h"
#include "tokenizer/vocab.h"

namespace tern {

namespace gguf {
class GgufFile;
}

class Tokenizer {
 public:
  // Built from GGUF tokenizer.ggml.* metadata (model, pre, tokens, scores, token_type, merges,
  // bos/eos/unknown/separator/padding ids, add_bos_token/add_eos_token/add_space_prefix).
  // Unknown tokenizer.ggml.model or tokenizer.ggml.pre -> Status Unsupported naming the value.
  static Result<std::unique_ptr<Tokenizer>> from_gguf(const gguf::GgufFile& file);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // add_special: prepend BOS / append EOS per the add_bos/add_eos flags.
  // parse_special: text of control/user-defined tokens (e.g. "<s>", "<|im_start|>") maps to that token;
  // when false it is tokenized as plain text (what the test vectors expect). User-defined tokens are
  // matched either way, as llama.cpp and Hugging Face do.
  std::vector<TokenId> encode(std::string_view text, bool add_special, bool parse_special) const;

  // Chat content goes into a template whose own control tokens must stay
  // special, while the same text typed by a user must not become them.
  // quote_special() marks the special-token text inside `text` (bytes 0xFE ...
  // 0xFF around it, which valid UTF-8 never holds); encode_quoted() is
  // encode(text, add_special, parse_special=true) except that marked text is
  // tokenised as plain text, exactly as if the whole string had been plain
  // there (the markers themselves are dropped).
  static constexpr char kQuoteOpen = '\xFE', kQuoteClose = '\xFF';
  std::string quote_special(std::string_view text) const;
  std::vector<TokenId> encode_quoted(std::string_view text, bool add_special) const;

  // The bytes a token stands for (SPM: '▁'→' ', <0xNN> → that byte; BPE: byte-level mapping undone;
  // control tokens -> "" unless render_special; user-defined tokens -> their text).
  // Out-of-range ids give "".
  std::string token_to_piece(TokenId id, bool render_special = false) const;
  // Whole-sequence decode; for SPM with add_space_prefix (and WordPiece) strips the one leading
  // space of the first text token, so decode(encode(s)) == s for ordinary s.
  std::string decode(std::span<const TokenId> ids, bool render_special = false) const;

  int n_vocab() const;
  VocabKind kind() const;
  TokenId bos_id() const;  // -1 when absent
  TokenId eos_id() const;  // -1 when absent
  bool add_bos() const;
  bool add_eos() const;
  bool is_control(TokenId id) const;
  bool is_eog(TokenId id) const;  // end of generation: EOS, EOT/<|eot_id|>/<|im_end|>/<|endoftext|> style ids
  const std::string& token_text(TokenId id) const;  // raw vocabulary string ("" when out of range)

  // More than the required API: the parsed vocabulary, and whether the first
  // text piece of a sequence loses its leading space when decoded.
  const Vocab& vocab() const;
  bool strips_leading_space() const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Streaming detokenizer: push token ids one by one, get back only complete UTF-8 text
// (never a broken sequence; incomplete bytes are held until completed, invalid bytes become U+FFFD only
// when it is certain they can't complete). at_text_start=true means no text token has been emitted yet
// for this sequence (so the SPM leading-space rule applies to the first text token).
// Control tokens produce nothing. Holds a reference: the Tokenizer must outlive it.
class StreamDecoder {
 public:
  StreamDecoder(const Tokenizer& tok, bool at_text_start);
  std::string push(TokenId id);
  std::string flush();  // whatever is still held (incomplete tail -> U+FFFD)

 private:
  const Tokenizer* tok_;
  bool at_text_start_;
  std::string pending_;  // bytes of an incomplete UTF-8 sequence, at most 3
};

}  // namespace tern
