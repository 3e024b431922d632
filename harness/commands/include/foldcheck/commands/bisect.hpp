#pragma once
// `foldcheck bisect`: which compiler pass makes a drift leave what rounding explains.
//
// Internal (a case file or an ONNX model's pairs, and foldcheck's pass pipeline, passes.hpp): step k evaluates the
// layer after the first k passes in float32 and compares it with the certified reference.
// A step is bad when its outputs leave the bound a correct compiler must meet — the
// deterministic and probabilistic bounds of the lowered program with every operation an
// IEEE one (so a reordering, a fold, an rsqrt-multiply are covered, a fast-math
// approximation or int8 values are not) — or, with --threshold-ulp N, when its max |ULP|
// exceeds N. Step 0 (no pass) is the plain float32 evaluation, within its bound by the
// theorem the bound states, so it is not evaluated: the search evaluates the whole
// pipeline, then bisects prefixes, at most ceil(log2 n) + 1 evaluations for n passes,
// and names the first pass whose prefix is bad (if badness is monotone in the prefix; the
// --linear table shows every step). For the weights, every prefix is lowered (no
// evaluation needed) to name the pass that changed them and whether the change is itself
// a correct fold (fold_check.hpp: within some engine recipe's bound).
//
// External (a command): see ExternalBisectOptions.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/commands/diagnose.hpp"
#include "foldcheck/io/case_file.hpp"
#include "foldcheck/model/known_computation.hpp"
#include "foldcheck/numerics/compare.hpp"

