#pragma once
// What every function of the C++ core returns to Python: one command's typed result, as the
// versioned JSON its C++ type writes (to_json(), schema reports/schema/foldcheck.schema.json),
// its verdict (computed by the C++ type from typed fields, never read back from the JSON), the
// text renderer of the `foldcheck` command, and the per-element data as named arrays that
// Python reads as numpy views (arrays.hpp view; no copy).
//
// The Python layer (python/foldcheck/results.py) wraps it in one class per command with typed
// properties; this is the one C++ type behind them all.
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/numerics/compare.hpp"

namespace foldcheck::py {

struct NamedArray {
  std::vector<double> data;
  std::vector<std::int64_t> shape;  // row-major extents; empty: 1-D of data.size()
};

struct Result {
  std::string command;
  Verdict verdict = Verdict::Expected;
  nlohmann::json json;
  std::function<std::string(const nlohmann::json&)> text;  // the `foldcheck` command's text report
  std::map<std::string, NamedArray> arrays;

  std::optional<int> exit;  // the command's exit status when not its verdict's (bisect: 1 when a pass is named)

  int exit_code() const { return exit ? *exit : verdict == Verdict::Expected ? 0 : 1; }  // the command's
  std::string report(const std::string& format) const;  // text, json, markdown, html
  // The answer line of the core's renderers (reports/run_answer.hpp): "verdict: " and the
  // headline, the verdict with its reason, for run and accuracy-diff; "" for the others.
  std::string answer() const;
  std::string answer_line() const;  // answer() before its names are neutralised
  void add(const std::string& name, std::vector<double> data, std::vector<std::int64_t> shape = {});
};

// The result of `command` with its JSON and verdict; `text` renders the JSON for people.
Result make_result(const char* command, nlohmann::json json, Verdict verdict,
                   std::function<std::string(const nlohmann::json&)> text);

}  // namespace foldcheck::py
