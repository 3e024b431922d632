// The English of a bisect result (bisect_notes.hpp).
#include "foldcheck/reports/bisect_notes.hpp"

#include <fmt/format.h>

namespace foldcheck::reports {

std::string leave_one_out_note(const std::vector<std::string>& fixes) {
  std::string names;
  for (const std::string& f : fixes) names += (names.empty() ? "" : ", ") + f;
  return fmt::format("removing any one of {} makes the pipeline good: the passes interact (a bug may show only with an "
                     "earlier pass enabled), so none is named; the search or --linear names the first bad prefix",
                     names);
}

std::string several_bad_passes_note() {
  return "no single pass's removal makes the pipeline good: more than one pass is bad (--linear shows each prefix)";
}

std::string threshold_criterion(double threshold_ulp) {
  return fmt::format("max |ULP| > {:g} (--threshold-ulp), or a NaN or an infinity", threshold_ulp);
}

}  // namespace foldcheck::reports
