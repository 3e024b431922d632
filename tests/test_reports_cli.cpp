// Reports, suites and baselines through the foldcheck executable: the JSON schema holds for
// every command, suites write their four files, shards merge into the same bytes as one
// run, `compare` names what regressed, and the HTML renders in a real headless browser.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "cli_run.hpp"
#include "foldcheck/io/npy.hpp"
#include "schema_check.hpp"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace foldcheck_cli_test;

namespace {

void require_valid(const json& doc, const std::string& what) {
  const std::vector<std::string> errors = schema_errors(doc);
  INFO(what << ": " << (errors.empty() ? std::string() : errors.front()));
  CHECK(errors.empty());
}

json parse_file(const fs::path& p) { return json::parse(slurp(p)); }

// A small suite over the shipped cases and the fixture model (paths made absolute).
fs::path write_suite(const fs::path& dir, const json& first_override = nullptr) {
  fs::create_directories(dir);
  const std::string fixture = (dir / "fixture").string();
  REQUIRE(std::system((std::string(MAKE_ONNX_FIXTURE_BIN) + " " + fixture + " >/dev/null").c_str()) == 0);
  json first{{"case", src("cases/tvm_thread.json")}, {"attribution_elements", 128}};
  if (!first_override.is_null()) first["override"] = first_override;
  json suite{{"name", "mini"},
             {"description", "tests/test_reports_cli.cpp"},
             {"entries",
              {first,
               {{"case", src("cases/depthwise_3x3.json")}, {"attribution_elements", 64}},
               {{"model", fixture + "/model.onnx"}, {"name", "small_cnn"}, {"observed", fixture + "/folded.onnx"},
                {"input", fixture + "/x.npy"}, {"attribution_elements", 16}},
               {{"model", fixture + "/model.onnx"}, {"name", "corrupt_fold"}, {"observed", fixture + "/corrupt.onnx"},
                {"input", fixture + "/x.npy"}, {"attribution_elements", 16}, {"expect", "UNEXPECTED"}}}}};
  const fs::path p = dir / "mini.json";
  std::ofstream(p) << suite.dump(1);
  return p;
}

}  // namespace

TEST_CASE("schema: every command's JSON validates, a broken document does not", "[cli][reports][schema]") {
  const Result ex = run("explain --original 2.1122932,5.5735774 --observed 2.1122828,5.5735493 --format json");
  require_valid(json::parse(ex.out), "explain");
  for (const char* c : {"tvm_thread", "depthwise_3x3", "engine_variants", "tiny_variance", "resnet_3x3_64"}) {
    const Result r = run(std::string("run ") + src("cases/") + c + ".json --format json --attribution-elements 64");
    REQUIRE(r.code == 0);
    require_valid(json::parse(r.out), c);
  }
  const fs::path seed = tmp("schema_seed");
  REQUIRE(std::system((std::string(MAKE_BN_SEED_BIN) + " " + seed.string() + " >/dev/null").c_str()) == 0);
  const Result dg = run("diagnose --input " + (seed / "x.npy").string() + " --bn " + (seed / "bn.npz").string() + " --observed " +
                        (seed / "y_train.npy").string() + " --format json");
  require_valid(json::parse(dg.out), "diagnose");
  const fs::path fx = tmp("schema_fixture");
  REQUIRE(std::system((std::string(MAKE_ONNX_FIXTURE_BIN) + " " + fx.string() + " >/dev/null").c_str()) == 0);
  const Result ad = run("accuracy-diff " + (fx / "model.onnx").string() + " --observed " + (fx / "folded.onnx").string() +
                        " --input " + (fx / "x.npy").string() + " --observed-output " + (fx / "y_folded.npy").string() +
                        " --output-samples 4 --format json");
  REQUIRE(ad.code == 0);
  const json adj = json::parse(ad.out);
  require_valid(adj, "accuracy-diff");
  CHECK(adj["timing"]["seconds"].get<double>() >= 0);
  // Not vacuous: a wrong verdict, a missing field, a wrong type are each refused.
  json bad = adj;
  bad["verdict"] = "MAYBE";
  CHECK_FALSE(schema_errors(bad).empty());
  bad = adj;
  bad.erase("layers");
  CHECK_FALSE(schema_errors(bad).empty());
  bad = adj;
  bad["layers"][0]["worst_channel"] = "three";
  CHECK_FALSE(schema_errors(bad).empty());
}

