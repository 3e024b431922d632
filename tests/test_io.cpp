// .npy/.npz readers and case files: round trips and every malformed input gives an
// InputError that names the file.
#include <catch2/catch.hpp>

#include "shipped_cases.hpp"

#include <filesystem>
#include <fstream>
#include <functional>
#include <unistd.h>

#include "foldcheck/case_file.hpp"
#include "foldcheck/errors.hpp"
#include "foldcheck/npy.hpp"
#include "foldcheck/number_list.hpp"

using namespace foldcheck;
namespace fs = std::filesystem;

namespace {
fs::path tmpdir() {
  fs::path p = fs::temp_directory_path() / ("foldcheck_test_io_" + std::to_string(::getpid()));
  fs::create_directories(p);
  return p;
}
void write(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }
std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("npy round trips float16 - float32 and float64 exactly", "[io]") {
  for (DType t : {DType::Float16, DType::Float32, DType::Float64}) {
    Tensor a{{2, 3}, {1.5, -0.25, 3.0, 0x1p-14, 65504.0, -0.0}, t};
    const Tensor b = parse_npy(serialize_npy(a), "mem");
    CHECK(b.shape == a.shape);
    CHECK(b.dtype == t);
    CHECK(b.data == a.data);
  }
  Tensor s{{}, {2.0}, DType::Float32};
  CHECK(parse_npy(serialize_npy(s), "mem").data.size() == 1);
}

TEST_CASE("malformed npy files are refused with a message naming them", "[io]") {
  const fs::path d = tmpdir();
  const std::string good = serialize_npy(Tensor{{4}, {1, 2, 3, 4}, DType::Float32});
  write(d / "trunc.npy", good.substr(0, good.size() - 3));
  CHECK(message_of([&] { read_npy((d / "trunc.npy").string()); }).find("truncated data") != std::string::npos);
  write(d / "magic.npy", "NOTNUMPY" + good.substr(8));
  CHECK(message_of([&] { read_npy((d / "magic.npy").string()); }).find("bad magic") != std::string::npos);
  std::string i8 = good;
  i8.replace(i8.find("<f4"), 3, "|i1");
  write(d / "int.npy", i8);
  CHECK(message_of([&] { read_npy((d / "int.npy").string()); }).find("unsupported dtype") != std::string::npos);
  std::string huge = good;
  huge.replace(huge.find("(4,)"), 4, "(99999999999,)");
  CHECK(message_of([&] { parse_npy(huge, "huge"); }).find("exceeds the limit") != std::string::npos);
  CHECK(message_of([&] { read_npy((d / "missing.npy").string()); }).find("cannot open") != std::string::npos);
  fs::remove_all(d);
}

TEST_CASE("npz round trip", "[io]") {
  const fs::path d = tmpdir();
  write_npz((d / "bn.npz").string(), {{"gamma", Tensor{{2}, {1.0, 2.0}, DType::Float32}},
                                      {"eps", Tensor{{}, {1e-3}, DType::Float64}}});
  const auto m = read_npz((d / "bn.npz").string());
  CHECK(m.at("gamma").data == std::vector<double>{1.0, 2.0});
  CHECK(m.at("eps").data[0] == 1e-3);
  write(d / "bad.npz", "this is not a zip");
  CHECK(message_of([&] { read_npz((d / "bad.npz").string()); }).find("cannot open as .npz") != std::string::npos);
  fs::remove_all(d);
}

TEST_CASE("number lists", "[io]") {
  CHECK(parse_number_list("1, -2.5e-3,3", "x") == std::vector<double>{1, -2.5e-3, 3});
  CHECK(message_of([] { parse_number_list("1,,2", "--original"); }).find("empty entry") != std::string::npos);
  CHECK(message_of([] { parse_number_list("1,abc", "--original"); }).find("'abc' is not a number") != std::string::npos);
  CHECK(message_of([] { parse_number_list("1e999", "x"); }).find("out of range") != std::string::npos);
}

TEST_CASE("every shipped case file loads and materializes in each of its dtypes", "[io][cases]") {
  int n = 0;
  for (const fs::path& case_path : shipped_case_files()) {
    const CaseSpec s = load_case(case_path.string());
    for (DType t : s.dtypes) {
      const CaseData d = materialize(s, t);
      CHECK(d.graph.nodes.size() == 2);
      for (double v : d.input) REQUIRE(representable(t, v));
    }
    ++n;
  }
  CHECK(n >= 4);
}

TEST_CASE("case files: drawing is deterministic and per-tensor", "[io][cases]") {
  const CaseSpec s = load_case(std::string(FOLDCHECK_SOURCE_DIR) + "/cases/tvm_thread.json");
  const CaseData a = materialize(s, DType::Float32), b = materialize(s, DType::Float32);
  CHECK(a.input == b.input);
  CHECK(a.graph.nodes[0].weight.data == b.graph.nodes[0].weight.data);
  CHECK(a.graph.nodes[0].weight.data[0] == static_cast<double>(2.1122932f));
}

TEST_CASE("bad case files are refused with the field named", "[io][cases]") {
  const fs::path d = tmpdir();
  const std::string base = R"({"seed": 1, "conv": {"in_channels": 2, "out_channels": 2, "kernel": 1},
    "input": {"shape": [1, 2, 3, 3], "init": {"normal": {}}}, "weights": {"init": {"const": 0.5}})";
  auto with = [&](const std::string& extra) {
    write(d / "c.json", base + extra + "}");
    return message_of([&] { load_case((d / "c.json").string()); });
  };
  CHECK(with("").empty());
  CHECK(with(R"(, "bn": {"var": -1})").find("negative variance") != std::string::npos);
  CHECK(with(R"(, "bn": {"var": 0, "eps": 0})").find("var + eps <= 0") != std::string::npos);
  CHECK(with(R"(, "colour": 1)").find("unknown key 'colour'") != std::string::npos);
  CHECK(with(R"(, "compare": {"recipes": ["tensorrt"]})").find("unknown recipe") != std::string::npos);
  CHECK(with(R"(, "observed_weights": {"prefix": [1, 2, 3, 4, 5]})").find("5 values but the weights have 4") !=
        std::string::npos);
  CHECK(with(R"(, "bn": {"gamma": {"init": {"values": [1, 2, 3]}}})").find("3 values given") != std::string::npos);
  write(d / "c.json", "{\"seed\": 1,");
  CHECK(message_of([&] { load_case((d / "c.json").string()); }).find("invalid JSON") != std::string::npos);
  fs::remove_all(d);
}
