// Hostile inputs and invocations through the foldcheck executable (issue 17): outputs that
// are devices, FIFOs or inputs; messages that carry a file's control bytes; reports whose
// names hold what their format cannot; verdicts where nothing was compared; and the memory
// a refusal may take.
#include <limits>
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zip.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "foldcheck/io/npy.hpp"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace foldcheck_cli_test;

namespace {

const char* kCase = R"({"seed": 1, "conv": {"in_channels": 2, "out_channels": 2, "kernel": 3, "padding": 1},
  "input": {"shape": [1, 2, 4, 4], "init": {"normal": {}}}, "weights": {"init": {"normal": {"std": 0.3}}}})";

void put(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

std::string fmt_hex(unsigned c) {
  char b[16];
  std::snprintf(b, sizeof b, "\\u%04X", c);
  return b;
}

fs::path fresh_dir(const std::string& name) {
  const fs::path d = tmp(name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Peak resident set of one run of foldcheck with `args` (KiB), from wait4's rusage of that
// child alone; `code` gets its exit status. fork, not posix_spawn: a child that shares this
// process's memory until exec (vfork, CLONE_VM) inherits its high-water mark.
long peak_rss_kib(const std::vector<std::string>& args, int& code) {
  std::vector<std::string> argv_s{FOLDCHECK_BIN};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 2);
    ::execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  struct rusage ru {};
  REQUIRE(wait4(pid, &status, 0, &ru) == pid);
  code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return ru.ru_maxrss;
}

// An .npz whose one member `key` is `count` float64 zeros and `trailing` zero bytes after
// them, deflated (a 128 MiB member is ~130 KB on disk).
void write_deflated_npz(const fs::path& path, const std::string& key, std::int64_t count, std::size_t trailing = 0) {
  foldcheck::Tensor t{{count}, std::vector<double>(static_cast<std::size_t>(count), 0.0), foldcheck::DType::Float64};
  const std::string bytes = foldcheck::serialize_npy(t) + std::string(trailing, '\0');
  int err = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  REQUIRE(z);
  zip_source_t* src = zip_source_buffer(z, bytes.data(), bytes.size(), 0);
  REQUIRE(src);
  const zip_int64_t i = zip_file_add(z, (key + ".npy").c_str(), src, ZIP_FL_OVERWRITE);
  REQUIRE(i >= 0);
  zip_set_file_compression(z, static_cast<zip_uint64_t>(i), ZIP_CM_DEFLATE, 1);
  REQUIRE(zip_close(z) == 0);
}

}  // namespace

TEST_CASE("outputs: a FIFO is written in place, not replaced by a file", "[cli][hostile][outputs]") {
  const fs::path d = fresh_dir("fifo");
  const fs::path fifo = d / "out.fifo";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  // A reader is there before foldcheck opens it, so its open does not block; the output (a
  // few KB) fits in the pipe's buffer.
  const int rd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  REQUIRE(rd >= 0);
  const Result r = run("explain --original 2.1122932 --observed 2.1122828 -o " + fifo.string());
  std::string got;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(rd, buf, sizeof buf)) > 0) got.append(buf, static_cast<std::size_t>(n));
  ::close(rd);
  CHECK(r.code == 0);
  struct stat st {};
  REQUIRE(::lstat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  CHECK(got.find("verdict: EXPECTED") != std::string::npos);
  fs::remove_all(d);
}

TEST_CASE("outputs: -o /dev/stdout on a pipe writes to the pipe", "[cli][hostile][outputs]") {
  const Result r = run("explain --original 2.1122932 --observed 2.1122828 --format json -o /dev/stdout");
  CHECK(r.code == 0);
  CHECK(json::parse(r.out)["verdict"] == "EXPECTED");
}

