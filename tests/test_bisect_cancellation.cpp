// `foldcheck bisect --cmd` on a conv + BatchNorm layer whose outputs cancel
// (tests/fake_conv_compiler.cpp): a pass that only re-rounds is never named, FastMath (a
// 12-bit rsqrt estimate) always is — with a reference alone (channel units), with the
// layer given (its certified bounds), and with the layer as an ONNX model; in search,
// --linear and --leave-one-out modes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_run.hpp"
#include "foldcheck/io/npy.hpp"
#include "schema_check.hpp"

using json = nlohmann::json;
using namespace foldcheck_cli_test;

namespace {

const std::vector<std::string> kHonest{"SimplifyInference", "FoldConstant", "FoldScaleAxis", "FuseOps", "Reorder", "Vectorize"};

struct FakeLayer {
  std::uint64_t seed;
  int channels, size;
  fs::path dir;
  std::string compiler(const std::string& switch_) const {
    return fmt::format("{} --seed {} --channels {} --size {} {} -o {{out}}", FAKE_CONV_COMPILER_BIN, seed, channels, size, switch_);
  }
};

FakeLayer write_layer(std::uint64_t seed, int channels, int size) {
  FakeLayer l{seed, channels, size, tmp(fmt::format("conv_layer_{}_{}_{}", seed, channels, size))};
  fs::remove_all(l.dir);
  REQUIRE(std::system(fmt::format("{} --seed {} --channels {} --size {} --write-layer {}", FAKE_CONV_COMPILER_BIN, seed, channels,
                                  size, l.dir.string())
                          .c_str()) == 0);
  return l;
}

// The three ways to tell bisect what the command computes.
std::vector<std::pair<std::string, std::string>> forms(const FakeLayer& l) {
  const std::string d = l.dir.string();
  return {{"reference", " --reference " + d + "/reference.npy"},
          {"layer", " --input " + d + "/x.npy --weights " + d + "/w.npy --bn " + d + "/bn.npz"},
          {"model", " --model " + d + "/model.onnx --input " + d + "/x.npy"}};
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& p : v) s += (s.empty() ? "" : ",") + p;
  return s;
}

}  // namespace

TEST_CASE("bisect --cmd: on a layer with cancelled outputs only FastMath is named, in every mode and form",
          "[cli][bisect][cancellation]") {
  // Layers whose honest folds move a nearly cancelled output by more than twice the
  // baseline's max |ULP| (the old default criterion accused FoldScaleAxis on each), and a
  // small one.
  for (const auto& [seed, channels, size] : {std::tuple{4, 16, 20}, std::tuple{28, 16, 20}, std::tuple{5, 8, 6}}) {
    const FakeLayer l = write_layer(seed, channels, size);
    if (size == 20) {
      // The class this is about: in the order, the old default criterion (max |ULP|
      // above 2 m0 + 1) accused FoldScaleAxis on these layers, an honest fold.
      const Result lin = run("bisect --cmd '" + l.compiler("--enabled {enabled}") + "' --passes " + joined(kHonest) + " --linear" +
                             forms(l)[0].second + " --format json");
      const json j = json::parse(lin.out);
      const double m0 = j["steps"][0]["max_abs_ulp"].get<double>();
      CHECK(j["steps"][3]["enabled"].back() == "FoldScaleAxis");
      CHECK(j["steps"][3]["max_abs_ulp"].get<double>() > 2 * m0 + 1);
      CHECK(lin.code == 0);
    }
    std::mt19937 rng(static_cast<unsigned>(seed));
    std::vector<std::string> passes = kHonest;
    std::shuffle(passes.begin(), passes.end(), rng);
    std::vector<std::string> with_fast = passes;
    with_fast.insert(with_fast.begin() + static_cast<std::ptrdiff_t>(rng() % (passes.size() + 1)), "FastMath");
    for (const auto& [form, args] : forms(l)) {
      for (const std::string mode : {"", " --linear", " --leave-one-out"}) {
        INFO("seed " << seed << ", " << form << mode << ", passes " << joined(with_fast));
        const Result r = run("bisect --cmd '" + l.compiler("--enabled {enabled}") + "' --passes " + joined(with_fast) + args + mode +
                             " --format json");
        REQUIRE(r.code == 1);
        const json j = json::parse(r.out);
        CHECK(schema_errors(j).empty());
        CHECK(j["culprit"] == "FastMath");
        CHECK(j["judged_by"] == (form == "reference" ? "channel units" : "bounds"));
        for (const json& s : j["steps"]) {
          const auto& on = s["enabled"];
          const bool fast = std::find(on.begin(), on.end(), "FastMath") != on.end();
          CHECK(s["bad"].get<bool>() == fast);
        }
        // Honest passes only: nothing named, exit 0.
        const Result ok =
            run("bisect --cmd '" + l.compiler("--enabled {enabled}") + "' --passes " + joined(passes) + args + mode + " --format json");
        CHECK(ok.code == 0);
        const json jo = json::parse(ok.out);
        CHECK(jo["culprit"].is_null());
        CHECK(jo["verdict"] == "EXPECTED");
      }
    }
  }
}

