// JUnit XML of a suite report (suite_reports.hpp): one test case per entry.
#include <fmt/format.h>

#include "foldcheck/reports/compare_reports.hpp"
#include "foldcheck/reports/suite_reports.hpp"
#include "foldcheck/reports/summary.hpp"
#include "svg_charts.hpp"

namespace foldcheck::reports {

using json = nlohmann::json;

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
    if (x.value("passed", false)) {
      s += "/>\n";
      continue;
    }
    const json h = headline(x["summary"]);
    const std::string msg = fmt::format("verdict {}, expected {}", x["summary"]["verdict"].get<std::string>(),
                                        x["expect"].get<std::string>());
    std::string detail = fmt::format("worst bound ratio {} at {}\n", h["worst_ratio"].dump(), h["worst_where"].get<std::string>());
    for (const json& w : h["not_expected"]) detail += "not EXPECTED: " + w.get<std::string>() + "\n";
    s += fmt::format(">\n      <failure message=\"{}\" type=\"{}\">{}</failure>\n    </testcase>\n", svg::escape(msg),
                     x["summary"]["verdict"].get<std::string>(), svg::escape(detail));
  }
  return s + "  </testsuite>\n</testsuites>\n";
}

}  // namespace foldcheck::reports
