// Byte-level golden of the `run` and `explain` renderers (run_text, explain_text, run_answer,
// answer_lines, histogram_text), over a real run (tvm_thread: observed weights, MISTRUSTED
// folded biases) and explain result, and variants of them that the shipped cases never reach
// (a path UNEXPECTED, SUSPICIOUS or unbounded, observed weights not EXPECTED, no attribution,
// --all-histograms, more than 40 explained elements, unscored elements). The golden was
// written by the renderers before they read typed views (issue 39): a conversion that changes
// a byte fails here. FOLDCHECK_UPDATE_GOLDEN=1 rewrites tests/golden/run_renderers.txt.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <fmt/format.h>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "cli_run.hpp"
#include "foldcheck/reports/run_answer.hpp"
#include "foldcheck/reports/text.hpp"

using json = nlohmann::json;
using namespace foldcheck_cli_test;

namespace {

std::string answer_text(const json& r) {
  const json a = foldcheck::reports::run_answer(r);
  const auto l = foldcheck::reports::answer_lines(a);
  std::string s = "answer json: " + a.dump(1) + "\nheadline: " + l.headline + "\nobserved: " + l.observed + "\n";
  for (const auto& m : l.more) s += "more: " + m + "\n";
  for (const auto& t : l.tolerances) s += "tolerance: " + t + "\n";
  return s;
}

// A long rendering by its FNV-1a hash and size (the whole text would make a golden of megabytes;
// a failing test writes the renderings, see below).
std::string digest(const std::string& text) {
  std::uint64_t h = 14695981039346656037ULL;
  for (const unsigned char c : text) h = (h ^ c) * 1099511628211ULL;
  return fmt::format("fnv1a64 {:016x}, {} bytes\n", h, text.size());
}

std::string rendered;  // every run text in full, for a diff when the test fails

std::string run_section(const std::string& name, const json& r) {
  const std::string text = foldcheck::reports::run_text(r), all = foldcheck::reports::run_text(r, {true});
  rendered += "==== run " + name + " ====\n" + text + "---- --all-histograms\n" + all;
  return "==== run " + name + " ====\n" + answer_text(r) + "---- text: " + digest(text) +
         "---- text --all-histograms: " + digest(all);
}

json& path_at(json& r, std::size_t d, std::size_t o, std::size_t p) { return r["dtypes"][d]["orders"][o]["paths"][p]; }

// Variants of a run the shipped cases do not reach.
std::string run_variants(const json& r) {
  std::string s = run_section("as run", r);
  // A path beyond its bound, another SUSPICIOUS, folded weights MISTRUSTED: the answer cites the
  // worst set in judgement's order (the MISTRUSTED weights), whatever the run's verdict says.
  json v = r;
  v["verdict"] = "UNEXPECTED";
  path_at(v, 0, 0, 1)["verdict"] = "UNEXPECTED";
  path_at(v, 0, 0, 1)["bound"]["worst_ratio"] = 3.25;
  path_at(v, 1, 0, 0)["verdict"] = "SUSPICIOUS";
  path_at(v, 1, 0, 0)["probabilistic_bound"]["worst_ratio"] = 1.75;
  v["dtypes"][0]["folded_parameters"][0]["weights"]["verdict"] = "MISTRUSTED";
  v["observed_weights"]["note"] = "";
  v["timing"] = {{"seconds", 12.345}};
  s += run_section("unexpected", v);
  v = r;  // unbounded, observed weights not EXPECTED, no observed weights note
  v["verdict"] = "SUSPICIOUS";
  path_at(v, 0, 0, 0)["verdict"] = "UNEXPECTED";
  path_at(v, 0, 0, 0)["bound"]["worst_ratio"] = std::numeric_limits<double>::infinity();  // as run holds it
  path_at(v, 0, 0, 0).erase("probabilistic_bound");
  v["observed_weights"]["verdict"] = "UNEXPECTED";
  s += run_section("unbounded", v);
  path_at(v, 0, 0, 0)["bound"]["worst_ratio"] = nullptr;  // as a file read back holds it
  s += "==== answer unbounded, read back ====\n" + answer_text(v);
  v = r;  // SUSPICIOUS only, no observed weights, no attribution, no tolerances, ratio histograms
  v["verdict"] = "MISTRUSTED";
  v.erase("observed_weights");
  path_at(v, 0, 0, 1)["verdict"] = "SUSPICIOUS";
  for (auto& d : v["dtypes"])
    for (auto& o : d["orders"])
      for (auto& p : o["paths"]) {
        p.erase("attribution");
        p.erase("tolerance");
        p["histograms"].erase("bound");
      }
  v["dtypes"][0]["folded_parameters"][0]["arithmetic"] = "bfloat16";
  v["dtypes"][0]["orders"][0].erase("arithmetic");
  s += run_section("suspicious", v);
  v = r;  // observed weights only, every set EXPECTED
  v["observed_weights"]["reasoning"] = json::array();
  v["observed_weights"].erase("bit_exact_recipes");
  s += run_section("observed no reasoning", v);
  return s;
}

std::string explain_section(const std::string& name, const json& e) {
  return "==== explain " + name + " ====\n" + foldcheck::reports::explain_text(e);
}

std::string explain_variants(const json& e, const json& observed) {
  std::string s = explain_section("seed", e) + explain_section("observed weights", observed);
  json v = observed;
  v["bn"]["source"] = "bn.npz (eps 1e-05)";
  v["scale_inference"] = {{"summary", "one common scale 1.0000012"}};
  v["elements"][0]["drift_ppm"] = nullptr;
  for (int i = 0; i < 45; ++i) {
    json x = v["elements"][i % 3];
    x["index"] = 100 + i;
    x.erase("weight_index");
    v["elements"].push_back(x);
  }
  v["elements_total"] = 90;
  v["recipes"][0]["bit_exact"] = false;
  v["recipes"][0]["mismatches"] = 7;
  v["recipes"][0]["explains"] = false;
  json& h = v["summary"]["histograms"]["ulp"];
  h["unscored"] = {{"nan", 2}, {"inf_missed", 0}, {"ppm_undefined", 3}, {"reference_nan", 1}};
  h["zero"] = 0;
  s += explain_section("variant", v);
  json b = h;
  b["unit"] = "bound";
  b["buckets"].push_back({{"negative", 1}, {"positive", 0}, {"range", "(1, inf)"}, {"upper", nullptr}});
  s +=
      "==== histogram bound ====\n" + foldcheck::reports::histogram_text(b) + foldcheck::reports::histogram_text(b, 10);
  b["buckets"].erase(b["buckets"].size() - 1);
  s += "==== histogram bound within ====\n" + foldcheck::reports::histogram_text(b);
  return s;
}

}  // namespace

