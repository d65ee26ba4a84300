// engine/c_api_model.h — what a tern_model handle holds (include/tern/tern.h):
// the file's path (engines map the weights from it), its vocabulary and the
// metadata the C API reports. The weights are not kept here.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tokenizer/tokenizer.h"

struct tern_model {
  std::string path;
  std::unique_ptr<tern::Tokenizer> tokenizer;
  std::string arch;         // "" for a vocabulary-only file
  int32_t n_ctx_train = 0;  // 0 when the file does not say
  std::string chat_template;  // tokenizer.chat_template; "" when the file has none (ChatML is used)
};
