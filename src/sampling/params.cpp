// SamplingParams::validate — the ranges a request may ask for.
#include <cmath>
#include <cstdio>
#include <string>

#include "sampling/sampler.h"

namespace tern {

namespace {

Status out_of_range(const char* field, double got, const char* allowed) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%g", got);
  return error(ErrorKind::InvalidArgument,
               std::string(field) + " must be " + allowed + " (got " + buf + ")");
}

}  // namespace

Status SamplingParams::validate() const {
  // Every check is written so that NaN fails it: comparisons with NaN are false.
  if (!(std::isfinite(temperature) && temperature >= 0.0f)) {
    return out_of_range("temperature", temperature, "a finite number >= 0 (0 = greedy)");
  }
  if (!(top_p > 0.0f && top_p <= 1.0f)) {
    return out_of_range("top_p", top_p, "in (0, 1] (1 = off)");
  }
  if (!(min_p >= 0.0f && min_p <= 1.0f)) {
    return out_of_range("min_p", min_p, "in [0, 1] (0 = off)");
  }
  if (!(std::isfinite(repetition_penalty) && repetition_penalty > 0.0f)) {
    return out_of_range("repetition_penalty", repetition_penalty, "a finite number > 0 (1 = off)");
  }
  // The OpenAI API bounds these two at [-2, 2]; beyond that they only wreck the text.
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f)) {
    return out_of_range("frequency_penalty", frequency_penalty, "in [-2, 2] (0 = off)");
  }
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f)) {
    return out_of_range("presence_penalty", presence_penalty, "in [-2, 2] (0 = off)");
  }
  if (penalty_last_n < -1) {
    return out_of_range("penalty_last_n", penalty_last_n, "-1 (whole history), 0 (off) or a window > 0");
  }
  return Status::ok();
}

}  // namespace tern
