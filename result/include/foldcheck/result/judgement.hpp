#pragma once
// The one judgement module. Every verdict foldcheck reports is decided by a policy below: a
// command gathers facts (values beyond a bound, whether anything informative was compared)
// and these policies turn them into verdicts and combine verdicts up the result tree (an
// element comparison, a path, a layer, a run, a suite). Nothing else combines verdicts:
// renderers print the verdicts they are given, and the Python module binds these functions.
//
// What the verdicts mean at each level:
//   a check      (one comparison of values with their bounds: of_check) EXPECTED within every
//                bound; SUSPICIOUS within the deterministic bound but beyond a probabilistic
//                one; UNEXPECTED beyond a deterministic bound; MISTRUSTED when nothing in it
//                could have failed (no informative value) and nothing did.
//   a statistic  (a channel statistic over many elements: of_channels) SUSPICIOUS beyond its
//                stated false-alarm rate; per-element probabilistic excesses are then not
//                evidence (deterministic_only): among N elements about (1 - c) N exceed a
//                bound that holds with confidence c, by design.
//   a layer      (its folded parameters and its outputs: of_layer) a fold beyond its bound is
//                the layer's verdict whatever its outputs show.
//   a node of parts (a run, an engine, a model, a suite: Tally) the worst of its judged parts,
//                evidence before doubt (a part found wrong names the node UNEXPECTED beside one
//                that could not be judged; a part that could not be judged keeps it from
//                passing); a node that judged no part is MISTRUSTED: nothing compared is never a
//                pass.
//   "not compared" a part left out because it compared nothing while its parent judged the same
//                values otherwise (a folded bias that is exactly zero beside its weights:
//                unless_vacuous) does not count; a bisect step that compared nothing is no
//                evidence against a pass (counts_against).
#include <cstdint>
#include <optional>

#include "foldcheck/result/verdict.hpp"

