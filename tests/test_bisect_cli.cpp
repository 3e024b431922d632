// `foldcheck bisect` through the executable: the TVM case's per-pass table, and an external
// compiler (tests/fake_compiler.sh) whose FastMath pass changes the outputs' value.
#include <catch2/catch.hpp>

#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli_run.hpp"
#include "foldcheck/commands/bisect.hpp"
#include "foldcheck/io/npy.hpp"
#include "schema_check.hpp"

using json = nlohmann::json;
using namespace foldcheck_cli_test;

namespace {

// Processes whose argv[0] is `program` (a zombie's command line is empty: reaped or not, it
// is gone). Not the shells or foldcheck that only name it in their arguments.
std::vector<pid_t> processes_of(const std::string& program) {
  std::vector<pid_t> r;
  if (DIR* d = opendir("/proc")) {
    while (const dirent* e = readdir(d)) {
      const pid_t pid = static_cast<pid_t>(std::atol(e->d_name));
      if (pid <= 0) continue;
      // A process may exit between readdir and the read (ESRCH): it is gone, as wanted.
      std::string cmdline;
      try {
        cmdline = slurp(fs::path("/proc") / e->d_name / "cmdline");
      } catch (const std::exception&) {
        continue;
      }
      if (cmdline.rfind(program + '\0', 0) == 0) r.push_back(pid);
    }
    closedir(d);
  }
  return r;
}

// A `sleep` whose path carries a marker unique to this test process (DIR/fcmark_PID_sleep):
// its processes can be found in /proc, and killed after the test whatever happened.
struct MarkedSleep {
  std::string path;
  MarkedSleep() {
    const fs::path p = tmp("fcmark_" + std::to_string(getpid()) + "_sleep");
    fs::remove(p);
    fs::create_symlink(fs::exists("/bin/sleep") ? "/bin/sleep" : "/usr/bin/sleep", p);
    path = p.string();
  }
  ~MarkedSleep() {
    for (const pid_t p : processes_of(path)) kill(p, SIGKILL);
  }
  std::vector<pid_t> alive() const { return processes_of(path); }
  // Background, background in a new session, and (last) in the foreground.
  std::string stragglers() const { return path + " 1000 & setsid " + path + " 1000 & "; }
};

// foldcheck with these arguments (no shell), TMPDIR set; stdout to /dev/null, stderr to a file.
pid_t spawn_foldcheck(const std::vector<std::string>& args, const fs::path& tmpdir, const fs::path& err) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    setenv("TMPDIR", tmpdir.c_str(), 1);
    if (!freopen("/dev/null", "w", stdout) || !freopen(err.c_str(), "w", stderr)) _exit(99);
    std::vector<char*> argv{const_cast<char*>(FOLDCHECK_BIN)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(FOLDCHECK_BIN, argv.data());
    _exit(98);
  }
  return pid;
}

bool no_bisect_folders(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("foldcheck_bisect_", 0) == 0) return false;
  return true;
}

fs::path fake_reference() {
  const fs::path ref = tmp("fake_reference.npy");
  const std::string env = std::string("FAKE_COMPILER_IMPL=") + FAKE_COMPILER_BIN + " ";
  REQUIRE(std::system((env + src("tests/fake_compiler.sh") + " --enabled '' --write-reference " + ref.string()).c_str()) == 0);
  setenv("FAKE_COMPILER_IMPL", FAKE_COMPILER_BIN, 1);
  return ref;
}

}  // namespace

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
  // {out} left as a FIFO or a link to a device: refused without opening it (it would block
  // or never end), whatever the timeout.
  for (const std::string make : {"mkfifo {out}", "ln -s /dev/zero {out}", "mkdir {out}"}) {
    const Result odd = run("bisect --cmd '" + make + "' --reference " + ref.string() + " --passes A,B --timeout 5");
    CHECK(odd.code == 2);
    CHECK_THAT(odd.err, Catch::Contains("other than a regular file"));
  }
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

TEST_CASE("bisect --cmd: placeholders are expanded in one scan, a value is one shell word and is never expanded again", "[cli][bisect]") {
  using foldcheck::expand_command;
  // Values that hold placeholders stay that text; unknown {...} and ${VAR} are left alone.
  CHECK(expand_command("c {enabled} {disabled} -o {out} {x} ${HOME} {a,b} {out", "{disabled}", "{out}", "/t/{enabled}.npy") ==
        "c '{disabled}' '{out}' -o '/t/{enabled}.npy' {x} ${HOME} {a,b} {out");
  CHECK(expand_command("{out}{out}", "", "", "a'b") == "'a'\\''b''a'\\''b'");
  // Hostile values through /bin/sh: printed back as they are, and nothing in them runs.
  const fs::path dir = tmp("expand");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string marker = (dir / "pwned").string();
  const std::string enabled = "{disabled}", disabled = "';touch " + marker + ";'$(touch " + marker + ")`touch " + marker + "`";
  const fs::path out = dir / "o{enabled}.txt";
  const std::string cmd = expand_command("printf '%s\\n' {enabled} {disabled} > {out}", enabled, disabled, out.string());
  REQUIRE(std::system(cmd.c_str()) == 0);
  CHECK_FALSE(fs::exists(marker));
  CHECK(slurp(out) == enabled + "\n" + disabled + "\n");
}

