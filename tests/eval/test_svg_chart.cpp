#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "eval/chart_axis.h"
#include "eval/svg_chart.h"
#include "xml_check.h"

namespace tern::eval {
namespace {

std::vector<const test::XmlElement*> with_class(const test::XmlCheck& x, const std::string& cls) {
  std::vector<const test::XmlElement*> out;
  for (const auto& e : x.elements) {
    auto it = e.attrs.find("class");
    if (it != e.attrs.end() && it->second == cls) out.push_back(&e);
  }
  return out;
}

// Elements below element index `parent` (any depth) named `name`.
int count_children(const test::XmlCheck& x, const test::XmlElement* parent, const std::string& name) {
  const int idx = static_cast<int>(parent - x.elements.data());
  int n = 0;
  for (const auto& e : x.elements) {
    int p = e.parent;
    while (p >= 0 && p != idx) p = x.elements[p].parent;
    if (p == idx && e.name == name) ++n;
  }
  return n;
}

Chart two_series_chart() {
  Chart c;
  c.title = "Quality vs speed <Q&A>";
  c.x_label = "tg tok/s";
  c.y_label = "KL divergence";
  c.y_log = true;
  c.series.push_back({"tern \"fast\" & <co>", {{100, 0.01, "Q8_0"}, {180, 0.05, "Q4_K_M"}, {220, 0.2, "Q4_0"}}, false});
  c.series.push_back({"llama.cpp", {{90, 0.012, "Q8_0"}, {170, 0.06, ""}}, true});
  return c;
}

TEST(SvgChart, IsWellFormedWithOneGroupPerSeries) {
  const std::string svg = render_svg(two_series_chart());
  const auto x = test::check_xml(svg);
  ASSERT_TRUE(x.ok) << x.error << "\n" << svg;
  EXPECT_EQ(x.elements.front().name, "svg");
  EXPECT_EQ(x.elements.front().attrs.at("xmlns"), "http://www.w3.org/2000/svg");
  const auto series = with_class(x, "series");
  ASSERT_EQ(series.size(), 2u);
  EXPECT_EQ(series[0]->attrs.at("data-name"), "tern \"fast\" & <co>");  // escaped in the file, exact after parsing
  EXPECT_EQ(series[1]->attrs.at("data-name"), "llama.cpp");
  EXPECT_EQ(svg.find("<co>"), std::string::npos);
  // Scatter: three circles, no line; second: a polyline and two markers.
  EXPECT_EQ(count_children(x, series[0], "circle"), 3);
  EXPECT_EQ(count_children(x, series[0], "polyline"), 0);
  EXPECT_EQ(count_children(x, series[1], "polyline"), 1);
  EXPECT_EQ(count_children(x, series[1], "rect"), 2);
  // Labels of the points that have one.
  EXPECT_EQ(with_class(x, "point-label").size(), 4u);
  const auto titles = with_class(x, "title");
  ASSERT_EQ(titles.size(), 1u);
  EXPECT_EQ(titles[0]->text, "Quality vs speed <Q&A>");
  EXPECT_EQ(with_class(x, "legend").size(), 1u);
  EXPECT_NE(svg.find("(log scale)"), std::string::npos);
}

TEST(SvgChart, EmptyChartStillHasAxes) {
  Chart c;
  c.x_label = "x";
  const auto x = test::check_xml(render_svg(c));
  ASSERT_TRUE(x.ok) << x.error;
  EXPECT_EQ(with_class(x, "series").size(), 0u);
  EXPECT_EQ(with_class(x, "axes").size(), 1u);
  EXPECT_GE(with_class(x, "tick-labels").size(), 1u);
}

TEST(SvgChart, SkipsNonFiniteAndNonPositiveOnLogAxes) {
  Chart c;
  c.x_log = true;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  c.series.push_back({"s", {{1, 1, ""}, {nan, 2, ""}, {-3, 4, ""}, {0, 5, ""}, {10, INFINITY, ""}, {100, 3, ""}}, true});
  const std::string svg = render_svg(c);
  const auto x = test::check_xml(svg);
  ASSERT_TRUE(x.ok) << x.error;
  const auto series = with_class(x, "series");
  ASSERT_EQ(series.size(), 1u);
  EXPECT_EQ(count_children(x, series[0], "circle"), 2);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

TEST(SvgChart, ControlCharactersAndBadUtf8StayParseable) {
  Chart c;
  c.title = std::string("bad \x01 byte \xff and caf\xc3\xa9");
  c.series.push_back({std::string("a\x02"), {{1, 2, "\x1b[0m"}}, false});
  const std::string svg = render_svg(c);
  const auto x = test::check_xml(svg);
  ASSERT_TRUE(x.ok) << x.error;
  EXPECT_NE(svg.find("caf\xc3\xa9"), std::string::npos);
  EXPECT_EQ(svg.find('\x01'), std::string::npos);
  EXPECT_EQ(svg.find('\x1b'), std::string::npos);
}

TEST(ChartAxis, LinearTicksAreRoundAndCoverTheData) {
  const std::vector<double> v = {3.2, 47.9, 12.0};
  const AxisScale a = make_axis(v, false);
  EXPECT_DOUBLE_EQ(a.step, 10.0);
  EXPECT_DOUBLE_EQ(a.lo, 0.0);
  EXPECT_DOUBLE_EQ(a.hi, 50.0);
  ASSERT_EQ(a.ticks.size(), 6u);
  EXPECT_EQ(format_tick(a.ticks[2], a), "20");
  const std::vector<double> small = {0.013, 0.061};
  const AxisScale b = make_axis(small, false);
  EXPECT_DOUBLE_EQ(b.step, 0.01);
  EXPECT_EQ(format_tick(b.ticks[1], b), "0.02");
  for (double t : b.ticks) EXPECT_TRUE(t >= b.lo - 1e-12 && t <= b.hi + 1e-12);
  EXPECT_LE(b.lo, 0.013);
  EXPECT_GE(b.hi, 0.061);
}

TEST(ChartAxis, DegenerateRanges) {
  const AxisScale empty = make_axis({}, false);
  EXPECT_EQ(empty.lo, 0.0);
  EXPECT_EQ(empty.hi, 1.0);
  const std::vector<double> one = {5.0};
  const AxisScale single = make_axis(one, false);
  EXPECT_LT(single.lo, 5.0);
  EXPECT_GT(single.hi, 5.0);
  const std::vector<double> neg = {-7.0, -2.0};
  const AxisScale n = make_axis(neg, false);
  EXPECT_LE(n.lo, -7.0);
  EXPECT_GE(n.hi, -2.0);
  for (double t : n.ticks) EXPECT_NE(format_tick(t, n), "-0");
}

TEST(ChartAxis, LogTicks) {
  const std::vector<double> narrow = {0.03, 0.4};
  const AxisScale a = make_axis(narrow, true);
  EXPECT_DOUBLE_EQ(a.lo, 0.02);
  EXPECT_DOUBLE_EQ(a.hi, 0.5);
  ASSERT_FALSE(a.ticks.empty());
  EXPECT_EQ(format_tick(a.ticks.front(), a), "0.02");
  EXPECT_EQ(format_tick(a.ticks.back(), a), "0.5");
  const std::vector<double> wide = {1e-3, 5e4};
  const AxisScale b = make_axis(wide, true);
  EXPECT_DOUBLE_EQ(b.lo, 1e-3);
  EXPECT_DOUBLE_EQ(b.hi, 1e5);
  for (double t : b.ticks) EXPECT_NEAR(std::log10(t), std::round(std::log10(t)), 1e-9);
  EXPECT_NEAR(b.fraction(b.lo), 0.0, 1e-12);
  EXPECT_NEAR(b.fraction(b.hi), 1.0, 1e-12);
  EXPECT_EQ(format_tick(1e-5, b), "1e-5");
  EXPECT_EQ(format_tick(2e6, b), "2e6");
}

TEST(ChartAxis, XmlEscape) {
  EXPECT_EQ(xml_escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
  EXPECT_EQ(xml_escape("tab\tok"), "tab\tok");
  EXPECT_EQ(xml_escape("\xe2\x82\xac"), "\xe2\x82\xac");          // euro sign kept
  EXPECT_EQ(xml_escape("\xc0\xaf"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong: each byte replaced
  EXPECT_EQ(xml_escape("\xe2\x82"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // truncated
}

}  // namespace
}  // namespace tern::eval