TEST_CASE("suite: four files, shards merge to the same bytes, any thread count, compare", "[cli][reports][suite]") {
  const fs::path dir = tmp("suite");
  const fs::path suite = write_suite(dir);
  const fs::path full = dir / "full";
  const Result r = run("suite " + suite.string() + " -o " + full.string() + " --no-timing -q");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("4 passed, 0 failed"));
  for (const char* f : {"report.json", "report.md", "report.html", "junit.xml", "results/tvm_thread.json", "results/small_cnn.json"})
    CHECK(fs::exists(full / f));
  const json report = parse_file(full / "report.json");
  require_valid(report, "suite report");
  CHECK(report["verdict"] == "EXPECTED");
  CHECK(report["entries"][3]["summary"]["verdict"] == "UNEXPECTED");  // caught, as expected
  CHECK(report["entries"][3]["passed"] == true);
  CHECK_FALSE(report.contains("timing"));
  require_valid(parse_file(full / "results/tvm_thread.json"), "full result in a suite");
  const std::string junit = slurp(full / "junit.xml");
  CHECK_THAT(junit, Catch::Contains("tests=\"4\" failures=\"0\"") && Catch::Contains("name=\"corrupt_fold\""));
  CHECK_THAT(slurp(full / "report.md"), Catch::Contains("✅ 4/4 passed") && Catch::Contains("| ✅ small_cnn | model |"));

  // Two shards on one thread, merged: the same report.json, byte for byte.
  for (const char* s : {"1/2", "2/2"}) {
    const Result sh = run("suite " + suite.string() + " -o " + (dir / (std::string("shard") + s[0])).string() +
                          " --shard " + s + " --threads 1 --no-timing -q");
    REQUIRE(sh.code == 0);
  }
  CHECK(parse_file(dir / "shard1/report.json")["entries"].size() == 2);
  const Result m = run("merge " + (dir / "shard1/report.json").string() + " " + (dir / "shard2/report.json").string() + " -o " +
                       (dir / "merged").string());
  REQUIRE(m.code == 0);
  CHECK(slurp(dir / "merged/report.json") == slurp(full / "report.json"));
  CHECK(slurp(dir / "merged/report.html") == slurp(full / "report.html"));
  CHECK(fs::exists(dir / "merged/results/corrupt_fold.json"));
  const Result partial = run("merge " + (dir / "shard1/report.json").string() + " -o " + (dir / "partial").string());
  CHECK(partial.code == 2);
  CHECK_THAT(partial.err, Catch::Contains("shard 2/2 is missing"));
  // A result file a shard names but lost: refused, naming it, nothing written.
  fs::copy(dir / "shard2", dir / "lost", fs::copy_options::recursive);
  const json lost_report = parse_file(dir / "lost/report.json");
  const std::string lost_file = lost_report["entries"][0]["result_file"];
  fs::remove(dir / "lost" / lost_file);
  const Result lost = run("merge " + (dir / "shard1/report.json").string() + " " + (dir / "lost/report.json").string() +
                          " -o " + (dir / "lostmerged").string());
  CHECK(lost.code == 2);
  CHECK_THAT(lost.err, Catch::Contains(lost_file) && Catch::Contains("is missing"));
  CHECK_FALSE(fs::exists(dir / "lostmerged/report.json"));
  // Shard numbers are read as integers from 1 to the shard count: a negative one that wraps
  // to 2 as unsigned (-4294967294), one past the count, a count of 0 are refused.
  for (const auto& [field, value] : std::vector<std::pair<std::string, json>>{
           {"shards", json::array({-4294967294LL})}, {"shards", json::array({3})}, {"shard_count", 0}}) {
    json bad = parse_file(dir / "shard2/report.json");
    bad["suite"][field] = value;
    fs::create_directories(dir / "badshard");
    std::ofstream(dir / "badshard/report.json") << bad.dump();
    const Result r = run("merge " + (dir / "shard1/report.json").string() + " " + (dir / "badshard/report.json").string() +
                         " -o " + (dir / "badmerged").string());
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("shard"));
    CHECK_FALSE(fs::exists(dir / "badmerged/report.json"));
  }

  // compare: unchanged against itself (exit 0); a fast-rsqrt variant regresses (exit 1).
  const Result same = run("compare " + (full / "report.json").string() + " --baseline " + (dir / "merged/report.json").string());
  CHECK(same.code == 0);
  CHECK_THAT(same.out, Catch::Contains("4 unchanged") && Catch::Contains("no regression"));
  const fs::path fast_suite = write_suite(dir / "fast", json{{"compare", {{"variants", {{{"rsqrt", "fast"}, {"newton_steps", 0}}}}}}});
  const Result fast = run("suite " + fast_suite.string() + " -o " + (dir / "fast_out").string() + " --no-timing -q");
  REQUIRE(fast.code == 0);  // still within its own bound: only the baseline sees the change
  const Result reg = run("compare " + (dir / "fast_out/report.json").string() + " --baseline " + (full / "report.json").string() +
                         " --format json");
  CHECK(reg.code == 1);
  const json d = json::parse(reg.out);
  require_valid(d, "compare");
  CHECK(d["regressions"] == 1);
  CHECK(d["entries"][0]["name"] == "tvm_thread");
  CHECK(d["entries"][0]["status"] == "regressed");
  bool named = false;
  for (const json& c : d["entries"][0]["changes"])
    named = named || (c["where"] == "float32/sequential#0/fused/pytorch" && c["statistic"] == "ulp.p50" && c["regression"] == true);
  CHECK(named);
  const Result text = run("compare " + (dir / "fast_out/report.json").string() + " --baseline " + (full / "report.json").string());
  CHECK(text.code == 1);
  CHECK_THAT(text.out, Catch::Contains("tvm_thread: regressed") &&
                           Catch::Contains("float32/sequential#0/fused/pytorch: ulp.p50") && Catch::Contains("(REGRESSION)"));
  // Usage errors: a bad shard, an unknown suite key.
  CHECK(run("suite " + suite.string() + " -o " + (dir / "x").string() + " --shard 3/2").code == 2);
  std::ofstream(dir / "bad.json") << R"({"name": "b", "entries": [{"case": "x.json", "colour": 1}]})";
  const Result badkey = run("suite " + (dir / "bad.json").string() + " -o " + (dir / "y").string());
  CHECK(badkey.code == 2);
  CHECK_THAT(badkey.err, Catch::Contains("unknown key 'colour'"));
}

