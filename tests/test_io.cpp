// .npy/.npz readers and case files: round trips and every malformed input gives an
// InputError that names the file.
#include <catch2/catch.hpp>

#include "shipped_cases.hpp"

#include <filesystem>
#include <fstream>
#include <functional>
#include <unistd.h>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/io/case_file.hpp"
#include "foldcheck/io/input_file.hpp"
#include "foldcheck/io/limits.hpp"
#include "foldcheck/io/npy.hpp"
#include "foldcheck/io/number_list.hpp"
#include "foldcheck/io/output_file.hpp"
#include "foldcheck/io/suite_file.hpp"
#include "npy_bytes.hpp"

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
  // An ml_dtypes bfloat16 array is saved as 2-byte void: refused (no type is named), saying how to give it.
  std::string v2 = serialize_npy(Tensor{{4}, {1, 2, 3, 4}, DType::Float16});
  v2.replace(v2.find("<f2"), 3, "<V2");
  write(d / "bf16.npy", v2);
  CHECK(message_of([&] { read_npy((d / "bf16.npy").string()); }).find("save it as float32") != std::string::npos);
  std::string huge = good;
  huge.replace(huge.find("(4,)"), 4, "(99999999999,)");
  CHECK(message_of([&] { parse_npy(huge, "huge"); }).find("over the limit of 268435456") != std::string::npos);
  CHECK(message_of([&] { read_npy((d / "missing.npy").string()); }).find("cannot read .npy file (No such file") !=
        std::string::npos);
  std::string overflow = good;
  overflow.replace(overflow.find("(4,)"), 4, "(4294967296, 4294967296, 4)");
  CHECK(message_of([&] { parse_npy(overflow, "o"); }).find("more than 2^63 elements") != std::string::npos);
  CHECK(message_of([&] { parse_npy(good + "xx", "tail"); }).find("2 bytes after the data") != std::string::npos);
  fs::remove_all(d);
}

TEST_CASE("npy headers: the dict grammar, quotes, Python 2 longs, and what is refused", "[io][limits]") {
  const auto with_header = foldcheck::testing::npy_with_header;
  const std::string two(8, '\0');  // two float32 zeros
  CHECK(parse_npy(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", two), "a").data.size() == 2);
  CHECK(parse_npy(with_header("{\"shape\": (1L, 2L), \"descr\": \"<f4\", \"fortran_order\": False}", two), "b").shape ==
        Shape{1, 2});
  CHECK(parse_npy(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", two.substr(4)), "c").data.size() == 1);
  const std::pair<const char*, const char*> bad[] = {
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}", "unexpected key 'extra'"},
      {"{'descr': '<f4', 'shape': (2,)}", "no 'fortran_order'"},
      {"{'descr': '<f4', 'fortran_order': True, 'shape': (2,)}", "Fortran-ordered"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}", "tuple of non-negative integers"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} trailing", "text after the dict"},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': (2,)}", "malformed .npy header"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", "dimension out of range"},
  };
  for (const auto& entry : bad) {
    const char* dict = entry.first;  // (a structured binding cannot be captured under clang 14)
    const char* msg = entry.second;
    INFO(dict);
    CHECK(message_of([&] { parse_npy(with_header(dict, two), "h"); }).find(msg) != std::string::npos);
  }
  // A header claiming 10^12 elements is refused from the header alone: nothing is allocated.
  const std::string tera = with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (1000000, 1000000), }", "");
  CHECK(message_of([&] { parse_npy(tera, "t"); }).find("1000000000000 elements, over the limit") != std::string::npos);
  // The limit is configurable and applies to every reader.
  set_max_elements(3);
  CHECK(message_of([&] { parse_npy(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }",
                                              std::string(16, '\0')), "s"); })
            .find("4 elements, over the limit of 3") != std::string::npos);
  set_max_elements(kDefaultMaxElements);
  CHECK(parse_npy(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", std::string(16, '\0')), "s")
            .data.size() == 4);
}

TEST_CASE("checked sizes: negative, overflowing and over-limit shapes", "[limits]") {
  CHECK(checked_element_count({}, "s") == 1);
  CHECK(checked_element_count({3, 0, std::int64_t(1) << 62}, "z") == 0);  // an empty tensor is not an overflow
  CHECK(message_of([] { checked_element_count({2, -1}, "neg"); }) == "neg: negative dimension in shape [2, -1]");
  CHECK(message_of([] { checked_element_count({std::int64_t(1) << 14, std::int64_t(1) << 15}, "big"); })
            .find("big: shape [16384, 32768] has 536870912 elements, over the limit of 268435456") == 0);
  CHECK(message_of([] { checked_element_count({std::int64_t(1) << 32, std::int64_t(1) << 32}, "ovf"); })
            .find("more than 2^63 elements") != std::string::npos);
  CHECK_THROWS_AS(set_max_elements(0), InputError);
}

