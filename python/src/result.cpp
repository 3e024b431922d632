// The Result every core function returns (result.hpp).
#include "result.hpp"

#include "foldcheck/base/errors.hpp"
#include "foldcheck/reports/model_text.hpp"
#include "foldcheck/reports/neutralise.hpp"
#include "foldcheck/reports/run_answer.hpp"
#include "foldcheck/reports/suite_reports.hpp"
#include "foldcheck/reports/summary.hpp"

namespace foldcheck::py {

// Text for people shows names neutralised (reports/neutralise.hpp): the renderer is given the
// result with every string neutralised, the page neutralised again (the pages do both in their
// writers). JSON keeps names exact.
std::string Result::report(const std::string& format) const {
  if (format == "json") return json.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  if (format == "text") return reports::neutralised_page(text(reports::neutralised_strings(json)));
  const bool page = command == "run" || command == "accuracy-diff";  // what the report pages summarize
  if ((format == "markdown" || format == "html") && !page)
    throw InputError("format '" + format + "': a page for run and accuracy_diff results; a " + command +
                     " result has text and json");
  if (format == "markdown") return reports::report_markdown(json);
  if (format == "html") return reports::report_html(json);
  throw InputError("format '" + format + "': expected text, json, markdown or html");
}

std::string Result::answer() const { return reports::neutralised(answer_line()); }

std::string Result::answer_line() const {
  if (command == "run") return "verdict: " + reports::answer_lines(reports::run_answer(json)).headline;
  if (command == "accuracy-diff")
    return "verdict: " + reports::answer_lines(reports::summarize(json).at("answer")).headline;
  if (command == "fold-check") return reports::fold_check_answer(result::views::AdiffFold::from_json(json));
  return "";
}

void Result::add(const std::string& name, std::vector<double> data, std::vector<std::int64_t> shape) {
  if (shape.empty()) shape = {static_cast<std::int64_t>(data.size())};
  arrays[name] = NamedArray{std::move(data), std::move(shape)};
}

Result make_result(const char* command, nlohmann::json json, Verdict verdict,
                   std::function<std::string(const nlohmann::json&)> text) {
  Result r;
  r.command = command;
  r.json = std::move(json);
  r.verdict = verdict;
  r.text = std::move(text);
  return r;
}

}  // namespace foldcheck::py