TEST_CASE("html report: renders in headless chromium with its charts and no script errors", "[cli][reports][browser]") {
  const fs::path dir = tmp("browser");
  const fs::path suite = write_suite(dir);
  REQUIRE(run("suite " + suite.string() + " -o " + (dir / "out").string() + " --no-timing -q").code == 0);
  const fs::path html = dir / "out/report.html";
  const std::string page = slurp(html);
  CHECK(page.find("http://") == page.find("http://www.w3.org/2000/svg"));  // no network: only the SVG namespace
  CHECK(page.find("<script src") == std::string::npos);
  CHECK(page.find("<link") == std::string::npos);
  const std::string chrome = "chromium --headless=new --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,1600 "
                             "--enable-logging=stderr --log-level=0 ";
  const fs::path dom = dir / "dom.html", log = dir / "chromium.log";
  const fs::path png = fs::path(FOLDCHECK_BINARY_DIR) / "report_screenshot.png";
  fs::remove(png);
  REQUIRE(std::system((chrome + "--dump-dom file://" + html.string() + " >" + dom.string() + " 2>" + log.string()).c_str()) == 0);
  REQUIRE(std::system((chrome + "--screenshot=" + png.string() + " file://" + html.string() + " >/dev/null 2>>" + log.string()).c_str()) == 0);
  const std::string after = slurp(dom), messages = slurp(log);
  // The page's own script ran and counted what was drawn.
  std::smatch m;
  REQUIRE(std::regex_search(after, m, std::regex("data-bars=\"([0-9]+)\"")));
  CHECK(std::stoi(m[1]) > 100);
  CHECK(after.find("data-errors=\"0\"") != std::string::npos);
  CHECK_THAT(after, Catch::Contains("charts, ") && Catch::Contains(" bars drawn"));
  // No console message at all (the page logs nothing; chromium logs console.error and
  // uncaught exceptions as ':CONSOLE:<line>] "..."' lines at --log-level=0).
  INFO(messages.substr(0, 2000));
  CHECK(messages.find("Uncaught") == std::string::npos);
  CHECK(messages.find(":CONSOLE") == std::string::npos);
  // The screenshot exists and is not blank (a white PNG of this size compresses to a few KB).
  REQUIRE(fs::exists(png));
  CHECK(fs::file_size(png) > 50000);
}

