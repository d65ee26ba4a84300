#include "eval/chart_axis.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>

namespace tern::eval {
namespace {

constexpr double kEps = 1e-9;

// The smallest of 1, 2, 5, 10 (times a power of ten) not below `raw`.
double nice_step(double raw) {
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / mag;
  if (norm <= 1.0 + kEps) return mag;
  if (norm <= 2.0 + kEps) return 2.0 * mag;
  if (norm <= 5.0 + kEps) return 5.0 * mag;
  return 10.0 * mag;
}

AxisScale linear_axis(double mn, double mx, int n_target) {
  if (mx - mn <= std::abs(mx) * 1e-12) {  // one value (or all equal): a range around it
    const double pad = mn == 0.0 ? 1.0 : std::abs(mn) * 0.1;
    mn -= pad, mx += pad;
  }
  AxisScale a;
  a.step = nice_step((mx - mn) / std::max(1, n_target));
  const double i_lo = std::floor(mn / a.step + kEps), i_hi = std::ceil(mx / a.step - kEps);
  a.lo = i_lo * a.step;
  a.hi = i_hi * a.step;
  for (double i = i_lo; i <= i_hi + 0.5; i += 1.0) {
    const double t = i * a.step;
    a.ticks.push_back(t == 0.0 ? 0.0 : t);  // no "-0"
  }
  return a;
}

// Log axis: 1-2-5 ticks over narrow ranges, decades (every k-th one when
// there are many) over wide ones.
AxisScale log_axis(double mn, double mx, int n_target) {
  if (mx <= mn * (1 + 1e-12)) mn /= 2, mx *= 2;
  AxisScale a;
  a.log = true;
  const int d_lo = static_cast<int>(std::floor(std::log10(mn) + kEps));
  const int d_hi = static_cast<int>(std::ceil(std::log10(mx) - kEps));
  if (d_hi - d_lo <= 2) {
    std::vector<double> cands;  // 1, 2, 5 x 10^d for d in [d_lo, d_hi]
    for (int d = d_lo; d <= d_hi; ++d)
      for (double m : {1.0, 2.0, 5.0}) cands.push_back(m * std::pow(10.0, d));
    a.lo = cands.front();
    for (double c : cands)
      if (c <= mn * (1 + kEps)) a.lo = c;
    a.hi = cands.back();
    for (auto it = cands.rbegin(); it != cands.rend(); ++it)
      if (*it >= mx * (1 - kEps)) a.hi = *it;
    for (double c : cands)
      if (c >= a.lo * (1 - kEps) && c <= a.hi * (1 + kEps)) a.ticks.push_back(c);
    return a;
  }
  const int max_ticks = 2 * std::max(1, n_target);  // decade labels are short: allow more of them
  const int every = std::max(1, (d_hi - d_lo + max_ticks - 1) / max_ticks);
  const int first = static_cast<int>(std::floor(static_cast<double>(d_lo) / every)) * every;
  const int last = static_cast<int>(std::ceil(static_cast<double>(d_hi) / every)) * every;
  a.lo = std::pow(10.0, first);
  a.hi = std::pow(10.0, last);
  for (int d = first; d <= last; d += every) a.ticks.push_back(std::pow(10.0, d));
  return a;
}

// Scientific form without the "e+06" padding: "2e6", "1.5e-5".
std::string format_exponent(double v) {
  const int e = static_cast<int>(std::floor(std::log10(std::abs(v)) + kEps));
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3g", v / std::pow(10.0, e));
  return std::string(buf) + "e" + std::to_string(e);
}

// Length of the valid UTF-8 sequence XML accepts at s[i], or 0.
size_t utf8_char_length(std::string_view s, size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  size_t n;
  uint32_t cp;
  if (b < 0x80) return 1;
  if ((b & 0xE0) == 0xC0) n = 2, cp = b & 0x1F;
  else if ((b & 0xF0) == 0xE0) n = 3, cp = b & 0x0F;
  else if ((b & 0xF8) == 0xF0) n = 4, cp = b & 0x07;
  else return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto c = static_cast<unsigned char>(s[i + k]);
    if ((c & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (c & 0x3F);
  }
  const uint32_t min_cp = n == 2 ? 0x80 : n == 3 ? 0x800 : 0x10000;
  if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) || cp == 0xFFFE || cp == 0xFFFF) return 0;
  return n;
}

}  // namespace

double AxisScale::fraction(double v) const {
  if (log) return (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
  return (v - lo) / (hi - lo);
}

AxisScale make_axis(std::span<const double> values, bool log, int n_ticks_target) {
  double mn = INFINITY, mx = -INFINITY;
  for (double v : values) {
    if (!std::isfinite(v) || (log && v <= 0.0)) continue;
    mn = std::min(mn, v);
    mx = std::max(mx, v);
  }
  if (!(mn <= mx)) {  // nothing drawable
    mn = log ? 1.0 : 0.0;
    mx = log ? 10.0 : 1.0;
  }
  return log ? log_axis(mn, mx, n_ticks_target) : linear_axis(mn, mx, n_ticks_target);
}

std::string format_tick(double value, const AxisScale& axis) {
  if (value == 0.0) return "0";
  const double mag = std::abs(value);
  if (mag >= 1e6 || mag < 1e-4) return format_exponent(value);
  const double spacing = axis.log ? mag : axis.step;
  const int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(spacing) + kEps)));
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return buf;
}

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    switch (c) {
      case '&': out += "&amp;"; ++i; continue;
      case '<': out += "&lt;"; ++i; continue;
      case '>': out += "&gt;"; ++i; continue;
      case '"': out += "&quot;"; ++i; continue;
      case '\'': out += "&apos;"; ++i; continue;
      default: break;
    }
    const auto b = static_cast<unsigned char>(c);
    const size_t n = utf8_char_length(text, i);
    if (n == 0 || (b < 0x20 && c != '\t' && c != '\n' && c != '\r')) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
      continue;
    }
    out.append(text.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace tern::eval