TEST_CASE("run and explain renderers: byte-identical to the golden", "[reports][golden]") {
  const Result run_r = run("run " + src("cases/tvm_thread.json") + " --format json --no-timing -q");
  REQUIRE(run_r.code == 0);
  json r = json::parse(run_r.out);
  r["case"]["path"] = "cases/tvm_thread.json";  // where the checkout is is no part of the golden
  const Result ex =
      run("explain --original 2.1122932,5.5735774,2.0870073 --observed 2.1122828,5.5735493,2.0869968 "
          "--format json --no-timing -q");
  REQUIRE(ex.code == 0);
  const std::string got = run_variants(r) + explain_variants(json::parse(ex.out), r["observed_weights"]);
  const std::string golden = src("tests/golden/run_renderers.txt");
  if (std::getenv("FOLDCHECK_UPDATE_GOLDEN")) std::ofstream(golden, std::ios::binary) << got;
  const std::string want = slurp(golden);
  if (got != want) std::ofstream(tmp("run_renderers.txt"), std::ios::binary) << got << rendered;
  INFO("rendered into " << tmp("run_renderers.txt").string() << " (then every run text in full); diff it against "
                        << golden << ", and the run texts against those of the renderers before the change");
  CHECK(got.size() == want.size());
  CHECK((got == want));
}

TEST_CASE("a run's answer restores from the JSON it writes, and a malformed answer is refused, not rendered",
          "[reports]") {
  const Result run_r = run("run " + src("cases/tvm_thread.json") + " --format json --no-timing -q");
  REQUIRE(run_r.code == 0);
  const json r = json::parse(run_r.out);
  const json a = foldcheck::reports::run_answer(r);
  CHECK(foldcheck::reports::RunAnswer::from_json(a).to_json() == a);
  for (const char* key : {"verdict", "reasoning", "observed_weights", "tolerances"}) {
    json bad = a;
    bad.erase(key);
    CHECK_THROWS_AS(foldcheck::reports::answer_lines(bad), nlohmann::json::exception);
  }
  json bad = a;
  bad["verdict"] = "PASSED";  // not one of the four: malformed like any mistyped value (json_io.hpp)
  CHECK_THROWS_AS(foldcheck::reports::answer_lines(bad), nlohmann::json::exception);
  bad = a;
  bad["tolerances"][0]["rtol"] = "small";
  CHECK_THROWS_AS(foldcheck::reports::answer_lines(bad), nlohmann::json::exception);
}