// Answer first (issue 23): a single run's page shows, above the fold of a 1280x800 window, the
// verdict, the sentence that gives its reason and the observed weights' BIT-EXACT recipes; no
// suite wording. The screenshot is kept in the test output folder (screenshots/).
TEST_CASE("html report: a single run answers above the fold (headless chromium)", "[cli][reports][browser]") {
  const fs::path dir = tmp("answer_first");
  fs::create_directories(dir);
  const fs::path html = dir / "tvm.html", dom = dir / "dom.html";
  REQUIRE(run("run " + src("cases/tvm_thread.json") + " --format html -o " + html.string() + " -q").code == 0);
  const std::string page = slurp(html);
  CHECK(page.find("entries passed") == std::string::npos);
  CHECK(page.find("results/") == std::string::npos);
  const fs::path shots = fs::path(FOLDCHECK_BINARY_DIR) / "screenshots";
  fs::create_directories(shots);
  const std::string chrome = "chromium --headless=new --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,800 ";
  REQUIRE(std::system((chrome + "--dump-dom file://" + html.string() + " >" + dom.string() + " 2>/dev/null").c_str()) == 0);
  REQUIRE(std::system((chrome + "--screenshot=" + (shots / "tvm_thread.png").string() + " file://" + html.string() +
                       " >/dev/null 2>&1").c_str()) == 0);
  const std::string after = slurp(dom);
  std::smatch m;
  REQUIRE(std::regex_search(after, m, std::regex("data-answer-bottom=\"([0-9]+)\"")));
  const int answer_bottom = std::stoi(m[1]);
  REQUIRE(std::regex_search(after, m, std::regex("data-observed-bottom=\"([0-9]+)\"")));
  CHECK(std::stoi(m[1]) < 800);
  CHECK(answer_bottom < 800);
  // The reasoning sentence and the observed weights' recipes are in the answer.
  REQUIRE(std::regex_search(after, m, std::regex("<div class=\"answer\" id=\"answer\">([\\s\\S]*?)</div>")));
  const std::string answer = m[1];
  CHECK_THAT(answer, Catch::Contains("EXPECTED") && Catch::Contains("within its rounding-error bound"));
  CHECK_THAT(answer, Catch::Contains("<b>BIT-EXACT</b>: pytorch, tvm, onnxruntime, onnxoptimizer"));
  CHECK_THAT(answer, Catch::Contains("assert_close tolerances implied by the bound"));
  CHECK(fs::file_size(shots / "tvm_thread.png") > 30000);
  // The ratio charts are drawn (the headline path cards' first charts).
  REQUIRE(std::regex_search(after, m, std::regex("data-ratio-charts=\"([0-9]+)\"")));
  CHECK(std::stoi(m[1]) >= 2);
}

TEST_CASE("markdown of a single run: the answer, no suite wording", "[cli][reports]") {
  const Result r = run("run " + src("cases/tvm_thread.json") + " --format markdown -q");
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::StartsWith("## foldcheck run tvm_thread: ✅ EXPECTED\n\n**EXPECTED: Every output path"));
  CHECK_THAT(r.out, Catch::Contains("reproduced bit for bit by pytorch, tvm, onnxruntime, onnxoptimizer"));
  CHECK_THAT(r.out, Catch::Contains("- float32 sequential fused/tvm: rtol="));
  for (const char* suite_words : {"passed", "results/", "expected EXPECTED", "entries"})
    CHECK(r.out.find(suite_words) == std::string::npos);
  // The evidence: every output path's ratio to its bound, identical rows once, notes once.
  CHECK_THAT(r.out, Catch::Contains("| path | dtype | verdict | worst ratio to bound |") &&
                        Catch::Contains("| 3 paths, identical (sequential fused/tvm, sequential fused/onnxruntime, "
                                        "sequential fused/onnxoptimizer) [1] | float64 |"));
  CHECK_THAT(r.out, Catch::Contains("\n† A cancelled result") && Catch::Contains("\n[1] this recipe holds eps in float32"));
  CHECK(r.out.find("[2]") == std::string::npos);  // the eps note once, not per row
}

