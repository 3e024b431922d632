#pragma once
// A verdict: what foldcheck concludes of one node of a result (an element comparison, a path,
// a layer, a run, a suite). The four values and their spelling are the JSON schema's
// ("verdict": "EXPECTED" | "SUSPICIOUS" | "UNEXPECTED" | "MISTRUSTED"); how verdicts combine is
// judgement.hpp's, and only judgement.hpp's.
#include <optional>
#include <string>

namespace foldcheck {

// Ordered from best to worst (judgement::worst ranks by this order):
//   EXPECTED    every value within its rounding-error bound: the rounding IEEE arithmetic predicts
//   SUSPICIOUS  within the deterministic bound but beyond the probabilistic one, or a statistic
//               beyond its stated false-alarm rate: possible for a correct computation,
//               improbable under random rounding
//   UNEXPECTED  some value beyond its deterministic bound: a bug (or an arithmetic not modelled)
//   MISTRUSTED  nothing informative was compared (every exact value zero, rounding to zero or to
//               an infinity, no element at all): a pass would be vacuous, so it is never one
enum class Verdict { Expected, Suspicious, Unexpected, Mistrusted };

// The schema's spelling: "EXPECTED", "SUSPICIOUS", "UNEXPECTED", "MISTRUSTED".
const char* name(Verdict v);
// The verdict `name` spells so (absent for any other text). For text a person or a file gives
// (a suite's `expect`, a report file read back), never for a result this program computed:
// those keep their Verdict.
std::optional<Verdict> verdict_named(const std::string& text);

}  // namespace foldcheck