namespace foldcheck {

enum class BisectMode { Search, Linear, LeaveOneOut };

// An element of an external run's output (OutputJudge::element): its exact value beside its
// channel's scale, and, the computation known, sum |x w| and its bounds. Writes {"flat_index",
// "index", "observed", "exact", "channel", "channel_scale"} and each optional field present.
struct BisectElement {
  std::size_t flat_index = 0;
  std::vector<std::int64_t> index;
  double observed = 0, exact = 0;  // observed: NaN or an infinity written as JSON null
  std::size_t channel = 0;
  double channel_scale = 0;
  std::optional<double> ulp, channel_units;                 // a finite observed value only (both or neither)
  std::optional<double> abs_sum;                            // the computation known with its sum |x w|
  std::optional<double> bound, ratio, probabilistic_bound;  // known with bounds, a finite observed value (all or none)
  nlohmann::json to_json() const;
};

// The measures of one step of the built-in pipeline (Bisector::step), over its layers (the
// largest of each figure; the worst layer's ratio). Writes every field but the optional ones
// absent: "pass" with "applied" (and "skipped", the reason, when not applied) from prefix 1 on;
// "worst_layer" when several layers are lowered.
struct PipelineMeasures {
  std::size_t prefix = 0;              // the first `prefix` passes of the step's list
  std::vector<std::string> enabled;    // the passes the first layer's lowering applied
  std::string how;                     // how the lowered program computes
  std::optional<std::string> pass;     // the last pass of the prefix
  std::optional<bool> applied;         // with pass: whether it changed the lowering
  std::optional<std::string> skipped;  // with applied false: why
  double max_abs_ulp = -1, p99_9_abs_ulp = 0, p50_abs_ulp = 0, worst_ratio = 0, probabilistic_worst_ratio = 0;
  std::int64_t beyond_bound = 0;
  std::optional<std::string> worst_layer;
  nlohmann::json to_json() const;
};

// The measures of one run of an external command (CommandBisector::run, OutputJudge): the
// command, its drift statistics, the elements that matter. Writes every field but the
// optional ones absent: "largest_ulp" and "decisive" (none when nothing is scored);
// "bounds_verdict" (a threshold decides, the computation known: the bounds' verdict, for the
// reader); "worst_ratio", "probabilistic_worst_ratio", "beyond_bound", "beyond_probabilistic"
// (the bounds decide); "gross" (a reference only).
struct RunMeasures {
  std::size_t prefix = 0;  // the enabled passes' count
  std::vector<std::string> enabled;
  std::string command;
  double seconds = 0;
  double max_abs_ulp = 0, p99_9_abs_ulp = 0, p50_abs_ulp = 0, rms_ulp = 0;
  std::int64_t nan = 0, inf = 0, worst_index = -1;
  double units_max = 0, units_p99_9 = 0, units_rms = 0;  // "channel_units": {"max", "p99_9", "rms"}
  std::optional<BisectElement> largest_ulp, decisive;
  std::optional<Verdict> bounds_verdict;
  struct Bounds {
    double worst_ratio = 0, probabilistic_worst_ratio = 0;
    std::int64_t beyond_bound = 0, beyond_probabilistic = 0;
  };
  std::optional<Bounds> bounds;
  std::optional<std::int64_t> gross;  // errors as large as the largest |reference|
  std::optional<OutputBand> band;     // a model's output in float32 (KnownComputation::band)
  nlohmann::json to_json() const;
};

// One configuration of a bisect (internal or external): what the search decides from, as
// typed fields, and the measures the result lists (a pipeline step's or a command run's).
struct BisectStep {
  std::variant<PipelineMeasures, RunMeasures> measures;
  bool bad = false;                     // beyond the criterion: the configuration is to blame
  std::optional<Verdict> verdict;       // against the bounds (absent: judged by channel units only)
  bool informative = true;              // some output compared (not every exact value 0 or not finite)
  bool lists_informative = false;       // listed by the external judge (the internal one always compares)
  std::optional<std::string> disabled;  // leave-one-out: the pass left out
  bool lists_disabled = false;          // internal leave-one-out's step with none left out: "disabled": null
  nlohmann::json to_json() const;       // the measures with the fields above
};
// The steps as the result lists them.
nlohmann::json steps_json(const std::vector<BisectStep>& steps);

// A built-in pass's change to the conv weights (Bisector::weights; passes that change none
// are not listed). "fold_verdict" null when the weights it left are not a fold (not checked);
// when checked, "closest_recipe", "fold_worst_ratio", "max_abs_ulp_vs_exact_fold" (and
// "worst_layer" with several layers) of the layer closest to its bound. "layers_changed"
// with several layers.
struct BisectWeightChange {
  std::string pass;
  std::int64_t changed = 0;  // weights changed against the previous prefix's
  double max_change_ppm = 0, max_drift_ppm_vs_original = 0;
  std::optional<std::int64_t> layers_changed;
  std::optional<Verdict> fold_verdict;  // the worst layer's fold check
  std::string closest_recipe;
  double fold_worst_ratio = 0, max_abs_ulp_vs_exact_fold = 0;
  std::optional<std::string> worst_layer;
  nlohmann::json to_json() const;
};

// What was bisected and how, internal or external (the result's envelope and head): always
// "passes", "mode", "criterion", "dtype", "evaluations"; the notes when set; internal:
// "weights" and either "case" or "model" with "input"; external: "external_command",
// "reference", "judged_by".
struct BisectSetup {
  std::vector<std::string> passes;
  BisectMode mode = BisectMode::Search;
  std::string criterion, dtype;
  std::size_t evaluations = 0;
  std::optional<std::string> note;                         // why no pass is named (or why several could be)
  std::optional<std::vector<std::string>> candidates;      // leave-one-out, several passes each fix it alone
  std::optional<std::vector<BisectWeightChange>> weights;  // internal
  struct Case {
    std::string name, path;
    std::uint64_t seed = 0;
  };
  std::optional<Case> case_;  // internal on a case file
  struct Model {
    std::string path;
    std::size_t pairs = 0;
    std::vector<std::string> not_lowered;
  };
  std::optional<Model> model;                                         // internal on a model
  std::optional<std::string> input;                                   // with model: its .npy or the seeded input
  std::optional<std::string> external_command, reference, judged_by;  // external
  std::optional<std::string> probabilistic_only, mistrusted;          // external notes
  nlohmann::json to_json() const;                                     // with the result envelope
};

// The result of a bisect (internal or external), schema "bisect".
struct BisectResult {
  BisectSetup setup;                   // what was bisected and how
  std::vector<BisectStep> steps;       // every configuration run, in order
  std::optional<std::string> culprit;  // the pass to blame (internal --linear: "(none: the layer itself)" when
                                       // the plain evaluation is already bad)
  bool bad = false;                    // something is beyond the criterion: the whole pipeline (search,
                                       // leave-one-out), some prefix (linear), or, external, already the
                                       // configuration with every pass disabled
  bool suspicious_only = false;   // every bad step is beyond only the probabilistic bound (external, known computation)
  bool nothing_compared = false;  // no step compared anything informative (every exact value 0 or not finite)
  // UNEXPECTED when bad (SUSPICIOUS when suspicious_only); otherwise MISTRUSTED when nothing
  // was compared (nothing compared is never a pass), else EXPECTED.
  Verdict verdict() const;
  bool clean() const { return !culprit && verdict() == Verdict::Expected; }  // no pass to blame, nothing wrong
  nlohmann::json to_json() const;  // the setup with the culprit, steps and verdict
};

struct BisectOptions {
  std::vector<std::string> passes;
  BisectMode mode = BisectMode::Search;
  std::optional<double> threshold_ulp;
  std::optional<DType> dtype;  // default: the case's first dtype
  double confidence = 0.999;
  ref::Options ref;
  std::function<void(const std::string&)> progress;
};

// The result's JSON: "culprit" (a pass name or null), "steps" (each evaluation: "prefix", "enabled"
// passes, "pass", "applied" or "skipped", "how", drift statistics, "verdict", "bad"),
// "evaluations", "weights" (per pass: did it change the conv weights, drift vs the
// original in ppm, and the fold check's verdict), "note" and "candidates" (leave-one-out,
// when several passes each fix the pipeline alone), "verdict" (BisectResult::verdict).
BisectResult bisect_case(const CaseSpec& spec, const BisectOptions& opts);

// The same over every Conv/Gemm/MatMul -> BatchNormalization pair of an ONNX model, each on
// its real input from a float32 run on `input` (or a seeded standard-normal input): a step
// is bad when any layer is (the step names the worst layer); the pipeline lowers every
// pair the same way. The model's other ops are not lowered.
BisectResult bisect_model(const std::string& path, const std::optional<std::string>& input, std::uint64_t seed,
                          const BisectOptions& opts);

// External: runs `command` (through /bin/sh, in the caller's working directory) once per
// configuration, expanded by expand_command: {enabled} and {disabled} the comma-separated
// pass names, {out} a .npy path in a fresh temporary directory under $TMPDIR that the
// command must write; compares the output with the exact outputs. Configurations: all
// passes disabled first (the baseline), then, searching, all enabled and prefixes
// bisected (configuration k enables passes[0..k)); linear, every prefix; leave-one-out,
// all enabled and each pass disabled in turn (the culprit: the one pass whose removal
// alone makes the pipeline good; see leave_one_out_fixes). How a run is judged (output_judge.hpp): with the computation
// known, against the bounds every correct compilation of it meets; with a reference
// only, by its errors in units of each channel's largest value, against twice the
// baseline's; with threshold_ulp, by max |ULP|. Verdict MISTRUSTED (not EXPECTED) when no
// pass is named but every exact value is 0.
// Each run is its own process group with stdin and stdout /dev/null; its stderr is kept
// to the last 64 KiB (the end shown when it fails). The group and every process the
// command left (also those that called setsid: foldcheck is their subreaper) are ended
// after each run, on a timeout, an error, and on SIGINT/SIGTERM/SIGHUP/SIGQUIT; on such a signal
// the temporary directory is removed and foldcheck then ends by that signal.
// InputError for: no passes, a pass name that is not an identifier (check_pass_names), no
// {out} in the command, a timeout that is not finite and > 0, a threshold that is not
// finite and >= 0, an empty reference or one with NaN or Inf; and for a failing, timed-out
// or malformed run.
struct ExternalBisectOptions {
  std::string command;
  std::vector<std::string> passes;
  // The computation, when known (its exact outputs and bounds); else the reference below.
  std::optional<KnownComputation> known;
  std::vector<double> reference;  // the exact (or float64) outputs
  std::vector<std::int64_t> reference_shape;
  std::string reference_source;  // for the report
  DType dtype = DType::Float32;  // ULP unit of the outputs (known: its dtype)
  std::optional<double> threshold_ulp;
  double timeout_seconds = 600;
  BisectMode mode = BisectMode::Search;
  std::function<void(const std::string&)> progress;
  // The layer judged as `diagnose` judges it (a conv without BatchNorm, or an arithmetic or
  // algorithm other than float32 / direct): each run's output is its `observed` (shape and
  // dtype as given there), bad when diagnose's verdict counts against it; `reference` holds
  // the layer's exact output (diagnose_exact_output) for the statistics.
  std::optional<DiagnoseInput> layer;
};
BisectResult external_bisect(const ExternalBisectOptions& opts);

// Leave-one-out (internal and external): the passes whose removal alone made a bad pipeline
// good, from the steps' "disabled" and "bad". The culprit is that pass when there is
// exactly one; several mean the passes interact (a bug that shows only with an earlier
// pass enabled is fixed by removing either), and none is named, with a note
// (reports/bisect_notes.hpp).
std::vector<std::string> leave_one_out_fixes(const std::vector<BisectStep>& steps);

// The command of one run: one left-to-right scan of `tmpl`; each {enabled}, {disabled} and
// {out} becomes its value as one single-quoted shell word; everything else, other {...}
// included (shell brace expansion, ${VAR}), is copied as it is. Substituted text is never
// scanned again, so a value holding "{out}" stays that text. Write the placeholders outside
// quotes: inside '...' or "..." the value's own quotes would end the template's.
std::string expand_command(const std::string& tmpl, const std::string& enabled, const std::string& disabled,
                           const std::string& out);

// Throws InputError naming the first pass name that is not an identifier: a letter or '_',
// then letters, digits, '_', '.', ':' or '-' (TVM FoldScaleAxis, LLVM loop-unroll, MLIR
// canonicalize, onnxoptimizer fuse_bn_into_conv). Refused: empty names, spaces,
// braces, quotes and every shell metacharacter.
void check_pass_names(const std::vector<std::string>& passes);

}  // namespace foldcheck
