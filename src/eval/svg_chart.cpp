// Layout of a chart (all in px, origin top left):
//
//   +--------------------------------------------------------------+
//   |                        title                                 |
//   |  y ticks | plot area (grid, series)              | legend    |
//   |          +---------------------------------------+           |
//   |             x ticks                                          |
//   |                        x label                               |
//   +--------------------------------------------------------------+
#include "eval/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "eval/chart_axis.h"

namespace tern::eval {
namespace {

// Okabe–Ito palette: distinguishable under the common colour-vision deficiencies.
constexpr const char* kColors[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                   "#E69F00", "#56B4E9", "#000000", "#F0E442"};
constexpr int kNColors = sizeof kColors / sizeof kColors[0];
constexpr double kCharWidthPx = 7.0;  // rough width of one 12 px sans-serif character

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

struct Frame {
  double x0, x1, y0, y1;  // plot area: x0 left, x1 right, y0 top, y1 bottom
  AxisScale xs, ys;
  // Ranges map into the plot area less a 3% margin, so points at the ends
  // of a range do not sit on the axis lines.
  static double inset(double f) { return 0.03 + 0.94 * f; }
  double px(double x) const { return x0 + inset(xs.fraction(x)) * (x1 - x0); }
  double py(double y) const { return y1 - inset(ys.fraction(y)) * (y1 - y0); }
};

bool drawable(const ChartPoint& p, const Frame& f) {
  if (!std::isfinite(p.x) || !std::isfinite(p.y)) return false;
  return (!f.xs.log || p.x > 0) && (!f.ys.log || p.y > 0);
}

// Series i's marker: circle, square, triangle, diamond in turn.
std::string marker(int i_series, double x, double y, const std::string& extra = "") {
  const double r = 4.0;
  switch (i_series % 4) {
    case 0:
      return "<circle cx=\"" + num(x) + "\" cy=\"" + num(y) + "\" r=\"" + num(r) + "\"" + extra + "/>";
    case 1:
      return "<rect x=\"" + num(x - r) + "\" y=\"" + num(y - r) + "\" width=\"" + num(2 * r) + "\" height=\"" +
             num(2 * r) + "\"" + extra + "/>";
    case 2:
      return "<polygon points=\"" + num(x) + "," + num(y - r - 1) + " " + num(x + r + 1) + "," + num(y + r) + " " +
             num(x - r - 1) + "," + num(y + r) + "\"" + extra + "/>";
    default:
      return "<polygon points=\"" + num(x) + "," + num(y - r - 1) + " " + num(x + r + 1) + "," + num(y) + " " +
             num(x) + "," + num(y + r + 1) + " " + num(x - r - 1) + "," + num(y) + "\"" + extra + "/>";
  }
}

void draw_axes(std::string& out, const Chart& c, const Frame& f) {
  out += "<g class=\"grid\" stroke=\"#e3e3e3\" stroke-width=\"1\">\n";
  for (double t : f.xs.ticks)
    out += "<line x1=\"" + num(f.px(t)) + "\" y1=\"" + num(f.y0) + "\" x2=\"" + num(f.px(t)) + "\" y2=\"" + num(f.y1) + "\"/>\n";
  for (double t : f.ys.ticks)
    out += "<line x1=\"" + num(f.x0) + "\" y1=\"" + num(f.py(t)) + "\" x2=\"" + num(f.x1) + "\" y2=\"" + num(f.py(t)) + "\"/>\n";
  out += "</g>\n<g class=\"axes\" stroke=\"#333333\" stroke-width=\"1\">\n";
  out += "<line x1=\"" + num(f.x0) + "\" y1=\"" + num(f.y1) + "\" x2=\"" + num(f.x1) + "\" y2=\"" + num(f.y1) + "\"/>\n";
  out += "<line x1=\"" + num(f.x0) + "\" y1=\"" + num(f.y0) + "\" x2=\"" + num(f.x0) + "\" y2=\"" + num(f.y1) + "\"/>\n";
  for (double t : f.xs.ticks)
    out += "<line x1=\"" + num(f.px(t)) + "\" y1=\"" + num(f.y1) + "\" x2=\"" + num(f.px(t)) + "\" y2=\"" + num(f.y1 + 5) + "\"/>\n";
  for (double t : f.ys.ticks)
    out += "<line x1=\"" + num(f.x0 - 5) + "\" y1=\"" + num(f.py(t)) + "\" x2=\"" + num(f.x0) + "\" y2=\"" + num(f.py(t)) + "\"/>\n";
  out += "</g>\n<g class=\"tick-labels\" fill=\"#333333\">\n";
  for (double t : f.xs.ticks)
    out += "<text x=\"" + num(f.px(t)) + "\" y=\"" + num(f.y1 + 18) + "\" text-anchor=\"middle\">" +
           xml_escape(format_tick(t, f.xs)) + "</text>\n";
  for (double t : f.ys.ticks)
    out += "<text x=\"" + num(f.x0 - 8) + "\" y=\"" + num(f.py(t) + 4) + "\" text-anchor=\"end\">" +
           xml_escape(format_tick(t, f.ys)) + "</text>\n";
  out += "</g>\n";
  const std::string xl = c.x_label + (c.x_log ? " (log scale)" : "");
  const std::string yl = c.y_label + (c.y_log ? " (log scale)" : "");
  out += "<text class=\"x-label\" x=\"" + num((f.x0 + f.x1) / 2) + "\" y=\"" + num(f.y1 + 40) +
         "\" text-anchor=\"middle\">" + xml_escape(xl) + "</text>\n";
  const double ly = (f.y0 + f.y1) / 2;
  out += "<text class=\"y-label\" x=\"16\" y=\"" + num(ly) + "\" text-anchor=\"middle\" transform=\"rotate(-90 16 " +
         num(ly) + ")\">" + xml_escape(yl) + "</text>\n";
}

void draw_series(std::string& out, const ChartSeries& s, int i, const Frame& f) {
  const char* color = kColors[i % kNColors];
  out += "<g class=\"series\" data-name=\"" + xml_escape(s.name) + "\" fill=\"" + color + "\" stroke=\"" + color + "\">\n";
  std::string points;
  int n_drawable = 0;
  for (const auto& p : s.points) {
    if (!drawable(p, f)) continue;
    points += (n_drawable++ ? " " : "") + num(f.px(p.x)) + "," + num(f.py(p.y));
  }
  if (s.lines && n_drawable >= 2)
    out += "<polyline fill=\"none\" stroke-width=\"2\" points=\"" + points + "\"/>\n";
  for (const auto& p : s.points) {
    if (!drawable(p, f)) continue;
    out += marker(i, f.px(p.x), f.py(p.y), " stroke=\"white\" stroke-width=\"1\"") + "\n";
  }
  for (const auto& p : s.points) {
    if (!drawable(p, f) || p.label.empty()) continue;
    // Labels right of the point, or left of it near the right edge.
    const bool flip = f.px(p.x) + p.label.size() * kCharWidthPx > f.x1;
    const double x = f.px(p.x) + (flip ? -7 : 7);
    out += "<text class=\"point-label\" x=\"" + num(x) + "\" y=\"" + num(f.py(p.y) - 6) + "\" stroke=\"none\" fill=\"#333333\" font-size=\"11\" text-anchor=\"" +
           (flip ? "end" : "start") + "\">" + xml_escape(p.label) + "</text>\n";
  }
  out += "</g>\n";
}

void draw_legend(std::string& out, const Chart& c, double x, double y) {
  out += "<g class=\"legend\">\n";
  for (size_t i = 0; i < c.series.size(); ++i) {
    const char* color = kColors[i % kNColors];
    const double ly = y + 20.0 * i;
    if (c.series[i].lines)
      out += "<line x1=\"" + num(x) + "\" y1=\"" + num(ly) + "\" x2=\"" + num(x + 20) + "\" y2=\"" + num(ly) +
             "\" stroke=\"" + color + "\" stroke-width=\"2\"/>\n";
    out += marker(static_cast<int>(i), x + 10, ly, std::string(" fill=\"") + color + "\"") + "\n";
    out += "<text x=\"" + num(x + 28) + "\" y=\"" + num(ly + 4) + "\">" + xml_escape(c.series[i].name) + "</text>\n";
  }
  out += "</g>\n";
}

}  // namespace

std::string render_svg(const Chart& c) {
  const int width = std::max(c.width_px, 240), height = std::max(c.height_px, 180);
  std::vector<double> xv, yv;
  for (const auto& s : c.series)
    for (const auto& p : s.points) {
      if (!std::isfinite(p.x) || !std::isfinite(p.y) || (c.x_log && p.x <= 0) || (c.y_log && p.y <= 0)) continue;
      xv.push_back(p.x);
      yv.push_back(p.y);
    }
  Frame f{};
  f.xs = make_axis(xv, c.x_log);
  f.ys = make_axis(yv, c.y_log);
  size_t y_tick_chars = 1, legend_chars = 0;
  for (double t : f.ys.ticks) y_tick_chars = std::max(y_tick_chars, format_tick(t, f.ys).size());
  for (const auto& s : c.series) legend_chars = std::max(legend_chars, s.name.size());
  const double legend_w = c.series.empty() ? 0.0 : std::min(width / 3.0, 40.0 + legend_chars * kCharWidthPx);
  f.x0 = 36.0 + y_tick_chars * kCharWidthPx;
  f.x1 = width - 20.0 - legend_w;
  f.y0 = c.title.empty() ? 16.0 : 40.0;
  f.y1 = height - 52.0;

  std::string out;
  out += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" + std::to_string(width) + "\" height=\"" +
         std::to_string(height) + "\" viewBox=\"0 0 " + std::to_string(width) + " " + std::to_string(height) +
         "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n";
  out += "<title>" + xml_escape(c.title) + "</title>\n";
  out += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  if (!c.title.empty())
    out += "<text class=\"title\" x=\"" + num(width / 2.0) + "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">" +
           xml_escape(c.title) + "</text>\n";
  draw_axes(out, c, f);
  for (size_t i = 0; i < c.series.size(); ++i) draw_series(out, c.series[i], static_cast<int>(i), f);
  if (!c.series.empty()) draw_legend(out, c, f.x1 + 16.0, f.y0 + 8.0);
  out += "</svg>\n";
  return out;
}

}  // namespace tern::eval
