#pragma once
// Terminal renderings of foldcheck's JSON results. Input: the JSON the commands emit
// (the machine format is the source of truth; text is derived from it).
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "foldcheck/result/views/explain.hpp"
#include "foldcheck/result/views/histogram.hpp"
#include "foldcheck/result/views/run.hpp"

namespace foldcheck::reports {

// "  (1.2 s)" from a result's timing block; "" when the block is absent (--no-timing).
std::string seconds_suffix(const nlohmann::json& result);
std::string seconds_suffix(std::optional<double> seconds);
// A signed log2 histogram as mirrored bars: negative errors to the left, positive to the right.
std::string histogram_text(const result::views::Histogram& h, int width = 28);
std::string histogram_text(const nlohmann::json& hist, int bar_width = 28);

// explain_text of the restored result (a distinct name: explain_text is passed as a function
// of the JSON, which an overload set cannot be).
std::string explain_view_text(const result::views::Explain& j);
std::string explain_text(const nlohmann::json& j);

struct RunTextOptions {
  bool all_histograms = false;  // one histogram per path instead of the headline ones
};
std::string run_text(const result::views::Run& r, const RunTextOptions& opts = {});
std::string run_text(const nlohmann::json& result, const RunTextOptions& opts = {});

std::string diagnose_text(const nlohmann::json& result);

std::string accuracy_diff_text(const nlohmann::json& result);
std::string engines_text(const nlohmann::json& result);
std::string bisect_text(const nlohmann::json& result);
std::string quant_check_text(const nlohmann::json& result);

}  // namespace foldcheck::reports
