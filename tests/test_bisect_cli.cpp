// `foldcheck bisect` through the executable: the TVM case's per-pass table, and an external
// compiler (tests/fake_compiler.sh) whose FastMath pass changes the outputs' value.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "cli_run.hpp"
#include "schema_check.hpp"

using json = nlohmann::json;
using namespace foldcheck_cli_test;

TEST_CASE("bisect: the TVM case's per-pass table names FoldScaleAxis as the weights' change, EXPECTED", "[cli][bisect]") {
  const Result r = run("bisect " + src("cases/tvm_thread.json") + " --passes SimplifyInference,FoldConstant,FoldScaleAxis,FuseOps --linear");
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("FoldScaleAxis changed 216 weights by up to -5.06") && Catch::Contains("as a fold: EXPECTED") &&
                        Catch::Contains("culprit: none"));
  const Result j = run("bisect " + src("cases/tvm_thread.json") + " --passes SimplifyInference,FoldConstant,FoldScaleAxis,FuseOps --linear --format json");
  const json b = json::parse(j.out);
  CHECK(schema_errors(b).empty());
  CHECK(b["steps"].size() == 5);
  CHECK(b["weights"][0]["pass"] == "FoldScaleAxis");
  // Usage errors.
  CHECK(run("bisect " + src("cases/tvm_thread.json") + " --passes FoldBatchNorm").code == 2);
  CHECK(run("bisect " + src("cases/tvm_thread.json") + " --passes FoldConstant --opt-level 2").code == 2);
}

TEST_CASE("bisect --cmd: an external compiler's value-changing pass is named, failures are reported", "[cli][bisect]") {
  const std::string fake = src("tests/fake_compiler.sh");
  const std::string env = std::string("FAKE_COMPILER_IMPL=") + FAKE_COMPILER_BIN + " ";
  const fs::path ref = tmp("fake_reference.npy");
  REQUIRE(std::system((env + fake + " --enabled '' --write-reference " + ref.string()).c_str()) == 0);
  setenv("FAKE_COMPILER_IMPL", FAKE_COMPILER_BIN, 1);
  const std::string cmd = " --cmd '" + fake + " --disabled {disabled} -o {out}' --reference " + ref.string();
  const Result r = run("bisect" + cmd + " --passes FoldConstant,Reorder,FuseOps,FastMath,Vectorize --format json");
  CHECK(r.code == 1);
  const json j = json::parse(r.out);
  CHECK(schema_errors(j).empty());
  CHECK(j["culprit"] == "FastMath");
  CHECK(j["steps"].size() <= 5);  // all-disabled, all-enabled, then ceil(log2 5) prefixes
  for (const json& s : j["steps"]) CHECK(s["command"].get<std::string>().find("--disabled '") != std::string::npos);
  // Rounding-only passes: no culprit, exit 0 (every output within twice the baseline's worst error).
  const Result ok = run("bisect" + cmd + " --passes FoldConstant,Reorder,FuseOps,Vectorize --linear");
  CHECK(ok.code == 0);
  CHECK_THAT(ok.out, Catch::Contains("culprit: none"));
  // A crashing pass, a timeout, no output file, a missing {out}: exit 2 with the reason.
  const Result crash = run("bisect --cmd '" + fake + " --enabled {enabled} -o {out}' --reference " + ref.string() + " --passes Reorder,BREAK");
  CHECK(crash.code == 2);
  CHECK_THAT(crash.err, Catch::Contains("the command failed (exit 3)") && Catch::Contains("internal error in pass BREAK"));
  const Result slow = run("bisect --cmd 'sleep 5; true {out}' --reference " + ref.string() + " --passes A --timeout 0.3");
  CHECK(slow.code == 2);
  CHECK_THAT(slow.err, Catch::Contains("timed out"));
  const Result none = run("bisect --cmd 'true {out}' --reference " + ref.string() + " --passes A");
  CHECK(none.code == 2);
  CHECK_THAT(none.err, Catch::Contains("wrote no {out} file"));
  CHECK(run("bisect --cmd 'true' --reference " + ref.string() + " --passes A").code == 2);
}

TEST_CASE("bisect: an ONNX model's pairs, each on its real input, the worst layer is named", "[cli][bisect]") {
  const std::string m = src("cases/models/fixture/model.onnx"), x = src("cases/models/fixture/x.npy");
  const Result r = run("bisect " + m + " --input " + x + " --passes SimplifyInference,FoldScaleAxis,FastMath,FuseOps,AlterOpLayout --format json");
  CHECK(r.code == 1);
  const json j = json::parse(r.out);
  CHECK(schema_errors(j).empty());
  CHECK(j["culprit"] == "FastMath");
  CHECK(j["model"]["pairs"] == 3);
  CHECK(j["steps"][0]["worst_layer"].is_string());
  CHECK(j["weights"][0]["pass"] == "FoldScaleAxis");
  CHECK(j["weights"][0]["fold_verdict"] == "EXPECTED");
  CHECK(j["weights"][0]["layers_changed"] == 3);
  const Result ok = run("bisect " + m + " --opt-level 3 -q");
  CHECK(ok.code == 0);
  CHECK_THAT(ok.out, Catch::Contains("culprit: none"));
}