TEST_CASE("bisect --cmd: a pass name that is not an identifier is refused before anything runs", "[cli][bisect]") {
  const fs::path ref = fake_reference();
  const fs::path marker = tmp("injected");
  fs::remove(marker);
  // Sequential replacement expanded the pass named {disabled} again: in configuration 1
  // '{disabled}' became '';touch …;'' and the text between the quotes ran as shell.
  const Result r = run("bisect --cmd 'cp " + ref.string() + " {out}; : {enabled} {disabled}' --linear --passes '{disabled},;touch " +
                       marker.string() + ";' --reference " + ref.string());
  CHECK(r.code == 2);
  CHECK(r.err == "foldcheck: error: bisect: pass name '{disabled}' is not an identifier (a letter or '_', then letters, "
                 "digits, '_', '.', ':' or '-')\n");
  CHECK_FALSE(fs::exists(marker));
  for (const std::string bad : {"A,B C", "A,$(id)", "A,`id`", "A,x;y", "A,x|y", "A,x&y", "A,x>y", "A,x<y", "A,x\\y", "A,\"x\"",
                                "A,-rf", "A,1st"})
    CHECK(run("bisect --cmd 'true {out}' --passes '" + bad + "' --reference " + ref.string()).code == 2);
  // Real compilers' names: TVM, LLVM, MLIR, onnxoptimizer, ORT, with '.', ':' and '-'.
  const Result ok = run("bisect --cmd 'cp " + ref.string() + " {out}' --passes FoldScaleAxis,loop-unroll,canonicalize,"
                        "fuse_bn_into_conv,ConvBNFusion,affine.loop_fusion,ns::Pass --reference " + ref.string());
  CHECK(ok.code == 0);
}

TEST_CASE("bisect --cmd: nothing the command started survives it (success, failure, timeout)", "[cli][bisect]") {
  const fs::path ref = fake_reference();
  const MarkedSleep sleeper;
  const std::string fake = src("tests/fake_compiler.sh");
  // Success: the fake compiler ran, its background and setsid children are gone.
  const Result ok = run("bisect --cmd '" + sleeper.stragglers() + fake + " --disabled {disabled} -o {out}' --passes "
                        "FoldConstant,Reorder,FastMath --reference " + ref.string());
  CHECK(ok.code == 1);
  CHECK(sleeper.alive().empty());
  // A failing command.
  const Result failed = run("bisect --cmd '" + sleeper.stragglers() + "exit 3; {out}' --passes A --reference " + ref.string());
  CHECK(failed.code == 2);
  CHECK(sleeper.alive().empty());
  // A timeout, with the command itself still running.
  const auto t0 = std::chrono::steady_clock::now();
  const Result slow = run("bisect --cmd '" + sleeper.stragglers() + sleeper.path + " 1000; : {out}' --passes A --timeout 0.5 "
                          "--reference " + ref.string());
  CHECK(slow.code == 2);
  CHECK_THAT(slow.err, Catch::Contains("timed out after 0.5 s"));
  CHECK(sleeper.alive().empty());
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
}

