// `foldcheck bisect --cmd`: an external compiler's passes, bisected through its outputs
// (bisect.hpp).
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "foldcheck/base/envelope.hpp"
#include "foldcheck/base/errors.hpp"
#include "foldcheck/commands/bisect.hpp"
#include "foldcheck/io/contained_file.hpp"
#include "foldcheck/io/npy.hpp"
#include "foldcheck/numerics/compare.hpp"
#include "foldcheck/platform/process.hpp"
#include "foldcheck/reports/bisect_notes.hpp"
#include "output_band_json.hpp"
#include "output_judge.hpp"

namespace foldcheck {

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr std::size_t kMaxArgBytes = 131072;  // MAX_ARG_STRLEN: 32 pages of 4 KiB

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

// Whether an output of shape `a` holds its values in the order of shape `b` (same count
// checked before): equal once the axes of size 1 are dropped, or either is flat (1-D).
bool same_layout(const Shape& a, const Shape& b) {
  if (a.size() <= 1 || b.size() <= 1) return true;
  auto squeeze = [](const Shape& s) {
    Shape r;
    for (const std::int64_t d : s)
      if (d != 1) r.push_back(d);
    return r;
  };
  return squeeze(a) == squeeze(b);
}

// The options external_bisect refuses (bisect.hpp), before anything runs. Numbers must be
// finite: a NaN compares false with every limit, so a bare `x <= 0` check let it through
// and it disabled the option.
void check_options(const ExternalBisectOptions& o) {
  if (o.passes.empty()) throw InputError("bisect: " + field("command") + " needs " + field("passes") + " P1,P2,...");
  check_pass_names(o.passes);
  if (o.command.find("{out}") == std::string::npos)
    throw InputError("bisect: " + field("command") + " must contain {out} (the .npy it writes)");
  if (!std::isfinite(o.timeout_seconds) || o.timeout_seconds <= 0)
    throw InputError(fmt::format(fmt::runtime("bisect: " + field("timeout_seconds") +
                                              " must be a finite number of seconds > 0 (got {})"),
                                 o.timeout_seconds));
  if (o.threshold_ulp && (!std::isfinite(*o.threshold_ulp) || *o.threshold_ulp < 0))
    throw InputError(
        fmt::format(fmt::runtime("bisect: " + field("threshold_ulp") + " must be a finite number >= 0 (got {})"),
                    *o.threshold_ulp));
  if (!o.known) {
    if (o.reference.empty())
      throw InputError(fmt::format("{}: empty reference (shape {}): nothing to compare", o.reference_source,
                                   shape_string(o.reference_shape)));
    // A NaN or an infinity has no error to measure against: it would hide the element.
    for (std::size_t i = 0; i < o.reference.size(); ++i)
      if (!std::isfinite(o.reference[i]))
        throw InputError(fmt::format("{}: the reference holds {} at index {}: bisect needs the exact outputs, finite",
                                     o.reference_source, o.reference[i],
                                     shape_string(unravel_index(o.reference_shape, i))));
  }
  // The longest command of any run, before the first runs: {enabled} and {disabled} are
  // the two halves of one list, so the expansion's length is linear in the split point and
  // longest at one end (all enabled, or none); {out} as long as a run's.
  const std::size_t n = o.passes.size();
  const std::string out = (fs::temp_directory_path() / "foldcheck_bisect_XXXXXX" / "out_999999.npy").string();
  for (const std::size_t k : {std::size_t{0}, n}) {
    const std::string cmd = expand_command(o.command, join(o.passes, 0, k), join(o.passes, k, n), out);
    if (cmd.size() >= kMaxArgBytes)
      throw InputError(
          fmt::format("bisect: the command is {} bytes once its placeholders are filled (with {} of {} passes "
                      "enabled), over the {} bytes Linux allows one argument (MAX_ARG_STRLEN); give fewer or "
                      "shorter passes",
                      cmd.size(), k, n, kMaxArgBytes));
  }
}

// The runs of one bisection: a private temporary directory (under $TMPDIR) for the {out}
// files, removed by the destructor — also while an Interrupted unwinds.
class CommandBisector {
 public:
  CommandBisector(const ExternalBisectOptions& o, const command::SignalScope& signals)
      : o_(o),
        signals_(signals),
        judge_(o.known ? o.known->exact : approximate_values(o.reference, o.dtype),
               o.known ? o.known->shape : o.reference_shape, o.known ? o.known->dtype : o.dtype,
               o.known ? &*o.known : nullptr, o.threshold_ulp, o.layer ? &*o.layer : nullptr) {
    std::string tmpl = (fs::temp_directory_path() / "foldcheck_bisect_XXXXXX").string();
    if (!mkdtemp(tmpl.data()))
      throw std::runtime_error("bisect: cannot create a temporary directory in " + fs::temp_directory_path().string());
    dir_ = tmpl;
    command::SignalScope::remove_on_signal(dir_.string());
    std::error_code ec;
    if (const fs::path real = fs::canonical(dir_, ec); !ec)
      dir_ = real;  // {out} is read from here as made (contained_file.hpp)
  }
  ~CommandBisector() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  CommandBisector(const CommandBisector&) = delete;
  CommandBisector& operator=(const CommandBisector&) = delete;