TEST_CASE("quiet runs: -q leaves stderr empty on success and only the error line on failure", "[cli][hostile][messages]") {
  const fs::path d = fresh_dir("quiet");
  put(d / "case.json", kCase);
  const Result ok = run("run " + (d / "case.json").string() + " -q --no-attribution -o " + (d / "r.json").string());
  CHECK(ok.code == 0);
  CHECK(ok.err.empty());
  put(d / "bad.json", R"({"seed": 1})");
  const Result bad = run("run " + (d / "bad.json").string() + " -q");
  CHECK(bad.code == 2);
  CHECK(std::count(bad.err.begin(), bad.err.end(), '\n') == 1);
  CHECK(bad.err.rfind("foldcheck: error: ", 0) == 0);
  fs::remove_all(d);
}

TEST_CASE("messages: control bytes from file names and contents are escaped", "[cli][hostile][messages]") {
  const fs::path d = fresh_dir("control");
  // A file name with an escape sequence (clears a terminal) and a key with a newline.
  const std::string name = std::string("a\x1b[2Jb") + ".json";
  const Result missing = run("run '" + (d / name).string() + "'");
  CHECK(missing.code == 2);
  CHECK(missing.err.find('\x1b') == std::string::npos);
  CHECK(missing.err.find("\\u001B[2Jb.json") != std::string::npos);
  put(d / "k.json", "{\"seed\": 1, \"co\\nlour\\u0007\": 1}");
  const Result key = run("run " + (d / "k.json").string());
  CHECK(key.code == 2);
  CHECK(std::count(key.err.begin(), key.err.end(), '\n') == 1);
  CHECK(key.err.find('\x07') == std::string::npos);
  CHECK(key.err.find("co\\nlour\\u0007") != std::string::npos);
  fs::remove_all(d);
}

TEST_CASE("reports: entry names with control characters and '|' are escaped per format",
          "[cli][hostile][reports]") {
  const fs::path d = fresh_dir("names");
  put(d / "case.json", kCase);
  put(d / "suite.json", R"({"entries": [{"case": "case.json", "name": "tab\there|pipe\u0001bell\nnewline"},
                                       {"case": "case.json", "name": "plain"},
                                       {"case": "case.json", "name": "non\ufffe\uffffchar"}]})");
  const Result r = run("suite " + (d / "suite.json").string() + " -o " + (d / "out").string() + " -q --no-timing");
  REQUIRE(r.code == 0);
  const std::string junit = slurp(d / "out" / "junit.xml");
  const auto controls = [](const std::string& t) {
    return std::count_if(t.begin(), t.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 && c != '\n'; });
  };
  CHECK(controls(junit) == 0);
  CHECK(junit.find("tab\\there|pipe\\u0001bell\\nnewline") != std::string::npos);
  // U+FFFE and U+FFFF are not XML characters (the file was not well-formed): U+FFFD.
  CHECK(junit.find("non\xEF\xBF\xBD\xEF\xBF\xBD" "char") != std::string::npos);
  CHECK(junit.find("\xEF\xBF\xBE") == std::string::npos);
  CHECK(junit.find("\xEF\xBF\xBF") == std::string::npos);
  const std::string md = slurp(d / "out" / "report.md");
  CHECK(md.find("tab\\there\\|pipe\\u0001bell\\nnewline") != std::string::npos);
  const std::string html = slurp(d / "out" / "report.html");
  CHECK(controls(html) == 0);
  fs::remove_all(d);
}

namespace {

// Every character reports/neutralise.hpp neutralises, as UTF-8, with the escape it is shown as.
std::vector<std::pair<std::string, std::string>> layout_controls() {
  std::vector<std::pair<std::string, std::string>> r;
  for (const unsigned c : {0x061Cu, 0x200Eu, 0x200Fu, 0x202Au, 0x202Bu, 0x202Cu, 0x202Du, 0x202Eu, 0x2066u, 0x2067u,
                           0x2068u, 0x2069u, 0x2028u, 0x2029u, 0x0085u, 0x009Bu}) {
    std::string u;
    if (c < 0x800) {
      u.push_back(static_cast<char>(0xC0 | c >> 6));
    } else {
      u.push_back(static_cast<char>(0xE0 | c >> 12));
      u.push_back(static_cast<char>(0x80 | (c >> 6 & 0x3F)));
    }
    u.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    r.emplace_back(u, fmt_hex(c));
  }
  return r;
}

// A name holding each control between letters of three scripts (Latin, Chinese, Arabic).
std::string hostile_name() {
  std::string n = "layer";
  for (const auto& [u, shown] : layout_controls()) n += u + "x";
  return n + "\xE5\xB1\x82\xD8\xB7\xD8\xA8\xD9\x82\xD8\xA9";  // 层 طبقة
}

// No control of layout_controls() is left in `out`; each shows as its escape, and the other
// scripts are kept as they are.
void check_neutralised(const std::string& out, const std::string& where) {
  INFO(where);
  for (const auto& [u, shown] : layout_controls()) {
    INFO(shown);
    CHECK(out.find(u) == std::string::npos);
    CHECK(out.find(shown + "x") != std::string::npos);
  }
  CHECK(out.find("\xE5\xB1\x82\xD8\xB7\xD8\xA8\xD9\x82\xD8\xA9") != std::string::npos);
}

}  // namespace

