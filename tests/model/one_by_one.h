// Logits of every token of a sequence fed to a model one at a time (direct
// decoding, no batching): the reference batched paths are compared with.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "model/batch_runner.h"
#include "model/model.h"

namespace tern::test {

inline std::vector<std::vector<float>> logits_one_by_one(const Model& m, const std::vector<TokenId>& tokens) {
  auto runner = BatchRunner::create(m, 1, static_cast<int32_t>(tokens.size()));
  EXPECT_TRUE(runner.is_ok());
  std::vector<std::vector<float>> rows;
  if (!runner.is_ok()) return rows;
  std::vector<float> logits;
  for (size_t i = 0; i < tokens.size(); ++i) {
    Batch b;
    b.add(tokens[i], static_cast<int32_t>(i), SeqId(0), true);
    EXPECT_TRUE(runner.value()->forward(b, logits).is_ok());
    rows.push_back(logits);
  }
  return rows;
}

}  // namespace tern::test
