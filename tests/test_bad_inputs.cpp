// The bad-input catalogue (BAD_INPUTS.md) as a test: every row of the document's tables is
// run through the foldcheck executable from the setup registered here under the row's id.
// A refused row must exit 2 with exactly one line on stderr, "foldcheck: error: " and the
// row's message (the document's pattern: "…" matches any text), and write no output
// file; an accepted row must exit with the code the document gives. A row without a
// setup, or a setup without a row, fails the test: the document and the code cannot drift.
#include <limits>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/stat.h>
#include <zip.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <functional>
#include <map>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "cli_run.hpp"
#include "foldcheck/io/npy.hpp"
#include "npy_bytes.hpp"
#include "onnx_builder.hpp"

namespace {

using namespace foldcheck_cli_test;
using foldcheck::DType;
using foldcheck::Tensor;
using foldcheck::testing::Encoding;
using foldcheck::testing::OnnxBuilder;

struct Row {
  std::string id, expect;  // expect: the message pattern (refused rows) or "exit N" (accepted rows)
};

// The rows of BAD_INPUTS.md: lines "| `id` | ... | `message` |" (refused) and
// "| `id` | ... | exit N |" (accepted).
std::vector<Row> catalogue() {
  std::ifstream in(src("BAD_INPUTS.md"));
  REQUIRE(in);
  std::vector<Row> rows;
  const std::regex row(R"(^\| `([a-z0-9-]+)` \|.*\| (`(.*)`|exit [0-9]) \|\s*$)");
  std::string line;
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_match(line, m, row)) rows.push_back({m[1], m[3].matched ? std::string(m[3]) : std::string(m[2])});
  return rows;
}

// The document's pattern as a regex: literal text, "…" for any run of characters.
std::regex pattern_regex(const std::string& p) {
  static const std::string ellipsis = "\xE2\x80\xA6";
  std::string re;
  for (std::size_t i = 0; i < p.size();) {
    if (p.compare(i, ellipsis.size(), ellipsis) == 0) {
      re += ".*";
      i += ellipsis.size();
      continue;
    }
    if (std::string("\\^$.|?*+()[]{}").find(p[i]) != std::string::npos) re += '\\';
    re += p[i++];
  }
  return std::regex(re);
}

void put(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

std::string npy(const Tensor& t) { return foldcheck::serialize_npy(t); }
std::string npy_f32(const foldcheck::Shape& shape, double fill = 0.5) {
  std::int64_t n = 1;
  for (const auto d : shape) n *= d;
  return npy(Tensor{shape, std::vector<double>(static_cast<std::size_t>(n), fill), DType::Float32});
}
using foldcheck::testing::npy_with_header;

// X[1,2,4,4] -> Conv conv (2x2x3x3, pads 1) -> BatchNormalization bn -> Y[1,2,4,4]; the
// hooks change one thing each. Saved as DIR/NAME; x.npy and y.npy (a float32 input and an
// output of the right shape) beside it.
struct ModelParts {
  std::vector<double> var{1.0, 0.5};
  float eps = 1e-5f;
  Encoding weight_encoding = Encoding::Raw;
  std::function<void(OnnxBuilder&)> extra_nodes;  // after bn (its output renamed "bn_out" then)
  std::function<void(onnx::NodeProto& conv, onnx::NodeProto& bn)> tweak;
  std::function<void(onnx::ModelProto&)> tweak_proto;
};
std::string model(const fs::path& dir, const std::string& name, const ModelParts& p = {}) {
  OnnxBuilder b;
  b.input("X", {1, 2, 4, 4});
  b.output("Y", {1, 2, 4, 4});
  std::vector<double> w(36);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.125 * static_cast<double>(i % 7) - 0.25;
  b.init("W", {2, 2, 3, 3}, w, DType::Float32, p.weight_encoding);
  b.init("gamma", {2}, {1.0, 0.75});
  b.init("beta", {2}, {0.0, 0.5});
  b.init("mean", {2}, {0.25, -0.125});
  b.init("var", {2}, p.var);
  auto& conv = b.node("Conv", "conv", {"X", "W"}, {"C"});
  OnnxBuilder::attr(conv, "pads", std::vector<std::int64_t>{1, 1, 1, 1});
  OnnxBuilder::attr(conv, "kernel_shape", std::vector<std::int64_t>{3, 3});
  auto& bn = b.node("BatchNormalization", "bn", {"C", "gamma", "beta", "mean", "var"}, {p.extra_nodes ? "bn_out" : "Y"});
  OnnxBuilder::attr(bn, "epsilon", p.eps);
  if (p.extra_nodes) p.extra_nodes(b);
  if (p.tweak) p.tweak(*b.model.mutable_graph()->mutable_node(0), *b.model.mutable_graph()->mutable_node(1));
  if (p.tweak_proto) p.tweak_proto(b.model);
  const fs::path path = dir / name;
  b.save(path.string());
  put(dir / "x.npy", npy_f32({1, 2, 4, 4}));
  put(dir / "y.npy", npy_f32({1, 2, 4, 4}));
  return path.string();
}
// The model with a Relu and a second BatchNormalization (attribute key = value) after bn.
ModelParts second_bn(const std::string& key, std::int64_t value) {
  ModelParts p;
  p.extra_nodes = [=](OnnxBuilder& b) {
    b.init("g2", {2}, {1, 1});
    b.init("b2", {2}, {0, 0});
    b.init("m2", {2}, {0, 0});
    b.init("v2", {2}, {1, 1});
    b.node("Relu", "relu", {"bn_out"}, {"r"});
    OnnxBuilder::attr(b.node("BatchNormalization", "bn2", {"r", "g2", "b2", "m2", "v2"}, {"Y"}), key, value);
  };
  return p;
}
std::string with_run(const std::string& m, const fs::path& dir) {
  return "accuracy-diff " + m + " --input " + (dir / "x.npy").string() + " --observed-output " + (dir / "y.npy").string();
}

const char* kCase = R"({"seed": 1, "conv": {"in_channels": 2, "out_channels": 2, "kernel": 3, "padding": 1},
  "input": {"shape": [1, 2, 4, 4], "init": {"normal": {}}}, "weights": {"init": {"normal": {"std": 0.3}}}})";
// The small case with `extra` spliced in before the closing brace.
std::string case_with(const fs::path& dir, const std::string& extra) {
  const std::string base = kCase;
  put(dir / "case.json", base.substr(0, base.size() - 1) + extra + "}");
  return (dir / "case.json").string();
}

// id -> the arguments of the run that shows the row (files made in `dir`).
struct Setup {
  std::function<std::string(const fs::path&)> args;
  bool output_flag = true;                     // append "-o DIR/out.json" and check it is not written
  std::string shell_prefix;                    // shell text before foldcheck (resource limits)
  std::function<void(const fs::path&)> after;  // further checks after the run

  Setup() = default;
  Setup(std::function<std::string(const fs::path&)> a, bool out = true, std::string prefix = "",
        std::function<void(const fs::path&)> then = {})
      : args(std::move(a)), output_flag(out), shell_prefix(std::move(prefix)), after(std::move(then)) {}
};

// A 1 GB address-space limit for rows that must refuse before allocating. AddressSanitizer
// reserves terabytes of shadow memory at start and cannot run under one: in the hardening
// build those rows check the message only (the limit is checked in the normal build).
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FOLDCHECK_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(FOLDCHECK_ASAN)
const char* const kAddressSpaceLimit = "";
#else
const char* const kAddressSpaceLimit = "ulimit -v 1000000; exec ";
#endif

