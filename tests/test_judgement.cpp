// The judgement module (result/judgement.hpp): each policy over every verdict it can meet, and
// the result types that use them agree with what they write (a layer's JSON verdict is its
// typed verdict; an engine run's final outputs count by their typed verdicts).
#include <catch2/catch.hpp>

#include <optional>
#include <vector>

#include "foldcheck/commands/accuracy_diff.hpp"
#include "foldcheck/commands/engines.hpp"
#include "foldcheck/result/judgement.hpp"

using namespace foldcheck;

namespace {

const std::vector<Verdict> kAll = {Verdict::Expected, Verdict::Suspicious, Verdict::Unexpected, Verdict::Mistrusted};

}  // namespace

TEST_CASE("judgement: verdict names round-trip and nothing else parses", "[judgement]") {
  for (const Verdict v : kAll) CHECK(verdict_named(name(v)) == v);
  CHECK_FALSE(verdict_named("expected"));
  CHECK_FALSE(verdict_named("LEFT OUT"));
  CHECK_FALSE(verdict_named(""));
}

TEST_CASE("judgement: worst is one total order, evidence before doubt: UNEXPECTED worst, MISTRUSTED next",
          "[judgement]") {
  const std::vector<Verdict> order = {Verdict::Expected, Verdict::Suspicious, Verdict::Mistrusted, Verdict::Unexpected};
  for (std::size_t i = 0; i < order.size(); ++i)
    for (std::size_t j = 0; j < order.size(); ++j) {
      CHECK(worst(order[i], order[j]) == order[std::max(i, j)]);
      CHECK(worst(order[i], order[j]) == worst(order[j], order[i]));
      // A regression is a move up the same order.
      CHECK(judgement::is_regression(order[i], order[j]) == (j > i));
    }
  // A node with a part found wrong and a part not judged: UNEXPECTED (it was MISTRUSTED, hiding the bug).
  judgement::Tally t;
  t.add(Verdict::Mistrusted);
  t.add(Verdict::Unexpected);
  CHECK(t.verdict() == Verdict::Unexpected);
  judgement::Tally doubt;
  doubt.add(Verdict::Expected);
  doubt.add(Verdict::Mistrusted);
  CHECK(doubt.verdict() == Verdict::Mistrusted);
}

TEST_CASE("judgement: one check puts evidence before doubt", "[judgement]") {
  using judgement::of_check;
  for (const bool informative : {true, false}) {
    CHECK(of_check({.failed = true, .suspicious = true, .informative = informative}) == Verdict::Unexpected);
    CHECK(of_check({.failed = true, .suspicious = false, .informative = informative}) == Verdict::Unexpected);
    CHECK(of_check({.failed = false, .suspicious = true, .informative = informative}) == Verdict::Suspicious);
  }
  CHECK(of_check({}) == Verdict::Expected);
  CHECK(of_check({.informative = false}) == Verdict::Mistrusted);
  for (const Verdict v : kAll) {
    CHECK(judgement::unless_uninformative(v, true) == v);
    CHECK(judgement::unless_uninformative(v, false) == (v == Verdict::Expected ? Verdict::Mistrusted : v));
  }
}

TEST_CASE("judgement: statistics, vacuous parts and evidence against a pass", "[judgement]") {
  for (const Verdict v : kAll) {
    CHECK(judgement::deterministic_only(v) == (v == Verdict::Suspicious ? Verdict::Expected : v));
    CHECK(judgement::unless_vacuous(v) == (v == Verdict::Mistrusted ? Verdict::Expected : v));
    CHECK(judgement::counts_against(v) == (v == Verdict::Suspicious || v == Verdict::Unexpected));
  }
  CHECK(judgement::of_channels(0, 0) == Verdict::Expected);
  CHECK(judgement::of_channels(0, 3) == Verdict::Suspicious);
  CHECK(judgement::of_channels(1, 3) == Verdict::Unexpected);
}

TEST_CASE("judgement: a model end to end and a case's observed weights", "[judgement]") {
  for (const Verdict layers : kAll) {
    // The layers decide unless foldcheck's own runs left the bound; an output that compared
    // nothing keeps the whole from passing, and does not hide evidence (UNEXPECTED stays).
    CHECK(judgement::of_end_to_end(layers, false, false) == layers);
    CHECK(judgement::of_end_to_end(layers, true, false) == Verdict::Unexpected);
    CHECK(judgement::of_end_to_end(layers, false, true) ==
          (layers == Verdict::Unexpected ? Verdict::Unexpected : Verdict::Mistrusted));
    CHECK(judgement::of_end_to_end(layers, true, true) == Verdict::Unexpected);
    // Weights given to be tested: only an explanation passes.
    CHECK(judgement::of_observed_weights(layers) ==
          (layers == Verdict::Expected ? Verdict::Expected : Verdict::Unexpected));
  }
}

TEST_CASE("judgement: a layer's fold beyond its bound is its verdict", "[judgement]") {
  for (const Verdict outputs : kAll) CHECK(judgement::of_layer(Verdict::Unexpected, outputs) == Verdict::Unexpected);
  for (const Verdict fold : {Verdict::Expected, Verdict::Suspicious, Verdict::Mistrusted}) {
    CHECK(judgement::of_layer(fold, std::nullopt) == fold);
    for (const Verdict outputs : kAll) CHECK(judgement::of_layer(fold, outputs) == worst(fold, outputs));
  }
}