  std::size_t runs() const { return count_; }
  std::string criterion() const { return judge_.criterion(); }

  // Configuration k: passes[0..k) enabled; the first call must be k = 0 (the baseline).
  BisectStep prefix(std::size_t k) {
    BisectStep st = run(std::vector<std::string>(o_.passes.begin(), o_.passes.begin() + static_cast<std::ptrdiff_t>(k)),
                        std::vector<std::string>(o_.passes.begin() + static_cast<std::ptrdiff_t>(k), o_.passes.end()));
    std::get<RunMeasures>(st.measures).prefix = k;
    return st;
  }
  // Every pass but passes[i] enabled.
  BisectStep without(std::size_t i) {
    std::vector<std::string> on = o_.passes;
    on.erase(on.begin() + static_cast<std::ptrdiff_t>(i));
    BisectStep st = run(on, {o_.passes[i]});
    std::get<RunMeasures>(st.measures).prefix = on.size();
    st.disabled = o_.passes[i];
    return st;
  }

 private:
  // One run with these passes enabled and disabled, judged. Throws InputError when the run
  // fails, and command::Interrupted when a signal was caught (the command already ended
  // either way).
  BisectStep run(const std::vector<std::string>& on, const std::vector<std::string>& off) {
    signals_.throw_if_pending();
    const std::size_t n = o_.passes.size(), id = ++count_;
    const fs::path out = dir_ / fmt::format("out_{}.npy", id);
    const std::string cmd = expand_command(o_.command, join(on, 0, on.size()), join(off, 0, off.size()), out.string());
    // Messages quote the command, shortened: a 254 KB error line helps nobody.
    const std::string shown = cmd.size() <= 300 ? cmd : fmt::format("{}… ({} bytes)", cmd.substr(0, 300), cmd.size());
    // Linux takes at most MAX_ARG_STRLEN (32 pages) in one argument, and `sh -c CMD` is
    // one: past it, exec fails with E2BIG and the shell's exit 127 would say nothing.
    if (cmd.size() >= kMaxArgBytes)
      throw InputError(
          fmt::format("bisect: the command of run {} is {} bytes once its placeholders are filled, over "
                      "the {} bytes Linux allows one argument (MAX_ARG_STRLEN); give fewer or shorter "
                      "passes: {}",
                      id, cmd.size(), kMaxArgBytes, shown));
    if (o_.progress) o_.progress(fmt::format("bisect: run {} ({} of {} passes enabled)", id, on.size(), n));
    const command::Outcome r = command::run_command(cmd, o_.timeout_seconds, signals_);
    RunMeasures m;
    m.enabled = on;
    m.command = cmd;
    m.seconds = r.seconds;
    if (r.status == -1)
      throw InputError(fmt::format(fmt::runtime("bisect: the command timed out after {:g} s (" +
                                                field("timeout_seconds") + "){}: {}{}"),
                                   o_.timeout_seconds, said(r), shown, stderr_note(r)));
    if (r.status != 0)
      throw InputError(
          fmt::format("bisect: the command failed ({}){}: {}{}",
                      r.status == -2 ? fmt::format("killed by signal {}", r.signal) : fmt::format("exit {}", r.status),
                      said(r), shown, stderr_note(r)));
    if (!fs::exists(out))
      throw InputError(fmt::format("bisect: the command exited 0 but wrote no {{out}} file: {}", shown));
    // {out} is read under the one rule of files another program wrote (contained_file.hpp):
    // a FIFO left there would block the read for ever (past --timeout, which covers the
    // command only), a link could lead anywhere (/dev/zero never ends).
    std::string bytes;
    try {
      bytes = read_contained(dir_.string(), "bisect's temporary directory", out.string(), ".npy file");
    } catch (const InputError& e) {
      throw InputError(
          fmt::format("bisect: the command left {{out}} as something other than a regular file of bisect's "
                      "temporary directory ({}): {}",
                      e.what(), shown));
    }
    Tensor y;
    try {
      y = parse_npy(bytes, out.string());
    } catch (const InputError& e) {
      throw InputError(fmt::format("bisect: the command's output is not a valid .npy ({}): {}", e.what(), shown));
    }
    const std::size_t expected = o_.known ? o_.known->exact.size() : o_.reference.size();
    if (y.data.size() != expected)
      throw InputError(fmt::format("bisect: the command wrote {} values of shape {}, {} has {} (shape {}){}: {}",
                                   y.data.size(), shape_string(y.shape), o_.known ? "the layer" : "the reference",
                                   expected, shape_string(o_.known ? o_.known->shape : o_.reference_shape),
                                   o_.known && !o_.known->shape_hint.empty() ? " (" + o_.known->shape_hint + ")" : "",
                                   shown));
    const Shape& want = o_.known ? o_.known->shape : o_.reference_shape;
    if (!same_layout(y.shape, want))
      throw InputError(
          fmt::format("bisect: the command wrote shape {}, {} has shape {}: the same {} values in another "
                      "layout (NHWC for NCHW?) would be compared element by element with the wrong ones: {}",
                      shape_string(y.shape), o_.known ? "the computation" : "the reference", shape_string(want),
                      expected, shown));
    // The layer judged by diagnose: a file of a narrower type (a 16-bit output of a float32
    // layer) is compared in its own type, as diagnose compares the file it is given.
    const DType declared = o_.known ? o_.known->dtype : o_.dtype;
    const DType t = o_.layer && info(y.dtype).unit_roundoff > info(declared).unit_roundoff ? y.dtype : declared;
    judge_.set_observed_dtype(t);
    std::vector<double> v = y.data;
    for (double& x : v) x = round_to(t, x);
    BisectStep st;
    st.measures = std::move(m);
    if (id == 1) judge_.judge_base(v, st);
    else judge_.judge(v, st);
    return st;
  }

