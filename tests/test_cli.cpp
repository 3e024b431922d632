// The foldcheck executable: acceptance commands, exit codes (0 EXPECTED, 1 UNEXPECTED,
// 2 bad usage or input), one-line error messages, and no partial output file.
#include <catch2/catch.hpp>

#include "shipped_cases.hpp"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>

#include "cli_run.hpp"
#include "foldcheck/reports/text.hpp"
#include "foldcheck/io/npy.hpp"
#include "tvm_thread_expectations.hpp"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace foldcheck_cli_test;

TEST_CASE("acceptance: TVM thread numbers are EXPECTED with tvm bit-exact", "[cli][acceptance]") {
  const Result r = run("explain --original 2.1122932,5.5735774,2.0870073 --observed 2.1122828,5.5735493,2.0869968 --format json");
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  CHECK(j["verdict"] == "EXPECTED");
  check_tvm_thread_elements(j, 1.0);
}

TEST_CASE("acceptance: the same weights folded with eps 1e-3 are UNEXPECTED - exit 1", "[cli][acceptance]") {
  // float32(w * float32(1/sqrt(float32(1 + float32(1e-3))))), TVM's chain with eps = 1e-3
  const Result r = run("explain --original 2.1122932,5.5735774,2.0870073 --observed "
                       "2.1112380027770996,5.5707926750183105,2.0859646797180176 --format json");
  CHECK(r.code == 1);
  CHECK(json::parse(r.out)["verdict"] == "UNEXPECTED");
}

TEST_CASE("explain text: the exact fold column is the JSON's exact value at every magnitude", "[cli][explain]") {
  // The column once cut a 21-digit %e string to 22 characters, dropping the exponent:
  // 123455.38 printed as 1.2345538..., -0.00144 as -1.44... Every magnitude, both signs.
  const std::string original = "1e-07,-0.00144,2.1122932,-123455.38,3.5e+20,-6e-30";
  const std::string args = "explain --original=" + original + " --observed=" + original;
  const Result js = run(args + " --format json");
  const Result text = run(args);
  REQUIRE(js.code != 2);
  REQUIRE(text.code == js.code);
  const json elements = json::parse(js.out)["elements"];
  REQUIRE(elements.size() == 6);
  std::istringstream lines(text.out);
  std::string line;
  std::getline(lines, line);  // title
  std::getline(lines, line);  // blank
  std::getline(lines, line);  // header
  for (const auto& e : elements) {
    REQUIRE(std::getline(lines, line));
    std::istringstream cols(line);
    std::string index, ch, orig, obs, drift, exact;
    cols >> index >> ch >> orig >> obs >> drift >> exact;
    INFO(line);
    const double x = e["exact_folded"].get<double>();
    CHECK(std::fabs(std::strtod(exact.c_str(), nullptr) - x) <= 1e-16 * std::fabs(x));
  }
}

TEST_CASE("explain reads .npy weights and an .npz BatchNorm", "[cli]") {
  using namespace foldcheck;
  const auto w = tmp("w.npy"), o = tmp("o.npy"), bn = tmp("bn.npz");
  write_npy(w.string(), Tensor{{2, 1, 1, 2}, {0.5, -1.0, 2.0, 0.25}, DType::Float32});
  write_npz(bn.string(), {{"gamma", Tensor{{2}, {2.0, 0.5}, DType::Float32}}, {"var", Tensor{{2}, {3.0, 0.0625}, DType::Float32}},
                          {"eps", Tensor{{}, {1.0}, DType::Float64}}});
  // exact: channel 0 scale 2/sqrt(4) = 1, channel 1 scale 0.5/sqrt(1.0625)
  const float s1 = 0.5f / std::sqrt(0.0625f + 1.0f);
  write_npy(o.string(), Tensor{{2, 1, 1, 2}, {0.5, -1.0, 2.0f * s1, 0.25f * s1}, DType::Float32});
  Result r = run("explain --original " + w.string() + " --observed " + o.string() + " --bn " + bn.string() + " --format json");
  CHECK(r.code == 0);
  CHECK(json::parse(r.out)["bn"]["channels"] == 2);
  // wrong channel count
  write_npz(bn.string(), {{"gamma", Tensor{{3}, {2.0, 0.5, 1.0}, DType::Float32}}});
  r = run("explain --original " + w.string() + " --observed " + o.string() + " --bn " + bn.string());
  CHECK(r.code == 2);
  CHECK(r.err.find("the BatchNorm has 3") != std::string::npos);
}

