// eval/svg_chart.h — small, dependency-free SVG charts for benchmark and
// evaluation reports (latency–throughput curves, quality–speed scatters).
//
// Contract: render_svg() returns a complete standalone SVG 1.1 document
// (valid XML: every text is escaped) with axes, ticks, labels, a legend and
// one <g class="series" data-name="..."> group per series, so tests and
// scripts can find each series by name. Points with non-finite coordinates
// are skipped; an empty chart still renders axes. Log axes need positive
// values (non-positive points are skipped).
//
// Threading: pure functions.
#pragma once

#include <string>
#include <vector>

namespace tern::eval {

struct ChartPoint {
  double x = 0, y = 0;
  std::string label;  // optional text drawn beside the point (e.g. "Q4_K_M", "rate 4")
};

struct ChartSeries {
  std::string name;
  std::vector<ChartPoint> points;
  bool lines = true;  // connect points in order (false = scatter markers only)
};

struct Chart {
  std::string title;
  std::string x_label, y_label;
  bool x_log = false, y_log = false;
  int width_px = 720, height_px = 440;
  std::vector<ChartSeries> series;
};

std::string render_svg(const Chart& chart);

}  // namespace tern::eval
