// `foldcheck quant-check` through the executable: integers of the exact fold and of a
// float32 PyTorch fold pass; three integers moved by +3 fail, naming exactly those.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <random>

#include "cli_run.hpp"
#include "foldcheck/io/npy.hpp"
#include "schema_check.hpp"

using json = nlohmann::json;
using namespace foldcheck_cli_test;

TEST_CASE("quant-check: exact and PyTorch-fold integers pass, three integers off by +3 are named", "[cli][quant]") {
  // A 1x1 conv 64 -> 256 channels (16384 weights) with trained-looking BatchNorm statistics.
  std::mt19937_64 rng(5);
  std::normal_distribution<double> nd(0, 0.2);
  std::uniform_real_distribution<double> ud(0.5, 1.5), vd(0.05, 2.0);
  foldcheck::Tensor w{{256, 64, 1, 1}, std::vector<double>(256 * 64), foldcheck::DType::Float32};
  for (double& v : w.data) v = static_cast<float>(nd(rng));
  std::map<std::string, foldcheck::Tensor> bn;
  for (const char* k : {"gamma", "beta", "mean", "var"}) {
    foldcheck::Tensor t{{256}, std::vector<double>(256), foldcheck::DType::Float32};
    for (double& v : t.data) v = static_cast<float>(std::string(k) == "gamma" ? ud(rng) : std::string(k) == "var" ? vd(rng) : 0.1 * nd(rng));
    bn[k] = t;
  }
  bn["eps"] = foldcheck::Tensor{{1}, {static_cast<float>(1e-5)}, foldcheck::DType::Float32};
  const fs::path d = tmp("quant");
  fs::create_directories(d);
  foldcheck::write_npy((d / "w.npy").string(), w);
  foldcheck::write_npz((d / "bn.npz").string(), bn);
  const std::string base = "quant-check --weights " + (d / "w.npy").string() + " --bn " + (d / "bn.npz").string();
  REQUIRE(run(base + " --write-int " + (d / "q_exact.npy").string() + " --write-scales " + (d / "s.npy").string()).code == 0);
  REQUIRE(run(base + " --write-int " + (d / "q_pt.npy").string() + " --fold pytorch").code == 0);
  const std::string check = base + " --scales " + (d / "s.npy").string() + " --int-weights ";
  const Result exact = run(check + (d / "q_exact.npy").string() + " --format json");
  CHECK(exact.code == 0);
  const json e = json::parse(exact.out);
  CHECK(schema_errors(e).empty());
  CHECK(e["verdict"] == "EXPECTED");
  CHECK(e["mismatches"].empty());
  const Result pt = run(check + (d / "q_pt.npy").string() + " --format json");
  CHECK(pt.code == 0);
  const json ptj = json::parse(pt.out);
  for (const json& m : ptj["mismatches"]) CHECK(m["verdict"] == "EXPECTED");  // near-tie flips only
  foldcheck::IntArray q = foldcheck::read_npy_ints((d / "q_pt.npy").string());
  for (const std::size_t i : {7u, 4321u, 16000u}) q.values[i] = q.values[i] <= 124 ? q.values[i] + 3 : q.values[i] - 3;
  foldcheck::write_npy_ints((d / "q_bad.npy").string(), q.shape, q.values, 1);
  const Result bad = run(check + (d / "q_bad.npy").string() + " --format json");
  CHECK(bad.code == 1);
  const json b = json::parse(bad.out);
  CHECK(b["verdict"] == "UNEXPECTED");
  std::vector<std::size_t> unexpected;
  for (const json& m : b["mismatches"])
    if (m["verdict"] == "UNEXPECTED") unexpected.push_back(m["flat_index"].get<std::size_t>());
  CHECK(unexpected == std::vector<std::size_t>{7, 4321, 16000});
  const Result text = run(check + (d / "q_bad.npy").string());
  CHECK_THAT(text.out, Catch::Contains("3 unexpected") && Catch::Contains("verdict: UNEXPECTED"));
  // Usage errors: a shape mismatch, a wrong number of scales.
  CHECK(run(base + " --int-weights " + (d / "s.npy").string()).code == 2);
  CHECK(run(base + " --per-channel --scales 0.5 --int-weights " + (d / "q_exact.npy").string()).code == 2);
}