  // The end of the command's stderr, for a message (on its own lines after the first).
  // What a failed command said on stderr: its last line (an adapter's own refusal, a
  // traceback's exception), put before the command in the message ("; it said: LINE"), and
  // the tail of it after ("\nits stderr (the end):\nTAIL"); "" when it said nothing.
  static std::string stderr_text(const command::Outcome& r) {
    std::string t = r.err.total() ? r.err.last(kStderrShown) : std::string();
    while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
    return t;
  }
  static std::string said(const command::Outcome& r) {
    const std::string t = stderr_text(r);
    const std::size_t start = t.find_last_of('\n');
    const std::string last = start == std::string::npos ? t : t.substr(start + 1);
    if (last.empty()) return {};
    return fmt::format("; it said: {}", last.size() <= 400 ? last : "…" + last.substr(last.size() - 400));
  }
  static std::string stderr_note(const command::Outcome& r) {
    const std::string t = stderr_text(r);
    return t.empty() ? std::string() : "\nits stderr (the end):\n" + t;
  }
  static constexpr std::size_t kStderrShown = 2000;

  const ExternalBisectOptions& o_;
  const command::SignalScope& signals_;
  OutputJudge judge_;
  fs::path dir_;
  std::size_t count_ = 0;
};

}  // namespace

std::vector<std::string> leave_one_out_fixes(const std::vector<BisectStep>& steps) {
  std::vector<std::string> r;
  for (const BisectStep& s : steps)
    if (s.disabled && !s.bad) r.push_back(*s.disabled);
  return r;
}

json BisectStep::to_json() const {
  json j = std::visit([](const auto& m) { return m.to_json(); }, measures);
  j["bad"] = bad;
  if (verdict) j["verdict"] = name(*verdict);
  if (lists_informative) j["informative"] = informative;
  if (disabled) j["disabled"] = *disabled;
  else if (lists_disabled) j["disabled"] = nullptr;
  return j;
}

json BisectElement::to_json() const {
  json e{{"flat_index", flat_index}, {"index", index},     {"observed", observed},
         {"exact", exact},           {"channel", channel}, {"channel_scale", channel_scale}};
  for (const auto& [key, v] :
       {std::pair{"ulp", &ulp}, std::pair{"channel_units", &channel_units}, std::pair{"abs_sum", &abs_sum},
        std::pair{"bound", &bound}, std::pair{"ratio", &ratio}, std::pair{"probabilistic_bound", &probabilistic_bound}})
    if (*v) e[key] = **v;
  return e;
}