namespace {

// A case, a suite of it and a comparison, every one named `name`, through every renderer (the
// suite's counts line and files, run's text, Markdown, HTML and its case line on stderr,
// compare's text and Markdown, an error line quoting a file named after it): each output
// passed to `check(output, where)`, `error_shown` what the error line must show; JSON keeps
// the name exact.
void every_renderer_shows(const std::string& dir, const std::string& name,
                          const std::function<void(const std::string&, const std::string&)>& check,
                          const std::function<void(const std::string&)>& error_shown) {
  const fs::path d = fresh_dir(dir);
  json c = json::parse(kCase);
  c["name"] = name;
  put(d / "case.json", c.dump());
  put(d / "suite.json", json{{"name", name}, {"entries", {{{"case", "case.json"}, {"name", name}}}}}.dump());
  const Result s = run("suite " + (d / "suite.json").string() + " -o " + (d / "out").string() + " -q --no-timing");
  REQUIRE(s.code == 0);
  check(s.out, "suite's counts line");
  for (const char* f : {"report.md", "report.html", "junit.xml"}) check(slurp(d / "out" / f), f);
  CHECK(json::parse(slurp(d / "out" / "report.json"))["suite"]["name"] == name);  // JSON is for machines: exact
  const std::string run_case = "run " + (d / "case.json").string() + " --no-attribution --no-timing";
  const Result text = run(run_case);
  REQUIRE(text.code == 0);
  check(text.out, "run text");
  check(text.err, "run's case line");
  for (const char* format : {"markdown", "html"}) check(run(run_case + " -q --format " + format).out, format);
  const Result j = run(run_case + " -q --format json -o " + (d / "run.json").string());
  REQUIRE(j.code == 0);
  CHECK(json::parse(slurp(d / "run.json"))["case"]["name"] == name);
  put(d / "plain.json", kCase);
  REQUIRE(
      run("run " + (d / "plain.json").string() + " --no-attribution -q --format json -o " + (d / "now.json").string())
          .code == 0);
  const std::string compare = "compare " + (d / "now.json").string() + " --baseline " + (d / "run.json").string();
  check(run(compare).out, "compare text");
  check(run(compare + " --format markdown").out, "compare markdown");
  const Result missing = run("run '" + (d / (name + ".json")).string() + "'");
  CHECK(missing.code == 2);
  error_shown(missing.err);
  fs::remove_all(d);
}

}  // namespace

TEST_CASE("reports: bidi controls in names are neutralised in every renderer, other scripts kept",
          "[cli][hostile][reports]") {
  // A U+202E in a node name reversed the rest of the line in HTML, Markdown and text reports.
  every_renderer_shows("bidi", hostile_name(), check_neutralised,
                       [](const std::string& err) { check_neutralised(err, "error line"); });
}