TEST_CASE("junit: a failing entry gives its reason, rounded ratio, layer and channel - a pass says why", "[cli][reports][suite]") {
  const fs::path dir = tmp("junit_fail");
  fs::create_directories(dir);
  const std::string fixture = (dir / "fixture").string();
  REQUIRE(std::system((std::string(MAKE_ONNX_FIXTURE_BIN) + " " + fixture + " >/dev/null").c_str()) == 0);
  const json suite{{"name", "failing"},
                   {"entries",
                    {{{"case", src("cases/tvm_thread.json")}, {"attribution_elements", 64}},
                     {{"model", fixture + "/model.onnx"}, {"name", "corrupt_fold"}, {"observed", fixture + "/corrupt.onnx"},
                      {"input", fixture + "/x.npy"}, {"weights_only", true}}}}};
  std::ofstream(dir / "failing.json") << suite.dump(1);
  const Result r = run("suite " + (dir / "failing.json").string() + " -o " + (dir / "out").string() + " --no-timing -q");
  CHECK(r.code == 1);
  const std::string junit = slurp(dir / "out/junit.xml");
  CHECK_THAT(junit, Catch::Contains("tests=\"2\" failures=\"1\""));
  std::smatch m;
  REQUIRE(std::regex_search(junit, m, std::regex("<failure message=\"([^\"]*)\"[^>]*>([^<]*)</failure>")));
  const std::string message = m[1], detail = m[2];
  INFO(message << "\n" << detail);
  CHECK(std::regex_search(message, std::regex("^verdict UNEXPECTED, expected EXPECTED: worst ratio to the bound [0-9.]+(e\\+[0-9]+)? at ")));
  CHECK(std::regex_search(message, std::regex("bound [0-9]+(\\.[0-9]{1,2})?(e\\+[0-9]+)? at")));  // 3 significant digits
  CHECK(std::regex_search(detail, std::regex("^Layer [^ ]+ is UNEXPECTED: its folded parameters are [0-9.]+ times their "
                                              "rounding-error bound \\(channel [0-9]+\\)\\.&#10;not EXPECTED: ")));
  REQUIRE(std::regex_search(junit, m, std::regex("name=\"tvm_thread\">\\s*<system-out>([^<]*)</system-out>")));
  CHECK_THAT(std::string(m[1]), Catch::Contains("within its rounding-error bound"));
}

TEST_CASE(
    "suite: an entry that could not be judged makes it MISTRUSTED, one that contradicts its expectation UNEXPECTED, "
    "run and merged alike",
    "[cli][reports][suite]") {
  // A suite whose only failure was an entry that compared nothing (all-zero weights: MISTRUSTED
  // where EXPECTED was expected) said UNEXPECTED: doubt is not evidence (judgement::of_expectation).
  const fs::path dir = tmp("suite_doubt");
  fs::create_directories(dir);
  std::ofstream(dir / "zero.json") << R"({"name": "zero_weights", "seed": 1,
    "conv": {"in_channels": 2, "out_channels": 4, "kernel": [3, 3], "padding": [1, 1]},
    "input": {"shape": [1, 2, 8, 8], "init": {"normal": {"mean": 0, "std": 1}}},
    "weights": {"init": {"const": 0}}, "bn": {"gamma": 1, "beta": 0, "mean": 0, "var": 1, "eps": 1e-5},
    "compare": {"dtypes": ["float32"], "recipes": ["pytorch"], "accumulation": ["sequential"]}})";
  const json tvm = {{"case", src("cases/tvm_thread.json")}, {"attribution_elements", 64}};
  for (const bool contradiction : {false, true}) {
    json entries = json::array({tvm, {{"case", (dir / "zero.json").string()}}});
    if (contradiction)
      entries.push_back({{"case", src("cases/tvm_thread.json")},
                         {"name", "planted"},
                         {"expect", "UNEXPECTED"},
                         {"attribution_elements", 64}});
    const std::string name = contradiction ? "both" : "doubt";
    std::ofstream(dir / (name + ".json")) << json{{"name", name}, {"entries", entries}}.dump(1);
    const std::string want = contradiction ? "UNEXPECTED" : "MISTRUSTED";
    const Result r =
        run("suite " + (dir / (name + ".json")).string() + " -o " + (dir / name).string() + " --no-timing -q");
    INFO(r.out << r.err);
    CHECK(r.code == 1);
    CHECK_THAT(r.out, Catch::Contains("verdict " + want));
    CHECK(parse_file(dir / name / "report.json")["verdict"] == want);
    std::string shards;
    for (const char* s : {"1/2", "2/2"}) {
      const fs::path out = dir / (name + s[0]);
      REQUIRE(run("suite " + (dir / (name + ".json")).string() + " -o " + out.string() + " --shard " + s +
                  " --no-timing -q")
                  .code <= 1);
      shards += " " + (out / "report.json").string();
    }
    REQUIRE(run("merge" + shards + " -o " + (dir / (name + "_merged")).string()).code <= 1);
    CHECK(slurp(dir / (name + "_merged") / "report.json") == slurp(dir / name / "report.json"));
  }
}