// One run per shipped case (the heaviest test, above all under the sanitizers): its JSON is
// checked, and the text report is rendered from that JSON by the function the CLI's text
// output uses (reports::run_text).
TEST_CASE("every shipped case runs: valid JSON - per-path ULP histograms - attribution table - exit 0", "[cli][cases]") {
  for (const fs::path& case_path : shipped_case_files()) {
    INFO(case_path);
    const Result r = run("run " + case_path.string() + " --format json -q");
    REQUIRE(r.code == 0);
    const json j = json::parse(r.out);
    CHECK(j["verdict"] == "EXPECTED");
    int paths = 0;
    for (const auto& d : j["dtypes"])
      for (const auto& o : d["orders"])
        for (const auto& p : o["paths"]) {
          CHECK(p["histograms"]["ulp"]["unit"] == "ulp");
          CHECK(p["bound"]["worst_ratio"].get<double>() <= 1.0);
          // Attribution: the per-stage sums plus the residual equal the total error.
          const auto& sums = p["attribution"]["sums_ulp"];
          double total = 0, parts = 0;
          for (const auto& [k, v] : sums.items()) (k == "total" ? total : parts) += v.get<double>();
          CHECK(std::fabs(parts - total) <= 1e-9 * std::max(1.0, std::fabs(total)) + 1e-6);
          CHECK(p["attribution"]["checks"]["replay_mismatches"] == 0);
          ++paths;
        }
    CHECK(paths >= 2);
    const std::string text = foldcheck::reports::run_text(j);
    CHECK(text.find("attribution over") != std::string::npos);
    CHECK(text.find("accumulation") != std::string::npos);
    CHECK(text.find("residual") != std::string::npos);
    CHECK(text.find("fold order") != std::string::npos);
  }
}

// Issue 41: run evaluates the conv in the arithmetic asked for (operands converted first) and
// each path holds under the bound that charges the conversions; split-K is a blocked sum of
// ceil(k / S); what the evaluator does not run is refused in one line.
TEST_CASE("run --arithmetic and --algorithm: converted operands within their bound, split-K as blocks",
          "[cli][arithmetic]") {
  const std::string c = src("cases/tvm_thread.json");
  for (const std::string a : {"tf32 --conversion truncate", "bf16", "fp16"}) {
    INFO(a);
    const Result r =
        run("run " + c + " --arithmetic " + a + " --algorithm split-k:4 --no-attribution --format json -q");
    REQUIRE(r.code == 0);
    const json j = json::parse(r.out);
    for (const auto& d : j["dtypes"])
      for (const auto& o : d["orders"]) {
        CHECK(o["arithmetic"].get<std::string>().find(
                  a.substr(0, 4) == "tf32" ? "tf32-truncate" : a + "-nearest-even") != std::string::npos);
        CHECK(o["accumulation"] == "blocked:7");  // k = 27 terms in 4 partial sums
        for (const auto& p : o["paths"]) {
          CHECK(p["bound"]["worst_ratio"].get<double>() <= 1.0);
          CHECK(p["bound"]["formula"].get<std::string>().find("operands converted") != std::string::npos);
        }
      }
  }
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"--algorithm winograd4", "judged by diagnose's --algorithm"},
           {"--conversion truncate", "--conversion needs --arithmetic"},
           {"--arithmetic bf16x3", "bf16x3"},
           {"--arithmetic fp16 --conversion truncate", "fp16 operands are converted nearest-even only, not truncate"},
           {"--arithmetic float32 --conversion truncate", "--conversion needs --arithmetic"},
           {"--arithmetic tf32 --conversion nearest",
            "unknown conversion 'nearest' (expected nearest-even, nearest-away or truncate)"}}) {
    INFO(args);
    const Result r = run("run " + c + " " + args + " -q");
    CHECK(r.code == 2);
    CHECK(r.err.find(message) != std::string::npos);
  }
}