TEST_CASE("npz round trip", "[io]") {
  const fs::path d = tmpdir();
  write_npz((d / "bn.npz").string(), {{"gamma", Tensor{{2}, {1.0, 2.0}, DType::Float32}},
                                      {"eps", Tensor{{}, {1e-3}, DType::Float64}}});
  const auto m = read_npz((d / "bn.npz").string());
  CHECK(m.at("gamma").data == std::vector<double>{1.0, 2.0});
  CHECK(m.at("eps").data[0] == 1e-3);
  write(d / "bad.npz", "this is not a zip");
  CHECK(message_of([&] { read_npz((d / "bad.npz").string()); }).find("not a readable .npz archive") != std::string::npos);
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
  CHECK(with(R"(, "bn": {"var": 0, "eps": 0})").find("bn: eps must be > 0") != std::string::npos);
  CHECK(with(R"(, "colour": 1)").find("unknown key 'colour'") != std::string::npos);
  CHECK(with(R"(, "compare": {"recipes": ["tensorrt"]})").find("unknown recipe") != std::string::npos);
  CHECK(with(R"(, "observed_weights": {"prefix": [1, 2, 3, 4, 5]})").find("5 values but the weights have 4") !=
        std::string::npos);
  CHECK(with(R"(, "bn": {"gamma": {"init": {"values": [1, 2, 3]}}})").find("3 values given") != std::string::npos);
  write(d / "c.json", "{\"seed\": 1,");
  CHECK(message_of([&] { load_case((d / "c.json").string()); }).find("invalid JSON") != std::string::npos);
  fs::remove_all(d);
}

TEST_CASE("writing outputs: a link planted at a temporary's name is never followed", "[io][outputs]") {
  const fs::path d = tmpdir() / "planted";
  fs::remove_all(d);
  fs::create_directories(d);
  write(d / "victim", "secret\n");
  // The name the temporary once had (".NAME.tmpPID"), and any fixed guess of it: O_EXCL
  // creation skips every existing name, links included.
  fs::create_symlink(d / "victim", d / (".r.json.tmp" + std::to_string(::getpid())));
  for (int i = 0; i < 20; ++i) foldcheck::write_file_atomically((d / "r.json").string(), "{\"n\": " + std::to_string(i) + "}\n");
  std::ifstream v(d / "victim");
  CHECK(std::string(std::istreambuf_iterator<char>(v), {}) == "secret\n");
  std::ifstream r(d / "r.json");
  CHECK(std::string(std::istreambuf_iterator<char>(r), {}) == "{\"n\": 19}\n");
  const auto files = std::distance(fs::directory_iterator(d), fs::directory_iterator());
  CHECK(files == 3);  // victim, the planted link, r.json: no temporary left behind
  // A 255-byte name (NAME_MAX) still has a temporary beside it.
  const std::string longest(255, 'n');
  foldcheck::write_file_atomically((d / longest).string(), "x\n");
  CHECK(fs::file_size(d / longest) == 2);
  fs::remove_all(d);
}

TEST_CASE("writing outputs: a file read as an input is never replaced", "[io][outputs]") {
  const fs::path d = tmpdir() / "inputs";
  fs::remove_all(d);
  fs::create_directories(d);
  write(d / "w.npy", serialize_npy(Tensor{{2}, {0.5, 0.5}, DType::Float32}));
  (void)read_npy((d / "w.npy").string());
  fs::create_symlink(d / "w.npy", d / "link.npy");
  for (const char* name : {"w.npy", "link.npy", "./w.npy"}) {
    INFO(name);
    CHECK_THROWS_WITH(foldcheck::write_file_atomically((d / name).string(), "x"), Catch::Contains("is also an input"));
    CHECK(foldcheck::writable_problem((d / name).string()).find("is also an input") != std::string::npos);
  }
  CHECK(fs::file_size(d / "w.npy") == serialize_npy(Tensor{{2}, {0.5, 0.5}, DType::Float32}).size());
  fs::remove_all(d);
}

TEST_CASE("limits: the element limit cannot wrap, and a command's memory is checked against the machine's",
          "[limits]") {
  CHECK_THROWS_AS(set_max_elements(std::int64_t(1) << 60), InputError);
  CHECK_THROWS_AS(set_max_elements(kMaxElementLimit + 1), InputError);
  set_max_elements(kMaxElementLimit);
  CHECK(max_input_bytes() > static_cast<std::uint64_t>(kMaxElementLimit));  // no wrap
  set_max_elements(kDefaultMaxElements);
  CHECK_THROWS_WITH(check_fits_in_memory(std::uint64_t(1) << 40, 256, "explain"), Catch::Contains("explain: 1099511627776 elements"));
  CHECK_NOTHROW(check_fits_in_memory(1000, 256, "explain"));
}

TEST_CASE("suite result files: names stay short, and only results/NAME.json is one", "[io][suite]") {
  const std::string a(300, 'a'), b = std::string(299, 'a') + "b";
  CHECK(file_stem_for(a).size() <= kMaxStem);
  CHECK(file_stem_for(a) != file_stem_for(b));
  CHECK(file_stem_for("x/y") == file_stem_for("x_y"));  // not injective: plan_suite refuses such pairs
  CHECK(is_result_file_name("results/" + file_stem_for(a) + ".json"));
  for (const char* bad : {"../x.json", "/etc/x.json", "results/../x.json", "results/a/b.json", "results/.json",
                          "results/x.txt", "x.json", "results/x y.json"})
    CHECK_FALSE(is_result_file_name(bad));
}