// No contradictions (issue 23): with --observed, the end-to-end runs are foldcheck's own fold,
// and the text says so beside their verdict; an observed output that fails while every fold
// is within its bound asks whether it came from this input.
TEST_CASE("accuracy-diff text: whose weights the end-to-end runs used, and the same-input hint", "[cli][reports]") {
  const fs::path dir = tmp("end_to_end_words");
  REQUIRE(std::system((std::string(MAKE_ONNX_FIXTURE_BIN) + " " + dir.string() + " >/dev/null").c_str()) == 0);
  const std::string m = (dir / "model.onnx").string();
  const Result corrupt = run("accuracy-diff " + m + " --observed " + (dir / "corrupt.onnx").string() + " -q --no-timing");
  CHECK(corrupt.code == 1);
  // An observed output beyond its bound is named in the answer, and as why the verdicts differ.
  const Result bad_out = run("accuracy-diff " + m + " --observed " + (dir / "folded.onnx").string() + " --observed-output " +
                             (dir / "y_corrupt.npy").string() + " --input " + (dir / "x.npy").string() + " -q --no-timing");
  INFO(bad_out.out);
  CHECK(bad_out.code == 1);
  CHECK(std::regex_search(bad_out.out, std::regex("answer: UNEXPECTED: The observed output is UNEXPECTED: [0-9.e+]+ times its "
                                                  "end-to-end rounding-error bound\\.")));
  CHECK_THAT(bad_out.out, Catch::Contains("also judges the observed output against the end-to-end bound"));
  const Result bad_md = run("accuracy-diff " + m + " --observed " + (dir / "folded.onnx").string() + " --observed-output " +
                            (dir / "y_corrupt.npy").string() + " --input " + (dir / "x.npy").string() + " -q --format markdown");
  CHECK(std::regex_search(bad_md.out, std::regex("Worst ratio to its rounding-error bound: [0-9]{3}[^\n]*observed output")));
  CHECK_THAT(corrupt.out, Catch::Contains("fused = foldcheck's own pytorch fold of the original model, not the observed "
                                          "model's weights") &&
                              Catch::Contains("end-to-end verdict of foldcheck's own runs: EXPECTED") &&
                              Catch::EndsWith("verdict: UNEXPECTED\n"));
  // y_folded.npy came from x.npy: given with another input, it fails, and the text asks.
  foldcheck::Tensor x2;
  x2.shape = {1, 4, 6, 6};
  x2.dtype = foldcheck::DType::Float32;
  for (int i = 0; i < 144; ++i) x2.data.push_back(static_cast<float>(0.01 * (i % 17) - 0.05));
  foldcheck::write_npy((dir / "x2.npy").string(), x2);
  const Result other = run("accuracy-diff " + m + " --observed " + (dir / "folded.onnx").string() + " --observed-output " +
                           (dir / "y_folded.npy").string() + " --input " + (dir / "x2.npy").string() + " -q");
  INFO(other.out << other.err);
  CHECK(other.code == 1);
  CHECK_THAT(other.out, Catch::Contains("every folded layer above is within its bound: was the observed output computed "
                                        "from this input (--input)?"));
}

// The answer's first sentence, from the reviewer's cases: observed weights beyond their bound
// lead; an all-overflowing float16 run (no ratio anywhere) renders in every format; all-zero
// weights say nothing was compared, not that a bias was left out.
TEST_CASE("run answer: what leads, and cases without a ratio", "[cli][reports]") {
  const fs::path dir = tmp("answer_cases");
  fs::create_directories(dir);
  const json tvm = json::parse(slurp(src("cases/tvm_thread.json")));
  auto variant = [&](const std::string& name, const json& patch) {
    json c = tvm;
    for (const auto& [k, v] : patch.items()) {  // each top-level key replaced whole (null: removed)
      if (v.is_null()) c.erase(k);
      else c[k] = v;
    }
    c["name"] = name;
    std::ofstream(dir / (name + ".json")) << c.dump(1);
    return (dir / (name + ".json")).string();
  };
  const std::string unexp = variant("unexp", {{"observed_weights", {{"prefix", {2.1122828, 5.5735393, 2.0869968}}}}});
  Result r = run("run " + unexp + " -q --no-timing");
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("answer: UNEXPECTED: The observed weights are UNEXPECTED: Element 1 is -21.56 ULP"));
  const json small{{"compare", {{"dtypes", {"float16"}}, {"recipes", {"pytorch"}}, {"accumulation", {"sequential"}}}}};
  json overflow = small;
  overflow["weights"] = {{"init", {{"uniform", {{"low", 20000}, {"high", 30000}}}}}};
  overflow["input"] = {{"shape", {1, 3, 32, 32}}, {"init", {{"uniform", {{"low", 1}, {"high", 2}}}}}};
  overflow["observed_weights"] = nullptr;
  const std::string over = variant("overflow16", overflow);
  for (const char* f : {"text", "markdown", "html", "json"}) {
    r = run("run " + over + " -q --format " + f);
    INFO(f << ": " << r.err);
    CHECK(r.code == 1);
    CHECK(r.err.empty());
  }
  json zero = small;
  zero["compare"]["dtypes"] = {"float32"};
  zero["weights"] = {{"init", {{"normal", {{"mean", 0}, {"std", 0}}}}}};
  zero["observed_weights"] = nullptr;
  r = run("run " + variant("zero_w", zero) + " -q --no-timing");
  CHECK_THAT(r.out, Catch::Contains("answer: MISTRUSTED: float32 pytorch folded weights is MISTRUSTED: nothing was compared"));
  // fused and unfused agree exactly: no shares of a zero difference (they split what cancels).
  CHECK_THAT(r.out, Catch::Contains("0 elements differ") && !Catch::Contains("of that difference"));
}

