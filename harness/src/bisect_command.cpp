// `foldcheck bisect --cmd`: an external compiler's passes, bisected through its outputs
// (bisect.hpp).
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <cstring>

#include <fmt/format.h>

#include "foldcheck/bisect.hpp"
#include "foldcheck/compare.hpp"
#include "foldcheck/errors.hpp"
#include "foldcheck/npy.hpp"
#include "foldcheck/version.hpp"
#include "command_process.hpp"

namespace foldcheck {

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr std::size_t kMaxArgBytes = 131072;  // MAX_ARG_STRLEN: 32 pages of 4 KiB

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

// Whether c may stand in a pass name (check_pass_names), at its start or after it.
bool pass_char(char c, bool first) {
  const bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
  return first ? alpha : alpha || (c >= '0' && c <= '9') || c == '.' || c == ':' || c == '-';
}

// The options bisect_command refuses (bisect.hpp), before anything runs. Numbers must be
// finite: a NaN compares false with every limit, so a bare `x <= 0` check let it through
// and it disabled the option.
void check_options(const ExternalBisectOptions& o) {
  if (o.passes.empty()) throw InputError("bisect: --cmd needs --passes P1,P2,...");
  check_pass_names(o.passes);
  if (o.command.find("{out}") == std::string::npos) throw InputError("bisect: --cmd must contain {out} (the .npy it writes)");
  if (!std::isfinite(o.timeout_seconds) || o.timeout_seconds <= 0)
    throw InputError(fmt::format("bisect: --timeout must be a finite number of seconds > 0 (got {})", o.timeout_seconds));
  if (o.threshold_ulp && (!std::isfinite(*o.threshold_ulp) || *o.threshold_ulp < 0))
    throw InputError(fmt::format("bisect: --threshold-ulp must be a finite number >= 0 (got {})", *o.threshold_ulp));
  if (o.reference.empty())
    throw InputError(fmt::format("{}: empty reference (shape {}): nothing to compare", o.reference_source, shape_string(o.reference_shape)));
  // The longest command of any run, before the first runs: {enabled} and {disabled} are
  // the two halves of one list, so the expansion's length is linear in the split point and
  // longest at one end (all enabled, or none); {out} as long as a run's.
  const std::size_t n = o.passes.size();
  const std::string out = (fs::temp_directory_path() / "foldcheck_bisect_XXXXXX" / "out_999999.npy").string();
  for (const std::size_t k : {std::size_t{0}, n}) {
    const std::string cmd = expand_command(o.command, join(o.passes, 0, k), join(o.passes, k, n), out);
    if (cmd.size() >= kMaxArgBytes)
      throw InputError(fmt::format("bisect: the command is {} bytes once its placeholders are filled (with {} of {} passes "
                                   "enabled), over the {} bytes Linux allows one argument (MAX_ARG_STRLEN); give fewer or "
                                   "shorter passes",
                                   cmd.size(), k, n, kMaxArgBytes));
  }
}

// The runs of one bisection: a private temporary directory (under $TMPDIR) for the {out}
// files, removed by the destructor — also while an Interrupted unwinds.
class CommandBisector {
 public:
  CommandBisector(const ExternalBisectOptions& o, const command::SignalScope& signals) : o_(o), signals_(signals) {
    std::string tmpl = (fs::temp_directory_path() / "foldcheck_bisect_XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("bisect: cannot create a temporary directory in " + fs::temp_directory_path().string());
    dir_ = tmpl;
    target_ = approximate_values(o.reference, o.dtype);
  }
  ~CommandBisector() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  CommandBisector(const CommandBisector&) = delete;
  CommandBisector& operator=(const CommandBisector&) = delete;

  // Configuration k: passes[0..k) enabled. Throws InputError when the run fails, and
  // command::Interrupted when a signal was caught (the command already ended either way).
  json step(std::size_t k) {
    signals_.throw_if_pending();
    const std::size_t n = o_.passes.size(), id = ++count_;
    const fs::path out = dir_ / fmt::format("out_{}.npy", id);
    const std::string cmd = expand_command(o_.command, join(o_.passes, 0, k), join(o_.passes, k, n), out.string());
    // Messages quote the command, shortened: a 254 KB error line helps nobody.
    const std::string shown = cmd.size() <= 300 ? cmd : fmt::format("{}… ({} bytes)", cmd.substr(0, 300), cmd.size());
    // Linux takes at most MAX_ARG_STRLEN (32 pages) in one argument, and `sh -c CMD` is
    // one: past it, exec fails with E2BIG and the shell's exit 127 would say nothing.
    if (cmd.size() >= kMaxArgBytes)
      throw InputError(fmt::format("bisect: the command of run {} is {} bytes once its placeholders are filled, over "
                                   "the {} bytes Linux allows one argument (MAX_ARG_STRLEN); give fewer or shorter "
                                   "passes: {}",
                                   id, cmd.size(), kMaxArgBytes, shown));
    if (o_.progress) o_.progress(fmt::format("bisect: run {} ({} of {} passes enabled)", id, k, n));
    const command::Outcome r = command::run_command(cmd, o_.timeout_seconds, signals_);
    json j{{"prefix", k}, {"enabled", json(std::vector<std::string>(o_.passes.begin(), o_.passes.begin() + k))},
           {"command", cmd}, {"seconds", r.seconds}};
    if (r.status == -1)
      throw InputError(fmt::format("bisect: the command timed out after {:g} s (--timeout): {}{}", o_.timeout_seconds, shown,
                                   stderr_note(r)));
    if (r.status != 0)
      throw InputError(fmt::format("bisect: the command failed ({}): {}{}",
                                   r.status == -2 ? fmt::format("killed by signal {}", r.signal) : fmt::format("exit {}", r.status),
                                   shown, stderr_note(r)));
    if (!fs::exists(out)) throw InputError(fmt::format("bisect: the command exited 0 but wrote no {{out}} file: {}", shown));
    // Only a regular file is read: opening a FIFO left at {out} blocks for ever (past
    // --timeout, which covers the command only), and a link to /dev/zero never ends.
    std::error_code ec;
    if (!fs::is_regular_file(out, ec))
      throw InputError(fmt::format("bisect: the command left {{out}} as something other than a regular file (a FIFO, "
                                   "a device, or a link to one): {}",
                                   shown));
    Tensor y;
    try {
      y = read_npy(out.string());
    } catch (const InputError& e) {
      throw InputError(fmt::format("bisect: the command's output is not a valid .npy ({}): {}", e.what(), shown));
    }
    if (y.data.size() != o_.reference.size())
      throw InputError(fmt::format("bisect: the command wrote {} values of shape {}, the reference has {} ({})", y.data.size(),
                                   shape_string(y.shape), o_.reference.size(), shown));
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
  // The end of the command's stderr, for a message (on its own lines after the first).
  static std::string stderr_note(const command::Outcome& r) {
    if (!r.err.total()) return {};
    std::string t = r.err.last(kStderrShown);
    while (!t.empty() && t.back() == '\n') t.pop_back();
    return "\n" + t;
  }
  static constexpr std::size_t kStderrShown = 2000;

  const ExternalBisectOptions& o_;
  const command::SignalScope& signals_;
  fs::path dir_;
  ref::ValueArray target_;
  std::size_t count_ = 0;
};

// The search (or the linear scan) over the configurations, the report as bisect_command
// returns it.
json search(const ExternalBisectOptions& o, const command::SignalScope& signals) {
  CommandBisector b(o, signals);
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
  // Nothing compared is never a pass: against a reference of zeros every output that is
  // zero too would look perfect, whatever the passes did to the computation.
  const bool all_zero = std::all_of(o.reference.begin(), o.reference.end(), [](double x) { return x == 0; });
  const bool expected = culprit.is_null() && !base["bad"].get<bool>();
  json r{{"tool", "foldcheck"},
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
         {"verdict", !expected ? "UNEXPECTED" : all_zero ? "MISTRUSTED" : "EXPECTED"}};
  if (expected && all_zero)
    r["mistrusted"] = "every reference value is 0: a command writing zeros matches it whatever its passes do, so nothing was tested";
  return r;
}

}  // namespace

std::string expand_command(const std::string& tmpl, const std::string& enabled, const std::string& disabled,
                           const std::string& out) {
  const std::pair<const char*, const std::string*> values[] = {{"{enabled}", &enabled}, {"{disabled}", &disabled}, {"{out}", &out}};
  std::string r;
  for (std::size_t i = 0; i < tmpl.size();) {
    bool replaced = false;
    if (tmpl[i] == '{')
      for (const auto& [name, value] : values)
        if (tmpl.compare(i, std::strlen(name), name) == 0) {
          r += shell_quote(*value);
          i += std::strlen(name);
          replaced = true;
          break;
        }
    if (!replaced) r += tmpl[i++];
  }
  return r;
}

void check_pass_names(const std::vector<std::string>& passes) {
  std::set<std::string> seen;
  for (std::size_t k = 0; k < passes.size(); ++k) {
    const std::string& p = passes[k];
    if (p.empty()) throw InputError(fmt::format("bisect: pass name {} of --passes is empty (two commas, or one at an end)", k + 1));
    // {enabled} and {disabled} name passes: a name in both would be both at once.
    if (!seen.insert(p).second) throw InputError(fmt::format("bisect: pass '{}' is listed twice in --passes", p));
    bool ok = !p.empty();
    for (std::size_t i = 0; ok && i < p.size(); ++i) ok = pass_char(p[i], i == 0);
    if (!ok)
      throw InputError(fmt::format("bisect: pass name '{}' is not an identifier (a letter or '_', then letters, digits, "
                                   "'_', '.', ':' or '-')",
                                   p));
  }
}

json bisect_command(const ExternalBisectOptions& o) {
  check_options(o);
  command::SignalScope signals;
  try {
    json r = search(o, signals);  // its temporary directory is gone when it returns or throws
    signals.throw_if_pending();
    return r;
  } catch (const command::Interrupted& e) {
    command::SignalScope::die_of(e.signo);
  }
}

}  // namespace foldcheck