TEST_CASE("acceptance: diagnose names training-mode BatchNorm and passes a correct eval-mode output", "[cli][acceptance]") {
  const fs::path d = tmp("seed");
  REQUIRE(std::system((std::string(MAKE_BN_SEED_BIN) + " " + d.string() + " >/dev/null").c_str()) == 0);
  const std::string x = (d / "x.npy").string();
  for (const char* bn : {"bn.npz", "bn_fresh.npz"}) {
    const std::string y = std::string(bn) == "bn.npz" ? "y_train.npy" : "y_train_fresh.npy";
    const Result r = run("diagnose --input " + x + " --bn " + (d / bn).string() + " --observed " + (d / y).string() +
                         " --format json");
    CHECK(r.code == 1);
    const json j = json::parse(r.out);
    CHECK(j["verdict"] == "UNEXPECTED");
    CHECK(j["best"] == "training_mode_batch_statistics");
    CHECK(j["hypotheses"][0]["name"] == j["best"]);
  }
  const Result ok = run("diagnose --input " + x + " --bn " + (d / "bn.npz").string() + " --observed " +
                        (d / "y_eval.npy").string() + " --format json");
  CHECK(ok.code == 0);
  const json j = json::parse(ok.out);
  CHECK(j["verdict"] == "EXPECTED");
  CHECK(j["best"].is_null());
  const Result eps = run("diagnose --input " + x + " --bn " + (d / "bn.npz").string() + " --observed " +
                         (d / "y_eps1e-3.npy").string());
  CHECK(eps.code == 1);
  CHECK(eps.out.find("eps recovered: 0.001") != std::string::npos);
  CHECK(eps.out.find("fix:") != std::string::npos);
  // The fix is printed once (its own line), not repeated in the verdict line.
  const Result train = run("diagnose --input " + x + " --bn " + (d / "bn.npz").string() + " --observed " +
                           (d / "y_train.npy").string());
  CHECK(train.code == 1);
  const std::string fix = "call model.eval() before comparing";
  const auto first_fix = train.out.find(fix);
  REQUIRE(first_fix != std::string::npos);
  CHECK(train.out.find(fix, first_fix + 1) == std::string::npos);
  CHECK(train.out.find("\nfix: ") != std::string::npos);
  // Bad input: a shape mismatch is exit 2 with one line.
  const Result bad = run("diagnose --input " + x + " --bn " + (d / "bn.npz").string() + " --observed " +
                         (d / "bn.npz").string());
  CHECK(bad.code == 2);
  fs::remove_all(d);
}

TEST_CASE("run text output shows the TVM drift verdict and a histogram", "[cli]") {
  const Result r = run("run " + src("cases/tvm_thread.json"));
  CHECK(r.code == 0);
  CHECK(r.out.find("observed weights") != std::string::npos);
  CHECK(r.out.find("BIT-EXACT") != std::string::npos);
  CHECK(r.out.find("histogram:") != std::string::npos);
  CHECK(r.out.find("verdict: EXPECTED") != std::string::npos);
  // The observed weights are weight1[0,0,0,:]: each element labelled by its own OIHW index,
  // all in output channel 0 (not "channel 0, 1, 2").
  const std::string ow = r.out.substr(r.out.find("observed weights"));
  for (const char* label : {"[0,0,0,0]    0", "[0,0,0,1]    0", "[0,0,0,2]    0"}) {
    INFO(label);
    CHECK(ow.find(label) != std::string::npos);
  }
  const Result j = run("run " + src("cases/tvm_thread.json") + " --format json --no-attribution -q");
  const json e = json::parse(j.out)["observed_weights"]["elements"];
  REQUIRE(e.size() == 3);
  for (int i = 0; i < 3; ++i) {
    CHECK(e[i]["channel"] == 0);
    CHECK(e[i]["weight_index"] == json({0, 0, 0, i}));
  }
}