std::map<std::string, Setup> setups() {
  std::map<std::string, Setup> s;
  const std::string obs = " --observed 1,2";
  // --- paths ----------------------------------------------------------------------------
  s["missing-file"] = {[=](const fs::path& d) { return "explain --original " + (d / "missing.npy").string() + obs; }};
  s["directory"] = {[](const fs::path& d) { return "run " + d.string(); }};
  s["not-a-directory"] = {[](const fs::path& d) {
    put(d / "plain.txt", "x");
    return "run " + (d / "plain.txt" / "case.json").string();
  }};
  // Devices and pipes have no size to check before reading: their first bytes are judged
  // by the format (under a 1 GB address-space limit: /dev/zero was read for 4 GB before).
  const auto device = [](const std::string& name, std::function<std::string(const fs::path&)> cmd) {
    return Setup{[=](const fs::path& d) {
                   fs::create_symlink("/dev/zero", d / name);
                   return cmd(d / name);
                 },
                 true, kAddressSpaceLimit};
  };
  s["input-device-npy"] = device("z.npy", [=](const fs::path& p) { return "explain --original " + p.string() + obs; });
  s["input-device-npz"] = device("z.npz", [](const fs::path& p) {
    put(p.parent_path() / "x.npy", npy_f32({1, 2, 1, 1}));
    const std::string x = (p.parent_path() / "x.npy").string();
    return "diagnose --input " + x + " --bn " + p.string() + " --observed " + x;
  });
  s["input-device-json"] = device("z.json", [](const fs::path& p) { return "run " + p.string(); });
  s["input-device-onnx"] = device("z.onnx", [](const fs::path& p) { return "accuracy-diff " + p.string(); });
  // A pipe of valid-looking JSON that does not end soon: held to one byte per element of
  // the limit (here 1000), not 16 (/dev/urandom as a model was read for 4.3 GB, 8.5 GB held).
  s["input-stream-too-long"] = {[](const fs::path& d) {
                                  const fs::path p = d / "p.json";
                                  REQUIRE(::mkfifo(p.c_str(), 0600) == 0);
                                  const std::string writer =
                                      "(printf '{\"seed\": \"'; yes | head -c 100000) > '" + p.string() + "' 2>/dev/null &";
                                  REQUIRE(std::system(writer.c_str()) == 0);
                                  return "run " + p.string();
                                },
                                true, "FOLDCHECK_MAX_ELEMENTS=1000 "};
  s["output-directory-missing"] = {[](const fs::path& d) {
    return "run " + src("cases/tvm_thread.json") + " -o " + (d / "no" / "such" / "dir" / "r.json").string();
  }, false};
  s["output-is-directory"] = {[](const fs::path& d) { return "run " + src("cases/tvm_thread.json") + " -o " + d.string(); },
                              false};
  // A file-size limit of 1 KiB (SIGXFSZ ignored, so write() fails with EFBIG): the same
  // failure as a full disk, reproducibly. The report from the run before must survive.
  s["write-fails"] = {[](const fs::path& d) {
                        put(d / "previous.json", "{\"kept\": true}\n");
                        return "explain --original 2.1122932 --observed 2.1122828 --format json -o " +
                               (d / "previous.json").string();
                      },
                      false, "trap '' XFSZ; ulimit -f 1; exec ", [](const fs::path& d) {
                        CHECK(slurp(d / "previous.json") == "{\"kept\": true}\n");
                        for (const auto& e : fs::directory_iterator(d)) CHECK(e.path().filename().string().find(".tmp") == std::string::npos);
                      }};
  // Outputs never replace inputs: the same file by another name or through a link, and
  // an output given twice; the input is unchanged afterwards.
  s["output-is-input"] = {[](const fs::path& d) {
                            case_with(d, "");
                            fs::create_symlink(d / "case.json", d / "link.json");
                            return "run " + (d / "case.json").string() + " -o " + (d / "link.json").string();
                          },
                          false, "", [](const fs::path& d) {
                            CHECK(slurp(d / "case.json").find("\"seed\": 1") != std::string::npos);
                            CHECK(fs::is_symlink(d / "link.json"));
                          }};
  s["write-int-over-weights"] = {[](const fs::path& d) {
                                   foldcheck::write_npz((d / "bn.npz").string(), {{"gamma", Tensor{{2}, {1, 1}, DType::Float32}},
                                                                                  {"beta", Tensor{{2}, {0, 0}, DType::Float32}},
                                                                                  {"mean", Tensor{{2}, {0, 0}, DType::Float32}},
                                                                                  {"var", Tensor{{2}, {1, 1}, DType::Float32}}});
                                   put(d / "w.npy", npy_f32({2, 1, 1, 1}));
                                   return "quant-check --weights " + (d / "w.npy").string() + " --bn " +
                                          (d / "bn.npz").string() + " --write-int " + (d / "./w.npy").string();
                                 },
                                 false, "", [](const fs::path& d) { CHECK(slurp(d / "w.npy") == npy_f32({2, 1, 1, 1})); }};
  s["output-twice"] = {[](const fs::path& d) {
                         foldcheck::write_npz((d / "bn.npz").string(), {{"gamma", Tensor{{2}, {1, 1}, DType::Float32}},
                                                                        {"beta", Tensor{{2}, {0, 0}, DType::Float32}},
                                                                        {"mean", Tensor{{2}, {0, 0}, DType::Float32}},
                                                                        {"var", Tensor{{2}, {1, 1}, DType::Float32}}});
                         put(d / "w.npy", npy_f32({2, 1, 1, 1}));
                         return "quant-check --weights " + (d / "w.npy").string() + " --bn " + (d / "bn.npz").string() +
                                " --write-int " + (d / "q.npy").string() + " --write-scales " + (d / "q.npy").string();
                       },
                       false, "", [](const fs::path& d) { CHECK_FALSE(fs::exists(d / "q.npy")); }};
  // Entry names that differ but give one result file name: one result would be lost.
  s["suite-result-file-collision"] = {[](const fs::path& d) {
                                        case_with(d, "");
                                        put(d / "suite.json", R"({"entries": [{"case": "case.json", "name": "x/y"}, {"case": "case.json", "name": "x_y"}]})");
                                        return "suite " + (d / "suite.json").string() + " -o " + (d / "out").string();
                                      },
                                      false, "", [](const fs::path& d) { CHECK_FALSE(fs::exists(d / "out")); }};
  // A report names its result files; merge writes them under -o: a name that leads out
  // of it ("../", an absolute path) is refused, and nothing is written there.
  s["merge-result-file-outside"] = {[](const fs::path& d) {
                                      case_with(d, "");
                                      put(d / "suite.json", R"({"entries": [{"case": "case.json", "name": "a"}]})");
                                      const Result r = run("suite " + (d / "suite.json").string() + " -o " + (d / "s").string() + " -q --no-timing");
                                      REQUIRE(r.code == 0);
                                      std::string rep = slurp(d / "s" / "report.json");
                                      rep.replace(rep.find("results/a.json"), 14, "../escaped.json");
                                      put(d / "s" / "report.json", rep);
                                      // Where a merge reads it from (s/../), so that one that follows the name writes m/merged/../.
                                      fs::copy_file(d / "s" / "results" / "a.json", d / "escaped.json");
                                      return "merge " + (d / "s" / "report.json").string() + " -o " + (d / "m" / "merged").string();
                                    },
                                    false, "", [](const fs::path& d) {
                                      CHECK_FALSE(fs::exists(d / "m"));
                                    }};
  // --- .npy -----------------------------------------------------------------------------
  const auto npy_original = [=](const std::string& bytes) {
    return [=](const fs::path& d) {
      put(d / "w.npy", bytes);
      return "explain --original " + (d / "w.npy").string() + obs;
    };
  };
  const std::string good = npy_f32({2});
  s["npy-bad-magic"] = {npy_original("NOTNUMPY" + good.substr(8))};
  s["npy-truncated-header"] = {npy_original(good.substr(0, 40))};
  s["npy-malformed-header"] = {npy_original(npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", std::string(8, '\0')))};
  s["npy-fortran-order"] = {npy_original(npy_with_header("{'descr': '<f4', 'fortran_order': True, 'shape': (2,)}", std::string(8, '\0')))};
  s["npy-truncated-data"] = {npy_original(good.substr(0, good.size() - 3))};
  s["npy-trailing-bytes"] = {npy_original(good + "junk")};
  s["npy-unsupported-dtype"] = {npy_original(npy_with_header("{'descr': '<i4', 'fortran_order': False, 'shape': (2,)}", std::string(8, '\0')))};
  s["npy-too-many-elements"] = {npy_original(npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000000)}", ""))};
  s["max-elements"] = {[](const fs::path& d) {
    put(d / "w.npy", npy_f32({3, 4}));
    return "explain --max-elements 10 --original " + (d / "w.npy").string() + " --observed " + (d / "w.npy").string();
  }};
  s["max-elements-environment"] = {[](const fs::path& d) {
                                     put(d / "w.npy", npy_f32({3, 4}));
                                     return "explain --original " + (d / "w.npy").string() + " --observed " + (d / "w.npy").string();
                                   },
                                   true, "FOLDCHECK_MAX_ELEMENTS=11 "};
  s["max-elements-list"] = {
      [](const fs::path&) { return std::string("explain --max-elements 3 --original 1,2,3,4 --observed 1,2,3,4"); }};
  s["max-elements-name-list"] = {
      [](const fs::path& d) { return "bisect " + case_with(d, "") + " --max-elements 2 --passes A,B,C"; }};
  s["isa-unknown"] = {[](const fs::path& d) {
                        put(d / "w.npy", npy_f32({3, 4}));
                        return "explain --original " + (d / "w.npy").string() + " --observed " + (d / "w.npy").string();
                      },
                      true, "FOLDCHECK_ISA=v5 "};
  s["diagnose-empty-tensor"] = {[](const fs::path& d) {
    put(d / "x.npy", npy_f32({2, 0}));
    foldcheck::write_npz((d / "bn.npz").string(), {{"gamma", Tensor{{2}, {1, 1}, DType::Float32}}});
    return "diagnose --input " + (d / "x.npy").string() + " --bn " + (d / "bn.npz").string() + " --observed " +
           (d / "x.npy").string();
  }};
  s["empty-tensor"] = {[](const fs::path& d) {
    const std::string m = model(d, "m.onnx");
    put(d / "x.npy", npy_f32({0, 2, 4, 4}));
    return "accuracy-diff " + m + " --input " + (d / "x.npy").string();
  }};
  // --- .npz -----------------------------------------------------------------------------
  s["npz-corrupt"] = {[=](const fs::path& d) {
    put(d / "bn.npz", "PK\x03\x04 this is not a zip archive");
    return "explain --original 1,2" + obs + " --bn " + (d / "bn.npz").string();
  }};
  s["npz-missing-array"] = {[](const fs::path& d) {
    foldcheck::write_npz((d / "bn.npz").string(), {{"gamma", Tensor{{2}, {1, 1}, DType::Float32}}});
    put(d / "w.npy", npy_f32({2, 1, 1, 1}));
    return "quant-check --weights " + (d / "w.npy").string() + " --bn " + (d / "bn.npz").string();
  }};
  s["npz-unexpected-array"] = {[=](const fs::path& d) {
    foldcheck::write_npz((d / "bn.npz").string(), {{"sigma", Tensor{{2}, {1, 1}, DType::Float32}}});
    return "explain --original 1,2" + obs + " --bn " + (d / "bn.npz").string();
  }};
  // Sizes an archive claims are not allocated: 190 bytes that claim a 3.9 GB member.
  s["npz-key-twice"] = {[=](const fs::path& d) {
    foldcheck::write_npz((d / "bn.npz").string(), {{"gamma", Tensor{{2}, {1, 1}, DType::Float32}}});
    // A second member "gamma" (no .npy): NumPy reads both as 'gamma'.
    int err = 0;
    zip_t* z = zip_open((d / "bn.npz").c_str(), 0, &err);
    REQUIRE(z);
    static const std::string bytes = npy_f32({2}, 5.0);
    zip_file_add(z, "gamma", zip_source_buffer(z, bytes.data(), bytes.size(), 0), 0);
    REQUIRE(zip_close(z) == 0);
    return "explain --original 1,2" + obs + " --bn " + (d / "bn.npz").string();
  }};
  s["npz-claimed-size"] = {[=](const fs::path& d) {
    foldcheck::write_npz((d / "bn.npz").string(), {{"gamma", Tensor{{2}, {1, 1}, DType::Float32}}});
    std::string z = slurp(d / "bn.npz");
    const std::uint32_t claim = 3900000000u;
    // The uncompressed size in the local header (offset 22) and the central directory entry (+24).
    z.replace(22, 4, reinterpret_cast<const char*>(&claim), 4);
    z.replace(z.rfind("PK\x01\x02") + 24, 4, reinterpret_cast<const char*>(&claim), 4);
    put(d / "bn.npz", z);
    return "explain --original 1,2" + obs + " --bn " + (d / "bn.npz").string();
  }};
  s["npz-too-many-values"] = {[=](const fs::path& d) {
    foldcheck::write_npz((d / "bn.npz").string(), {{"gamma", Tensor{{3}, {1, 1, 1}, DType::Float32}}});
    return "explain --original 1,2" + obs + " --bn " + (d / "bn.npz").string();
  }};
  // --- JSON: case, suite, report ---------------------------------------------------------
  s["json-invalid"] = {[](const fs::path& d) {
    put(d / "case.json", "{\"seed\": 1,");
    return "run " + (d / "case.json").string();
  }};
  s["json-too-deep"] = {[](const fs::path& d) {
    put(d / "case.json", std::string(100, '[') + std::string(100, ']'));
    return "run " + (d / "case.json").string();
  }};
  s["case-unknown-key"] = {[](const fs::path& d) { return "run " + case_with(d, R"(, "colour": "red")"); }};
  s["case-wrong-type"] = {[](const fs::path& d) { return "run " + case_with(d, R"(, "bn": {"eps": "small"})"); }};
  s["case-channel-mismatch"] = {[](const fs::path& d) {
    put(d / "case.json", R"({"seed": 1, "conv": {"in_channels": 2, "out_channels": 2}, "input": {"shape": [1, 3, 2, 2], "init": {"const": 1}}, "weights": 1})");
    return "run " + (d / "case.json").string();
  }};
  s["case-too-large"] = {[](const fs::path& d) {
    put(d / "case.json", R"({"seed": 1, "conv": {"in_channels": 64, "out_channels": 64, "kernel": 3, "padding": 1},
      "input": {"shape": [64, 64, 4096, 4096], "init": {"normal": {}}}, "weights": 0.5})");
    return "run " + (d / "case.json").string();
  }};
  s["case-too-much-memory"] = {[](const fs::path& d) {
    put(d / "case.json", R"({"seed": 1, "conv": {"in_channels": 1, "out_channels": 1, "kernel": 1, "padding": 8000},
      "input": {"shape": [1, 1, 1, 1], "init": {"normal": {}}}, "weights": 0.5})");
    return "run " + (d / "case.json").string();
  }};
  s["case-empty-values"] = {[](const fs::path& d) { return "run " + case_with(d, R"(, "bn": {"gamma": {"init": {"values": []}}})"); }};
  s["case-values-count"] = {[](const fs::path& d) { return "run " + case_with(d, R"(, "bn": {"gamma": {"init": {"values": [1, 2, 3]}}})"); }};
  s["suite-bad-entry"] = {[](const fs::path& d) {
    case_with(d, "");
    put(d / "suite.json", R"({"entries": [{"case": "case.json"}, {"case": "case.json"}]})");
    return "suite " + (d / "suite.json").string() + " -o " + (d / "out").string();
  }, false};
  s["report-not-a-report"] = {[](const fs::path& d) {
    put(d / "a.json", R"({"hello": "world"})");
    return "compare " + (d / "a.json").string() + " --baseline " + (d / "a.json").string();
  }};
  s["json-duplicate-key"] = {[](const fs::path& d) { return "run " + case_with(d, R"(, "seed": 2)"); }};
  s["json-number-overflow"] = {[](const fs::path& d) { return "run " + case_with(d, R"(, "bn": {"eps": 1e400})"); }};
  s["suite-entry-out-of-range"] = {[](const fs::path& d) {
    put(d / "m.onnx", "");
    put(d / "suite.json", R"({"entries": [{"model": "m.onnx", "output_samples": 0}]})");
    return "suite " + (d / "suite.json").string() + " -o " + (d / "out").string();
  }, false};
  s["merge-missing-entry"] = {[](const fs::path& d) {
    case_with(d, "");
    put(d / "suite.json", R"({"entries": [{"case": "case.json", "name": "a"}, {"case": "case.json", "name": "b"}]})");
    REQUIRE(run("suite " + (d / "suite.json").string() + " -o " + (d / "s").string() + " -q --no-timing").code == 0);
    nlohmann::json rep = nlohmann::json::parse(slurp(d / "s" / "report.json"));
    rep["entries"].erase(1);
    put(d / "s" / "report.json", rep.dump(1));
    return "merge " + (d / "s" / "report.json").string() + " -o " + (d / "m").string();
  }, false, "", [](const fs::path& d) { CHECK_FALSE(fs::exists(d / "m")); }};
  s["merge-passed-contradicts-verdict"] = {[](const fs::path& d) {
    case_with(d, "");
    put(d / "suite.json", R"({"entries": [{"case": "case.json", "name": "a"}]})");
    REQUIRE(run("suite " + (d / "suite.json").string() + " -o " + (d / "s").string() + " -q --no-timing").code == 0);
    nlohmann::json rep = nlohmann::json::parse(slurp(d / "s" / "report.json"));
    rep["entries"][0]["summary"]["verdict"] = "UNEXPECTED";  // still "passed": true
    put(d / "s" / "report.json", rep.dump(1));
    return "merge " + (d / "s" / "report.json").string() + " -o " + (d / "m").string();
  }, false, "", [](const fs::path& d) { CHECK_FALSE(fs::exists(d / "m")); }};
  s["merge-result-link-outside"] = {[](const fs::path& d) {
    case_with(d, "");
    put(d / "suite.json", R"({"entries": [{"case": "case.json", "name": "a"}]})");
    REQUIRE(run("suite " + (d / "suite.json").string() + " -o " + (d / "s").string() + " -q --no-timing").code == 0);
    put(d / "secret.json", R"({"secret": 1})");
    fs::remove(d / "s" / "results" / "a.json");
    fs::create_symlink(d / "secret.json", d / "s" / "results" / "a.json");
    return "merge " + (d / "s" / "report.json").string() + " -o " + (d / "m").string();
  }, false, "", [](const fs::path& d) { CHECK_FALSE(fs::exists(d / "m")); }};
  s["report-dir-not-a-directory"] = {[](const fs::path& d) {
    case_with(d, "");
    put(d / "suite.json", R"({"entries": [{"case": "case.json"}]})");
    return "suite " + (d / "suite.json").string() + " -o " + (d / "case.json").string();
  }, false};
  s["report-dir-holds-input"] = {[](const fs::path& d) {
    case_with(d, "");
    put(d / "junit.xml", R"({"entries": [{"case": "case.json"}]})");  // the suite file, named as a report
    return "suite " + (d / "junit.xml").string() + " -o " + d.string();
  }, false, "", [](const fs::path& d) {
    CHECK(slurp(d / "junit.xml").rfind("{\"entries\"", 0) == 0);
    CHECK_FALSE(fs::exists(d / "report.json"));
  }};
  // What is already in a report directory, checked before the first write: a directory at a
  // report's name (the last write failed after four had replaced the previous reports) and
  // links planted there (the writes landed outside DIR).
  const auto suite_into = [](std::function<void(const fs::path& out)> plant) {
    return [=](const fs::path& d) {
      case_with(d, "");
      put(d / "suite.json", R"({"entries": [{"case": "case.json"}]})");
      fs::create_directories(d / "out");
      plant(d / "out");
      return "suite " + (d / "suite.json").string() + " -o " + (d / "out").string();
    };
  };
  s["report-dir-target-not-a-file"] = {suite_into([](const fs::path& o) { fs::create_directories(o / "junit.xml"); }), false, "",
                                       [](const fs::path& d) { CHECK_FALSE(fs::exists(d / "out" / "report.json")); }};
  s["report-dir-results-link"] = {suite_into([](const fs::path& o) {
                                    fs::create_directories(o.parent_path() / "outside");
                                    fs::create_directory_symlink("../outside", o / "results");
                                  }),
                                  false, "", [](const fs::path& d) { CHECK(fs::is_empty(d / "outside")); }};
  s["report-dir-file-link"] = {suite_into([](const fs::path& o) {
                                 put(o.parent_path() / "precious.json", "precious\n");
                                 fs::create_symlink("../precious.json", o / "report.json");
                               }),
                               false, "", [](const fs::path& d) {
                                 CHECK(slurp(d / "precious.json") == "precious\n");
                                 CHECK_FALSE(fs::exists(d / "out" / "junit.xml"));
                               }};
  // More JSON values than the element limit: refused by the first pass, before a DOM
  // (64 MB of "0," peaked at 2.2 GB).
  s["json-too-many-values"] = {[](const fs::path& d) {
                                 std::string v = "0";
                                 for (int i = 1; i < 70000; ++i) v += ",0";
                                 return "run " + case_with(d, R"(, "extra": [)" + v + "]");
                               },
                               true, "FOLDCHECK_MAX_ELEMENTS=11 "};
  // A NUL byte in a string from a file: the system would read a path only up to it ("a\0/.."
  // opened "a"), and what() would cut a message there.
  s["path-with-nul"] = {[](const fs::path& d) {
    put(d / "a", npy_f32({2, 2, 3, 3}));
    put(d / "case.json", R"({"seed": 1, "conv": {"in_channels": 2, "out_channels": 2, "kernel": 3, "padding": 1},
      "input": {"shape": [1, 2, 4, 4], "init": {"normal": {}}}, "weights": {"init": {"npy": "a\u0000/../../etc/passwd"}}})");
    return "run " + (d / "case.json").string();
  }};
  s["key-with-nul"] = {[](const fs::path& d) { return "run " + case_with(d, R"(, "a\u0000b": 1)"); }};
  // A message quotes what it refuses: a 900 KB number is cut to a line (one of 900 KB was written).
  s["message-long-token"] = {[](const fs::path& d) {
    put(d / "case.json", R"({"seed": )" + std::string(900000, '9') + "}");
    return "run " + (d / "case.json").string();
  }};
  s["run-algorithm-not-evaluated"] = {
      [](const fs::path& d) { return "run " + case_with(d, "") + " --algorithm winograd4"; }};
  s["run-conversion-alone"] = {[](const fs::path& d) { return "run " + case_with(d, "") + " --conversion truncate"; }};
  s["run-arithmetic-not-evaluated"] = {[](const fs::path& d) {
    return "run " + case_with(d, R"(, "compare": {"variants": [{"conv_arithmetic": "bf16x3"}]})");
  }};
  s["case-unknown-name"] = {[](const fs::path& d) { return "run " + case_with(d, R"(, "compare": {"dtypes": ["float8"]})"); }};
  s["report-malformed"] = {[](const fs::path& d) {
    case_with(d, "");
    put(d / "suite.json", R"({"entries": [{"case": "case.json", "name": "a"}]})");
    REQUIRE(run("suite " + (d / "suite.json").string() + " -o " + (d / "s").string() + " -q --no-timing").code == 0);
    std::string rep = slurp(d / "s" / "report.json");
    rep.replace(rep.find("\"passed\": true"), 14, "\"passed\": \"yes\"");
    put(d / "s" / "report.json", rep);
    return "compare " + (d / "s" / "report.json").string() + " --baseline " + (d / "s" / "report.json").string();
  }};
  s["report-negative-count"] = {[](const fs::path& d) {
    case_with(d, "");
    put(d / "suite.json", R"({"entries": [{"case": "case.json", "name": "a"}]})");
    REQUIRE(run("suite " + (d / "suite.json").string() + " -o " + (d / "s").string() + " -q --no-timing").code == 0);
    std::string rep = slurp(d / "s" / "report.json");
    const std::size_t at = rep.find("\"beyond_bound\": 0");
    REQUIRE(at != std::string::npos);
    rep.replace(at, 17, "\"beyond_bound\": -3");
    put(d / "s" / "report.json", rep);
    return "compare " + (d / "s" / "report.json").string() + " --baseline " + (d / "s" / "report.json").string();
  }};
  // --- BatchNorm parameters ---------------------------------------------------------------
  s["param-nan"] = {[=](const fs::path&) { return "explain --original 1,2" + obs + " --gamma 1,nan"; }};
  s["param-inf"] = {[](const fs::path& d) {
    foldcheck::write_npz((d / "bn.npz").string(), {{"var", Tensor{{2}, {1, HUGE_VAL}, DType::Float32}}});
    return "explain --original 1,2 --observed 1,2 --bn " + (d / "bn.npz").string();
  }};
  s["negative-variance"] = {[](const fs::path& d) { return "run " + case_with(d, R"(, "bn": {"var": -0.5})"); }};
  s["eps-zero"] = {[](const fs::path& d) { return "run " + case_with(d, R"(, "bn": {"var": 0, "eps": 0})"); }};
  s["eps-negative"] = {[=](const fs::path&) { return "explain --original 1,2" + obs + " --eps -1e-5"; }};
  s["eps-zero-in-dtype"] = {[=](const fs::path&) { return "explain --original 1,2" + obs + " --var 0 --eps 1e-50"; }};
  s["var-plus-eps-overflows"] = {[=](const fs::path&) { return "explain --original 1,2" + obs + " --var 3.4e38 --eps 1e38"; }};
  s["var-plus-eps-overflows-float64"] = {
      [=](const fs::path&) { return "explain --dtype float64 --original 1,2" + obs + " --var 1.7e308 --eps 1e308"; }};
  s["param-past-dtype-range"] = {[=](const fs::path&) { return "explain --original 1,2" + obs + " --gamma 1e40"; }};
  s["onnx-param-nan"] = {[](const fs::path& d) {
    ModelParts p;
    p.var = {1.0, std::nan("")};
    return "accuracy-diff " + model(d, "m.onnx", p);
  }};
  s["onnx-negative-variance"] = {[](const fs::path& d) {
    ModelParts p;
    p.var = {1.0, -0.25};
    return "accuracy-diff " + model(d, "m.onnx", p);
  }};
  s["onnx-eps-zero"] = {[](const fs::path& d) {
    ModelParts p;
    p.eps = 0.0f;
    return "accuracy-diff " + model(d, "m.onnx", p);
  }};
  // --- shapes and dtypes -----------------------------------------------------------------
  s["count-mismatch"] = {[](const fs::path&) { return std::string("explain --original 1,2,3 --observed 1,2"); }};
  s["channel-mismatch"] = {[=](const fs::path&) { return "explain --original 1,2" + obs + " --gamma 1,2,3"; }};
  s["input-shape-mismatch"] = {[](const fs::path& d) {
    const std::string m = model(d, "m.onnx");
    put(d / "x.npy", npy_f32({1, 3, 4, 4}));
    return "accuracy-diff " + m + " --input " + (d / "x.npy").string();
  }};
  s["input-batch-fixed"] = {[](const fs::path& d) {
    ModelParts p;
    p.extra_nodes = [](OnnxBuilder& b) {
      b.init_int64("flat", {1, -1});
      b.node("Reshape", "flatten", {"bn_out", "flat"}, {"Y"});
    };
    p.tweak_proto = [](onnx::ModelProto& m) {
      auto* shape = m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
      shape->clear_dim();
      for (const std::int64_t n : {1, 32}) shape->add_dim()->set_dim_value(n);
    };
    const std::string m = model(d, "m.onnx", p);
    put(d / "x.npy", npy_f32({3, 2, 4, 4}));
    return "accuracy-diff " + m + " --input " + (d / "x.npy").string();
  }};
  s["input-dtype-mismatch"] = {[](const fs::path& d) {
    const std::string m = model(d, "m.onnx");
    put(d / "x.npy", npy(Tensor{{1, 2, 4, 4}, std::vector<double>(32, 0.1), DType::Float64}));
    return "accuracy-diff " + m + " --input " + (d / "x.npy").string();
  }};
  s["input-nan"] = {[](const fs::path& d) {
    const std::string m = model(d, "m.onnx");
    std::vector<double> v(32, 0.5);
    v[3] = std::nan("");
    put(d / "x.npy", npy(Tensor{{1, 2, 4, 4}, v, DType::Float32}));
    return "accuracy-diff " + m + " --input " + (d / "x.npy").string();
  }};
  s["observed-output-shape"] = {[](const fs::path& d) {
    const std::string m = model(d, "m.onnx");
    put(d / "y.npy", npy_f32({1, 2, 4}));
    return with_run(m, d);
  }};
  s["int-weights-shape"] = {[](const fs::path& d) {
    foldcheck::write_npz((d / "bn.npz").string(), {{"gamma", Tensor{{2}, {1, 1}, DType::Float32}},
                                                   {"beta", Tensor{{2}, {0, 0}, DType::Float32}},
                                                   {"mean", Tensor{{2}, {0, 0}, DType::Float32}},
                                                   {"var", Tensor{{2}, {1, 1}, DType::Float32}}});
    put(d / "w.npy", npy_f32({2, 1, 1, 1}));
    foldcheck::write_npy_ints((d / "q.npy").string(), {3}, {1, 2, 3}, 1);
    return "quant-check --weights " + (d / "w.npy").string() + " --bn " + (d / "bn.npz").string() + " --int-weights " +
           (d / "q.npy").string();
  }};
  s["value-past-dtype-range"] = {[](const fs::path&) { return std::string("explain --dtype float16 --original 70000,1 --observed 70000,1"); }};
  s["case-value-past-dtype-range"] = {[](const fs::path& d) {
    return "run " + case_with(d, R"(, "bn": {"gamma": {"init": {"values": [70000, 1]}}}, "compare": {"dtypes": ["float16"]})");
  }};
  // --- options ----------------------------------------------------------------------------
  s["option-not-finite"] = {[](const fs::path& d) {
    put(d / "a.json", "{}");
    return "compare " + (d / "a.json").string() + " --baseline " + (d / "a.json").string() + " --tolerance nan";
  }};
  s["option-out-of-range"] = {[](const fs::path& d) {
    put(d / "a.json", "{}");
    return "compare " + (d / "a.json").string() + " --baseline " + (d / "a.json").string() + " --ulp-floor -1";
  }};
  s["flag-unknown-name"] = {[](const fs::path&) { return std::string("explain --dtype float8 --original 1,2 --observed 1,2"); }};
  s["command-mistyped"] = {[](const fs::path&) { return std::string("acuracy-diff model.onnx"); }, false};
  s["argument-missing"] = {[](const fs::path&) { return std::string("run"); }, false};
  s["option-integer"] = {[](const fs::path& d) {
    case_with(d, "");
    return "run " + (d / "case.json").string() + " --attribution-elements -1";
  }};
  s["shard-malformed"] = {[](const fs::path& d) {
    case_with(d, "");
    put(d / "suite.json", R"({"entries": [{"case": "case.json"}]})");
    return "suite " + (d / "suite.json").string() + " -o " + (d / "out").string() + " --shard 4294967297/4294967297";
  }, false};
  s["output-name-too-long"] = {[](const fs::path& d) {
    return "explain --original 1,2 --observed 1,2 -o " + (d / std::string(256, 'r')).string();
  }, false};
  s["max-elements-too-large"] = {[](const fs::path&) {
    return std::string("explain --max-elements 1152921504606846976 --original 1,2 --observed 1,2");
  }};
  // --- ONNX files -------------------------------------------------------------------------
  s["onnx-corrupt"] = {[](const fs::path& d) {
    put(d / "m.onnx", std::string("\xff\xff\xff\xff not protobuf", 18));
    return "accuracy-diff " + (d / "m.onnx").string();
  }};
  s["onnx-truncated"] = {[](const fs::path& d) {
    const std::string bytes = slurp(model(d, "full.onnx"));
    put(d / "m.onnx", bytes.substr(0, bytes.size() / 2));
    return "accuracy-diff " + (d / "m.onnx").string();
  }};
  s["onnx-dims-data-mismatch"] = {[](const fs::path& d) {
    ModelParts p;
    p.tweak_proto = [](onnx::ModelProto& m) { m.mutable_graph()->mutable_initializer(0)->set_dims(0, 3); };
    return "accuracy-diff " + model(d, "m.onnx", p);
  }};
  s["onnx-negative-dim"] = {[](const fs::path& d) {
    ModelParts p;
    p.tweak_proto = [](onnx::ModelProto& m) { m.mutable_graph()->mutable_initializer(0)->set_dims(1, -2); };
    return "accuracy-diff " + model(d, "m.onnx", p);
  }};
  s["onnx-huge-dims"] = {[](const fs::path& d) {
    ModelParts p;
    p.tweak_proto = [](onnx::ModelProto& m) {
      auto* t = m.mutable_graph()->mutable_initializer(0);
      t->set_dims(0, 1000000);
      t->set_dims(1, 1000000);
    };
    return "accuracy-diff " + model(d, "m.onnx", p);
  }};
  s["output-is-external-data"] = {[](const fs::path& d) {
                                    ModelParts p;
                                    p.weight_encoding = Encoding::External;
                                    const std::string m = model(d, "m.onnx", p);
                                    put(d / "m.data.orig", slurp(d / "m.data"));
                                    return "accuracy-diff " + m + " --weights-only -o " + (d / "m.data").string();
                                  },
                                  false, "", [](const fs::path& d) { CHECK(slurp(d / "m.data") == slurp(d / "m.data.orig")); }};
  s["onnx-external-missing"] = {[](const fs::path& d) {
    ModelParts p;
    p.weight_encoding = Encoding::External;
    const std::string m = model(d, "m.onnx", p);
    fs::remove(d / "m.data");
    return "accuracy-diff " + m;
  }};
  s["onnx-external-escape"] = {[](const fs::path& d) {
    ModelParts p;
    p.weight_encoding = Encoding::External;
    const std::string path = model(d, "m.onnx", p);
    onnx::ModelProto m;  // the builder writes its own location on save: change it after
    std::ifstream in(path, std::ios::binary);
    REQUIRE(m.ParseFromIstream(&in));
    for (auto& kv : *m.mutable_graph()->mutable_initializer(0)->mutable_external_data())
      if (kv.key() == "location") kv.set_value("../../etc/passwd");
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    REQUIRE(m.SerializeToOstream(&out));
    return "accuracy-diff " + path;
  }};
  s["onnx-external-out-of-range"] = {[](const fs::path& d) {
    ModelParts p;
    p.weight_encoding = Encoding::External;
    p.tweak_proto = [](onnx::ModelProto& m) {
      auto* kvs = m.mutable_graph()->mutable_initializer(0)->mutable_external_data();
      auto* off = kvs->Add();
      off->set_key("offset");
      off->set_value("1000000");
    };
    return "accuracy-diff " + model(d, "m.onnx", p);
  }};
  s["onnx-unsupported-op"] = {[](const fs::path& d) {
    ModelParts p;
    p.extra_nodes = [](OnnxBuilder& b) { b.node("Softmax", "softmax", {"bn_out"}, {"Y"}); };
    return with_run(model(d, "m.onnx", p), d);
  }};
  s["onnx-unknown-attribute"] = {[](const fs::path& d) {
    ModelParts p;
    p.tweak = [](onnx::NodeProto& conv, onnx::NodeProto&) { OnnxBuilder::attr(conv, "winograd_hint", std::int64_t{1}); };
    return with_run(model(d, "m.onnx", p), d);
  }};
  s["onnx-auto-pad"] = {[](const fs::path& d) {
    ModelParts p;
    p.extra_nodes = [](OnnxBuilder& b) {
      b.init("Wt", {2, 2, 1, 1}, {1, 0, 0, 1});
      OnnxBuilder::attr(b.node("ConvTranspose", "up", {"bn_out", "Wt"}, {"Y"}), "auto_pad", std::string("SAME_UPPER"));
    };
    return with_run(model(d, "m.onnx", p), d);
  }};
  s["onnx-bn-spatial"] = {[](const fs::path& d) { return with_run(model(d, "m.onnx", second_bn("spatial", 0)), d); }};
  s["onnx-training-mode"] = {[](const fs::path& d) { return with_run(model(d, "m.onnx", second_bn("training_mode", 1)), d); }};
  s["onnx-pad-mode"] = {[](const fs::path& d) {
    ModelParts p;
    p.extra_nodes = [](OnnxBuilder& b) {
      b.init_int64("pads", {0, 0, 0, 0, 0, 0, 0, 0});
      OnnxBuilder::attr(b.node("Pad", "pad", {"bn_out", "pads"}, {"Y"}), "mode", std::string("reflect"));
    };
    return with_run(model(d, "m.onnx", p), d);
  }};
  s["onnx-axis-out-of-range"] = {[](const fs::path& d) {
    ModelParts p;
    p.extra_nodes = [](OnnxBuilder& b) {
      OnnxBuilder::attr(b.node("Concat", "cat", {"bn_out", "bn_out"}, {"Y"}), "axis", std::int64_t{4});
    };
    return with_run(model(d, "m.onnx", p), d);
  }};
  // issue 17: external bisect (classes 1, 6, 9) ----------------------------------------
  const auto bisect = [](const std::string& passes, const std::string& extra, const foldcheck::Shape& ref_shape = {4}) {
    return [=](const fs::path& d) {
      put(d / "r.npy", npy(Tensor{ref_shape, std::vector<double>(ref_shape[0], 0.5), DType::Float64}));
      return "bisect --cmd 'cp " + (d / "r.npy").string() + " {out}' --passes '" + passes + "' --reference " +
             (d / "r.npy").string() + extra;
    };
  };
  s["bisect-pass-placeholder"] = {bisect("A,{disabled}", "")};
  s["bisect-pass-shell-text"] = {[=](const fs::path& d) { return bisect("A,$(touch " + (d / "x").string() + ")", "")(d); }, true, "",
                                 [](const fs::path& d) { CHECK_FALSE(fs::exists(d / "x")); }};
  s["bisect-pass-empty"] = {bisect("A,,B", "")};
  s["bisect-pass-twice"] = {bisect("A,B,A", "")};
  // 2000 names of 10 bytes, pasted 7 times by {enabled}{disabled}: 140 KB in one argument.
  s["bisect-command-too-long"] = {[](const fs::path& d) {
    put(d / "r.npy", npy(Tensor{{4}, std::vector<double>(4, 0.5), DType::Float64}));
    std::string passes;
    for (int i = 0; i < 2000; ++i) passes += fmt::format("{}P{:08d}", i ? "," : "", i);
    std::string cmd = "cp " + (d / "r.npy").string() + " {out}";
    for (int i = 0; i < 7; ++i) cmd += " {enabled}{disabled}";
    return "bisect --cmd '" + cmd + "' --passes " + passes + " --reference " + (d / "r.npy").string();
  }};
  s["bisect-timeout-nan"] = {bisect("A", " --timeout nan")};
  s["bisect-timeout-negative"] = {bisect("A", " --timeout -1")};
  s["bisect-threshold-nan"] = {bisect("A", " --threshold-ulp nan")};
  s["bisect-empty-reference"] = {bisect("A", "", {0})};
  // issue 18: what the external bisect is told the command computes
  s["bisect-reference-nan"] = {[](const fs::path& d) {
    put(d / "r.npy", npy(Tensor{{2}, {0.5, std::nan("")}, DType::Float64}));
    return "bisect --cmd 'cp " + (d / "r.npy").string() + " {out}' --passes A --reference " + (d / "r.npy").string();
  }};
  // The layer: x [1,2,4,4], w [2,2,3,3], a fresh BatchNorm; `w_values` replaces the weights.
  const auto bisect_layer = [](const std::string& extra, std::vector<double> w_values = {}) {
    return [=](const fs::path& d) {
      std::vector<double> x(32), w = w_values;
      for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.25 * static_cast<double>(i % 7) - 0.5;
      if (w.empty())
        for (std::size_t i = 0; i < 36; ++i) w.push_back(0.125 * static_cast<double>(i % 5) - 0.25);
      put(d / "x.npy", npy(Tensor{{1, 2, 4, 4}, x, DType::Float32}));
      put(d / "w.npy", npy(Tensor{{2, 2, 3, 3}, w, DType::Float32}));
      foldcheck::write_npz((d / "bn.npz").string(), {{"gamma", Tensor{{2}, {1, 1}, DType::Float32}}});
      put(d / "r.npy", npy(Tensor{{1, 2, 4, 4}, std::vector<double>(32, 0.5), DType::Float32}));
      return "bisect --cmd 'cp " + (d / "r.npy").string() + " {out}' --passes A --input " + (d / "x.npy").string() +
             " --weights " + (d / "w.npy").string() + extra;
    };
  };
  s["bisect-layer-incomplete"] = {[=](const fs::path& d) {
    const std::string cmd = bisect_layer("")(d);
    return cmd.substr(0, cmd.find(" --input ")) + " --weights " + (d / "w.npy").string();
  }};
  s["bisect-arithmetic-reference"] = {[=](const fs::path& d) {
    const std::string cmd = bisect_layer("")(d);
    return cmd.substr(0, cmd.find(" --input ")) + " --reference " + (d / "r.npy").string() + " --arithmetic tf32";
  }};
  s["bisect-algorithm-geometry"] = {bisect_layer(" --stride 2 --algorithm fft")};
  s["bisect-two-forms"] = {[=](const fs::path& d) { return bisect_layer(" --bn " + (d / "bn.npz").string() + " --reference " + (d / "r.npy").string())(d); }};
  s["bisect-layer-nonfinite"] = {[=](const fs::path& d) {
    std::vector<double> w(36, 0.5);
    w[3] = std::numeric_limits<double>::infinity();
    return bisect_layer(" --bn " + (d / "bn.npz").string(), w)(d);
  }};
  s["bisect-layer-no-output"] = {[=](const fs::path& d) { return bisect_layer(" --bn " + (d / "bn.npz").string() + " --padding 0 --dilation 3")(d); }};
  s["bisect-layer-padding"] = {[=](const fs::path& d) { return bisect_layer(" --bn " + (d / "bn.npz").string() + " --padding 0")(d); }};
  s["bisect-layer-bn-inexact"] = {[=](const fs::path& d) {
    const std::string args = bisect_layer(" --bn " + (d / "bn.npz").string())(d);
    foldcheck::write_npz((d / "bn.npz").string(), {{"var", Tensor{{2}, {0.1, 0.1}, DType::Float64}}});
    return args;
  }};
  s["bn-params-2d"] = {[=](const fs::path& d) {
    const std::string args = bisect_layer(" --bn " + (d / "bn.npz").string())(d);
    foldcheck::write_npz((d / "bn.npz").string(), {{"gamma", Tensor{{2, 1}, {1, 1}, DType::Float32}}});
    return args;
  }};
  s["quant-bn-params-2d"] = {[](const fs::path& d) {
    foldcheck::write_npz((d / "bn.npz").string(), {{"gamma", Tensor{{2}, {1, 1}, DType::Float32}},
                                                   {"beta", Tensor{{2}, {0, 0}, DType::Float32}},
                                                   {"mean", Tensor{{2}, {0, 0}, DType::Float32}},
                                                   {"var", Tensor{{2, 1}, {1, 1}, DType::Float32}}});
    put(d / "w.npy", npy_f32({2, 1, 1, 1}));
    return "quant-check --weights " + (d / "w.npy").string() + " --bn " + (d / "bn.npz").string();
  }};
  s["bn-count-vs-channels"] = {[](const fs::path& d) {
    put(d / "x.npy", npy_f32({1, 1, 3, 3}));
    put(d / "w.npy", npy_f32({2, 1, 1, 1}));
    put(d / "y.npy", npy_f32({1, 2, 3, 3}));
    foldcheck::write_npz((d / "bn.npz").string(), {{"gamma", Tensor{{3}, {1, 1, 1}, DType::Float32}}});
    return "diagnose --input " + (d / "x.npy").string() + " --weights " + (d / "w.npy").string() + " --bn " +
           (d / "bn.npz").string() + " --observed " + (d / "y.npy").string();
  }};
  s["eps-empty"] = {[=](const fs::path&) { return "explain --original 1,2" + obs + " --eps ''"; }};
  s["field-name-in-path"] = {[=](const fs::path& d) { return "explain --original '" + (d / "a`input`b.npy").string() + "'" + obs; }};
  s["quant-bn-negative-var"] = {[](const fs::path& d) {
    foldcheck::write_npz((d / "bn.npz").string(), {{"gamma", Tensor{{2}, {1, 1}, DType::Float32}},
                                                   {"beta", Tensor{{2}, {0, 0}, DType::Float32}},
                                                   {"mean", Tensor{{2}, {0, 0}, DType::Float32}},
                                                   {"var", Tensor{{2}, {1, -1}, DType::Float32}}});
    put(d / "w.npy", npy_f32({2, 1, 1, 1}));
    return "quant-check --weights " + (d / "w.npy").string() + " --bn " + (d / "bn.npz").string();
  }};
  s["diagnose-groups"] = {[](const fs::path& d) {
    put(d / "x.npy", npy_f32({1, 4, 3, 3}));
    put(d / "w.npy", npy_f32({2, 3, 1, 1}));
    put(d / "y.npy", npy_f32({1, 2, 3, 3}));
    foldcheck::write_npz((d / "bn.npz").string(), {{"gamma", Tensor{{2}, {1, 1}, DType::Float32}}});
    return "diagnose --input " + (d / "x.npy").string() + " --weights " + (d / "w.npy").string() + " --bn " +
           (d / "bn.npz").string() + " --observed " + (d / "y.npy").string();
  }};
  s["diagnose-input-rank"] = {[](const fs::path& d) {
    put(d / "x.npy", npy_f32({3}));
    put(d / "y.npy", npy_f32({3}));
    foldcheck::write_npz((d / "bn.npz").string(), {{"gamma", Tensor{{3}, {1, 1, 1}, DType::Float32}}});
    return "diagnose --input " + (d / "x.npy").string() + " --bn " + (d / "bn.npz").string() + " --observed " +
           (d / "y.npy").string();
  }};
  s["bisect-geometry-without-layer"] = {bisect("A", " --stride 2")};
  s["bisect-coarse-reference"] = {[](const fs::path& d) {
    put(d / "r16.npy", npy(Tensor{{4}, {0.5, 1, 2, 3}, DType::Float16}));
    return "bisect --cmd 'cp " + (d / "r16.npy").string() + " {out}' --passes A --reference " + (d / "r16.npy").string();
  }};
  s["bisect-output-layout"] = {[](const fs::path& d) {
    put(d / "r.npy", npy(Tensor{{1, 2, 4, 4}, std::vector<double>(32, 0.5), DType::Float64}));
    put(d / "nhwc.npy", npy(Tensor{{1, 4, 4, 2}, std::vector<double>(32, 0.5), DType::Float32}));
    return "bisect --cmd 'cp " + (d / "nhwc.npy").string() + " {out}' --passes A --reference " + (d / "r.npy").string();
  }};
  // issue 17: model runner (classes 3, 4, 5, 7)
  // Each model is the base Conv -> BatchNormalization with one node (or a few) after bn.
  const auto after_bn = [](std::function<void(OnnxBuilder&)> nodes) {
    return [=](const fs::path& d) {
      ModelParts p;
      p.extra_nodes = nodes;
      return "accuracy-diff " + model(d, "m.onnx", p);
    };
  };
  const auto reshape_to = [=](std::vector<std::int64_t> target) {
    return after_bn([=](OnnxBuilder& b) {
      b.init_int64("shape", target);
      b.node("Reshape", "reshape", {"bn_out", "shape"}, {"Y"});
    });
  };
  // A MatMul -> BatchNormalization on a 3-D input: the BatchNorm scales axis 1 (rows), not
  // the MatMul's features; it was folded per feature and an honest engine called UNEXPECTED.
  s["onnx-matmul-rank3-bn"] = {[](const fs::path& d) {
    OnnxBuilder b;
    b.input("X", {2, 6, 8});
    b.output("Y", {2, 6, 6});
    b.init("W", {8, 6}, std::vector<double>(48, 0.25));
    for (const char* k : {"g", "bb", "mu", "v"}) b.init(k, {6}, std::vector<double>(6, 1.0));
    b.node("MatMul", "mm", {"X", "W"}, {"h"});
    b.node("BatchNormalization", "bn", {"h", "g", "bb", "mu", "v"}, {"Y"});
    b.save((d / "mm.onnx").string());
    return "accuracy-diff " + (d / "mm.onnx").string();
  }};
  s["onnx-reshape-wraps"] = {reshape_to({std::int64_t(1) << 32, std::int64_t(1) << 32, 2})};
  s["onnx-reshape-negative"] = {reshape_to({1, -2, 16})};
  s["onnx-reshape-zero-past-rank"] = {reshape_to({1, 2, 4, 4, 0})};
  const auto pad_by = [=](std::vector<std::int64_t> pads) {
    return after_bn([=](OnnxBuilder& b) {
      b.init_int64("pads", pads);
      b.node("Pad", "pad", {"bn_out", "pads"}, {"Y"});
    });
  };
  s["onnx-pad-overcrop"] = {pad_by({0, 0, -5, 0, 0, 0, 0, 0})};
  s["onnx-pad-over-limit"] = {pad_by({0, 0, 100000, 100000, 0, 0, 100000, 100000})};
  s["onnx-convtranspose-group-zero"] = {after_bn([](OnnxBuilder& b) {
    b.init("Wt", {2, 1, 1, 1}, {1, 1});
    OnnxBuilder::attr(b.node("ConvTranspose", "up", {"bn_out", "Wt"}, {"Y"}), "group", std::int64_t{0});
  })};
  s["onnx-convtranspose-output-padding"] = {after_bn([](OnnxBuilder& b) {
    b.init("Wt", {2, 2, 1, 1}, {1, 0, 0, 1});
    OnnxBuilder::attr(b.node("ConvTranspose", "up", {"bn_out", "Wt"}, {"Y"}), "output_padding", std::vector<std::int64_t>{1, 1});
  })};
  s["onnx-kernel-larger-than-input"] = {after_bn([](OnnxBuilder& b) {
    OnnxBuilder::attr(b.node("MaxPool", "pool", {"bn_out"}, {"Y"}), "kernel_shape", std::vector<std::int64_t>{6, 6});
  })};
  // An engine's model with an op of a domain foldcheck does not implement (ONNX Runtime's
  // `all` level writes com.microsoft.nchwc:Conv with blocked weights): refused by name, never
  // read as an ONNX Conv (whose weights it would misread: false alarms on every layer).
  s["onnx-observed-nchwc-conv"] = {[](const fs::path& d) {
    ModelParts p;
    p.tweak = [](onnx::NodeProto& conv, onnx::NodeProto&) { conv.set_domain("com.microsoft.nchwc"); };
    const std::string observed = model(d, "nchwc.onnx", p);
    return "accuracy-diff " + model(d, "m.onnx") + " --observed " + observed + " --weights-only";
  }};
  s["onnx-conv-kernel-larger-than-input"] = {[](const fs::path& d) {
    ModelParts p;
    p.tweak = [](onnx::NodeProto& conv, onnx::NodeProto&) {
      conv.clear_attribute();
      OnnxBuilder::attr(conv, "dilations", std::vector<std::int64_t>{3, 3});
    };
    return "accuracy-diff " + model(d, "m.onnx", p);
  }};
  s["onnx-pool-pad-not-below-kernel"] = {after_bn([](OnnxBuilder& b) {
    auto& n = b.node("AveragePool", "pool", {"bn_out"}, {"Y"});
    OnnxBuilder::attr(n, "kernel_shape", std::vector<std::int64_t>{2, 2});
    OnnxBuilder::attr(n, "pads", std::vector<std::int64_t>{2, 0, 0, 0});
  })};
  s["onnx-squeeze-not-one"] = {after_bn([](OnnxBuilder& b) {
    b.init_int64("axes", {1});
    b.node("Squeeze", "sq", {"bn_out", "axes"}, {"Y"});
  })};
  s["onnx-concat-mismatch"] = {after_bn([](OnnxBuilder& b) {
    b.node("Flatten", "flat", {"bn_out"}, {"f"});
    OnnxBuilder::attr(b.node("Concat", "cat", {"bn_out", "f"}, {"Y"}), "axis", std::int64_t{1});
  })};
  s["onnx-matmul-mismatch"] = {after_bn([](OnnxBuilder& b) {
    b.init("M", {3, 2}, {1, 2, 3, 4, 5, 6});
    b.node("MatMul", "mm", {"bn_out", "M"}, {"Y"});
  })};
  s["onnx-graph-cycle"] = {after_bn([](OnnxBuilder& b) {
    b.node("Add", "add", {"bn_out", "loop"}, {"sum"});
    b.node("Relu", "relu", {"sum"}, {"loop"});
    b.node("Identity", "out", {"loop"}, {"Y"});
  })};
  s["onnx-undefined-tensor"] = {after_bn([](OnnxBuilder& b) { b.node("Add", "add", {"bn_out", "ghost"}, {"Y"}); })};
  s["onnx-output-twice"] = {after_bn([](OnnxBuilder& b) {
    b.node("Relu", "relu", {"bn_out"}, {"Y"});
    b.node("Sigmoid", "sig", {"bn_out"}, {"Y"});
  })};
  s["onnx-gemm-flag"] = {after_bn([](OnnxBuilder& b) {
    b.node("Flatten", "flat", {"bn_out"}, {"f"});
    b.init("F", {32, 2}, std::vector<double>(64, 0.5));
    OnnxBuilder::attr(b.node("Gemm", "fc", {"f", "F"}, {"Y"}), "transA", std::int64_t{2});
  })};
  // The class "wrongly typed or repeated attributes, duplicate definitions": every one was
  // read as if absent (its default) or the last one won, and the model judged EXPECTED.
  const auto tweak = [](std::function<void(onnx::NodeProto&, onnx::NodeProto&)> f) {
    return [=](const fs::path& d) {
      ModelParts p;
      p.tweak = f;
      return "accuracy-diff " + model(d, "m.onnx", p);
    };
  };
  // Nodes added to the proto itself after bn (for tensor types the builder does not write).
  const auto tweak_model = [](std::function<void(onnx::ModelProto&)> f) {
    return [=](const fs::path& d) {
      ModelParts p;
      p.extra_nodes = [](OnnxBuilder&) {};
      p.tweak_proto = f;
      return "accuracy-diff " + model(d, "m.onnx", p);
    };
  };
  s["onnx-attribute-wrong-kind"] = {tweak([](onnx::NodeProto&, onnx::NodeProto& bn) {
    bn.mutable_attribute(0)->clear_f();
    bn.mutable_attribute(0)->set_type(onnx::AttributeProto::INT);
    bn.mutable_attribute(0)->set_i(1);
  })};
  s["onnx-attribute-wrong-kind-flag"] = {after_bn([](OnnxBuilder& b) {
    b.node("Flatten", "flat", {"bn_out"}, {"f"});
    b.init("F", {32, 2}, std::vector<double>(64, 0.5));
    OnnxBuilder::attr(b.node("Gemm", "fc", {"f", "F"}, {"Y"}), "transA", 1.0f);
  })};
  s["onnx-attribute-twice"] = {tweak([](onnx::NodeProto& conv, onnx::NodeProto&) {
    OnnxBuilder::attr(conv, "pads", std::vector<std::int64_t>{0, 0, 0, 0});
  })};
  s["onnx-initializer-twice"] = {[](const fs::path& d) {
    ModelParts p;
    p.extra_nodes = [](OnnxBuilder& b) {
      b.init("gamma", {2}, {5.0, 5.0});
      b.node("Identity", "id", {"bn_out"}, {"Y"});
    };
    return "accuracy-diff " + model(d, "m.onnx", p);
  }};
  s["onnx-output-is-initializer"] = {after_bn([](OnnxBuilder& b) {
    b.init("r", {1, 2, 4, 4}, std::vector<double>(32, 0.0));
    b.node("Relu", "relu", {"bn_out"}, {"r"});
    b.node("Identity", "id", {"r"}, {"Y"});
  })};
  s["onnx-no-default-opset"] = {[](const fs::path& d) {
    ModelParts p;
    p.tweak_proto = [](onnx::ModelProto& m) { m.clear_opset_import(); };
    return "accuracy-diff " + model(d, "m.onnx", p);
  }};
  s["onnx-integer-in-float-op"] = {after_bn([](OnnxBuilder& b) {
    b.init_int64("k", {3});
    b.node("Add", "add", {"bn_out", "k"}, {"Y"});
  })};
  s["onnx-mixed-float-types"] = {after_bn([](OnnxBuilder& b) {
    b.init("k", {1}, {3}, DType::Float64);
    b.node("Add", "add", {"bn_out", "k"}, {"Y"});
  })};
  s["onnx-int32-as-shape"] = {tweak_model([](onnx::ModelProto& m) {
    auto* t = m.mutable_graph()->add_initializer();
    t->set_name("shape");
    t->set_data_type(onnx::TensorProto::INT32);
    t->add_dims(4);
    for (const int v : {1, 2, 4, 4}) t->add_int32_data(v);
    auto* n = m.mutable_graph()->add_node();
    n->set_op_type("Reshape");
    n->set_name("reshape");
    n->add_input("bn_out");
    n->add_input("shape");
    n->add_output("Y");
  })};
  s["onnx-auto-pad-with-pads"] = {tweak([](onnx::NodeProto& conv, onnx::NodeProto&) {
    OnnxBuilder::attr(conv, "auto_pad", std::string("SAME_UPPER"));
  })};
  s["onnx-pool-stride-zero"] = {after_bn([](OnnxBuilder& b) {
    auto& n = b.node("MaxPool", "pool", {"bn_out"}, {"Y"});
    OnnxBuilder::attr(n, "kernel_shape", std::vector<std::int64_t>{1, 1});
    OnnxBuilder::attr(n, "strides", std::vector<std::int64_t>{0, 1});
  })};
  s["onnx-too-many-inputs"] = {after_bn([](OnnxBuilder& b) { b.node("GlobalAveragePool", "gap", {"bn_out", "bn_out"}, {"Y"}); })};
  // BatchNormalization's types: one T before opset 15 (DOUBLE parameters on a FLOAT input);
  // from 15, scale and B one T1, mean and var one T2.
  s["onnx-bn-mixed-types"] = {[](const fs::path& d) {
    ModelParts p;
    p.tweak_proto = [](onnx::ModelProto& m) {
      for (auto& t : *m.mutable_graph()->mutable_initializer())
        if (t.name() == "var") {
          std::string raw;
          for (const double v : {1.0, 0.5}) raw.append(reinterpret_cast<const char*>(&v), 8);
          t.set_data_type(onnx::TensorProto::DOUBLE);
          t.set_raw_data(raw);
        }
    };
    return "accuracy-diff " + model(d, "m.onnx", p);
  }};
  s["onnx-integer-graph-input"] = {[](const fs::path& d) {
    ModelParts p;
    p.tweak_proto = [](onnx::ModelProto& m) {
      m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
    };
    return "accuracy-diff " + model(d, "m.onnx", p) + " --weights-only";
  }};
  s["onnx-float-as-shape"] = {after_bn([](OnnxBuilder& b) {
    b.init("shape", {4}, {1, 2, 4, 4});
    b.node("Reshape", "reshape", {"bn_out", "shape"}, {"Y"});
  })};
  s["onnx-clip-attribute-at-opset-13"] = {after_bn([](OnnxBuilder& b) {
    OnnxBuilder::attr(b.node("Clip", "clip", {"bn_out"}, {"Y"}), "max", 6.0f);
  })};
  // W's dims claim 2^28 floats; its data (raw bytes, or typed values) holds 36: refused
  // before allocating, under a 1 GB address-space limit.
  const auto claimed_size = [](Encoding e) {
    return [e](const fs::path& d) {
      ModelParts p;
      p.weight_encoding = e;
      p.tweak_proto = [](onnx::ModelProto& m) {
        auto* t = m.mutable_graph()->mutable_initializer(0);
        for (const auto& [k, v] : {std::pair{0, 16384}, {1, 16384}, {2, 1}, {3, 1}}) t->set_dims(k, v);
      };
      return "accuracy-diff " + model(d, "m.onnx", p);
    };
  };
  s["onnx-claimed-size"] = {claimed_size(Encoding::Raw), true, kAddressSpaceLimit};
  s["onnx-claimed-size-typed"] = {claimed_size(Encoding::Typed), true, kAddressSpaceLimit};
  // Dims of 0 elements over 36 typed values: it passed as an empty weight, and regrouping
  // it divided by zero (found by fuzz_onnx; fuzz/regressions/fuzz_onnx keeps the input).
  s["onnx-zero-dims-with-values"] = {[](const fs::path& d) {
    ModelParts p;
    p.weight_encoding = Encoding::Typed;
    p.tweak_proto = [](onnx::ModelProto& m) { m.mutable_graph()->mutable_initializer(0)->set_dims(0, 0); };
    return "accuracy-diff " + model(d, "m.onnx", p) + " --weights-only";
  }};
  s["onnx-external-symlink"] = {[](const fs::path& d) {
    ModelParts p;
    p.weight_encoding = Encoding::External;
    fs::create_directories(d / "model");
    fs::create_directories(d / "outside");
    const std::string m = model(d / "model", "m.onnx", p);
    fs::rename(d / "model" / "m.data", d / "outside" / "m.data");
    fs::create_directory_symlink(d / "outside", d / "model" / "link");
    onnx::ModelProto mp;
    {
      std::ifstream in(m, std::ios::binary);
      REQUIRE(mp.ParseFromIstream(&in));
    }
    for (auto& kv : *mp.mutable_graph()->mutable_initializer(0)->mutable_external_data())
      if (kv.key() == "location") kv.set_value("link/m.data");
    std::ofstream out(m, std::ios::binary | std::ios::trunc);
    REQUIRE(mp.SerializeToOstream(&out));
    return "accuracy-diff " + m;
  }};
  s["onnx-external-symlink-file"] = {[](const fs::path& d) {
    ModelParts p;
    p.weight_encoding = Encoding::External;
    fs::create_directories(d / "model");
    const std::string m = model(d / "model", "m.onnx", p);
    fs::rename(d / "model" / "m.data", d / "secret.bin");
    fs::create_symlink(d / "secret.bin", d / "model" / "m.data");
    return "accuracy-diff " + m;
  }};
  // --- accepted on purpose ----------------------------------------------------------------
  // Pads and strides of millions around a tiny input: a 3x3 output per channel, whose
  // windows lie almost wholly in the padding. Every kernel must size its scratch by the data
  // (the float path's padded copy, the reference's row panel), not by the padded extent:
  // run under a 1 GB address-space limit.
  auto huge_pads = [](std::int64_t C, std::int64_t O, std::int64_t groups, std::int64_t k, std::int64_t pad) {
    return [=](const fs::path& d) {
      OnnxBuilder b;
      const std::int64_t hw = 4, out = (hw + 2 * pad - k) / pad + 1;
      b.input("X", {1, C, hw, hw});
      b.output("Y", {1, O, out, out});
      std::vector<double> w(static_cast<std::size_t>(O * (C / groups) * k * k));
      for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.125 * static_cast<double>(i % 7) - 0.25;
      b.init("W", {O, C / groups, k, k}, w, DType::Float32);
      b.init("gamma", {O}, std::vector<double>(static_cast<std::size_t>(O), 0.75));
      b.init("beta", {O}, std::vector<double>(static_cast<std::size_t>(O), 0.5));
      b.init("mean", {O}, std::vector<double>(static_cast<std::size_t>(O), 0.25));
      b.init("var", {O}, std::vector<double>(static_cast<std::size_t>(O), 0.5));
      auto& conv = b.node("Conv", "conv", {"X", "W"}, {"C"});
      OnnxBuilder::attr(conv, "pads", std::vector<std::int64_t>{pad, pad, pad, pad});
      OnnxBuilder::attr(conv, "strides", std::vector<std::int64_t>{pad, pad});
      OnnxBuilder::attr(conv, "kernel_shape", std::vector<std::int64_t>{k, k});
      OnnxBuilder::attr(conv, "group", groups);
      b.node("BatchNormalization", "bn", {"C", "gamma", "beta", "mean", "var"}, {"Y"});
      b.save((d / "m.onnx").string());
      put(d / "x.npy", npy_f32({1, C, hw, hw}));
      return "accuracy-diff " + (d / "m.onnx").string() + " --input " + (d / "x.npy").string();
    };
  };
  s["conv-huge-pads-depthwise"] = {huge_pads(32, 32, 32, 3, 1000000), true, kAddressSpaceLimit};
  // A stride of 2^60 + 1: the reference's panel width, 16 pixels times the stride, wrapped
  // in int64 to a small number, and the kernel read far outside it (SIGSEGV).
  s["conv-huge-stride"] = {[](const fs::path& d) {
                             ModelParts p;
                             p.tweak = [](onnx::NodeProto& conv, onnx::NodeProto&) {
                               conv.clear_attribute();
                               OnnxBuilder::attr(conv, "kernel_shape", std::vector<std::int64_t>{3, 3});
                               OnnxBuilder::attr(conv, "strides", std::vector<std::int64_t>{1, (std::int64_t{1} << 60) + 1});
                             };
                             return "accuracy-diff " + model(d, "m.onnx", p) + " --input " + (d / "x.npy").string();
                           },
                           true, kAddressSpaceLimit};
  s["conv-huge-pads-dense"] = {huge_pads(64, 64, 1, 1, 10000000), true, kAddressSpaceLimit};
  s["subnormal-parameters"] = {[](const fs::path& d) {
    return "run " + case_with(d, R"(, "bn": {"gamma": {"init": {"values": [1e-40, 1]}}, "var": 1e-39}, "compare": {"dtypes": ["float32"]})");
  }};
  s["asymmetric-pads"] = {[](const fs::path& d) {
    const std::string base = kCase;
    std::string c = base;
    c.replace(c.find("\"padding\": 1"), 12, "\"padding\": [0, 1, 2, 0]");
    put(d / "case.json", c);
    return "run " + (d / "case.json").string();
  }};
  s["conv-auto-pad"] = {[](const fs::path& d) {
    ModelParts p;
    p.tweak = [](onnx::NodeProto& conv, onnx::NodeProto&) {
      conv.clear_attribute();
      OnnxBuilder::attr(conv, "kernel_shape", std::vector<std::int64_t>{3, 3});
      OnnxBuilder::attr(conv, "auto_pad", std::string("SAME_UPPER"));
    };
    return "accuracy-diff " + model(d, "m.onnx", p) + " --input " + (d / "x.npy").string();
  }};
  // Outputs that are not regular files are written in place, never replaced: a link to
  // /dev/null stays a link and /dev/null a device.
  s["output-device"] = {[](const fs::path& d) {
                          fs::create_symlink("/dev/null", d / "null");
                          return "explain --original 2.1122932 --observed 2.1122828 -o " + (d / "null").string();
                        },
                        false, "", [](const fs::path& d) {
                          CHECK(fs::is_symlink(d / "null"));
                          CHECK(fs::is_character_file("/dev/null"));
                        }};
  s["output-long-name"] = {[](const fs::path& d) {
                             return "explain --original 2.1122932 --observed 2.1122828 -o " + (d / std::string(245, 'r')).string();
                           },
                           false, "", [](const fs::path& d) {
                             CHECK(fs::file_size(d / std::string(245, 'r')) > 0);
                             for (const auto& e : fs::directory_iterator(d))
                               CHECK(e.path().filename().string().find(".tmp") == std::string::npos);
                           }};
  s["all-zero-weights"] = {[](const fs::path&) { return std::string("explain --original 0,0 --observed 0,0"); }};
  // An engine adapter's output that breaks the protocol fails that engine (MISTRUSTED, exit
  // 1, the message in its `failed`); the row's message is checked there. The adapter is a
  // shell script writing OUTDIR; the model is the base conv + BatchNorm.
  const auto adapter_row = [](const std::string& script, const std::string& message) {
    return Setup{[=](const fs::path& d) {
                   put(d / "adapter.sh", script);
                   return "engines " + model(d, "m.onnx") + " --input " + (d / "x.npy").string() +
                          " --adapter 'shell=sh " + (d / "adapter.sh").string() + " {outdir} {model}' -q --format json";
                 },
                 true, "",
                 [=](const fs::path& d) {
                   const nlohmann::json j = nlohmann::json::parse(slurp(d / "out.json"));
                   REQUIRE(j["engines"].size() == 1);
                   CHECK(j["engines"][0]["verdict"] == "MISTRUSTED");
                   const std::string failed =
                       j["engines"][0]["failed"].is_string() ? j["engines"][0]["failed"].get<std::string>() : "";
                   INFO("failed: " << failed);
                   CHECK(std::regex_search(failed, pattern_regex(message)));
                 }};
  };
  const std::string manifest = R"(echo '{"protocol": 1, "engine": "x", )";
  s["engine-manifest-unknown-key"] =
      adapter_row(manifest + "\"fusion_preserverd\": false}' > \"$1/manifest.json\"\n",
                  "manifest.json: unknown key `fusion_preserverd` (the manifest's keys: protocol, engine, …)");
  s["engine-manifest-arithmetic"] = adapter_row(manifest + "\"arithmetic\": \"tf16\"}' > \"$1/manifest.json\"\n",
                                                "manifest.json: `arithmetic`: unknown arithmetic 'tf16' (expected "
                                                "float32|tf32|bf16|fp16|fp16-accumulate|bf16x3)");
  s["engine-manifest-unknown-name"] =
      adapter_row(manifest + "\"values\": {\"bn_outt\": \"v.npy\"}}' > \"$1/manifest.json\"\n",
                  "manifest.json: `values` names 'bn_outt', which is not a value of the model");
  s["engine-folded-model-fifo"] =
      adapter_row("mkfifo \"$1/f.onnx\"\n" + manifest + "\"folded_model\": \"f.onnx\"}' > \"$1/manifest.json\"\n",
                  "f.onnx: not a regular file (a FIFO): the ONNX model must be a regular file inside the adapter's "
                  "output directory");
  s["engine-folded-model-link-out"] =
      adapter_row("ln -s \"$2\" \"$1/f.onnx\"\n" + manifest + "\"folded_model\": \"f.onnx\"}' > \"$1/manifest.json\"\n",
                  "f.onnx: leads outside the adapter's output directory (a link?): not read");
  s["engine-folded-model-outdir"] =
      adapter_row(manifest + "\"folded_model\": \".\"}' > \"$1/manifest.json\"\n",
                  "'s OUTDIR/.: is the adapter's output directory itself, a directory: the ONNX model must be a "
                  "regular file inside it");
  // OUTDIR itself replaced by a link to a directory elsewhere (beside the model here), whose
  // manifest would have been read.
  s["engine-outdir-link"] = adapter_row(
      "e=\"$(dirname \"$2\")/elsewhere\"; mkdir -p \"$e\"\n" + manifest + R"("notes": ["from elsewhere"]}' > )" +
          "\"$e/manifest.json\"\nrm -r \"$1\" && ln -s \"$e\" \"$1\"\n",
      "engine_1: the adapter's output directory is no longer the directory foldcheck made: it leads to …/elsewhere "
      "now (replaced by a link, or a directory above it was): nothing in it is read");
  // An own adapter's label and command, refused before anything runs (engine_catalog.hpp).
  s["engine-adapter-label-blank"] = {
      [](const fs::path& d) { return "engines " + model(d, "m.onnx") + " --adapter ' =true {outdir}'"; }};
  s["engine-adapter-label-control"] = {[](const fs::path& d) {
    return "engines " + model(d, "m.onnx") + " --adapter \"$(printf 'a\\tb=true {outdir}')\"";
  }};
  s["engine-adapter-command-blank"] = {
      [](const fs::path& d) { return "engines " + model(d, "m.onnx") + " --adapter 'a=  '"; }};

  return s;
}

}  // namespace

