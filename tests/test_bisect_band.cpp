// bisect --cmd --model judges each run's output with the model's calibrated band
// (model/known_computation.hpp, output_band.hpp): a pass that moves one channel of one layer by
// 1e-5, at a quarter of the end-to-end bound, is named SUSPICIOUS with that channel; the honest runs
// pass. The model: band_model.hpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "band_model.hpp"
#include "cli_run.hpp"
#include "foldcheck/io/npy.hpp"
#include "schema_check.hpp"

using namespace foldcheck_band_test;
using namespace foldcheck_cli_test;
using json = nlohmann::json;

TEST_CASE("output band: bisect --cmd on a model names the pass that moves one channel by 1e-5, SUSPICIOUS",
          "[output_band][bisect]") {
  // A "compiler" whose pass Scale moves channel 3 of layer b by 1e-5 (inside the end-to-end
  // bound); its other passes leave foldcheck's honest float32 output. The band judges each run.
  const Fixture f;
  const std::filesystem::path d = f.dir;
  write_npy((d / "x.npy").string(), f.x);
  // The honest output by a kind the calibration did not draw (fused by TVM's recipe, another
  // order of every conv's sum): the honest runs' checks can fail.
  ModelRunOptions ro;
  ro.fused = true;
  ro.recipe = Recipe::Tvm;
  ro.policy.permute = 0xfeedULL | 1;
  const auto honest = [&](const Model& mm) { return run_model(mm, find_bn_pairs(mm), {{"X", f.x}}, ro).at("Y"); };
  Tensor good = honest(f.m);
  Model bad = f.m;
  Tensor& w = bad.own_initializer("wb");
  for (std::size_t i = std::size_t{3} * 36; i < std::size_t{4} * 36; ++i)
    w.data[i] = static_cast<float>(w.data[i] * (1 + 1e-5));
  Tensor moved = honest(bad);
  write_npy((d / "good.npy").string(), good);
  write_npy((d / "moved.npy").string(), moved);
  const std::string cmd = "case {enabled} in *Scale*) cp " + (d / "moved.npy").string() + " {out};; *) cp " +
                          (d / "good.npy").string() + " {out};; esac";
  const std::string args = "bisect --cmd '" + cmd + "' --passes Fold,Layout,Scale,Fuse --model " +
                           (d / "band_model.onnx").string() + " --input " + (d / "x.npy").string();
  const Result r = run(args + " --format json");
  CHECK(r.code == 1);
  const json j = json::parse(r.out);
  CHECK(j["culprit"] == "Scale");
  bool named = false;
  for (const json& st : j["steps"]) {
    REQUIRE(st.contains("band"));
    const bool scaled = std::find(st["enabled"].begin(), st["enabled"].end(), "Scale") != st["enabled"].end();
    CHECK(st["bad"] == scaled);
    CHECK(st["verdict"] == (scaled ? "SUSPICIOUS" : "EXPECTED"));
    CHECK(st["worst_ratio"].get<double>() < 0.5);  // within the bound: it alone sees nothing
    if (scaled) {
      CHECK(st["band"]["worst"]["layer"] == "b");
      CHECK(st["band"]["worst"]["channel"] == 3);
      named = true;
    }
  }
  CHECK(named);
  // Why only SUSPICIOUS: the band's note, not the probabilistic bound's.
  CHECK(j["verdict"] == "SUSPICIOUS");
  CHECK_THAT(j["probabilistic_only"].get<std::string>(), Catch::Contains("beyond only the calibrated band"));
  CHECK(schema_errors(j).empty());
  const Result text = run(args);
  CHECK_THAT(text.out, Catch::Contains("beyond the band of honest float32 runs") && Catch::Contains("channel 3") &&
                           Catch::Contains("culprit: Scale"));
}
