// tools/tern/quant_report.h — what `tern quantize` and `tern synth` print on
// stderr while writing a model: a progress bar (tensor i/N, percentage of
// elements) when stderr is a terminal, and a one-line summary at the end.
#pragma once

#include <string>

#include "model/quantize.h"

namespace tern::cli {

class QuantReportPrinter {
 public:
  QuantReportPrinter();
  // Pass as the QuantizeProgressFn.
  void on_progress(const QuantizeProgress& p);
  // "tern: <what>: N tensors, A MiB -> B MiB, X bits/weight, S s"
  void print_summary(const std::string& what, const QuantizeReport& report) const;

 private:
  bool tty_;
};

}  // namespace tern::cli