json RunMeasures::to_json() const {
  json j{{"prefix", prefix},
         {"enabled", enabled},
         {"command", command},
         {"seconds", seconds},
         {"max_abs_ulp", max_abs_ulp},
         {"p99_9_abs_ulp", p99_9_abs_ulp},
         {"p50_abs_ulp", p50_abs_ulp},
         {"rms_ulp", rms_ulp},
         {"nan", nan},
         {"inf", inf},
         {"worst_index", worst_index},
         {"channel_units", {{"max", units_max}, {"p99_9", units_p99_9}, {"rms", units_rms}}}};
  if (largest_ulp) j["largest_ulp"] = largest_ulp->to_json();
  if (decisive) j["decisive"] = decisive->to_json();
  if (bounds_verdict) j["bounds_verdict"] = name(*bounds_verdict);
  if (bounds) {
    j["worst_ratio"] = bounds->worst_ratio;
    j["probabilistic_worst_ratio"] = bounds->probabilistic_worst_ratio;
    j["beyond_bound"] = bounds->beyond_bound;
    j["beyond_probabilistic"] = bounds->beyond_probabilistic;
  }
  if (gross) j["gross"] = *gross;
  if (band) j["band"] = output_band_json(*band);
  return j;
}

json steps_json(const std::vector<BisectStep>& steps) {
  json a = json::array();
  for (const BisectStep& s : steps) a.push_back(s.to_json());
  return a;
}

namespace {

// The configurations of the mode, run in order (bisect.hpp); returns the culprit.
std::optional<std::string> run_mode(CommandBisector& b, const ExternalBisectOptions& o,
                                    std::vector<BisectStep>& steps) {
  const std::size_t n = o.passes.size();
  steps.push_back(b.prefix(0));
  if (steps.back().bad) return std::nullopt;  // already beyond with every pass disabled
  if (o.mode == BisectMode::Linear) {
    std::optional<std::string> culprit;
    for (std::size_t k = 1; k <= n; ++k) {
      steps.push_back(b.prefix(k));
      if (steps.back().bad && !culprit) culprit = o.passes[k - 1];
    }
    return culprit;
  }
  steps.push_back(b.prefix(n));
  if (!steps.back().bad) return std::nullopt;
  if (o.mode == BisectMode::LeaveOneOut) {
    for (std::size_t i = 0; i < n; ++i) steps.push_back(b.without(i));
    const std::vector<std::string> fixes = leave_one_out_fixes(steps);
    return fixes.size() == 1 ? std::optional<std::string>(fixes[0]) : std::nullopt;
  }
  std::size_t lo = 0, hi = n;  // prefix lo good, hi bad
  while (hi - lo > 1) {
    const std::size_t mid = lo + (hi - lo) / 2;
    steps.push_back(b.prefix(mid));
    (steps.back().bad ? hi : lo) = mid;
  }
  return o.passes[hi - 1];
}

// The verdict of a run that found bad steps: SUSPICIOUS when every bad step is beyond the
// probabilistic bound only (known computation), else UNEXPECTED.
Verdict bad_verdict(const std::vector<BisectStep>& steps) {
  Verdict v = Verdict::Suspicious;  // (with a threshold, every bad step's verdict is UNEXPECTED)
  for (const BisectStep& s : steps)
    if (s.bad && s.verdict.value_or(Verdict::Unexpected) != Verdict::Suspicious) v = Verdict::Unexpected;
  return v;
}

// The notes a reader needs beside the verdict: why it is only SUSPICIOUS, why no pass is
// named, why nothing was tested.
void explain_outcome(BisectResult& r, const ExternalBisectOptions& o, bool base_bad, bool all_zero) {
  // A model's runs have no deterministic bound: SUSPICIOUS there is the band's (output_judge.cpp).
  const bool by_band = std::ranges::any_of(r.steps, [](const BisectStep& s) {
    const auto* m = std::get_if<RunMeasures>(&s.measures);
    return s.bad && m && m->band && m->band->beyond_count > 0;
  });
  if (r.suspicious_only)
    r.setup.probabilistic_only =
        by_band ? "every bad run is within the end-to-end bound and beyond only the calibrated band of honest float32 "
                  "runs: a statistic (false alarm at most 0.001 per run), not a proof; kernels whose sums drift "
                  "systematically (blocked or FMA sums, Winograd) are not in the band's sample: check the named "
                  "layer's folded weights (accuracy-diff " +
                      field("observed") + ")"
                : "every bad run is within its deterministic bound and beyond only the probabilistic one: improbable "
                  "for independent roundings, possible when they are correlated (many equal terms of one sign)";
  const std::vector<std::string> fixes = leave_one_out_fixes(r.steps);
  if (base_bad) r.setup.note = "the output with every pass disabled is already bad: no pass is to blame";
  else if (fixes.size() > 1) {
    r.setup.note = reports::leave_one_out_note(fixes);
    r.setup.candidates = fixes;
  } else if (r.bad && !r.culprit) r.setup.note = reports::several_bad_passes_note();
  if (r.verdict() != Verdict::Mistrusted) return;
  if (all_zero)
    r.setup.mistrusted =
        fmt::format("every {} is 0: a command writing zeros matches it whatever its passes do, so nothing was tested",
                    o.known ? "exact output of the computation" : "reference value");
  else
    r.setup.mistrusted = fmt::format(
        "no output is informative: every exact value rounds to 0 or to an infinity in {}, so "
        "nothing was tested",
        name(o.known ? o.known->dtype : o.dtype));
}

// The search, linear or leave-one-out run, the result as external_bisect returns it.
BisectResult search(const ExternalBisectOptions& o, const command::SignalScope& signals) {
  CommandBisector b(o, signals);
  BisectResult r;
  r.culprit = run_mode(b, o, r.steps);
  const std::vector<BisectStep>& steps = r.steps;
  const bool base_bad = steps[0].bad;
  // Leave-one-out names no pass when no single removal makes a bad pipeline good.
  r.bad = base_bad || r.culprit || (steps.size() > 1 && steps[1].bad && o.mode != BisectMode::Linear);
  r.suspicious_only = r.bad && bad_verdict(steps) == Verdict::Suspicious;
  // Nothing compared is never a pass: against exact values of zeros every output that is
  // zero too would look perfect, whatever the passes did to the computation.
  bool all_zero = true, informative = false;
  if (o.known)
    for (std::size_t i = 0; i < o.known->exact.size() && all_zero; ++i) all_zero = o.known->exact.approx(i).hi == 0;
  else all_zero = std::all_of(o.reference.begin(), o.reference.end(), [](double x) { return x == 0; });
  for (const BisectStep& s : steps) informative = informative || s.informative;
  r.nothing_compared = all_zero || !informative;
  r.setup.external_command = o.command;
  r.setup.passes = o.passes;
  r.setup.reference = o.known ? o.known->source : o.reference_source;
  r.setup.judged_by = o.threshold_ulp ? "threshold" : o.known || o.layer ? "bounds" : "channel units";
  r.setup.dtype = name(o.known ? o.known->dtype : o.dtype);
  r.setup.criterion = b.criterion();
  r.setup.mode = o.mode;
  r.setup.evaluations = b.runs();
  explain_outcome(r, o, base_bad, all_zero);
  return r;
}

}  // namespace

