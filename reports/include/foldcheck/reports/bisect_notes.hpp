#pragma once
// The English of a bisect result that its JSON carries ("note", "criterion"): written here,
// with the rest of foldcheck's wording for people, and put into the result by the bisect
// commands (harness/commands/src/bisect.cpp, external_bisect.cpp, output_judge.cpp).
#include <string>
#include <vector>

namespace foldcheck::reports {

// Several passes each fix the pipeline when removed alone: none is named.
std::string leave_one_out_note(const std::vector<std::string>& fixes);
// No single pass's removal fixes the pipeline.
std::string several_bad_passes_note();
// The criterion of a run judged by a user's threshold.
std::string threshold_criterion(double threshold_ulp);

}  // namespace foldcheck::reports