TEST_CASE("bisect --cmd: each run shows its largest-|ULP| element beside its channel's scale and, known, sum |x w|",
          "[cli][bisect][cancellation]") {
  const FakeLayer l = write_layer(28, 16, 20);
  for (const auto& [form, args] : forms(l)) {
    INFO(form);
    const Result r = run("bisect --cmd '" + l.compiler("--disabled {disabled}") + "' --passes SimplifyInference,FoldScaleAxis,FastMath" +
                         args + " --format json");
    const json j = json::parse(r.out);
    for (const json& s : j["steps"]) {
      const json& e = s["largest_ulp"];
      CHECK(e["index"].size() == 4);
      CHECK(e["channel_scale"].get<double>() >= std::fabs(e["exact"].get<double>()));
      // A nearly cancelled output: far below its channel's scale, small in channel units.
      if (!s["bad"].get<bool>()) CHECK(e["channel_units"].get<double>() < 10);
      CHECK(e.contains("abs_sum") == (form != "reference"));
      CHECK(e.contains("ratio") == (form != "reference"));
    }
    const Result text = run("bisect --cmd '" + l.compiler("--disabled {disabled}") + "' --passes SimplifyInference,FoldScaleAxis,FastMath" + args);
    CHECK_THAT(text.out, Catch::Contains("largest |ULP| of each run") && Catch::Contains(" scale ") &&
                             Catch::Contains(form == "reference" ? "largest in channel units" : "sum|x*w|"));
  }
}

TEST_CASE("bisect --cmd: the layer and model forms refuse what they cannot judge", "[cli][bisect][cancellation]") {
  const FakeLayer l = write_layer(3, 4, 5);
  const std::string d = l.dir.string(), cmd = " --cmd '" + l.compiler("--enabled {enabled}") + "' --passes FoldConstant";
  auto err = [&](const std::string& args) {
    const Result r = run("bisect" + cmd + args);
    CHECK(r.code == 2);
    return r.err;
  };
  CHECK_THAT(err(""), Catch::Contains("needs exactly one of --reference R.npy, --model M.onnx"));
  CHECK_THAT(err(" --reference " + d + "/reference.npy --weights " + d + "/w.npy"), Catch::Contains("needs exactly one of"));
  CHECK_THAT(err(" --reference " + d + "/reference.npy --bn " + d + "/bn.npz"), Catch::Contains("--bn describes the layer"));
  CHECK_THAT(err(" --reference " + d + "/reference.npy --input " + d + "/x.npy"), Catch::Contains("--reference needs none"));
  CHECK_THAT(err(" --weights " + d + "/w.npy"), Catch::Contains("the layer needs --input X.npy and --weights W.npy"));
  CHECK_THAT(err(" --weights " + d + "/w.npy --input " + d + "/x.npy --bn " + d + "/bn.npz --algorithm winograd9"),
             Catch::Contains("unknown algorithm 'winograd9'"));
  CHECK_THAT(err(" --reference " + d + "/reference.npy --arithmetic tf32"),
             Catch::Contains("--reference outputs are judged"));
  CHECK_THAT(err(" --weights " + d + "/w.npy --input " + d + "/x.npy --stride 2 --algorithm fft"),
             Catch::Contains("stride 1"));
  CHECK_THAT(err(" --model " + d + "/model.onnx"), Catch::Contains("--model needs --input"));
  // A padding that gives another output shape: the count differs, and the message says where to look.
  CHECK_THAT(err(" --input " + d + "/x.npy --weights " + d + "/w.npy --bn " + d + "/bn.npz --padding 0"),
             Catch::Contains("the layer has 36 (shape [1, 4, 3, 3]) (the conv's geometry: --padding, --stride, --dilation)"));
  // The weights as input: channels that do not fit.
  CHECK_THAT(err(" --input " + d + "/w.npy --weights " + d + "/w.npy --bn " + d + "/bn.npz --padding 1"), Catch::Contains("shape"));
  // The layer flags are for --cmd only.
  CHECK(run("bisect " + src("cases/tvm_thread.json") + " --passes FoldConstant --weights " + d + "/w.npy").code == 2);
  // A reference with a NaN: no error can be measured at that element.
  const fs::path nan_ref = tmp("nan_reference.npy");
  foldcheck::write_npy(nan_ref.string(), foldcheck::Tensor{{2}, {1.0, std::nan("")}, foldcheck::DType::Float64});
  CHECK_THAT(err(" --reference " + nan_ref.string()), Catch::Contains("the reference holds nan at index [1]"));
  // A reference that rounds to 0 in float32 everywhere: nothing compared is never a pass.
  const fs::path tiny = tmp("tiny_reference.npy");
  foldcheck::write_npy(tiny.string(), foldcheck::Tensor{{3}, {1e-50, -1e-60, 1e-48}, foldcheck::DType::Float64});
  const Result t = run("bisect --cmd 'cp " + tiny.string() + " {out}' --passes A --reference " + tiny.string());
  CHECK(t.code == 1);
  CHECK_THAT(t.out, Catch::Contains("verdict: MISTRUSTED") && Catch::Contains("no output is informative"));
}