// Bad files and values are the catalogue's (BAD_INPUTS.md, test_bad_inputs.cpp); these are
// the usage errors: flags and their values.
TEST_CASE("usage errors: exit 2 - one line naming the flag and the problem - no output file", "[cli][errors]") {
  const auto out = tmp("never.json");
  const std::string o = " -o " + out.string();
  const std::string ok = " --observed 1,2";
  const std::vector<std::pair<std::string, std::string>> cases{
      {"explain --original 1,2x" + ok, "'2x' is not a number"},
      {"explain --original 1,2" + ok + " --dtype float8", "unknown dtype"},
      {"explain --original 1,2" + ok + " --eps nan", "eps is nan"},
      {"explain --original 1,2", "--observed is required (see 'foldcheck explain --help')"},
      {"run " + src("cases/tvm_thread.json") + " --seed -3", "--seed"},
      {"run " + src("cases/tvm_thread.json") + " --max-elements 0", "--max-elements"},
      {"frobnicate", "unknown command 'frobnicate' (commands: explain, run, diagnose, accuracy-diff, engines, suite, merge, "
                     "compare, bisect, quant-check; see 'foldcheck --help')"},
      {"--max-elements 100 frobnicate", "unknown command 'frobnicate'"},
      {"run " + src("cases/tvm_thread.json") + " --bogus", "--bogus"},
      {"run " + src("cases/tvm_thread.json") + " --bogus", "(see 'foldcheck run --help')"},
      // A mistyped command is named with the one meant.
      {"acuracy-diff m.onnx", "unknown command 'acuracy-diff'; did you mean 'accuracy-diff'?"},
      {"expain --original 1", "did you mean 'explain'?"},
      {"qant-check", "did you mean 'quant-check'?"},
      {"bisekt", "did you mean 'bisect'?"},
  };
  for (const auto& [args, msg] : cases) {
    INFO(args);
    const Result r = run(args + o);
    CHECK(r.code == 2);
    CHECK(r.err.find("foldcheck: error:") == 0);
    CHECK(r.err.find(msg) != std::string::npos);
    // One line.
    CHECK(r.err.find('\n') == r.err.size() - 1);
    CHECK_FALSE(fs::exists(out));
  }
  // No command at all: one line naming the commands.
  const Result none = run("");
  CHECK(none.code == 2);
  CHECK(none.err.find("foldcheck: error: a command is required (commands: explain, ") == 0);
  CHECK(none.err.find('\n') == none.err.size() - 1);
}

TEST_CASE("help and version: --help, each subcommand's help and --version exit 0", "[cli]") {
  CHECK(run("--help").code == 0);
  CHECK(run("explain --help").out.find("--observed") != std::string::npos);
  CHECK(run("run --help").code == 0);
  for (const char* c : {"diagnose", "accuracy-diff", "suite", "merge", "compare", "bisect", "quant-check"}) {
    const Result h = run(std::string(c) + " --help");
    CHECK(h.code == 0);
    CHECK(h.out.find("Usage") != std::string::npos);
  }
  CHECK_THAT(run("compare --help").out, Catch::Contains("--baseline") && Catch::Contains("--tolerance"));
  CHECK_THAT(run("suite --help").out, Catch::Contains("--shard"));
  CHECK(run("--version").out.find("foldcheck 0.") == 0);
}

TEST_CASE("output file (-o): written complete, and the exit code still reports the verdict", "[cli]") {
  const auto out = tmp("explain.json");
  const Result r = run("explain --original 1,2 --observed 1,2.5 --format json -o " + out.string());
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  std::ifstream in(out);
  CHECK(json::parse(in)["verdict"] == "UNEXPECTED");
}