// Pages that stay light (issue 23): the nightly suite's page under 1 MB (charts of the paths a
// reader looks for; every number in the tables), rendered in headless chromium without
// script errors; a corrupted model's page answers with the layer and channel. Screenshots of
// both are kept in the test output folder (screenshots/).
TEST_CASE("html report: the nightly suite under 1 MB and a corrupted model's answer (headless chromium)", "[cli][reports][browser]") {
  const fs::path dir = tmp("light_pages");
  fs::create_directories(dir);
  const fs::path shots = fs::path(FOLDCHECK_BINARY_DIR) / "screenshots";
  fs::create_directories(shots);
  const std::string chrome = "chromium --headless=new --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,800 ";
  auto render = [&](const fs::path& html, const std::string& png) {
    const fs::path dom = dir / (png + ".dom.html");
    REQUIRE(std::system((chrome + "--dump-dom file://" + html.string() + " >" + dom.string() + " 2>/dev/null").c_str()) == 0);
    REQUIRE(std::system((chrome + "--screenshot=" + (shots / png).string() + " file://" + html.string() + " >/dev/null 2>&1").c_str()) == 0);
    CHECK(fs::file_size(shots / png) > 20000);
    return slurp(dom);
  };
  REQUIRE(run("suite " + src("cases/nightly.json") + " -o " + (dir / "nightly").string() + " --no-timing -q").code == 0);
  const fs::path page = dir / "nightly/report.html";
  CHECK(fs::file_size(page) < 1000000);
  const std::string nightly = render(page, "nightly.png");
  CHECK_THAT(nightly, Catch::Contains("data-errors=\"0\"") && Catch::Contains("id=\"answer-e0\""));

  REQUIRE(std::system((std::string(MAKE_ONNX_FIXTURE_BIN) + " " + (dir / "fx").string() + " >/dev/null").c_str()) == 0);
  const fs::path corrupt = dir / "corrupt.html";
  CHECK(run("accuracy-diff " + (dir / "fx/model.onnx").string() + " --observed " + (dir / "fx/corrupt.onnx").string() +
            " --input " + (dir / "fx/x.npy").string() + " --format html -o " + corrupt.string() + " -q")
            .code == 1);
  const std::string model = render(corrupt, "corrupted_model.png");
  std::smatch m;
  REQUIRE(std::regex_search(model, m, std::regex("<div class=\"answer\" id=\"answer\">([\\s\\S]*?)</div>")));
  CHECK_THAT(std::string(m[1]), Catch::Contains("Layer conv_b is UNEXPECTED") && Catch::Contains("(channel 3)"));
  // The end-to-end runs used foldcheck's own fold: the page says so and why the verdicts differ.
  CHECK_THAT(model, Catch::Contains("s own pytorch fold of the original model, not the observed model") &&
                        Catch::Contains("The overall verdict (UNEXPECTED) differs from that of foldcheck's own end-to-end runs (EXPECTED)"));
  REQUIRE(std::regex_search(nightly, m, std::regex("data-ratio-charts=\"([0-9]+)\"")));
  CHECK(std::stoi(m[1]) >= 2);
}