std::string expand_command(const std::string& tmpl, const std::string& enabled, const std::string& disabled,
                           const std::string& out) {
  return command::expand_placeholders(tmpl, {{"{enabled}", enabled}, {"{disabled}", disabled}, {"{out}", out}});
}

void check_pass_names(const std::vector<std::string>& passes) {
  std::set<std::string> seen;
  for (std::size_t k = 0; k < passes.size(); ++k) {
    const std::string& p = passes[k];
    if (p.empty())
      throw InputError(fmt::format(fmt::runtime("bisect: pass name {} of " + field("passes") +
                                                " is empty (two commas, or one at an end)"),
                                   k + 1));
    // {enabled} and {disabled} name passes: a name in both would be both at once.
    if (!seen.insert(p).second)
      throw InputError(fmt::format(fmt::runtime("bisect: pass '{}' is listed twice in " + field("passes")), p));
    bool ok = !p.empty();
    for (std::size_t i = 0; ok && i < p.size(); ++i) ok = pass_char(p[i], i == 0);
    if (!ok)
      throw InputError(
          fmt::format("bisect: pass name '{}' is not an identifier (a letter or '_', then letters, digits, "
                      "'_', '.', ':' or '-')",
                      p));
  }
}

BisectResult external_bisect(const ExternalBisectOptions& o) {
  check_options(o);
  command::SignalScope signals;
  try {
    BisectResult r = search(o, signals);  // its temporary directory is gone when it returns or throws
    signals.throw_if_pending();
    return r;
  } catch (const command::Interrupted& e) {
    command::SignalScope::die_of(e.signo);
  }
}

}  // namespace foldcheck