namespace {
void fc_write_npy_of_shape(const std::string& path) {
  foldcheck::Tensor t;
  t.shape = {1, 5};
  t.data.assign(5, 1.0);
  foldcheck::write_npy(path, t);
}
}  // namespace

TEST_CASE("accuracy-diff: exit codes, JSON keys, the named layer and channel", "[cli][accuracy-diff]") {
  const fs::path d = tmp("onnx");
  REQUIRE(std::system((std::string(MAKE_ONNX_FIXTURE_BIN) + " " + d.string() + " >/dev/null").c_str()) == 0);
  const std::string model = (d / "model.onnx").string();
  const Result ok = run("accuracy-diff " + model + " --observed " + (d / "folded.onnx").string() + " --format json");
  CHECK(ok.code == 0);
  const json j = json::parse(ok.out);
  CHECK(j["verdict"] == "EXPECTED");
  REQUIRE(j["layers"].size() == 3);
  for (const auto& l : j["layers"]) {
    CHECK(l.contains("name"));
    CHECK(l["verdict"] == "EXPECTED");
    CHECK(l.contains("worst_channel"));
  }
  const Result bad = run("accuracy-diff " + model + " --observed " + (d / "corrupt.onnx").string() + " --format json");
  CHECK(bad.code == 1);
  const json b = json::parse(bad.out);
  CHECK(b["verdict"] == "UNEXPECTED");
  CHECK(b["layers"][1]["name"] == "conv_b");
  CHECK(b["layers"][1]["worst_channel"] == 3);
  const Result text = run("accuracy-diff " + model + " --observed " + (d / "corrupt.onnx").string());
  CHECK(text.code == 1);
  CHECK_THAT(text.out, Catch::Contains("conv_b") && Catch::Contains("UNEXPECTED") && Catch::Contains(" 3 (") && Catch::Contains("verdict: UNEXPECTED"));
  const Result own = run("accuracy-diff " + model);
  CHECK(own.code == 0);
  CHECK_THAT(own.out, Catch::Contains("bn_c: input comes from relu_b (Relu)"));
  // An input of the wrong shape is a usage error, not a model limitation.
  fc_write_npy_of_shape((d / "wrong.npy").string());
  const Result wrong = run("accuracy-diff " + model + " --input " + (d / "wrong.npy").string());
  CHECK(wrong.code == 2);
  CHECK_THAT(wrong.err, Catch::Contains("the model's input X is [1, 4, 6, 6]"));
  // Another engine's outputs of the folded model on x.npy, end to end.
  const std::string io = " --input " + (d / "x.npy").string() + " --output-samples 8 --observed-output ";
  const Result out_ok = run("accuracy-diff " + model + io + (d / "y_folded.npy").string() + " --format json");
  CHECK(out_ok.code == 0);
  const json oo = json::parse(out_ok.out)["end_to_end"]["observed_output"];
  CHECK(oo["verdict"] == "EXPECTED");
  CHECK(oo["samples"] == 8);
  CHECK(oo["bound"].get<std::string>().find("probabilistic") != std::string::npos);
  const Result out_bad = run("accuracy-diff " + model + io + (d / "y_corrupt.npy").string());
  CHECK(out_bad.code == 1);
  CHECK_THAT(out_bad.out, Catch::Contains("observed output") && Catch::Contains("-> UNEXPECTED"));
  const Result out_no_input = run("accuracy-diff " + model + " --observed-output " + (d / "y_folded.npy").string());
  CHECK(out_no_input.code == 2);
  CHECK_THAT(out_no_input.err, Catch::Contains("--observed-output needs --input"));
  const Result missing = run("accuracy-diff " + (d / "nope.onnx").string());
  CHECK(missing.code == 2);
  CHECK_THAT(missing.err, Catch::Contains("cannot read ONNX model (No such file or directory)"));
}