TEST_CASE("bisect --cmd: a float64 layer is judged in float64 in every form (the model's type from its weights)",
          "[cli][bisect][cancellation]") {
  const fs::path dir = tmp("conv_layer_f64");
  fs::remove_all(dir);
  const std::string fake = fmt::format("{} --seed 7 --channels 8 --size 8 --dtype float64", FAKE_CONV_COMPILER_BIN);
  REQUIRE(std::system((fake + " --write-layer " + dir.string()).c_str()) == 0);
  const std::string d = dir.string();
  for (const std::string& form : {" --model " + d + "/model.onnx --input " + d + "/x.npy",
                                 " --input " + d + "/x.npy --weights " + d + "/w.npy --bn " + d + "/bn.npz",
                                 " --reference " + d + "/reference.npy --dtype float64"}) {
    INFO(form);
    const std::string cmd = " --cmd '" + fake + " --enabled {enabled} -o {out}'";
    const Result bad = run("bisect" + cmd + " --passes SimplifyInference,FoldScaleAxis,FastMath,Reorder" + form + " --format json");
    CHECK(bad.code == 1);
    const json j = json::parse(bad.out);
    CHECK(j["culprit"] == "FastMath");
    CHECK(j["dtype"] == "float64");
    CHECK(run("bisect" + cmd + " --passes SimplifyInference,FoldScaleAxis,Reorder,FuseOps" + form).code == 0);
  }
}

TEST_CASE("bisect --cmd: an all-disabled output that is no approximation of the reference is already bad",
          "[cli][bisect][cancellation]") {
  const FakeLayer l = write_layer(4, 4, 6);
  const std::string ref = " --reference " + l.dir.string() + "/reference.npy --passes A";
  // Zeros, an infinity, and the output in another channel order (the same shape).
  const fs::path zeros = tmp("zeros_out.npy"), inf = tmp("inf_out.npy"), swapped = tmp("swapped_out.npy");
  foldcheck::Tensor r = foldcheck::read_npy(l.dir.string() + "/reference.npy");
  foldcheck::write_npy(zeros.string(), foldcheck::Tensor{r.shape, std::vector<double>(r.data.size(), 0.0), foldcheck::DType::Float32});
  foldcheck::Tensor t = r;
  t.dtype = foldcheck::DType::Float32;
  for (double& v : t.data) v = static_cast<float>(v);
  t.data[5] = HUGE_VAL;
  foldcheck::write_npy(inf.string(), t);
  t.data[5] = static_cast<float>(r.data[5]);
  std::rotate(t.data.begin(), t.data.begin() + 36, t.data.end());  // channel c holds channel c + 1
  foldcheck::write_npy(swapped.string(), t);
  for (const fs::path& out : {zeros, inf, swapped}) {
    INFO(out);
    const Result b = run("bisect --cmd 'cp " + out.string() + " {out}; : {enabled}'" + ref + " --format json");
    CHECK(b.code == 1);
    const json j = json::parse(b.out);
    CHECK(j["verdict"] == "UNEXPECTED");
    CHECK(j["culprit"].is_null());
    CHECK(j["steps"].size() == 1);
    CHECK_THAT(j["note"].get<std::string>(), Catch::Contains("already bad"));
  }
}

