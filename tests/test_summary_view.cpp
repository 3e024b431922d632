// The typed summary and report views (result/views/summary.hpp, report.hpp): a summary read
// from a report and written again is the same JSON (every baseline in reports/baselines), and
// a malformed one is refused with an exception, not undefined behaviour.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "foldcheck/reports/summary.hpp"
#include "foldcheck/result/views/report.hpp"
#include "foldcheck/result/views/summary.hpp"

namespace fs = std::filesystem;
using json = nlohmann::json;
using foldcheck::result::views::Report;
using foldcheck::result::views::Summary;

namespace {

json read_json(const fs::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

}  // namespace

TEST_CASE("summary view: every baseline's summaries round-trip byte for byte", "[reports][views]") {
  std::size_t summaries = 0;
  for (const auto& f : fs::directory_iterator(fs::path(FOLDCHECK_SOURCE_DIR) / "reports" / "baselines")) {
    if (f.path().extension() != ".json") continue;
    const json report = read_json(f.path());
    for (const json& e : report.at("entries")) {
      INFO(f.path().string() << ": " << e.at("name").dump());
      CHECK(Summary::from_json(e.at("summary")).to_json().dump() == e.at("summary").dump());
      ++summaries;
    }
    const Report r = Report::from_json(report);
    CHECK(r.entries.size() == report.at("entries").size());
  }
  CHECK(summaries > 0);
}

TEST_CASE("summary view: the headline of a baseline matches its JSON form", "[reports][views]") {
  const json report = read_json(fs::path(FOLDCHECK_SOURCE_DIR) / "reports" / "baselines" / "nightly.json");
  for (const json& e : report.at("entries")) {
    const json h = foldcheck::reports::headline(e.at("summary"));
    const foldcheck::reports::Headline t = foldcheck::reports::headline(Summary::from_json(e.at("summary")));
    CHECK(h.at("worst_where") == t.worst_where);
    CHECK(h.at("not_expected") == json(t.not_expected));
  }
}

TEST_CASE("summary view: a malformed summary is refused with an exception", "[reports][views]") {
  json s = read_json(fs::path(FOLDCHECK_SOURCE_DIR) / "reports" / "baselines" / "nightly.json")
               .at("entries")
               .at(0)
               .at("summary");
  json bad_verdict = s;
  bad_verdict["verdict"] = "FINE";
  CHECK_THROWS(Summary::from_json(bad_verdict));
  json no_key = s;
  no_key["paths"][0].erase("key");
  CHECK_THROWS(Summary::from_json(no_key));
  json wrong_type = s;
  wrong_type["paths"][0]["ulp"]["p50"] = "large";
  CHECK_THROWS(Summary::from_json(wrong_type));
  CHECK_THROWS(Report::from_json(json::object()));
}
