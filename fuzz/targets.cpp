// The fuzz targets' bodies (targets.hpp).
#include "targets.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/io/case_file.hpp"
#include "foldcheck/io/input_file.hpp"
#include "foldcheck/io/limits.hpp"
#include "foldcheck/io/npy.hpp"
#include "foldcheck/io/suite_file.hpp"
#include "foldcheck/model/model.hpp"
#include "foldcheck/model/model_patterns.hpp"
#include "foldcheck/model/model_run.hpp"
#include "foldcheck/reports/compare_reports.hpp"
#include "foldcheck/reports/suite_reports.hpp"

namespace foldcheck::fuzz {
namespace {

namespace fs = std::filesystem;

// A scratch directory per process, made on first use, with the files the targets refer
// to: "weights.bin" (64 bytes) for ONNX external data, so in-range and out-of-range
// references are both reachable, and "c.json", a small case file for suite entries.
const fs::path& scratch() {
  static const fs::path dir = [] {
    const fs::path d = fs::temp_directory_path() / ("foldcheck_fuzz_" + std::to_string(getpid()));
    fs::create_directories(d);
    std::ofstream(d / "weights.bin", std::ios::binary) << std::string(64, '\x3f');
    std::ofstream(d / "c.json") << R"({"seed": 1, "conv": {"in_channels": 2, "out_channels": 2, "kernel": 1},
      "input": {"shape": [1, 2, 2, 2], "init": {"normal": {}}}, "weights": {"init": {"const": 0.5}}})";
    return d;
  }();
  return dir;
}

}  // namespace

void use_small_limits() { set_max_elements(std::int64_t(1) << 20); }

void npy(const std::string& bytes) {
  try {
    (void)serialize_npy(parse_npy(bytes, "fuzz.npy"));
  } catch (const InputError&) {
  }
}

void npz(const std::string& bytes) {
  try {
    (void)parse_npz(bytes, "fuzz.npz");
  } catch (const InputError&) {
  }
}

void onnx(const std::string& bytes) {
  try {
    const Model m = Model::parse(bytes, (scratch() / "model.onnx").string());
    const BnPatterns pats = find_bn_pairs(m);
    for (const BnPair& p : pats.pairs) {
      try {
        (void)layer_params(m, p);
      } catch (const InputError&) {
      }
    }
  } catch (const InputError&) {
  }
}

namespace {

// Sets the element limit for one scope and restores the previous one on the way out.
struct ElementLimit {
  std::int64_t before = max_elements();
  explicit ElementLimit(std::int64_t n) { set_max_elements(n); }
  ~ElementLimit() { set_max_elements(before); }
  ElementLimit(const ElementLimit&) = delete;
  ElementLimit& operator=(const ElementLimit&) = delete;
};

}  // namespace

void model_run(const std::string& bytes) {
  const ElementLimit limit(4096);
  try {
    const Model m = Model::parse(bytes, (scratch() / "model.onnx").string());
    const Tensor x = model_input(m, std::nullopt, 1);
    const BnPatterns pats = find_bn_pairs(m);
    ModelRunOptions o;
    (void)run_model(m, pats, {{m.inputs.at(0).name, x}}, o);
    o.fused = true;
    (void)run_model(m, pats, {{m.inputs.at(0).name, x}}, o);
  } catch (const InputError&) {
  }
}

void case_json(const std::string& bytes) {
  try {
    const CaseSpec s = load_case(parse_json_text(bytes, "fuzz"), (scratch() / "fuzz_case.json").string());
    // load_case materialized it in float64 within the element limit; float16 adds the
    // rounding of every drawn value to a narrow type.
    (void)materialize(s, DType::Float16);
  } catch (const InputError&) {
  } catch (const nlohmann::json::exception&) {
  } catch (const JsonAccessError&) {
  }
}

void suite_json(const std::string& bytes) {
  try {
    (void)plan_suite(parse_json_text(bytes, "fuzz"), (scratch() / "suite.json").string());
  } catch (const InputError&) {
  } catch (const nlohmann::json::exception&) {
  } catch (const JsonAccessError&) {
  }
}

void report_json(const std::string& bytes) {
  try {
    const nlohmann::json j = parse_json_text(bytes, "fuzz");
    (void)reports::compare_reports(j, j, {});
    (void)reports::report_markdown(j);
    (void)reports::report_html(j);
  } catch (const InputError&) {
  } catch (const nlohmann::json::exception&) {
  } catch (const std::invalid_argument&) {
    // summarize() on a JSON that is not a result: the CLI's compare refuses it earlier
  } catch (const JsonAccessError&) {
    // a key the writers read is missing (cmake/json_assert.hpp): the CLI reports bad input
  }
}

const std::map<std::string, Body>& bodies() {
  static const std::map<std::string, Body> b{{"fuzz_npy", npy},         {"fuzz_npz", npz},
                                             {"fuzz_onnx", onnx},       {"fuzz_case_json", case_json},
                                             {"fuzz_suite_json", suite_json}, {"fuzz_report_json", report_json},
                                             {"fuzz_model_run", model_run}};
  return b;
}

}  // namespace foldcheck::fuzz
