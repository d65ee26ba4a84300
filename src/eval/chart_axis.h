// eval/chart_axis.h — the pieces of svg_chart.cpp worth testing on their own:
// axis ranges with round ticks (linear: steps of 1, 2 or 5 x 10^k; log:
// decades, with 2 and 5 in between when the data spans less than about two
// decades) and the XML text escaping every string in a chart goes through.
//
// Threading: pure functions.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tern::eval {

struct AxisScale {
  double lo = 0, hi = 1;      // the drawn range; every tick and every data value lies inside
  bool log = false;
  std::vector<double> ticks;  // ascending, round values within [lo, hi]
  double step = 0;            // linear tick spacing (0 on log axes)

  // Position of v in [0, 1] along the axis (log10 space on log axes).
  double fraction(double v) const;
};

// Scale for the finite values (positive ones only on log axes); an empty set
// gives [0, 1] (or [1, 10] on a log axis), a single value a small range
// around it. Linear ranges are widened to whole steps, so ticks sit at the ends.
AxisScale make_axis(std::span<const double> values, bool log, int n_ticks_target = 6);

// A tick label: as few digits as the spacing needs ("0.25", "1500", "2k" is
// not used: plain numbers read better in tables beside the chart), and
// "1e-05"-style for very small or very large magnitudes.
std::string format_tick(double value, const AxisScale& axis);

// Escapes & < > " ' for element text and attribute values; bytes that XML 1.0
// forbids (control characters, invalid UTF-8) become U+FFFD so the output
// always parses.
std::string xml_escape(std::string_view text);

}  // namespace tern::eval