TEST_CASE("bad-input catalogue: every row of BAD_INPUTS.md, exit code and message", "[cli][errors][catalogue]") {
  const std::vector<Row> rows = catalogue();
  REQUIRE(rows.size() >= 40);
  auto table = setups();
  std::set<std::string> ids;
  for (const Row& row : rows) {
    INFO("row id used twice: " << row.id);
    CHECK(ids.insert(row.id).second);
  }
  for (const Row& row : rows) {
    DYNAMIC_SECTION(row.id) {
      INFO("row " << row.id << ": " << row.expect);
      const auto it = table.find(row.id);
      REQUIRE(it != table.end());  // every row has a setup here
      const Setup& st = it->second;
      const fs::path dir = tmp("catalogue_" + row.id);
      fs::remove_all(dir);
      fs::create_directories(dir);
      std::string args = st.args(dir);
      const fs::path out = dir / "out.json";
      if (st.output_flag) args += " -o " + out.string();
      INFO("foldcheck " << args);
      const Result r = st.shell_prefix.empty() ? run(args) : run_through_shell(st.shell_prefix, args);
      // FOLDCHECK_CATALOGUE_PRINT=1 prints what each row gives (for writing a new row).
      if (std::getenv("FOLDCHECK_CATALOGUE_PRINT")) std::cout << row.id << "\t" << r.code << "\t" << r.err << std::flush;
      if (row.expect.rfind("exit ", 0) == 0) {
        CHECK(r.code == std::stoi(row.expect.substr(5)));
        CHECK(r.err.find("error") == std::string::npos);
      } else {
        INFO("stderr: " << r.err);
        CHECK(r.code == 2);
        CHECK(r.out.empty());
        // One line ("Run 'foldcheck --help' for usage." may follow a usage error).
        const std::string first = r.err.substr(0, r.err.find('\n'));
        const std::string rest = r.err.size() > first.size() + 1 ? r.err.substr(first.size() + 1) : "";
        CHECK((rest.empty() || rest == "Run 'foldcheck --help' for usage.\n"));
        const std::string prefix = "foldcheck: error: ";
        REQUIRE(first.rfind(prefix, 0) == 0);
        CHECK(std::regex_match(first.substr(prefix.size()), pattern_regex(row.expect)));
        if (st.output_flag) CHECK_FALSE(fs::exists(out));
      }
      if (st.after) st.after(dir);
      fs::remove_all(dir);
    }
  }
  // Every setup is a row of the document.
  for (const auto& entry : table) {
    const std::string& id = entry.first;  // (a structured binding cannot be captured under clang 14)
    INFO("setup without a row in BAD_INPUTS.md: " << id);
    CHECK(std::any_of(rows.begin(), rows.end(), [&](const Row& r) { return r.id == id; }));
  }
}