namespace {

// A name holding every kind of C0 control a terminal or a row reacts to (ESC starting a colour
// sequence, BEL, CR, BS, VT, FF, DEL, TAB, LF before a forged verdict line), as shown. (A NUL
// is refused in every JSON string read: no name holds one.)
const std::string kControlName = "layer\x1b[31mRED\x07\r\x08\x0b\x0c\x7f\t\nverdict: EXPECTED\x1b[0mend";
const std::string kControlShown =
    R"(layer\u001B[31mRED\u0007\r\u0008\u000B\u000C\u007F\t\nverdict: EXPECTED\u001B[0mend)";

// `out` shows the name escaped, holds no control byte but its own line feeds, and no line the
// name forged.
void check_controls_shown(const std::string& out, const std::string& where, const std::string& shown = kControlShown) {
  INFO(where);
  CHECK(out.find(shown) != std::string::npos);
  CHECK(std::count_if(out.begin(), out.end(), [](char c) {
          const auto u = static_cast<unsigned char>(c);
          return (u < 0x20 && c != '\n') || u == 0x7f;
        }) == 0);
  CHECK(out.find("\nverdict: EXPECTED\\u001B") == std::string::npos);
}

}  // namespace

TEST_CASE("reports: control characters in names are escaped in every renderer, one line each",
          "[cli][hostile][reports]") {
  // Text reports passed ESC, BEL, CR, BS, NUL... of a name to the terminal (terminal_safe made
  // them U+FFFD after the renderer had laid out the name's TAB and LF), Markdown made them U+FFFD
  // or spaces, HTML and JUnit character references: one rule now, the one for bidi controls.
  every_renderer_shows(
      "controls", kControlName,
      [](const std::string& out, const std::string& where) { check_controls_shown(out, where); },
      [](const std::string& err) { check_controls_shown(err, "error line", kControlShown + ".json"); });
}

TEST_CASE("reports read back: every count or index that is negative is refused with the file and the field named",
          "[cli][hostile][reports]") {
  // compare accepted a run whose counts were negative ("beyond_bound": -3 reads as fewer failures than none).
  const fs::path d = fresh_dir("negative_counts");
  put(d / "case.json", kCase);
  REQUIRE(run("run " + (d / "case.json").string() + " --no-attribution -q --no-timing --format json -o " +
              (d / "run.json").string())
              .code == 0);
  REQUIRE(run("accuracy-diff " + src("cases/models/fixture/model.onnx") + " --input " +
              src("cases/models/fixture/x.npy") + " -q --no-timing --format json -o " + (d / "adiff.json").string())
              .code == 0);
  for (const char* file : {"run.json", "adiff.json"}) {
    const json good = json::parse(slurp(d / file));
    // The first integer of each key, its JSON pointer.
    std::map<std::string, json::json_pointer> first;
    const json flat = good.flatten();
    for (const auto& [pointer, v] : flat.items()) {
      const json::json_pointer p(pointer);
      std::string key = p.back();
      for (json::json_pointer q = p; !q.empty() && std::all_of(key.begin(), key.end(), ::isdigit);
           q = q.parent_pointer())
        key = q.back();
      if (v.is_number_unsigned() && !first.contains(key)) first.emplace(key, p);
    }
    std::size_t refused = 0;
    for (const char* key : {"beyond_bound",
                            "elements",
                            "count",
                            "zero",
                            "nan",
                            "negative",
                            "positive",
                            "groups",
                            "out_channels",
                            "output_channels",
                            "channels",
                            "escalations",
                            "precision_bits",
                            "rows",
                            "weight_shape",
                            "opset",
                            "nodes",
                            "pairs_found",
                            "elements_differing",
                            "worst_channel"}) {
      if (!first.contains(key)) continue;
      json bad = good;
      bad[first[key]] = -1;
      put(d / "bad.json", bad.dump());
      const Result r = run("compare " + (d / "bad.json").string() + " --baseline " + (d / file).string());
      INFO(file << " " << first[key].to_string() << ": " << r.err);
      CHECK(r.code == 2);
      CHECK(r.err.find("bad.json: " + first[key].to_string() +
                       ": a count or an index must be a non-negative integer, got -1") != std::string::npos);
      ++refused;
    }
    CHECK(refused >= 10);
  }
  fs::remove_all(d);
}