// The ratio to the bound first, identical rows once, explanations in place (issue 23): the TVM
// case's float32 outputs cancel (max |ULP| in the thousands under a bound ULP of tens), its
// float64 folds by TVM, ONNX Runtime and onnxoptimizer hold eps in float32 (1137 ULP), its
// fresh BatchNorm has all-zero folded biases (MISTRUSTED); each says why where it stands, in
// text, HTML and the summary; the HTML draws no ULP "bound" line.
TEST_CASE("run reports: ratio charts first, identical rows once, explanations in place", "[cli][reports]") {
  const fs::path dir = tmp("in_place");
  fs::create_directories(dir);
  REQUIRE(run("run " + src("cases/tvm_thread.json") + " --format json -o " + (dir / "r.json").string() + " -q").code == 0);
  const json r = parse_file(dir / "r.json");
  for (const json& d : r["dtypes"])
    for (const json& o : d["orders"])
      for (const json& p : o["paths"]) {
        const json& h = p["histograms"]["bound"];
        REQUIRE(h["unit"] == "bound");
        std::int64_t n = h["zero"];
        for (const json& b : h["buckets"]) {
          n += b["negative"].get<std::int64_t>() + b["positive"].get<std::int64_t>();
          if (p["verdict"] == "EXPECTED") CHECK((b["upper"].is_number() && b["upper"].get<double>() <= 1));
        }
        CHECK(n == p["ulp"]["count"].get<std::int64_t>());
      }
  const Result t = run("run " + src("cases/tvm_thread.json") + " -q --no-timing");
  REQUIRE(t.code == 0);
  CHECK_THAT(t.out, Catch::Contains("histogram: float32 sequential unfused, error / its bound") &&
                        Catch::Contains("-- every element within its bound (|ratio| <= 1) --"));
  CHECK_THAT(t.out, Catch::Contains("2 paths, identical") && Catch::Contains("      = fused/tvm, fused/pytorch\n"));
  CHECK_THAT(t.out, Catch::Contains("-> this recipe holds eps in float32 (1e-05 becomes 9.99999975e-06)") && Catch::Contains("3 recipes' weights, identical"));
  for (const json& d : r["dtypes"])  // the facts: TVM, ONNX Runtime, onnxoptimizer in float64 only
    for (const json& f : d["folded_parameters"]) {
      const bool held = f["recipe"] != "pytorch" && f["recipe"] != "exact" && d["dtype"] == "float64";
      CHECK(f["weights"].contains("eps_held_in_float32") == (held || (f["recipe"] != "pytorch" && f["recipe"] != "exact")));
      if (f["weights"].contains("eps_held_in_float32"))
        CHECK((f["weights"]["eps_held_in_float32"]["ulp_min"].get<double>() >= 1) == held);
    }
  // Weights (w' = w s) never cancel: no weights row carries the cancellation note.
  CHECK_FALSE(std::regex_search(t.out, std::regex("weights[^\\n]*\\n(      = [^\\n]*\\n)?      -> max \\|ULP\\|")));
  CHECK_THAT(t.out, Catch::Contains("-> MISTRUSTED: every exact folded bias is 0") &&
                        Catch::Contains("it does not count toward the verdict"));
  CHECK(std::regex_search(t.out, std::regex("-> max \\|ULP\\| [0-9]+ is a cancelled result, within its own bound of")));
  CHECK_THAT(t.out, Catch::Contains("A cancelled result: each element's bound scales with the magnitudes of its terms"));
  CHECK_THAT(t.out, Catch::Contains("fused/tvm, fused/pytorch, fused/onnxruntime, fused/onnxoptimizer vs unfused:"));

  const fs::path html = dir / "tvm.html";
  REQUIRE(run("run " + src("cases/tvm_thread.json") + " --format html -o " + html.string() + " -q").code == 0);
  const std::string page = slurp(html);
  CHECK(page.find("bound of the element closest to its own") == std::string::npos);
  CHECK_THAT(page, Catch::Contains("<title>signed error / its bound") && Catch::Contains("<p class=\"muted why\">shown: "));
  CHECK_THAT(page, Catch::Contains("rows, identical)</span>") && Catch::Contains("<tr class=\"note\">"));
  CHECK_THAT(page, Catch::Contains("holds eps in float32") && Catch::Contains("every exact folded bias is 0"));
  std::smatch m;
  REQUIRE(std::regex_search(page, m, std::regex("<table class=\"paths\">([\\s\\S]*?)</table>")));
  const std::string table = m[1];
  std::size_t rows = 0;
  for (std::size_t at = table.find("<tr><td>"); at != std::string::npos; at = table.find("<tr><td>", at + 1)) ++rows;
  std::size_t paths = 0;
  for (const json& d : r["dtypes"])
    for (const json& o : d["orders"]) paths += o["paths"].size();
  CHECK(rows < paths);  // identical rows merged
  CHECK(rows > 4);
}