TEST_CASE("bisect --cmd: a run beyond only the probabilistic bound is SUSPICIOUS, not UNEXPECTED",
          "[cli][bisect][cancellation]") {
  // 512 channels of ones times one weight: every term equal, so the sequential sum's
  // roundings all go one way — within the deterministic bound, beyond the probabilistic
  // one, whose model (independent roundings) this data breaks. Pairwise summation is the
  // baseline, sequential the pass.
  const fs::path dir = tmp("equal_terms");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const int C = 512, H = 3;
  const float w = 0.81848085f;
  foldcheck::write_npy((dir / "x.npy").string(), foldcheck::Tensor{{1, C, H, H}, std::vector<double>(C * H * H, 1.0), foldcheck::DType::Float32});
  foldcheck::write_npy((dir / "w.npy").string(), foldcheck::Tensor{{1, C, 3, 3}, std::vector<double>(C * 9, w), foldcheck::DType::Float32});
  foldcheck::write_npz((dir / "bn.npz").string(), {{"gamma", foldcheck::Tensor{{1}, {1.0}, foldcheck::DType::Float32}}});
  const float s = 1.0f / std::sqrt(1.0f + 1e-5f);
  foldcheck::Tensor seq{{1, 1, H, H}, {}, foldcheck::DType::Float32}, pair = seq;
  for (int h = 0; h < H; ++h)
    for (int q = 0; q < H; ++q) {
      std::vector<float> terms;
      for (int c = 0; c < C; ++c)
        for (int kh = 0; kh < 3; ++kh)
          for (int kw = 0; kw < 3; ++kw)
            if (h + kh - 1 >= 0 && h + kh - 1 < H && q + kw - 1 >= 0 && q + kw - 1 < H) terms.push_back(1.0f * w);
      float acc = 0;
      for (const float t : terms) acc += t;
      seq.data.push_back(acc * s);
      for (std::size_t step = 1; step < terms.size(); step *= 2)
        for (std::size_t k = 0; k + step < terms.size(); k += 2 * step) terms[k] += terms[k + step];
      pair.data.push_back(terms[0] * s);
    }
  foldcheck::write_npy((dir / "seq.npy").string(), seq);
  foldcheck::write_npy((dir / "pair.npy").string(), pair);
  const std::string d = dir.string();
  const Result r = run("bisect --cmd 'if [ -z {enabled} ]; then cp " + d + "/pair.npy {out}; else cp " + d +
                       "/seq.npy {out}; fi' --passes Sequential --input " + d + "/x.npy --weights " + d + "/w.npy --bn " + d +
                       "/bn.npz --format json");
  CHECK(r.code == 1);
  const json j = json::parse(r.out);
  CHECK(j["culprit"] == "Sequential");
  CHECK(j["verdict"] == "SUSPICIOUS");
  CHECK(j["steps"][1]["worst_ratio"].get<double>() <= 1);
  CHECK(j["steps"][1]["probabilistic_worst_ratio"].get<double>() > 1);
  CHECK(j.contains("probabilistic_only"));
}

TEST_CASE("bisect --cmd: --threshold-ulp replaces the criterion, not the special values, and leave-one-out names no pass "
          "when several removals fix it", "[cli][bisect][cancellation]") {
  const FakeLayer l = write_layer(4, 4, 6);
  const std::string d = l.dir.string();
  foldcheck::Tensor r = foldcheck::read_npy(d + "/reference.npy");
  foldcheck::Tensor good = r, inf = r;
  good.dtype = inf.dtype = foldcheck::DType::Float32;
  for (double& v : good.data) v = static_cast<float>(v);
  inf.data = good.data;
  inf.data[7] = -HUGE_VAL;
  const fs::path gp = tmp("good_out.npy"), ip = tmp("inf_out.npy");
  foldcheck::write_npy(gp.string(), good);
  foldcheck::write_npy(ip.string(), inf);
  // Pass B writes an infinity: bad at any threshold, in both forms.
  const std::string cmd = " --cmd 'case {enabled} in *B*) cp " + ip.string() + " {out};; *) cp " + gp.string() + " {out};; esac'";
  for (const std::string& form : {" --reference " + d + "/reference.npy", " --input " + d + "/x.npy --weights " + d + "/w.npy --bn " + d + "/bn.npz"})
    for (const std::string threshold : {"", " --threshold-ulp 100", " --threshold-ulp 1e30"}) {
      INFO(form << threshold);
      const Result res = run("bisect" + cmd + " --passes A,B" + form + threshold + " --format json");
      CHECK(res.code == 1);
      const json j = json::parse(res.out);
      CHECK(j["culprit"] == "B");
      CHECK(j["verdict"] == "UNEXPECTED");
      for (const json& st : j["steps"])
        if (st["bad"].get<bool>()) CHECK(st["decisive"]["flat_index"] == 7);  // the infinity decides
    }
  // Bad only with both A and B enabled: removing either fixes it, so neither is named.
  const std::string both = " --cmd 'case {enabled} in A,B) cp " + ip.string() + " {out};; *) cp " + gp.string() + " {out};; esac'";
  const Result loo = run("bisect" + both + " --passes A,B --reference " + d + "/reference.npy --leave-one-out --format json");
  CHECK(loo.code == 1);
  const json jl = json::parse(loo.out);
  CHECK(jl["culprit"].is_null());
  CHECK(jl["verdict"] == "UNEXPECTED");
  CHECK(jl["candidates"] == json({"A", "B"}));
  CHECK_THAT(jl["note"].get<std::string>(), Catch::Contains("removing any one of A, B"));
  CHECK(json::parse(run("bisect" + both + " --passes A,B --reference " + d + "/reference.npy --format json").out)["culprit"] == "B");
}
