// tokenizer/hf_tokenizer.h — a Hugging Face tokenizer directory as GGUF tokenizer metadata.
//
// Contract: read_hf_tokenizer(dir) returns the tokenizer.* keys that
// llama.cpp's convert_hf_to_gguf.py would write for DIR, so that load_vocab()
// and Tokenizer::from_gguf() on them behave as on the converted GGUF file.
// Supported tokenizer.json models:
//   - byte-level BPE (GPT-2 style: a ByteLevel pre-tokenizer) -> tokenizer.ggml.model "gpt2"; the
//     pre-tokenizer's Split regexes / Digits / ByteLevel steps name one of our pre-tokenizer rules
//     (tokenizer.ggml.pre), an unknown sequence is refused, naming its patterns;
//   - SentencePiece-style BPE (byte_fallback, spaces mapped to ▁ by a Replace normalizer or a
//     Metaspace pre-tokenizer: Llama 2, Mistral, Gemma, Phi-3) -> "llama", with <0xXX> tokens as
//     BYTE and scores derived from the merge ranks (tokenizer.json has no scores: the token merge
//     r (from 0) first produces scores -(r+1), so SPM's best-score-first order is the merge order);
//   - WordPiece (BERT) -> "bert", word-initial pieces spelled with ▁ and ## continuations without
//     the prefix, as llama.cpp spells them.
// Other model types (Unigram, WordLevel) are Unsupported, naming the type.
// Ids missing from the vocabulary (and ids up to config.json's vocab_size) are
// filled with "[PADi]" UNUSED tokens, as llama.cpp does. Added tokens marked
// special (or looking like <|...|>) are CONTROL, other added tokens USER_DEFINED.
// Special ids and add_bos/add_eos come from tokenizer_config.json (then the
// post-processor template, then config.json / generation_config.json ids: a
// list's first id is EOS; llama.cpp does not record the others either, they
// are recognised as end-of-generation by their text at load time).
// The chat template comes from tokenizer_config.json, else chat_template.jinja
// or chat_template.json; a list of {name, template} gives the "default" one as
// tokenizer.chat_template and the others as tokenizer.chat_template.NAME.
// Errors: a missing tokenizer.json is NotFound (Unsupported when the directory has
// only a SentencePiece tokenizer.model); malformed JSON, a merge naming
// a token that is not in the vocabulary, duplicate or absurd ids are InvalidFile;
// every message names the file. Nothing here throws. Threading: no shared state.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "gguf/value.h"

namespace tern {

// The GGUF tokenizer.* metadata (in the order llama.cpp's convert_hf_to_gguf.py writes it) for a
// Hugging Face model directory: DIR/tokenizer.json (required), DIR/tokenizer_config.json and
// DIR/generation_config.json (optional). Keys: tokenizer.ggml.model, .pre, .tokens, .scores (SPM),
// .token_type, .merges (BPE), .bos_token_id, .eos_token_id, .unknown_token_id, .padding_token_id,
// .add_bos_token, .add_eos_token, tokenizer.chat_template — those that apply.
Result<std::vector<std::pair<std::string, gguf::Value>>> read_hf_tokenizer(const std::string& dir);

}  // namespace tern
