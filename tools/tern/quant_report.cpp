#include "quant_report.h"

#include <unistd.h>

#include <cstdio>

namespace tern::cli {
namespace {

std::string human_bytes(uint64_t n) {
  char buf[32];
  const double mib = n / (1024.0 * 1024.0);
  if (mib >= 1024.0)
    std::snprintf(buf, sizeof buf, "%.2f GiB", mib / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%.2f MiB", mib);
  return buf;
}

}  // namespace

QuantReportPrinter::QuantReportPrinter() : tty_(isatty(STDERR_FILENO) != 0) {}

void QuantReportPrinter::on_progress(const QuantizeProgress& p) {
  if (!tty_) return;
  constexpr int kWidth = 30;
  const double frac = p.n_elements_total ? static_cast<double>(p.n_elements_done) / p.n_elements_total : 1.0;
  const int filled = static_cast<int>(frac * kWidth);
  std::string bar(filled, '=');
  bar += std::string(kWidth - filled, ' ');
  if (p.job) {
    std::fprintf(stderr, "\r\x1b[K[%4zu/%zu] [%s] %3d%% %s -> %s", p.i_tensor + 1, p.n_tensors, bar.c_str(),
                 static_cast<int>(frac * 100.0), p.job->name.c_str(), std::string(gguf::type_name(p.job->type)).c_str());
  } else {
    std::fprintf(stderr, "\r\x1b[K[%4zu/%zu] [%s] 100%%\n", p.n_tensors, p.n_tensors, bar.c_str());
  }
  std::fflush(stderr);
}

void QuantReportPrinter::print_summary(const std::string& what, const QuantizeReport& r) const {
  std::fprintf(stderr, "tern: %s: %zu tensors (%zu converted, %zu fallback), %s -> %s, %.2f bits/weight, %.1f s\n",
               what.c_str(), r.n_tensors, r.n_converted, r.n_fallback, human_bytes(r.n_bytes_in).c_str(),
               human_bytes(r.n_bytes_out).c_str(), r.bits_per_weight(), r.seconds);
}

}  // namespace tern::cli