TEST_CASE("judgement: the per-layer judge over folds, outputs, doubt and the input", "[judgement]") {
  using F = judgement::LayerFacts;
  CHECK(judgement::of_layer(F{}) == Verdict::Mistrusted);  // nothing judged
  for (const Verdict v : kAll) {
    CHECK(judgement::of_layer(F{.fold = v}) == v);
    CHECK(judgement::of_layer(F{.outputs = v}) == v);
    CHECK(judgement::of_layer(F{.fold = v, .input_mismatch = true}) == Verdict::Unexpected);
    // A fold beyond its bound wins over outputs that compared nothing and over doubt.
    CHECK(judgement::of_layer(F{.fold = Verdict::Unexpected, .outputs = v, .doubt = true}) == Verdict::Unexpected);
    // Doubt keeps a layer from passing; it judged nothing by itself.
    CHECK(judgement::of_layer(F{.outputs = v, .doubt = true}) == worst(v, Verdict::Mistrusted));
    CHECK(judgement::of_layer(F{.doubt = true}) == Verdict::Mistrusted);
  }
}

TEST_CASE("judgement: a layer that is another computation, or folded with an op foldcheck does not model",
          "[judgement]") {
  using F = judgement::LayerFacts;
  using U = judgement::Unmodelled;
  for (const Verdict v : kAll) {
    // Another computation than the model's layer is evidence, whatever its values or ops beside it.
    CHECK(judgement::of_layer(F{.fold = v, .not_the_layer = true, .unmodelled = U::Surely}) == Verdict::Unexpected);
    // Surely folded with an unmodelled op: not judged, even with a fold beyond its bound.
    CHECK(judgement::of_layer(F{.fold = v, .outputs = v, .unmodelled = U::Surely}) == Verdict::Mistrusted);
    // Possibly: only a verdict that counts against the layer becomes MISTRUSTED; a pass stays.
    const Verdict plain = judgement::of_layer(F{.fold = v, .outputs = Verdict::Expected});
    CHECK(judgement::of_layer(F{.fold = v, .outputs = Verdict::Expected, .unmodelled = U::Possibly}) ==
          (judgement::counts_against(plain) ? Verdict::Mistrusted : plain));
  }
  CHECK(judgement::of_layer(F{.unmodelled = U::Possibly}) == Verdict::Mistrusted);  // nothing judged
}

TEST_CASE("judgement: an engine's layer with a fold beyond its bound is UNEXPECTED whatever its outputs show",
          "[judgement]") {
  EngineLayer L;
  L.weights = FoldCheck{};
  L.weights->verdict = Verdict::Unexpected;
  L.outputs_missing = true;  // outputs given but none usable: MISTRUSTED before the one per-layer judge
  CHECK(L.verdict() == Verdict::Unexpected);
  L.outputs_missing = false;
  L.not_folded = "the engine kept the BatchNorm";
  CHECK(L.verdict() == Verdict::Mistrusted);  // nothing judged: the weights were not a fold
}

TEST_CASE("judgement: a node that judged nothing is MISTRUSTED", "[judgement]") {
  judgement::Tally empty;
  CHECK(empty.verdict() == Verdict::Mistrusted);
  judgement::Tally only_also;
  only_also.also(Verdict::Expected);
  CHECK_FALSE(only_also.judged());
  CHECK(only_also.verdict() == Verdict::Mistrusted);
  for (const Verdict a : kAll)
    for (const Verdict b : kAll) {
      judgement::Tally t;
      t.add(a);
      t.also(b);
      CHECK(t.verdict() == worst(a, b));
    }
}

// Before the judgement module, a layer whose fold was UNEXPECTED and whose activations compared
// nothing wrote "UNEXPECTED" in its JSON while its typed verdict (and so the model's) was
// MISTRUSTED. Every combination now writes the typed verdict, and the model's is their tally.
TEST_CASE("judgement: accuracy-diff writes each layer's typed verdict", "[judgement]") {
  for (const Verdict fold : kAll)
    for (const std::optional<Verdict> act :
         {std::optional<Verdict>(), std::optional<Verdict>(Verdict::Expected),
          std::optional<Verdict>(Verdict::Unexpected), std::optional<Verdict>(Verdict::Mistrusted)}) {
      AccuracyDiffResult r;
      LayerDiff d;
      d.identity.name = "conv";
      d.fold = FoldCheck{};
      d.fold->verdict = fold;
      if (act) {  // both paths of this verdict: the activations' is theirs
        d.activations.emplace();
        d.activations->unfused.comparison.verdict = *act;
        d.activations->fused.comparison.verdict = *act;
      }
      r.layers.push_back(d);
      const nlohmann::json j = r.to_json();
      INFO("fold " << name(fold) << ", activations " << (act ? name(*act) : "none"));
      CHECK(j["layers"][0]["verdict"] == name(r.layers[0].verdict()));
      CHECK(j["verdict"] == name(r.verdict()));
      CHECK(r.verdict() == judgement::of_layer(fold, act));
    }
  AccuracyDiffResult none;
  CHECK(none.verdict() == Verdict::Mistrusted);
}

TEST_CASE("judgement: an engine run's final outputs count by their typed verdicts", "[judgement]") {
  EngineRun run;
  EngineLayer L;
  L.name = "conv";
  L.weights = FoldCheck{};
  run.layers.push_back(L);
  CHECK(run.verdict() == Verdict::Expected);
  run.final_outputs.push_back({.name = "y", .verdict = Verdict::Unexpected});
  CHECK(run.verdict() == Verdict::Unexpected);
  EngineRun left_out = run;
  left_out.layers[0].left_out = "not offered";
  left_out.layers[0].weights.reset();
  CHECK(left_out.verdict() == Verdict::Mistrusted);  // final outputs alone judge no layer
}
