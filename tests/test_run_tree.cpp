// `run`'s typed result tree (commands/run_case.hpp) and the read-side view the renderers
// restore from its JSON (result/views/run.hpp) hold the same verdicts: every path, folded
// weight and bias, the observed weights and the run; each dtype's verdict (not written: it
// is the worst of its parts) is what the judgement policies give over the restored parts.
// On the shipped TVM-thread case, whose paths and weights are EXPECTED and whose folded
// biases compare nothing (a fresh BatchNorm: MISTRUSTED, left out of the dtype), with its
// observed weights corrupted (UNEXPECTED); then with one fused path marked UNEXPECTED.
#include <catch2/catch.hpp>

#include <array>
#include <string>

#include "foldcheck/commands/run_case.hpp"
#include "foldcheck/io/case_file.hpp"
#include "foldcheck/result/judgement.hpp"
#include "foldcheck/result/views/run.hpp"

namespace views = foldcheck::result::views;
using foldcheck::Verdict;
namespace judgement = foldcheck::judgement;

namespace {

// The dtype's verdict as the policies give it over the restored parts.
Verdict judged_from_view(const views::DtypeResult& d) {
  judgement::Tally t;
  for (const views::FoldedParameters& f : d.folded_parameters) {
    t.add(f.weights.verdict);
    if (f.bias) t.add(judgement::unless_vacuous(f.bias->verdict));
  }
  for (const views::Order& o : d.orders)
    for (const views::Path& p : o.paths) t.add(p.scored.verdict);
  return t.verdict();
}

// Every verdict of the tree against the one the view restores; returns how many of each
// verdict the parts compared hold (paths, weights, biases, observed weights).
std::array<int, 4> check_verdicts(const foldcheck::RunResult& r) {
  std::array<int, 4> seen{};
  const views::Run v = views::Run::from_json(r.to_json());
  CHECK(v.verdict == r.verdict());
  REQUIRE(v.dtypes.size() == r.dtypes.size());
  for (std::size_t i = 0; i < r.dtypes.size(); ++i) {
    const foldcheck::RunDtype& d = r.dtypes[i];
    const views::DtypeResult& vd = v.dtypes[i];
    INFO("dtype " << vd.dtype);
    CHECK(judged_from_view(vd) == d.verdict());
    REQUIRE(vd.folded_parameters.size() == d.folded_parameters.size());
    for (std::size_t k = 0; k < d.folded_parameters.size(); ++k) {
      const foldcheck::FoldedParameterCheck& f = d.folded_parameters[k];
      INFO("folded parameters " << vd.folded_parameters[k].recipe);
      CHECK(vd.folded_parameters[k].weights.verdict == f.weights.verdict());
      ++seen[static_cast<int>(f.weights.verdict())];
      REQUIRE(vd.folded_parameters[k].bias.has_value() == f.bias.has_value());
      if (f.bias) {
        CHECK(vd.folded_parameters[k].bias->verdict == f.bias->verdict());
        ++seen[static_cast<int>(f.bias->verdict())];
      }
    }
    REQUIRE(vd.orders.size() == d.orders.size());
    for (std::size_t k = 0; k < d.orders.size(); ++k) {
      REQUIRE(vd.orders[k].paths.size() == d.orders[k].paths.size());
      for (std::size_t p = 0; p < d.orders[k].paths.size(); ++p) {
        INFO("path " << vd.orders[k].paths[p].name << " of " << vd.orders[k].accumulation);
        CHECK(vd.orders[k].paths[p].scored.verdict == d.orders[k].paths[p].verdict());
        ++seen[static_cast<int>(d.orders[k].paths[p].verdict())];
      }
    }
  }
  REQUIRE(v.observed_weights.has_value() == r.observed.has_value());
  if (r.observed) {
    CHECK(v.observed_weights->verdict == r.observed->explanation.verdict());
    ++seen[static_cast<int>(r.observed->verdict())];
  }
  return seen;
}

}  // namespace

TEST_CASE("run: the typed tree's verdicts are those its JSON restores", "[run][views]") {
  foldcheck::CaseSpec spec = foldcheck::load_case(std::string(FOLDCHECK_SOURCE_DIR) + "/cases/tvm_thread.json");
  spec.path = "cases/tvm_thread.json";
  (*spec.observed_weights_prefix)[0] *= 1.001;  // 1000 ppm: no recipe folds that
  foldcheck::RunOptions o;
  o.attribution_elements = 64;
  foldcheck::RunResult r = foldcheck::run_case(spec, o);

  const std::array<int, 4> seen = check_verdicts(r);
  CHECK(seen[static_cast<int>(Verdict::Expected)] > 0);
  CHECK(seen[static_cast<int>(Verdict::Mistrusted)] > 0);   // the biases of a fresh BatchNorm
  CHECK(seen[static_cast<int>(Verdict::Unexpected)] == 1);  // the observed weights
  CHECK(r.verdict() == Verdict::Unexpected);
  for (const foldcheck::RunDtype& d : r.dtypes) CHECK(d.verdict() == Verdict::Expected);

  // A fused path beyond its bound is its order's, its dtype's and the run's verdict.
  r.observed.reset();
  CHECK(r.verdict() == Verdict::Expected);
  r.dtypes[1].orders[0].paths[2].scored.comparison.verdict = Verdict::Unexpected;
  CHECK(check_verdicts(r)[static_cast<int>(Verdict::Unexpected)] == 1);
  CHECK(r.dtypes[1].orders[0].verdict() == Verdict::Unexpected);
  CHECK(r.dtypes[1].verdict() == Verdict::Unexpected);
  CHECK(r.dtypes[0].verdict() == Verdict::Expected);
  CHECK(r.verdict() == Verdict::Unexpected);
}
