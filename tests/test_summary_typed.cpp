// The summary built from the typed views (reports/summary.hpp summary_of, from views/run.hpp
// and views/accuracy_diff.hpp) and the summary view (views/summary.hpp) restored from its
// to_json stay joined: every verdict the summary holds is the verdict the result's view holds
// for the same node, and the one Summary::from_json restores from the summary's JSON, on a
// shipped case (tvm_thread: EXPECTED paths, MISTRUSTED folded biases, observed weights) and a
// shipped model (the fixture with a corrupt observed fold: UNEXPECTED and EXPECTED layers).
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cli_run.hpp"
#include "foldcheck/reports/summary.hpp"
#include "foldcheck/result/views/accuracy_diff.hpp"
#include "foldcheck/result/views/run.hpp"
#include "foldcheck/result/views/summary.hpp"

using json = nlohmann::json;
using namespace foldcheck_cli_test;
namespace views = foldcheck::result::views;
using foldcheck::Verdict;

namespace {

// The summary written and read back: the same JSON, and the restored summary.
views::Summary round_trip(const views::Summary& s) {
  views::Summary back = views::Summary::from_json(s.to_json());
  CHECK(back.to_json().dump() == s.to_json().dump());
  return back;
}

void same_set(const std::optional<views::SetSummary>& a, const std::optional<views::SetSummary>& b,
              const views::Comparison* c, std::map<Verdict, int>& seen) {
  REQUIRE(a.has_value() == (c != nullptr));
  REQUIRE(b.has_value() == a.has_value());
  if (!c) return;
  CHECK(a->verdict == c->verdict);
  CHECK(b->verdict == c->verdict);
  ++seen[c->verdict];
}

void same_set(const std::optional<views::SetSummary>& a, const std::optional<views::SetSummary>& b,
              const std::optional<views::AdiffComparison>& c, std::map<Verdict, int>& seen) {
  REQUIRE(a.has_value() == c.has_value());
  REQUIRE(b.has_value() == c.has_value());
  if (!c) return;
  CHECK(a->verdict == c->verdict);
  CHECK(b->verdict == c->verdict);
  ++seen[c->verdict];
}

}  // namespace

TEST_CASE("summary of a run: each verdict is the run view's and the restored summary's", "[reports][summary]") {
  const Result res = run("run " + src("cases/tvm_thread.json") + " --format json --no-timing -q");
  REQUIRE(res.code == 0);
  const json j = json::parse(res.out);
  const views::Run r = views::Run::from_json(j);
  const views::Summary s = foldcheck::reports::summary_of(r);
  CHECK(s.to_json().dump() == foldcheck::reports::summarize(j).dump());
  const views::Summary back = round_trip(s);
  std::map<Verdict, int> seen;
  std::size_t p = 0, f = 0;
  for (const views::DtypeResult& d : r.dtypes) {
    for (const views::Order& o : d.orders)
      for (const views::Path& path : o.paths) {
        REQUIRE(p < s.paths.size());
        CHECK(s.paths[p].verdict == path.scored.verdict);
        CHECK(back.paths[p].verdict == path.scored.verdict);
        ++seen[path.scored.verdict];
        ++p;
      }
    for (const views::FoldedParameters& fp : d.folded_parameters) {
      REQUIRE(f < s.folded.size());
      same_set(s.folded[f].weights, back.folded[f].weights, &fp.weights, seen);
      same_set(s.folded[f].bias, back.folded[f].bias, fp.bias ? &*fp.bias : nullptr, seen);
      ++f;
    }
  }
  CHECK(p == s.paths.size());
  CHECK(f == s.folded.size());
  REQUIRE(r.observed_weights);
  CHECK(s.observed_weights_verdict == r.observed_weights->verdict);
  CHECK(back.observed_weights_verdict == r.observed_weights->verdict);
  CHECK(s.verdict == r.verdict);
  CHECK(back.verdict == r.verdict);
  REQUIRE(s.answer);
  CHECK(back.answer->verdict == s.answer->verdict);
  CHECK(seen[Verdict::Expected] > 0);
  CHECK(seen[Verdict::Mistrusted] > 0);
}