TEST_CASE(
    "bisect --cmd: SIGINT, SIGTERM or SIGQUIT ends the command's processes, removes the temporaries, ends "
    "foldcheck by the signal",
    "[cli][bisect]") {
  const fs::path ref = fake_reference();
  const MarkedSleep sleeper;
  for (const int sig : {SIGINT, SIGTERM, SIGQUIT}) {
    INFO("signal " << sig);
    const fs::path tmpdir = tmp("signal_tmp");
    fs::remove_all(tmpdir);
    fs::create_directories(tmpdir);
    const pid_t pid = spawn_foldcheck({"bisect", "--cmd", sleeper.stragglers() + sleeper.path + " 1000; : {out}", "--passes", "A",
                                       "--reference", ref.string()},
                                      tmpdir, tmp("signal_err.txt"));
    for (int i = 0; i < 500 && sleeper.alive().size() < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CHECK(sleeper.alive().size() == 3);
    CHECK_FALSE(no_bisect_folders(tmpdir));  // the run's folder exists while it runs
    kill(pid, sig);
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    CHECK(WIFSIGNALED(st));
    CHECK(WTERMSIG(st) == sig);
    CHECK(sleeper.alive().empty());
    CHECK(no_bisect_folders(tmpdir));
  }
}

TEST_CASE("bisect --cmd: 200 MB of stderr is not held in memory, the error shows its end", "[cli][bisect]") {
  const fs::path ref = fake_reference();
  const fs::path tmpdir = tmp("stderr_tmp"), err = tmp("stderr_err.txt");
  fs::remove_all(tmpdir);
  fs::create_directories(tmpdir);
  const pid_t pid = spawn_foldcheck({"bisect", "--cmd",
                                     "head -c 200000000 /dev/zero | tr '\\0' x >&2; printf '\\nLAST-LINE-OF-STDERR\\n' >&2; exit 5; : {out}",
                                     "--passes", "A", "--reference", ref.string()},
                                    tmpdir, err);
  int st = 0;
  rusage ru{};
  REQUIRE(wait4(pid, &st, 0, &ru) == pid);
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 2);
  const std::string e = slurp(err);
  // The last line it said comes first, before the command; the tail of its stderr after.
  CHECK_THAT(e, Catch::StartsWith("foldcheck: error: bisect: the command failed (exit 5); it said: LAST-LINE-OF-STDERR: ") &&
                    Catch::Contains("bytes of stderr before this"));
  CHECK(e.size() < 4000);
  CHECK(ru.ru_maxrss < 100 * 1024);  // KiB: foldcheck and the children it reaped
  CHECK(no_bisect_folders(tmpdir));
}

TEST_CASE("bisect --cmd: a reference of zeros compares nothing: MISTRUSTED, never EXPECTED", "[cli][bisect]") {
  const fs::path zeros = tmp("zeros.npy");
  foldcheck::write_npy(zeros.string(), foldcheck::Tensor{{4}, std::vector<double>(4, 0.0), foldcheck::DType::Float32});
  const Result r = run("bisect --cmd 'cp " + zeros.string() + " {out}' --passes A,B --reference " + zeros.string() + " --format json");
  CHECK(r.code == 1);
  const json j = json::parse(r.out);
  CHECK(schema_errors(j).empty());
  CHECK(j["verdict"] == "MISTRUSTED");
  CHECK(j["culprit"].is_null());
  CHECK_THAT(j["mistrusted"].get<std::string>(), Catch::Contains("every reference value is 0"));
  const Result text = run("bisect --cmd 'cp " + zeros.string() + " {out}' --passes A,B --reference " + zeros.string());
  CHECK(text.code == 1);
  CHECK_THAT(text.out, Catch::Contains("verdict: MISTRUSTED") && Catch::Contains("every reference value is 0"));
}

TEST_CASE("bisect --cmd: processes that exit while foldcheck scans /proc never abort it", "[cli][bisect]") {
  // After each run foldcheck reads /proc/PID/stat of every process the command left. One
  // that exits between the directory scan and the read fails the read with ESRCH; read
  // through an iostream, that threw from a destructor and aborted foldcheck (exit 134:
  // 5 of 120 such runs in two parallel streams). Two streams of 40 runs, each leaving 27
  // short-lived orphans: every run must end with its verdict (exit 0: the output is the
  // reference).
  const fs::path ref = tmp("race_reference.npy"), codes = tmp("race_codes.txt"), err = tmp("race_err.txt");
  foldcheck::write_npy(ref.string(), foldcheck::Tensor{{4}, {1, 2, 3, 4}, foldcheck::DType::Float32});
  fs::remove(codes);
  fs::remove(err);
  const std::string one = std::string(FOLDCHECK_BIN) +
                          " bisect --cmd 'for i in 1 2 3 4 5 6 7 8 9 1 2 3 4 5 6 7 8 9 1 2 3 4 5 6 7 8 9; do (sleep 0.00$i &); done; cp " +
                          ref.string() + " {out}; : {enabled}' --passes A,B,C --linear --reference " + ref.string() +
                          " -q > /dev/null 2>> " + err.string() + "; echo $? >> " + codes.string();
  const std::string loop = "for r in $(seq 40); do " + one + "; done";
  REQUIRE(std::system(("(" + loop + ") & " + loop + "; wait").c_str()) == 0);
  std::string all = slurp(codes);
  INFO(slurp(err));
  CHECK(std::count(all.begin(), all.end(), '\n') == 80);
  CHECK(all.find_first_not_of("0\n") == std::string::npos);
}