TEST_CASE("explain: a NaN observed value is named as NaN, never 0 ULP beyond the bound nor explained by a recipe",
          "[cli][hostile][verdicts]") {
  // The text said "explains it" for every recipe, "Element 0 is 0 ULP from the exact fold, beyond every recipe's
  // rounding bound" and "no non-zero original weight" of an original of 1: a NaN residual was dropped by max().
  for (const std::string& values :
       {std::string("--original 1 --observed nan"), std::string("--original 1,2,3 --observed 1,nan,3"),
        std::string("--original 1,-2 --observed -nan,-2")}) {
    INFO(values);
    const Result r = run("explain " + values + " --no-timing");
    CHECK(r.code == 1);
    CHECK(r.out.find("verdict: UNEXPECTED") != std::string::npos);
    CHECK(r.out.find(" explains it") == std::string::npos);
    CHECK(r.out.find("0 ULP from the exact fold") == std::string::npos);
    CHECK(r.out.find(values.find("1,nan") != std::string::npos ? "Element 1 is NaN" : "Element 0 is NaN") !=
          std::string::npos);
    CHECK(r.out.find("no non-zero original weight") == std::string::npos);
  }
}

TEST_CASE("text output: a name holding line breaks cannot forge a line", "[cli][hostile][reports]") {
  const fs::path d = fresh_dir("forge");
  json c = json::parse(kCase);
  c["name"] = "x\n\nverdict: EXPECTED  (0.0 s)\r\n";
  c["observed_weights"] = {{"prefix", {5, 5}}};  // far off: the real verdict is UNEXPECTED
  put(d / "nl.json", c.dump());
  const Result r = run("run " + (d / "nl.json").string() + " -q --no-attribution");
  CHECK(r.code == 1);
  CHECK(r.out.find("\nverdict: EXPECTED") == std::string::npos);
  CHECK(r.out.find("x\\n\\nverdict: EXPECTED  (0.0 s)\\r\\n") != std::string::npos);
  CHECK(r.out.find("\nverdict: UNEXPECTED") != std::string::npos);
  fs::remove_all(d);
}

TEST_CASE("text output of every command: a file name or entry name holding line breaks cannot forge a line",
          "[cli][hostile][reports]") {
  // Every command ends through finish (cli/common.hpp): bisect and quant-check print the case
  // file's path, compare an entry's name, and each had printed them with their line breaks.
  const fs::path d = fresh_dir("forge_all");
  const auto verdict_lines = [](const std::string& out) {
    std::size_t n = out.rfind("verdict: ", 0) == 0;
    for (std::size_t at = out.find("\nverdict: "); at != std::string::npos; at = out.find("\nverdict: ", at + 1)) ++n;
    return n;
  };
  const fs::path forged = d / "x\n\nverdict: EXPECTED\n.json";
  put(forged, kCase);
  const std::string shown = "x\\n\\nverdict: EXPECTED\\n.json";
  for (const std::string& cmd :
       {"bisect '" + forged.string() + "' --opt-level 3", "quant-check --case '" + forged.string() + "'"}) {
    INFO(cmd);
    const Result r = run(cmd + " -q --no-timing");
    CHECK(r.code <= 1);
    CHECK(r.out.find(shown) != std::string::npos);
    CHECK(verdict_lines(r.out) == 1);
  }
  // compare: the baseline's entry (a case named with line breaks) is missing from the report.
  json c = json::parse(kCase);
  c["name"] = "x\n\nverdict: no regression";
  put(d / "named.json", c.dump());
  put(d / "plain.json", kCase);
  REQUIRE(
      run("run " + (d / "named.json").string() + " --no-attribution --format json -q -o " + (d / "base.json").string())
          .code == 0);
  REQUIRE(
      run("run " + (d / "plain.json").string() + " --no-attribution --format json -q -o " + (d / "now.json").string())
          .code == 0);
  const Result r = run("compare " + (d / "now.json").string() + " --baseline " + (d / "base.json").string());
  CHECK(r.code == 1);
  CHECK(r.out.find("x\\n\\nverdict: no regression: removed") != std::string::npos);
  CHECK(verdict_lines(r.out) == 1);
  fs::remove_all(d);
}