namespace foldcheck {

// The worse of two verdicts in the one order EXPECTED < SUSPICIOUS < MISTRUSTED < UNEXPECTED:
// at a node of independent parts, a part that could not be judged keeps the whole from passing,
// and a part found wrong is the node's answer (evidence before doubt, as in one check: of_check;
// a model with one corrupted layer and one it could not judge is UNEXPECTED, naming the bug).
Verdict worst(Verdict a, Verdict b);

namespace judgement {

// The facts of one check of values against their bounds.
struct CheckFacts {
  bool failed = false;      // a value beyond its deterministic bound, a NaN or a spurious infinity
  bool suspicious = false;  // a value beyond its probabilistic bound (a statistic: of_channels)
  bool informative = true;  // some value could have shown a wrong scale or shift (an exact value
                            // that rounds to a finite non-zero number of the compared type)
};
// Evidence before doubt: a check that failed is UNEXPECTED even when nothing else in it was
// informative (a NaN where the exact value is zero is still wrong), one beyond a probabilistic
// bound SUSPICIOUS; a check with no evidence either way is MISTRUSTED when nothing in it could
// have failed, EXPECTED otherwise.
Verdict of_check(const CheckFacts& f);

// The same rule for a verdict already reached by other means: EXPECTED becomes MISTRUSTED when
// nothing informative was compared; evidence (SUSPICIOUS, UNEXPECTED) stays.
Verdict unless_uninformative(Verdict v, bool informative);

// An element comparison's verdict where a statistic, not single elements, decides SUSPICIOUS
// (engines' layer outputs; foldcheck's own runs of a layer, which are the modelled computation):
// SUSPICIOUS becomes EXPECTED, every other verdict stays.
Verdict deterministic_only(Verdict elements);
// The per-channel statistic (layer/channel_bias.hpp): UNEXPECTED when a channel's mean error is
// beyond its deterministic bound, SUSPICIOUS when beyond its probabilistic one (the statistic's
// stated false-alarm rate), else EXPECTED.
Verdict of_channels(std::int64_t beyond, std::int64_t suspicious);

// A layer, as accuracy-diff, engines and the Python module's check_tflite judge one (the one
// per-layer judge; bisect judges pass prefixes, each step's outputs through counts_against). The
// facts:
//   fold        the folded parameters' verdict, when they were checked (absent: not folded here,
//               or not readable);
//   outputs     the outputs' verdict, when they were compared (elements and channel statistic);
//   doubt       outputs were given but none usable for this layer: MISTRUSTED joins the verdict
//               (it cannot pass), yet nothing was judged by it;
//   input_mismatch  the layer was run on another input than it was given: UNEXPECTED, whatever
//               else (every comparison of it is against the wrong reference).
//   not_the_layer   the engine's layer computes something else than the model's (another stride,
//               dilation, output shape or fused activation, an input nearer another tensor of the
//               model, an output nothing uses): UNEXPECTED, whatever else, as an input mismatch.
//   unmodelled  an op next to the layer that the engine may have folded into it as well (a
//               constant multiply or add), which foldcheck does not model: Surely (its values
//               show it) leaves the layer not judged, MISTRUSTED whatever its comparisons show;
//               Possibly (the values cannot tell) makes MISTRUSTED only a verdict that counts
//               against the layer (its excess may be that op's), and leaves a pass a pass.
// The rule: an input mismatch or another computation is UNEXPECTED; else a layer surely folded
// with an op foldcheck does not model is MISTRUSTED; else a fold beyond its bound is UNEXPECTED
// whatever the outputs show (a corrupted fold is a bug even when the outputs compared nothing:
// UNEXPECTED over MISTRUSTED); otherwise the worst of what was judged and the doubt (a layer that
// judged nothing is MISTRUSTED), made MISTRUSTED when possibly folded with such an op and it
// counts against the layer.
enum class Unmodelled { No, Possibly, Surely };
struct LayerFacts {
  std::optional<Verdict> fold;
  std::optional<Verdict> outputs;
  bool doubt = false;
  bool input_mismatch = false;
  bool not_the_layer = false;
  Unmodelled unmodelled = Unmodelled::No;
};
Verdict of_layer(const LayerFacts& facts);
// The same for a layer whose fold is always judged: of_layer({fold, outputs}).
Verdict of_layer(Verdict fold, std::optional<Verdict> outputs);

// A folded model's outputs end to end (accuracy-diff: its float32 runs, unfused and fused,
// against a float64 run). The facts:
//   layers      the worst of the analysed layers' verdicts on their real inputs (EXPECTED when
//               none was analysed): the end-to-end drift is the composition of every layer's
//               rounding, so it is explained when each layer's is;
//   own_runs_failed  foldcheck's own float32 runs (the modelled computation) are not EXPECTED
//               against the end-to-end bound (--observed-output): the bound it states does not
//               hold, or could not be checked, for the computation it models: UNEXPECTED
//               whatever the layers show;
//   compared_nothing  an output whose reference is all zero or not finite: MISTRUSTED joins.
Verdict of_end_to_end(Verdict layers, bool own_runs_failed, bool compared_nothing);

// Observed engine weights given with a case (run --observed-weights), explained against its
// BatchNorm (explain's verdict): anything but EXPECTED is UNEXPECTED for the run. A weight no
// recipe reproduces is a wrong fold, and weights that test nothing (MISTRUSTED) were given to be
// tested: they are not a pass, and unlike a part left out (unless_vacuous) nothing else judged
// the same values.
Verdict of_observed_weights(Verdict explained);

// A part that compared nothing while its parent judged the same values by other ones (a folded
// bias exactly zero in every channel, beside the folded weights): MISTRUSTED is reported on the
// part and left out of the parent (EXPECTED); any other verdict counts.
Verdict unless_vacuous(Verdict part);
// Whether a verdict is evidence against a pass (a bisect step, a pipeline): SUSPICIOUS or
// UNEXPECTED. A MISTRUSTED comparison compared nothing: no evidence either way.
bool counts_against(Verdict v);

// A regression between two runs of the same check (`compare` of report files): the current
// verdict ranks worse than the baseline's in worst()'s order (a check that found a bug is worse
// than one that could not compare). An absent or unknown verdict (a report without one) ranks
// below EXPECTED.
bool is_regression(std::optional<Verdict> baseline, std::optional<Verdict> current);

// A check of a verdict against the one expected of it (a suite entry): EXPECTED when they are
// the same; MISTRUSTED when it could not be judged where another verdict was expected (its
// verdict MISTRUSTED: doubt, not evidence that the expectation is wrong); UNEXPECTED otherwise
// (a planted bug no longer found, a fold expected right found wrong). A suite is the Tally of
// its entries' such verdicts: one failed only by doubt is MISTRUSTED, not UNEXPECTED.
Verdict of_expectation(Verdict got, Verdict expected);

// A node of parts. add(): a judged part; also(): a verdict that joins the node's but does not
// by itself make the node judged (the end-to-end outputs of an engine run whose layers could not
// be checked; the doubt of a part that was missing). verdict(): the worst of everything added,
// MISTRUSTED when no part was judged.
class Tally {
 public:
  void add(Verdict v);
  void also(Verdict v);
  bool judged() const { return judged_; }
  Verdict verdict() const;

 private:
  Verdict worst_ = Verdict::Expected;
  bool judged_ = false;
};

}  // namespace judgement
}  // namespace foldcheck
