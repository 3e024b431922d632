// The typed results of `bisect` and `engines` (bisect.hpp, engines.hpp) and their read-side
// views (result/views/bisect.hpp, engines.hpp) stay joined by the schema: every verdict the
// typed tree holds equals the verdict the view restores from its to_json, on results with
// UNEXPECTED and EXPECTED parts.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "foldcheck/commands/bisect.hpp"
#include "foldcheck/commands/engines.hpp"
#include "foldcheck/io/npy.hpp"
#include "foldcheck/result/views/bisect.hpp"
#include "foldcheck/result/views/engines.hpp"

using namespace foldcheck;
namespace views = foldcheck::result::views;
namespace fs = std::filesystem;

namespace {

// Each step's verdict, each weight change's fold verdict and the whole result's, typed and as
// the view restores them.
void check_bisect_verdicts(const BisectResult& r) {
  const views::Bisect v = views::Bisect::from_json(r.to_json());
  CHECK(v.verdict == r.verdict());
  REQUIRE(v.steps.size() == r.steps.size());
  for (std::size_t i = 0; i < r.steps.size(); ++i) {
    INFO("step " << i);
    CHECK(v.steps[i].verdict == r.steps[i].verdict);
    CHECK(v.steps[i].bad == r.steps[i].bad);
  }
  const std::size_t weights = r.setup.weights ? r.setup.weights->size() : 0;
  REQUIRE(v.weights.size() == weights);
  for (std::size_t i = 0; i < weights; ++i) CHECK(v.weights[i].fold_verdict == (*r.setup.weights)[i].fold_verdict);
}

bool has(const BisectResult& r, Verdict want) {
  return std::ranges::any_of(r.steps, [&](const BisectStep& s) { return s.verdict == want; });
}

}  // namespace

TEST_CASE("typed views: a model's bisect, its steps' and weights' verdicts as the view restores them",
          "[views][bisect]") {
  const std::string fx = std::string(FOLDCHECK_SOURCE_DIR) + "/cases/models/fixture/";
  BisectOptions o;
  o.passes = {"SimplifyInference", "FoldScaleAxis", "FastMath", "FuseOps", "AlterOpLayout"};
  const BisectResult r = bisect_model(fx + "model.onnx", fx + "x.npy", 0, o);
  REQUIRE(r.verdict() == Verdict::Unexpected);
  CHECK((has(r, Verdict::Unexpected) && has(r, Verdict::Expected)));
  CHECK(r.setup.weights);
  check_bisect_verdicts(r);
}

TEST_CASE("typed views: an external bisect's run verdicts as the view restores them", "[views][bisect]") {
  // A "compiler" whose pass B scales its output by 1.01: runs with B enabled are beyond
  // --threshold-ulp, the others write the reference itself.
  const fs::path dir = fs::temp_directory_path() / ("foldcheck_views_eng_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  Tensor good{{2, 3}, {1.5, -2.25, 3.0, 0.5, 7.0, -1.0}};
  Tensor bad = good;
  for (double& x : bad.data) x *= 1.01;
  write_npy((dir / "good.npy").string(), good);
  write_npy((dir / "bad.npy").string(), bad);
  ExternalBisectOptions o;
  o.command = "case {enabled} in *B*) cp '" + (dir / "bad.npy").string() + "' {out};; *) cp '" +
              (dir / "good.npy").string() + "' {out};; esac";
  o.passes = {"A", "B", "C"};
  o.reference = good.data;
  o.reference_shape = good.shape;
  o.reference_source = "good.npy";
  o.threshold_ulp = 4;
  o.mode = BisectMode::Linear;
  const BisectResult r = external_bisect(o);
  fs::remove_all(dir);
  CHECK(r.culprit == std::optional<std::string>("B"));
  CHECK((has(r, Verdict::Unexpected) && has(r, Verdict::Expected)));
  check_bisect_verdicts(r);
}

TEST_CASE("typed views: an engines result's run, layer and final verdicts as the view restores them",
          "[views][engines]") {
  // The engines need real adapters; this tree is built by hand with every kind of part: a
  // layer within its bounds, one with a channel beyond its statistic's bound, one left out,
  // a final output beyond the end-to-end bound, and a failed run.
  EnginesResult r;
  r.model = {"model.onnx", "test", 17, 6, 3};
  r.input = {"x", {1, 3, 4, 4}, std::nullopt, 0};
  EngineRun run;
  run.spec = {"fake", "true"};
  EngineLayer ok, beyond, left;
  ok.name = "a";
  ok.outputs = Comparison{};
  ok.outputs->elements = 8;
  ok.outputs->verdict = Verdict::Expected;
  ok.outputs_detail.bound = "gamma_k";
  ok.outputs_detail.channels.tested = 2;
  beyond = ok;
  beyond.name = "b";
  beyond.outputs_detail.channels.beyond_bound = 1;
  beyond.outputs_detail.channels.worst = EngineWorstChannel{.channel = 1, .rho_ppm = 2};
  left.name = "c";
  left.left_out = "not offered";
  run.layers = {ok, beyond, left};
  run.final_outputs.push_back({.name = "y", .samples = 4, .verdict = Verdict::Expected});
  EngineRun failed;
  failed.spec = {"broken", "exit 3"};
  failed.failed = "exit 3";
  r.runs = {run, failed};
  const views::Engines v = views::Engines::from_json(r.to_json());
  CHECK(r.verdict() == Verdict::Unexpected);  // a run found wrong beside one that failed: evidence first
  CHECK(v.verdict == r.verdict());
  REQUIRE(v.engines.size() == r.runs.size());
  for (std::size_t e = 0; e < r.runs.size(); ++e) {
    const EngineRun& t = r.runs[e];
    CHECK(v.engines[e].verdict == t.verdict());
    if (t.failed) continue;
    REQUIRE(v.engines[e].layers.size() == t.layers.size());
    for (std::size_t i = 0; i < t.layers.size(); ++i) {
      const EngineLayer& L = t.layers[i];
      INFO("layer " << L.name);
      const std::optional<Verdict> typed = L.left_out && !L.weights ? std::nullopt : std::optional(L.verdict());
      CHECK(v.engines[e].layers[i].verdict == typed);
    }
    REQUIRE(v.engines[e].final_outputs.size() == t.final_outputs.size());
    for (std::size_t i = 0; i < t.final_outputs.size(); ++i)
      CHECK(v.engines[e].final_outputs[i].verdict == t.final_outputs[i].verdict);
  }
  CHECK(r.runs[0].layers[0].verdict() == Verdict::Expected);
  CHECK(r.runs[0].layers[1].verdict() == Verdict::Unexpected);
  CHECK(r.runs[0].verdict() == Verdict::Unexpected);
}

// The statistic not computed (a Winograd or unfused engine: no real engine here writes one)
// writes what the hand-built JSON did: the bound, the activation, the reason and the verdict.
TEST_CASE("typed views: an engine layer's channel statistic not computed writes the reason and its verdict",
          "[views][engines]") {
  EngineOutputsDetail d;
  d.bound = "gamma_k";
  d.channels.not_computed = "Winograd: the statistic models a direct sum";
  const nlohmann::json want = nlohmann::json::parse(
      R"({"bound": "gamma_k", "activation": null,
          "channels": {"not_computed": "Winograd: the statistic models a direct sum", "verdict": "EXPECTED"}})");
  CHECK(d.to_json() == want);
  d.activation = "Relu";
  CHECK(d.to_json()["activation"] == "Relu");
}