TEST_CASE("accuracy-diff: an observed output with no finite element gets a verdict, in text too", "[cli][hostile][verdicts]") {
  // All +Inf against the fixture's finite output: no element is finite on both sides, so
  // the comparison has no bound check; the text renderer read one and failed with an
  // internal "a JSON document lacks a key" (exit 2).
  const fs::path d = fresh_dir("inf_output");
  using foldcheck::DType;
  using foldcheck::Tensor;
  foldcheck::write_npy((d / "yinf.npy").string(),
                       Tensor{{1, 5}, std::vector<double>(5, std::numeric_limits<double>::infinity()), DType::Float32});
  const Result r = run("accuracy-diff " + src("cases/models/fixture/model.onnx") + " --input " +
                       src("cases/models/fixture/x.npy") + " --observed-output " + (d / "yinf.npy").string() + " -q");
  CHECK(r.code == 1);
  CHECK(r.err.empty());
  CHECK(r.out.find("no element finite on both sides") != std::string::npos);
  CHECK(r.out.find("verdict: UNEXPECTED") != std::string::npos);
  fs::remove_all(d);
}

TEST_CASE("reports: a result whose text is not UTF-8 is written with U+FFFD, not refused", "[cli][hostile][reports]") {
  const fs::path d = fresh_dir("utf8");
  put(d / "\xff.json", kCase);
  const Result r = run("run '" + (d / "\xff.json").string() + "' --no-attribution --format json -q");
  CHECK(r.code == 0);
  CHECK(json::parse(r.out)["verdict"] == "EXPECTED");
  fs::remove_all(d);
}

TEST_CASE("nothing compared is never a pass: explain and diagnose on all-zero values are MISTRUSTED",
          "[cli][hostile][verdicts]") {
  const Result e = run("explain --original 0,0,0 --observed 0,0,0 --format json");
  CHECK(e.code == 1);
  CHECK(json::parse(e.out)["verdict"] == "MISTRUSTED");
  const Result g = run("explain --original 1,2 --observed 0,0 --gamma 0 --format json");
  CHECK(g.code == 1);
  CHECK(json::parse(g.out)["verdict"] == "MISTRUSTED");
  // diagnose: a BatchNorm with gamma = beta = 0 makes every output 0.
  const fs::path d = fresh_dir("zeros");
  using foldcheck::DType;
  using foldcheck::Tensor;
  foldcheck::write_npy((d / "x.npy").string(), Tensor{{1, 2, 2, 2}, std::vector<double>(8, 0.5), DType::Float32});
  foldcheck::write_npy((d / "y.npy").string(), Tensor{{1, 2, 2, 2}, std::vector<double>(8, 0.0), DType::Float32});
  foldcheck::write_npz((d / "bn.npz").string(), {{"gamma", Tensor{{2}, {0, 0}, DType::Float32}},
                                                 {"beta", Tensor{{2}, {0, 0}, DType::Float32}},
                                                 {"mean", Tensor{{2}, {0, 0}, DType::Float32}},
                                                 {"var", Tensor{{2}, {1, 1}, DType::Float32}}});
  const Result dg = run("diagnose --input " + (d / "x.npy").string() + " --bn " + (d / "bn.npz").string() +
                        " --observed " + (d / "y.npy").string() + " --format json");
  CHECK(dg.code == 1);
  CHECK(json::parse(dg.out)["verdict"] == "MISTRUSTED");
  // diagnose: a layer whose exact output is past the range (x = 3e38, gamma = 4): the
  // observed Inf is overflow, not rounding (it was UNEXPECTED at "infx its bound").
  foldcheck::write_npy((d / "big.npy").string(), Tensor{{1, 2, 2, 2}, std::vector<double>(8, 3e38), DType::Float32});
  foldcheck::write_npy((d / "inf.npy").string(),
                       Tensor{{1, 2, 2, 2}, std::vector<double>(8, std::numeric_limits<double>::infinity()), DType::Float32});
  foldcheck::write_npz((d / "bn4.npz").string(), {{"gamma", Tensor{{2}, {4, 4}, DType::Float32}},
                                                  {"beta", Tensor{{2}, {0, 0}, DType::Float32}},
                                                  {"mean", Tensor{{2}, {0, 0}, DType::Float32}},
                                                  {"var", Tensor{{2}, {1, 1}, DType::Float32}}});
  const Result ov = run("diagnose --input " + (d / "big.npy").string() + " --bn " + (d / "bn4.npz").string() +
                        " --observed " + (d / "inf.npy").string() + " --format json");
  CHECK(ov.code == 1);
  CHECK(json::parse(ov.out)["verdict"] == "MISTRUSTED");
  CHECK(json::parse(ov.out)["summary"].get<std::string>().find("past float32's range") != std::string::npos);
  // Exact folds that overflow or underflow the dtype match any scale as well.
  const Result over = run("explain --dtype float64 --original 1e300,-1e300 --observed inf,-inf --gamma 1e10 --format json");
  CHECK(over.code == 1);
  CHECK(json::parse(over.out)["verdict"] == "MISTRUSTED");
  const Result under = run("explain --original 1,1 --observed 0,0 --gamma 1e-44 --var 1e30 --format json");
  CHECK(under.code == 1);
  CHECK(json::parse(under.out)["verdict"] == "MISTRUSTED");
  // A layer with zero weights and a zero BatchNorm shift: every output is 0.
  put(d / "z.json", R"({"seed": 1, "conv": {"in_channels": 1, "out_channels": 1, "kernel": 1},
    "input": {"shape": [1, 1, 1, 2], "init": {"values": [1, 2]}}, "weights": {"init": {"values": [0]}},
    "compare": {"dtypes": ["float32"], "recipes": ["pytorch"], "accumulation": ["sequential"]}})");
  for (const std::string cmd : {"run", "quant-check --case", "bisect --passes FoldScaleAxis"}) {
    INFO(cmd);
    const std::string target = cmd.rfind("bisect", 0) == 0 ? "bisect " + (d / "z.json").string() + " --passes FoldScaleAxis"
                                                             : cmd + " " + (d / "z.json").string();
    const Result z = run(target + " --format json -q");
    CHECK(z.code == 1);
    CHECK(json::parse(z.out)["verdict"] == "MISTRUSTED");
  }
  fs::remove_all(d);
}

