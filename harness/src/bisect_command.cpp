// `foldcheck bisect --cmd`: an external compiler's passes, bisected through its outputs
// (bisect.hpp).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "foldcheck/bisect.hpp"
#include "foldcheck/compare.hpp"
#include "foldcheck/errors.hpp"
#include "foldcheck/npy.hpp"
#include "foldcheck/version.hpp"

namespace foldcheck {

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// 'a,b' with single quotes escaped: one shell word, also when empty.
std::string shell_quote(const std::string& s) {
  std::string r = "'";
  for (const char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

std::string join(const std::vector<std::string>& v, std::size_t from, std::size_t to) {
  std::string r;
  for (std::size_t i = from; i < to; ++i) r += (r.empty() ? "" : ",") + v[i];
  return r;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (std::size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += to.size()) s.replace(p, from.size(), to);
  return s;
}

std::string tail(const fs::path& p, std::size_t max = 600) {
  std::ifstream in(p);
  std::string s{std::istreambuf_iterator<char>(in), {}};
  return s.size() > max ? "…" + s.substr(s.size() - max) : s;
}

struct Run {
  int status = 0;  // exit status, or -1 timed out, -2 killed by a signal
  double seconds = 0;
};

// /bin/sh -c cmd in its own process group, stdout and stderr to files; killed (the whole
// group) after `timeout` seconds.
Run run_shell(const std::string& cmd, const fs::path& out_log, const fs::path& err_log, double timeout) {
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("bisect: fork failed");
  if (pid == 0) {
    setpgid(0, 0);
    const int o = open(out_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), e = open(err_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o >= 0) dup2(o, 1);
    if (e >= 0) dup2(e, 2);
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(pid, pid);
  Run r;
  int st = 0;
  for (;;) {
    const pid_t w = waitpid(pid, &st, WNOHANG);
    if (w == pid) break;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r.seconds > timeout) {
      kill(-pid, SIGKILL);
      waitpid(pid, &st, 0);
      r.status = -1;
      return r;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -2;
  return r;
}

class CommandBisector {
 public:
  explicit CommandBisector(const ExternalBisectOptions& o) : o_(o) {
    char tmpl[] = "/tmp/foldcheck_bisect_XXXXXX";
    if (!mkdtemp(tmpl)) throw std::runtime_error("bisect: cannot create a temporary directory");
    dir_ = tmpl;
    target_ = approximate_values(o.reference, o.dtype);
  }
  ~CommandBisector() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // Configuration k: passes[0..k) enabled.
  json step(std::size_t k) {
    const std::size_t n = o_.passes.size(), id = ++count_;
    const fs::path out = dir_ / fmt::format("out_{}.npy", id);
    std::string cmd = replace_all(o_.command, "{enabled}", shell_quote(join(o_.passes, 0, k)));
    cmd = replace_all(cmd, "{disabled}", shell_quote(join(o_.passes, k, n)));
    cmd = replace_all(cmd, "{out}", shell_quote(out.string()));
    if (o_.progress) o_.progress(fmt::format("bisect: run {} ({} of {} passes enabled)", id, k, n));
    const fs::path so = dir_ / fmt::format("stdout_{}.txt", id), se = dir_ / fmt::format("stderr_{}.txt", id);
    const Run r = run_shell(cmd, so, se, o_.timeout_seconds);
    json j{{"prefix", k}, {"enabled", json(std::vector<std::string>(o_.passes.begin(), o_.passes.begin() + k))},
           {"command", cmd}, {"seconds", r.seconds}};
    if (r.status == -1)
      throw InputError(fmt::format("bisect: the command timed out after {:g} s (--timeout): {}", o_.timeout_seconds, cmd));
    if (r.status != 0)
      throw InputError(fmt::format("bisect: the command failed ({}): {}\n{}", r.status == -2 ? "killed by a signal" : fmt::format("exit {}", r.status),
                                   cmd, tail(se)));
    if (!fs::exists(out)) throw InputError(fmt::format("bisect: the command exited 0 but wrote no {{out}} file: {}", cmd));
    Tensor y;
    try {
      y = read_npy(out.string());
    } catch (const InputError& e) {
      throw InputError(fmt::format("bisect: the command's output is not a valid .npy ({}): {}", e.what(), cmd));
    }
    if (y.data.size() != o_.reference.size())
      throw InputError(fmt::format("bisect: the command wrote {} values of shape {}, the reference has {} ({})", y.data.size(),
                                   shape_string(y.shape), o_.reference.size(), cmd));
    std::vector<double> v = y.data;
    for (double& x : v) x = round_to(o_.dtype, x);
    const Comparison c = compare(v, target_, o_.dtype);
    j["max_abs_ulp"] = c.ulp.max_abs;
    j["p99_9_abs_ulp"] = c.ulp.p999;
    j["p50_abs_ulp"] = c.ulp.p50;
    j["rms_ulp"] = c.ulp.rms;
    j["nan"] = c.kinds.nan;
    j["worst_index"] = c.worst_index;
    return j;
  }

 private:
  const ExternalBisectOptions& o_;
  fs::path dir_;
  ref::ValueArray target_;
  std::size_t count_ = 0;
};

}  // namespace

json bisect_command(const ExternalBisectOptions& o) {
  if (o.passes.empty()) throw InputError("bisect: --cmd needs --passes P1,P2,...");
  if (o.command.find("{out}") == std::string::npos) throw InputError("bisect: --cmd must contain {out} (the .npy it writes)");
  CommandBisector b(o);
  const std::size_t n = o.passes.size();
  json steps = json::array();
  json base = b.step(0);
  const double m0 = base["max_abs_ulp"].get<double>();
  const double limit = o.threshold_ulp ? *o.threshold_ulp : 2 * m0 + 1;
  auto bad = [&](json& s) {
    const bool b = s["max_abs_ulp"].get<double>() > limit || s["nan"].get<std::int64_t>() > 0;
    s["bad"] = b;
    return b;
  };
  bad(base);
  steps.push_back(base);
  json culprit = nullptr;
  if (base["bad"].get<bool>()) {
    culprit = nullptr;  // with every pass disabled the output is already beyond the criterion
  } else if (o.linear) {
    for (std::size_t k = 1; k <= n; ++k) {
      json s = b.step(k);
      if (bad(s) && culprit.is_null()) culprit = o.passes[k - 1];
      steps.push_back(std::move(s));
    }
  } else {
    json full = b.step(n);
    const bool full_bad = bad(full);
    steps.push_back(full);
    if (full_bad) {
      std::size_t lo = 0, hi = n;
      while (hi - lo > 1) {
        const std::size_t mid = lo + (hi - lo) / 2;
        json s = b.step(mid);
        (bad(s) ? hi : lo) = mid;
        steps.push_back(std::move(s));
      }
      culprit = o.passes[hi - 1];
    }
  }
  return {{"tool", "foldcheck"},
          {"version", kVersion},
          {"schema_version", kSchemaVersion},
          {"command", "bisect"},
          {"external_command", o.command},
          {"passes", o.passes},
          {"reference", o.reference_source},
          {"dtype", name(o.dtype)},
          {"criterion", o.threshold_ulp ? fmt::format("max |ULP| > {:g} (--threshold-ulp)", limit)
                                        : fmt::format("max |ULP| > 2 x {:.4g} + 1 = {:.4g} (twice the all-disabled output's "
                                                      "worst error, plus one ULP), or a NaN",
                                                      m0, limit)},
          {"mode", o.linear ? "linear" : "search"},
          {"culprit", culprit},
          {"steps", steps},
          {"evaluations", steps.size()},
          {"verdict", culprit.is_null() && !base["bad"].get<bool>() ? "EXPECTED" : "UNEXPECTED"}};
}

}  // namespace foldcheck
