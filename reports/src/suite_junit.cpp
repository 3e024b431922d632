// JUnit XML of a suite report (suite_reports.hpp): one test case per entry.
#include <fmt/format.h>

#include "foldcheck/reports/compare_reports.hpp"
#include "foldcheck/reports/neutralise.hpp"
#include "foldcheck/reports/suite_reports.hpp"
#include "foldcheck/reports/summary.hpp"
#include "svg_charts.hpp"

namespace foldcheck::reports {

using json = nlohmann::json;
namespace views = result::views;

namespace {

std::string ratio(const std::optional<double>& v) { return v ? fmt::format("{:.3g}", *v) : std::string("unbounded"); }

// The entry's answer (a report written before answers existed has none): its reasons joined by
// newlines; each failing layer is listed after it, once, from the headline.
std::string reason(const views::Summary& summary) {
  if (!summary.answer) return "";
  std::string s;
  for (const std::string& line : summary.answer->reasoning) {
    if (!s.empty()) s.push_back('\n');
    s.append(line);
  }
  return s;
}

std::string testcase(const views::ReportEntry& x, const std::string& suite,
                     const std::map<std::string, double>& times) {
  std::string time;
  if (const auto t = times.find(x.name); t != times.end()) time = fmt::format(" time=\"{:.3f}\"", t->second);
  std::string s = fmt::format(R"(    <testcase classname="foldcheck.{}.{}" name="{}"{})", svg::escape(suite), x.kind,
                              svg::escape(x.name), time);
  const Headline h = headline(x.summary);
  const std::string why = reason(x.summary);
  if (x.passed.value_or(false))  // a pass says why it passed
    return s + fmt::format(">\n      <system-out>{}</system-out>\n    </testcase>\n", svg::escape_lines(why));
  const char* verdict = name(x.summary.verdict);
  const std::string msg = fmt::format("verdict {}, expected {}: {}", verdict, name(x.expect),
                                      h.worst_where.empty() ? std::string("nothing compared")
                                                            : fmt::format("worst ratio to the bound {} at {}",
                                                                          ratio(h.worst_ratio), h.worst_where));
  std::string detail = why + "\n";
  for (const std::string& w : h.not_expected) detail += "not EXPECTED: " + w + "\n";
  return s + fmt::format(">\n      <failure message=\"{}\" type=\"{}\">{}</failure>\n    </testcase>\n",
                         svg::escape(msg), verdict, svg::escape_lines(detail));
}

std::string junit_file(const views::Report& r) {
  const std::string& suite = r.suite.name;
  std::int64_t failures = 0;
  for (const views::ReportEntry& x : r.entries) failures += !x.passed.value_or(false);
  std::string s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += fmt::format("<testsuites name=\"foldcheck\" tests=\"{}\" failures=\"{}\">\n", r.entries.size(), failures);
  s += fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\">\n", svg::escape(suite),
                   r.entries.size(), failures);
  for (const views::ReportEntry& x : r.entries) s += testcase(x, suite, r.seconds);
  return s + "  </testsuite>\n</testsuites>\n";
}

}  // namespace

// Names are neutralised where they are written (escape, markdown_cell); the whole page again, so
// that no string a writer did not escape can drive a terminal or reorder what follows it (neutralise.hpp).
std::string report_junit(const views::Report& r) { return neutralised_page(junit_file(r)); }

std::string report_junit(const json& report) { return report_junit(report_of(neutralised_strings(report))); }

}  // namespace foldcheck::reports