TEST_CASE("JSON files are checked in time linear in their size", "[cli][hostile][memory]") {
  // 300k empty objects in an array: nlohmann's callback parser rescans the parent at every
  // object's end (84 s for 990 KB); the check that replaced it is one pass.
  const fs::path d = fresh_dir("json_time");
  std::string text = "{\"seed\": 1, \"x\": [";
  for (int i = 0; i < 300000; ++i) text += i ? ",{}" : "{}";
  text += "]}";
  put(d / "case.json", text);
  const auto t0 = std::chrono::steady_clock::now();
  const Result r = run("run " + (d / "case.json").string());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(r.code == 2);
  CHECK(r.err.find("unknown key 'x'") != std::string::npos);
  CHECK(seconds < 5);
  fs::remove_all(d);
}

TEST_CASE("refusals of hostile archives stay small: under 200 MB of peak memory", "[cli][hostile][memory]") {
  const fs::path d = fresh_dir("archives");
  // 128 MiB of zeros each, ~130 KB on disk: once read whole before the key or the length was
  // looked at.
  write_deflated_npz(d / "unknown.npz", "sigma", std::int64_t(1) << 24);
  write_deflated_npz(d / "long.npz", "gamma", std::int64_t(1) << 24);
  // A header of two values followed by 128 MiB of zeros: refused from the header.
  write_deflated_npz(d / "trailing.npz", "gamma", 2, std::size_t(1) << 27);
  REQUIRE(fs::file_size(d / "unknown.npz") < (1u << 20));
  REQUIRE(fs::file_size(d / "trailing.npz") < (1u << 20));
  for (const char* f : {"unknown.npz", "long.npz", "trailing.npz"}) {
    INFO(f);
    int code = 0;
    const long kib = peak_rss_kib({"explain", "--original", "1,2", "--observed", "1,2", "--bn", (d / f).string()}, code);
    CHECK(code == 2);
    CHECK(kib < 200 * 1024);
  }
  fs::remove_all(d);
}