TEST_CASE("summary of an accuracy-diff: each verdict is the view's and the restored summary's", "[reports][summary]") {
  const std::string fx = src("cases/models/fixture/");
  const Result res = run("accuracy-diff " + fx + "model.onnx --observed " + fx + "corrupt.onnx --input " + fx +
                         "x.npy --format json --no-timing -q");
  const json j = json::parse(res.out);
  const views::AccuracyDiff r = views::AccuracyDiff::from_json(j);
  const views::Summary s = foldcheck::reports::summary_of(r);
  CHECK(s.to_json().dump() == foldcheck::reports::summarize(j).dump());
  const views::Summary back = round_trip(s);
  std::map<Verdict, int> seen;
  REQUIRE(s.layers.size() == r.layers.size());
  for (std::size_t i = 0; i < r.layers.size(); ++i) {
    const views::AdiffLayer& l = r.layers[i];
    CHECK(s.layers[i].verdict == l.verdict);
    CHECK(back.layers[i].verdict == l.verdict);
    ++seen[l.verdict];
    if (l.fold && !l.fold->recipes.empty()) {
      REQUIRE(s.layers[i].fold);
      REQUIRE(back.layers[i].fold);
      same_set(s.layers[i].fold->weights, back.layers[i].fold->weights, l.fold->shown().weights, seen);
      same_set(s.layers[i].fold->bias, back.layers[i].fold->bias, l.fold->shown().bias, seen);
    }
    for (const auto& [a, sa, ba] : {std::tuple{&l.fused, &s.layers[i].fused, &back.layers[i].fused},
                                    std::tuple{&l.unfused, &s.layers[i].unfused, &back.layers[i].unfused}}) {
      REQUIRE(sa->has_value() == a->has_value());
      if (!*a) continue;
      CHECK((*sa)->verdict == (*a)->verdict);
      CHECK((*ba)->verdict == (*a)->verdict);
    }
  }
  REQUIRE(r.end_to_end);
  REQUIRE(s.end_to_end);
  CHECK(s.end_to_end->verdict == r.end_to_end->verdict);
  CHECK(back.end_to_end->verdict == r.end_to_end->verdict);
  REQUIRE(s.end_to_end->outputs);
  REQUIRE(s.end_to_end->outputs->size() == r.end_to_end->outputs.size());
  for (std::size_t i = 0; i < r.end_to_end->outputs.size(); ++i) {
    const views::AdiffOutput& o = r.end_to_end->outputs[i];
    same_set((*s.end_to_end->outputs)[i].fused, (*back.end_to_end->outputs)[i].fused, o.fused, seen);
    same_set((*s.end_to_end->outputs)[i].unfused, (*back.end_to_end->outputs)[i].unfused, o.unfused, seen);
  }
  CHECK(s.verdict == r.verdict);
  CHECK(back.verdict == r.verdict);
  REQUIRE(s.answer);
  CHECK(back.answer->verdict == r.verdict);
  CHECK(seen[Verdict::Unexpected] > 0);
  CHECK(seen[Verdict::Expected] > 0);
}

// A result whose figures have the wrong type or range is refused with its file named (exit 2),
// never read as none, as 0 or as a wrapped integer (result/views/json_io.hpp): each mutation of a
// real run result, compared against the original.
TEST_CASE("compare refuses a run result whose figures have the wrong type or range", "[reports][summary]") {
  const Result res = run("run " + src("cases/tvm_thread.json") + " --format json --no-timing -q");
  REQUIRE(res.code == 0);
  const json original = json::parse(res.out);
  const fs::path base = tmp("typed_base.json");
  std::ofstream(base) << original.dump();
  const std::vector<std::pair<std::string, json>> mutations{
      {"/dtypes/0/orders/0/paths/0/bound_check/beyond_bound", "7"},
      {"/dtypes/0/orders/0/paths/0/bound_check/worst_ratio", "12.5"},
      {"/dtypes/0/orders/0/paths/0/bound/worst_ratio", json::array({99})},
      {"/dtypes/0/orders/0/paths/0/bound_check/beyond_bound", 1e300},
      {"/dtypes/0/orders/0/paths/0/bound_check/beyond_bound", 18446744073709551615ULL},
      {"/dtypes/0/folded_parameters/0/arithmetic", 3},
      {"/dtypes/0/orders/0/paths/0/verdict", "BOGUS"},
  };
  for (const auto& [pointer, value] : mutations) {
    INFO(pointer << " = " << value.dump());
    json mutated = original;
    mutated[json::json_pointer(pointer)] = value;
    const fs::path p = tmp("typed_mutated.json");
    std::ofstream(p) << mutated.dump();
    const Result c = run("compare " + p.string() + " --baseline " + base.string());
    CHECK(c.code == 2);
    CHECK_THAT(c.err, Catch::Contains("typed_mutated.json"));
  }
}

TEST_CASE("a stored summary's counts are integers in range", "[reports][summary]") {
  const Result res = run("run " + src("cases/tvm_thread.json") + " --format json --no-timing -q");
  REQUIRE(res.code == 0);
  const json s = foldcheck::reports::summary_of(views::Run::from_json(json::parse(res.out))).to_json();
  REQUIRE(s.at("paths").at(0).contains("beyond_bound"));
  for (const json& bad : {json(1e300), json(9.3e18), json(18446744073709551615ULL), json("0"), json(1.5)}) {
    INFO(bad.dump());
    json m = s;
    m["paths"][0]["beyond_bound"] = bad;
    CHECK_THROWS_AS(views::Summary::from_json(m), json::exception);
  }
}
