// The typed `accuracy-diff` result tree (commands/accuracy_diff.hpp) and the read-side view
// (result/views/accuracy_diff.hpp) stay joined by the schema: every verdict the tree holds is
// the one the view restores from the tree's to_json(), per layer (with its fold) and end to end
// (with the observed-output check). On the shipped fixture (cases/models/fixture): its engine's
// folded model (every part EXPECTED), its corrupted fold (conv_b UNEXPECTED), and a corrupted
// engine output (the observed output UNEXPECTED, the runs EXPECTED). The activations' verdict,
// which the view does not restore, is checked against the JSON it writes.
#include <catch2/catch.hpp>

#include <string>

#include "foldcheck/commands/accuracy_diff.hpp"
#include "foldcheck/result/views/accuracy_diff.hpp"

using namespace foldcheck;
using foldcheck::result::views::AccuracyDiff;

namespace {

const std::string kFixture = std::string(FOLDCHECK_SOURCE_DIR) + "/cases/models/fixture/";

// Every verdict of `r` against the view restored from its JSON; returns the layers' verdicts.
std::vector<Verdict> check_joined(const AccuracyDiffResult& r) {
  const nlohmann::json j = r.to_json();
  const AccuracyDiff v = AccuracyDiff::from_json(j);
  CHECK(v.verdict == r.verdict());
  REQUIRE(v.layers.size() == r.layers.size());
  std::vector<Verdict> out;
  for (std::size_t k = 0; k < r.layers.size(); ++k) {
    const LayerDiff& d = r.layers[k];
    INFO("layer " << d.identity.name);
    CHECK(v.layers[k].name == d.identity.name);
    CHECK(v.layers[k].verdict == d.verdict());
    REQUIRE(v.layers[k].fold.has_value() == d.fold.has_value());
    if (d.fold) CHECK(v.layers[k].fold->verdict == d.fold->verdict);
    REQUIRE(d.activations_verdict().has_value());
    CHECK(j["layers"][k]["activations"]["verdict"] == name(*d.activations_verdict()));
    out.push_back(d.verdict());
  }
  REQUIRE(r.end_to_end.has_value());
  REQUIRE(v.end_to_end.has_value());
  CHECK(v.end_to_end->verdict == r.end_to_end->verdict(r.layers));
  CHECK(v.end_to_end->first_layer_beyond_bound == r.end_to_end->first_layer_beyond_bound(r.layers));
  REQUIRE(v.end_to_end->observed_output.has_value() == r.end_to_end->observed_output.has_value());
  if (r.end_to_end->observed_output)
    CHECK(v.end_to_end->observed_output->verdict == r.end_to_end->observed_output->verdict());
  return out;
}

AccuracyDiffOptions fixture_options() {
  AccuracyDiffOptions o;
  o.input = kFixture + "x.npy";
  o.attribution_elements = 16;  // the verdicts do not depend on it; the test stays fast
  return o;
}

}  // namespace

TEST_CASE("accuracy-diff tree: its verdicts are the view's, EXPECTED and UNEXPECTED", "[accuracy-diff][views]") {
  const std::string model = kFixture + "model.onnx";
  AccuracyDiffOptions o = fixture_options();
  o.observed_model = kFixture + "folded.onnx";
  const AccuracyDiffResult folded = accuracy_diff(model, o);
  CHECK(check_joined(folded) == std::vector<Verdict>(3, Verdict::Expected));
  CHECK(folded.verdict() == Verdict::Expected);

  o.observed_model = kFixture + "corrupt.onnx";
  const AccuracyDiffResult corrupt = accuracy_diff(model, o);
  CHECK(check_joined(corrupt) == std::vector<Verdict>{Verdict::Expected, Verdict::Unexpected, Verdict::Expected});
  CHECK(corrupt.verdict() == Verdict::Unexpected);

  AccuracyDiffOptions out = fixture_options();
  out.observed_output = kFixture + "y_corrupt.npy";
  out.output_samples = 8;
  const AccuracyDiffResult output = accuracy_diff(model, out);
  check_joined(output);
  CHECK(output.end_to_end->observed_output->verdict() == Verdict::Unexpected);
  CHECK(output.end_to_end->verdict(output.layers) == Verdict::Expected);
  CHECK(output.verdict() == Verdict::Unexpected);
}
