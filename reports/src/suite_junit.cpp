// JUnit XML of a suite report (suite_reports.hpp): one test case per entry.
#include <fmt/format.h>

#include "foldcheck/reports/compare_reports.hpp"
#include "foldcheck/reports/suite_reports.hpp"
#include "foldcheck/reports/summary.hpp"
#include "svg_charts.hpp"

namespace foldcheck::reports {

using json = nlohmann::json;

namespace {

std::string ratio(const json& v) { return v.is_number() ? fmt::format("{:.3g}", v.get<double>()) : std::string("unbounded"); }

// Lines joined by newlines.
std::string lines(const json& v) {
  std::string s;
  for (const json& line : v) {
    if (!s.empty()) s.push_back('\n');
    s.append(line.get_ref<const std::string&>());
  }
  return s;
}

// The entry's answer (a report written before answers existed has none); each failing layer
// is listed after it, once, from the headline.
std::string reason(const json& summary) {
  return summary.contains("answer") ? lines(summary["answer"]["reasoning"]) : std::string();
}

}  // namespace

std::string report_junit(const json& in) {
  const json r = as_report(in);
  const std::string suite = r["suite"]["name"];
  std::int64_t failures = 0;
  for (const json& x : r["entries"]) failures += !x.value("passed", false);
  const json times = r.contains("timing") ? r["timing"].value("entries", json::object()) : json::object();
  std::string s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += fmt::format("<testsuites name=\"foldcheck\" tests=\"{}\" failures=\"{}\">\n", r["entries"].size(), failures);
  s += fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\">\n", svg::escape(suite), r["entries"].size(),
                   failures);
  for (const json& x : r["entries"]) {
    const std::string name = x["name"];
    std::string time;
    if (times.contains(name)) time = fmt::format(" time=\"{:.3f}\"", times[name].get<double>());
    s += fmt::format("    <testcase classname=\"foldcheck.{}.{}\" name=\"{}\"{}", svg::escape(suite),
                     x["kind"].get<std::string>(), svg::escape(name), time);
    const json h = headline(x["summary"]);
    const std::string why = reason(x["summary"]);
    if (x.value("passed", false)) {  // a pass says why it passed
      s += fmt::format(">\n      <system-out>{}</system-out>\n    </testcase>\n", svg::escape(why));
      continue;
    }
    const std::string where = h["worst_where"].get<std::string>();
    const std::string msg = fmt::format("verdict {}, expected {}: {}", x["summary"]["verdict"].get<std::string>(),
                                        x["expect"].get<std::string>(),
                                        where.empty() ? std::string("nothing compared")
                                                      : fmt::format("worst ratio to the bound {} at {}", ratio(h["worst_ratio"]), where));
    std::string detail = why + "\n";
    for (const json& w : h["not_expected"]) detail += "not EXPECTED: " + w.get<std::string>() + "\n";
    s += fmt::format(">\n      <failure message=\"{}\" type=\"{}\">{}</failure>\n    </testcase>\n", svg::escape(msg),
                     x["summary"]["verdict"].get<std::string>(), svg::escape(detail));
  }
  return s + "  </testsuite>\n</testsuites>\n";
}

}  // namespace foldcheck::reports
