#pragma once
// The English of a `diagnose` result ("summary"): written here with the rest of foldcheck's
// wording for people, from the facts the harness found (foldcheck/commands/diagnose.hpp), and
// put into the result by its to_json.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace foldcheck::reports {

// An exact value past the dtype's range: overflow, which no rounding bound covers.
struct DiagnoseOverflow {
  std::size_t element = 0;
  std::string what;              // "conv output" or "output"
  std::optional<double> value;   // none: beyond the double range
  std::string dtype;
};

// A 16-bit layer whose observed output has non-finite values where the layer's are finite, and
// a channel whose multiplier gamma / sqrt(var + eps) is past the dtype's range: a fold computed
// in that dtype's arithmetic makes the channel's weights infinite (explain names the same).
struct NarrowMultiplier {
  std::int64_t channel = 0;
  double multiplier = 0, max_finite = 0;
  std::string dtype;
};

// The element of max |ULP| of the layer as given: its bound there in ULP, and how far its sum
// cancelled (|a| sum|x w| / |y|): a large |ULP| at a cancelled output is rounding.
struct MaxUlpElement {
  std::size_t element = 0;
  double bound_ulp = 0, cancellation = 0;
};

// The calibrated band beside the bound (commands/diagnose.hpp's DiagnoseBand): the worst
// channel's common relative change rho and its band, how many channels are beyond theirs, and
// the widest band (a one-channel change beyond it would have been seen).
struct BandFacts {
  std::int64_t tested = 0, beyond = 0;
  std::int64_t worst_channel = 0;
  double worst_rho_ppm = 0, worst_band_ppm = 0, floor_ppm = 0, alpha = 0;
  std::size_t samples = 0;
};

struct DiagnoseFacts {
  std::optional<DiagnoseOverflow> overflow;
  std::optional<NarrowMultiplier> narrow_multiplier;
  bool vacuous = false;          // the layer as given is zero everywhere: nothing compared
  bool expected = false;         // the layer as given explains the observation
  double max_ratio = 0, max_abs_ulp = 0;  // the layer as given: worst ratio to its bound, max |ULP|
  std::optional<MaxUlpElement> max_ulp;
  // A declared arithmetic other than float32: its name, the replay the verdict used, and the
  // general bound's worst ratio (any conversion keeping the operand format's bits).
  std::string arithmetic, replay;
  std::string algorithm;  // a declared algorithm other than direct ("winograd4", "split-k:8")
  std::optional<double> general_ratio;
  std::optional<std::string> no_bound;  // the declared arithmetic has no bound: nothing judged
  bool general_only = false;            // only the general bound applied (too wide to pass anything)
  // The first element observed NaN or infinite where the layer's value is finite, or NaN or of
  // the other sign where only it overflows (max_ratio is then infinite), and that value.
  std::optional<std::pair<std::size_t, double>> nonfinite;
  std::optional<std::size_t> worst_element;  // the element of max_ratio (finite)
  std::size_t hypotheses = 0;
  std::string closest, closest_description;  // the best-fitting hypothesis ("" for none)
  bool closest_explains = false;
  // The closest is a hypothesis whose bound is too wide to identify a cause (fp16 accumulation)
  // and covers the observation: said, not offered as the explanation.
  bool closest_loose = false;
  std::optional<BandFacts> band;  // none: not computed
};

std::string overflow_reason(const DiagnoseOverflow& o);
std::string diagnose_summary(const DiagnoseFacts& f);

}  // namespace foldcheck::reports
